"""Batches of accepted events, written whole and read back in order.

A batch is the unit everything downstream works on: one Dagster partition, one run, one cleanup.
So a posted batch is visible whole or not at all: a small one is written in a single transaction; a
large one in short transactions of ``POSTED_CHUNK`` events under the status RECEIVING, which
nothing reads (the sync, the sensor, retention, the analyses), made SEALED by its last one. On
SQLite, whose one write lock a transaction holds from its start, a 100,000-event post written at
once made every single-event post wait ~2 s for it; between short transactions the receiver's
other writes take their turn (``_WriteTurns``). A post that fails half-way removes what it wrote;
one whose receiver was killed is removed by ``remove_abandoned`` (at the receiver's next start and
by the sensor). A stream batch only becomes visible to the sync once the sensor seals it.

The store also holds each definition's sync lock: a lease that keeps two syncs of one definition
from running at once, whichever process starts them (a sensor's run, an operator's command).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection, Dialect, Engine, and_, case, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from ol_dagster.db import WalCheckpointer, is_sqlite_file, open_engine
from ol_dagster.store import schema
from ol_dagster.store.holder import process_gone, this_process
from ol_dagster.store.kafka_writes import DeadLetter as KafkaDeadLetter
from ol_dagster.store.kafka_writes import KafkaStored, KafkaWrite
from ol_dagster.store.schema import (
    BatchKind,
    BatchStatus,
    batch_catalogs,
    batch_graphs,
    batches,
    cleanup_journal,
    events,
    kafka_dead_letters,
    kafka_offsets,
    sync_locks,
)

_READ_CHUNK = 2_000

# Events per transaction of a posted batch: SQLite's write lock held 3 ms (median), 11 ms at
# most, for 500-byte events: about the longest a single-event post waits for a large post. A
# batch up to this size is one transaction, never RECEIVING.
POSTED_CHUNK = 500
# A RECEIVING batch this old is abandoned whatever its writer (one on another machine, whose
# process cannot be checked): a post takes seconds, bounded by ``limits.maxBodyBytes``.
ABANDONED_AFTER = timedelta(hours=1)

log = logging.getLogger(__name__)


RETRY_BASE = timedelta(minutes=1)
RETRY_MAX = timedelta(hours=1)


def retry_backoff(attempts: int) -> timedelta:
    """1, 2, 4 ... minutes after each failed sync, at most an hour."""
    return min(RETRY_BASE * 2 ** max(attempts - 1, 0), RETRY_MAX)


class StoreUnavailable(RuntimeError):
    """The store's database cannot be reached; callers should answer "retry later"."""


def event_digest(raw: bytes) -> bytes:
    """What names an event's bytes (``ol_events.digest``): equal bytes, equal digest. SHA-256
    (cut to 128 bits): with the CPU's SHA instructions the fastest collision-resistant hash
    hashlib has here, ~6 us for a 6 KB event, paid once by the receiver."""
    return hashlib.sha256(raw).digest()[:16]


def utcnow() -> datetime:
    return datetime.now(UTC)


def _naive(dt: datetime) -> datetime:
    """The store keeps naive UTC times so SQLite and PostgreSQL compare them the same way."""
    return dt.astimezone(UTC).replace(tzinfo=None) if dt.tzinfo else dt


def _aware(dt: datetime | None) -> datetime | None:
    return dt.replace(tzinfo=UTC) if dt is not None and dt.tzinfo is None else dt


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An accepted event on its way into the store."""

    raw: bytes
    kind: str
    event_type: str | None
    event_time: datetime
    producer: str | None
    job_namespace: str | None
    job_name: str | None
    run_id: str | None


@dataclass(frozen=True, slots=True)
class StoredEvent(NewEvent):
    """An event read back from its batch, at its place in it."""

    position: int = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class BatchRecord:
    id: int
    definition: str
    kind: BatchKind
    status: BatchStatus
    received_at: datetime
    sealed_at: datetime | None
    received_count: int
    accepted_count: int
    rejected_count: int
    whole_snapshot: bool
    rejections: list[dict[str, Any]] = field(default_factory=list)
    cutoff: datetime | None = None
    upload_result: dict[str, Any] | None = None
    cleanup_report: dict[str, Any] | None = None
    synced_at: datetime | None = None
    attempts: int = 0
    next_attempt_at: datetime | None = None

    @property
    def partition_key(self) -> str:
        return str(self.id)


@dataclass(frozen=True, slots=True)
class CatalogRecord:
    """One catalog's part of a batch's sync (``ol_batch_catalogs``, version 11)."""

    catalog: str
    status: BatchStatus | None  # None: uploaded, cleanup pending; SYNCED; FAILED (retry)
    run_id: str | None  # the run that recorded ``status``
    kept_in_run: str | None  # a retry run that leaves this finished catalog alone
    cutoff: datetime | None
    upload_result: dict[str, Any] | None
    cleanup_report: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class SyncLock:
    """Who holds a definition's sync lock, since when, and until when unless renewed."""

    definition: str
    holder: str
    acquired_at: datetime
    expires_at: datetime
    process: str | None = field(default=None, compare=False)  # store.holder; None between steps


