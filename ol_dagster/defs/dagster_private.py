"""The one place ol-dagster reaches into Dagster's private modules (``dagster._...``).

Dagster keeps these names out of its public API, so any release may move or change them. Each is
used here once, with why nothing public does the same, so that a Dagster upgrade that moves one
breaks this module only; ``ol_dagster_tests/project/test_layers.py`` refuses a private Dagster
import anywhere else in the package.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeAlias

import dagster as dg
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.base_storage import DagsterStorage
from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    INDEX_SHARD_NAME,
    SqliteEventLogStorage,
)
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.schedules.sqlite.sqlite_schedule_storage import SqliteScheduleStorage
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from dagster._core.storage.sqlite_storage import DagsterSqliteStorage
from dagster._serdes import ConfigurableClassData
from sqlalchemy import Connection, Engine, create_engine
from sqlalchemy.pool import QueuePool

if TYPE_CHECKING:
    # what ``dg.define_asset_job`` returns (resolved against the assets when the Definitions are
    # built); Dagster does not export the class, so it is named for the type checker only
    from dagster._core.definitions.unresolved_asset_job_definition import (
        UnresolvedAssetJobDefinition,
    )

# a definition's sync job, as the sensors are given it
SyncJob: TypeAlias = "dg.JobDefinition | UnresolvedAssetJobDefinition"

# Set by the first load of a process that serves the asset graph (see ``serves_asset_graph``).
_serves_asset_graph = False


def serves_asset_graph() -> bool:
    """Whether this load serves the asset graph. Run and step workers reconstruct the definitions
    only to execute a sync or analysis job, which depends on no synced-lineage asset: they skip
    building them (at 100,000 synced jobs about two minutes and 3.7 GB per process).

    The load type alone does not tell them apart: a code server (``dagster dev``, ``dagster api
    grpc``) loads the definitions for ``INITIALIZATION``, then serves a ``RECONSTRUCTION`` of them
    made in the same process; a run or step worker is a new process that only reconstructs (and
    reconstruction metadata cannot mark the difference: Dagster hands the code server's on to
    every run). So a process that initialized the definitions serves the graph, one that only
    reconstructs them does not."""
    global _serves_asset_graph
    # not re-exported by ``dagster``: the load context is how Dagster says why it loads
    from dagster._core.definitions.definitions_load_context import (
        DefinitionsLoadContext,
        DefinitionsLoadType,
    )

    if DefinitionsLoadContext.get().load_type == DefinitionsLoadType.INITIALIZATION:
        _serves_asset_graph = True
    return _serves_asset_graph


# -- Dagster's SQLite storage, one connection per database file -----------------------------------
#
# Dagster's SQLite storages open a new engine and connection for every call (``NullPool``): a
# sync run stores ~50 Dagster events and reads its own, which made ~220 connections per run, each
# opened, initialized and closed (the close checkpoints the write-ahead log). The storages below
# are Dagster's, on the same files, with one engine per file that keeps its connection: the UI,
# the daemon and any process using Dagster's own classes read what they write, as before.

# run shards whose engines an event log keeps besides the index: the run being executed and the
# few runs a sync reads afterwards (its lineage report, a dead run it fails)
_KEPT_RUN_SHARDS = 3


def _sqlite_engine(url: str, **connect_args: Any) -> Engine:
    """An engine that keeps one connection and opens more only while others are in use (each
    storage call holds one for its duration, from any thread)."""
    return create_engine(
        url,
        poolclass=QueuePool,
        pool_size=1,
        max_overflow=-1,
        connect_args={**connect_args, "check_same_thread": False},
    )


class PooledSqliteEventLogStorage(SqliteEventLogStorage):
    """Dagster's run-sharded SQLite event log (``history/runs/*.db``), one kept engine per shard."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None) -> None:
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._pid = os.getpid()
        self._tables: set[str] = set()
        super().__init__(base_dir, inst_data)

    def has_table(self, table_name: str) -> bool:
        # asked on every stored asset and check event, each time on a new connection; a table
        # once there stays (only ``wipe`` and ``upgrade`` change them), one not there is asked again
        if table_name not in self._tables:
            if not super().has_table(table_name):
                return False
            self._tables.add(table_name)
        return True

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock, self._engine(shard).connect() as conn, conn.begin():
            yield conn

    def _engine(self, shard: str) -> Engine:
        if self._pid != os.getpid():  # a forked child: its parent's connections are not its own
            for engine in self._engines.values():
                engine.dispose(close=False)
            self._engines.clear()
            self._pid = os.getpid()
        engine = self._engines.pop(shard, None)
        if engine is None:
            url = self.conn_string_for_shard(shard)
            engine = _sqlite_engine(url, timeout=SQLITE_BUSY_TIMEOUT_SECONDS)
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
        self._engines[shard] = engine
        runs = [s for s in self._engines if s != INDEX_SHARD_NAME]
        for old in runs[: max(len(runs) - _KEPT_RUN_SHARDS, 0)]:
            self._engines.pop(old).dispose()
        return engine

    def _dispose_engines(self) -> None:
        with self._db_lock:
            while self._engines:
                self._engines.popitem()[1].dispose()

    def wipe(self) -> None:
        self._dispose_engines()  # wiping deletes the shards' files
        self._tables.clear()
        super().wipe()

    def upgrade(self) -> None:
        self._tables.clear()
        super().upgrade()

    def dispose(self) -> None:
        super().dispose()
        self._dispose_engines()


