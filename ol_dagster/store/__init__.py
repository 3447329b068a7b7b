"""The event store: every accepted event, grouped into batches that become Dagster partitions."""

from ol_dagster.store.event_store import (
    BatchRecord,
    EventStore,
    NewEvent,
    StoredEvent,
    StoreUnavailable,
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
]
