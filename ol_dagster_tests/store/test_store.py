"""The event store, on SQLite and on a real PostgreSQL (the ``event_store`` fixture)."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, event, func, inspect, select, text

from ol_dagster.db import open_engine
from ol_dagster.store import BatchKind, BatchStatus, EventStore, NewEvent, schema
from ol_dagster.store import events as events_module
from ol_dagster.store.schema import StoreVersionError

T0 = datetime(2026, 11, 1, 2, 0, 0, tzinfo=UTC)


def ev(
    i: int = 0,
    *,
    kind: str = "run",
    event_type: str | None = "COMPLETE",
    producer: str | None = "https://example.com/producer",
    job_namespace: str | None = "etl",
    job_name: str | None = None,
    raw: bytes | None = None,
) -> NewEvent:
    return NewEvent(
        raw=raw if raw is not None else json.dumps({"i": i}).encode(),
        kind=kind,
        event_type=event_type,
        event_time=T0 + timedelta(seconds=i),
        producer=producer,
        job_namespace=job_namespace,
        job_name=job_name or f"job_{i}",
        run_id=f"run-{i}",
    )


def count_rows(store: EventStore, table: Table) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


# -- posted batches -------------------------------------------------------------------------------


def test_posted_batch_is_written_whole(event_store: EventStore) -> None:
    rejections = [{"index": 3, "reason": "eventTime: not a date-time", "retriable": False}]
    new = [ev(i) for i in range(3)]

    batch_id = event_store.add_posted_batch(
        "snap", new, received=4, rejections=rejections, snapshot=True, now=T0
    )

    batch = event_store.get_batch(batch_id)
    assert batch.definition == "snap"
    assert batch.kind is BatchKind.POSTED
    assert batch.status is BatchStatus.SEALED  # a post is complete as soon as it is stored
    assert (batch.received_count, batch.accepted_count, batch.rejected_count) == (4, 3, 1)
    assert batch.rejections == rejections
    assert batch.received_at == T0
    assert batch.sealed_at == T0
    assert batch.partition_key == str(batch_id)
    # a snapshot with a rejected event does not describe everything: it is not whole
    assert batch.whole_snapshot is False

    stored = list(event_store.iter_events(batch_id))
    assert [e.position for e in stored] == [0, 1, 2]
    assert [e.raw for e in stored] == [e.raw for e in new]
    assert [e.job_name for e in stored] == ["job_0", "job_1", "job_2"]
    assert [e.run_id for e in stored] == ["run-0", "run-1", "run-2"]
    assert stored[1].event_time == T0 + timedelta(seconds=1)
    assert stored[0].event_time.tzinfo is not None


@pytest.mark.parametrize(
    ("snapshot", "rejections", "whole"),
    [
        (True, [], True),
        (True, [{"index": 0, "reason": "bad"}], False),
        (False, [], False),
        (False, [{"index": 0, "reason": "bad"}], False),
    ],
)
def test_whole_snapshot_only_for_a_snapshot_without_rejections(
    event_store: EventStore, snapshot: bool, rejections: list[dict], whole: bool
) -> None:
    batch_id = event_store.add_posted_batch(
        "snap", [ev(1)], received=1 + len(rejections), rejections=rejections, snapshot=snapshot
    )
    assert event_store.get_batch(batch_id).whole_snapshot is whole


def test_empty_posted_batch_is_still_a_batch(event_store: EventStore) -> None:
    batch_id = event_store.add_posted_batch("snap", [], received=0, snapshot=True)

    batch = event_store.get_batch(batch_id)
    assert (batch.received_count, batch.accepted_count, batch.rejected_count) == (0, 0, 0)
    assert batch.status is BatchStatus.SEALED
    assert list(event_store.iter_events(batch_id)) == []


def test_posted_batches_get_increasing_ids(event_store: EventStore) -> None:
    ids = [event_store.add_posted_batch("snap", [ev(i)], received=1) for i in range(4)]
    assert ids == sorted(ids)
    assert len(set(ids)) == 4


def test_unknown_batch_is_a_key_error(event_store: EventStore) -> None:
    with pytest.raises(KeyError, match="12345"):
        event_store.get_batch(12345)


# -- a crash mid-write leaves nothing -------------------------------------------------------------


def test_failing_event_row_leaves_no_half_batch(event_store: EventStore) -> None:
    kept = event_store.add_posted_batch("snap", [ev(0)], received=1)
    # the third event cannot be stored (raw is NOT NULL): the rows before it were already sent
    bad = NewEvent(None, "run", "COMPLETE", T0, None, "etl", "j", "r")  # type: ignore[arg-type]

    with pytest.raises(Exception):  # noqa: B017 - whatever the driver raises
        event_store.add_posted_batch("snap", [ev(1), ev(2), bad, ev(3)], received=4)

    assert [b.id for b in event_store.batches()] == [kept]
    assert count_rows(event_store, schema.batches) == 1
    assert count_rows(event_store, schema.events) == 1


def test_crash_after_events_insert_leaves_no_batch(event_store: EventStore) -> None:
    """The events were inserted, then the process "dies" before the commit."""

    class Crash(RuntimeError):
        pass

    seen: list[int] = []

    def crash_before_commit(conn) -> None:
        # however they were inserted (a binary COPY on PostgreSQL), the events are there
        seen.append(conn.exec_driver_sql("SELECT count(*) FROM ol_events").scalar_one())
        raise Crash("killed mid-write")

    event.listen(event_store.engine, "commit", crash_before_commit)
    try:
        with pytest.raises(Crash):
            event_store.add_posted_batch("snap", [ev(i) for i in range(50)], received=50)
    finally:
        event.remove(event_store.engine, "commit", crash_before_commit)
    assert seen == [50]

    assert event_store.batches() == []
    assert count_rows(event_store, schema.batches) == 0
    assert count_rows(event_store, schema.events) == 0
    # the store is still usable afterwards
    batch_id = event_store.add_posted_batch("snap", [ev(0)], received=1)
    assert [e.raw for e in event_store.iter_events(batch_id)] == [ev(0).raw]


def test_crash_mid_stream_append_keeps_the_earlier_events(event_store: EventStore) -> None:
    batch_id = event_store.add_stream_events("add", [ev(0), ev(1)], received=2)
    bad = NewEvent(None, "run", "COMPLETE", T0, None, "etl", "j", "r")  # type: ignore[arg-type]

    with pytest.raises(Exception):  # noqa: B017
        event_store.add_stream_events("add", [ev(2), bad], received=2)

    batch = event_store.get_batch(batch_id)
    assert (batch.received_count, batch.accepted_count) == (2, 2)
    assert [e.raw for e in event_store.iter_events(batch_id)] == [ev(0).raw, ev(1).raw]
    # the next append continues at the right position
    assert event_store.add_stream_events("add", [ev(5)], received=1) == batch_id
    assert [e.position for e in event_store.iter_events(batch_id)] == [0, 1, 2]


# -- stream batches -------------------------------------------------------------------------------


def test_stream_events_accumulate_in_one_open_batch(event_store: EventStore) -> None:
    first = event_store.add_stream_events("add", [ev(0)], received=1, now=T0)
    second = event_store.add_stream_events(
        "add",
        [ev(1), ev(2)],
        received=3,
        rejections=[{"index": 0, "reason": "missing run"}],
        now=T0 + timedelta(seconds=5),
    )
    third = event_store.add_stream_events(
        "add", [], received=1, rejections=[{"index": 0, "reason": "bad"}], now=T0
    )

    assert first == second == third
    batch = event_store.get_batch(first)
    assert batch.kind is BatchKind.STREAM
    assert batch.status is BatchStatus.OPEN
    assert batch.sealed_at is None
    assert batch.received_at == T0  # the window starts with the first event
    assert (batch.received_count, batch.accepted_count, batch.rejected_count) == (5, 3, 2)
    assert [r["reason"] for r in batch.rejections] == ["missing run", "bad"]
    assert batch.whole_snapshot is False
    events = list(event_store.iter_events(first))
    assert [e.position for e in events] == [0, 1, 2]
    assert [e.raw for e in events] == [ev(0).raw, ev(1).raw, ev(2).raw]


def test_stream_batches_are_separate_per_definition(event_store: EventStore) -> None:
    a1 = event_store.add_stream_events("add", [ev(0)], received=1)
    s1 = event_store.add_stream_events("snap", [ev(1)], received=1)
    a2 = event_store.add_stream_events("add", [ev(2)], received=1)

    assert a1 == a2
    assert s1 != a1
    assert [e.raw for e in event_store.iter_events(a1)] == [ev(0).raw, ev(2).raw]
    assert [e.raw for e in event_store.iter_events(s1)] == [ev(1).raw]
    assert event_store.get_batch(s1).definition == "snap"


def test_posted_batch_does_not_join_the_open_stream_batch(event_store: EventStore) -> None:
    stream = event_store.add_stream_events("add", [ev(0)], received=1)
    posted = event_store.add_posted_batch("add", [ev(1)], received=1)

    assert posted != stream
    assert event_store.get_batch(stream).accepted_count == 1
    assert event_store.add_stream_events("add", [ev(2)], received=1) == stream


def test_sealed_stream_batch_is_not_appended_to(event_store: EventStore) -> None:
    first = event_store.add_stream_events("add", [ev(0)], received=1, now=T0)
    assert event_store.seal_due("add", window_seconds=0, max_events=10, now=T0) == [first]

    second = event_store.add_stream_events("add", [ev(1)], received=1, now=T0)

    assert second != first
    assert event_store.get_batch(first).accepted_count == 1
    assert event_store.get_batch(second).status is BatchStatus.OPEN


# -- sealing --------------------------------------------------------------------------------------


def test_seal_due_by_window_age(event_store: EventStore) -> None:
    batch_id = event_store.add_stream_events("add", [ev(0)], received=1, now=T0)

    early = event_store.seal_due(
        "add", window_seconds=60, max_events=100, now=T0 + timedelta(seconds=59)
    )
    assert early == []
    assert event_store.get_batch(batch_id).status is BatchStatus.OPEN

    due = T0 + timedelta(seconds=60)
    assert event_store.seal_due("add", window_seconds=60, max_events=100, now=due) == [batch_id]
    batch = event_store.get_batch(batch_id)
    assert batch.status is BatchStatus.SEALED
    assert batch.sealed_at == due
    # sealing again finds nothing to do
    assert event_store.seal_due("add", window_seconds=60, max_events=100, now=due) == []


def test_seal_due_by_size(event_store: EventStore) -> None:
    batch_id = event_store.add_stream_events("add", [ev(0), ev(1)], received=2, now=T0)

    assert event_store.seal_due("add", window_seconds=3600, max_events=3, now=T0) == []
    assert event_store.get_batch(batch_id).status is BatchStatus.OPEN

    event_store.add_stream_events("add", [ev(2)], received=1, now=T0)
    assert event_store.seal_due("add", window_seconds=3600, max_events=3, now=T0) == [batch_id]
    assert event_store.get_batch(batch_id).status is BatchStatus.SEALED


def test_rejected_events_do_not_count_towards_the_size_limit(event_store: EventStore) -> None:
    event_store.add_stream_events(
        "add", [ev(0)], received=5, rejections=[{"index": i} for i in range(4)], now=T0
    )
    assert event_store.seal_due("add", window_seconds=3600, max_events=2, now=T0) == []


def test_seal_due_force(event_store: EventStore) -> None:
    batch_id = event_store.add_stream_events("add", [ev(0)], received=1, now=T0)

    sealed = event_store.seal_due("add", window_seconds=3600, max_events=100, now=T0, force=True)

    assert sealed == [batch_id]
    assert event_store.get_batch(batch_id).status is BatchStatus.SEALED


def test_seal_due_touches_only_its_definition_and_open_batches(event_store: EventStore) -> None:
    posted = event_store.add_posted_batch("add", [ev(0)], received=1, now=T0)
    other = event_store.add_stream_events("snap", [ev(1)], received=1, now=T0)

    assert event_store.seal_due("add", window_seconds=0, max_events=1, now=T0, force=True) == []
    assert event_store.get_batch(other).status is BatchStatus.OPEN
    event_store.set_status(posted, BatchStatus.SYNCED)
    assert event_store.seal_due("add", window_seconds=0, max_events=1, now=T0, force=True) == []
    assert event_store.get_batch(posted).status is BatchStatus.SYNCED


def test_seal_due_uses_the_current_time_by_default(event_store: EventStore) -> None:
    old = datetime.now(UTC) - timedelta(minutes=10)
    batch_id = event_store.add_stream_events("add", [ev(0)], received=1, now=old)
    young = event_store.add_stream_events("snap", [ev(1)], received=1)

    assert event_store.seal_due("add", window_seconds=60, max_events=100) == [batch_id]
    assert event_store.seal_due("snap", window_seconds=60, max_events=100) == []
    assert event_store.get_batch(young).status is BatchStatus.OPEN


# -- reading batches ------------------------------------------------------------------------------


def test_batches_ordering_and_filters(event_store: EventStore) -> None:
    a1 = event_store.add_posted_batch("add", [ev(0)], received=1)
    s1 = event_store.add_posted_batch("snap", [ev(1)], received=1)
    stream = event_store.add_stream_events("add", [ev(2)], received=1)
    a2 = event_store.add_posted_batch("add", [ev(3)], received=1)
    s2 = event_store.add_posted_batch("snap", [ev(4)], received=1)
    event_store.set_status(a1, BatchStatus.SYNCED)
    event_store.set_status(s1, BatchStatus.FAILED)

    assert [b.id for b in event_store.batches()] == [a1, s1, stream, a2, s2]
    assert [b.id for b in event_store.batches("add")] == [a1, stream, a2]
    assert [b.id for b in event_store.batches("snap")] == [s1, s2]
    assert [b.id for b in event_store.batches("nobody")] == []
    assert [b.id for b in event_store.batches("add", statuses=[BatchStatus.SEALED])] == [a2]
    assert [b.id for b in event_store.batches("add", statuses=[BatchStatus.OPEN])] == [stream]
    assert [
        b.id for b in event_store.batches(statuses=[BatchStatus.SYNCED, BatchStatus.FAILED])
    ] == [a1, s1]
    assert [b.id for b in event_store.batches(statuses=[])] == []
    assert [b.id for b in event_store.batches(after_id=s1)] == [stream, a2, s2]
    assert [b.id for b in event_store.batches("snap", after_id=s1)] == [s2]
    assert [b.id for b in event_store.batches(limit=2)] == [a1, s1]
    assert [b.id for b in event_store.batches(after_id=a1, limit=2)] == [s1, stream]
    assert [
        b.id for b in event_store.batches("add", statuses=[BatchStatus.SEALED], after_id=a2)
    ] == []


# -- reading events -------------------------------------------------------------------------------


def test_iter_events_crosses_chunk_boundaries_in_order(event_store: EventStore) -> None:
    n = 2 * events_module.READ_CHUNK + 37
    assert n > 2_000
    new = [ev(i) for i in range(n)]
    # appended in three uneven parts, so positions continue across appends
    batch_id = event_store.add_stream_events("add", new[:1500], received=1500)
    event_store.add_stream_events("add", new[1500:4001], received=2501)
    event_store.add_stream_events("add", new[4001:], received=n - 4001)
    other = event_store.add_posted_batch("snap", [ev(i) for i in range(10)], received=10)

    got = list(event_store.iter_events(batch_id))

    assert len(got) == n
    assert [e.position for e in got] == list(range(n))
    assert [e.raw for e in got] == [e.raw for e in new]
    assert len(list(event_store.iter_events(other))) == 10
    # what normalizing reads: the same events, without their other columns
    assert list(event_store.raw_events(batch_id)) == [e.raw for e in new]
    assert len(list(event_store.raw_events(other))) == 10


def test_iter_events_exactly_one_chunk(event_store: EventStore) -> None:
    n = events_module.READ_CHUNK
    batch_id = event_store.add_posted_batch("add", [ev(i) for i in range(n)], received=n)

    assert [e.position for e in event_store.iter_events(batch_id)] == list(range(n))
    assert len(list(event_store.raw_events(batch_id))) == n


def test_event_counts(event_store: EventStore) -> None:
    batch_id = event_store.add_posted_batch(
        "add",
        [
            ev(0, event_type="START", producer="p/spark"),
            ev(1, event_type="COMPLETE", producer="p/spark"),
            ev(2, event_type="COMPLETE", producer="p/airflow"),
            ev(3, kind="job", event_type=None, producer="p/airflow"),
            ev(4, kind="dataset", event_type=None, producer=None),
        ],
        received=5,
    )
    event_store.add_posted_batch("add", [ev(9, event_type="FAIL")], received=1)
    statements: list[str] = []

    def seen(_conn, _cursor, statement, *_args) -> None:  # noqa: ANN001 - SQLAlchemy's hook
        statements.append(statement)

    event.listen(event_store.engine, "before_cursor_execute", seen)
    try:
        counts = event_store.event_counts(batch_id)
    finally:
        event.remove(event_store.engine, "before_cursor_execute", seen)

    assert counts == {
        "kind": {"dataset": 1, "job": 1, "run": 3},
        "eventType": {"(none)": 2, "COMPLETE": 2, "START": 1},
        "producer": {"(none)": 1, "p/airflow": 2, "p/spark": 2},
    }
    assert [list(split) for split in counts.values()] == [
        ["dataset", "job", "run"],
        ["(none)", "COMPLETE", "START"],
        ["(none)", "p/airflow", "p/spark"],
    ]
    # the batch's events are read once: each read of these columns walks every event's JSON
    assert len([s for s in statements if "ol_events" in s]) == 1


def test_event_counts_of_an_empty_batch(event_store: EventStore) -> None:
    batch_id = event_store.add_posted_batch("add", [], received=0)
    assert event_store.event_counts(batch_id) == {"kind": {}, "eventType": {}, "producer": {}}


def test_job_namespaces(event_store: EventStore) -> None:
    batch_id = event_store.add_posted_batch(
        "add",
        [
            ev(0, job_namespace="features"),
            ev(1, job_namespace="etl"),
            ev(2, job_namespace="features"),
            ev(3, kind="dataset", job_namespace=None),
        ],
        received=4,
    )
    event_store.add_posted_batch("add", [ev(4, job_namespace="other")], received=1)

    assert event_store.job_namespaces(batch_id) == ["etl", "features"]


# -- statuses and results -------------------------------------------------------------------------


def test_record_upload_cleanup_and_status_round_trip(event_store: EventStore) -> None:
    batch_id = event_store.add_posted_batch("snap", [ev(0)], received=1, snapshot=True)
    cutoff = datetime(2026, 11, 1, 3, 4, 5, 123456, tzinfo=UTC)
    result = {"jobs": 3, "datasets": {"created": 2, "updated": 1}, "errors": []}
    report = {
        "mode": "SNAPSHOT",
        "cutoff": cutoff.isoformat(),
        "skippedReason": None,
        "calls": [{"target": "jobs", "dryRun": {"job": 1}, "real": {"job": 1}}],
        "removedJobs": ["etl.old"],
    }

    event_store.record_upload(batch_id, cutoff=cutoff, result=result)
    event_store.record_cleanup(batch_id, report)
    synced_at = T0 + timedelta(hours=1)
    event_store.set_status(batch_id, BatchStatus.SYNCED, now=synced_at)

    batch = event_store.get_batch(batch_id)
    assert batch.cutoff == cutoff
    assert batch.upload_result == result
    assert batch.cleanup_report == report
    assert batch.status is BatchStatus.SYNCED
    assert batch.synced_at == synced_at


def test_cutoff_in_another_timezone_is_stored_as_utc(event_store: EventStore) -> None:
    batch_id = event_store.add_posted_batch("snap", [], received=0)
    plus_two = timezone(timedelta(hours=2))
    event_store.record_upload(
        batch_id, cutoff=datetime(2026, 11, 1, 5, 0, tzinfo=plus_two), result={}
    )
    assert event_store.get_batch(batch_id).cutoff == datetime(2026, 11, 1, 3, 0, tzinfo=UTC)


def test_failed_status_keeps_events_and_sets_no_synced_time(event_store: EventStore) -> None:
    batch_id = event_store.add_posted_batch("snap", [ev(0), ev(1)], received=2)

    event_store.set_status(batch_id, BatchStatus.FAILED)

    batch = event_store.get_batch(batch_id)
    assert batch.status is BatchStatus.FAILED
    assert batch.synced_at is None
    assert len(list(event_store.iter_events(batch_id))) == 2
    # a retry may bring it back
    event_store.set_status(batch_id, BatchStatus.SYNCED)
    batch = event_store.get_batch(batch_id)
    assert batch.synced_at is not None
    assert abs(batch.synced_at - datetime.now(UTC)) < timedelta(minutes=5)


def test_updates_touch_only_their_batch(event_store: EventStore) -> None:
    a = event_store.add_posted_batch("snap", [], received=0)
    b = event_store.add_posted_batch("snap", [], received=0)

    event_store.record_cleanup(a, {"mode": "X"})
    event_store.set_status(a, BatchStatus.SYNCED)

    other = event_store.get_batch(b)
    assert other.cleanup_report is None
    assert other.status is BatchStatus.SEALED


def test_data_survives_reopening(store_url: str) -> None:
    store = EventStore(store_url)
    batch_id = store.add_posted_batch("snap", [ev(0), ev(1)], received=2, snapshot=True)
    stream_id = store.add_stream_events("add", [ev(2)], received=1)
    store.dispose()

    reopened = EventStore(store_url)
    try:
        assert [b.id for b in reopened.batches()] == [batch_id, stream_id]
        assert reopened.get_batch(batch_id).whole_snapshot is True
        assert [e.raw for e in reopened.iter_events(batch_id)] == [ev(0).raw, ev(1).raw]
        # the open stream batch is still the one single events go to
        assert reopened.add_stream_events("add", [ev(3)], received=1) == stream_id
    finally:
        reopened.dispose()


# -- schema versions ------------------------------------------------------------------------------


def _recorded_version(store: EventStore) -> int:
    with store.engine.connect() as conn:
        return int(
            conn.execute(
                select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")
            ).scalar_one()
        )


def test_fresh_store_is_at_the_current_version(event_store: EventStore) -> None:
    assert event_store.schema_version == schema.SCHEMA_VERSION
    assert _recorded_version(event_store) == schema.SCHEMA_VERSION
    with event_store.engine.connect() as conn:
        tables = set(inspect(conn).get_table_names())
    assert {"ol_store_meta", "ol_batches", "ol_events"} <= tables


def test_reopening_keeps_the_version(store_url: str) -> None:
    first = EventStore(store_url)
    first.dispose()
    second = EventStore(store_url)
    try:
        assert second.schema_version == schema.SCHEMA_VERSION
        assert _recorded_version(second) == schema.SCHEMA_VERSION
        with second.engine.connect() as conn:
            n = conn.execute(select(func.count()).select_from(schema.meta)).scalar_one()
        assert n == 1  # the version row is updated, not duplicated
    finally:
        second.dispose()


def test_newer_store_is_refused(store_url: str) -> None:
    store = EventStore(store_url)
    batch_id = store.add_posted_batch("snap", [ev(0)], received=1)
    newer = schema.SCHEMA_VERSION + 1
    with store.engine.begin() as conn:
        conn.execute(
            schema.meta.update()
            .where(schema.meta.c.key == "schema_version")
            .values(value=str(newer))
        )
    store.dispose()

    with pytest.raises(StoreVersionError, match=str(newer)):
        EventStore(store_url)

    # the refused store was not touched
    engine = open_engine(store_url)
    try:
        with engine.connect() as conn:
            version = conn.execute(
                select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")
            ).scalar_one()
            ids = conn.execute(select(schema.batches.c.id)).scalars().all()
        assert int(version) == newer
        assert ids == [batch_id]
    finally:
        engine.dispose()


def test_older_store_is_migrated_on_open(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    old = EventStore(store_url)
    batch_id = old.add_posted_batch("snap", [ev(0)], received=1)
    old.dispose()
    cur = schema.SCHEMA_VERSION  # the simulation below upgrades from the current version

    calls: list[int] = []

    def to_v2(conn) -> None:
        calls.append(1)
        conn.execute(text("ALTER TABLE ol_batches ADD COLUMN note VARCHAR(200)"))
        conn.execute(text("CREATE TABLE ol_v2_extra (id INTEGER PRIMARY KEY, label VARCHAR(20))"))

    monkeypatch.setattr(schema, "SCHEMA_VERSION", cur + 1)
    monkeypatch.setattr(schema, "MIGRATIONS", {cur: to_v2})

    migrated = EventStore(store_url)
    try:
        assert calls == [1]
        assert migrated.schema_version == cur + 1
        assert _recorded_version(migrated) == cur + 1
        with migrated.engine.connect() as conn:
            insp = inspect(conn)
            assert "note" in {c["name"] for c in insp.get_columns("ol_batches")}
            assert "ol_v2_extra" in insp.get_table_names()
        # the data written before the upgrade is intact and readable
        assert [e.raw for e in migrated.iter_events(batch_id)] == [ev(0).raw]
    finally:
        migrated.dispose()

    # a second open finds the store current and does not migrate again
    again = EventStore(store_url)
    try:
        assert calls == [1]
        assert again.schema_version == cur + 1
    finally:
        again.dispose()


def test_failed_migration_leaves_the_store_at_its_old_version(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    EventStore(store_url).dispose()
    extra = Table("ol_v2_broken", MetaData(), Column("id", Integer, primary_key=True))

    def broken(conn) -> None:
        extra.create(conn)
        conn.execute(text("ALTER TABLE ol_batches ADD COLUMN half VARCHAR(10)"))
        raise RuntimeError("migration bug")

    cur = schema.SCHEMA_VERSION
    monkeypatch.setattr(schema, "SCHEMA_VERSION", cur + 1)
    monkeypatch.setattr(schema, "MIGRATIONS", {cur: broken})

    with pytest.raises(RuntimeError, match="migration bug"):
        EventStore(store_url)

    monkeypatch.setattr(schema, "SCHEMA_VERSION", cur)
    store = EventStore(store_url)
    try:
        assert store.schema_version == cur
        assert _recorded_version(store) == cur
        with store.engine.connect() as conn:
            insp = inspect(conn)
            assert "ol_v2_broken" not in insp.get_table_names()
            assert "half" not in {c["name"] for c in insp.get_columns("ol_batches")}
    finally:
        store.dispose()


def test_migrations_run_in_order_across_several_versions(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    EventStore(store_url).dispose()
    seen: list[int] = []

    def step(version: int):
        def run(conn) -> None:
            seen.append(version)
            conn.execute(
                text(f"CREATE TABLE ol_step_{version} (id INTEGER PRIMARY KEY, v VARCHAR(5))")
            )

        return run

    cur = schema.SCHEMA_VERSION
    monkeypatch.setattr(schema, "SCHEMA_VERSION", cur + 3)
    monkeypatch.setattr(schema, "MIGRATIONS", {cur: step(1), cur + 1: step(2), cur + 2: step(3)})

    store = EventStore(store_url)
    try:
        assert seen == [1, 2, 3]
        assert store.schema_version == cur + 3
        assert _recorded_version(store) == cur + 3
    finally:
        store.dispose()


# -- SQLite specifics -----------------------------------------------------------------------------


def test_sqlite_store_uses_wal(tmp_path: Path) -> None:
    store = EventStore(f"sqlite:///{tmp_path / 'nested' / 'dir' / 'store.db'}")
    try:
        with store.engine.connect() as conn:
            mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar_one()
            fks = conn.exec_driver_sql("PRAGMA foreign_keys").scalar_one()
        assert str(mode).lower() == "wal"
        assert fks == 1
        assert (tmp_path / "nested" / "dir" / "store.db").exists()
    finally:
        store.dispose()


def _wal_bytes(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return wal.stat().st_size if wal.exists() else 0


@pytest.mark.parametrize("background", [False, True])
def test_a_receiver_store_checkpoints_its_wal_in_the_background(
    tmp_path: Path, background: bool
) -> None:
    """The receiver's store leaves WAL checkpoints to a background thread instead of the commit
    of a post: the WAL still does not grow without end (it would reach the 24 MB written here
    with no checkpoint at all), every batch is readable from another connection, and the data
    is in the database file once the store is closed."""
    path = tmp_path / "store.db"
    store = EventStore(f"sqlite:///{path}", background_checkpoints=background)
    big = [ev(i, raw=json.dumps({"i": i, "pad": "x" * 3000}).encode()) for i in range(400)]
    ids, peak = [], 0
    try:
        for _ in range(20):  # 20 posts of ~1.2 MB
            ids.append(store.add_posted_batch("snap", big, received=len(big)))
            time.sleep(0.05)  # what separates a producer's posts; the checkpoint runs meanwhile
            peak = max(peak, _wal_bytes(path))
        assert peak < 8 * 2**20, f"the WAL reached {peak / 2**20:.1f} MiB"
        other = EventStore(f"sqlite:///{path}")
        try:
            assert [b.id for b in other.batches()] == ids
            assert sum(b.accepted_count for b in other.batches()) == 20 * 400
        finally:
            other.dispose()
    finally:
        store.dispose()
    # closed: everything checkpointed into the database file
    raw = sqlite3.connect(path)
    try:
        busy, log_frames, done = raw.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert busy == 0 and log_frames == done
        assert raw.execute("SELECT count(*) FROM ol_events").fetchone()[0] == 20 * 400
    finally:
        raw.close()


def test_without_a_checkpointer_the_receiver_engine_never_checkpoints(tmp_path: Path) -> None:
    """The control for the test above: the engine the receiver's store opens does not checkpoint
    on commit, so the background thread is what keeps its WAL bounded."""
    path = tmp_path / "store.db"
    EventStore(f"sqlite:///{path}").dispose()
    engine = open_engine(f"sqlite:///{path}", wal_autocheckpoint=False)
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE pad (v TEXT)"))
        for _ in range(10):
            with engine.begin() as conn:
                conn.execute(text("INSERT INTO pad VALUES (:v)"), [{"v": "y" * 4000}] * 300)
        assert _wal_bytes(path) > 10 * 2**20
    finally:
        engine.dispose()


def test_two_sqlite_store_objects_share_one_open_stream_batch(tmp_path: Path) -> None:
    """Two processes (here: two engines) on one file append to the same open stream batch."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    one, two = EventStore(url), EventStore(url)
    try:
        a = one.add_stream_events("add", [ev(0)], received=1)
        b = two.add_stream_events("add", [ev(1)], received=1)
        assert a == b
        assert [e.raw for e in one.iter_events(a)] == [ev(0).raw, ev(1).raw]
    finally:
        one.dispose()
        two.dispose()


