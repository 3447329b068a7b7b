"""The one place ol-dagster reaches into Dagster's private modules (``dagster._...``).

Dagster keeps these names out of its public API, so any release may move or change them. Each is
used here once, with why nothing public does the same, so that a Dagster upgrade that moves one
breaks this module only; ``ol_dagster_tests/project/test_layers.py`` refuses a private Dagster
import anywhere else in the package.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import re
import shutil
import sqlite3
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing, contextmanager, suppress
from typing import TYPE_CHECKING, Any, Self, TypeAlias

import dagster as dg


def _defer_package_init(name: str) -> None:
    """Run the ``__init__`` of the package ``name`` only when one of its own names is asked for,
    not when a submodule of it is imported.

    Dagster's run storage imports ``dagster._daemon.types`` for one class; the package's
    ``__init__`` imports every daemon (sensors, schedules, backfills, monitoring) and with them
    structlog and rich: a third of a second of every ``ol-dagster sync``, for code a sync never
    runs. Deferred, ``from dagster._daemon.types import X`` loads that submodule only, and the
    first ``from dagster._daemon import Y`` (or ``dagster._daemon.Y``) runs the ``__init__`` then,
    so whatever a process asks of the package it gets. A process that imported the package
    already (the daemon, the webserver, a code server) keeps it as it is."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return
    loader = spec.loader
    module = importlib.util.module_from_spec(spec)
    lock = threading.RLock()

    def __getattr__(attr: str) -> Any:
        with lock:
            if module.__dict__.get("__getattr__") is __getattr__:
                del module.__dict__["__getattr__"]
                loader.exec_module(module)
        try:
            return module.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None

    module.__getattr__ = __getattr__  # pyright: ignore[reportAttributeAccessIssue]
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    setattr(sys.modules[parent], child, module)


@contextmanager
def _mako_without_pygments() -> Iterator[None]:
    """Meanwhile, mako's error pages are imported without their pygments highlighting.

    Dagster's storage modules import alembic, alembic imports mako (for its script templates),
    and mako's ``exceptions`` highlights source code in its HTML error pages with pygments when
    pygments is installed: pygments' lexers and formatters imported, and every installed
    package's entry points read for pygments plugins (a tenth of a second alone, three hundredths
    of an ``ol-dagster sync``, whose other imports read the entry points first). Nothing here
    renders mako's error pages; without pygments they escape the source instead, mako's own
    fallback when pygments is not installed. A process that imported mako's error pages already
    keeps them as they are."""
    plugin = "mako.ext.pygmentplugin"
    hide = "mako.exceptions" not in sys.modules and plugin not in sys.modules
    if hide:
        sys.modules[plugin] = None  # pyright: ignore[reportArgumentType] - its import now fails
    try:
        yield
    finally:
        if hide and sys.modules.get(plugin, plugin) is None:
            del sys.modules[plugin]


# before the storage modules below, which import ``dagster._daemon.types``
_defer_package_init("dagster._daemon")

with _mako_without_pygments():  # alembic and mako: imported by the storage modules
    import sqlalchemy
    import sqlalchemy.exc
    from dagster._core.execution.compute_logs import redirect_to_file
    from dagster._core.instance.ref import InstanceRef
    from dagster._core.storage.base_storage import DagsterStorage
    from dagster._core.storage.compute_log_manager import (
        CapturedLogContext,
        ComputeIOType,
    )
    from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
        INDEX_SHARD_NAME,
        SqliteEventLogStorage,
    )
    from dagster._core.storage.local_compute_log_manager import (
        IO_TYPE_EXTENSION,
        LocalComputeLogManager,
    )
    from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
    from dagster._core.storage.schedules.sqlite.sqlite_schedule_storage import SqliteScheduleStorage
    from dagster._core.storage.sql import (
        ScriptDirectory,  # pyright: ignore[reportPrivateImportUsage] - alembic's, as Dagster uses it
    )
    from dagster._core.storage.sqlite import (
        SQLITE_BUSY_TIMEOUT_SECONDS,
        create_db_conn_string,
    )
    from dagster._core.storage.sqlite_storage import DagsterSqliteStorage
    from dagster._serdes import ConfigurableClassData
    from dagster._utils import ensure_file, touch_file
    from sqlalchemy import Connection, Engine, create_engine, event
    from sqlalchemy.pool import NullPool, QueuePool

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


