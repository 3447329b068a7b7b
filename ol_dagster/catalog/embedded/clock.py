"""The embedded catalog's clock and the time each upload claims from it.

The cutoff is read from the catalog's own clock (the database server's, never the Python
process's), and every row an upload sends or stamps carries the upload's time. Each upload takes
a time no earlier upload had (``claim``), so the rows of one time are those one upload sent,
which change detection (``stamps``) relies on.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, Engine, select, update

from ol_dagster.catalog.embedded.bulk import Bulk
from ol_dagster.catalog.embedded.tables import clock


def read(engine: Engine, bulk: Bulk) -> datetime:
    """The database server's time, as an aware UTC datetime."""
    with engine.connect() as conn:
        if bulk.pg:
            value = conn.exec_driver_sql("SELECT clock_timestamp() AT TIME ZONE 'UTC'").scalar()
        else:
            text = conn.exec_driver_sql("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')").scalar()
            value = datetime.fromisoformat(str(text))
    assert isinstance(value, datetime)
    return value.replace(tzinfo=UTC)


def ensure_row(conn: Connection, bulk: Bulk) -> None:
    """The one row holding the last upload's time."""
    conn.execute(
        bulk.insert(clock)
        .values(id=1, last_stamp=datetime(1970, 1, 1))
        .on_conflict_do_nothing(index_elements=["id"])
    )


def claim(engine: Engine, bulk: Bulk, now: datetime) -> datetime:
    """The upload's time: ``now`` (the catalog clock, read first: on SQLite, the claim holds the
    write lock), or just after the last upload's time if the clock has not passed it (two
    uploads in one SQLite millisecond, a clock set back). Never before the clock, so never
    before a cutoff read earlier; never an earlier upload's."""
    with engine.begin() as conn:  # SQLite: BEGIN IMMEDIATE, one claim at a time
        ensure_row(conn, bulk)
        last = select(clock.c.last_stamp).where(clock.c.id == 1)
        last_stamp = conn.execute(last.with_for_update() if bulk.pg else last).scalar_one()
        if now <= last_stamp:
            now = last_stamp + timedelta(microseconds=1)
        conn.execute(update(clock).where(clock.c.id == 1).values(last_stamp=now))
    return now