def _turn_back(store: EventStore, version: int, *statements: str) -> None:
    """Make a current store look like one written at ``version`` (the DDL undoes the later
    steps), then close it, so that the next open runs the real migrations from there."""
    with store.engine.begin() as conn:
        for statement in statements:
            conn.execute(text(statement))
        conn.execute(
            schema.meta.update()
            .where(schema.meta.c.key == "schema_version")
            .values(value=str(version))
        )
    store.dispose()


def test_a_version_1_store_gains_retry_bookkeeping_on_open(store_url: str) -> None:
    """The real v1 -> v2 migration: a store written before retries existed keeps its batches and
    gets the attempts / next_attempt_at columns, so failed syncs can be retried."""
    store = EventStore(store_url)
    batch_id = store.add_posted_batch("snap", [ev(0)], received=1)
    _turn_back(
        store,
        1,
        "ALTER TABLE ol_batches DROP COLUMN attempts",
        "ALTER TABLE ol_batches DROP COLUMN next_attempt_at",
    )

    upgraded = EventStore(store_url)
    try:
        assert upgraded.schema_version == schema.SCHEMA_VERSION >= 2
        batch = upgraded.get_batch(batch_id)
        assert batch.attempts == 0 and batch.next_attempt_at is None
        upgraded.set_status(batch_id, BatchStatus.FAILED)
        failed = upgraded.get_batch(batch_id)
        assert failed.attempts == 1 and failed.next_attempt_at is not None
        assert [e.raw for e in upgraded.iter_events(batch_id)] == [ev(0).raw]
    finally:
        upgraded.dispose()


