"""After a sync, the lineage state the asset graph is built from, brought up to what the catalog
holds: patched for the jobs that changed, not exported again whole.

A catalog that signs each job's part of the state (``PatchesState``: the embedded catalog, from
the digests its upload keeps and the flows its cleanup leaves) is asked for the signatures first:
only the jobs whose signature is not the one stored (new, changed, or unsigned) are exported, the
jobs it no longer holds (or, for a capped definition, no longer among the newest it shows) are
removed, and when none differs nothing is exported or written. Any
other catalog that can export (``ExportsState``) exports whole, and the store still writes only
the rows that differ (``store.lineage_state``).

The collector is paused throughout: an export allocates many small objects and frees them all,
and a collection in the middle would only walk the sync's graph again.
"""

from __future__ import annotations

from dataclasses import dataclass

from ol_dagster.catalog.protocol import PatchesState, export_state
from ol_dagster.gcpause import gc_paused
from ol_dagster.lineage.graph import NodeKey
from ol_dagster.lineage_state import job_key, state_rows
from ol_dagster.store import EventStore
from ol_dagster.store.lineage_state import RowsWritten
from ol_dagster.sync_definition import SyncDefinition


@dataclass(frozen=True, slots=True)
class Refreshed:
    """How the state was brought up to date: ``exported`` jobs (all of them for a whole export),
    the rows ``written``, and the jobs the definition holds (None: a capped state, which cannot
    tell a removed job from one not shown)."""

    whole: bool
    exported: int
    written: RowsWritten
    held: set[NodeKey] | None

    def describe(self) -> str:
        w = self.written
        how = "exported whole" if self.whole else f"{self.exported:,} job(s) exported again"
        if w.nothing:
            return f"lineage state unchanged ({how})"
        return (
            f"lineage state: {how}; rows written: {w.jobs:,} job(s), {w.datasets:,} dataset(s); "
            f"removed: {w.jobs_removed:,} job(s), {w.datasets_removed:,} dataset(s)"
        )


def refresh_lineage(
    catalog: object, definition: SyncDefinition, store: EventStore
) -> Refreshed | None:
    """Bring ``definition``'s stored state up to the catalog; None when the catalog cannot
    export its lineage (the stored state stays)."""
    with gc_paused():
        if isinstance(catalog, PatchesState):
            return _patch(catalog, definition, store, *catalog.state_sources(definition))
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


def _patch(
    catalog: PatchesState,
    definition: SyncDefinition,
    store: EventStore,
    signatures: dict[NodeKey, str | None],
    not_shown: int,
) -> Refreshed:
    """Export the jobs whose signature is not the stored one; remove those no longer held or
    no longer among the newest (a capped definition)."""
    stored = store.lineage_sources(definition.name)
    keys = {job_key(*job): job for job in signatures}
    todo = [
        job
        for key, job in keys.items()
        if signatures[job] is None or key not in stored or stored[key] != signatures[job]
    ]
    removed = {key for key in stored if key not in keys}
    held = None if not_shown else set(signatures)
    if not todo and not removed and store.lineage_not_shown(definition.name) == not_shown:
        return Refreshed(False, 0, RowsWritten(), held)
    jobs, datasets = catalog.export_parts(definition, todo)
    rows = state_rows(jobs, datasets)
    # a job gone between the signatures and its export goes now
    removed |= ({job_key(*job) for job in todo} - rows["jobs"].keys()) & stored.keys()
    sources = {job_key(*job): signatures[job] for job in todo}
    written = store.patch_lineage(definition.name, rows, sources, removed, not_shown=not_shown)
    return Refreshed(False, len(todo), written, held)
