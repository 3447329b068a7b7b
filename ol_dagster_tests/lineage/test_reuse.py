"""Normalize only what changed: a nightly snapshot that repeats the last one reuses its jobs.

Each test feeds the same nights of dbt-like snapshots (START and COMPLETE per model, SQL, schema,
column lineage, documentation, parent jobs, statistics and quality results) to two stores, each
syncing to its own embedded catalog: one as it runs, and one whose events carry no content
digest (as events stored before an upgrade: every job normalized, as before). The catalogs must
hold the same thing after every night, run facts included; that comparison is the oracle. The
sync's own count of normalized and reused jobs (``lineage_graph``'s ``normalize`` metadata) says
what was saved.
"""

from __future__ import annotations

import copy
import logging
import random
import struct
import time
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import select, text, update

from ol_dagster.catalog.embedded import memo
from ol_dagster.catalog.embedded import tables as t
from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.lineage.packed import unpack
from ol_dagster.openlineage.run_facts import content_digest
from ol_dagster.receiver.intake import sort_events
from ol_dagster.settings import SyncDefinition
from ol_dagster.store import EventStore
from ol_dagster.store import schema as store_schema
from ol_dagster.sync.batch import cleanup_batch, upload_batch
from ol_dagster.sync.graph import batch_graph, lineage_digest
from ol_dagster_tests.safety.test_cleanup_rules import PRODUCER, SPEC, WH, definition

NS = "etl"


# -- a dbt-like project, night after night ---------------------------------------------------------


@dataclass
class Model:
    """What a model's events say about the lineage (its run facts are drawn each night)."""

    name: str
    sql: str
    reads: list[str]  # upstream tables (``src_*`` or another model's)
    columns: list[str]
    doc: str = ""
    schema: bool = True  # False: its table is known only from column lineage (no schema facet)
    # the columns it describes each table it reads with (default: id and v); a model that runs
    # later describes the table last: the dataset then has these columns
    read_as: dict[str, list[str]] = field(default_factory=dict)


def project(n: int = 6) -> list[Model]:
    models = [
        Model(
            f"m{i}", f"select * from t{i}", [f"src{i}"] + ([f"m{i - 1}"] if i else []), ["id", "v"]
        )
        for i in range(n)
    ]
    models[2].schema = False
    models[3].doc = "the third model"
    return models


def _table(name: str, columns: list[str] | None, **facets: Any) -> dict[str, Any]:
    f: dict[str, Any] = dict(facets)
    if columns is not None:
        f["schema"] = {"fields": [{"name": c, "type": "integer"} for c in columns]}
    return {"namespace": WH, "name": f"shop.public.{name}", "facets": f}


def events_of(m: Model, night: int, index: int, rng: random.Random, *, fail: bool = False):
    """START and COMPLETE (or FAIL) of one run of ``m``: new run ids, times, statistics and
    quality results every night."""
    run_id, parent_run = str(uuid.uuid4()), str(uuid.uuid4())
    start = datetime(2026, 11, 1, 2, tzinfo=UTC) + timedelta(days=night, seconds=10 * index)
    inputs = []
    for r in m.reads:
        table = _table(r, m.read_as.get(r, ["id", "v"]))
        table["inputFacets"] = {
            "inputStatistics": {"rowCount": rng.randrange(1000), "size": rng.randrange(10**6)},
            "dataQualityAssertions": {
                "assertions": [
                    {"assertion": "not_null", "column": "id", "success": rng.random() < 0.8}
                ]
            },
        }
        inputs.append(table)
    out_facets: dict[str, Any] = {
        "columnLineage": {
            "fields": {
                c: {
                    "inputFields": [
                        {
                            "namespace": WH,
                            "name": f"shop.public.{m.reads[-1]}",
                            "field": "v" if c != "id" else "id",
                        }
                    ]
                }
                for c in m.columns
            }
        }
    }
    if m.doc:
        out_facets["documentation"] = {"description": m.doc}
    output = _table(m.name, m.columns if m.schema else None, **out_facets)
    output["outputFacets"] = {"outputStatistics": {"rowCount": rng.randrange(1000)}}
    job = {
        "namespace": NS,
        "name": m.name,
        "facets": {
            "sql": {"query": m.sql, "dialect": "postgres"},
            "jobType": {"processingType": "BATCH", "integration": "DBT", "jobType": "MODEL"},
            "sourceCodeLocation": {"type": "git", "url": f"https://git.example.com/{m.name}.sql"},
            **({"documentation": {"description": m.doc}} if m.doc else {}),
        },
    }
    run = {
        "runId": run_id,
        "facets": {
            "parent": {"run": {"runId": parent_run}, "job": {"namespace": NS, "name": "dag"}},
            "nominalTime": {"nominalStartTime": start.isoformat()},
        },
    }

    def event(kind: str, at: datetime, with_io: bool) -> dict[str, Any]:
        return {
            "eventType": kind,
            "eventTime": at.isoformat().replace("+00:00", "Z"),
            "producer": PRODUCER,
            "schemaURL": f"{SPEC}#/$defs/RunEvent",
            "run": copy.deepcopy(run),
            "job": copy.deepcopy(job),
            "inputs": copy.deepcopy(inputs) if with_io else [],
            "outputs": [copy.deepcopy(output)] if with_io else [],
        }

    end = "FAIL" if fail else "COMPLETE"
    return [event("START", start, False), event(end, start + timedelta(seconds=5), True)]