def test_a_version_3_store_loses_the_job_index_and_then_stores_long_job_names(
    store_url: str,
) -> None:
    """The real v3 -> v4 migration: the (job_namespace, job_name) index a version-3 store has is
    dropped, after which a 3,000-character job name, which PostgreSQL's btree index refused, is
    stored (as it always was on SQLite)."""
    store = EventStore(store_url)
    batch_id = store.add_posted_batch("snap", [ev(0)], received=1)
    _turn_back(store, 3, "CREATE INDEX ix_ol_events_job ON ol_events (job_namespace, job_name)")

    upgraded = EventStore(store_url)
    try:
        assert upgraded.schema_version == schema.SCHEMA_VERSION >= 4
        with upgraded.engine.connect() as conn:
            indexes = {i["name"] for i in inspect(conn).get_indexes("ol_events")}
        assert "ix_ol_events_job" not in indexes
        assert "ix_ol_events_batch_position" in indexes
        name = "".join(f"{i:05d}" for i in range(600))  # 3,000 characters, little to compress
        long = ev(1, job_name=name)
        second = upgraded.add_posted_batch("snap", [long], received=1)
        assert [e.job_name for e in upgraded.iter_events(second)] == [name]
        assert [e.raw for e in upgraded.iter_events(batch_id)] == [ev(0).raw]
    finally:
        upgraded.dispose()


