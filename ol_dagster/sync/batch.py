"""One batch's sync as every entry point runs it: upload, then cleanup, under the definition's lock.

The Dagster assets (sensor-launched runs, ``ol-dagster sync``, a person re-materializing the
cleanup with a raised cap) and the tests call these functions, so there is one copy of what the
cleanup is told about a batch (``batch_facts``) and one place where the order of things is decided:

1. the definition's sync lock is taken (held from reading the cutoff to recording the report, so
   two syncs of one definition never interleave, whatever started them); a holder that died or
   whose lease ran out no longer blocks;
2. under it, a snapshot older than one already synced is SUPERSEDED (neither uploaded nor
   cleaned: it must not bring back what a newer snapshot removed);
3. the graph of the batch's events and the events of its runs that arrived in earlier batches
   (every run of a whole snapshot, every run that ends in the batch: a run split over batches is
   judged whole, not by its last part) is the one the ``lineage_graph`` step built from exactly
   those events, loaded from the store (``sync.graph``); normalized again only when there is
   none for them;
4. the cutoff is read from the catalog clock, then the upload; the upload and the facts the
   cleanup needs are recorded in the store;
5. the cleanup (``sync.cleanup``) runs on those recorded facts, its report is recorded, the batch
   status set, and the lock released.

The rest of a batch's life is here too, so the Dagster layer only wires: a run that failed before
its cleanup leaves its batch FAILED for a retry (``fail_run``), synced batches past
``retention.keepDays`` are purged (``purge_expired``), and a person's raised limits are recorded
the same way for a batch and for the day-based cleanup (``_override``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from ol_dagster.catalog.protocol import Catalog, DatasetRef, UploadResult
from ol_dagster.lineage import LineageGraph
from ol_dagster.settings import SyncDefinition
from ol_dagster.store import BatchKind, BatchRecord, BatchStatus, EventStore
from ol_dagster.store.event_store import utcnow
from ol_dagster.store.holder import this_process
from ol_dagster.sync.cleanup import (
    RUN_FAILED,
    SUPERSEDED,
    UPLOAD_FAILED,
    BatchFacts,
    run_cleanup,
    run_stale_cleanup,
    skipped_report,
)
from ol_dagster.sync.graph import batch_graph, graph_inputs
from ol_dagster.sync.journal import (
    STALE_REPORT,
    StoreJournal,
    earlier_removals,
    mark_reported,
    reconcile,
)
from ol_dagster.sync.lease import STEP_LEASE_SECONDS, Heartbeat
from ol_dagster.sync.upload import UploadOutcome, graph_facts, upload_graph

# Between a run's upload and cleanup steps nothing renews the lock: it is kept this long, or
# until the process that holds it is gone. In a step the lease is short and renewed by a
# heartbeat (``sync.lease``); a holder known dead is passed over at once.
LOCK_LEASE_SECONDS = 1800.0
LOCK_POLL_SECONDS = 0.5


class SyncBusy(Exception):
    """Another live sync of the definition holds its lock: this one must wait or stay pending."""

    def __init__(self, definition: str, holder: str) -> None:
        super().__init__(
            f"definition {definition!r} is being synced by {holder!r}: one sync per definition "
            "at a time; this batch stays pending and is synced after it"
        )
        self.definition = definition
        self.holder = holder


class WrongDefinition(ValueError):
    """A batch asked for under a definition it does not belong to (a partition key of another
    definition's partitions)."""


@dataclass(frozen=True, slots=True)
class CleanupOverrides:
    """Limits a person raises for one run (the report records who asked)."""

    maxRemovalsPerRun: int | None = None
    maxRemovalShare: float | None = None


@dataclass(slots=True)
class UploadDone:
    record: dict[str, Any]  # what the store keeps as the batch's upload result
    graph: LineageGraph | None  # None when nothing was uploaded (superseded)
    cutoff: datetime | None
    result: UploadResult | None = None

    @property
    def superseded_by(self) -> int | None:
        """The newer snapshot that made this batch SUPERSEDED (nothing uploaded), else None."""
        if self.graph is not None and self.cutoff is not None:
            return None
        return self.record.get("supersededBy")


def definition_batch(store: EventStore, definition: SyncDefinition, batch_id: int) -> BatchRecord:
    """The batch, which must belong to ``definition`` (``WrongDefinition`` otherwise)."""
    batch = store.get_batch(batch_id)
    if batch.definition != definition.name:
        raise WrongDefinition(
            f"batch {batch.id} belongs to definition {batch.definition!r}, not {definition.name!r}"
        )
    return batch


def take_lock(
    store: EventStore,
    definition: SyncDefinition,
    holder: str,
    *,
    is_alive: Callable[[str], bool] | None = None,
    wait_seconds: float = 0.0,
) -> None:
    """Take (or renew) the definition's sync lock for ``holder``; ``SyncBusy`` when a live holder
    keeps it longer than ``wait_seconds``."""
    deadline = time.monotonic() + wait_seconds
    while True:
        other = store.acquire_sync_lock(
            definition.name,
            holder,
            lease_seconds=STEP_LEASE_SECONDS,
            is_alive=is_alive,
            process=this_process(),
        )
        if other is None:
            return
        if time.monotonic() >= deadline:
            raise SyncBusy(definition.name, other)
        time.sleep(LOCK_POLL_SECONDS)


def upload_batch(
    store: EventStore,
    catalog: Catalog,
    definition: SyncDefinition,
    batch_id: int,
    *,
    run_id: str,
    is_alive: Callable[[str], bool] | None = None,
    wait_seconds: float = 0.0,
) -> UploadDone:
    """Steps 1-4: lock, SUPERSEDED, graph, cutoff and upload, recorded in the store. A cleanup
    an earlier run left unfinished is reconciled first (``sync.journal``)."""
    batch = store.get_batch(batch_id)
    take_lock(store, definition, run_id, is_alive=is_alive, wait_seconds=wait_seconds)
    try:
        with Heartbeat(store, definition.name, run_id):
            reconcile(store, catalog, definition)
            done = _upload_locked(store, catalog, definition, batch, run_id)
    except BaseException:
        # nothing was recorded: the run fails, and the next sync need not wait for its lease
        store.release_sync_lock(definition.name, run_id)
        raise
    # handed over to this run's cleanup step, in this process (the sync jobs run their steps in
    # one process): the lease covers the steps in between, and this process dying ends it
    store.renew_sync_lock(
        definition.name, run_id, lease_seconds=LOCK_LEASE_SECONDS, process=this_process()
    )
    return done


def _upload_locked(
    store: EventStore, catalog: Catalog, definition: SyncDefinition, batch: BatchRecord, run_id: str
) -> UploadDone:
    newer = store.newer_synced_snapshot(definition.name, batch.id) if batch.whole_snapshot else None
    if newer is not None:
        record = {"skippedReason": SUPERSEDED, "supersededBy": newer, "runId": run_id}
        store.record_upload(batch.id, cutoff=None, result=record)
        return UploadDone(record, None, None)
    inputs = graph_inputs(store, definition, batch)
    # a catalog that takes the events reads them once: when the graph must be built here too,
    # from the same list
    events = list(inputs.events()) if _takes_events(catalog) else None
    graph = batch_graph(store, definition, batch, inputs=inputs, events=events).graph
    outcome: UploadOutcome = upload_graph(
        catalog, graph, definition, (lambda: events) if events is not None else inputs.events
    )
    record = {**outcome.result.as_dict(), "graph": graph_facts(graph), "runId": run_id}
    store.record_upload(batch.id, cutoff=outcome.cutoff, result=record)
    return UploadDone(record, graph, outcome.cutoff, outcome.result)


def _takes_events(catalog: Catalog) -> bool:
    return bool(getattr(catalog, "takes_events", False))


def batch_facts(store: EventStore, batch: BatchRecord, upload: dict[str, Any]) -> BatchFacts:
    """What the cleanup is told about a batch: the stored batch and its recorded upload. The one
    copy, used by the assets and the tests alike."""
    g = upload.get("graph") or {}
    return BatchFacts(
        posted=batch.kind is BatchKind.POSTED,
        whole_snapshot=batch.whole_snapshot,
        accepted=batch.accepted_count,
        # an upload recorded before the graph facts existed: the events' own namespaces (an empty
        # list recorded is an answer: a batch of dataset events describes no job)
        job_namespaces=g["jobNamespaces"]
        if "jobNamespaces" in g
        else store.job_namespaces(batch.id),
        upload_succeeded=bool(upload.get("succeeded")),
        dataset_systems=g.get("datasetSystems") or [],
        described_jobs=[tuple(j) for j in g.get("describedJobs") or []],
        completed_jobs=[tuple(j) for j in g.get("completedJobs") or []],
        jobs=g.get("jobs") or [],
        dropped=upload.get("dropped") or {},
        drops=[DatasetRef(*d) for d in g.get("drops") or []],
    )


def cleanup_batch(
    store: EventStore,
    catalog: Catalog,
    definition: SyncDefinition,
    batch_id: int,
    *,
    run_id: str,
    uploaded_in_this_run: bool = True,
    overrides: CleanupOverrides | None = None,
    requested_by: dict[str, Any] | None = None,
    is_alive: Callable[[str], bool] | None = None,
    wait_seconds: float = 0.0,
) -> dict[str, Any]:
    """Step 5: the cleanup of a batch on its recorded upload; records the report and the batch
    status, then releases the lock. ``uploaded_in_this_run`` is False when a person
    re-materializes only the cleanup (for example with a raised cap)."""
    over = overrides or CleanupOverrides()
    cap = (
        over.maxRemovalsPerRun
        if over.maxRemovalsPerRun is not None
        else definition.cleanup.maxRemovalsPerRun
    )
    take_lock(store, definition, run_id, is_alive=is_alive, wait_seconds=wait_seconds)
    try:
        with Heartbeat(store, definition.name, run_id):
            return _cleanup_locked(
                store,
                catalog,
                definition,
                batch_id,
                run_id,
                over,
                cap,
                requested_by,
                uploaded_in_this_run,
            )
    finally:
        store.release_sync_lock(definition.name, run_id)


def _cleanup_locked(
    store: EventStore,
    catalog: Catalog,
    definition: SyncDefinition,
    batch_id: int,
    run_id: str,
    over: CleanupOverrides,
    cap: int,
    requested_by: dict[str, Any] | None,
    uploaded_in_this_run: bool,
) -> dict[str, Any]:
    reconcile(store, catalog, definition)
    earlier = earlier_removals(store, definition.name, run_id)
    batch = store.get_batch(batch_id)
    upload = batch.upload_result
    if upload is None or (uploaded_in_this_run and upload.get("runId") != run_id):
        # the upload of this run never finished: the run failed before the cleanup
        report = skipped_report(RUN_FAILED, batch.cutoff, cap)
    elif upload.get("skippedReason") == SUPERSEDED:
        report = skipped_report(SUPERSEDED, None, cap)
        report["supersededBy"] = upload.get("supersededBy")
    elif (newer := _superseded_since(store, batch)) is not None:
        # a newer snapshot was synced since this one's upload: its cleanup decided
        report = skipped_report(SUPERSEDED, batch.cutoff, cap)
        report["supersededBy"] = newer
    else:
        assert batch.cutoff is not None
        report = run_cleanup(
            catalog,
            definition,
            batch_facts(store, batch, upload),
            cutoff=batch.cutoff,
            max_removals=over.maxRemovalsPerRun,
            max_share=over.maxRemovalShare,
            journal=StoreJournal(store, definition.name, run_id, batch.id),
        )
    _override(report, over, run_id, requested_by)
    if earlier:
        # what earlier runs removed and never reported (they died in their cleanup)
        report["reconciled"] = earlier
    store.record_cleanup(batch.id, report)
    mark_reported(store, definition.name, run_id, earlier, batch.id)
    # the events stay pending (FAILED) when nothing reached the catalog as it should
    retry = report["skippedReason"] in (UPLOAD_FAILED, RUN_FAILED)
    store.set_status(batch.id, BatchStatus.FAILED if retry else BatchStatus.SYNCED)
    return report


def _override(
    report: dict[str, Any],
    over: CleanupOverrides,
    run_id: str,
    requested_by: dict[str, Any] | None,
) -> None:
    """Record in the report which limits a person raised for this run, and who asked."""
    if over.maxRemovalsPerRun is None and over.maxRemovalShare is None:
        return
    report["override"] = {
        **{k: v for k, v in asdict(over).items() if v is not None},
        "runId": run_id,
        **(requested_by or {}),
    }


def fail_run(store: EventStore, definition: SyncDefinition, batch_id: int, run_id: str) -> bool:
    """A sync run that failed before its cleanup (a crash, a killed worker) must not leave its
    batch waiting for nothing: the batch becomes FAILED, keeps its events and gets a RUN_FAILED
    report, so the sensor retries it after its backoff. False when there is nothing to mark: the
    batch is another definition's, already synced, or its cleanup step recorded why it failed."""
    batch = store.get_batch(batch_id)
    if batch.definition != definition.name or batch.status is BatchStatus.SYNCED:
        return False
    if batch.status is BatchStatus.FAILED and batch.cleanup_report is not None:
        return False  # the cleanup step already recorded why (UPLOAD_FAILED, RUN_FAILED)
    report = skipped_report(RUN_FAILED, batch.cutoff, definition.cleanup.maxRemovalsPerRun)
    store.record_cleanup(batch.id, report | {"runId": run_id})
    store.set_status(batch.id, BatchStatus.FAILED)
    return True


def purge_expired(
    store: EventStore, definition: SyncDefinition, keep_days: int | None
) -> list[int]:
    """``retention.keepDays``: the definition's synced batches older than that go, with their
    events; returns their ids (their partitions go too). Pending work is never purged."""
    if keep_days is None:
        return []
    return store.purge_synced(definition.name, before=utcnow() - timedelta(days=keep_days))


def _superseded_since(store: EventStore, batch: BatchRecord) -> int | None:
    if not batch.whole_snapshot:
        return None
    return store.newer_synced_snapshot(batch.definition, batch.id)


def sync_batch(
    store: EventStore,
    catalog: Catalog,
    definition: SyncDefinition,
    batch_id: int,
    *,
    run_id: str,
    overrides: CleanupOverrides | None = None,
    is_alive: Callable[[str], bool] | None = None,
) -> tuple[UploadDone, dict[str, Any]]:
    """Upload then cleanup, as one run of the four assets does."""
    done = upload_batch(store, catalog, definition, batch_id, run_id=run_id, is_alive=is_alive)
    report = cleanup_batch(
        store, catalog, definition, batch_id, run_id=run_id, overrides=overrides, is_alive=is_alive
    )
    return done, report


def stale_cleanup(
    store: EventStore,
    catalog: Catalog,
    definition: SyncDefinition,
    *,
    run_id: str,
    max_removals: int | None = None,
    requested_by: dict[str, Any] | None = None,
    is_alive: Callable[[str], bool] | None = None,
    wait_seconds: float = 0.0,
) -> dict[str, Any]:
    """The daily day-based cleanup, under the same lock as the batches' syncs. A raised
    ``max_removals`` is recorded as a batch cleanup's is (``override``, with who asked)."""
    take_lock(store, definition, run_id, is_alive=is_alive, wait_seconds=wait_seconds)
    try:
        with Heartbeat(store, definition.name, run_id):
            reconcile(store, catalog, definition)
            earlier = earlier_removals(store, definition.name, run_id)
            report = run_stale_cleanup(
                catalog,
                definition,
                max_removals=max_removals,
                journal=StoreJournal(store, definition.name, run_id, None),
            )
            _override(report, CleanupOverrides(max_removals), run_id, requested_by)
            if earlier:
                report["reconciled"] = earlier
            mark_reported(store, definition.name, run_id, earlier, STALE_REPORT)
            return report
    finally:
        store.release_sync_lock(definition.name, run_id)
