"""The producer inventories of a stored batch, for the cleanup (``lineage.inventories``).

Read at the cleanup step from the batch's stored events, only for a definition that turned a
reader on: the graph is not asked to carry them, and a definition without inventories pays
nothing. Only START events whose bytes name a task list are parsed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import orjson

from ol_dagster.lineage.inventories import Inventory, read_inventories
from ol_dagster.store import EventStore

# every reader's list is under a key of this name (the Airflow provider's ``airflow.tasks``)
_MARK = b'"tasks"'


def batch_inventories(store: EventStore, batch_id: int, readers: Sequence[str]) -> list[Inventory]:
    if not readers:
        return []
    return read_inventories(_starts(store, batch_id), readers)


def _starts(store: EventStore, batch_id: int) -> Iterator[dict[str, Any]]:
    for stored in store.iter_events(batch_id):
        if stored.event_type != "START" or _MARK not in stored.raw:
            continue
        try:
            event = orjson.loads(stored.raw)
        except orjson.JSONDecodeError:  # stored events were accepted as JSON; never expected
            continue
        if isinstance(event, dict):
            yield event
