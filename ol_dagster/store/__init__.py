"""The event store: every accepted event, grouped into batches that become Dagster partitions, and
each definition's sync lock."""

from ol_dagster.store.event_store import (
    BatchRecord,
    CatalogRecord,
    EventStore,
    JournalEntry,
    JournalStatus,
    NewEvent,
    StoredEvent,
    StoreUnavailable,
    SyncLock,
)
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