def _stamped(path: str, *tables: str) -> bool:
    """Whether the SQLite file at ``path`` is one Dagster made: it has a schema revision (and
    ``tables``). Dagster checks each file it opens against its newest revision, which reads every
    migration script of its own (five times a sync, a tenth of a second); for a file that has
    one, the check changes nothing (an older revision is ``dagster instance migrate``'s to
    upgrade), so it is left to Dagster only for a file without one, which it then makes."""
    if not os.path.exists(path):
        return False
    try:
        with closing(sqlite3.connect(path, timeout=SQLITE_BUSY_TIMEOUT_SECONDS)) as conn:
            if conn.execute("SELECT version_num FROM alembic_version").fetchone() is None:
                return False
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    except sqlite3.Error:
        return False
    return set(tables) <= names


# Dagster's migration scripts, read once per process (by script location): Dagster reads them
# again for every check and stamp of a database file, eight times when it makes an instance
_SCRIPTS: dict[tuple[str | None, str | None], ScriptDirectory] = {}
_SCRIPTS_LOCK = threading.RLock()


@contextmanager
def _scripts_read_once() -> Iterator[None]:
    """Meanwhile, ``ScriptDirectory.from_config`` (which Dagster's checks and stamps call) answers
    the script directory read first. The scripts are Dagster's own, the same for the whole
    process; what is read of them (their revisions) is only read, and each stamp still runs
    their environment."""
    with _SCRIPTS_LOCK:
        read = ScriptDirectory.__dict__["from_config"].__get__(None, ScriptDirectory)

        def from_config(config: Any) -> ScriptDirectory:
            key = (
                config.get_main_option("script_location"),
                config.get_main_option("version_locations"),
            )
            if key not in _SCRIPTS:
                _SCRIPTS[key] = read(config)
            return _SCRIPTS[key]

        saved = ScriptDirectory.__dict__["from_config"]
        ScriptDirectory.from_config = staticmethod(from_config)  # pyright: ignore[reportAttributeAccessIssue]
        try:
            yield
        finally:
            setattr(ScriptDirectory, "from_config", saved)  # noqa: B010 - the classmethod back


def _shard_makers() -> tuple[str, ...]:
    """What an empty run shard Dagster makes depends on: its tables and revision (Dagster), the
    DDL of both (SQLAlchemy, alembic) and the file format (SQLite)."""
    alembic = sys.modules["alembic"]  # Dagster's storage (``dagster._core.storage.sql``) uses it
    return (dg.__version__, sqlalchemy.__version__, alembic.__version__, sqlite3.sqlite_version)


def _sqlite_engine(url: str, **connect_args: Any) -> Engine:
    """An engine that keeps one connection and opens more only while others are in use (each
    storage call holds one for its duration, from any thread)."""
    engine = create_engine(
        url,
        poolclass=QueuePool,
        pool_size=1,
        max_overflow=-1,
        connect_args={**connect_args, "check_same_thread": False},
    )
    event.listen(engine, "connect", _commit_without_sync)
    return engine


def _commit_without_sync(dbapi_connection: sqlite3.Connection, _record: object) -> None:
    """On a file in write-ahead mode (every file Dagster makes), a commit does not wait for the
    disk: ``synchronous=NORMAL``, as ol-dagster's own store (``db.open_engine``). The file stays
    consistent whatever happens; a power cut (not a crash of the process) may lose the last
    commits. Each stored Dagster event is a commit or three: waiting for the disk was half of a
    stored event's CPU time and three quarters of its wall time."""
    cursor = dbapi_connection.cursor()
    try:
        if cursor.execute("PRAGMA journal_mode").fetchone() == ("wal",):
            cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


