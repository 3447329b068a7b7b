"""A batch's lineage change set and the ``downstream_intact`` check, as a person sees them.

Events go in through the receiver (a Starlette TestClient on the real app), batches are synced
by ``headless.sync_batches`` on a test Dagster instance into the embedded catalog (real SQLite),
and what a person reads is checked: the ``catalog_upload`` page's table, the check's result and
severity, and ``ol-dagster changes --json``.

Two definitions share the catalog ``main``: ``snap`` (namespaces etl, features) syncs the dbt-like
model ``etl.orders_model`` and others; ``add`` (namespace ``reports``) syncs
``reports.revenue``, which reads the model's columns.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml
from starlette.testclient import TestClient

from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.changes.changeset import ChangeSet, dataset_change, job_changes, neighbourhood
from ol_dagster.commands.cli import main
from ol_dagster.commands.headless import sync_batches
from ol_dagster.receiver.app import create_app
from ol_dagster.settings import load_settings
from ol_dagster.store import EventStore
from ol_dagster.sync.batch import CleanupOverrides, cleanup_batch, upload_batch
from ol_dagster.sync.graph import batch_graph
from ol_dagster_tests.commands.test_newcomer_commands import cli
from ol_dagster_tests.conftest import settings_data
from ol_dagster_tests.safety.test_cleanup_rules import (
    WH,
    Harness,
    definition,
    ds,
    job,
    job_event,
    other_definition,
)

MODEL = (WH, "model.orders")
UPLOAD = dg.AssetKey(["snap", "catalog_upload"])


def orders_model(columns: dict[str, str], sql: str) -> dict[str, Any]:
    """``etl.orders_model``: raw.orders -> model.orders, each output column from one raw one."""
    lineage = {out: [(WH, "raw.orders", src)] for out, src in columns.items()}
    return job(
        "etl",
        "orders_model",
        [ds(WH, "raw.orders", ["id", "amount_raw"])],
        [ds(*MODEL, sorted(columns), lineage=lineage)],
        sql=sql,
    )


def revenue() -> dict[str, Any]:
    """``reports.revenue`` (definition ``add``): its columns read model.orders' id and
    order_amount."""
    lineage = {"order_id": [(*MODEL, "id")], "total": [(*MODEL, "order_amount")]}
    out = ds(WH, "mart.revenue", ["order_id", "total"], lineage=lineage)
    return job("reports", "revenue", [ds(*MODEL)], [out])


def simple(name: str) -> dict[str, Any]:
    return job("etl", name, [ds(WH, f"raw.{name}")], [ds(WH, f"model.{name}")])


FIRST = {"id": "id", "order_amount": "amount_raw"}
RENAMED = {"id": "id", "amount": "amount_raw"}  # order_amount renamed amount
NO_ID = {"amount": "amount_raw"}


class Env:
    def __init__(self, tmp_path: Path, tokens: dict[str, str], instance: dg.DagsterInstance):
        data = settings_data(tmp_path)
        data["definitions"][1].update(catalog="main", allowedJobNamespaces=["reports"])
        self.data = data
        self.path = tmp_path / "ol_dagster.yaml"
        self.write()
        self.store = EventStore(load_settings(self.path).store.url)
        self.client = TestClient(create_app(load_settings(self.path), self.store))
        self.tokens = tokens
        self.instance = instance

    def write(self, **snap: Any) -> None:
        self.data["definitions"][0].update(snap)
        self.path.write_text(yaml.safe_dump(self.data))

    def sync(self, definition: str, *events: dict[str, Any]) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.tokens[definition]}"}
        answer = self.client.post("/api/v1/lineage/batch", json={"events": events}, headers=headers)
        assert answer.status_code == 200, answer.text
        (line,) = sync_batches(str(self.path), definition=definition, instance=self.instance)
        assert line["status"] == "synced", line
        return line

    def check(self) -> dg.AssetCheckEvaluation:
        record = self.instance.get_latest_asset_check_evaluation_record(
            dg.AssetCheckKey(UPLOAD, "downstream_intact")
        )
        assert record is not None and record.event is not None
        evaluation = record.event.dagster_event.event_specific_data  # type: ignore[union-attr]
        assert isinstance(evaluation, dg.AssetCheckEvaluation)
        return evaluation

    def page(self, key: str = "changes") -> str:
        event = self.instance.get_latest_materialization_event(UPLOAD)
        assert event is not None and event.asset_materialization is not None
        return str(event.asset_materialization.metadata[key].value)

    def picture(self) -> str:
        """The SVG drawn on the latest ``catalog_upload`` page, out of its Markdown image."""
        markdown = self.page("changePicture")
        assert markdown.startswith("![") and "](data:image/svg+xml;base64," in markdown
        return base64.b64decode(markdown.split("base64,", 1)[1].rstrip(")")).decode()

    def changes(self, *args: str, capsys: pytest.CaptureFixture[str] | None = None) -> Any:
        """``ol-dagster changes --definition snap --json ARGS``: in a process of its own, or
        in this one (``capsys``: the same command, without a second start-up)."""
        argv = ["--settings", str(self.path), "changes", "--definition", "snap", "--json", *args]
        if capsys is None:
            proc = cli(*argv)
            assert proc.returncode == 0, proc.stderr
            return json.loads(proc.stdout)
        capsys.readouterr()
        assert main(argv) == 0
        return json.loads(capsys.readouterr().out)


@pytest.fixture
def env(tmp_path: Path, tokens: dict[str, str]) -> Iterator[Env]:
    home = tmp_path / "dagster_home"
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        made = Env(tmp_path, tokens, instance)
        yield made
        made.store.dispose()


def _items(change_set: dict[str, Any], kind: str, change: str) -> list[dict[str, Any]]:
    return [i for i in change_set["items"] if i["kind"] == kind and i["change"] == change]


def _names(items: list[dict[str, Any]]) -> set[str]:
    return {f"{i['namespace']}.{i['name']}" for i in items}


def test_a_batch_shows_what_it_added_removed_and_changed_and_what_it_breaks_downstream(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    sql = "select id, amount_raw as order_amount from raw.orders"
    env.sync("snap", orders_model(FIRST, sql), simple("old_job"))
    env.sync("add", revenue())
    assert env.check().passed

    renamed_sql = "select id, amount_raw as amount from raw.orders"
    line = env.sync("snap", orders_model(RENAMED, renamed_sql), simple("new_job"))
    assert line["cleanup"]["removedJobs"] == ["etl.old_job"]
    assert line["checks"]["downstream_intact"] is False  # a warning: the sync went on

    changes = env.changes("--batch", str(line["batchId"]))
    # a program reading the command's output gets the same JSON without asking for it
    piped = cli("--settings", str(env.path), "changes", "--definition", "snap")
    assert piped.returncode == 0 and json.loads(piped.stdout) == changes, piped.stderr
    assert changes["definition"] == "snap" and changes["batch"] == line["batchId"]
    assert _names(_items(changes, "job", "added")) == {"etl.new_job"}
    assert _names(_items(changes, "job", "removed")) == {"etl.old_job"}
    (model,) = _items(changes, "job", "changed")
    assert (model["name"], model["sqlChanged"]) == ("orders_model", True)
    assert (model["fieldFlowsAdded"], model["fieldFlowsRemoved"]) == (1, 1)
    (dataset,) = _items(changes, "dataset", "changed")
    assert dataset["name"] == "model.orders"
    assert (dataset["fieldsAdded"], dataset["fieldsRemoved"]) == (["amount"], ["order_amount"])
    (gone,) = _items(changes, "fieldFlow", "removed")
    assert gone["source"]["field"] == "amount_raw" and gone["target"]["field"] == "order_amount"
    assert [f["target"]["field"] for f in _items(changes, "fieldFlow", "added")] == ["amount"]
    flows = {(f["change"], f["job"]["name"]) for f in changes["items"] if f["kind"] == "dataFlow"}
    assert flows == {("added", "new_job"), ("removed", "old_job")}
    assert changes["counts"]["job"] == {"added": 1, "removed": 1, "changed": 1}
    # the downstream column that read order_amount, in the other definition, is named
    assert changes["impacted"] == [
        {
            "definition": "add",
            "job": {"namespace": "reports", "name": "revenue"},
            "dataset": {"namespace": WH, "name": "mart.revenue"},
            "column": "total",
            "reads": {"namespace": WH, "name": "model.orders", "field": "order_amount"},
        }
    ]
    check = env.check()
    assert (check.passed, check.severity) == (False, dg.AssetCheckSeverity.WARN)
    assert "reports:revenue → postgres://db:5432:mart.revenue.total" in (check.description or "")
    page = env.page()
    assert "etl:new_job" in page and "SQL edited" in page and "fields +amount" in page
    # the picture: the added job green, the removed one red, the edited model amber
    svg = env.picture()
    drawn = {
        "new_job": "added",
        "old_job": "removed",
        "orders_model": "changed",
        "revenue": "context",
    }
    for label, state in drawn.items():
        assert f"<title>job {label} ({state})</title>" in svg, label
    assert "<title>dataset model.orders (changed)</title>" in svg

    # the same, as lines a person reads
    capsys.readouterr()
    assert main(["--settings", str(env.path), "changes", "--definition", "snap", "--text"]) == 0
    lines = capsys.readouterr().out
    assert "changed  job       etl:orders_model  (SQL edited; column flows +1 −1)" in lines
    assert (
        "impacted: job reports:revenue (add) writes postgres://db:5432:mart.revenue.total" in lines
    )

    # by the definition's setting, an error; the column id that order_id reads goes
    env.write(changes={"downstreamIntact": "ERROR"})
    line = env.sync("snap", orders_model(NO_ID, renamed_sql), simple("new_job"))
    check = env.check()
    assert (check.passed, check.severity) == (False, dg.AssetCheckSeverity.ERROR)
    assert "mart.revenue.order_id" in (check.description or "")
    # without --batch: the newest batch with a change set
    assert [i["column"] for i in env.changes(capsys=capsys)["impacted"]] == ["order_id"]

    # the same lineage again: nothing changed, nothing broken
    line = env.sync("snap", orders_model(NO_ID, renamed_sql), simple("new_job"))
    assert line["checks"]["downstream_intact"] is True
    again = env.changes("--batch", str(line["batchId"]), capsys=capsys)
    assert again["items"] == [] and again["impacted"] == []
    assert all(n == 0 for kind in again["counts"].values() for n in kind.values())
    assert "no change" in env.page()


def test_a_job_change_gives_its_flows_and_what_changed() -> None:
    before = {
        "inputs": [["db", "a"]],
        "outputs": [["db", "b"]],
        "dataFlows": [[["db", "a"], ["db", "b"]]],
        "fieldFlows": [],
        "sql": "select 1",
    }
    after = {**before, "inputs": [["db", "c"]], "dataFlows": [[["db", "c"], ["db", "b"]]]}
    items = job_changes(("etl", "j"), before, after)
    renamed = dataset_change(("db", "b"), {"fields": ["x", "k"]}, {"fields": ["y", "k"]})
    assert renamed == {
        "kind": "dataset",
        "change": "changed",
        "namespace": "db",
        "name": "b",
        "fieldsAdded": ["y"],
        "fieldsRemoved": ["x"],
    }
    assert dataset_change(("db", "b"), {"fields": ["x"]}, {"fields": None}) is None  # unknown
    change_set = ChangeSet.of("d", 1, "main", [*items, renamed])
    (job_item,) = [i for i in change_set.items if i["kind"] == "job"]
    assert job_item["change"] == "changed" and "sqlChanged" not in job_item
    assert job_item["inputsAdded"] == [{"namespace": "db", "name": "c"}]
    assert job_item["inputsRemoved"] == [{"namespace": "db", "name": "a"}]
    assert change_set.counts["dataFlow"] == {"added": 1, "removed": 1, "changed": 0}
    assert ChangeSet.from_dict(change_set.as_dict()) == change_set

    # the picture's nodes: the changed objects, their flows' ends, and a reader of the changed
    # dataset one hop away (not what that reader writes: two hops)
    reader = {"inputs": [["db", "b"]], "outputs": [["db", "z"]]}
    nodes, edges = neighbourhood(change_set, [(("etl", "r"), reader)])
    states = {n[0]: n[3] for n in nodes}
    assert states == {
        "job:etl:j": "changed",
        "dataset:db:a": "context",
        "dataset:db:b": "changed",
        "dataset:db:c": "context",
        "job:etl:r": "context",
    }
    assert ("dataset:db:c", "job:etl:j", "added") in edges
    assert ("dataset:db:a", "job:etl:j", "removed") in edges
    assert ("job:etl:j", "dataset:db:b", "context") in edges  # its output stays
    assert ("dataset:db:b", "job:etl:r", "context") in edges
    assert all(n[2] in ("job", "dataset") for n in nodes)


def _latest_change_set(h: Harness) -> dict[str, Any]:
    """The change set of the last batch of ``snap`` that recorded one on the main catalog."""
    batch = h.store.latest_change_batch("snap", "main")
    assert batch is not None
    doc = h.store.change_set(batch, "main")
    assert doc is not None
    return doc


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    """The upload and the cleanup without Dagster, on SQLite (``test_cleanup_rules.Harness``)."""
    catalog = EmbeddedCatalog(f"sqlite:///{tmp_path / 'catalog.db'}")
    store = EventStore(f"sqlite:///{tmp_path / 'store.db'}")
    yield Harness(catalog, store)
    store.dispose()
    catalog.close()


def test_an_additive_run_adds_to_a_job_and_only_its_whole_description_removes(h: Harness) -> None:
    """An ADDITIVE definition's runs add to their job's lineage (the catalog keeps what earlier
    runs said): a run that reads another table is a job with one more input, nothing removed.
    A JobEvent describes the job whole: what it no longer names is removed."""
    d = definition(snapshotMode="ADDITIVE", allowedJobNamespaces=["etl"])
    orders, customers, out = ds(WH, "orders"), ds(WH, "customers"), ds(WH, "report")

    def change_set() -> dict[str, Any]:
        return _latest_change_set(h)

    h.sync(d, [job("etl", "report", [orders], [out])])
    h.sync(d, [job("etl", "report", [customers], [out])])
    (changed,) = _items(change_set(), "job", "changed")
    assert changed["inputsAdded"] == [{"namespace": WH, "name": "customers"}]
    assert "inputsRemoved" not in changed
    assert _items(change_set(), "dataFlow", "removed") == []

    h.sync(d, [job("etl", "report", [orders], [out])])  # nothing new: no change
    assert change_set()["items"] == []

    h.sync(d, [job_event("etl", "report", [customers], [out])])
    (changed,) = _items(change_set(), "job", "changed")
    assert changed["inputsRemoved"] == [{"namespace": WH, "name": "orders"}]
    assert [f["source"]["name"] for f in _items(change_set(), "dataFlow", "removed")] == ["orders"]


def test_a_job_a_snapshot_drops_is_seen_from_the_upload_and_stays_when_a_guard_keeps_it(
    h: Harness,
) -> None:
    """A snapshot that no longer describes a job: its upload already lists the job as removed
    and names the reader of the table only it wrote (another definition's job), so the check
    sees it; the cleanup, stopped by its cap, keeps the job: the change set no longer lists it."""
    snap, other = (
        definition(),
        other_definition(snapshotMode="ADDITIVE", allowedJobNamespaces=["bi"]),
    )
    feed = job("etl", "feed", [ds(WH, "src")], [ds(WH, "feed_table")])
    keep = job("etl", "keep", [ds(WH, "a")], [ds(WH, "b")])
    h.sync(snap, [feed, keep])
    h.sync(other, [job("bi", "dash", [ds(WH, "feed_table")], [ds(WH, "dash_table")])])

    batch = h.receive(snap, [keep])
    batch_graph(h.store, snap, h.store.get_batch(batch))
    done = upload_batch(h.store, h.catalog, snap, batch, run_id="r1")
    assert done.changes is not None
    assert _names(_items(done.changes.as_dict(), "job", "removed")) == {"etl.feed"}
    assert [(i["definition"], i["job"]["name"]) for i in done.changes.impacted] == [
        ("other", "dash")
    ]

    report = cleanup_batch(
        h.store, h.catalog, snap, batch, run_id="r1", overrides=CleanupOverrides(0)
    )
    assert report["skippedReason"] == "REMOVAL_CAP_EXCEEDED"
    after = h.store.change_set(batch, "main")
    assert after is not None and after["items"] == [] and after["impacted"] == []


def test_a_snapshot_lists_the_column_flows_of_the_one_job_it_changed(h: Harness) -> None:
    """Of two jobs a snapshot repeats, one now feeds a column from another one: the change set
    lists that job's column flows, added and removed, and nothing of the other job; the same
    snapshot again changes nothing."""
    d = definition()
    raw = ds(WH, "raw.orders", ["id", "amount_raw"])
    other = simple("customers")

    def model(source: str) -> dict[str, Any]:
        out = ds(*MODEL, ["id", "amount"], lineage={"amount": [(WH, "raw.orders", source)]})
        return job("etl", "orders_model", [raw], [out])

    def change_set() -> dict[str, Any]:
        return _latest_change_set(h)

    h.sync(d, [model("amount_raw"), other])
    h.sync(d, [model("id"), other])
    items = change_set()["items"]
    assert {(i["kind"], i["change"], i["job"]["name"]) for i in items if "job" in i} == {
        ("fieldFlow", "added", "orders_model"),
        ("fieldFlow", "removed", "orders_model"),
    }
    (added,) = _items(change_set(), "fieldFlow", "added")
    assert added["source"]["field"] == "id"
    h.sync(d, [model("id"), other])
    assert change_set()["items"] == []


def test_a_night_of_the_same_content_records_no_change_and_a_part_written_since_is_seen(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot whose every job and dataset has the content whose parts were recorded last
    night, with nothing written to the parts since, records an empty change set without reading
    every part. Any write of the parts between (here: the day-based cleanup forgetting
    ``etl.a``'s part, as it does for a job it removed) is seen: the next night compares again,
    and ``etl.a`` is added back. An edited night is compared whole, and its content is the one
    the next night's is told by."""
    from ol_dagster.sync import changes

    d = definition()
    read_whole: list[str] = []
    every = h.store.all_part_digests

    def spied(definition: str, catalog: str) -> dict[str, dict[str, str]]:
        read_whole.append(definition)
        return every(definition, catalog)

    monkeypatch.setattr(h.store, "all_part_digests", spied)
    night = [simple("a"), simple("b")]
    h.sync(d, night)
    assert _names(_items(_latest_change_set(h), "job", "added")) == {"etl.a", "etl.b"}
    assert len(read_whole) == 1

    h.sync(d, night)
    assert _latest_change_set(h)["items"] == [] and len(read_whole) == 1

    assert changes.forget_jobs(h.store, d, "main", ["etl.a"]) == 1
    h.sync(d, night)
    assert _names(_items(_latest_change_set(h), "job", "added")) == {"etl.a"}
    assert len(read_whole) == 2

    edited = [simple("a"), job("etl", "b", [ds(WH, "raw.b"), ds(WH, "raw.c")], [ds(WH, "model.b")])]
    h.sync(d, edited)
    (changed,) = _items(_latest_change_set(h), "job", "changed")
    assert changed["inputsAdded"] == [{"namespace": WH, "name": "raw.c"}]
    assert len(read_whole) == 3
    h.sync(d, edited)
    assert _latest_change_set(h)["items"] == [] and len(read_whole) == 3

    def with_columns(*columns: str) -> list[dict[str, Any]]:
        return [job("etl", "a", [ds(WH, "raw.a")], [ds(WH, "model.a", list(columns))]), edited[1]]

    h.sync(d, with_columns("id"))
    h.sync(d, with_columns("id", "v"))  # the jobs' content as it was: a dataset's is not
    (changed,) = _items(_latest_change_set(h), "dataset", "changed")
    assert changed["name"] == "model.a" and changed["fieldsAdded"] == ["v"]
