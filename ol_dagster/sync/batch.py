"""One batch's sync as every entry point runs it: upload, then cleanup, under the definition's lock.

A definition that feeds several catalogs syncs each on its own (``catalog_key``; ``sync.fanout``):
its own lock, cutoff, upload, cleanup, journal and report, so a failing catalog blocks only its
own cleanup; the steps below are per catalog, and the batch is SYNCED once every catalog is.

The Dagster assets (sensor-launched runs, ``ol-dagster sync``, a person re-materializing the
cleanup with a raised cap) and the tests call these functions, so there is one copy of what the
cleanup is told about a batch (``batch_facts``) and one place where the order of things is decided:

1. the definition's sync lock is taken (held from reading the cutoff to recording the report, so
   two syncs of one definition never interleave, whatever started them); a holder that died or
   whose lease ran out no longer blocks;
2. under it, a run requested for a batch still to sync (the sensor's, ``ol-dagster sync``'s:
   ``pending_only``) that finds it synced to the catalog by another run since is ALREADY_SYNCED
   (nothing uploaded, cleaned or recorded: it is not synced twice); a snapshot older than one
   already synced is SUPERSEDED (neither uploaded nor cleaned: it must not bring back what a
   newer snapshot removed, by its producer's order, ``ol_dagster.snapshot_order``);
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

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from ol_dagster.catalog.protocol import Catalog, DatasetRef, TakesEvents, UploadResult
from ol_dagster.changes.changeset import ChangeSet, Edge, Node
from ol_dagster.lineage import LineageGraph
from ol_dagster.ownership import is_snapshot, removal_cap
from ol_dagster.settings import SyncDefinition
from ol_dagster.store import BatchKind, BatchRecord, BatchStatus, CatalogRecord, EventStore
from ol_dagster.store.event_store import utcnow
from ol_dagster.store.holder import this_process
from ol_dagster.store.kafka_writes import DeadLetter
from ol_dagster.sync import changes, fanout
from ol_dagster.sync.cleanup import (
    ALREADY_SYNCED,
    RUN_FAILED,
    SUPERSEDED,
    UPLOAD_FAILED,
    BatchFacts,
    run_cleanup,
    run_stale_cleanup,
    skipped_report,
)
from ol_dagster.sync.graph import batch_graph, current_inputs
from ol_dagster.sync.inventories import batch_inventories
from ol_dagster.sync.journal import (
    STALE_REPORT,
    StoreJournal,
    earlier_removals,
    mark_reported,
    reconcile,
)
from ol_dagster.sync.lease import STEP_LEASE_SECONDS, Heartbeat
from ol_dagster.sync.lineage_refresh import note_catalog_change
from ol_dagster.sync.reports import CleanupReport, UploadRecord, stored_report, stored_upload
from ol_dagster.sync.upload import UploadOutcome, graph_facts, upload_graph

log = logging.getLogger(__name__)
_T = TypeVar("_T")

# Between a run's upload and cleanup steps nothing renews the lock: it is kept this long, or
# until the process that holds it is gone. In a step the lease is short and renewed by a
# heartbeat (``sync.lease``); a holder known dead is passed over at once.
LOCK_LEASE_SECONDS = 1800.0
LOCK_POLL_SECONDS = 0.5


class SyncBusy(Exception):
    """Another live sync of the definition (of this catalog of it) holds its lock: this one must
    wait or stay pending."""

    def __init__(self, definition: str, holder: str, catalog: str | None = None) -> None:
        what = f"definition {definition!r}" + (f" (catalog {catalog!r})" if catalog else "")
        super().__init__(
            f"{what} is being synced by {holder!r}: one sync per definition "
            f"{'and catalog ' if catalog else ''}at a time; this batch stays pending and is "
            "synced after it"
        )
        self.definition = definition
        self.holder = holder
        self.catalog = catalog


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
    record: UploadRecord  # what the store keeps as the batch's upload result
    graph: LineageGraph | None  # None when nothing was uploaded (superseded, kept)
    cutoff: datetime | None
    result: UploadResult | None = None
    # the run that finished this catalog's part of the batch: an earlier one a retry leaves
    # alone, or another one that synced it since this run was requested (ALREADY_SYNCED)
    kept_from: str | None = None
    changes: ChangeSet | None = None  # what the upload changed (None: not recorded)
    # the changed objects and one hop around them, for the picture (None: nothing changed)
    neighbourhood: tuple[list[Node], list[Edge]] | None = None

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
    where: fanout.CatalogTarget,
    holder: str,
    *,
    is_alive: Callable[[str], bool] | None = None,
    wait_seconds: float = 0.0,
) -> None:
    """Take (or renew) the sync lock of the definition's catalog ``where`` for ``holder``;
    ``SyncBusy`` when a live holder keeps it longer than ``wait_seconds``."""
    deadline = time.monotonic() + wait_seconds
    while True:
        other = store.acquire_sync_lock(
            where.lock,
            holder,
            lease_seconds=STEP_LEASE_SECONDS,
            is_alive=is_alive,
            process=this_process(),
        )
        if other is None:
            return
        if time.monotonic() >= deadline:
            raise SyncBusy(where.definition, other, None if where.primary else where.key)
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
    catalog_key: str | None = None,
    pending_only: bool = False,
) -> UploadDone:
    """Steps 1-4 for the definition's catalog ``catalog_key`` (its primary by default): lock,
    ALREADY_SYNCED (``pending_only``: the run was requested for a batch still to sync),
    SUPERSEDED, graph, cutoff and upload, recorded in the store. A cleanup an earlier run left
    unfinished in that catalog is reconciled first (``sync.journal``). A catalog this run keeps
    (``begin_run``: it finished the batch in an earlier run) is left alone."""
    where = fanout.target(definition, catalog_key)
    kept = _kept(store, batch_id, where, run_id)
    if kept is not None:
        record = stored_upload(dict(kept.upload_result or {}))
        return UploadDone(record, None, None, kept_from=kept.run_id or "")
    take_lock(store, where, run_id, is_alive=is_alive, wait_seconds=wait_seconds)
    try:
        with Heartbeat(store, where.lock, run_id):
            reconcile(store, catalog, definition, where)
            # read under the lock: another sync may have finished it while this one waited
            batch = store.get_batch(batch_id)
            other = _synced_by_another(store, batch, where, run_id) if pending_only else None
            if other is not None:
                skipped: UploadRecord = {
                    "skippedReason": ALREADY_SYNCED,
                    "syncedInRun": other,
                    "runId": run_id,
                }
                done = UploadDone(skipped, None, None, kept_from=other)
            else:
                done = _upload_locked(store, catalog, definition, batch, run_id, where)
    except BaseException:
        # nothing was recorded: the run fails, and the next sync need not wait for its lease
        store.release_sync_lock(where.lock, run_id)
        raise
    # handed over to this run's cleanup step, in this process (the sync jobs run their steps in
    # one process): the lease covers the steps in between, and this process dying ends it
    store.renew_sync_lock(
        where.lock, run_id, lease_seconds=LOCK_LEASE_SECONDS, process=this_process()
    )
    return done


def begin_run(
    store: EventStore, definition: SyncDefinition, batch_id: int, run_id: str
) -> list[str]:
    """At the start of a run of the whole sync (its ``received_batch`` step): the catalogs that
    already finished the batch (``fanout.kept``) are marked kept by this run, so its upload and
    cleanup steps for them do nothing, whatever the order the other catalogs' steps run in.
    Returns their keys (none for a definition with one catalog, or a batch synced everywhere)."""
    batch = store.get_batch(batch_id)
    if batch.definition != definition.name:
        return []
    records = store.catalog_records(batch_id)
    keys = fanout.kept(definition, batch, records)
    # added to the runs that keep it: another run of the batch may be in flight, keeping it too
    store.keep_catalogs(batch_id, keys, lambda kept: fanout.keeping(kept, run_id))
    return keys


def _kept(
    store: EventStore, batch_id: int, where: fanout.CatalogTarget, run_id: str
) -> CatalogRecord | None:
    """The catalog's part of the batch when this run keeps it (``begin_run``), else None."""
    found = store.catalog_records(batch_id).get(where.key)
    if found is not None and run_id in fanout.kept_by(found):
        return found
    return None