class PooledSqliteEventLogStorage(SqliteEventLogStorage):
    """Dagster's run-sharded SQLite event log (``history/runs/*.db``), one kept engine per shard."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None) -> None:
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._pid = os.getpid()
        self._tables: set[str] = set()
        self._template_path: str | None = None
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

    def _initdb(self, engine: Engine, for_index_shard: bool = False) -> None:
        # the index and every run's shard once per process; a new run's shard is a copy of an
        # empty one Dagster made (``_new_shard``)
        path = engine.url.database or ""
        if _stamped(path):
            return
        if not for_index_shard and self._new_shard(path):
            return
        with _scripts_read_once():
            super()._initdb(engine, for_index_shard)

    def _new_shard(self, path: str) -> bool:
        """Make the run shard at ``path`` as a copy of the instance's template: an empty shard
        made by Dagster's own ``_initdb`` (its tables, its schema revision, write-ahead
        journal), once per version of Dagster, SQLAlchemy, alembic and SQLite. Dagster makes
        every run's shard the same way, running its migration environment to stamp it (a tenth
        of a second of each sync, and what brings alembic into play); a copy is the same file.
        False (Dagster then makes the shard itself) when the file is there already, made
        meanwhile by another process, or cannot be copied."""
        name = os.path.basename(path)
        if not name.endswith(".db") or name == f"{INDEX_SHARD_NAME}.db" or os.path.exists(path):
            return False
        template = self._template()
        if template is None:
            return False
        copy = f"{path}.{os.getpid()}.{threading.get_ident()}.part"  # no run's name (``*.db``)
        try:
            shutil.copyfile(template, copy)
            os.link(copy, path)  # never over a shard another process made meanwhile
        except OSError:
            return False
        finally:
            with suppress(FileNotFoundError):
                os.unlink(copy)
        return True

    def _template(self) -> str | None:
        """The template of this instance's run shards, made by Dagster when there is none."""
        if self._template_path is not None:
            return self._template_path
        key = re.sub(r"[^\w.]+", "_", "-".join(_shard_makers()))
        template = os.path.join(self._base_dir, f".run-shard-{key}.sqlite")  # no run's name
        if not os.path.exists(template):
            part = f"{template}.{os.getpid()}.{threading.get_ident()}.part"
            engine = create_engine(f"sqlite:///{part}", poolclass=NullPool)
            try:
                with _scripts_read_once():
                    SqliteEventLogStorage._initdb(self, engine)  # Dagster's own making
                engine.dispose()  # its last connection closed: the journal is in the file
                if os.path.exists(f"{part}-wal") or not _stamped(part, "event_logs"):
                    return None
                os.replace(part, template)
            except (OSError, sqlalchemy.exc.SQLAlchemyError):
                return None
            finally:
                for leftover in (part, f"{part}-wal", f"{part}-shm"):
                    with suppress(FileNotFoundError):
                        os.unlink(leftover)
        self._template_path = template
        return template

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

    @classmethod
    def from_local(cls, base_dir: str, inst_data: ConfigurableClassData | None = None) -> Self:
        # Dagster's own opening, less its schema check when there is nothing to make
        if _stamped(os.path.join(base_dir, "runs.db"), "runs", "instance_info"):
            return cls(create_db_conn_string(base_dir, "runs"), inst_data)
        with _scripts_read_once():
            return super().from_local(base_dir, inst_data)

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
        with _opening_alone(base_dir):
            self._run_storage = PooledSqliteRunStorage.from_local(os.path.join(history, ""))
            self._event_log_storage = PooledSqliteEventLogStorage(os.path.join(history, "runs", ""))
            self._schedule_storage = _schedule_storage(os.path.join(base_dir, "schedules"))
        self._inst_data = inst_data

    @classmethod
    def from_config_value(  # pyright: ignore[reportIncompatibleMethodOverride]
        cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]
    ) -> PooledSqliteStorage:
        return cls.from_local(inst_data=inst_data, **config_value)


def _schedule_storage(base_dir: str) -> SqliteScheduleStorage:
    """Dagster's SQLite schedule storage, less its schema check when there is nothing to make."""
    if _stamped(os.path.join(base_dir, "schedules.db")):
        return SqliteScheduleStorage(create_db_conn_string(base_dir, "schedules"))
    with _scripts_read_once():
        return SqliteScheduleStorage.from_local(base_dir)


_DAGSTER_SQLITE = ("dagster._core.storage.sqlite_storage", "DagsterSqliteStorage")


# -- Dagster's local compute logs, mirrored without a process per stream --------------------------
#
# A run captures its process's stdout and stderr in files (the run's logs in the UI) and mirrors
# them to where they went before, each with a ``tail -F`` process and a Python process watching
# that one for orphans: four processes per run, a tenth of a second of CPU. Here a thread of the
# run's own process copies each file instead, and copies what is left when the capture ends.

_DAGSTER_COMPUTE_LOGS = (
    "dagster._core.storage.local_compute_log_manager",
    "LocalComputeLogManager",
)
# how often a mirror looks for more output (``tail -F`` looks every second)
_MIRROR_POLL_SECONDS = 0.1


