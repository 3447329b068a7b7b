"""One way to open a database, shared by the event store and the embedded catalog.

SQLite is the zero-setup default, so it must behave under the load a receiver and a sync run put on
it together: WAL mode (readers never block the writer), a busy timeout instead of instant "database
is locked" errors, and ``BEGIN IMMEDIATE`` so that a transaction that will write takes the write
lock
when it starts rather than failing halfway. Any other SQLAlchemy URL (PostgreSQL in production) is
used as given, with connections checked before use so a restarted server is survived.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url

SQLITE_BUSY_TIMEOUT_MS = 30_000


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


def open_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True, future=True)

    database = parsed.database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url, future=True, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):  # pragma: no cover - exercised by every SQLite test
        dbapi_conn.isolation_level = None  # let SQLAlchemy's "begin" hook issue BEGIN itself
        cur = dbapi_conn.cursor()
        if database and database != ":memory:":
            _set_wal(cur)
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA synchronous=NORMAL")
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
