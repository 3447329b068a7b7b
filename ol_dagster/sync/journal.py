"""Intent before deletion: the cleanup's real calls, written down before they are made.

A cleanup killed in a real call (SIGKILL, OOM, a lost node) removed something, or not, and never
recorded its report: nobody could say what went. So each real call is first written to the event
store's journal (``ol_cleanup_journal``: the call, its arguments, the rehearsal's counts), the
write committed, and completed with what the catalog answered once the call returns.

An entry its process left open is reconciled by the definition's next sync, under its lock and
before anything else touches the catalog: the call is made again as a dry run, which counts what
of its plan is still there; what is not was removed by the dead call. The embedded catalog
(one transaction per call: all or nothing) and Blindata answer from the catalog itself. Marquez
and OpenMetadata answer from the sync ledger, which forgets each object's entries as soon as the
catalog answered for it: a call cut short there is reconciled to the object (only an object
deleted in the instant before its process died counts as still there, and the next cleanup finds
it gone, ``notFound``). The next cleanup report lists the dead run's calls, done and reconciled,
under ``reconciled``, so the reports of a definition always say what was removed.

A definition that feeds several catalogs keeps a journal per catalog (each entry names its
catalog): a call is replayed against the catalog it was made to. Entries written before store
version 11 name none; they were made to the definition's only catalog, now its primary.
"""

from __future__ import annotations

from typing import Any, cast

from ol_dagster.catalog.protocol import Catalog, ObjectType
from ol_dagster.settings import SyncDefinition
from ol_dagster.store import EventStore, JournalEntry, JournalStatus
from ol_dagster.sync.cleanup import invoke
from ol_dagster.sync.fanout import CatalogTarget
from ol_dagster.sync.reports import JournalCall, JournalCounts, ReconciledCall

# ``reported_in`` of entries listed by the daily stale cleanup's report (which has no batch)
STALE_REPORT = 0


class StoreJournal:
    """The ``sync.cleanup.Journal`` of one run's cleanup, in the event store."""

    def __init__(
        self,
        store: EventStore,
        definition: str,
        run_id: str,
        batch_id: int | None,
        *,
        catalog: str | None = None,
    ) -> None:
        self.store = store
        self.definition = definition
        self.run_id = run_id
        self.batch_id = batch_id
        self.catalog = catalog

    def intent(self, position: int, call: JournalCall, planned: JournalCounts) -> int:
        return self.store.journal_intent(
            self.definition,
            self.run_id,
            self.batch_id,
            position,
            call,
            planned,
            catalog=self.catalog,
        )

    def done(self, entry: int, removed: JournalCounts) -> None:
        self.store.journal_finish(entry, removed, status=JournalStatus.DONE)


def _of(where: CatalogTarget | None) -> dict[str, Any]:
    """The journal's filter for one catalog's entries (none: every entry of the definition)."""
    if where is None:
        return {}
    return {"catalog": where.key, "unnamed": where.primary}


def reconcile(
    store: EventStore,
    catalog: Catalog,
    definition: SyncDefinition,
    where: CatalogTarget | None = None,
) -> list[JournalEntry]:
    """Complete the entries a dead process left open in ``catalog`` (the definition's catalog
    ``where``), from what it still holds; call it under that catalog's sync lock, before the
    upload. Returns the entries it completed."""
    done: list[JournalEntry] = []
    for entry in store.journal(definition.name, statuses=[JournalStatus.INTENT], **_of(where)):
        call = entry.call
        still = invoke(catalog, call["target"], call["args"], dry=True)
        planned: dict[str, int] = entry.planned.get("counts") or {}
        gone = {kind: max(n - still.counts.get(kind, 0), 0) for kind, n in planned.items()}
        planned_jobs: list[str] = entry.planned.get("jobs") or []
        if not still.counts.get(ObjectType.PHYSICAL_ENTITIES):
            jobs = planned_jobs
        elif still.removed_jobs:  # the catalog names what is still there
            jobs = sorted(set(planned_jobs) - set(still.removed_jobs))
        else:
            jobs = []  # some are left and the catalog does not say which: none claimed
        removed = {"counts": gone, "jobs": jobs, "stillThere": dict(still.counts)}
        store.journal_finish(entry.id, removed, status=JournalStatus.RECONCILED)
        done.append(entry)
    return done


def earlier_removals(
    store: EventStore, definition: str, run_id: str, where: CatalogTarget | None = None
) -> list[ReconciledCall]:
    """The calls of earlier runs (to the catalog ``where``) that no cleanup report listed (their
    process died before it recorded one), as the ``reconciled`` part of this run's report."""
    out: list[ReconciledCall] = []
    for e in store.journal(
        definition,
        statuses=[JournalStatus.DONE, JournalStatus.RECONCILED],
        unreported=True,
        **_of(where),
    ):
        if e.run_id == run_id:
            continue
        removed = e.removed or {}
        out.append(  # the entry's call as the journal stored it (``JournalCall``), less its args
            cast(
                ReconciledCall,
                {
                    "journalId": e.id,
                    "runId": e.run_id,
                    "batchId": e.batch_id,
                    "status": e.status.value,
                    **{k: v for k, v in e.call.items() if k != "args"},
                    "planned": e.planned.get("counts") or {},
                    "removed": removed.get("counts") or {},
                    "removedJobs": removed.get("jobs") or [],
                    "at": e.created_at.isoformat(),
                },
            )
        )
    return out


def mark_reported(
    store: EventStore,
    definition: str,
    run_id: str,
    listed: list[ReconciledCall],
    batch: int,
    where: CatalogTarget | None = None,
) -> None:
    """This run's own entries (to the catalog ``where``) and the earlier ones its report listed
    are reported in ``batch``."""
    own = [
        e.id
        for e in store.journal(definition, unreported=True, **_of(where))
        if e.run_id == run_id and e.status is not JournalStatus.INTENT
    ]
    store.journal_reported([*own, *(r["journalId"] for r in listed)], batch)