def _synced_by_another(
    store: EventStore, batch: BatchRecord, where: fanout.CatalogTarget, run_id: str
) -> str | None:
    """The run that synced the batch to the catalog ``where``, when it is not ``run_id`` ("" when
    a store from before version 11 does not say which); None while the batch is to be synced
    there."""
    mine = fanout.record(batch, store.catalog_records(batch.id), where)
    if mine is None or mine.status is not BatchStatus.SYNCED or mine.run_id == run_id:
        return None
    return mine.run_id or ""


def _upload_locked(
    store: EventStore,
    catalog: Catalog,
    definition: SyncDefinition,
    batch: BatchRecord,
    run_id: str,
    where: fanout.CatalogTarget,
) -> UploadDone:
    newer = _superseded_since(store, batch, where)
    if newer is not None:
        record: UploadRecord = {"skippedReason": SUPERSEDED, "supersededBy": newer, "runId": run_id}
        store.record_upload(
            batch.id, cutoff=None, result=record, catalog=where.key, primary=where.primary
        )
        return UploadDone(record, None, None)
    inputs = current_inputs(store, definition, batch)
    # a catalog that takes the events reads them once: when the graph must be built here too,
    # from the same list
    events = list(inputs.events()) if _takes_events(catalog) else None
    graph = batch_graph(store, definition, batch, inputs=inputs, events=events).graph
    outcome: UploadOutcome = upload_graph(
        catalog, graph, definition, (lambda: events) if events is not None else inputs.events
    )
    graph = outcome.graph or graph  # as uploaded: claimed Systems' datasets placed elsewhere
    record: UploadRecord = {
        **outcome.result.as_dict(),
        "graph": graph_facts(graph, outcome.claimed),
        "runId": run_id,
    }
    store.record_upload(
        batch.id, cutoff=outcome.cutoff, result=record, catalog=where.key, primary=where.primary
    )
    note_catalog_change(store, upload=dict(record))
    done = UploadDone(record, graph, outcome.cutoff, outcome.result)
    if outcome.result.succeeded:
        snapshot = is_snapshot(definition, batch.kind is BatchKind.POSTED, batch.whole_snapshot)
        done.changes = _recorded(
            lambda: changes.record_upload(
                store,
                definition,
                where.key,
                batch.id,
                graph,
                snapshot=snapshot,
                content_digests=outcome.result.content_digests,
            )
        )
        change_set = done.changes
        if change_set is not None and not change_set.empty:
            done.neighbourhood = _recorded(lambda: changes.picture_graph(store, change_set))
    return done