def snapshot(
    models: list[Model], night: int, *, fail: frozenset[str] | set[str] = frozenset()
) -> list[dict]:
    rng = random.Random(night)
    out: list[dict] = []
    for i, m in enumerate(models):
        out += events_of(m, night, i, rng, fail=m.name in fail)
    return out


# -- two stores, two catalogs: one reusing, one normalizing everything -----------------------------


@dataclass
class Side:
    store: EventStore
    catalog: EmbeddedCatalog
    reuse: bool
    cutoffs: list[datetime] = field(default_factory=list)

    def sync(self, d: SyncDefinition, events: list[dict[str, Any]]) -> tuple[int, int] | None:
        """One night: the snapshot posted, its graph built, uploaded and cleaned; the counts of
        normalized and reused jobs the graph step reports."""
        intake = sort_events(copy.deepcopy(events), d.allowedJobNamespaces)
        assert not intake.rejected
        batch_id = self.store.add_posted_batch(
            d.name, intake.accepted, received=intake.received, snapshot=True
        )
        if not self.reuse:  # as events stored before content digests: normalized every time
            with self.store.engine.begin() as conn:
                conn.execute(
                    update(store_schema.events)
                    .where(store_schema.events.c.batch_id == batch_id)
                    .values(content=None)
                )
        time.sleep(0.005)  # SQLite's clock has millisecond steps: runs never share one
        built = batch_graph(self.store, d, self.store.get_batch(batch_id))
        run_id = str(uuid.uuid4())
        done = upload_batch(self.store, self.catalog, d, batch_id, run_id=run_id)
        assert done.cutoff is not None and done.result is not None and done.result.succeeded
        self.cutoffs.append(done.cutoff)
        cleanup_batch(self.store, self.catalog, d, batch_id, run_id=run_id)
        return built.counts

    def contents(self) -> dict[str, set[tuple]]:
        """Everything the catalog holds, by name (ids differ between catalogs), and whether the
        last sync touched it (what the next cutoff cleanup spares)."""
        cutoff = t_naive(self.cutoffs[-1])
        e, a, b = t.entities, t.entities.alias("a"), t.entities.alias("b")
        fa, fb = t.fields.alias("fa"), t.fields.alias("fb")
        s = t.systems
        queries = {
            "entities": select(
                s.c.name,
                e.c.schema,
                e.c.name,
                e.c.type,
                e.c.ol_namespace,
                e.c.ol_name,
                e.c.description,
                e.c.content_hash,
                e.c.last_update >= cutoff,
            ).join(s, s.c.id == e.c.system_id),
            "fields": select(
                e.c.ol_name,
                t.fields.c.name,
                t.fields.c.type,
                t.fields.c.description,
                t.fields.c.ordinal_position,
                t.fields.c.last_update >= cutoff,
            ).join(e, e.c.id == t.fields.c.entity_id),
            "routines": select(
                s.c.name,
                t.routines.c.schema,
                t.routines.c.name,
                t.statements.c.text,
                t.statements.c.dialect,
                t.statements.c.last_update >= cutoff,
            )
            .join(s, s.c.id == t.routines.c.system_id)
            .join(t.statements, t.statements.c.routine_id == t.routines.c.id, isouter=True),
            "dataFlows": select(
                t.data_flows.c.scope,
                t.data_flows.c.kind,
                a.c.ol_name,
                b.c.ol_name,
                t.data_flows.c.statement_id.is_(None),
                t.data_flows.c.last_update >= cutoff,
            )
            .join(a, a.c.id == t.data_flows.c.from_entity)
            .join(b, b.c.id == t.data_flows.c.to_entity),
            "fieldFlows": select(
                t.field_flows.c.scope,
                fa.c.name,
                fb.c.name,
                t.field_flows.c.transformation,
                t.field_flows.c.subtype,
                t.field_flows.c.last_update >= cutoff,
            )
            .join(fa, fa.c.id == t.field_flows.c.from_field)
            .join(fb, fb.c.id == t.field_flows.c.to_field),
            "quality": select(
                t.quality_suites.c.code,
                t.quality_checks.c.code,
                t.quality_checks.c.assertion,
                t.quality_checks.c.column_name,
                t.quality_checks.c.enabled,
                t.quality_checks.c.last_success,
                t.quality_checks.c.last_checked,
            ).join(t.quality_suites, t.quality_suites.c.id == t.quality_checks.c.suite_id),
            "runMetrics": select(
                e.c.ol_namespace,
                e.c.ol_name,
                *[c for c in t.run_metrics.c if c.name != "entity_id"],
            ).join(e, e.c.id == t.run_metrics.c.entity_id),
        }
        with self.catalog.engine.connect() as conn:
            return {k: {tuple(r) for r in conn.execute(q)} for k, q in queries.items()}


