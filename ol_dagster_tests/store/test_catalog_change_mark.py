"""A refresh signs its lineage state only when no catalog change came while it read the catalog:
the mark it read first must still be the store's when its last patch is written, and a change
committing meanwhile takes the new signature away, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time

from ol_dagster.lineage_state import state_head, state_rows
from ol_dagster.store import EventStore, schema
from ol_dagster.store.catalog_changes import CATALOG_CHANGES, mark_is

NO_ROWS = state_rows([], [])


def _sign(store: EventStore, batch: int, mark: str | None) -> None:
    store.patch_lineage("snap", NO_ROWS, {}, [], batch=batch, mark=mark)


def test_a_patch_signs_only_under_the_mark_it_read(event_store: EventStore) -> None:
    mark = event_store.catalog_change_mark()
    assert event_store.catalog_change_mark() == mark  # reading it changes nothing
    _sign(event_store, 1, None)  # a patch that read no mark signs nothing
    assert event_store.lineage_signed_batch("snap") is None
    _sign(event_store, 1, mark)
    assert event_store.lineage_signed_batch("snap") == 1

    event_store.unsign_lineage()  # another sync changed the catalog
    assert event_store.lineage_signed_batch("snap") is None
    assert event_store.catalog_change_mark() != mark
    _sign(event_store, 2, mark)  # a refresh that read the catalog before that change
    assert event_store.lineage_signed_batch("snap") is None

    _sign(event_store, 3, event_store.catalog_change_mark())  # one that read it after
    assert event_store.lineage_signed_batch("snap") == 3
    # unsigning one definition replaces the mark as well
    mark = event_store.catalog_change_mark()
    event_store.unsign_lineage("snap")
    _sign(event_store, 4, mark)
    assert event_store.lineage_signed_batch("snap") is None


def test_a_change_committed_while_a_patch_signs_takes_the_signature_away(
    event_store: EventStore,
) -> None:
    """The signing patch holds the mark's row: the change waits for it, then finds the new
    signature and takes it away (without the lock, PostgreSQL's change commits first, sees no
    signature yet, and the patch's stays)."""
    event_store.patch_lineage("snap", NO_ROWS, {}, [])  # a state, not signed
    mark = event_store.catalog_change_mark()
    unsigned = threading.Event()

    def other_sync_changes_the_catalog() -> None:
        event_store.unsign_lineage()
        unsigned.set()

    other = threading.Thread(target=other_sync_changes_the_catalog)
    table = schema.lineage_state
    with event_store.engine.begin() as conn:  # the signing patch's transaction
        assert mark_is(conn, mark)
        other.start()
        time.sleep(0.5)  # the change has begun, and waits for this transaction
        assert not unsigned.is_set()
        signed = state_head(0, 7)
        conn.execute(table.update().where(table.c.definition == "snap").values(state=signed))
    other.join(timeout=60)
    assert unsigned.is_set()
    assert event_store.lineage_signed_batch("snap") is None
    assert event_store.catalog_change_mark() != mark


def test_a_mark_lost_or_unreadable_is_made_again(event_store: EventStore) -> None:
    """Without a readable mark no patch could ever sign, and every unchanged sync would read
    the catalog again: a mark deleted, or overwritten by something else, is made anew."""
    table = schema.lineage_state
    key = table.c.definition == CATALOG_CHANGES
    for broken in ({"version": 2, "jobsNotShown": 0}, {"mark": 7}, None):
        with event_store.engine.begin() as conn:
            if broken is None:
                conn.execute(table.delete().where(key))
            else:
                conn.execute(table.update().where(key).values(state=broken))
        mark = event_store.catalog_change_mark()
        assert mark and event_store.catalog_change_mark() == mark
        _sign(event_store, 5, mark)
        assert event_store.lineage_signed_batch("snap") == 5
        event_store.unsign_lineage()