def _recorded(record: Callable[[], _T]) -> _T | None:
    """A change set recorded, or None when it could not be: what the sync reports on the side
    never stops the sync itself."""
    try:
        return record()
    except Exception:
        log.exception("the batch's change set could not be recorded")
        return None


def _takes_events(catalog: Catalog) -> bool:
    return isinstance(catalog, TakesEvents) and catalog.takes_events


def batch_facts(
    store: EventStore, batch: BatchRecord, upload: UploadRecord, readers: Sequence[str] = ()
) -> BatchFacts:
    """What the cleanup is told about a batch: the stored batch and its recorded upload (and the
    producer inventories its events hold, by ``readers``). The one copy, used by the assets and
    the tests alike."""
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
        described_jobs=[(ns, name) for ns, name in g.get("describedJobs") or []],
        completed_jobs=[(ns, name) for ns, name in g.get("completedJobs") or []],
        jobs=g.get("jobs") or [],
        dropped=upload.get("dropped") or {},
        drops=[DatasetRef(*d) for d in g.get("drops") or []],
        claimed=dict(g.get("claimedSystems") or {}),
        inventories=batch_inventories(store, batch.id, readers),
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
    catalog_key: str | None = None,
    pending_only: bool = False,
) -> CleanupReport:
    """Step 5 for the definition's catalog ``catalog_key`` (its primary by default): the cleanup
    of a batch on its recorded upload to that catalog; records the report, the catalog's outcome
    and the batch status, then releases the lock. ``uploaded_in_this_run`` is False when a
    person re-materializes only the cleanup (for example with a raised cap). A catalog this run
    keeps (``begin_run``) is not cleaned again: its recorded report is returned. With
    ``pending_only``, a batch another run synced to the catalog since this run was requested is
    not cleaned again either: an ALREADY_SYNCED report, recorded nowhere, is returned."""
    where = fanout.target(definition, catalog_key)
    over = overrides or CleanupOverrides()
    cap = removal_cap(definition, over.maxRemovalsPerRun)
    kept = _kept(store, batch_id, where, run_id)
    if kept is not None and kept.cleanup_report is not None:
        _settle(store, definition, batch_id, where, run_id)
        return stored_report(kept.cleanup_report)
    take_lock(store, where, run_id, is_alive=is_alive, wait_seconds=wait_seconds)
    try:
        with Heartbeat(store, where.lock, run_id):
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
                where,
                pending_only,
            )
    finally:
        store.release_sync_lock(where.lock, run_id)


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
    where: fanout.CatalogTarget,
    pending_only: bool,
) -> CleanupReport:
    reconcile(store, catalog, definition, where)
    batch = store.get_batch(batch_id)
    other = _synced_by_another(store, batch, where, run_id) if pending_only else None
    if other is not None:
        # another run synced it since this one was requested: its report stands
        report = skipped_report(ALREADY_SYNCED, None, cap)
        report["syncedInRun"] = other
        return report
    earlier = earlier_removals(store, definition.name, run_id, where)
    mine = _record(store, batch, where)
    upload = stored_upload(mine.upload_result) if mine is not None else None
    cutoff = mine.cutoff if mine is not None else None
    if upload is None or (uploaded_in_this_run and upload.get("runId") != run_id):
        # the upload of this run never finished: the run failed before the cleanup
        report = skipped_report(RUN_FAILED, cutoff, cap)
    elif upload.get("skippedReason") == SUPERSEDED:
        report = skipped_report(SUPERSEDED, None, cap)
        report["supersededBy"] = upload.get("supersededBy")
    elif cutoff is None:
        # the catalog could not even tell its time (down): nothing was uploaded to it
        report = skipped_report(UPLOAD_FAILED, None, cap)
    elif (newer := _superseded_since(store, batch, where)) is not None:
        # a newer snapshot was synced to this catalog since this one's upload: its cleanup decided
        report = skipped_report(SUPERSEDED, cutoff, cap)
        report["supersededBy"] = newer
    else:
        assert cutoff is not None
        report = run_cleanup(
            catalog,
            definition,
            batch_facts(store, batch, upload, definition.inventories),
            cutoff=cutoff,
            max_removals=over.maxRemovalsPerRun,
            max_share=over.maxRemovalShare,
            journal=StoreJournal(store, definition.name, run_id, batch.id, catalog=where.key),
        )
        # a skipped cleanup removed nothing: the jobs the upload listed as ending stay
        removed = report["removedJobs"]
        entities = bool((report.get("removed") or {}).get("physicalEntities"))
        _recorded(
            lambda: changes.record_cleanup(
                store, definition, where.key, batch.id, removed, entities
            )
        )
    _override(report, over, run_id, requested_by)
    if earlier:
        # what earlier runs removed and never reported (they died in their cleanup)
        report["reconciled"] = earlier
    # the events stay pending (FAILED) when nothing reached the catalog as it should
    store.record_cleanup(
        batch.id,
        report,
        catalog=where.key,
        primary=where.primary,
        status=fanout.outcome(report["skippedReason"]),
        run_id=run_id,
    )
    note_catalog_change(store, report=dict(report))
    mark_reported(store, definition.name, run_id, earlier, batch.id, where)
    _settle(store, definition, batch.id, where, run_id)
    return report


