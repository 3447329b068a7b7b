"""The digests of stored events, read without the events: what a packed graph is keyed by.

A batch's graph is rebuilt only when what it was built from changed (``sync.graph``): the digests
of its own events and of the earlier parts of its runs, read from ``ol_events.digest`` (an event
stored before version 7 has none and is read once for it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import case, func, select

from ol_dagster.store.base import StoreBase
from ol_dagster.store.event_rows import event_digest
from ol_dagster.store.events import READ_CHUNK
from ol_dagster.store.schema import BatchStatus, batches, events

_RUN_CHUNK = 500  # run ids per IN list: far below every database's limit on bound parameters


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
        earlier parts of runs split over batches. ``events_by_id`` reads them.

        Found through the run-id index alone, so the cost follows the runs asked for, not the
        history the store keeps: joined to the batches, both SQLite and PostgreSQL walked every
        earlier event of the definition through the batch index, once per chunk of run ids (a
        sync slowed with every snapshot retention kept). The batches that count are read apart
        (a row per batch, not per event)."""
        wanted = set(runs)
        ids = sorted({r[0] for r in wanted})
        if not ids:
            return []
        with self.engine.connect() as conn:
            counted = set(
                conn.execute(
                    select(batches.c.id).where(
                        batches.c.definition == definition,
                        batches.c.id < before_batch,
                        batches.c.status != BatchStatus.RECEIVING,
                    )
                ).scalars()
            )
        found: list[tuple[int, int, int, bytes]] = []
        for start in range(0, len(ids), _RUN_CHUNK):
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
                    ).where(
                        events.c.run_id.in_(ids[start : start + _RUN_CHUNK]),
                        # ``+ 0``: an expression no index serves, so no planner walks the batch
                        # index over the history instead of looking the run ids up
                        events.c.batch_id + 0 < before_batch,
                    )
                ).all()
            found.extend(
                (b, p, i, _digest_of(digest, raw))
                for b, p, i, digest, raw, run_id, namespace, name in rows
                if b in counted and (run_id, namespace, name) in wanted
            )
        found.sort()  # arrival order: batch, then position (a chunk of run ids is not it)
        return [(i, digest) for _, _, i, digest in found]

    def earlier_batches_mark(self, definition: str, before_batch: int) -> tuple[int, int, int]:
        """What changes whenever the events of the definition's batches before ``before_batch``
        do: how many there are, how many are still RECEIVING, and their accepted events. Batch
        ids only grow, so later batches never join that set; it changes when one goes (a purge,
        an abandoned post: the count), a post finishes (RECEIVING to SEALED) or a stream batch
        gains events (its accepted count). One aggregate over a row per batch."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(
                    func.count(),
                    func.count(case((batches.c.status == BatchStatus.RECEIVING, 1))),
                    func.coalesce(func.sum(batches.c.accepted_count), 0),
                ).where(batches.c.definition == definition, batches.c.id < before_batch)
            ).one()
        return int(row[0]), int(row[1]), int(row[2])
