"""The producer's order of snapshots (``ol_dagster.snapshot_order``): the header's one form, the
one rule, and the store asking the same question in SQL on SQLite and PostgreSQL."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from ol_dagster.receiver.intake import sort_events
from ol_dagster.snapshot_order import (
    HTTP_HEADER,
    BadSequence,
    SnapshotOrder,
    newer,
    parse_sequence,
)
from ol_dagster.store import BatchStatus, EventStore
from ol_dagster.store.kafka_writes import KafkaWrite, SnapshotBatch
from ol_dagster_tests.conftest import run_event

T0 = datetime(2026, 11, 1, 2, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("0", 0), ("42", 42), (" 7 ", 7), ("007", 7), ("9" * 18, int("9" * 18))],
)
def test_a_sequence_is_a_decimal_integer(value: str, expected: int) -> None:
    assert parse_sequence(value, header=HTTP_HEADER) == expected


@pytest.mark.parametrize(
    "value",
    ["", " ", "-1", "+1", "1.5", "1e3", "0x10", "abc", "١٢", "²", "9" * 19, "2026-11-01T02:00:00Z"],
)
def test_anything_else_is_refused_with_the_header_and_the_value(value: str) -> None:
    with pytest.raises(BadSequence) as refused:
        parse_sequence(value, header=HTTP_HEADER)
    message = str(refused.value)
    assert message.startswith(f"{HTTP_HEADER} must be a decimal integer from 0 to ")
    assert repr(value) in message


def test_no_header_is_no_sequence() -> None:
    assert parse_sequence(None, header=HTTP_HEADER) is None


def test_the_rule() -> None:
    early, late = T0, T0 + timedelta(minutes=5)
    # a higher sequence is newer, whatever its time or the order it was stored in
    assert newer(SnapshotOrder(2, early, 1), SnapshotOrder(1, late, 2))
    # a snapshot with a sequence is newer than one without, whatever its time
    assert newer(SnapshotOrder(0, early, 1), SnapshotOrder(None, late, 2))
    # without sequences (or with equal ones): the later time, then the later stored
    assert newer(SnapshotOrder(None, late, 1), SnapshotOrder(None, early, 2))
    assert newer(SnapshotOrder(5, late, 1), SnapshotOrder(5, early, 2))
    assert newer(SnapshotOrder(None, early, 2), SnapshotOrder(None, early, 1))
    assert not newer(SnapshotOrder(None, early, 1), SnapshotOrder(None, early, 1))


def _snapshot(store: EventStore, sequence: int | None, at: datetime, *, kafka: bool) -> int:
    accepted = sort_events([run_event("etl", "load")], ["etl"]).accepted
    if not kafka:
        return store.add_posted_batch(
            "snap", accepted, received=1, snapshot=True, sequence=sequence, now=at
        )
    write = KafkaWrite(
        snapshots=[
            SnapshotBatch("snap", "t", 0, 0, accepted, 1, [], True, sequence, produced_at=at)
        ],
        next_offsets={},
    )
    (batch_id,) = store.add_kafka_write(write).snapshot_batches
    return batch_id


def test_the_store_finds_the_newest_synced_snapshot_by_the_same_rule(event_store: EventStore):
    """Random snapshots (with and without sequences, posted and from Kafka, synced or not):
    for each, the store names the newest synced snapshot that ``newer`` says is newer."""
    rng = random.Random(23)
    made = []
    for _ in range(40):
        sequence = rng.choice([None, None, rng.randrange(5), 10**17 + rng.randrange(3)])
        at = T0 + timedelta(seconds=rng.randrange(6))
        batch_id = _snapshot(event_store, sequence, at, kafka=rng.random() < 0.5)
        if rng.random() < 0.6:
            event_store.set_status(batch_id, BatchStatus.SYNCED)
        made.append(event_store.get_batch(batch_id))
    synced = [b for b in made if b.status is BatchStatus.SYNCED]
    for batch in made:
        newer_ones = [s for s in synced if newer(s.order, batch.order)]
        expected = max(newer_ones, key=lambda s: s.order.key()).id if newer_ones else None
        assert event_store.newer_synced_snapshot(batch.order, "snap") == expected, batch


def test_a_kafka_snapshot_without_a_timestamp_is_ordered_by_when_it_was_stored(
    event_store: EventStore,
):
    accepted = sort_events([run_event("etl", "load")], ["etl"]).accepted
    write = KafkaWrite(
        snapshots=[SnapshotBatch("snap", "t", 0, 0, accepted, 1, [], True)], next_offsets={}
    )
    stored = event_store.add_kafka_write(write, now=T0)
    batch = event_store.get_batch(stored.snapshot_batches[0])
    assert (batch.snapshot_sequence, batch.ordered_at) == (None, T0)
