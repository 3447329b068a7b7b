"""The event store: every accepted event, grouped into batches that become Dagster partitions, and
each definition's sync lock.

Callers hold one ``EventStore``; its parts, one module a concern, are listed in
``store.event_store``."""

from ol_dagster.store.base import StoreUnavailable
from ol_dagster.store.batches import BatchRecord
from ol_dagster.store.catalog_facts import CatalogRecord
from ol_dagster.store.event_rows import NewEvent, StoredEvent
from ol_dagster.store.event_store import EventStore
from ol_dagster.store.journal import JournalEntry, JournalStatus
from ol_dagster.store.lock import SyncLock
from ol_dagster.store.schema import BatchKind, BatchStatus

__all__ = [
    "BatchKind",
    "BatchRecord",
    "BatchStatus",
    "CatalogRecord",
    "EventStore",
    "JournalEntry",
    "JournalStatus",
    "NewEvent",
    "StoreUnavailable",
    "StoredEvent",
    "SyncLock",
]
