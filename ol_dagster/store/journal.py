"""The cleanup journal: intent recorded before every real deletion, outcome after it.

A cleanup call to a catalog is written down, committed, before it is made (INTENT), then
completed with what it removed (DONE); when its process died in the call, a later run finds what
is gone and records that (RECONCILED). So no deletion goes unreported, even across a crash.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import and_, select, update

from ol_dagster.store.base import StoreBase, aware, naive, utcnow
from ol_dagster.store.schema import cleanup_journal


class JournalStatus(StrEnum):
    INTENT = "INTENT"  # written before the real call; the call may or may not have happened
    DONE = "DONE"  # the call returned: ``removed`` is what it reported
    RECONCILED = "RECONCILED"  # its process died in the call: ``removed`` is what was found gone


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One real cleanup call in the journal (``ol_cleanup_journal``)."""

    id: int
    definition: str
    run_id: str
    batch_id: int | None
    position: int
    call: dict[str, Any]
    planned: dict[str, Any]  # the rehearsal's "counts" by object type and "jobs"
    status: JournalStatus
    removed: dict[str, Any] | None
    created_at: datetime
    finished_at: datetime | None
    reported_in: int | None
    catalog: str | None = None  # None: written before version 11, to the only catalog then


class CleanupJournal(StoreBase):
    """Write, finish, list and mark reported the journal's entries."""

    def journal_intent(
        self,
        definition: str,
        run_id: str,
        batch_id: int | None,
        position: int,
        call: Mapping[str, Any],
        planned: Mapping[str, Any],
        *,
        catalog: str | None = None,
    ) -> int:
        """Record, committed, that a real cleanup call to ``catalog`` is about to be made;
        returns its id."""
        with self.engine.begin() as conn:
            return conn.execute(
                cleanup_journal.insert()
                .values(
                    definition=definition,
                    catalog=catalog,
                    run_id=run_id,
                    batch_id=batch_id,
                    position=position,
                    call=call,
                    planned=planned,
                    status=JournalStatus.INTENT.value,
                    created_at=naive(utcnow()),
                )
                .returning(cleanup_journal.c.id)
            ).scalar_one()

    def journal_finish(
        self, entry_id: int, removed: Mapping[str, Any], *, status: JournalStatus
    ) -> None:
        """Complete an entry: DONE with what the call reported, or RECONCILED with what the
        catalog showed gone after its process died."""
        with self.engine.begin() as conn:
            conn.execute(
                update(cleanup_journal)
                .where(cleanup_journal.c.id == entry_id)
                .values(status=status.value, removed=removed, finished_at=naive(utcnow()))
            )

    def journal(
        self,
        definition: str,
        *,
        statuses: Sequence[JournalStatus] | None = None,
        unreported: bool = False,
        catalog: str | None = None,
        unnamed: bool = False,
    ) -> list[JournalEntry]:
        """A definition's journal entries in order (of these statuses; ``unreported``: only
        those no cleanup report has listed yet; ``catalog``: only those made to it, and with
        ``unnamed`` those written before version 11 too, which name no catalog)."""
        c = cleanup_journal.c
        condition = c.definition == definition
        if catalog is not None:
            of_catalog = c.catalog == catalog
            condition = and_(
                condition, (of_catalog | c.catalog.is_(None)) if unnamed else of_catalog
            )
        if statuses is not None:
            condition = and_(condition, c.status.in_([s.value for s in statuses]))
        if unreported:
            condition = and_(condition, c.reported_in.is_(None))
        with self.engine.connect() as conn:
            rows = conn.execute(select(cleanup_journal).where(condition).order_by(c.id)).all()
        return [
            JournalEntry(
                id=m["id"],
                definition=m["definition"],
                run_id=m["run_id"],
                batch_id=m["batch_id"],
                position=m["position"],
                call=m["call"],
                planned=m["planned"],
                status=JournalStatus(m["status"]),
                removed=m["removed"],
                created_at=aware(m["created_at"]),  # type: ignore[arg-type]
                finished_at=aware(m["finished_at"]),
                reported_in=m["reported_in"],
                catalog=m["catalog"],
            )
            for m in (r._mapping for r in rows)
        ]

    def journal_reported(self, entry_ids: Sequence[int], batch_id: int) -> None:
        """These entries are listed in the cleanup report of ``batch_id``."""
        if not entry_ids:
            return
        with self.engine.begin() as conn:
            conn.execute(
                update(cleanup_journal)
                .where(cleanup_journal.c.id.in_(list(entry_ids)))
                .values(reported_in=batch_id)
            )