class JournalStatus(StrEnum):
    INTENT = "INTENT"  # written before the real call; the call may or may not have happened
    DONE = "DONE"  # the call returned: ``removed`` is what it reported
    RECONCILED = "RECONCILED"  # its process died in the call: ``removed`` is what was found gone


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One real cleanup call in the journal (``ol_cleanup_journal``)."""

    id: int
    definition: str
    run_id: str
    batch_id: int | None
    position: int
    call: dict[str, Any]
    planned: dict[str, Any]  # the rehearsal's "counts" by object type and "jobs"
    status: JournalStatus
    removed: dict[str, Any] | None
    created_at: datetime
    finished_at: datetime | None
    reported_in: int | None
    catalog: str | None = None  # None: written before version 11, to the only catalog then


# How often acquire_sync_lock looks again when the lock changed hands under it.
_LOCK_ATTEMPTS = 10


def _insert_lock(conn: Connection, values: dict[str, Any]) -> bool:
    """Insert a definition's first lock row unless it has one; True if this insert made it.

    ``ON CONFLICT DO NOTHING`` rather than a plain insert whose failure is caught: on PostgreSQL
    a concurrent insert of the same definition makes this one wait for it to commit and then
    do nothing, where a failed insert would abort the whole transaction."""
    dialect = conn.dialect.name
    if dialect in ("postgresql", "sqlite"):
        insert = pg_insert if dialect == "postgresql" else sqlite_insert
        statement = insert(sync_locks).values(**values).on_conflict_do_nothing()
        return conn.execute(statement).rowcount == 1
    try:
        with conn.begin_nested():
            conn.execute(sync_locks.insert().values(**values))
    except IntegrityError:
        return False
    return True


def _record(row: Any) -> BatchRecord:
    m = row._mapping
    return BatchRecord(
        id=m["id"],
        definition=m["definition"],
        kind=BatchKind(m["kind"]),
        status=BatchStatus(m["status"]),
        received_at=_aware(m["received_at"]),  # type: ignore[arg-type]
        sealed_at=_aware(m["sealed_at"]),
        received_count=m["received_count"],
        accepted_count=m["accepted_count"],
        rejected_count=m["rejected_count"],
        whole_snapshot=bool(m["whole_snapshot"]),
        rejections=list(m["rejections"] or []),
        cutoff=_aware(m["cutoff"]),
        upload_result=m["upload_result"],
        cleanup_report=m["cleanup_report"],
        synced_at=_aware(m["synced_at"]),
        attempts=m["attempts"] or 0,
        next_attempt_at=_aware(m["next_attempt_at"]),
    )


_EVENT_COLUMNS = (
    "batch_id",
    "position",
    "raw",
    "kind",
    "event_type",
    "event_time",
    "producer",
    "job_namespace",
    "job_name",
    "run_id",
    "digest",
)
# PostgreSQL types of those columns, for a binary COPY
_EVENT_PG_TYPES = (
    "int8",
    "int4",
    "bytea",
    "varchar",
    "varchar",
    "timestamp",
    "text",
    "text",
    "text",
    "varchar",
    "bytea",
)


def _event_values(dialect: Dialect, new_events: Sequence[NewEvent]) -> list[tuple]:
    """Each event's column values but its batch and position (``_EVENT_COLUMNS[2:]``), computed
    before the write transaction: on SQLite that transaction holds the only write lock, which
    every other post and the sync wait for, so it should hold the insert and nothing else (the
    digests and times of a 100,000-event post took seconds of it)."""
    # SQLite rows go to the driver as they are: the time as SQLAlchemy itself would write it
    to_time = events.c.event_time.type.bind_processor(dialect) if dialect.name == "sqlite" else None
    return [
        (
            e.raw,
            e.kind,
            e.event_type,
            to_time(_naive(e.event_time)) if to_time else _naive(e.event_time),
            e.producer,
            e.job_namespace,
            e.job_name,
            e.run_id,
            event_digest(e.raw),
        )
        for e in new_events
    ]


def _insert_events(conn: Connection, batch_id: int, start: int, values: Sequence[tuple]) -> None:
    """Insert a batch's events (``_event_values``) in the caller's transaction, row by row from
    a generator: no second copy of a large batch's rows is built. On PostgreSQL, a binary COPY:
    a 1,000-event post of 6 MB as one INSERT of 10,000 parameters cost the receiver about twice
    the time (parameter handling in Python, and the server parsing it). On SQLite, the driver's
    own executemany (SQLAlchemy's per-row parameter handling doubled the lock's time), which
    lets other threads run between rows."""
    rows = ((batch_id, start + i, *v) for i, v in enumerate(values))
    columns = ", ".join(_EVENT_COLUMNS)
    if conn.dialect.name not in ("postgresql", "sqlite"):
        conn.execute(events.insert(), [dict(zip(_EVENT_COLUMNS, r, strict=True)) for r in rows])
        return
    dbapi_error = conn.dialect.loaded_dbapi.Error
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    statement = f"INSERT INTO ol_events ({columns}) VALUES ({', '.join('?' * len(_EVENT_COLUMNS))})"
    try:
        if conn.dialect.name == "sqlite":
            cursor.executemany(statement, rows)  # type: ignore[arg-type]  # any iterable
            return
        statement = f"COPY ol_events ({columns}) FROM STDIN (FORMAT BINARY)"
        with cursor.copy(statement) as copy:
            copy.set_types(_EVENT_PG_TYPES)
            for row in rows:
                copy.write_row(row)
    except dbapi_error as exc:
        # the driver's own error, as SQLAlchemy would have raised it (a full disk: a 503)
        raise DBAPIError.instance(statement, None, exc, dbapi_error, hide_parameters=True) from exc
    finally:
        cursor.close()


def _append_stream(
    conn: Connection,
    definition: str,
    values: Sequence[tuple],
    received: int,
    rejections: Sequence[dict[str, Any]],
    now: datetime,
) -> int:
    """Append events (``_event_values``) to the definition's open stream batch in the caller's
    transaction, opening one if needed; returns its id. Two writers opening one at once: the
    second gets an IntegrityError (one open stream batch per definition), and retries."""
    row = conn.execute(
        select(batches.c.id, batches.c.accepted_count, batches.c.rejections)
        .where(batches.c.definition == definition, batches.c.status == BatchStatus.OPEN)
        .with_for_update()
    ).first()
    if row is None:
        batch_id = conn.execute(
            batches.insert().values(
                definition=definition,
                kind=BatchKind.STREAM,
                status=BatchStatus.OPEN,
                received_at=now,
                received_count=0,
                accepted_count=0,
                rejected_count=0,
                whole_snapshot=False,
                rejections=[],
            )
        ).inserted_primary_key[0]  # type: ignore[index]
        start, old_rejections = 0, []
    else:
        batch_id, start, old_rejections = row[0], row[1], list(row[2] or [])
    if values:
        _insert_events(conn, batch_id, start, values)
    conn.execute(
        batches.update()
        .where(batches.c.id == batch_id)
        .values(
            received_count=batches.c.received_count + received,
            accepted_count=batches.c.accepted_count + len(values),
            rejected_count=batches.c.rejected_count + len(rejections),
            rejections=old_rejections + list(rejections),
        )
    )
    return int(batch_id)


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
    o = kafka_offsets.c
    marks: dict[tuple[str, int], int | None] = {}
    for topic, partition in sorted(write.next_offsets):
        marks[(topic, partition)] = conn.execute(
            select(o.next_offset)
            .where(o.topic == topic, o.partition == partition)
            .with_for_update()
        ).scalar()

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
        stored.stream_batches[definition] = _append_stream(
            conn, definition, values, len(values), (), now
        )
        stored.events += len(values)
    for snap, values in zip(write.snapshots, snapshots, strict=True):
        if not fresh(snap.topic, snap.partition, snap.first_offset):
            stored.skipped += 1
            continue
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
            )
        ).inserted_primary_key[0]  # type: ignore[index]
        if values:
            _insert_events(conn, batch_id, 0, values)
        stored.snapshot_batches.append(int(batch_id))
        stored.events += len(values)
    letters = [d for d in write.dead_letters if fresh(d.topic, d.partition, d.offset)]
    stored.skipped += len(write.dead_letters) - len(letters)
    if letters:
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
        stored.dead_letters = len(letters)
    for (topic, partition), next_offset in write.next_offsets.items():
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
    return stored


def _raw_without_digest() -> Any:
    """``raw`` only where the digest was never stored (rows written before version 7)."""
    return case((events.c.digest.is_(None), events.c.raw), else_=None)


def _receiving_ids() -> Any:
    """The ids of the batches still being received, which no reader sees."""
    return select(batches.c.id).where(batches.c.status == BatchStatus.RECEIVING)


def _digest_of(digest: bytes | None, raw: bytes | None) -> bytes:
    if digest is not None:
        return bytes(digest)
    assert raw is not None
    return event_digest(bytes(raw))


def _upsert_catalog(conn: Connection, batch_id: int, catalog: str, **values: Any) -> None:
    """Write a batch's row for ``catalog`` (``ol_batch_catalogs``), creating it if needed; the
    definition's sync lock of that catalog keeps two writers of one row apart."""
    bc = batch_catalogs.c
    updated = conn.execute(
        update(batch_catalogs)
        .where(bc.batch_id == batch_id, bc.catalog == catalog)
        .values(**values)
    ).rowcount
    if not updated:
        conn.execute(batch_catalogs.insert().values(batch_id=batch_id, catalog=catalog, **values))