def t_naive(value: datetime) -> datetime:
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value


@pytest.fixture
def sides(tmp_path: Path) -> Iterator[tuple[Side, Side]]:
    made = []
    for name, reuse in (("reusing", True), ("oracle", False)):
        store = EventStore(f"sqlite:///{tmp_path / f'{name}-store.db'}")
        made.append(Side(store, EmbeddedCatalog(f"sqlite:///{tmp_path / f'{name}-cat.db'}"), reuse))
    yield made[0], made[1]
    for side in made:
        side.store.dispose()
        side.catalog.close()


def night(sides: tuple[Side, Side], events: list[dict[str, Any]]) -> tuple[int, int] | None:
    """Both sides fed the same night; their catalogs must agree. The reusing side's counts."""
    d = definition()
    reusing, oracle = sides
    counts = reusing.sync(d, events)
    oracle_counts = oracle.sync(d, events)
    assert oracle_counts is not None and oracle_counts[1] == 0  # the oracle reuses nothing
    assert reusing.contents() == oracle.contents()
    return counts


# -- the tests -------------------------------------------------------------------------------------


def test_an_unchanged_second_snapshot_normalizes_no_job(sides: tuple[Side, Side]):
    models = project()
    assert night(sides, snapshot(models, 0)) == (6, 0)
    kept = memo_keys(sides[0])

    assert night(sides, snapshot(models, 1)) == (0, 6)
    assert night(sides, snapshot(models, 2)) == (0, 6)
    # the same lineage: the upload took the content digests the first one kept (``memo``)
    assert memo_keys(sides[0]) == kept and len(kept) == 1


def memo_keys(side: Side) -> list[str]:
    with side.catalog.engine.connect() as conn:
        return list(conn.execute(select(t.content_memo.c.memo_key)).scalars())


def test_a_changed_job_is_normalized_and_its_new_lineage_reaches_the_catalog(
    sides: tuple[Side, Side],
):
    models = project()
    night(sides, snapshot(models, 0))
    models[1].sql = "select id, v from t1 where v > 0"  # SQL
    models[4].columns = ["id", "v", "w"]  # a column more, with its lineage
    models[5].reads = ["src5", "m3"]  # another input

    assert night(sides, snapshot(models, 1)) == (3, 3)

    got = sides[0].contents()
    assert any(r[3] == "select id, v from t1 where v > 0" for r in got["routines"])
    assert ("shop.public.m4", "w") in {r[:2] for r in got["fields"]}
    flows = {(r[2], r[3]) for r in got["dataFlows"] if r[1] == "data"}
    assert ("shop.public.m3", "shop.public.m5") in flows
    assert ("shop.public.m4", "shop.public.m5") not in flows  # cleaned as before