class PooledSqliteRunStorage(SqliteRunStorage):
    """Dagster's SQLite run storage (``history/runs.db``) with one kept engine."""

    def __init__(self, conn_string: str, inst_data: ConfigurableClassData | None = None) -> None:
        super().__init__(conn_string, inst_data)
        self._engine = _sqlite_engine(conn_string)

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with self._engine.connect() as conn, conn.begin():
            yield conn

    def dispose(self) -> None:
        super().dispose()
        self._engine.dispose()


class PooledSqliteStorage(DagsterSqliteStorage):
    """Dagster's default SQLite storage (``DAGSTER_HOME``'s ``history/`` and ``schedules/``) with
    the pooled run and event log storages above. Named in ``dagster.yaml`` as ``storage: custom:
    {module: ol_dagster.defs.dagster_private, class: PooledSqliteStorage, config: {base_dir:
    ...}}``; ``sqlite_instance`` uses it for an instance on Dagster's default storage."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None) -> None:
        # not DagsterSqliteStorage.__init__: it would open Dagster's own storages first
        DagsterStorage.__init__(self)
        self.base_dir = base_dir
        history = os.path.join(base_dir, "history")
        self._run_storage = PooledSqliteRunStorage.from_local(os.path.join(history, ""))
        self._event_log_storage = PooledSqliteEventLogStorage(os.path.join(history, "runs", ""))
        self._schedule_storage = SqliteScheduleStorage.from_local(
            os.path.join(base_dir, "schedules")
        )
        self._inst_data = inst_data

    @classmethod
    def from_config_value(  # pyright: ignore[reportIncompatibleMethodOverride]
        cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]
    ) -> PooledSqliteStorage:
        return cls.from_local(inst_data=inst_data, **config_value)


_DAGSTER_SQLITE = ("dagster._core.storage.sqlite_storage", "DagsterSqliteStorage")


def sqlite_instance() -> dg.DagsterInstance:
    """The instance in ``DAGSTER_HOME`` (``dg.DagsterInstance.get()``), on the pooled storage
    when its ``dagster.yaml`` leaves the storage to Dagster's SQLite default (or names it)."""
    home = os.path.expanduser(os.environ.get("DAGSTER_HOME", ""))
    if not (os.path.isabs(home) and os.path.isdir(home)):
        return dg.DagsterInstance.get()  # Dagster says what is wrong with DAGSTER_HOME
    ref = InstanceRef.from_dir(home)
    data = ref.storage_data
    if data is not None and (data.module_name, data.class_name) == _DAGSTER_SQLITE:
        pooled = ConfigurableClassData(__name__, PooledSqliteStorage.__name__, data.config_yaml)
        ref = ref._replace(storage_data=pooled)
    return dg.DagsterInstance.from_ref(ref)