class _WriteTurns:
    """First come, first served turns at SQLite's write lock for this process's threads (the
    receiver's posts), each transaction of a post in chunks taking a new turn.

    SQLite's busy handler polls with growing sleeps (up to 100 ms): a post written in short
    transactions, each asking for the lock again as soon as the last one ended, kept it from a
    waiting single-event post, which rarely polled in the gap, and a waiter woke late. Here a
    write waits its turn on a condition (woken at once) before it asks SQLite, so between two
    chunks every write that came meanwhile goes first. Other processes (a sync run) are not in
    it: they poll as before."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._changed = threading.Condition()
        self._next = 0  # the ticket the next write gets
        self._serving = 0  # the ticket whose turn it is

    @contextmanager
    def turn(self) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        with self._changed:
            ticket = self._next
            self._next += 1
            self._changed.wait_for(lambda: self._serving == ticket)
        try:
            yield
        finally:
            with self._changed:
                self._serving += 1
                self._changed.notify_all()


class EventStore:
    """The event store on any SQLAlchemy URL (a SQLite file by default)."""

    def __init__(
        self, url: str, *, engine: Engine | None = None, background_checkpoints: bool = False
    ) -> None:
        """``background_checkpoints``: on a SQLite file, commits leave the WAL checkpoint to a
        background thread (``db.WalCheckpointer``): what the receiver wants, nobody else."""
        self.url = url
        self._checkpointer: WalCheckpointer | None = None
        if engine is None and background_checkpoints and is_sqlite_file(url):
            engine = open_engine(url, wal_autocheckpoint=False)
            self._checkpointer = WalCheckpointer(engine)
        self.engine = engine or open_engine(url)
        self._turns = _WriteTurns(self.engine.dialect.name == "sqlite")
        try:
            self.schema_version = schema.migrate(self.engine.begin)
        except OperationalError as exc:
            raise StoreUnavailable(f"event store unreachable: {exc.orig}") from None

    def dispose(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.close()
        self.engine.dispose()

    def _written(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.poke()

    def ping(self) -> None:
        """The store answers: ``SELECT 1`` on the driver's connection. Through SQLAlchemy it
        would begin a transaction, on SQLite ``BEGIN IMMEDIATE`` (``db.open_engine``), which
        waits for the write lock: /healthz waited seconds for a large post's write (issue 15)."""
        try:
            raw = self.engine.raw_connection()
            try:
                cursor = raw.cursor()
                cursor.execute("SELECT 1")
                cursor.close()
            finally:
                raw.close()
        except (OperationalError, self.engine.dialect.loaded_dbapi.OperationalError) as exc:
            reason = getattr(exc, "orig", exc)
            raise StoreUnavailable(f"event store unreachable: {reason}") from None

    # -- writing -------------------------------------------------------------------------------

    def add_posted_batch(
        self,
        definition: str,
        new_events: Sequence[NewEvent],
        *,
        received: int,
        rejections: Sequence[dict[str, Any]] = (),
        snapshot: bool = False,
        now: datetime | None = None,
    ) -> int:
        """Store one ``/lineage/batch`` post whole, sealed: all of it is visible, or none of it.

        Up to ``POSTED_CHUNK`` events in one transaction; more in one transaction per chunk,
        the batch RECEIVING until the last one seals it. A failure on the way removes the part
        written and raises as a single transaction would (``StoreUnavailable`` when the store
        refuses)."""
        now = _naive(now or utcnow())
        values = _event_values(self.engine.dialect, new_events)
        starts = range(0, max(len(values), 1), POSTED_CHUNK)
        last = starts[-1]
        row = {
            "definition": definition,
            "kind": BatchKind.POSTED,
            "received_at": now,
            "received_count": received,
            "accepted_count": len(new_events),
            "rejected_count": len(rejections),
            # an empty post describes nothing: never a snapshot to clean against
            "whole_snapshot": snapshot and not rejections and bool(new_events),
            "rejections": list(rejections),
        }
        batch_id: int | None = None
        committed = False  # a rolled-back first insert's id may be another post's by now
        try:
            for start in starts:
                with self._turns.turn(), self.engine.begin() as conn:
                    if batch_id is None:
                        at_once = start == last
                        batch_id = conn.execute(
                            batches.insert().values(
                                **row,
                                status=BatchStatus.SEALED if at_once else BatchStatus.RECEIVING,
                                sealed_at=now if at_once else None,
                                writer=None if at_once else this_process(),
                            )
                        ).inserted_primary_key[0]  # type: ignore[index]
                    chunk = values[start : start + POSTED_CHUNK]
                    if chunk:
                        _insert_events(conn, batch_id, start, chunk)  # type: ignore[arg-type]
                    if start == last and start > 0:
                        conn.execute(
                            update(batches)
                            .where(batches.c.id == batch_id)
                            .values(status=BatchStatus.SEALED, sealed_at=now, writer=None)
                        )
                committed = True
                self._written()
        except BaseException as exc:
            if committed and last > 0:
                self._remove_unsealed(batch_id)  # type: ignore[arg-type]
            if isinstance(exc, OperationalError):
                raise StoreUnavailable(f"event store unreachable: {exc.orig}") from None
            raise
        return int(batch_id)  # type: ignore[arg-type]

    def _remove_unsealed(self, batch_id: int) -> None:
        """Remove what a failed post in chunks wrote (nothing when its batch was sealed, or
        never committed). When the store refuses that too, the batch stays RECEIVING, unread,
        until ``remove_abandoned`` finds its writer gone or it old."""
        try:
            self._remove_receiving([batch_id])
        except Exception:  # noqa: BLE001 - the post's own error is the one to report
            log.warning(
                "could not remove the unfinished batch %s; removed later", batch_id, exc_info=True
            )

    def _remove_receiving(self, ids: Sequence[int]) -> None:
        """Delete these batches, if still RECEIVING, with their events: a chunk of positions
        per transaction, so the removal of a large batch holds the write lock no longer than
        its writing did."""
        for batch_id in ids:
            with self.engine.connect() as conn:
                top = conn.execute(
                    select(func.max(events.c.position)).where(events.c.batch_id == batch_id)
                ).scalar()
            receiving = and_(batches.c.id == batch_id, batches.c.status == BatchStatus.RECEIVING)
            for start in range(0, (top if top is not None else -1) + 1, POSTED_CHUNK):
                with self._turns.turn(), self.engine.begin() as conn:
                    if conn.execute(select(batches.c.id).where(receiving)).first() is None:
                        break  # sealed after all, or removed by another process
                    conn.execute(
                        events.delete().where(
                            events.c.batch_id == batch_id,
                            events.c.position >= start,
                            events.c.position < start + POSTED_CHUNK,
                        )
                    )
            with self._turns.turn(), self.engine.begin() as conn:
                if conn.execute(batches.delete().where(receiving)).rowcount:
                    conn.execute(events.delete().where(events.c.batch_id == batch_id))

    def remove_abandoned(
        self,
        definition: str | None = None,
        *,
        now: datetime | None = None,
        older_than: timedelta = ABANDONED_AFTER,
    ) -> list[int]:
        """Remove RECEIVING batches (with their events) whose receiver died mid-post: its
        process, recorded on this machine, no longer runs (``store.holder``), or the batch began
        ``older_than`` ago. Returns their ids."""
        cutoff = _naive(now or utcnow()) - older_than
        query = select(batches.c.id, batches.c.writer, batches.c.received_at).where(
            batches.c.status == BatchStatus.RECEIVING
        )
        if definition is not None:
            query = query.where(batches.c.definition == definition)
        with self.engine.connect() as conn:
            rows = conn.execute(query.order_by(batches.c.id)).all()
        gone = [int(i) for i, writer, at in rows if process_gone(writer) or at <= cutoff]
        self._remove_receiving(gone)
        return gone

    def receiving_floor(self, definition: str) -> int | None:
        """The lowest id of the definition's batches still being received: a sensor's cursor
        stays below it, since it is sealed after batches with higher ids."""
        with self.engine.connect() as conn:
            return conn.execute(
                select(func.min(batches.c.id)).where(
                    batches.c.definition == definition, batches.c.status == BatchStatus.RECEIVING
                )
            ).scalar()

    def add_stream_events(
        self,
        definition: str,
        new_events: Sequence[NewEvent],
        *,
        received: int,
        rejections: Sequence[dict[str, Any]] = (),
        now: datetime | None = None,
    ) -> int:
        """Append single events to the definition's open stream batch, opening one if needed."""
        now = _naive(now or utcnow())
        values = _event_values(self.engine.dialect, new_events)
        for _attempt in range(5):
            try:
                with self._turns.turn(), self.engine.begin() as conn:
                    batch_id = _append_stream(conn, definition, values, received, rejections, now)
                self._written()
                return batch_id
            except IntegrityError:
                continue  # another receiver opened the stream batch first: append to it instead
            except OperationalError as exc:
                raise StoreUnavailable(f"event store unreachable: {exc.orig}") from None
        raise StoreUnavailable("could not open a stream batch after repeated write conflicts")

    # -- the Kafka intake ----------------------------------------------------------------------

    def add_kafka_write(self, write: KafkaWrite, *, now: datetime | None = None) -> KafkaStored:
        """Store one poll of the Kafka intake in one transaction: its stream events (into each
        definition's open stream batch), its snapshots (each a sealed posted batch), its dead
        letters and each partition's next offset. An item below its partition's stored offset
        was stored by an earlier write (Kafka delivered it again) and is skipped; a partition's
        offset only moves forward."""
        now_n = _naive(now or utcnow())
        dialect = self.engine.dialect
        # computed before the transaction, which on SQLite holds the only write lock
        stream = _event_values(dialect, [s.event for s in write.stream])
        snapshots = [_event_values(dialect, s.events) for s in write.snapshots]
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

    def dead_letters(
        self, *, definition: str | None = None, limit: int = 1000
    ) -> list[KafkaDeadLetter]:
        """The Kafka messages kept as dead letters, oldest first."""
        query = select(kafka_dead_letters).order_by(kafka_dead_letters.c.id).limit(limit)
        if definition is not None:
            query = query.where(kafka_dead_letters.c.definition == definition)
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

    def seal_due(
        self,
        definition: str,
        *,
        window_seconds: float,
        max_events: int,
        now: datetime | None = None,
        force: bool = False,
    ) -> list[int]:
        """Seal open stream batches older than the window or holding ``max_events`` or more."""
        now_n = _naive(now or utcnow())
        condition = and_(batches.c.definition == definition, batches.c.status == BatchStatus.OPEN)
        if not force:
            condition = and_(
                condition,
                (batches.c.received_at <= now_n - timedelta(seconds=window_seconds))
                | (batches.c.accepted_count >= max_events),
            )
        with self.engine.begin() as conn:
            ids = [r[0] for r in conn.execute(select(batches.c.id).where(condition))]
            if ids:
                conn.execute(
                    update(batches)
                    .where(batches.c.id.in_(ids), batches.c.status == BatchStatus.OPEN)
                    .values(status=BatchStatus.SEALED, sealed_at=now_n)
                )
        return sorted(int(i) for i in ids)

    def record_upload(
        self,
        batch_id: int,
        *,
        cutoff: datetime | None,
        result: Mapping[str, Any],
        catalog: str | None = None,
        primary: bool = True,
    ) -> None:
        """The batch's upload to ``catalog`` (its row in ``ol_batch_catalogs``), and, for the
        primary catalog (``primary``), in the batch's own columns too, in one transaction.
        Without ``catalog``: the batch's columns only (as before version 11)."""
        cut = _naive(cutoff) if cutoff else None
        with self.engine.begin() as conn:
            if catalog is not None:
                # a new upload: the catalog's outcome is open again until its cleanup ends
                _upsert_catalog(
                    conn, batch_id, catalog, cutoff=cut, upload_result=result, status=None
                )
            if primary or catalog is None:
                conn.execute(
                    batches.update()
                    .where(batches.c.id == batch_id)
                    .values(cutoff=cut, upload_result=result)
                )

    def record_cleanup(
        self,
        batch_id: int,
        report: Mapping[str, Any],
        *,
        catalog: str | None = None,
        primary: bool = True,
        status: BatchStatus | None = None,
        run_id: str | None = None,
    ) -> None:
        """The cleanup report of ``catalog`` for the batch with its outcome (``status``, by
        ``run_id``); the primary catalog's also in the batch's own column."""
        with self.engine.begin() as conn:
            if catalog is not None:
                _upsert_catalog(
                    conn,
                    batch_id,
                    catalog,
                    cleanup_report=report,
                    status=status.value if status is not None else None,
                    run_id=run_id,
                )
            if primary or catalog is None:
                conn.execute(
                    batches.update().where(batches.c.id == batch_id).values(cleanup_report=report)
                )

    def catalog_records(self, batch_id: int) -> dict[str, CatalogRecord]:
        """Each catalog's part of the batch, by catalog key (none for a batch synced before
        version 11, or not uploaded yet)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(batch_catalogs).where(batch_catalogs.c.batch_id == batch_id)
            ).all()
        out = {}
        for row in rows:
            m = row._mapping
            out[m["catalog"]] = CatalogRecord(
                catalog=m["catalog"],
                status=BatchStatus(m["status"]) if m["status"] else None,
                run_id=m["run_id"],
                kept_in_run=m["kept_in_run"],
                cutoff=_aware(m["cutoff"]),
                upload_result=m["upload_result"],
                cleanup_report=m["cleanup_report"],
            )
        return out

    def adopt_catalog_record(self, batch_id: int, record: CatalogRecord) -> None:
        """Write ``record`` as the batch's row for its catalog unless the batch has catalog rows
        already: a batch synced before version 11 gets its primary catalog's row (read from its
        own columns, ``sync.fanout.record``) before anything writes part of one."""
        bc = batch_catalogs.c
        with self.engine.begin() as conn:
            if conn.execute(select(bc.batch_id).where(bc.batch_id == batch_id).limit(1)).first():
                return
            conn.execute(
                batch_catalogs.insert().values(
                    batch_id=batch_id,
                    catalog=record.catalog,
                    status=record.status.value if record.status is not None else None,
                    run_id=record.run_id,
                    kept_in_run=record.kept_in_run,
                    cutoff=_naive(record.cutoff) if record.cutoff else None,
                    upload_result=record.upload_result,
                    cleanup_report=record.cleanup_report,
                )
            )

    def keep_catalogs(self, batch_id: int, catalogs: Sequence[str], run_id: str) -> None:
        """A retry run (``run_id``) leaves these catalogs alone: they finished the batch."""
        if not catalogs:
            return
        with self.engine.begin() as conn:
            conn.execute(
                update(batch_catalogs)
                .where(
                    batch_catalogs.c.batch_id == batch_id,
                    batch_catalogs.c.catalog.in_(list(catalogs)),
                )
                .values(kept_in_run=run_id)
            )

    def set_status(
        self, batch_id: int, status: BatchStatus, *, now: datetime | None = None
    ) -> None:
        """SYNCED ends a batch; FAILED keeps its events pending for a retry after a backoff."""
        now_n = _naive(now or utcnow())
        values: dict[str, Any] = {"status": status}
        if status is BatchStatus.SYNCED:
            values["synced_at"] = now_n
            values["next_attempt_at"] = None
        if status is BatchStatus.FAILED:
            attempts = self.get_batch(batch_id).attempts + 1
            values["attempts"] = attempts
            values["next_attempt_at"] = now_n + retry_backoff(attempts)
        self._update(batch_id, **values)

    def due_retries(self, definition: str, *, now: datetime | None = None) -> list[BatchRecord]:
        """FAILED batches whose backoff has passed, in batch order."""
        now_n = _naive(now or utcnow())
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(batches)
                .where(
                    batches.c.definition == definition,
                    batches.c.status == BatchStatus.FAILED,
                    batches.c.next_attempt_at <= now_n,
                )
                .order_by(batches.c.id)
            )
            return [_record(r) for r in rows]

    def _update(self, batch_id: int, **values: Any) -> None:
        with self.engine.begin() as conn:
            conn.execute(batches.update().where(batches.c.id == batch_id).values(**values))

    # -- reading -------------------------------------------------------------------------------

    def get_batch(self, batch_id: int) -> BatchRecord:
        with self.engine.connect() as conn:
            row = conn.execute(select(batches).where(batches.c.id == batch_id)).first()
        if row is None:
            raise KeyError(f"no batch {batch_id} in the event store")
        return _record(row)

    def batches(
        self,
        definition: str | None = None,
        *,
        statuses: Sequence[BatchStatus] | None = None,
        after_id: int = 0,
        limit: int | None = None,
    ) -> list[BatchRecord]:
        """Batches in id order (the order runs must follow); RECEIVING ones only when
        ``statuses`` names them."""
        query = select(batches).where(batches.c.id > after_id).order_by(batches.c.id)
        if definition is not None:
            query = query.where(batches.c.definition == definition)
        if statuses is not None:
            query = query.where(batches.c.status.in_(list(statuses)))
        else:
            query = query.where(batches.c.status != BatchStatus.RECEIVING)
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            return [_record(r) for r in conn.execute(query)]

    def iter_events(self, batch_id: int) -> Iterator[StoredEvent]:
        """The batch's events in position order, read in chunks to keep memory flat."""
        last = -1
        while True:
            with self.engine.connect() as conn:
                rows = conn.execute(
                    select(
                        events.c.position,
                        events.c.raw,
                        events.c.kind,
                        events.c.event_type,
                        events.c.event_time,
                        events.c.producer,
                        events.c.job_namespace,
                        events.c.job_name,
                        events.c.run_id,
                    )
                    .where(events.c.batch_id == batch_id, events.c.position > last)
                    .order_by(events.c.position)
                    .limit(_READ_CHUNK)
                ).all()
            for r in rows:
                yield StoredEvent(
                    bytes(r[1]),
                    r[2],
                    r[3],
                    r[4].replace(tzinfo=UTC),
                    r[5],
                    r[6],
                    r[7],
                    r[8],
                    position=r[0],
                )
            if len(rows) < _READ_CHUNK:
                return
            last = rows[-1][0]

    def iter_events_between(
        self, start: datetime, end: datetime, *, definition: str | None = None
    ) -> Iterator[bytes]:
        """Raw events whose eventTime lies in [start, end), across batches (for the analyses),
        read in chunks to keep memory flat. Open stream batches are included: they are data;
        batches still being received are not."""
        last_id = 0
        while True:
            query = (
                select(events.c.id, events.c.raw)
                .where(
                    events.c.id > last_id,
                    events.c.event_time >= _naive(start),
                    events.c.event_time < _naive(end),
                    events.c.batch_id.not_in(_receiving_ids()),
                )
                .order_by(events.c.id)
                .limit(_READ_CHUNK)
            )
            if definition is not None:
                query = query.join(batches, batches.c.id == events.c.batch_id).where(
                    batches.c.definition == definition
                )
            with self.engine.connect() as conn:
                rows = conn.execute(query).all()
            for _, raw in rows:
                yield bytes(raw)
            if len(rows) < _READ_CHUNK:
                return
            last_id = rows[-1][0]

    def event_counts(self, batch_id: int) -> dict[str, dict[str, int]]:
        """How the batch's events split by kind, eventType and producer."""
        out: dict[str, dict[str, int]] = {}
        with self.engine.connect() as conn:
            for name, col in (
                ("kind", events.c.kind),
                ("eventType", events.c.event_type),
                ("producer", events.c.producer),
            ):
                rows = conn.execute(
                    select(col, func.count())
                    .where(events.c.batch_id == batch_id)
                    .group_by(col)
                    .order_by(col)
                )
                out[name] = {(k if k is not None else "(none)"): int(n) for k, n in rows}
        return out

    def newer_synced_snapshot(
        self, definition: str, batch_id: int, *, catalog: str | None = None, primary: bool = True
    ) -> int | None:
        """A whole snapshot of the definition, later than this batch, already synced (to
        ``catalog``: its part finished there; for the ``primary`` catalog a batch synced before
        version 11, which has no catalog rows, counts by its own status)."""
        newer = and_(
            batches.c.definition == definition,
            batches.c.id > batch_id,
            batches.c.kind == BatchKind.POSTED,
            batches.c.whole_snapshot.is_(True),
        )
        if catalog is None:
            synced = batches.c.status == BatchStatus.SYNCED
        else:
            bc = batch_catalogs.c
            in_catalog = (
                select(bc.batch_id)
                .where(
                    bc.batch_id == batches.c.id,
                    bc.catalog == catalog,
                    bc.status == BatchStatus.SYNCED.value,
                )
                .exists()
            )
            synced = in_catalog
            if primary:
                legacy = and_(
                    batches.c.status == BatchStatus.SYNCED,
                    ~select(bc.batch_id).where(bc.batch_id == batches.c.id).exists(),
                )
                synced = in_catalog | legacy
        with self.engine.connect() as conn:
            return conn.execute(select(func.min(batches.c.id)).where(newer, synced)).scalar()

    def purge_synced(self, definition: str, *, before: datetime, limit: int = 500) -> list[int]:
        """Delete synced batches (with their events) synced before ``before``: retention. Failed
        and pending batches are never purged, whatever their age."""
        with self.engine.begin() as conn:
            ids = [
                int(r[0])
                for r in conn.execute(
                    select(batches.c.id)
                    .where(
                        batches.c.definition == definition,
                        batches.c.status == BatchStatus.SYNCED,
                        batches.c.synced_at < _naive(before),
                    )
                    .order_by(batches.c.id)
                    .limit(limit)
                )
            ]
            if ids:
                conn.execute(events.delete().where(events.c.batch_id.in_(ids)))
                conn.execute(batch_graphs.delete().where(batch_graphs.c.batch_id.in_(ids)))
                conn.execute(batch_catalogs.delete().where(batch_catalogs.c.batch_id.in_(ids)))
                conn.execute(batches.delete().where(batches.c.id.in_(ids)))
        return ids

    def save_lineage_state(
        self, definition: str, state: Mapping[str, Any], *, now: datetime | None = None
    ) -> None:
        values = {"state": state, "refreshed_at": _naive(now or utcnow())}
        with self.engine.begin() as conn:
            updated = conn.execute(
                schema.lineage_state.update()
                .where(schema.lineage_state.c.definition == definition)
                .values(**values)
            ).rowcount
            if not updated:
                conn.execute(schema.lineage_state.insert().values(definition=definition, **values))

    def lineage_state(self, definition: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            return conn.execute(
                select(schema.lineage_state.c.state).where(
                    schema.lineage_state.c.definition == definition
                )
            ).scalar()

    def job_namespaces(self, batch_id: int) -> list[str]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(events.c.job_namespace)
                .where(events.c.batch_id == batch_id, events.c.job_namespace.is_not(None))
                .distinct()
                .order_by(events.c.job_namespace)
            )
            return [r[0] for r in rows]

    def runs_of(self, batch_id: int, *, ended: bool = False) -> set[tuple[str, str, str]]:
        """(run id, job namespace, job name) of the batch's runs (with ``ended``, only those a
        terminal event of the batch ends: COMPLETE, FAIL or ABORT)."""
        query = select(events.c.run_id, events.c.job_namespace, events.c.job_name).where(
            events.c.batch_id == batch_id, events.c.run_id.is_not(None)
        )
        if ended:
            query = query.where(events.c.event_type.in_(["COMPLETE", "FAIL", "ABORT"]))
        with self.engine.connect() as conn:
            rows = conn.execute(query.distinct()).all()
        return {(r[0], r[1], r[2]) for r in rows if r[1] is not None and r[2] is not None}

    def event_digests(self, batch_id: int) -> list[bytes]:
        """The digests of the batch's events, in position order, without reading the events
        (an event stored before version 7 is read once for its digest)."""
        digests: list[bytes] = []
        last = -1
        while True:
            with self.engine.connect() as conn:
                rows = conn.execute(
                    select(events.c.position, events.c.digest, _raw_without_digest())
                    .where(events.c.batch_id == batch_id, events.c.position > last)
                    .order_by(events.c.position)
                    .limit(_READ_CHUNK * 10)
                ).all()
            digests.extend(_digest_of(digest, raw) for _, digest, raw in rows)
            if len(rows) < _READ_CHUNK * 10:
                return digests
            last = rows[-1][0]

    def earlier_run_digests(
        self, definition: str, runs: Iterable[tuple[str, str, str]], *, before_batch: int
    ) -> list[tuple[int, bytes]]:
        """(event id, digest) of the events of these runs (run id, job namespace, job name) that
        arrived in the definition's batches before ``before_batch``, in arrival order: the
        earlier parts of runs split over batches. ``events_by_id`` reads them."""
        wanted = set(runs)
        ids = sorted({r[0] for r in wanted})
        found: list[tuple[int, int, int, bytes]] = []
        for start in range(0, len(ids), 500):
            with self.engine.connect() as conn:
                rows = conn.execute(
                    select(
                        events.c.batch_id,
                        events.c.position,
                        events.c.id,
                        events.c.digest,
                        _raw_without_digest(),
                        events.c.run_id,
                        events.c.job_namespace,
                        events.c.job_name,
                    )
                    .join(batches, batches.c.id == events.c.batch_id)
                    .where(
                        events.c.run_id.in_(ids[start : start + 500]),
                        batches.c.definition == definition,
                        batches.c.id < before_batch,
                        batches.c.status != BatchStatus.RECEIVING,
                    )
                ).all()
            found.extend(
                (b, p, i, _digest_of(digest, raw))
                for b, p, i, digest, raw, run_id, namespace, name in rows
                if (run_id, namespace, name) in wanted
            )
        found.sort()  # arrival order: batch, then position (a chunk of run ids is not it)
        return [(i, digest) for _, _, i, digest in found]

    def events_by_id(self, ids: Sequence[int]) -> Iterator[bytes]:
        """The raw events with these ids, in the order given, read in chunks."""
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            with self.engine.connect() as conn:
                rows = dict(
                    conn.execute(select(events.c.id, events.c.raw).where(events.c.id.in_(chunk)))
                    .tuples()
                    .all()
                )
            for i in chunk:
                raw = rows.get(i)
                if raw is None:
                    raise KeyError(f"event {i} is no longer in the event store")
                yield bytes(raw)

    # -- packed graphs -------------------------------------------------------------------------

    def save_graph(
        self, batch_id: int, inputs: bytes, graph: bytes, *, now: datetime | None = None
    ) -> None:
        """Keep the batch's packed graph, built from ``inputs`` (replacing any earlier one)."""
        values = {"inputs": inputs, "graph": graph, "built_at": _naive(now or utcnow())}
        with self.engine.begin() as conn:
            updated = conn.execute(
                batch_graphs.update().where(batch_graphs.c.batch_id == batch_id).values(**values)
            ).rowcount
            if not updated:
                try:
                    with conn.begin_nested():
                        conn.execute(batch_graphs.insert().values(batch_id=batch_id, **values))
                except IntegrityError:  # saved by another process meanwhile: this one wins
                    conn.execute(
                        batch_graphs.update()
                        .where(batch_graphs.c.batch_id == batch_id)
                        .values(**values)
                    )

    def load_graph(self, batch_id: int, inputs: bytes) -> bytes | None:
        """The batch's packed graph if it was built from ``inputs``, else None."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(batch_graphs.c.inputs, batch_graphs.c.graph).where(
                    batch_graphs.c.batch_id == batch_id
                )
            ).first()
        if row is None or bytes(row[0]) != inputs:
            return None
        return bytes(row[1])

    # -- the cleanup journal: intent before deletion --------------------------------------------

    def journal_intent(
        self,
        definition: str,
        run_id: str,
        batch_id: int | None,
        position: int,
        call: Mapping[str, Any],
        planned: Mapping[str, Any],
        *,
        catalog: str | None = None,
    ) -> int:
        """Record, committed, that a real cleanup call to ``catalog`` is about to be made;
        returns its id."""
        with self.engine.begin() as conn:
            return conn.execute(
                cleanup_journal.insert()
                .values(
                    definition=definition,
                    catalog=catalog,
                    run_id=run_id,
                    batch_id=batch_id,
                    position=position,
                    call=call,
                    planned=planned,
                    status=JournalStatus.INTENT.value,
                    created_at=_naive(utcnow()),
                )
                .returning(cleanup_journal.c.id)
            ).scalar_one()

    def journal_finish(
        self, entry_id: int, removed: Mapping[str, Any], *, status: JournalStatus
    ) -> None:
        """Complete an entry: DONE with what the call reported, or RECONCILED with what the
        catalog showed gone after its process died."""
        with self.engine.begin() as conn:
            conn.execute(
                update(cleanup_journal)
                .where(cleanup_journal.c.id == entry_id)
                .values(status=status.value, removed=removed, finished_at=_naive(utcnow()))
            )

    def journal(
        self,
        definition: str,
        *,
        statuses: Sequence[JournalStatus] | None = None,
        unreported: bool = False,
        catalog: str | None = None,
        unnamed: bool = False,
    ) -> list[JournalEntry]:
        """A definition's journal entries in order (of these statuses; ``unreported``: only
        those no cleanup report has listed yet; ``catalog``: only those made to it, and with
        ``unnamed`` those written before version 11 too, which name no catalog)."""
        c = cleanup_journal.c
        condition = c.definition == definition
        if catalog is not None:
            of_catalog = c.catalog == catalog
            condition = and_(
                condition, (of_catalog | c.catalog.is_(None)) if unnamed else of_catalog
            )
        if statuses is not None:
            condition = and_(condition, c.status.in_([s.value for s in statuses]))
        if unreported:
            condition = and_(condition, c.reported_in.is_(None))
        with self.engine.connect() as conn:
            rows = conn.execute(select(cleanup_journal).where(condition).order_by(c.id)).all()
        return [
            JournalEntry(
                id=m["id"],
                definition=m["definition"],
                run_id=m["run_id"],
                batch_id=m["batch_id"],
                position=m["position"],
                call=m["call"],
                planned=m["planned"],
                status=JournalStatus(m["status"]),
                removed=m["removed"],
                created_at=_aware(m["created_at"]),  # type: ignore[arg-type]
                finished_at=_aware(m["finished_at"]),
                reported_in=m["reported_in"],
                catalog=m["catalog"],
            )
            for m in (r._mapping for r in rows)
        ]

    def journal_reported(self, entry_ids: Sequence[int], batch_id: int) -> None:
        """These entries are listed in the cleanup report of ``batch_id``."""
        if not entry_ids:
            return
        with self.engine.begin() as conn:
            conn.execute(
                update(cleanup_journal)
                .where(cleanup_journal.c.id.in_(list(entry_ids)))
                .values(reported_in=batch_id)
            )

    # -- sync locks ----------------------------------------------------------------------------

    def acquire_sync_lock(
        self,
        definition: str,
        holder: str,
        *,
        lease_seconds: float,
        is_alive: Callable[[str], bool] | None = None,
        now: datetime | None = None,
        process: str | None = None,
    ) -> str | None:
        """Take the definition's sync lock for ``holder`` (a Dagster run id, say) for
        ``lease_seconds``: None when taken, else the id of the holder that keeps it.

        Taken when nobody holds it, when ``holder`` already does (re-entrant: the lease is
        renewed), when the lease has expired, when the process the current holder recorded is
        gone (``store.holder``: a process on this machine that no longer runs), or when
        ``is_alive(current holder)`` is False, so that a crashed holder does not block the
        definition until its lease runs out. ``process`` is the taker's own
        (``holder.this_process()``), recorded with the lock.

        Two processes never both take it: on PostgreSQL the first row's insert and the row lock
        of ``SELECT ... FOR UPDATE`` serialize them, on SQLite the store's ``BEGIN IMMEDIATE``
        does. ``is_alive`` may be slow (it may ask Dagster), so it runs with no transaction
        open; the takeover that follows only succeeds if the same holder's tenure is still in
        place, so two processes that both found the holder dead cannot both take the lock."""
        if lease_seconds <= 0:
            raise ValueError(f"lease_seconds must be positive, not {lease_seconds}")
        now_n = _naive(now or utcnow())
        taken = {
            "holder": holder,
            "acquired_at": now_n,
            "expires_at": now_n + timedelta(seconds=lease_seconds),
            "process": process,
        }
        this = sync_locks.c.definition == definition
        current: str | None = None
        for _attempt in range(_LOCK_ATTEMPTS):
            with self.engine.begin() as conn:
                if _insert_lock(conn, {"definition": definition, **taken}):
                    return None
                row = conn.execute(
                    select(
                        sync_locks.c.holder,
                        sync_locks.c.acquired_at,
                        sync_locks.c.expires_at,
                        sync_locks.c.process,
                    )
                    .where(this)
                    .with_for_update()
                ).first()
                if row is None:
                    continue  # released between the insert and the read: insert again
                current, acquired_at, expires_at, holding = row
                if current == holder:
                    conn.execute(
                        update(sync_locks)
                        .where(this)
                        .values(expires_at=taken["expires_at"], process=process)
                    )
                    return None
                if expires_at <= now_n or process_gone(holding):
                    conn.execute(
                        update(sync_locks)
                        .where(this, sync_locks.c.holder == current)
                        .values(**taken)
                    )
                    return None
                if is_alive is None:
                    return current
            assert current is not None  # the row was read above
            if is_alive(current):
                return current
            with self.engine.begin() as conn:
                took = conn.execute(
                    update(sync_locks)
                    .where(
                        this,
                        sync_locks.c.holder == current,
                        sync_locks.c.acquired_at == acquired_at,
                    )
                    .values(**taken)
                ).rowcount
            if took:
                return None
            # released, or taken over by another process, while is_alive ran: look again
        if current is None:
            raise StoreUnavailable(
                f"could not take the sync lock of {definition!r}: it kept changing hands"
            )
        return current  # it changed hands each time we looked: someone else has it

    def renew_sync_lock(
        self,
        definition: str,
        holder: str,
        *,
        lease_seconds: float,
        now: datetime | None = None,
        process: str | None = None,
    ) -> bool:
        """Extend ``holder``'s lease to ``lease_seconds`` from now, held by ``process`` (None:
        between a run's steps, no process holds it; the lease alone keeps it). False when it no
        longer holds the lock (released, or expired and taken over): its sync should stop."""
        expires = _naive(now or utcnow()) + timedelta(seconds=lease_seconds)
        with self.engine.begin() as conn:
            renewed = conn.execute(
                update(sync_locks)
                .where(sync_locks.c.definition == definition, sync_locks.c.holder == holder)
                .values(expires_at=expires, process=process)
            ).rowcount
        return renewed == 1

    def release_sync_lock(self, definition: str, holder: str) -> bool:
        """Give the lock up; only its holder can (True if it did)."""
        with self.engine.begin() as conn:
            released = conn.execute(
                sync_locks.delete().where(
                    sync_locks.c.definition == definition, sync_locks.c.holder == holder
                )
            ).rowcount
        return released == 1

    def sync_lock(self, definition: str) -> SyncLock | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                select(sync_locks).where(sync_locks.c.definition == definition)
            ).first()
        if row is None:
            return None
        m = row._mapping
        return SyncLock(
            definition=m["definition"],
            holder=m["holder"],
            acquired_at=_aware(m["acquired_at"]),  # type: ignore[arg-type]
            expires_at=_aware(m["expires_at"]),  # type: ignore[arg-type]
            process=m["process"],
        )
