"""Stream batches: single events appended to a definition's open batch, sealed when due.

Single-event posts (``/lineage``) and a Kafka stream topic's messages join the definition's one
OPEN stream batch; it only becomes visible to the sync once the sensor seals it, when it is older
than the window or holds enough events (``seal_due``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, and_, select, update
from sqlalchemy.exc import IntegrityError, OperationalError

from ol_dagster.store.base import StoreBase, StoreUnavailable, naive, utcnow
from ol_dagster.store.event_rows import NewEvent, event_values, insert_events
from ol_dagster.store.schema import BatchKind, BatchStatus, batches


def append_stream(
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
                ordered_at=now,
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
        insert_events(conn, batch_id, start, values)
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


class StreamBatches(StoreBase):
    """Appending to the open stream batch, and sealing it."""

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
        now = naive(now or utcnow())
        values = event_values(self.engine.dialect, new_events)
        for _attempt in range(5):
            try:
                with self._turns.turn(), self.engine.begin() as conn:
                    batch_id = append_stream(conn, definition, values, received, rejections, now)
                self._written()
                return batch_id
            except IntegrityError:
                continue  # another receiver opened the stream batch first: append to it instead
            except OperationalError as exc:
                raise StoreUnavailable(f"event store unreachable: {exc.orig}") from None
        raise StoreUnavailable("could not open a stream batch after repeated write conflicts")

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
        now_n = naive(now or utcnow())
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
