"""After a sync, the lineage state the asset graph is built from, brought up to what the catalog
holds: patched for the jobs that changed, not exported again whole.

A catalog that signs each job's part of the state (``PatchesState``: the embedded catalog, from
the digests its upload keeps and the flows its cleanup leaves) is asked for the signatures first:
only the jobs whose signature is not the one stored (new, changed, or unsigned) are exported, the
jobs it no longer holds (or, for a capped definition, no longer among the newest it shows) are
removed, and when none differs nothing is exported or written. Before that, when every sync
since the state was last brought up to the catalog whole uploaded nothing and removed nothing
(their recorded uploads and cleanups say so), the catalog is not read at all: an unchanged
snapshot costs no signature of its jobs. Any sync that changes the catalog, of whichever
definition, and the day-based cleanup take every definition's mark away (``note_catalog_change``),
so a dataset another definition rewrote shows at this one's next sync; a refresh that read the
catalog before such a change, and writes its state after it, leaves its state without the mark
(``store.catalog_changes``). Any other catalog that can export (``ExportsState``) exports whole,
and the store still writes only the rows that differ (``store.lineage_state``).

The collector is paused throughout: an export allocates many small objects and frees them all,
and a collection in the middle would only walk the sync's graph again.
"""

from __future__ import annotations

from dataclasses import dataclass

from ol_dagster.catalog.protocol import PatchesState, export_state
from ol_dagster.gcpause import gc_paused
from ol_dagster.lineage.graph import NodeKey
from ol_dagster.lineage_state import StateRows, job_key, state_rows
from ol_dagster.store import EventStore
from ol_dagster.store.lineage_state import RowsWritten
from ol_dagster.sync import fanout
from ol_dagster.sync_definition import SyncDefinition

# jobs exported and written at a time: a first sync of 10,000 jobs holds a fifth of their parts
_JOBS = 2_000
_NO_ROWS: StateRows = {"jobs": {}, "datasets": {}, "links": {}}


@dataclass(frozen=True, slots=True)
class Refreshed:
    """How the state was brought up to date: ``exported`` jobs (all of them for a whole export),
    the rows ``written``, and the jobs the definition holds (None: a capped state, which cannot
    tell a removed job from one not shown)."""

    whole: bool
    exported: int
    written: RowsWritten
    held: set[NodeKey] | None
    untouched: bool = False  # nothing read: the catalog is as the state was last brought up to

    def describe(self) -> str:
        if self.untouched:
            return "lineage state unchanged (the catalog is as it was at the last sync)"
        w = self.written
        how = "exported whole" if self.whole else f"{self.exported:,} job(s) exported again"
        if w.nothing:
            return f"lineage state unchanged ({how})"
        return (
            f"lineage state: {how}; rows written: {w.jobs:,} job(s), {w.datasets:,} dataset(s); "
            f"removed: {w.jobs_removed:,} job(s), {w.datasets_removed:,} dataset(s)"
        )


def refresh_lineage(
    catalog: object,
    definition: SyncDefinition,
    store: EventStore,
    *,
    batch: int | None = None,
    catalog_key: str | None = None,
) -> Refreshed | None:
    """Bring ``definition``'s stored state up to the catalog; None when the catalog cannot
    export its lineage (the stored state stays). ``batch``: the batch whose sync (to the catalog
    ``catalog_key``, the primary by default) this refresh ends; when every sync since the last
    complete refresh changed nothing in the catalog (``untouched``), nothing is read."""
    with gc_paused():
        if isinstance(catalog, PatchesState):
            if batch is not None and untouched(store, definition, catalog_key, batch):
                shown = store.lineage_not_shown(definition.name)
                if not shown:
                    return Refreshed(False, 0, RowsWritten(), None, untouched=True)
                # capped: the newest jobs it shows may have changed with their runs alone
                jobs, not_shown = catalog.state_jobs(definition)
                stored = store.lineage_sources(definition.name)
                if not_shown == shown and {job_key(*k) for k in jobs} == stored.keys():
                    return Refreshed(False, 0, RowsWritten(), None, untouched=True)
            # read before the catalog: a change another sync makes while this one reads it
            # leaves the state unsigned
            mark = store.catalog_change_mark() if batch is not None else None
            return _patch(
                catalog, definition, store, batch, mark, *catalog.state_sources(definition)
            )
        state = export_state(catalog, definition)
        if state is None:
            return None
        written = store.replace_lineage(definition.name, state)
        held = (
            None
            if state.get("jobsNotShown")
            else {(j["namespace"], j["name"]) for j in state["jobs"]}
        )
        return Refreshed(True, len(state["jobs"]), written, held)


