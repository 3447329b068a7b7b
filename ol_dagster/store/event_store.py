"""``EventStore``: the one object callers hold, assembled from one part per concern.

Like Marquez's storage (one DAO per entity), each concern of the store is a short module with
one class of it, and ``EventStore`` is all of them over one engine (``store.base.StoreBase``):

* ``posted``: ``/lineage/batch`` posts written whole in short transactions, unfinished ones removed;
* ``stream``: single events appended to a definition's open stream batch, sealed when due;
* ``kafka_intake``: one Kafka poll in one transaction with its offsets, dead letters;
* ``event_rows``: an event's row, digest and bulk insert (the receiver's hot path);
* ``batches``: batch records, their statuses and retries; ``retention``: which synced ones go;
* ``events`` and ``digests``: stored events read back, and their digests without them;
* ``catalog_facts``: each catalog's part of a batch's sync;
* ``graphs``: packed graphs; ``lineage_state``: each definition's lineage state document;
* ``changes``: each job's and dataset's last synced part, and each batch's change set;
* ``journal``: the cleanup journal; ``lock``: each definition's sync lock;
* ``turns``: fair turns at SQLite's write lock; ``schema``: tables and migrations.

The parts are mixins rather than objects the store hands calls to: callers keep one flat API,
every method is checked by pyright where it is written, and no call passes a forwarding layer
(the receiver's writes and ``iter_events`` are benchmarked). The records callers use are
exported by ``ol_dagster.store``.
"""

from __future__ import annotations

from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError

from ol_dagster.db import WalCheckpointer, is_sqlite_file, open_engine
from ol_dagster.store import schema
from ol_dagster.store.base import StoreUnavailable, utcnow
from ol_dagster.store.batches import BatchRecords
from ol_dagster.store.catalog_changes import CatalogChanges
from ol_dagster.store.catalog_facts import CatalogFacts
from ol_dagster.store.changes import LineageChanges
from ol_dagster.store.digests import EventDigests
from ol_dagster.store.event_rows import StoredEvent, event_digest
from ol_dagster.store.events import EventReads
from ol_dagster.store.graphs import PackedGraphs
from ol_dagster.store.journal import CleanupJournal
from ol_dagster.store.kafka_intake import KafkaIntake
from ol_dagster.store.lineage_state import LineageStates
from ol_dagster.store.lock import SyncLocks
from ol_dagster.store.posted import PostedBatches
from ol_dagster.store.retention import Retention
from ol_dagster.store.stream import StreamBatches
from ol_dagster.store.turns import WriteTurns

# imported from here by callers written before the split
__all__ = ["EventStore", "StoredEvent", "event_digest", "utcnow"]


class EventStore(
    PostedBatches,
    StreamBatches,
    KafkaIntake,
    BatchRecords,
    Retention,
    EventReads,
    EventDigests,
    CatalogFacts,
    PackedGraphs,
    LineageStates,
    CatalogChanges,
    LineageChanges,
    CleanupJournal,
    SyncLocks,
):
    """The event store on any SQLAlchemy URL (a SQLite file by default)."""

    def __init__(
        self, url: str, *, engine: Engine | None = None, background_checkpoints: bool = False
    ) -> None:
        """``background_checkpoints``: on a SQLite file, commits leave the WAL checkpoint to a
        background thread (``db.WalCheckpointer``): what the receiver wants, nobody else."""
        self.url = url
        self._checkpointer = None
        if engine is None and background_checkpoints and is_sqlite_file(url):
            engine = open_engine(url, wal_autocheckpoint=False)
            self._checkpointer = WalCheckpointer(engine)
        self.engine = engine or open_engine(url)
        self._turns = WriteTurns(self.engine.dialect.name == "sqlite")
        try:
            self.schema_version = schema.migrate(self.engine)
        except OperationalError as exc:
            raise StoreUnavailable(f"event store unreachable: {exc.orig}") from None

    def dispose(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.close()
        self.engine.dispose()

    def ping(self) -> None:
        """The store answers: ``SELECT 1`` on the driver's connection. Through SQLAlchemy it
        would begin a transaction, on SQLite ``BEGIN IMMEDIATE`` (``db.open_engine``), which
        waits for the write lock: /healthz waited seconds for a large post's write (issue 15)."""
        try:
            raw = self.engine.raw_connection()
            try:
                cursor = raw.cursor()
                cursor.execute("SELECT 1")
                cursor.close()
            finally:
                raw.close()
        except (OperationalError, self.engine.dialect.loaded_dbapi.OperationalError) as exc:
            reason = getattr(exc, "orig", exc)
            raise StoreUnavailable(f"event store unreachable: {reason}") from None
