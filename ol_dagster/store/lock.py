"""Each definition's sync lock: a lease that keeps two syncs of one definition from running
at once, whichever process starts them (a sensor's run, an operator's command).

The lock records its holder's process (``store.holder``), so a holder killed outright on this
machine is seen gone at once instead of when its lease runs out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError

from ol_dagster.store.base import StoreBase, StoreUnavailable, aware, naive, utcnow
from ol_dagster.store.holder import process_gone
from ol_dagster.store.schema import sync_locks


@dataclass(frozen=True, slots=True)
class SyncLock:
    """Who holds a definition's sync lock, since when, and until when unless renewed."""

    definition: str
    holder: str
    acquired_at: datetime
    expires_at: datetime
    process: str | None = field(default=None, compare=False)  # store.holder; None between steps


# How often acquire_sync_lock looks again when the lock changed hands under it.
_LOCK_ATTEMPTS = 10


def _insert_lock(conn: Connection, values: dict[str, Any]) -> bool:
    """Insert a definition's first lock row unless it has one; True if this insert made it.

    ``ON CONFLICT DO NOTHING`` rather than a plain insert whose failure is caught: on PostgreSQL
    a concurrent insert of the same definition makes this one wait for it to commit and then
    do nothing, where a failed insert would abort the whole transaction."""
    dialect = conn.dialect.name
    if dialect in ("postgresql", "sqlite"):
        insert = pg_insert if dialect == "postgresql" else sqlite_insert
        statement = insert(sync_locks).values(**values).on_conflict_do_nothing()
        return conn.execute(statement).rowcount == 1
    try:
        with conn.begin_nested():
            conn.execute(sync_locks.insert().values(**values))
    except IntegrityError:
        return False
    return True


class SyncLocks(StoreBase):
    """Acquire, renew, release and read a definition's sync lock."""

    def acquire_sync_lock(
        self,
        definition: str,
        holder: str,
        *,
        lease_seconds: float,
        is_alive: Callable[[str], bool] | None = None,
        now: datetime | None = None,
        process: str | None = None,
    ) -> str | None:
        """Take the definition's sync lock for ``holder`` (a Dagster run id, say) for
        ``lease_seconds``: None when taken, else the id of the holder that keeps it.

        Taken when nobody holds it, when ``holder`` already does (re-entrant: the lease is
        renewed), when the lease has expired, when the process the current holder recorded is
        gone (``store.holder``: a process on this machine that no longer runs), or when
        ``is_alive(current holder)`` is False, so that a crashed holder does not block the
        definition until its lease runs out. ``process`` is the taker's own
        (``holder.this_process()``), recorded with the lock.

        Two processes never both take it: on PostgreSQL the first row's insert and the row lock
        of ``SELECT ... FOR UPDATE`` serialize them, on SQLite the store's ``BEGIN IMMEDIATE``
        does. ``is_alive`` may be slow (it may ask Dagster), so it runs with no transaction
        open; the takeover that follows only succeeds if the same holder's tenure is still in
        place, so two processes that both found the holder dead cannot both take the lock."""
        if lease_seconds <= 0:
            raise ValueError(f"lease_seconds must be positive, not {lease_seconds}")
        now_n = naive(now or utcnow())
        taken = {
            "holder": holder,
            "acquired_at": now_n,
            "expires_at": now_n + timedelta(seconds=lease_seconds),
            "process": process,
        }
        this = sync_locks.c.definition == definition
        current: str | None = None
        for _attempt in range(_LOCK_ATTEMPTS):
            with self.engine.begin() as conn:
                if _insert_lock(conn, {"definition": definition, **taken}):
                    return None
                row = conn.execute(
                    select(
                        sync_locks.c.holder,
                        sync_locks.c.acquired_at,
                        sync_locks.c.expires_at,
                        sync_locks.c.process,
                    )
                    .where(this)
                    .with_for_update()
                ).first()
                if row is None:
                    continue  # released between the insert and the read: insert again
                current, acquired_at, expires_at, holding = row
                if current == holder:
                    conn.execute(
                        update(sync_locks)
                        .where(this)
                        .values(expires_at=taken["expires_at"], process=process)
                    )
                    return None
                if expires_at <= now_n or process_gone(holding):
                    conn.execute(
                        update(sync_locks)
                        .where(this, sync_locks.c.holder == current)
                        .values(**taken)
                    )
                    return None
                if is_alive is None:
                    return current
            assert current is not None  # the row was read above
            if is_alive(current):
                return current
            with self.engine.begin() as conn:
                took = conn.execute(
                    update(sync_locks)
                    .where(
                        this,
                        sync_locks.c.holder == current,
                        sync_locks.c.acquired_at == acquired_at,
                    )
                    .values(**taken)
                ).rowcount
            if took:
                return None
            # released, or taken over by another process, while is_alive ran: look again
        if current is None:
            raise StoreUnavailable(
                f"could not take the sync lock of {definition!r}: it kept changing hands"
            )
        return current  # it changed hands each time we looked: someone else has it

    def renew_sync_lock(
        self,
        definition: str,
        holder: str,
        *,
        lease_seconds: float,
        now: datetime | None = None,
        process: str | None = None,
    ) -> bool:
        """Extend ``holder``'s lease to ``lease_seconds`` from now, held by ``process`` (None:
        between a run's steps, no process holds it; the lease alone keeps it). False when it no
        longer holds the lock (released, or expired and taken over): its sync should stop."""
        expires = naive(now or utcnow()) + timedelta(seconds=lease_seconds)
        with self.engine.begin() as conn:
            renewed = conn.execute(
                update(sync_locks)
                .where(sync_locks.c.definition == definition, sync_locks.c.holder == holder)
                .values(expires_at=expires, process=process)
            ).rowcount
        return renewed == 1

    def release_sync_lock(self, definition: str, holder: str) -> bool:
        """Give the lock up; only its holder can (True if it did)."""
        with self.engine.begin() as conn:
            released = conn.execute(
                sync_locks.delete().where(
                    sync_locks.c.definition == definition, sync_locks.c.holder == holder
                )
            ).rowcount
        return released == 1

    def sync_lock(self, definition: str) -> SyncLock | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                select(sync_locks).where(sync_locks.c.definition == definition)
            ).first()
        if row is None:
            return None
        m = row._mapping
        return SyncLock(
            definition=m["definition"],
            holder=m["holder"],
            acquired_at=aware(m["acquired_at"]),  # type: ignore[arg-type]
            expires_at=aware(m["expires_at"]),  # type: ignore[arg-type]
            process=m["process"],
        )