def test_a_job_differing_only_in_its_run_facts_is_reused_and_its_run_facts_are_new(
    sides: tuple[Side, Side],
):
    """Night 2: new run ids, times, statistics and quality results, and m1 fails: nothing is
    normalized, and the catalog shows the new last run, status and quality results."""
    models = project()
    night(sides, snapshot(models, 0))
    first = sides[0].contents()

    assert night(sides, snapshot(models, 1, fail={"m1"})) == (0, 6)

    second = sides[0].contents()
    metrics = {r[1]: r for r in second["runMetrics"]}
    assert metrics["m1"] != {r[1]: r for r in first["runMetrics"]}["m1"]
    last_runs = {r[1]: r for r in second["runMetrics"]}
    assert last_runs["m0"][5].date() == datetime(2026, 11, 2).date()  # last_run: the new night
    assert "FAIL" in metrics["m1"]
    assert second["quality"] != first["quality"]  # the new results (the oracle agrees)


@pytest.mark.parametrize("seed", range(12))
def test_nights_of_changes_give_the_catalog_normalizing_everything_gives(
    sides: tuple[Side, Side], seed: int
):
    """Random edits night after night (SQL, columns, inputs, documentation, a model dropped, a
    model added, a run failed, the events in another order, a table read described with other
    columns than its writer gives it, a table losing or getting its schema): after each, the
    same catalog as the store that normalizes every job."""
    rng = random.Random(seed)
    models = project(8)
    reused = 0
    for n in range(8):
        events = snapshot(models, n, fail={m.name for m in models if rng.random() < 0.1})
        if n % 2:
            rng.shuffle(events)
        counts = night(sides, events)
        assert counts is not None
        reused += counts[1]
        m = rng.choice(models)
        edit = rng.randrange(7)
        if edit == 0:
            m.sql += f" -- {n}"
        elif edit == 1:
            m.columns = [*m.columns, f"c{n}"]
        elif edit == 2:
            m.doc = f"night {n}"
        elif edit == 3 and len(models) > 3:
            models.remove(m)
        elif edit == 4:
            models.append(Model(f"x{n}", f"select {n}", [m.name], ["id", "v"]))
        elif edit == 5:
            # the table it reads last, as this model describes it: a narrower or wider schema
            # than its writer's, which wins when this model runs after the writer
            m.read_as[m.reads[-1]] = rng.choice([["id"], ["v"], ["id", "v", f"c{n}"], []])
        else:
            m.schema = not m.schema
    assert reused > 0


