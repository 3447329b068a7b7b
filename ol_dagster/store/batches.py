"""Batches as records: read one or a definition's in order, their status, retries.

A batch is the unit everything downstream works on (one Dagster partition, one run, one
cleanup); how one is written is ``store.posted``, ``store.stream`` and ``store.kafka_intake``.
A FAILED batch keeps its events for a retry after a growing backoff; a SYNCED one is purged
(with its events, graph and catalog facts) once older than the definition's retention and no
run still needs it (``store.retention``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select

from ol_dagster.snapshot_order import SnapshotOrder
from ol_dagster.store.base import StoreBase, aware, naive, utcnow
from ol_dagster.store.schema import BatchKind, BatchStatus, batches

RETRY_BASE = timedelta(minutes=1)
RETRY_MAX = timedelta(hours=1)


def retry_backoff(attempts: int) -> timedelta:
    """1, 2, 4 ... minutes after each failed sync, at most an hour."""
    return min(RETRY_BASE * 2 ** max(attempts - 1, 0), RETRY_MAX)


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
    snapshot_sequence: int | None = None  # the producer's OL-Snapshot-Sequence
    ordered_at: datetime | None = None  # the time a snapshot without a sequence is ordered by

    @property
    def partition_key(self) -> str:
        return str(self.id)

    @property
    def order(self) -> SnapshotOrder:
        """Its place in its producer's order of snapshots (``ol_dagster.snapshot_order``)."""
        at = self.ordered_at or self.received_at
        return SnapshotOrder(self.snapshot_sequence, at, self.id)


def _record(row: Any) -> BatchRecord:
    m = row._mapping
    return BatchRecord(
        id=m["id"],
        definition=m["definition"],
        kind=BatchKind(m["kind"]),
        status=BatchStatus(m["status"]),
        received_at=aware(m["received_at"]),  # type: ignore[arg-type]
        sealed_at=aware(m["sealed_at"]),
        received_count=m["received_count"],
        accepted_count=m["accepted_count"],
        rejected_count=m["rejected_count"],
        whole_snapshot=bool(m["whole_snapshot"]),
        rejections=list(m["rejections"] or []),
        cutoff=aware(m["cutoff"]),
        upload_result=m["upload_result"],
        cleanup_report=m["cleanup_report"],
        synced_at=aware(m["synced_at"]),
        attempts=m["attempts"] or 0,
        next_attempt_at=aware(m["next_attempt_at"]),
        snapshot_sequence=m["snapshot_sequence"],
        ordered_at=aware(m["ordered_at"]),
    )


class BatchRecords(StoreBase):
    """Reading batches, moving them through their statuses, purging the synced ones."""

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

    def set_status(
        self, batch_id: int, status: BatchStatus, *, now: datetime | None = None
    ) -> None:
        """SYNCED ends a batch; FAILED keeps its events pending for a retry after a backoff."""
        now_n = naive(now or utcnow())
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
        now_n = naive(now or utcnow())
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

    def previous_stream_seal(self, definition: str, batch_id: int) -> datetime | None:
        """When the definition's stream batch before ``batch_id`` was sealed (None: none was)."""
        b = batches.c
        with self.engine.connect() as conn:
            sealed = conn.execute(
                select(func.max(b.sealed_at)).where(
                    b.definition == definition, b.kind == BatchKind.STREAM, b.id < batch_id
                )
            ).scalar_one()
        return aware(sealed) if sealed is not None else None
