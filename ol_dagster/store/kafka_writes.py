"""What one poll of the Kafka intake stores, in one transaction (``EventStore.add_kafka_write``).

A consumer stores the outcome of the messages it polled (stream events, whole snapshots, dead
letters) together with, per partition, the offset after the last message they cover. Each item
keeps its Kafka coordinates, so the store itself drops what an earlier transaction already
stored (offset below the stored one): a message re-delivered after a crash or a rebalance is
never stored twice, whichever consumer reads it again. Plain data: no Kafka client here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ol_dagster.store.event_rows import NewEvent


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """An accepted event of a stream topic: it joins its definition's open stream batch."""

    definition: str
    topic: str
    partition: int
    offset: int
    event: NewEvent


@dataclass(frozen=True, slots=True)
class SnapshotBatch:
    """The messages of one snapshot (from ``first_offset`` in one partition), stored as one
    sealed posted batch; ``whole``: every message accepted and as many as the
    end marker announced. ``sequence`` and ``produced_at`` order it among the definition's
    snapshots (``ol_dagster.snapshot_order``): its ol-snapshot-sequence, and the timestamp of
    its first message (None: the broker gave none, it is ordered by when it is stored)."""

    definition: str
    topic: str
    partition: int
    first_offset: int
    events: list[NewEvent]
    received: int
    rejections: list[dict]
    whole: bool
    sequence: int | None = None
    produced_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A message that is not an accepted event: where it was, why, and its first bytes."""

    definition: str
    topic: str
    partition: int
    offset: int
    reason: str
    raw: bytes
    raw_size: int


@dataclass(slots=True)
class KafkaWrite:
    stream: list[StreamEvent] = field(default_factory=list)
    snapshots: list[SnapshotBatch] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    # (topic, partition) -> the offset after the last message these items cover
    next_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    # what the consumer logs as warnings once the write is stored (a snapshot cut by a bound)
    warnings: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.next_offsets)


@dataclass(slots=True)
class KafkaStored:
    """What a write stored (items an earlier write had stored are ``skipped``)."""

    events: int = 0
    snapshot_batches: list[int] = field(default_factory=list)
    stream_batches: dict[str, int] = field(default_factory=dict)
    dead_letters: int = 0
    skipped: int = 0