def test_a_store_from_before_content_digests_migrates_and_normalizes_once(tmp_path: Path):
    """A version-13 store (no content digests, no reusable parts): opened, it migrates; its
    events stored before count as changed, so the first sync after normalizes every job and
    the next one reuses them."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    d = definition()
    models = project(4)
    old = EventStore(url)
    intake = sort_events(snapshot(models, 0), d.allowedJobNamespaces)
    batch_id = old.add_posted_batch(
        d.name, intake.accepted, received=intake.received, snapshot=True
    )
    with old.engine.begin() as conn:
        conn.execute(text("ALTER TABLE ol_events DROP COLUMN content"))
        conn.execute(text("ALTER TABLE ol_batch_graphs DROP COLUMN parts"))
        conn.execute(
            store_schema.meta.update()
            .where(store_schema.meta.c.key == "schema_version")
            .values(value="13")
        )
    old.dispose()

    store = EventStore(url)
    catalog = EmbeddedCatalog(f"sqlite:///{tmp_path / 'cat.db'}")
    try:
        assert store.schema_version == store_schema.SCHEMA_VERSION
        built = batch_graph(store, d, store.get_batch(batch_id))
        assert built.counts == (4, 0)
        side = Side(store, catalog, reuse=True)
        assert side.sync(d, snapshot(models, 1)) == (4, 0)  # the graph before has no parts
        assert side.sync(d, snapshot(models, 2)) == (0, 4)
    finally:
        store.dispose()
        catalog.close()


def test_the_content_digest_leaves_out_run_facts_and_keeps_lineage():
    rng = random.Random(1)
    m = Model("m", "select 1", ["src", "up"], ["id", "v"])
    _, a = events_of(m, 0, 0, rng)
    _, b = events_of(m, 3, 4, rng, fail=True)  # other run ids, times, statistics, results
    digest = lambda e: content_digest(__import__("orjson").dumps(e))  # noqa: E731
    assert digest(a) == digest(b)
    for change in (
        lambda e: e["job"]["facets"]["sql"].update(query="select 2"),
        lambda e: e["outputs"][0]["facets"]["schema"]["fields"].append({"name": "w"}),
        lambda e: e["inputs"].pop(),
        lambda e: e["run"]["facets"]["parent"]["job"].update(name="other"),
        lambda e: e["outputs"][0]["facets"]["columnLineage"]["fields"].pop("v"),
    ):
        changed = copy.deepcopy(a)
        change(changed)
        assert digest(changed) != digest(a)
    dataset_level = copy.deepcopy(a)
    dataset_level["outputs"][0]["facets"]["columnLineage"]["dataset"] = [
        {"namespace": WH, "name": "shop.public.src", "field": "id"}
    ]
    assert digest(dataset_level) is None  # normalized every time


def test_two_jobs_describing_a_dataset_in_another_order_give_the_last_description(
    sides: tuple[Side, Side],
):
    """m0 and m1 both read ``shared`` and describe it each in its own words: the run that ends
    last gives its description. On night 2 the same events come with m1's run first: nothing
    of the lineage changed but which description is the last one; the catalog shows m0's."""
    models = [
        Model("m0", "select 1", ["shared"], ["id"]),
        Model("m1", "select 2", ["shared"], ["id"]),
    ]

    def nightly(n: int, order: list[int]) -> list[dict[str, Any]]:
        rng = random.Random(n)
        events = []
        for slot, i in enumerate(order):
            for e in events_of(models[i], n, slot, rng):
                for d in e["inputs"]:
                    d["facets"]["documentation"] = {"description": f"as m{i} sees it"}
                events.append(e)
        return events

    night(sides, nightly(0, [0, 1]))
    assert night(sides, nightly(1, [1, 0])) == (0, 2)

    described = {r[5]: r[6] for r in sides[0].contents()["entities"]}
    assert described["shop.public.shared"] == "as m0 sees it"


@pytest.mark.parametrize(
    ("columns", "counts"),
    [(["v"], (1, 1)), (["id", "v"], (2, 0))],
    ids=["one-field-left", "fields-in-an-order-only-normalizing-tells"],
)
def test_a_field_only_another_jobs_column_lineage_named_goes_with_that_lineage(
    sides: tuple[Side, Side], columns: list[str], counts: tuple[int, int]
):
    """``src0`` comes with no schema: its fields are those column lineage names, in the order
    the runs name them. m1, which does not read it, names ``src0.w`` on the first night only;
    m0 names the others both nights and is reused: the second night's ``src0`` has no ``w``.
    With two fields left, their order is not told by the last graph: every job is normalized."""
    models = [
        Model("m0", "select 1", ["src0"], columns),
        Model("m1", "select 2", ["m0"], ["id", "v"]),
    ]

    night(sides, _src0_from_lineage(models, 0, "m1"))
    assert ("shop.public.src0", "w", True) in {
        (r[0], r[1], r[5]) for r in sides[0].contents()["fields"]
    }
    assert night(sides, _src0_from_lineage(models, 1, None)) == counts
    assert ("shop.public.src0", "w", True) not in {
        (r[0], r[1], r[5]) for r in sides[0].contents()["fields"]
    }


