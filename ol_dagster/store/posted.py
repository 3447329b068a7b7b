"""Posted batches (``/lineage/batch``, a Kafka snapshot aside), written whole in short transactions.

A posted batch is visible whole or not at all: a small one is written in a single transaction; a
large one in short transactions of ``POSTED_CHUNK`` events under the status RECEIVING, which
nothing reads (the sync, the sensor, retention, the analyses), made SEALED by its last one. On
SQLite, whose one write lock a transaction holds from its start, a 100,000-event post written at
once made every single-event post wait ~2 s for it; between short transactions the receiver's
other writes take their turn (``store.turns``). A post that fails half-way removes what it wrote;
one whose receiver was killed is removed by ``remove_abandoned`` (at the receiver's next start and
by the sensor).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, func, select, update
from sqlalchemy.exc import OperationalError

from ol_dagster.store.base import StoreBase, StoreUnavailable, naive, utcnow
from ol_dagster.store.event_rows import NewEvent, event_values, insert_events
from ol_dagster.store.holder import process_gone, this_process
from ol_dagster.store.schema import BatchKind, BatchStatus, batches, events

# Events per transaction of a posted batch: SQLite's write lock held 3 ms (median), 11 ms at
# most, for 500-byte events: about the longest a single-event post waits for a large post. A
# batch up to this size is one transaction, never RECEIVING.
POSTED_CHUNK = 500
# A RECEIVING batch this old is abandoned whatever its writer (one on another machine, whose
# process cannot be checked): a post takes seconds, bounded by ``limits.maxBodyBytes``.
ABANDONED_AFTER = timedelta(hours=1)

log = logging.getLogger(__name__)


class PostedBatches(StoreBase):
    """``/lineage/batch`` posts in, whole; unfinished ones out."""

    def add_posted_batch(
        self,
        definition: str,
        new_events: Sequence[NewEvent],
        *,
        received: int,
        rejections: Sequence[dict[str, Any]] = (),
        snapshot: bool = False,
        sequence: int | None = None,
        now: datetime | None = None,
    ) -> int:
        """Store one ``/lineage/batch`` post whole, sealed: all of it is visible, or none of it.
        ``sequence``: the producer's OL-Snapshot-Sequence (``ol_dagster.snapshot_order``);
        without one the post is ordered by its arrival.

        Up to ``POSTED_CHUNK`` events in one transaction; more in one transaction per chunk,
        the batch RECEIVING until the last one seals it. A failure on the way removes the part
        written and raises as a single transaction would (``StoreUnavailable`` when the store
        refuses)."""
        now = naive(now or utcnow())
        values = event_values(self.engine.dialect, new_events)
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
            "snapshot_sequence": sequence,
            "ordered_at": now,
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
                        insert_events(conn, batch_id, start, chunk)  # type: ignore[arg-type]
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
        cutoff = naive(now or utcnow()) - older_than
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
