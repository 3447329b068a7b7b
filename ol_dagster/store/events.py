"""Reading stored events back: a batch's in order, a time range's, by id, and what they hold.

Every reader skips batches still RECEIVING (``store.posted``). ``raw_events`` feeds every sync's
graph and ``iter_events`` is benchmarked (``benchmarks/sync_graph.py``): both read in chunks to
keep memory flat, and a row becomes a ``StoredEvent`` (or its bytes) with no other work.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Row, func, select

from ol_dagster.store.base import StoreBase, naive
from ol_dagster.store.event_rows import StoredEvent
from ol_dagster.store.schema import BatchStatus, batches, events

READ_CHUNK = 2_000


def _receiving_ids() -> Any:
    """The ids of the batches still being received, which no reader sees."""
    return select(batches.c.id).where(batches.c.status == BatchStatus.RECEIVING)


class EventReads(StoreBase):
    """The events of a batch, of a time range, of given ids; their kinds, namespaces and runs."""

    def iter_events(self, batch_id: int) -> Iterator[StoredEvent]:
        """The batch's events in position order, read in chunks to keep memory flat."""
        c = events.c
        for r in self._in_chunks(
            batch_id,
            c.raw,
            c.kind,
            c.event_type,
            c.event_time,
            c.producer,
            c.job_namespace,
            c.job_name,
            c.run_id,
        ):
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

    def raw_events(self, batch_id: int) -> Iterator[bytes]:
        """The batch's events as stored, in position order: what normalizing reads, without the
        columns ``iter_events`` converts for each row (its time above all, two thirds of
        reading a batch)."""
        for r in self._in_chunks(batch_id, events.c.raw):
            yield bytes(r[1])

    def _in_chunks(self, batch_id: int, *columns: Any) -> Iterator[Row[Any]]:
        """The batch's rows (position, then ``columns``) in position order, ``READ_CHUNK`` a
        read, each read on a connection of its own, so memory stays flat."""
        last = -1
        while True:
            with self.engine.connect() as conn:
                rows = conn.execute(
                    select(events.c.position, *columns)
                    .where(events.c.batch_id == batch_id, events.c.position > last)
                    .order_by(events.c.position)
                    .limit(READ_CHUNK)
                ).all()
            yield from rows
            if len(rows) < READ_CHUNK:
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
                    events.c.event_time >= naive(start),
                    events.c.event_time < naive(end),
                    events.c.batch_id.not_in(_receiving_ids()),
                )
                .order_by(events.c.id)
                .limit(READ_CHUNK)
            )
            if definition is not None:
                query = query.join(batches, batches.c.id == events.c.batch_id).where(
                    batches.c.definition == definition
                )
            with self.engine.connect() as conn:
                rows = conn.execute(query).all()
            for _, raw in rows:
                yield bytes(raw)
            if len(rows) < READ_CHUNK:
                return
            last_id = rows[-1][0]

    def event_counts(self, batch_id: int) -> dict[str, dict[str, int]]:
        """How the batch's events split by kind, eventType and producer. One pass over the batch:
        the columns are stored after each event's JSON, so every read of them walks it."""
        cols = (events.c.kind, events.c.event_type, events.c.producer)
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(*cols, func.count()).where(events.c.batch_id == batch_id).group_by(*cols)
            ).all()
        out: dict[str, dict[str, int]] = {}
        for i, name in enumerate(("kind", "eventType", "producer")):
            split: Counter[str | None] = Counter()
            for row in rows:
                split[row[i]] += int(row[3])
            out[name] = {
                (k if k is not None else "(none)"): split[k]
                for k in sorted(split, key=lambda k: (k is not None, k or ""))
            }
        return out

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

    def raw_events_at(self, batch_id: int, positions: Sequence[int]) -> Iterator[bytes]:
        """The batch's raw events at these positions, in the order given: a few events of a
        large batch without reading the others. ``ValueError`` when one is gone."""
        for position, raw in self._raw_by(
            events.c.position, positions, events.c.batch_id == batch_id
        ):
            if raw is None:
                raise ValueError(f"event {position} of batch {batch_id} is no longer stored")
            yield raw

    def events_by_id(self, ids: Sequence[int]) -> Iterator[bytes]:
        """The raw events with these ids, in the order given."""
        for i, raw in self._raw_by(events.c.id, ids):
            if raw is None:
                raise KeyError(f"event {i} is no longer in the event store")
            yield raw

    def _raw_by(
        self, key: Any, values: Sequence[int], *where: Any
    ) -> Iterator[tuple[int, bytes | None]]:
        """Each of ``values`` of the column ``key`` with its raw event (None: none), in the order
        given, read 500 at a time."""
        for start in range(0, len(values), 500):
            chunk = values[start : start + 500]
            with self.engine.connect() as conn:
                rows = dict(
                    conn.execute(select(key, events.c.raw).where(key.in_(chunk), *where))
                    .tuples()
                    .all()
                )
            for value in chunk:
                raw = rows.get(value)
                yield value, None if raw is None else bytes(raw)