def test_a_field_known_from_column_lineage_is_found_again_when_the_job_naming_it_is_kept(
    sides: tuple[Side, Side],
):
    """``src0`` has no schema: its fields are those column lineage names. m0 reads it and names
    ``src0.v``; m2, which reads neither ``src0`` nor m0's table, names ``src0.w`` on the first
    night only. On the second, m0 and m1 are reused with every other dataset as it was, yet
    ``src0`` must get ``v`` again from m0's kept flow, and lose ``w``."""
    models = [
        Model("m0", "select 1", ["src0"], ["v"]),
        Model("m1", "select 2", ["m0"], ["id", "v"]),
        Model("m2", "select 3", ["src2"], ["id", "v"]),
    ]

    night(sides, _src0_from_lineage(models, 0, "m2"))
    fields = {r[1] for r in sides[0].contents()["fields"] if r[0] == "shop.public.src0"}
    assert fields == {"v", "w"}
    # the catalogs agree (``night``): src0 as normalizing every job describes it
    assert night(sides, _src0_from_lineage(models, 1, None)) == (1, 2)
    assert ("ol:etl|m0", "v", "v") in {r[:3] for r in sides[0].contents()["fieldFlows"]}


def _naming(
    events: list[dict[str, Any]], job: str, table: str = "ext", column: str = "id"
) -> list[dict[str, Any]]:
    """``events`` with ``job``'s column ``v`` also taken from ``table.column``, a table it does
    not read: its flow dangles once no job of the batch describes ``table``."""
    for e in events:
        if e["job"]["name"] == job:
            for out in e["outputs"]:
                inputs = out["facets"]["columnLineage"]["fields"]["v"]["inputFields"]
                inputs.append({"namespace": WH, "name": f"shop.public.{table}", "field": column})
    return events


def _src0_from_lineage(models: list[Model], n: int, naming_w: str | None) -> list[dict]:
    """Night ``n``'s snapshot with ``src0`` read without a schema (its fields are those column
    lineage names), and ``naming_w``'s column ``v`` also taken from ``src0.w``."""
    events = snapshot(models, n)
    for e in events:
        for d in e["inputs"]:
            if d["name"] == "shop.public.src0":
                d["facets"].pop("schema")
    return _naming(events, naming_w, "src0", "w") if naming_w else events


def test_a_kept_field_flow_dangles_when_the_dataset_it_names_is_no_longer_described(
    sides: tuple[Side, Side],
):
    """m1 names ``ext.id`` in its column lineage without reading ``ext``, which only m2 reads.
    When m2 is dropped, m1 is reused and its flow from ``ext`` dangles (as normalizing gives)."""
    models = [
        Model("m0", "select 1", ["src0"], ["id", "v"]),
        Model("m1", "select 2", ["m0"], ["id", "v"]),
        Model("m2", "select 3", ["ext"], ["id"]),
    ]

    def nightly(n: int) -> list[dict[str, Any]]:
        return _naming(snapshot(models, n), "m1")

    night(sides, nightly(0))
    models.pop()
    assert night(sides, nightly(1)) == (0, 2)


def test_a_kept_field_flow_dangles_when_a_later_description_of_its_target_drops_the_field(
    sides: tuple[Side, Side],
):
    """m0 says the same both nights; m1, which reads m0's table after it runs, describes that
    table with both columns on the first night and without ``v`` on the second. The last
    description wins, so m0's flow into ``m0.v`` (its source as it was) dangles, as normalizing
    every job gives; m0 is still reused."""
    models = [
        Model("m0", "select 1", ["src0"], ["id", "v"]),
        Model("m1", "select 2", ["m0"], ["id", "v"]),
    ]

    def nightly(n: int, narrowed: bool) -> list[dict[str, Any]]:
        events = snapshot(models, n)
        for e in events:
            for d in e["inputs"] if narrowed and e["job"]["name"] == "m1" else ():
                if d["name"] == "shop.public.m0":
                    d["facets"]["schema"]["fields"] = [{"name": "id", "type": "integer"}]
        return events

    night(sides, nightly(0, False))
    into_v = ("ol:etl|m0", "v", "v")
    assert into_v in {r[:3] for r in sides[0].contents()["fieldFlows"]}
    assert night(sides, nightly(1, True)) == (1, 1)
    assert into_v not in {r[:3] for r in sides[0].contents()["fieldFlows"]}


