"""A mark replaced whenever a sync changes a catalog (``unsign_lineage``), so that a refresh
signs its lineage state only if no change came while it read the catalog.

A refresh reads the catalog's signatures, exports what differs, and its last patch says the
state is up to the catalog (``signed_batch``): later syncs that change nothing keep it unread.
Another definition's sync that rewrites a dataset in between takes every signature away
(``unsign_lineage``), but the refresh, which read the catalog before that change, would sign
again after it, and the state would stay without the change until something else moved. So
``unsign_lineage`` also replaces this mark, and the last patch signs only when the mark is the one
the refresh read before it looked at the catalog.

The mark is a document of its own among the lineage states (``CATALOG_CHANGES``: no definition
name, which is a Dagster name, can take it), a new random token each time; it only has to differ.
On PostgreSQL the signing patch locks the mark's row, so a change committing meanwhile waits for
it and then takes the new signature away; SQLite's write transactions already take turns.
"""

from __future__ import annotations

import secrets
from contextlib import suppress
from typing import Any

from sqlalchemy import Connection, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError

from ol_dagster.store import schema
from ol_dagster.store.base import StoreBase, naive, utcnow

CATALOG_CHANGES = "/catalogChanges"


class CatalogChanges(StoreBase):
    """The mark a refresh reads before it reads the catalog."""

    def catalog_change_mark(self) -> str:
        """The current mark (made when there is none yet, or none readable, so that a signing
        patch always has a row to lock and a mark to compare)."""
        with self.engine.connect() as conn:
            mark = _mark(conn, lock=False)
        if mark is not None:
            return mark
        # two refreshes making it at once: the later one's replaces the earlier's, which then
        # signs nothing this once
        with self.engine.begin() as conn:
            new_catalog_change(conn)
            mark = _mark(conn, lock=False)
        assert mark is not None
        return mark


def new_catalog_change(conn: Connection) -> None:
    """A catalog changed: the mark is replaced (in the caller's transaction)."""
    _replace(conn, secrets.token_hex(16))


def mark_is(conn: Connection, mark: str) -> bool:
    """Whether the mark is still ``mark`` (its row locked until the caller's transaction ends)."""
    return _mark(conn, lock=True) == mark


def _mark(conn: Connection, *, lock: bool) -> str | None:
    table = schema.lineage_state
    query = select(table.c.state).where(table.c.definition == CATALOG_CHANGES)
    doc = conn.execute(query.with_for_update() if lock else query).scalar()
    mark = doc.get("mark") if isinstance(doc, dict) else None
    return mark if isinstance(mark, str) else None


def _replace(conn: Connection, mark: str) -> None:
    """The mark's row written with ``mark``: one statement, so two processes making the row at
    once do not fail on its key."""
    table = schema.lineage_state
    values = {
        "definition": CATALOG_CHANGES,
        "state": {"mark": mark},
        "refreshed_at": naive(utcnow()),
    }
    if conn.dialect.name not in ("postgresql", "sqlite"):
        _replace_elsewhere(conn, values)
        return
    insert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
    statement = insert(table).values(**values)
    conn.execute(
        statement.on_conflict_do_update(
            index_elements=[table.c.definition],
            set_={"state": statement.excluded.state, "refreshed_at": values["refreshed_at"]},
        )
    )


def _replace_elsewhere(conn: Connection, values: dict[str, Any]) -> None:
    """Another database: update, else insert; a concurrent insert's key error is the row made."""
    table = schema.lineage_state
    if conn.execute(
        table.update().where(table.c.definition == CATALOG_CHANGES).values(**values)
    ).rowcount:
        return
    with suppress(IntegrityError), conn.begin_nested():
        conn.execute(table.insert().values(**values))
