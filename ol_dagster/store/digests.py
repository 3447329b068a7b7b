"""The digests of stored events, read without the events: what a packed graph is keyed by.

A batch's graph is rebuilt only when what it was built from changed (``sync.graph``): the digests
of its own events and of the earlier parts of its runs, read from ``ol_events.digest`` (an event
stored before version 7 has none and is read once for it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import case, select

from ol_dagster.store.base import StoreBase
from ol_dagster.store.event_rows import event_digest
from ol_dagster.store.events import READ_CHUNK
from ol_dagster.store.schema import BatchStatus, batches, events


def _raw_without_digest() -> Any:
    """``raw`` only where the digest was never stored (rows written before version 7)."""
    return case((events.c.digest.is_(None), events.c.raw), else_=None)


def _digest_of(digest: bytes | None, raw: bytes | None) -> bytes:
    if digest is not None:
        return bytes(digest)
    assert raw is not None
    return event_digest(bytes(raw))


class EventDigests(StoreBase):
    """A batch's event digests, and those of its runs' earlier parts."""

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
                    .limit(READ_CHUNK * 10)
                ).all()
            digests.extend(_digest_of(digest, raw) for _, digest, raw in rows)
            if len(rows) < READ_CHUNK * 10:
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
