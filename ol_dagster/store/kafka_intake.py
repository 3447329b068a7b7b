"""The store's side of the Kafka intake: one poll stored in one transaction, with its offsets.

What a poll stores is plain data (``store.kafka_writes``); here it is written: stream events into
each definition's open stream batch (``store.stream``), snapshots as sealed posted batches, dead
letters, and each partition's next offset, all in one transaction, so a message delivered again
after a crash or a rebalance is stored once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from sqlalchemy import ColumnElement, Connection, func, select, update
from sqlalchemy.exc import IntegrityError, OperationalError

from ol_dagster.store.base import StoreBase, StoreUnavailable, naive, utcnow
from ol_dagster.store.event_rows import event_values, insert_events
from ol_dagster.store.kafka_writes import DeadLetter as KafkaDeadLetter
from ol_dagster.store.kafka_writes import KafkaStored, KafkaWrite, SnapshotBatch
from ol_dagster.store.schema import (
    BatchKind,
    BatchStatus,
    batches,
    kafka_dead_letters,
    kafka_offsets,
)
from ol_dagster.store.stream import append_stream

# (topic, partition) -> the offset after the last message stored (None: nothing stored yet)
_Marks = dict[tuple[str, int], int | None]


def _write_kafka(
    conn: Connection,
    write: KafkaWrite,
    stream: Sequence[tuple],
    snapshots: Sequence[Sequence[tuple]],
    now: datetime,
) -> KafkaStored:
    """``EventStore.add_kafka_write`` in the caller's transaction. The partitions' rows are
    locked first (PostgreSQL: ``FOR UPDATE``; SQLite: the transaction's write lock), so two
    consumers handed the same messages by a rebalance store them once."""
    marks = _lock_marks(conn, write.next_offsets)

    def fresh(topic: str, partition: int, offset: int) -> bool:
        mark = marks.get((topic, partition))
        return mark is None or offset >= mark

    stored = KafkaStored()
    by_definition: dict[str, list[tuple]] = {}
    for item, values in zip(write.stream, stream, strict=True):
        if fresh(item.topic, item.partition, item.offset):
            by_definition.setdefault(item.definition, []).append(values)
        else:
            stored.skipped += 1
    for definition, values in by_definition.items():
        stored.stream_batches[definition] = append_stream(
            conn, definition, values, len(values), (), now
        )
        stored.events += len(values)
    for snap, values in zip(write.snapshots, snapshots, strict=True):
        if not fresh(snap.topic, snap.partition, snap.first_offset):
            stored.skipped += 1
            continue
        stored.snapshot_batches.append(_insert_snapshot(conn, snap, values, now))
        stored.events += len(values)
    letters = [d for d in write.dead_letters if fresh(d.topic, d.partition, d.offset)]
    letters = _not_stored(conn, letters)
    stored.skipped += len(write.dead_letters) - len(letters)
    if letters:
        _insert_dead_letters(conn, letters, now)
        stored.dead_letters = len(letters)
    _advance_marks(conn, write.next_offsets, marks, now)
    return stored


def _lock_marks(conn: Connection, next_offsets: Mapping[tuple[str, int], int]) -> _Marks:
    """The stored offset of each partition the write covers, its row locked, in one order."""
    o = kafka_offsets.c
    marks: _Marks = {}
    for topic, partition in sorted(next_offsets):
        marks[(topic, partition)] = conn.execute(
            select(o.next_offset)
            .where(o.topic == topic, o.partition == partition)
            .with_for_update()
        ).scalar()
    return marks


def _insert_snapshot(
    conn: Connection, snap: SnapshotBatch, values: Sequence[tuple], now: datetime
) -> int:
    """A snapshot as a sealed posted batch with its events; returns its id."""
    batch_id = conn.execute(
        batches.insert().values(
            definition=snap.definition,
            kind=BatchKind.POSTED,
            status=BatchStatus.SEALED,
            received_at=now,
            sealed_at=now,
            received_count=snap.received,
            accepted_count=len(values),
            rejected_count=len(snap.rejections),
            # as a post: a snapshot with a rejected message, or none accepted, is not whole
            whole_snapshot=snap.whole and not snap.rejections and bool(values),
            rejections=list(snap.rejections),
            snapshot_sequence=snap.sequence,
            ordered_at=naive(snap.produced_at) if snap.produced_at is not None else now,
        )
    ).inserted_primary_key[0]  # type: ignore[index]
    if values:
        insert_events(conn, batch_id, 0, values)
    return int(batch_id)


def _not_stored(conn: Connection, letters: Sequence[KafkaDeadLetter]) -> Sequence[KafkaDeadLetter]:
    """The dead letters not stored yet. A message without the snapshot header inside an open
    snapshot is stored at once, while its partition's offset stays before the snapshot: read
    again with it (a restart), it is found here."""
    if not letters:
        return letters
    d = kafka_dead_letters.c
    found: set[tuple[str, int, int]] = set()
    by_partition: dict[tuple[str, int], list[int]] = {}
    for letter in letters:
        by_partition.setdefault((letter.topic, letter.partition), []).append(letter.offset)
    for (topic, partition), offsets in by_partition.items():
        for start in range(0, len(offsets), 500):
            rows = conn.execute(
                select(d.message_offset).where(
                    d.topic == topic,
                    d.partition == partition,
                    d.message_offset.in_(offsets[start : start + 500]),
                )
            ).scalars()
            found.update((topic, partition, int(o)) for o in rows)
    return [x for x in letters if (x.topic, x.partition, x.offset) not in found]


def _insert_dead_letters(
    conn: Connection, letters: Sequence[KafkaDeadLetter], now: datetime
) -> None:
    conn.execute(
        kafka_dead_letters.insert(),
        [
            {
                "definition": d.definition,
                "topic": d.topic,
                "partition": d.partition,
                "message_offset": d.offset,
                "reason": d.reason,
                "raw": d.raw,
                "raw_size": d.raw_size,
                "received_at": now,
            }
            for d in letters
        ],
    )


def _advance_marks(
    conn: Connection,
    next_offsets: Mapping[tuple[str, int], int],
    marks: _Marks,
    now: datetime,
) -> None:
    """Each partition's stored offset moved to ``next_offsets``: forward only."""
    o = kafka_offsets.c
    for (topic, partition), next_offset in next_offsets.items():
        mark = marks[(topic, partition)]
        if mark is None:
            conn.execute(
                kafka_offsets.insert().values(
                    topic=topic, partition=partition, next_offset=next_offset, updated_at=now
                )
            )
        elif next_offset > mark:
            conn.execute(
                update(kafka_offsets)
                .where(o.topic == topic, o.partition == partition)
                .values(next_offset=next_offset, updated_at=now)
            )


class KafkaIntake(StoreBase):
    """Polls in, offsets and dead letters out."""

    def add_kafka_write(self, write: KafkaWrite, *, now: datetime | None = None) -> KafkaStored:
        """Store one poll of the Kafka intake in one transaction: its stream events (into each
        definition's open stream batch), its snapshots (each a sealed posted batch), its dead
        letters and each partition's next offset. An item below its partition's stored offset
        was stored by an earlier write (Kafka delivered it again) and is skipped; a partition's
        offset only moves forward."""
        now_n = naive(now or utcnow())
        dialect = self.engine.dialect
        # computed before the transaction, which on SQLite holds the only write lock
        stream = event_values(dialect, [s.event for s in write.stream])
        snapshots = [event_values(dialect, s.events) for s in write.snapshots]
        for _attempt in range(5):
            try:
                with self._turns.turn(), self.engine.begin() as conn:
                    stored = _write_kafka(conn, write, stream, snapshots, now_n)
                self._written()
                return stored
            except IntegrityError:
                continue  # another writer opened the stream batch, or a partition's first row
            except OperationalError as exc:
                raise StoreUnavailable(f"event store unreachable: {exc.orig}") from None
        raise StoreUnavailable("could not store the Kafka messages after repeated write conflicts")

    def kafka_offsets(self, topics: Iterable[str]) -> dict[tuple[str, int], int]:
        """(topic, partition) -> the offset after the last message stored, for these topics."""
        o = kafka_offsets.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(o.topic, o.partition, o.next_offset).where(o.topic.in_(list(topics)))
            ).all()
        return {(t, int(p)): int(n) for t, p, n in rows}

    def count_dead_letters(
        self, definition: str, *, after: datetime | None = None, until: datetime | None = None
    ) -> int:
        """How many dead letters of the definition were received in that window."""
        query = select(func.count()).select_from(kafka_dead_letters)
        with self.engine.connect() as conn:
            return int(
                conn.execute(query.where(*_letters_where(definition, after, until))).scalar_one()
            )

    def purge_dead_letters(self, definition: str, *, before: datetime) -> int:
        """Delete the definition's dead letters received before ``before`` (retention, as for
        synced batches); returns how many went."""
        d = kafka_dead_letters.c
        with self.engine.begin() as conn:
            gone = conn.execute(
                kafka_dead_letters.delete().where(
                    d.definition == definition, d.received_at < naive(before)
                )
            )
        return int(gone.rowcount or 0)

    def dead_letters(
        self,
        *,
        definition: str | None = None,
        limit: int = 1000,
        after: datetime | None = None,
        until: datetime | None = None,
    ) -> list[KafkaDeadLetter]:
        """The Kafka messages kept as dead letters, oldest first (received after ``after`` and
        up to ``until`` when given)."""
        query = select(kafka_dead_letters).order_by(kafka_dead_letters.c.id).limit(limit)
        query = query.where(*_letters_where(definition, after, until))
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return [
            KafkaDeadLetter(
                m["definition"],
                m["topic"],
                m["partition"],
                m["message_offset"],
                m["reason"],
                bytes(m["raw"] or b""),
                m["raw_size"],
            )
            for m in (r._mapping for r in rows)
        ]


def _letters_where(
    definition: str | None, after: datetime | None, until: datetime | None
) -> list[ColumnElement[bool]]:
    d = kafka_dead_letters.c
    where: list[ColumnElement[bool]] = []
    if definition is not None:
        where.append(d.definition == definition)
    if after is not None:
        where.append(d.received_at > naive(after))
    if until is not None:
        where.append(d.received_at <= naive(until))
    return where
