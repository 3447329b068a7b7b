"""The batch lifecycle the Dagster sensors only wire (``sync.batch``): a failed run leaves its
batch FAILED for a retry, and retention purges synced batches only; on the real stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ol_dagster.receiver.intake import sort_events
from ol_dagster.settings import load_settings
from ol_dagster.store import BatchStatus, EventStore
from ol_dagster.store.kafka_writes import DeadLetter, KafkaWrite, StreamEvent
from ol_dagster.sync.batch import fail_run, kafka_rejections, purge_expired
from ol_dagster.sync.cleanup import RUN_FAILED
from ol_dagster_tests.conftest import run_event


def _batch(store: EventStore, definition: str) -> int:
    accepted = sort_events([run_event("etl", "daily")], ["*"]).accepted
    return store.add_posted_batch(definition, accepted, received=1)


def test_a_failed_run_leaves_its_batch_failed_once_and_never_a_synced_one(
    event_store, write_settings
):
    add = load_settings(write_settings()).definition("add")
    pending, synced = _batch(event_store, "add"), _batch(event_store, "add")
    other = _batch(event_store, "snap")
    event_store.set_status(synced, BatchStatus.SYNCED)

    assert fail_run(event_store, add, pending, "run-1")
    batch = event_store.get_batch(pending)
    assert batch.status is BatchStatus.FAILED
    assert batch.cleanup_report is not None
    assert batch.cleanup_report["skippedReason"] == RUN_FAILED
    assert batch.cleanup_report["runId"] == "run-1"
    # a second failure sensor tick (or the cleanup step's own report) is not overwritten
    assert not fail_run(event_store, add, pending, "run-2")
    assert event_store.get_batch(pending).cleanup_report["runId"] == "run-1"

    assert not fail_run(event_store, add, synced, "run-3")
    assert event_store.get_batch(synced).status is BatchStatus.SYNCED
    assert not fail_run(event_store, add, other, "run-4")  # another definition's batch
    assert event_store.get_batch(other).status is not BatchStatus.FAILED


def test_retention_purges_only_old_synced_batches(event_store, write_settings):
    add = load_settings(write_settings()).definition("add")
    old, recent, failed = (_batch(event_store, "add") for _ in range(3))
    long_ago = datetime.now(UTC) - timedelta(days=30)
    event_store.set_status(old, BatchStatus.SYNCED, now=long_ago)
    event_store.set_status(recent, BatchStatus.SYNCED)
    event_store.set_status(failed, BatchStatus.FAILED, now=long_ago)

    assert purge_expired(event_store, add, None) == []  # no keepDays: kept forever
    assert purge_expired(event_store, add, 7) == [old]
    assert {b.id for b in event_store.batches("add")} == {recent, failed}


def test_retention_purges_the_definitions_old_kafka_dead_letters(event_store, write_settings):
    """A topic of bad messages must not grow the store for ever: ``retention.keepDays`` removes
    the definition's dead letters older than that, as it removes synced batches."""
    add = load_settings(write_settings()).definition("add")
    long_ago = datetime.now(UTC) - timedelta(days=30)

    def letters(definition: str, offset: int, now: datetime | None = None) -> None:
        write = KafkaWrite()
        write.dead_letters.append(DeadLetter(definition, "t", 0, offset, "not JSON", b"x", 1))
        write.next_offsets[("t", 0)] = offset + 1
        event_store.add_kafka_write(write, now=now)

    letters("add", 0, long_ago)
    letters("snap", 1, long_ago)  # another definition's: its own retention decides
    letters("add", 2)

    assert purge_expired(event_store, add, None) == []
    assert len(event_store.dead_letters()) == 3  # no keepDays: kept forever
    purge_expired(event_store, add, 7)
    kept = [(d.definition, d.offset) for d in event_store.dead_letters()]
    assert kept == [("snap", 1), ("add", 2)]


def test_each_kafka_dead_letter_is_shown_with_one_stream_batch(event_store, write_settings):
    """A stream batch's page lists the dead letters received while it was the open one: those
    before the previous batch was sealed belong to that batch, none is shown twice."""
    t0 = datetime.now(UTC) - timedelta(hours=1)
    accepted = sort_events([run_event("etl", "daily")], ["*"]).accepted

    def poll(offset: int, at: datetime, *, good: bool) -> None:
        write = KafkaWrite()
        if good:
            write.stream.append(StreamEvent("add", "t", 0, offset, accepted[0]))
        else:
            write.dead_letters.append(DeadLetter("add", "t", 0, offset, f"bad {offset}", b"x", 1))
        write.next_offsets[("t", 0)] = offset + 1
        event_store.add_kafka_write(write, now=at)

    poll(0, t0, good=False)  # before any batch: the first batch's
    poll(1, t0 + timedelta(minutes=1), good=True)
    poll(2, t0 + timedelta(minutes=2), good=False)
    (first,) = event_store.seal_due(
        "add", now=t0 + timedelta(minutes=3), window_seconds=0, max_events=10
    )
    poll(3, t0 + timedelta(minutes=4), good=False)
    poll(4, t0 + timedelta(minutes=5), good=True)

    first_batch, second_batch = event_store.batches("add")
    assert first_batch.id == first
    shown = {
        b.id: [d.reason for d in kafka_rejections(event_store, b, limit=10).first]
        for b in (first_batch, second_batch)
    }
    assert shown == {first: ["bad 0", "bad 2"], second_batch.id: ["bad 3"]}
    assert kafka_rejections(event_store, second_batch, limit=10).count == 1
    # a posted batch has its own rejections, never Kafka's
    posted = event_store.get_batch(_batch(event_store, "add"))
    assert kafka_rejections(event_store, posted, limit=10).count == 0
