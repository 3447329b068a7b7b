"""Packed graphs: a batch's lineage graph kept, keyed by the inputs it was built from.

Building a large batch's graph costs seconds; a retry or a second catalog reuses the stored one
when its inputs (``sync.graph``: event digests, settings) are unchanged.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from ol_dagster.store.base import StoreBase, naive, utcnow
from ol_dagster.store.schema import batch_graphs


class PackedGraphs(StoreBase):
    """Save and load a batch's packed graph."""

    def save_graph(
        self, batch_id: int, inputs: bytes, graph: bytes, *, now: datetime | None = None
    ) -> None:
        """Keep the batch's packed graph, built from ``inputs`` (replacing any earlier one)."""
        values = {"inputs": inputs, "graph": graph, "built_at": naive(now or utcnow())}
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
