"""Retention never breaks a run: a batch holding an event of a run that has not ended, or of a run
another kept batch continues, is kept past ``keepDays``; the batches a run spans go together. On
SQLite and PostgreSQL (the ``event_store`` fixture)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from ol_dagster.store import BatchStatus, EventStore, NewEvent

LONG_AGO = datetime.now(UTC) - timedelta(days=30)
CUTOFF = datetime.now(UTC) - timedelta(days=7)
T0 = datetime(2026, 11, 1, 2, 0, 0, tzinfo=UTC)


def _event(run_id: str, event_type: str, job: str = "long") -> NewEvent:
    raw = json.dumps({"run": run_id, "eventType": event_type}).encode()
    return NewEvent(raw, "run", event_type, T0, None, "etl", job, run_id)


def _batch(store: EventStore, *events: NewEvent, synced: datetime | None = LONG_AGO) -> int:
    batch_id = store.add_posted_batch("d", list(events), received=len(events))
    if synced is not None:
        store.set_status(batch_id, BatchStatus.SYNCED, now=synced)
    return batch_id


def _purge(store: EventStore) -> list[int]:
    return store.purge_synced("d", before=CUTOFF)


def test_runs_that_ended_in_their_batch_go_as_before(event_store: EventStore):
    done = _batch(event_store, _event("r1", "START"), _event("r1", "COMPLETE"))
    failed = _batch(event_store, _event("r2", "FAIL"))
    aborted = _batch(event_store, _event("r3", "ABORT"), _event("r4", "COMPLETE", "other"))
    recent = _batch(event_store, _event("r5", "COMPLETE"), synced=datetime.now(UTC))
    assert _purge(event_store) == [done, failed, aborted]
    assert [b.id for b in event_store.batches("d")] == [recent]


def test_a_run_not_ended_keeps_its_batch(event_store: EventStore):
    start = _batch(event_store, _event("r", "START"), _event("other", "COMPLETE", "short"))
    running = _batch(event_store, _event("r", "RUNNING"))
    assert _purge(event_store) == []
    assert len(list(event_store.iter_events(start))) == 2  # whole: no partial purge

    # once the run ends, and that batch is past retention too, its batches go together
    end = _batch(event_store, _event("r", "COMPLETE"))
    assert _purge(event_store) == [start, running, end]


def test_a_pending_batch_that_continues_a_run_keeps_its_earlier_batches(event_store: EventStore):
    start = _batch(event_store, _event("r", "START"))
    pending = _batch(event_store, _event("r", "COMPLETE"), synced=None)  # sealed, not synced
    assert _purge(event_store) == []
    event_store.set_status(pending, BatchStatus.FAILED, now=LONG_AGO)  # failing is pending too
    assert _purge(event_store) == []
    event_store.set_status(pending, BatchStatus.SYNCED, now=LONG_AGO)
    assert _purge(event_store) == [start, pending]


def test_the_open_stream_batch_continues_a_run_too(event_store: EventStore):
    start = _batch(event_store, _event("r", "START"))
    event_store.add_stream_events("d", [_event("r", "RUNNING")], received=1)
    assert _purge(event_store) == []
    assert [b.id for b in event_store.batches("d")][0] == start


def test_a_run_continued_in_a_recent_batch_waits_for_it(event_store: EventStore):
    """The run ended in a batch synced within keepDays: its earlier batch waits, so the two go
    together (a re-run of the recent batch judges the run whole again)."""
    start = _batch(event_store, _event("r", "START"))
    end = _batch(event_store, _event("r", "COMPLETE"), synced=datetime.now(UTC))
    assert _purge(event_store) == []
    event_store.set_status(end, BatchStatus.SYNCED, now=LONG_AGO)
    assert _purge(event_store) == [start, end]


def test_batches_linked_by_runs_go_all_at_once_or_not_at_all(event_store: EventStore):
    """``a`` holds r's end; ``b`` holds r's middle and s's start; s is still running. Purging
    ``a`` alone would leave r's middle in ``b`` with no end: ``b`` kept for ever. So ``a`` waits
    for ``b``, and both go once s has ended."""
    a = _batch(event_store, _event("r", "START"), _event("r", "COMPLETE"))
    b = _batch(event_store, _event("r", "OTHER"), _event("s", "START", "stream"))
    assert _purge(event_store) == []
    c = _batch(event_store, _event("s", "COMPLETE", "stream"))
    assert _purge(event_store) == [a, b, c]


def test_runs_of_another_definition_neither_keep_nor_free_a_batch(event_store: EventStore):
    mine = _batch(event_store, _event("r", "START"))
    theirs = event_store.add_posted_batch("other", [_event("r", "COMPLETE")], received=1)
    event_store.set_status(theirs, BatchStatus.SYNCED, now=LONG_AGO)
    assert _purge(event_store) == []  # r has not ended in "d"
    assert event_store.purge_synced("other", before=CUTOFF) == [theirs]
    assert [b.id for b in event_store.batches("d")] == [mine]


def test_the_limit_counts_batches_and_keeps_a_linked_group_whole(event_store: EventStore):
    single = [_batch(event_store, _event(f"x{i}", "COMPLETE")) for i in range(3)]
    start = _batch(event_store, _event("r", "START"))
    end = _batch(event_store, _event("r", "COMPLETE"))
    assert event_store.purge_synced("d", before=CUTOFF, limit=2) == single[:2]
    assert event_store.purge_synced("d", before=CUTOFF, limit=2) == [single[2], start, end]


def test_retention_keeps_the_newest_synced_snapshot_for_a_late_older_one(event_store: EventStore):
    """The newest synced whole snapshot stays past keepDays: an older snapshot synced after it
    (a slower connection, a person syncing in another order) is still found SUPERSEDED by it."""

    def post(run_id: str, *, snapshot: bool, sequence: int) -> int:
        one = [_event(run_id, "COMPLETE")]
        return event_store.add_posted_batch(
            "d", one, received=1, snapshot=snapshot, sequence=sequence
        )

    older = post("r1", snapshot=True, sequence=1)
    newest = post("r2", snapshot=True, sequence=2)
    plain = post("r3", snapshot=False, sequence=9)  # not a whole snapshot: not ordered
    for batch_id in (newest, plain):
        event_store.set_status(batch_id, BatchStatus.SYNCED, now=LONG_AGO)

    assert _purge(event_store) == [plain]
    order = event_store.get_batch(older).order
    assert event_store.newer_synced_snapshot(order, "d") == newest