def untouched(
    store: EventStore, definition: SyncDefinition, catalog_key: str | None, batch: int
) -> bool:
    """Whether the stored state was brought up to the catalog whole after an earlier batch's
    sync (``signed_batch``: by this version) and every batch of the definition since,
    up to ``batch``, uploaded nothing new to the catalog and removed nothing from it. A batch
    without its upload or cleanup recorded (a sync that died on the way) may have changed it."""
    since = store.lineage_signed_batch(definition.name)
    if since is None or since >= batch:
        return False
    key = fanout.target(definition, catalog_key).key
    later = store.catalog_results(definition.name, key, since, batch)
    if not later or later[-1][0] != batch:
        return False
    for _, recorded, upload, report in later:
        if not recorded or upload is None:
            return False
        if upload.get("skippedReason"):  # nothing uploaded: superseded, already synced
            continue
        if not _uploaded_nothing(upload) or report is None or not _removed_nothing(report):
            return False
    return True


def note_catalog_change(
    store: EventStore, *, upload: dict | None = None, report: dict | None = None
) -> None:
    """An upload or cleanup that changed the catalog unsigns every definition's stored state,
    not only its own: a dataset one definition's sync rewrites or removes may be one another
    definition's asset graph shows, which then compares its state with the catalog again at its
    next sync instead of keeping it unread."""
    if (
        upload is not None and not upload.get("skippedReason") and not _uploaded_nothing(upload)
    ) or (report is not None and not _removed_nothing(report)):
        store.unsign_lineage()


def _uploaded_nothing(upload: dict) -> bool:
    """Nothing the state shows was written, updated, removed, dropped or renamed (a job's run
    metrics are not part of it)."""
    counts = [
        n
        for name in ("written", "updated", "removed")
        for kind, n in (upload.get(name) or {}).items()
        if kind != "runMetrics"
    ]
    return (
        bool(upload.get("succeeded"))
        and not any(counts)
        and not any(upload.get(k) for k in ("dropped", "renamed", "failed"))
    )


def _removed_nothing(report: dict) -> bool:
    return not any((report.get("removed") or {}).values()) and not any(
        report.get(k) for k in ("removedJobs", "movedJobs", "reconciled")
    )


def _patch(
    catalog: PatchesState,
    definition: SyncDefinition,
    store: EventStore,
    batch: int | None,
    mark: str | None,
    signatures: dict[NodeKey, str | None],
    not_shown: int,
) -> Refreshed:
    """Export the jobs whose signature is not the stored one; remove those no longer held or
    no longer among the newest (a capped definition). Exported and written ``_JOBS`` jobs at
    a time, so a first sync never holds every job's part at once; the last patch says the
    state is complete (``batch``)."""
    stored = store.lineage_sources(definition.name)
    keys = {job_key(*job): job for job in signatures}
    todo = [
        job
        for key, job in keys.items()
        if signatures[job] is None or key not in stored or stored[key] != signatures[job]
    ]
    removed = {key for key in stored if key not in keys}
    held = None if not_shown else set(signatures)
    if (
        not todo
        and not removed
        and store.lineage_not_shown(definition.name) == not_shown
        and (batch is None or store.lineage_signed_batch(definition.name) == batch)
    ):
        return Refreshed(False, 0, RowsWritten(), held)
    written = RowsWritten()
    for start in range(0, max(len(todo), 1), _JOBS):
        chunk = todo[start : start + _JOBS]
        rows = state_rows(*catalog.export_parts(definition, chunk)) if chunk else _NO_ROWS
        # a job gone between the signatures and its export goes now
        gone = ({job_key(*job) for job in chunk} - rows["jobs"].keys()) & stored.keys()
        if not start:
            gone |= removed
        last = start + _JOBS >= len(todo)
        written += store.patch_lineage(
            definition.name,
            rows,
            {job_key(*job): signatures[job] for job in chunk},
            gone,
            not_shown=not_shown,
            batch=batch if last else None,
            mark=mark,
        )
    return Refreshed(False, len(todo), written, held)
