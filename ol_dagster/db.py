"""One way to open a database, shared by the event store and the embedded catalog.

SQLite is the zero-setup default, so it must behave under the load a receiver and a sync run put on
it together: WAL mode (readers never block the writer), a busy timeout instead of instant "database
is locked" errors, and ``BEGIN IMMEDIATE`` so that a transaction that will write takes the write
lock
when it starts rather than failing halfway. Any other SQLAlchemy URL (PostgreSQL in production) is
used as given, with connections checked before use so a restarted server is survived.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

SQLITE_BUSY_TIMEOUT_MS = 30_000


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
            cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):  # pragma: no cover - exercised by every SQLite test
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine
