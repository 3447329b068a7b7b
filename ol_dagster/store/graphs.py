"""Packed graphs: a batch's lineage graph kept, keyed by the inputs it was built from.

Building a large batch's graph costs seconds; a retry or a second catalog reuses the stored one
when its inputs (``sync.graph``: event digests, settings) are unchanged. The next batch of the
definition reuses the parts of it whose jobs did not change (``lineage.reuse``): a graph is kept
with those parts' names (``parts``), and the batch's events are read for their content digests.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from ol_dagster.store.base import StoreBase, naive, utcnow
from ol_dagster.store.events import READ_CHUNK
from ol_dagster.store.schema import batch_graphs, batches, events


@dataclass(frozen=True, slots=True)
class EventContent:
    """What grouping an event by job and run needs, and its content digest (None: none)."""

    kind: str
    run_id: str | None
    job_namespace: str | None
    job_name: str | None
    event_time: datetime
    content: bytes | None
    position: int  # in its batch: what ``raw_events_at`` reads it back by


@dataclass(frozen=True, slots=True)
class EarlierGraph:
    """The latest graph kept for an earlier batch of the definition, with its reusable parts."""

    batch_id: int
    parts: bytes
    graph: bytes


class PackedGraphs(StoreBase):
    """Save and load a batch's packed graph."""

    def save_graph(
        self,
        batch_id: int,
        inputs: bytes,
        graph: bytes,
        *,
        parts: bytes | None = None,
        now: datetime | None = None,
    ) -> None:
        """Keep the batch's packed graph, built from ``inputs`` (replacing any earlier one)."""
        values = {
            "inputs": inputs,
            "graph": graph,
            "parts": parts,
            "built_at": naive(now or utcnow()),
        }
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

    def graph_parts(self, batch_id: int) -> bytes | None:
        """The reusable parts kept with the batch's graph, None when none are."""
        with self.engine.connect() as conn:
            value = conn.execute(
                select(batch_graphs.c.parts).where(batch_graphs.c.batch_id == batch_id)
            ).scalar()
        return None if value is None else bytes(value)

    def earlier_graph(self, definition: str, before_batch: int) -> EarlierGraph | None:
        """The graph of the definition's latest batch before ``before_batch`` kept with its
        reusable parts."""
        with self.engine.connect() as conn:
            # the batch first, then its graph by key: ordered with the graphs, SQLite would copy
            # every kept graph into its sort (0.2 s with 30 snapshots kept)
            batch_id = conn.execute(
                select(batch_graphs.c.batch_id)
                .join(batches, batches.c.id == batch_graphs.c.batch_id)
                .where(
                    batches.c.definition == definition,
                    batch_graphs.c.batch_id < before_batch,
                    batch_graphs.c.parts.is_not(None),
                )
                .order_by(batch_graphs.c.batch_id.desc())
                .limit(1)
            ).scalar()
            if batch_id is None:
                return None
            row = conn.execute(
                select(batch_graphs.c.parts, batch_graphs.c.graph).where(
                    batch_graphs.c.batch_id == batch_id
                )
            ).first()
        if row is None or row[0] is None:  # removed since (retention)
            return None
        return EarlierGraph(int(batch_id), bytes(row[0]), bytes(row[1]))

    def event_contents(self, batch_id: int) -> list[EventContent]:
        """The batch's events as grouping needs them, in position order, without the events."""
        out: list[EventContent] = []
        last = -1
        c = events.c
        while True:
            with self.engine.connect() as conn:
                rows = conn.execute(
                    select(
                        c.position,
                        c.kind,
                        c.run_id,
                        c.job_namespace,
                        c.job_name,
                        c.event_time,
                        c.content,
                    )
                    .where(c.batch_id == batch_id, c.position > last)
                    .order_by(c.position)
                    .limit(READ_CHUNK * 10)
                ).all()
            out.extend(
                EventContent(kind, run, ns, name, t, None if content is None else bytes(content), p)
                for p, kind, run, ns, name, t, content in rows
            )
            if len(rows) < READ_CHUNK * 10:
                return out
            last = rows[-1][0]
