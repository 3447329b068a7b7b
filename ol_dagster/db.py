"""One way to open a database, shared by the event store and the embedded catalog.

SQLite is the zero-setup default, so it must behave under the load a receiver and a sync run put on
it together: WAL mode (readers never block the writer), a busy timeout instead of instant "database
is locked" errors, and ``BEGIN IMMEDIATE`` so that a transaction that will write takes the write
lock
when it starts rather than failing halfway. Any other SQLAlchemy URL (PostgreSQL in production) is
used as given, with connections checked before use so a restarted server is survived.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from pathlib import Path

import orjson
from sqlalchemy import BigInteger, Connection, Engine, Integer, Table, create_engine, event
from sqlalchemy.engine import make_url

SQLITE_BUSY_TIMEOUT_MS = 30_000

# the type of an auto-incremented id column: SQLite only auto-increments INTEGER PRIMARY KEY,
# PostgreSQL gets a 64-bit one
AUTO_ID = BigInteger().with_variant(Integer(), "sqlite")

log = logging.getLogger(__name__)


def _json_dumps(value: object) -> str:
    """JSON columns (catalog properties, the lineage state, reports) written by orjson: the
    standard library's encoder took 1.8 s of a 10,000-job sync. Non-string keys become strings,
    as ``json.dumps`` makes them. What orjson refuses and ``json.dumps`` writes (an integer
    beyond 64 bits, which the receiver keeps in facets) goes through ``json.dumps`` as before."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except orjson.JSONEncodeError:
        return json.dumps(value)


# every engine this project opens reads and writes its JSON columns this way
_JSON = {"json_serializer": _json_dumps, "json_deserializer": orjson.loads}


def _set_wal(cur: sqlite3.Cursor) -> None:
    """Switch a database file to WAL. Connections opening a new file at the same instant (runs, a
    sensor, receivers starting together) make the switch fail with "database is locked" at once:
    SQLite does not call the busy handler for it. Retried until the busy timeout."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


def is_sqlite_file(url: str) -> bool:
    """A SQLite database in a file (WAL mode), not in memory."""
    parsed = make_url(url)
    return parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:")


def missing_sqlite_file(url: str) -> bool:
    """A SQLite database in a file that does not exist yet: opening it would create it (and its
    folder), so what only reads it (loading the definitions) leaves it alone."""
    return is_sqlite_file(url) and not Path(str(make_url(url).database)).exists()


def open_engine(url: str, *, wal_autocheckpoint: bool = True) -> Engine:
    """``wal_autocheckpoint=False``: commits on this engine's SQLite connections never checkpoint
    the WAL themselves (a ``WalCheckpointer`` does it off the request path)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True, future=True, **_JSON)

    in_file = is_sqlite_file(url)
    if in_file:
        Path(str(parsed.database)).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url, future=True, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}, **_JSON
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):  # pragma: no cover - exercised by every SQLite test
        dbapi_conn.isolation_level = None  # let SQLAlchemy's "begin" hook issue BEGIN itself
        cur = dbapi_conn.cursor()
        if in_file:
            _set_wal(cur)
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA synchronous=NORMAL")
        if not wal_autocheckpoint:
            cur.execute("PRAGMA wal_autocheckpoint=0")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):  # pragma: no cover - exercised by every SQLite test
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def lock_schema(conn: Connection, key: int) -> None:
    """Serialize schema changes between processes (receivers starting together behind a load
    balancer, a sensor, a run): PostgreSQL runs concurrent DDL transactions side by side, and the
    loser of a CREATE TABLE race fails on pg_type's unique index. ``key`` names the schema (any
    constant; one per set of tables); the lock is released when the transaction ends. SQLite's
    ``BEGIN IMMEDIATE`` already serializes them."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({int(key)})")


def create_missing_indexes(conn: Connection, tables: list[Table]) -> None:
    """Create the indexes of ``tables`` the database lacks (an earlier version made it), with one
    query for those it has: this runs each time a catalog or the ledger is opened, and asking
    for each index apart cost PostgreSQL a query each."""
    if conn.dialect.name == "postgresql":
        sql = "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()"
    else:
        sql = "SELECT name FROM sqlite_master WHERE type = 'index'"
    present = set(conn.exec_driver_sql(sql).scalars())
    for table in tables:
        for index in table.indexes:
            if index.name not in present:
                index.create(conn)


class WalCheckpointer:
    """Checkpoints a SQLite WAL in a background thread, for the receiver.

    By default the commit that takes the WAL past 1,000 pages copies them into the database file
    and syncs it, inside the request that committed: a 1,000-event post of 6 MB paid 15-25 ms of
    its ~50 ms store write for it. The receiver opens its engine with ``wal_autocheckpoint=False``
    and pokes this thread after each commit; the checkpoint (PASSIVE: it never blocks a reader or
    the writer, and SQLite releases the GIL while it runs) overlaps the next request. Other
    processes on the same file keep their own automatic checkpoints."""

    def __init__(self, engine: Engine, *, idle_seconds: float = 1.0) -> None:
        self._engine = engine
        self._idle = idle_seconds
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="ol-dagster-wal", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait(self._idle)
            self._wake.clear()
            self.checkpoint()

    def checkpoint(self) -> None:
        try:
            raw = self._engine.raw_connection()  # autocommit: no BEGIN around the PRAGMA
            try:
                raw.cursor().execute("PRAGMA wal_checkpoint(PASSIVE)").close()
            finally:
                raw.close()
        except Exception:  # noqa: BLE001 - the next poke retries; a commit never depends on it
            log.warning("WAL checkpoint failed; retried on the next write", exc_info=True)

    def close(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout=30)
        self.checkpoint()
