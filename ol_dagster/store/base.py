"""What every part of the event store shares: its engine, its write turns, the WAL
checkpointer poked after a write, and its conventions (naive UTC times, ``StoreUnavailable``).

``EventStore`` (``store.event_store``) is one object assembled from one class per concern
(batches, posted and stream intake, the Kafka intake, event reads, digests, packed graphs, the
lineage state, per-catalog facts, the cleanup journal, the sync lock), each a mixin on
``StoreBase``: every part reaches the same engine, and callers keep one flat API that pyright
checks, with no call passing through a forwarding layer.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine

from ol_dagster.db import WalCheckpointer
from ol_dagster.store.turns import WriteTurns


class StoreUnavailable(RuntimeError):
    """The store's database cannot be reached; callers should answer "retry later"."""


def utcnow() -> datetime:
    return datetime.now(UTC)


def naive(dt: datetime) -> datetime:
    """The store keeps naive UTC times so SQLite and PostgreSQL compare them the same way."""
    return dt.astimezone(UTC).replace(tzinfo=None) if dt.tzinfo else dt


def aware(dt: datetime | None) -> datetime | None:
    return dt.replace(tzinfo=UTC) if dt is not None and dt.tzinfo is None else dt


class StoreBase:
    """The state the parts of ``EventStore`` share; ``EventStore.__init__`` sets it."""

    url: str
    engine: Engine
    schema_version: int
    _turns: WriteTurns
    _checkpointer: WalCheckpointer | None

    def _written(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.poke()