def _kept_lineage(side: Side, d: SyncDefinition) -> tuple[list[Any], bytes]:
    """The first line and the bytes of the lineage part of the graph kept for the next night."""
    kept = side.store.earlier_graph(d.name, 1 << 40)
    assert kept is not None
    (length,) = struct.unpack_from(">Q", kept.graph)
    lineage = kept.graph[8 : 8 + length]
    return orjson.loads(zlib.decompressobj().decompress(lineage).split(b"\n")[0]), lineage


def test_a_night_with_few_changes_keeps_the_last_lineage_and_packs_only_what_changed(
    sides: tuple[Side, Side],
):
    """Most jobs as they were: the graph kept for the upload and the next night holds what
    changed, over the first night's lineage bytes as they are, night after night; the upload
    loads it from there, and the catalog is the one normalizing everything gives. m50 names
    ``ext.id``, which only ``reads_ext`` reads: once that is dropped, m50's kept flow dangles."""
    d = definition()
    models = [*project(120), Model("reads_ext", "select 3", ["ext"], ["id"])]

    def nightly(n: int) -> list[dict[str, Any]]:
        return _naming(snapshot(models, n), "m50")

    night(sides, nightly(0))
    head, first = _kept_lineage(sides[0], d)
    assert head[0] == "format"
    models[5].sql += " -- edited"
    models[9].columns = ["id", "v", "w"]
    night(sides, nightly(1))
    head, second = _kept_lineage(sides[0], d)
    assert head[0] == "delta" and second.endswith(first)
    models.pop()
    night(sides, nightly(2))
    head, third = _kept_lineage(sides[0], d)
    assert head[0] == "delta" and third.endswith(first)  # over the same base, not stacked


def test_an_edited_night_takes_the_kept_digests_of_the_jobs_it_took_unchanged(
    sides: tuple[Side, Side], caplog: pytest.LogCaptureFixture
):
    """The graph of an edited night names the jobs it took unchanged from the last night's
    graph, whose lineage the upload's kept digests were made of; the upload takes their kept
    digests and hashes the others, and the catalog is the one normalizing everything gives."""
    d = definition()
    models = project(20)
    night(sides, snapshot(models, 0))
    first = sides[0].store.earlier_graph(d.name, 1 << 40)
    assert first is not None
    models[5].sql += " -- edited"
    models[9].columns = ["id", "v", "w"]
    with caplog.at_level(logging.INFO, logger=memo.__name__):
        night(sides, snapshot(models, 1))
    second = sides[0].store.earlier_graph(d.name, 1 << 40)
    assert second is not None and second.batch_id != first.batch_id
    graph = unpack(second.graph)
    assert graph.unchanged_since is not None
    since, unchanged = graph.unchanged_since
    assert since == lineage_digest(first.graph)
    jobs = {name for ns, name in unchanged}
    assert "m5" not in jobs and "m9" not in jobs  # their SQL, their columns
    assert len(jobs) >= 15, sorted(jobs)
    said = [r.getMessage() for r in caplog.records if r.name == memo.__name__]
    assert len(said) == 1 and said[0].startswith(
        f"{d.name}: {len(unchanged)} job digest(s) taken as kept, "
    ), said


def test_an_edited_night_reads_again_only_the_events_it_normalizes(
    sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch
):
    """Every event is read once for its run facts; then only the events of the changed job and
    of the jobs naming a dataset it describes are read again, by their place in the batch, and
    normalized: not the whole batch a second time. The catalog is the one normalizing every
    event gives (``night``)."""
    models = project(40)
    night(sides, snapshot(models, 0))
    store = sides[0].store
    read_again: list[str] = []
    at = store.raw_events_at

    def spied(batch_id: int, positions):
        for raw in at(batch_id, positions):
            read_again.append(orjson.loads(raw)["job"]["name"])
            yield raw

    monkeypatch.setattr(store, "raw_events_at", spied)
    models[20].sql += " -- edited"
    counts = night(sides, snapshot(models, 1))
    assert counts == (1, 39)
    # m20 reads m19's table and m21 reads m20's: their descriptions of those are read again
    assert "m20" in read_again and set(read_again) <= {"m19", "m20", "m21"}
    assert len(read_again) <= 6  # of 80 events
