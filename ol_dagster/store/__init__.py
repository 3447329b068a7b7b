"""The event store: every accepted event, grouped into batches that become Dagster partitions, and
each definition's sync lock."""

from ol_dagster.store.event_store import (
    BatchRecord,
    EventStore,
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
    "EventStore",
    "NewEvent",
    "StoreUnavailable",
    "StoredEvent",
    "SyncLock",
]
