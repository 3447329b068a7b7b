"""The lineage state document of each definition: what it has synced, for the asset graph.

One JSON document per definition (its shape: ``ol_dagster.lineage_state``), replaced whole by
each sync and read by the code location when it builds its external assets.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import select

from ol_dagster.store import schema
from ol_dagster.store.base import StoreBase, naive, utcnow


class LineageStates(StoreBase):
    """Save and read a definition's lineage state."""

    def save_lineage_state(
        self, definition: str, state: Mapping[str, Any], *, now: datetime | None = None
    ) -> None:
        values = {"state": state, "refreshed_at": naive(now or utcnow())}
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
