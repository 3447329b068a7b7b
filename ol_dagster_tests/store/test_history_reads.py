"""A sync's reads of the event store follow the batch it syncs, not the history the store keeps.

Retention keeps a definition's snapshots for ``keepDays``: with nightly snapshots, 30 or more.
Naming a batch's graph inputs (``sync.graph.graph_inputs``) reads the batch's runs and digests
and the earlier parts of its runs; the last of these, joined to the batches, was planned by both
databases as a walk of every earlier event of the definition through the batch index, for each
chunk of run ids: the same unchanged snapshot cost more with every snapshot kept. Here a store
holds 30 earlier snapshots and one more to sync; every statement naming the inputs is explained
on the database itself: none reads the events table whole, and the earlier parts of runs are
found through the run-id index (on PostgreSQL with sequential scans priced out, so the plan
shows what the planner can use rather than what a small table makes cheapest).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event as sa_event

from ol_dagster.receiver.intake import sort_events
from ol_dagster.store import BatchStatus, EventStore
from ol_dagster.sync.graph import graph_inputs
from ol_dagster_tests.conftest import run_event
from ol_dagster_tests.safety.test_cleanup_rules import definition

EARLIER = 30  # snapshots retention kept
JOBS = 40  # jobs per snapshot
PG = "postgres://db:5432"


def _snapshot(run_ids: list[str]) -> list[dict[str, Any]]:
    return [
        run_event(
            "etl",
            f"job_{i}",
            run_id=run_id,
            inputs=[(PG, f"raw.t_{i}")],
            outputs=[(PG, f"mart.t_{i}")],
        )
        for i, run_id in enumerate(run_ids)
    ]


def _post(store: EventStore, events: list[dict[str, Any]]) -> int:
    d = definition()
    intake = sort_events(events, d.allowedJobNamespaces)
    return store.add_posted_batch(d.name, intake.accepted, received=len(events), snapshot=True)


def _store_with_history(store: EventStore) -> tuple[int, str]:
    """30 synced snapshots, then one to sync whose first run began in the 10th (its START
    there): the batch to sync and that run's id."""
    split = str(uuid.uuid4())
    for n in range(EARLIER):
        events = _snapshot([str(uuid.uuid4()) for _ in range(JOBS)])
        if n == 9:
            events.append(run_event("etl", "job_0", run_id=split, event_type="START"))
        store.set_status(_post(store, events), BatchStatus.SYNCED)
    runs = [split] + [str(uuid.uuid4()) for _ in range(JOBS - 1)]
    return _post(store, _snapshot(runs)), split


@contextmanager
def _statements(store: EventStore) -> Iterator[list[tuple[str, Any]]]:
    """The statements sent to the store's database meanwhile, with their parameters."""
    seen: list[tuple[str, Any]] = []

    def record(conn, cursor, statement, parameters, context, executemany) -> None:  # noqa: ANN001
        seen.append((statement, parameters))

    sa_event.listen(store.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa_event.remove(store.engine, "before_cursor_execute", record)


def _plan(store: EventStore, statement: str, parameters: Any) -> str:
    """The database's own plan of the statement, as text."""
    raw = store.engine.raw_connection()
    try:
        cursor = raw.cursor()
        if store.engine.dialect.name == "sqlite":
            cursor.execute("EXPLAIN QUERY PLAN " + statement, parameters)
            return "\n".join(str(row[-1]) for row in cursor.fetchall())
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("EXPLAIN " + statement, parameters)
        return "\n".join(str(row[0]) for row in cursor.fetchall())
    finally:
        raw.rollback()
        raw.close()


def test_naming_a_batchs_inputs_reads_no_history(event_store: EventStore) -> None:
    batch_id, _ = _store_with_history(event_store)
    d = definition()

    with _statements(event_store) as seen:
        inputs = graph_inputs(event_store, d, event_store.get_batch(batch_id))

    assert len(inputs.earlier) == 1  # the START of the split run, found in the 10th snapshot
    plans = {s: _plan(event_store, s, p) for s, p in seen if "ol_events" in s}
    sqlite = event_store.engine.dialect.name == "sqlite"
    whole = "SCAN ol_events" if sqlite else "Seq Scan on ol_events"
    assert plans and not [s for s, plan in plans.items() if whole in plan]
    by_run = [plan for s, plan in plans.items() if "run_id IN" in s or "run_id = ANY" in s]
    assert by_run and all("ix_ol_events_run" in plan for plan in by_run)
    # an events read driven by the batches is a walk over every earlier batch's events
    assert not [plan for plan in plans.values() if "ol_batches" in plan]


def test_the_earlier_graph_is_read_alone_however_many_are_kept(event_store: EventStore) -> None:
    """The graph a batch may reuse is the last one kept: found by its batch, then read by key.
    Read in the statement that orders them, SQLite copied every kept graph into its sort (0.2 s
    of a 3.6 s sync with 30 snapshots of 10,000 jobs kept)."""
    d = definition()
    kept = []
    for n in range(EARLIER):
        batch = _post(event_store, _snapshot([str(uuid.uuid4())]))
        event_store.save_graph(batch, b"inputs", b"graph %d " % n * 1000, parts=b"{}")
        kept.append(batch)

    with _statements(event_store) as seen:
        found = event_store.earlier_graph(d.name, kept[-1] + 1)

    assert found is not None and found.batch_id == kept[-1]
    assert found.graph == b"graph %d " % (EARLIER - 1) * 1000
    graphs = [(s, p) for s, p in seen if "ol_batch_graphs.graph" in s]
    assert len(graphs) == 1
    sort = "TEMP B-TREE" if event_store.engine.dialect.name == "sqlite" else "Sort"
    assert sort not in _plan(event_store, *graphs[0])