def _raw_compression(store: EventStore) -> str:
    with store.engine.connect() as conn:
        return conn.execute(
            text(
                "SELECT attcompression FROM pg_attribute "
                "WHERE attrelid = 'ol_events'::regclass AND attname = 'raw'"
            )
        ).scalar_one()


@pytest.mark.postgres
def test_postgres_keeps_raw_events_with_lz4_new_and_migrated_stores(pg_url: str) -> None:
    """lz4 ('l') on a new store and on a version-4 store once opened (pglz, 'p', or the server
    default, '', before); the events written before and after read back byte for byte."""
    store = EventStore(pg_url)
    assert _raw_compression(store) == "l"
    before = store.add_posted_batch("snap", [ev(0)], received=1)
    _turn_back(store, 4, "ALTER TABLE ol_events ALTER COLUMN raw SET COMPRESSION pglz")
    upgraded = EventStore(pg_url)
    try:
        assert upgraded.schema_version == schema.SCHEMA_VERSION >= 5
        assert _raw_compression(upgraded) == "l"
        big = ev(1, raw=json.dumps({"i": 1, "sql": "select 1 -- é" * 2000}).encode())
        after = upgraded.add_posted_batch("snap", [big], received=1)
        assert [e.raw for e in upgraded.iter_events(before)] == [ev(0).raw]
        assert [e.raw for e in upgraded.iter_events(after)] == [big.raw]
    finally:
        upgraded.dispose()