def _fileno(stream: Any) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):  # a stream without a file (pytest's capture)
        return None


def _copy_file(path: str, out: int, done: threading.Event) -> None:
    """Copy the file at ``path`` to the descriptor ``out`` as it grows, until ``done``."""
    with open(path, "rb") as source:
        while True:
            last = done.is_set()  # asked before reading: what was written by then is copied
            while chunk := source.read(1 << 16):
                view = memoryview(chunk)
                while view:
                    try:
                        view = view[os.write(out, view) :]
                    except OSError:  # the console is gone: ``tail`` would end too
                        return
            if last:
                return
            done.wait(_MIRROR_POLL_SECONDS)


@contextmanager
def _mirrored(stream: Any, path: str) -> Iterator[None]:
    """Dagster's ``mirror_stream_to_file``: ``stream`` written to the file at ``path``, and the
    file's content copied to where ``stream`` went before."""
    ensure_file(path)
    fd = _fileno(stream)
    if fd is None:  # nothing to redirect, nothing to mirror (Dagster's redirect does nothing)
        with redirect_to_file(stream, path):
            yield
        return
    out = os.dup(fd)
    done = threading.Event()
    mirror = threading.Thread(target=_copy_file, args=(path, out, done), daemon=True)
    mirror.start()
    try:
        with redirect_to_file(stream, path):
            yield
    finally:
        done.set()
        mirror.join()
        os.close(out)


class MirroredComputeLogManager(LocalComputeLogManager):
    """Dagster's local compute log manager (the same files, which the UI reads), with the
    mirrors above; ``sqlite_instance`` uses it where ``dagster.yaml`` leaves compute logs to
    Dagster's default (or names it)."""

    @contextmanager
    def capture_logs(self, log_key: Sequence[str]) -> Iterator[CapturedLogContext]:
        out = self.get_captured_local_path(log_key, IO_TYPE_EXTENSION[ComputeIOType.STDOUT])
        err = self.get_captured_local_path(log_key, IO_TYPE_EXTENSION[ComputeIOType.STDERR])
        with _mirrored(sys.stdout, out), _mirrored(sys.stderr, err):
            yield CapturedLogContext(log_key)
        # as Dagster's: the file that says the capture is complete
        touch_file(self.complete_artifact_path(log_key))

    @classmethod
    def from_config_value(  # pyright: ignore[reportIncompatibleMethodOverride]
        cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]
    ) -> MirroredComputeLogManager:
        return cls(inst_data=inst_data, **config_value)


def _swapped(data: ConfigurableClassData | None, dagster: tuple[str, str], ours: type) -> Any:
    """``data`` naming ``ours`` with the same configuration when it names Dagster's class."""
    if data is None or (data.module_name, data.class_name) != dagster:
        return data
    return ConfigurableClassData(__name__, ours.__name__, data.config_yaml)


def sqlite_instance() -> dg.DagsterInstance:
    """The instance in ``DAGSTER_HOME`` (``dg.DagsterInstance.get()``), on the pooled storage
    when its ``dagster.yaml`` leaves the storage to Dagster's SQLite default (or names it)."""
    home = os.path.expanduser(os.environ.get("DAGSTER_HOME", ""))
    if not (os.path.isabs(home) and os.path.isdir(home)):
        return dg.DagsterInstance.get()  # Dagster says what is wrong with DAGSTER_HOME
    ref = InstanceRef.from_dir(home)
    ref = ref._replace(
        storage_data=_swapped(ref.storage_data, _DAGSTER_SQLITE, PooledSqliteStorage),
        compute_logs_data=_swapped(
            ref.compute_logs_data, _DAGSTER_COMPUTE_LOGS, MirroredComputeLogManager
        ),
    )
    return dg.DagsterInstance.from_ref(ref)


@contextmanager
def _opening_alone(base_dir: str) -> Iterator[None]:
    """One process at a time opens the storage in ``base_dir``. Opening a new one creates
    Dagster's SQLite files and stamps their schema versions; two processes doing it at once (two
    syncs started together on a new ``DAGSTER_HOME``) can both stamp one, and every later open of
    that storage then fails with "more than one head present", for good. The lock is a file of its
    own, held while opening only."""
    os.makedirs(base_dir, exist_ok=True)
    with open(os.path.join(base_dir, ".ol-dagster-open.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
