"""Events as rows of ``ol_events``: their shape in and out, their digest, and the bulk insert.

This is the receiver's hot path: every accepted event passes ``event_values`` (before the write
transaction) and ``insert_events`` (in it), whichever intake wrote it (a post, a stream append,
a Kafka poll). So per-row work stays here, in one place, measured by ``benchmarks/ingest.py``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Connection, Dialect
from sqlalchemy.exc import DBAPIError

from ol_dagster.openlineage.run_facts import content_digest
from ol_dagster.store.base import naive
from ol_dagster.store.schema import events


def event_digest(raw: bytes) -> bytes:
    """What names an event's bytes (``ol_events.digest``): equal bytes, equal digest. SHA-256
    (cut to 128 bits): with the CPU's SHA instructions the fastest collision-resistant hash
    hashlib has here, ~6 us for a 6 KB event, paid once by the receiver."""
    return hashlib.sha256(raw).digest()[:16]


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An accepted event on its way into the store."""

    raw: bytes
    kind: str
    event_type: str | None
    event_time: datetime
    producer: str | None
    job_namespace: str | None
    job_name: str | None
    run_id: str | None


@dataclass(frozen=True, slots=True)
class StoredEvent(NewEvent):
    """An event read back from its batch, at its place in it."""

    position: int = field(kw_only=True)


_EVENT_COLUMNS = (
    "batch_id",
    "position",
    "raw",
    "kind",
    "event_type",
    "event_time",
    "producer",
    "job_namespace",
    "job_name",
    "run_id",
    "digest",
    "content",
)
# PostgreSQL types of those columns, for a binary COPY
_EVENT_PG_TYPES = (
    "int8",
    "int4",
    "bytea",
    "varchar",
    "varchar",
    "timestamp",
    "text",
    "text",
    "text",
    "text",
    "bytea",
    "bytea",
)


def event_values(dialect: Dialect, new_events: Sequence[NewEvent]) -> list[tuple]:
    """Each event's column values but its batch and position (``_EVENT_COLUMNS[2:]``), computed
    before the write transaction: on SQLite that transaction holds the only write lock, which
    every other post and the sync wait for, so it should hold the insert and nothing else (the
    digests and times of a 100,000-event post took seconds of it)."""
    # SQLite rows go to the driver as they are: the time as SQLAlchemy itself would write it
    to_time = events.c.event_time.type.bind_processor(dialect) if dialect.name == "sqlite" else None
    return [
        (
            e.raw,
            e.kind,
            e.event_type,
            to_time(naive(e.event_time)) if to_time else naive(e.event_time),
            e.producer,
            e.job_namespace,
            e.job_name,
            e.run_id,
            event_digest(e.raw),
            content_digest(e.raw),
        )
        for e in new_events
    ]


def insert_events(conn: Connection, batch_id: int, start: int, values: Sequence[tuple]) -> None:
    """Insert a batch's events (``_event_values``) in the caller's transaction, row by row from
    a generator: no second copy of a large batch's rows is built. On PostgreSQL, a binary COPY:
    a 1,000-event post of 6 MB as one INSERT of 10,000 parameters cost the receiver about twice
    the time (parameter handling in Python, and the server parsing it). On SQLite, the driver's
    own executemany (SQLAlchemy's per-row parameter handling doubled the lock's time), which
    lets other threads run between rows."""
    rows = ((batch_id, start + i, *v) for i, v in enumerate(values))
    columns = ", ".join(_EVENT_COLUMNS)
    if conn.dialect.name not in ("postgresql", "sqlite"):
        conn.execute(events.insert(), [dict(zip(_EVENT_COLUMNS, r, strict=True)) for r in rows])
        return
    dbapi_error = conn.dialect.loaded_dbapi.Error
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    statement = f"INSERT INTO ol_events ({columns}) VALUES ({', '.join('?' * len(_EVENT_COLUMNS))})"
    try:
        if conn.dialect.name == "sqlite":
            cursor.executemany(statement, rows)  # type: ignore[arg-type]  # any iterable
            return
        statement = f"COPY ol_events ({columns}) FROM STDIN (FORMAT BINARY)"
        with cursor.copy(statement) as copy:
            copy.set_types(_EVENT_PG_TYPES)
            for row in rows:
                copy.write_row(row)
    except dbapi_error as exc:
        # the driver's own error, as SQLAlchemy would have raised it (a full disk: a 503)
        raise DBAPIError.instance(statement, None, exc, dbapi_error, hide_parameters=True) from exc
    finally:
        cursor.close()