def _record(
    store: EventStore, batch: BatchRecord, where: fanout.CatalogTarget
) -> CatalogRecord | None:
    """The catalog's part of the batch, before this step writes to it: a batch synced before
    store version 11 first gets its primary catalog's row from its own columns."""
    records = store.catalog_records(batch.id)
    mine = fanout.record(batch, records, where)
    if mine is not None and where.key not in records:
        store.adopt_catalog_record(batch.id, mine)
    return mine


def _settle(
    store: EventStore,
    definition: SyncDefinition,
    batch_id: int,
    where: fanout.CatalogTarget,
    run_id: str,
) -> None:
    """The batch's status once the catalog ``where`` recorded its outcome (``fanout``)."""
    batch = store.get_batch(batch_id)
    status = fanout.batch_status(
        definition, batch, store.catalog_records(batch_id), finished=where.key, run_id=run_id
    )
    if status is not None:
        store.set_status(batch_id, status)


def _override(
    report: CleanupReport,
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
    batch waiting for nothing: each catalog whose cleanup recorded no outcome gets a RUN_FAILED
    report, and the batch becomes FAILED and keeps its events, so the sensor retries it after its
    backoff (for those catalogs only). False when there is nothing to mark: the batch is another
    definition's, already synced, or every catalog's cleanup recorded how it ended."""
    batch = store.get_batch(batch_id)
    if batch.definition != definition.name or batch.status is BatchStatus.SYNCED:
        return False
    records = store.catalog_records(batch_id)
    # the batch is already FAILED by this run (a catalog's cleanup failed): its backoff grew once
    already = any(r.status is BatchStatus.FAILED and r.run_id == run_id for r in records.values())
    marked = False
    for where in fanout.targets(definition):
        mine = _record(store, batch, where)
        if mine is not None and mine.status is not None:
            continue  # its cleanup step recorded how it ended (SYNCED, UPLOAD_FAILED, RUN_FAILED)
        cutoff = mine.cutoff if mine is not None else None
        report = skipped_report(RUN_FAILED, cutoff, removal_cap(definition))
        store.record_cleanup(
            batch.id,
            report | {"runId": run_id},
            catalog=where.key,
            primary=where.primary,
            status=BatchStatus.FAILED,
            run_id=run_id,
        )
        marked = True
    if marked and not already:
        store.set_status(batch.id, BatchStatus.FAILED)
    return marked


@dataclass(frozen=True)
class KafkaRejections:
    """The Kafka dead letters a stream batch stands for: how many, and the first of them."""

    count: int
    first: list[DeadLetter]


def kafka_rejections(store: EventStore, batch: BatchRecord, *, limit: int) -> KafkaRejections:
    """A stream batch's Kafka rejections: its definition's dead letters received after the
    previous stream batch was sealed, up to this one's seal (or now, while it is open). Each dead
    letter is shown with exactly one batch, the one its accepted neighbours joined, as a posted
    batch shows its own rejections."""
    if batch.kind is not BatchKind.STREAM:
        return KafkaRejections(0, [])
    after = store.previous_stream_seal(batch.definition, batch.id)
    until = batch.sealed_at
    count = store.count_dead_letters(batch.definition, after=after, until=until)
    first = (
        store.dead_letters(definition=batch.definition, after=after, until=until, limit=limit)
        if count
        else []
    )
    return KafkaRejections(count, first)


def purge_expired(
    store: EventStore, definition: SyncDefinition, keep_days: int | None
) -> list[int]:
    """``retention.keepDays``: the definition's synced batches older than that go, with their
    events; returns their ids (their partitions go too). Pending work is never purged. The Kafka
    intake's dead letters of the definition older than that go too (nothing else reads them)."""
    if keep_days is None:
        return []
    before = utcnow() - timedelta(days=keep_days)
    store.purge_dead_letters(definition.name, before=before)
    return store.purge_synced(definition.name, before=before)


def _superseded_since(
    store: EventStore, batch: BatchRecord, where: fanout.CatalogTarget
) -> int | None:
    """A whole snapshot newer by its producer's order (``ol_dagster.snapshot_order``) already
    synced to this catalog (asked before the upload, and again before the cleanup), else None."""
    if not batch.whole_snapshot:
        return None
    return store.newer_synced_snapshot(
        batch.order, batch.definition, catalog=where.key, primary=where.primary
    )


def sync_batch(
    store: EventStore,
    catalog: Catalog,
    definition: SyncDefinition,
    batch_id: int,
    *,
    run_id: str,
    overrides: CleanupOverrides | None = None,
    is_alive: Callable[[str], bool] | None = None,
    catalog_key: str | None = None,
    pending_only: bool = False,
) -> tuple[UploadDone, CleanupReport]:
    """Upload then cleanup of one catalog (the primary by default), as one run of the assets
    does."""
    done = upload_batch(
        store,
        catalog,
        definition,
        batch_id,
        run_id=run_id,
        is_alive=is_alive,
        catalog_key=catalog_key,
        pending_only=pending_only,
    )
    report = cleanup_batch(
        store,
        catalog,
        definition,
        batch_id,
        run_id=run_id,
        overrides=overrides,
        is_alive=is_alive,
        catalog_key=catalog_key,
        pending_only=pending_only,
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
    catalog_key: str | None = None,
) -> CleanupReport:
    """The daily day-based cleanup of one catalog (the primary by default), under the same lock
    as the batches' syncs to it. A raised ``max_removals`` is recorded as a batch cleanup's is
    (``override``, with who asked)."""
    where = fanout.target(definition, catalog_key)
    take_lock(store, where, run_id, is_alive=is_alive, wait_seconds=wait_seconds)
    try:
        with Heartbeat(store, where.lock, run_id):
            reconcile(store, catalog, definition, where)
            earlier = earlier_removals(store, definition.name, run_id, where)
            report = run_stale_cleanup(
                catalog,
                definition,
                max_removals=max_removals,
                journal=StoreJournal(store, definition.name, run_id, None, catalog=where.key),
            )
            removed = report["removedJobs"]
            _recorded(lambda: changes.forget_jobs(store, definition, where.key, removed))
            _override(report, CleanupOverrides(max_removals), run_id, requested_by)
            if earlier:
                report["reconciled"] = earlier
            mark_reported(store, definition.name, run_id, earlier, STALE_REPORT, where)
            return report
    finally:
        store.release_sync_lock(where.lock, run_id)
