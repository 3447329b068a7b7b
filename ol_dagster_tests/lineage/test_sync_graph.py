# ruff: noqa: F811  (the fixtures are imported from other test modules)
"""One normalization per sync (issue 14, item 4): ``lineage_graph`` builds, the upload loads.

A sync used to normalize its events twice (the ``lineage_graph`` asset, then ``catalog_upload``
again) and the event-taking catalogs read the events a third time; the graph the asset page
showed was the batch's alone, not the one uploaded. Now the ``lineage_graph`` step normalizes
the events the upload is judged by and stores the graph with the name of its inputs, and the
upload loads it when its own inputs have the same name. These tests count normalizations and
event reads over a real sync (the counters wrap the real functions and call through), and check
that a graph built from other inputs (other rules, an earlier batch gone, damaged bytes) is never
uploaded: the catalog then holds what normalizing the current events gives.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml
from sqlalchemy import inspect, select, text

from ol_dagster.catalog.embedded import tables as t
from ol_dagster.catalog.embedded.confirm import seen
from ol_dagster.lineage.unread_flows import UnreadFlows
from ol_dagster.receiver.intake import sort_events
from ol_dagster.settings import SnapshotMode
from ol_dagster.store import BatchStatus, EventStore, NewEvent
from ol_dagster.store import schema as store_schema
from ol_dagster.store.event_store import event_digest, utcnow
from ol_dagster.sync import graph as sync_graph
from ol_dagster.sync.batch import cleanup_batch, upload_batch
from ol_dagster.sync.graph import batch_graph, graph_inputs
from ol_dagster_tests.catalogs.test_catalog_marquez import Env as MarquezEnv
from ol_dagster_tests.catalogs.test_catalog_marquez import env  # noqa: F401 (fixture)
from ol_dagster_tests.safety.test_cleanup_rules import (  # noqa: F401 (fixtures)
    WH,
    Harness,
    datasets,
    definition,
    flows,
    h,
    job,
    pg,
)
from ol_dagster_tests.safety.test_cleanup_seed_example import NS, Env, make_env  # noqa: F401

NORMALIZE = sys.modules["ol_dagster.lineage.normalize"]


@dataclass
class Counts:
    normalizations: int = 0
    events_read: int = 0  # raw events read back from the event store
    unpacked: int = 0  # stored graphs loaded
    inputs_named: int = 0  # reads of a batch's event digests (``graph_inputs``)

    def reset(self) -> None:
        self.normalizations = self.events_read = self.unpacked = self.inputs_named = 0


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Counts:
    """Counters around the real normalization and the event store's raw reads (they call
    through: what a sync does is unchanged)."""
    seen = Counts()
    real_normalize = NORMALIZE._normalize

    def normalize(*args: Any, **kwargs: Any) -> Any:
        seen.normalizations += 1
        return real_normalize(*args, **kwargs)

    monkeypatch.setattr(NORMALIZE, "_normalize", normalize)
    real_unpack = sync_graph.unpack

    def unpack(*args: Any, **kwargs: Any) -> Any:
        seen.unpacked += 1
        return real_unpack(*args, **kwargs)

    monkeypatch.setattr(sync_graph, "unpack", unpack)
    real_digests = EventStore.event_digests

    def event_digests(*args: Any, **kwargs: Any) -> Any:
        seen.inputs_named += 1
        return real_digests(*args, **kwargs)

    monkeypatch.setattr(EventStore, "event_digests", event_digests)
    for name in ("iter_events", "raw_events", "events_by_id"):
        real = getattr(EventStore, name)

        def read(*args: Any, _real: Any = real, **kwargs: Any) -> Iterator[Any]:
            for item in _real(*args, **kwargs):
                seen.events_read += 1
                yield item

        monkeypatch.setattr(EventStore, name, read)
    return seen


def _metadata(instance: dg.DagsterInstance, asset: str) -> dict[str, Any]:
    event = instance.get_latest_materialization_event(dg.AssetKey(["snap", asset]))
    assert event is not None and event.asset_materialization is not None
    return {k: getattr(v, "value", v) for k, v in event.asset_materialization.metadata.items()}


def _run(run_id: str, event_type: str, inputs=(), outputs=(), namespace: str = NS):
    event = job(namespace, "etl.load", list(inputs), list(outputs), event_type=event_type)
    event["run"]["runId"] = run_id
    return event


# -- through Dagster: the sync job, as ``ol-dagster sync`` runs it --------------------------------


def test_a_sync_normalizes_once_and_reads_each_event_once(make_env, counts: Counts):
    env: Env = make_env()
    events = [job(NS, f"etl.model_{i}", [pg(f"in_{i}")], [pg(f"out_{i}")]) for i in range(20)]
    env.post({"events": events})

    (line,) = env.sync()

    assert line["status"] == "synced"
    assert counts.normalizations == 1
    assert counts.events_read == len(events)  # by lineage_graph; the embedded upload reads none
    assert counts.unpacked == 0  # one process: the upload takes the graph lineage_graph built
    assert counts.inputs_named == 1  # and the names of its inputs, read once
    assert len(env.jobs()) == 20
    graph = _metadata(env.instance, "lineage_graph")
    assert graph["jobs"] == 20 and graph["inputEvents"] == 20 and graph["earlierRunEvents"] == 0


def test_the_graph_page_says_how_many_jobs_a_repeated_snapshot_reused(make_env):
    """The same five models posted again under new run ids: ``lineage_graph`` says none was
    normalized again, and the catalog still has them all."""
    env: Env = make_env()
    models = [(f"etl.model_{i}", pg(f"in_{i}"), pg(f"out_{i}")) for i in range(5)]
    env.post({"events": [job(NS, name, [a], [b]) for name, a, b in models]})
    env.sync()
    assert _metadata(env.instance, "lineage_graph")["normalize"] == {"normalized": 5, "reused": 0}
    env.post({"events": [job(NS, name, [a], [b]) for name, a, b in models]})

    (line,) = env.sync()

    assert line["status"] == "synced"
    assert _metadata(env.instance, "lineage_graph")["normalize"] == {"normalized": 0, "reused": 5}
    assert len(env.jobs()) == 5


def test_a_repeated_snapshot_is_synced_without_building_its_field_flows(
    make_env, monkeypatch: pytest.MonkeyPatch
):
    """A night that repeats the last snapshot reuses its graph whole: the upload only stamps its
    unchanged jobs' field flows, and the change record finds no job to compare, so no field
    flow of the reused graph is built (150,000 objects at 10,000 jobs). Every flow is still in
    the catalog, with the new upload's time."""
    built: list[int] = []
    held: list[int] = []  # field flow rows held unread
    real_read, real_all, real_add = UnreadFlows.read, UnreadFlows.all, UnreadFlows.add

    def read(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        for flow in real_read(self, *args, **kwargs):
            built.append(1)
            yield flow

    def read_all(self: Any) -> Any:
        flows = real_all(self)
        built.extend([1] * len(flows))
        return flows

    def add(self: Any, rows: list[int], *args: Any) -> None:
        held.extend(rows[2::5])
        real_add(self, rows, *args)

    monkeypatch.setattr(UnreadFlows, "read", read)
    monkeypatch.setattr(UnreadFlows, "all", read_all)
    monkeypatch.setattr(UnreadFlows, "add", add)
    env: Env = make_env()

    def snapshot() -> list[dict[str, Any]]:
        columns = {
            "id": [(WH, "shop.public.in_0", "id")],
            "total": [(WH, "shop.public.in_0", "amount")],
        }
        return [
            job(
                NS,
                f"etl.model_{i}",
                [pg("in_0", ["id", "amount"])],
                [pg(f"out_{i}", ["id", "total"], lineage=columns)],
            )
            for i in range(4)
        ]

    env.post({"events": snapshot()})
    env.sync()
    first = _field_flow_times(env)
    assert len(first) == 8 and len(set(first.values())) == 1
    env.post({"events": snapshot()})

    (line,) = env.sync()

    assert line["status"] == "synced"
    assert _metadata(env.instance, "lineage_graph")["normalize"] == {"normalized": 0, "reused": 4}
    assert len(held) == 8 and built == []
    second = _field_flow_times(env)
    assert second.keys() == first.keys()
    assert len(set(second.values())) == 1 and set(second.values()) != set(first.values())
    # confirmed whole, not written: each row keeps the first upload's time in the table
    assert _field_flow_times(env, as_read=False) == first


def _field_flow_times(env: Env, *, as_read: bool = True) -> dict[tuple[str, int, int], Any]:
    """Each field flow's last update, as every reader of the catalog takes it (``as_read``), or
    as its row holds it."""
    with env.catalog().engine.connect() as conn:
        ff = t.field_flows.c
        at = seen(ff.last_update) if as_read else ff.last_update
        rows = conn.execute(select(ff.scope, ff.from_field, ff.to_field, at))
        return {(scope, a, b): at for scope, a, b, at in rows}


def test_the_graph_page_shows_the_graph_uploaded_for_a_run_split_over_batches(
    make_env, counts: Counts
):
    """The run reads ``orders`` in its START (the first post) and writes ``kpi`` in its COMPLETE
    (the second): the second batch's graph, on the asset page and in the catalog, is the whole
    run's: the flow orders -> kpi. The batch's own events alone have no flow."""
    env: Env = make_env(snapshotMode="ADDITIVE")
    run_id = str(uuid.uuid4())
    env.post({"events": [_run(run_id, "START", inputs=[pg("orders")])]})
    env.sync()
    counts.reset()
    env.post({"events": [_run(run_id, "COMPLETE", outputs=[pg("kpi")])]})

    (line,) = env.sync()

    assert line["status"] == "synced"
    graph = _metadata(env.instance, "lineage_graph")
    assert (graph["dataFlows"], graph["inputEvents"], graph["earlierRunEvents"]) == (1, 2, 1)
    assert (f"ol:{NS}|etl.load", "shop.public.orders", "shop.public.kpi") in env.read(flows)
    assert counts.normalizations == 1


def test_a_person_rematerializing_the_upload_alone_uploads_without_normalizing(
    make_env, counts: Counts
):
    env: Env = make_env()
    batch_id = env.post({"events": [job(NS, "etl.load", [pg("orders")], [pg("kpi")])]})
    env.sync()
    counts.reset()

    result = env.materialize("catalog_upload", partition=batch_id)

    assert result.success
    assert counts.normalizations == 0 and counts.events_read == 0 and counts.unpacked == 1
    assert env.jobs() == {f"{NS}.etl.load"}


def test_the_upload_normalizes_when_the_rules_changed_since_the_graph_was_built(
    make_env, counts: Counts
):
    """A datasetSystems rule added between ``lineage_graph`` and a re-materialized upload: the
    stored graph placed ``kpi`` by the old rules; the upload places it by the new ones."""
    env: Env = make_env()
    batch_id = env.post({"events": [job(NS, "etl.load", [pg("orders")], [pg("kpi")])]})
    env.sync()
    assert ("kpi_system", "shop.public.kpi") not in env.read(datasets)
    data = yaml.safe_load(Path(env.path).read_text())
    (snap,) = [d for d in data["definitions"] if d["name"] == "snap"]
    snap["datasetSystems"].insert(0, {"namespace": WH, "system": "kpi_system"})
    Path(env.path).write_text(yaml.safe_dump(data))
    counts.reset()

    result = env.materialize("catalog_upload", partition=batch_id)

    assert result.success
    assert counts.normalizations == 1
    assert ("kpi_system", "shop.public.kpi") in env.read(datasets)


# -- the sync functions, on SQLite and PostgreSQL catalogs ----------------------------------------


def _lineage_step(h: Harness, d, batch_id: int) -> None:
    """What the ``lineage_graph`` asset runs."""
    batch_graph(h.store, d, h.store.get_batch(batch_id))


def _sync(h: Harness, d, batch_id: int) -> dict[str, Any]:
    run_id = str(uuid.uuid4())
    upload_batch(h.store, h.catalog, d, batch_id, run_id=run_id)
    return cleanup_batch(h.store, h.catalog, d, batch_id, run_id=run_id)


def test_a_graph_whose_earlier_events_are_gone_is_not_uploaded(h: Harness, counts: Counts):
    """The first part of a run is gone between ``lineage_graph`` and the upload (removed by hand:
    retention keeps it while a pending batch continues the run): the stored graph still has its
    input; the upload uploads what the events left give."""
    d = definition(snapshotMode="ADDITIVE")
    run_id = str(uuid.uuid4())
    first = h.receive(d, [_run(run_id, "START", inputs=[pg("orders")], namespace="etl")])
    _sync(h, d, first)
    second = h.receive(d, [_run(run_id, "COMPLETE", outputs=[pg("kpi")], namespace="etl")])
    built = batch_graph(h.store, d, h.store.get_batch(second))  # the lineage_graph step
    assert [(f.source[1], f.target[1]) for f in built.graph.data_flows] == [
        ("shop.public.orders", "shop.public.kpi")
    ]
    assert h.store.purge_synced(d.name, before=utcnow()) == []  # the run goes on in `second`
    with h.store.engine.begin() as conn:
        conn.execute(store_schema.events.delete().where(store_schema.events.c.batch_id == first))
        conn.execute(store_schema.batches.delete().where(store_schema.batches.c.id == first))
    counts.reset()

    _sync(h, d, second)

    assert counts.normalizations == 1
    assert ("ol:etl|etl.load", "shop.public.orders", "shop.public.kpi") not in flows(h.catalog)


def test_inputs_named_by_the_graph_step_are_named_again_once_an_earlier_batch_went(
    h: Harness, counts: Counts
):
    """As above with both steps in one process (the graph handed over with the names of its
    inputs): the upload sees that an earlier batch went since, names its inputs again, and
    uploads what the events left give."""
    d = definition(snapshotMode="ADDITIVE")
    run_id = str(uuid.uuid4())
    first = h.receive(d, [_run(run_id, "START", inputs=[pg("orders")], namespace="etl")])
    _sync(h, d, first)
    second = h.receive(d, [_run(run_id, "COMPLETE", outputs=[pg("kpi")], namespace="etl")])
    batch_graph(h.store, d, h.store.get_batch(second), hand_over=True)  # the lineage_graph step
    with h.store.engine.begin() as conn:
        conn.execute(store_schema.events.delete().where(store_schema.events.c.batch_id == first))
        conn.execute(store_schema.batches.delete().where(store_schema.batches.c.id == first))
    counts.reset()

    _sync(h, d, second)

    assert counts.inputs_named == 1 and counts.normalizations == 1
    assert ("ol:etl|etl.load", "shop.public.orders", "shop.public.kpi") not in flows(h.catalog)


def test_inputs_named_by_the_graph_step_are_named_again_once_a_stream_batch_grew(
    h: Harness, counts: Counts
):
    """A run's START in an open stream batch, its COMPLETE in a post: between the two steps the
    stream batch takes the run's output. The upload names its inputs again and uploads the
    flow the new event completes."""
    d = definition(snapshotMode="ADDITIVE")
    run_id = str(uuid.uuid4())
    start = _run(run_id, "START", inputs=[pg("orders")], namespace="etl")
    h.store.add_stream_events(d.name, sort_events([start], ["etl"]).accepted, received=1)
    post = h.receive(d, [_run(run_id, "COMPLETE", namespace="etl")])
    built = batch_graph(h.store, d, h.store.get_batch(post), hand_over=True)
    assert not built.graph.data_flows
    running = _run(run_id, "RUNNING", outputs=[pg("kpi")], namespace="etl")
    h.store.add_stream_events(d.name, sort_events([running], ["etl"]).accepted, received=1)
    counts.reset()

    _sync(h, d, post)

    assert counts.inputs_named == 1 and counts.normalizations == 1
    assert ("ol:etl|etl.load", "shop.public.orders", "shop.public.kpi") in flows(h.catalog)


def test_a_damaged_stored_graph_is_normalized_again(h: Harness, counts: Counts):
    d = definition()
    batch_id = h.receive(d, [job("etl", "load", [pg("orders")], [pg("kpi")])])
    inputs = graph_inputs(h.store, d, h.store.get_batch(batch_id))
    h.store.save_graph(batch_id, inputs.key, b"\x78\x01 not a graph")
    counts.reset()

    report = _sync(h, d, batch_id)

    assert report["skippedReason"] is None
    assert counts.normalizations == 1
    assert ("ol:etl|load", "shop.public.orders", "shop.public.kpi") in flows(h.catalog)


def test_the_graph_of_another_batch_is_never_taken_for_this_one(h: Harness, counts: Counts):
    """Two batches of the same definition: each upload loads its own graph, under its own
    inputs' name; a graph stored for one batch is not found for the other."""
    d = definition(snapshotMode="ADDITIVE")
    one = h.receive(d, [job("etl", "one", [pg("a")], [pg("b")])])
    two = h.receive(d, [job("etl", "two", [pg("c")], [pg("d")])])
    _lineage_step(h, d, one)
    _lineage_step(h, d, two)
    key_one = graph_inputs(h.store, d, h.store.get_batch(one)).key
    assert h.store.load_graph(two, key_one) is None
    counts.reset()

    _sync(h, d, one)
    _sync(h, d, two)

    assert (counts.normalizations, counts.unpacked) == (0, 2)
    assert {s for s, _, _ in flows(h.catalog)} == {"ol:etl|one", "ol:etl|two"}


# -- an event-taking catalog: the events read once per upload -------------------------------------


@pytest.mark.parametrize("lineage_step", [True, False], ids=["graph-stored", "no-graph"])
def test_marquez_gets_the_events_read_once(env: MarquezEnv, counts: Counts, lineage_step: bool):
    d = definition()
    store = env.syncer.store
    events = [job("etl", f"m{i}", [pg(f"in{i}")], [pg(f"out{i}")]) for i in range(5)]
    intake = sort_events(events, d.allowedJobNamespaces)
    batch_id = store.add_posted_batch(
        d.name,
        intake.accepted,
        received=len(events),
        snapshot=d.snapshotMode is SnapshotMode.BATCH_SNAPSHOT,
    )
    if lineage_step:
        batch_graph(store, d, store.get_batch(batch_id))
    counts.reset()

    done = upload_batch(store, env.catalog(), d, batch_id, run_id="r1")

    assert done.result is not None and done.result.succeeded
    assert counts.events_read == len(events)
    assert counts.normalizations == (0 if lineage_step else 1)
    assert len(env.fake.events) == len(events)


# -- the store: version 7 ----------------------------------------------------------------------


def test_a_version_6_store_gains_digests_and_graphs_and_syncs_its_old_events(
    store_url: str, tmp_path: Path
):
    """The real v6 -> v7 migration: events stored before it have no digest (computed from their
    bytes when needed); new events carry theirs; a batch of old events syncs as before."""
    store = EventStore(store_url)
    d = definition()
    old = sort_events([job("etl", "load", [pg("orders")], [pg("kpi")])], ["etl"]).accepted
    batch_id = store.add_posted_batch(d.name, old, received=1, snapshot=True)
    with store.engine.begin() as conn:
        conn.execute(text("ALTER TABLE ol_events DROP COLUMN digest"))
        conn.execute(text("DROP TABLE ol_batch_graphs"))
        conn.execute(
            store_schema.meta.update()
            .where(store_schema.meta.c.key == "schema_version")
            .values(value="6")
        )
    store.dispose()

    upgraded = EventStore(store_url)
    try:
        assert upgraded.schema_version == store_schema.SCHEMA_VERSION >= 7
        with upgraded.engine.connect() as conn:
            assert "ol_batch_graphs" in inspect(conn).get_table_names()
            stored = conn.execute(select(store_schema.events.c.digest)).scalars().all()
        assert stored == [None]
        assert upgraded.event_digests(batch_id) == [event_digest(old[0].raw)]
        new = NewEvent(
            json.dumps({"i": 1}).encode(),
            "run",
            "COMPLETE",
            old[0].event_time,
            None,
            "etl",
            "x",
            "r",
        )
        second = upgraded.add_posted_batch(d.name, [new], received=1)
        assert upgraded.event_digests(second) == [event_digest(new.raw)]

        built = batch_graph(upgraded, d, upgraded.get_batch(batch_id))
        assert built.built and set(built.graph.jobs) == {("etl", "load")}
        again = batch_graph(upgraded, d, upgraded.get_batch(batch_id))
        assert not again.built and again.graph == built.graph
    finally:
        upgraded.dispose()


def test_purging_a_batch_removes_its_graph(event_store: EventStore):
    d = definition()
    events = sort_events([job("etl", "load", [pg("orders")], [pg("kpi")])], ["etl"]).accepted
    batch_id = event_store.add_posted_batch(d.name, events, received=1, snapshot=True)
    built = batch_graph(event_store, d, event_store.get_batch(batch_id))
    event_store.set_status(batch_id, BatchStatus.SYNCED)
    # a newer snapshot synced since: retention keeps only the newest one
    later = sort_events([job("etl", "kpi", [pg("kpi")], [pg("report")])], ["etl"]).accepted
    newer = event_store.add_posted_batch(d.name, later, received=1, snapshot=True)
    event_store.set_status(newer, BatchStatus.SYNCED)

    assert event_store.purge_synced(d.name, before=utcnow().replace(year=3000)) == [batch_id]

    assert event_store.load_graph(batch_id, built.inputs.key) is None
    with event_store.engine.connect() as conn:
        assert conn.execute(select(store_schema.batch_graphs)).first() is None


def test_a_graph_built_handed_over_or_loaded_is_named_by_its_stored_lineage(
    event_store: EventStore,
):
    """What the embedded upload keys its kept content digests by (``memo``): the same for the
    graph the step built, the one it hands over and the one loaded back, and another one for
    another lineage."""
    d = definition()
    events = sort_events([job("etl", "load", [pg("orders")], [pg("kpi")])], ["etl"]).accepted
    batch_id = event_store.add_posted_batch(d.name, events, received=1, snapshot=True)
    batch = event_store.get_batch(batch_id)
    built = batch_graph(event_store, d, batch, hand_over=True)
    handed = batch_graph(event_store, d, batch)
    loaded = batch_graph(event_store, d, batch)
    assert (built.built, handed.built, loaded.built) == (True, False, False)
    assert handed.graph is built.graph and loaded.graph is not built.graph

    stored = event_store.load_graph(batch_id, built.inputs.key)
    assert stored is not None
    named = sync_graph.lineage_digest(stored)
    assert built.graph.lineage_digest == loaded.graph.lineage_digest == named

    other = sort_events([job("etl", "load", [pg("orders")], [pg("report")])], ["etl"]).accepted
    other_id = event_store.add_posted_batch(d.name, other, received=1, snapshot=True)
    assert batch_graph(
        event_store, d, event_store.get_batch(other_id)
    ).graph.lineage_digest not in (
        None,
        named,
    )