def test_events_keep_every_field_through_the_bulk_insert(event_store: EventStore) -> None:
    """The posted batch's insert (a binary COPY on PostgreSQL) keeps bytes, empty and missing
    fields, non-ASCII text and sub-second times exactly."""
    odd = NewEvent(
        raw=bytes(range(256)) + "ünï©ødé ✓".encode(),
        kind="dataset",
        event_type=None,
        event_time=datetime(2026, 11, 1, 2, 3, 4, 567891, tzinfo=UTC),
        producer=None,
        job_namespace=None,
        job_name=None,
        run_id=None,
    )
    plain = replace(ev(7), job_name="jöb ' \\ \t \n", producer="")
    batch_id = event_store.add_posted_batch("snap", [odd, plain], received=2)
    stored = list(event_store.iter_events(batch_id))
    assert [
        (s.raw, s.kind, s.event_type, s.producer, s.job_namespace, s.job_name) for s in stored
    ] == [
        (odd.raw, "dataset", None, None, None, None),
        (plain.raw, "run", "COMPLETE", "", "etl", "jöb ' \\ \t \n"),
    ]
    assert [s.event_time for s in stored] == [odd.event_time, plain.event_time]
    assert [s.run_id for s in stored] == [None, "run-7"]


def test_failed_batches_are_due_for_retry_after_a_growing_backoff(event_store: EventStore) -> None:
    batch_id = event_store.add_posted_batch("snap", [ev(0)], received=1)
    t0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    event_store.set_status(batch_id, BatchStatus.FAILED, now=t0)
    assert event_store.due_retries("snap", now=t0) == []
    assert [b.id for b in event_store.due_retries("snap", now=t0 + timedelta(minutes=1))] == [
        batch_id
    ]
    event_store.set_status(batch_id, BatchStatus.FAILED, now=t0)  # the retry failed too
    assert event_store.due_retries("snap", now=t0 + timedelta(minutes=1)) == []
    assert event_store.get_batch(batch_id).attempts == 2
    assert event_store.due_retries("snap", now=t0 + timedelta(minutes=2))
    event_store.set_status(batch_id, BatchStatus.SYNCED, now=t0)
    assert event_store.due_retries("snap", now=t0 + timedelta(days=1)) == []


def test_json_columns_keep_what_orjson_refuses(store_url: str):
    """JSON columns are written by orjson for speed; an integer beyond 64 bits (which the
    receiver keeps in facets) is still written, as the standard library writes it."""
    store = EventStore(store_url)
    try:
        store.save_lineage_state("big", {"rows": 2**70, "ok": [1, 2]})
        assert store.lineage_state("big") == {"rows": 2**70, "ok": [1, 2]}
    finally:
        store.dispose()
