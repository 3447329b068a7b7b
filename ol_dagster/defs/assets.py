"""The four partitioned assets of a sync definition: one partition per batch.

``received_batch`` -> ``lineage_graph`` -> ``catalog_upload`` -> ``catalog_cleanup``. They pass
nothing through Dagster's IO managers: each reads what it needs from the event store or the
catalog, so any one of them can be re-materialized for a partition on its own (for example the
cleanup with a raised removal cap).
"""

from typing import Any

import dagster as dg

from ol_dagster.defs import constants as C
from ol_dagster.defs.lineage_assets import (
    OpenLineageTranslator,
    batch_job_runs,
    job_runs_key,
    merge_job_runs,
    prune_job_runs,
)
from ol_dagster.defs.report import cleanup_markdown, counts_markdown, rows_markdown
from ol_dagster.defs.resources import CatalogResource, StoreResource
from ol_dagster.gcpause import gc_paused
from ol_dagster.lineage_state import export_state
from ol_dagster.logstore_backlog import LogOutcome, log_batch
from ol_dagster.settings import Definition, SnapshotMode
from ol_dagster.store import BatchRecord, EventStore
from ol_dagster.sync.batch import CleanupOverrides, SyncBusy, cleanup_batch, upload_batch
from ol_dagster.sync.cleanup import (
    CLEANUP_PERMISSION_DENIED,
    REMOVAL_CAP_EXCEEDED,
    REMOVAL_SHARE_EXCEEDED,
    SHARED_SYSTEM_DOWNGRADED,
    SUPERSEDED,
)
from ol_dagster.sync.graph import batch_graph

_TABLE_ROWS = 200
# How long a sync waits for another sync of its definition (its lock) before it fails and its
# batch stays pending for the sensor's retry.
LOCK_WAIT_SECONDS = 120.0


class CleanupConfig(dg.Config):
    """Run config of ``catalog_cleanup``: a person may raise the removal limits for one run."""

    maxRemovalsPerRun: int | None = None
    maxRemovalShare: float | None = None


def run_alive(instance: dg.DagsterInstance):
    """Whether a sync lock's holder (a run id) still runs: a finished or failed run's lock is
    taken over at once. A holder this instance does not know is trusted until its lease ends."""

    def alive(holder: str) -> bool:
        try:
            run = instance.get_run_by_id(holder)
        except Exception:  # a malformed id, an instance hiccup: trust the lease
            return True
        return run is None or not run.is_finished

    return alive


def _batch(
    context: dg.AssetExecutionContext, store: EventStore, definition: Definition
) -> BatchRecord:
    batch = store.get_batch(int(context.partition_key))
    if batch.definition != definition.name:
        raise dg.Failure(
            f"batch {batch.id} belongs to definition {batch.definition!r}, not {definition.name!r}"
        )
    return batch


# The batch's job runs as one table on the upload's materialization, not an event per job (each
# costs ~20 ms on a SQLite instance). Markdown: a 1,000-row table costs ~2 ms to store, where a
# ``MetadataValue.table`` costs ~50 ms (Dagster serializes each record, several times). Failed
# last runs first, then the latest; a larger batch shows these and says how many more it ran.
_JOB_RUN_ROWS = 1000
_JOB_RUN_COLUMNS = [
    "job",
    "asset",
    "lastRunStatus",
    "lastRunTime",
    "lastRunDurationSeconds",
    "runs",
    "failures",
    "rowsWritten",
    "bytesWritten",
]


def job_runs_metadata(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """``jobRuns`` (a Markdown table), ``jobsRun`` and ``jobsFailed`` of an upload's
    materialization."""
    if not runs:
        return {}
    shown = sorted(runs, key=lambda r: r["lastRunTime"] or "", reverse=True)
    shown.sort(key=lambda r: r["lastRunStatus"] != "FAIL")  # stable: failures first, latest first
    rows = [{**r, "job": f"{r['namespace']}.{r['name']}"} for r in shown]
    return {
        "jobRuns": dg.MetadataValue.md(rows_markdown(rows, _JOB_RUN_COLUMNS, _JOB_RUN_ROWS)),
        "jobsRun": len(runs),
        "jobsFailed": sum(1 for r in runs if r["lastRunStatus"] == "FAIL"),
    }


def remember_job_runs(
    store: EventStore, definition: Definition, runs: list[dict[str, Any]], batch_id: int
) -> None:
    """The jobs' last runs for their asset pages (``lineage_assets``), shown from the next load
    of the code location, like the lineage itself."""
    key = job_runs_key(definition.name)
    store.save_lineage_state(key, merge_job_runs(store.lineage_state(key), runs, batch_id))


def _log_events(store: EventStore, batch: BatchRecord, definition: Definition) -> LogOutcome | None:
    """Egeria's file-based log store, when configured: each accepted event as one JSON file under
    ``<folder>/<namespace>/<job>/`` (names encoded so no event can write outside the folder). An
    event that cannot be written waits for the next sync; the batch goes on to the catalog."""
    if definition.logStore is None:
        return None
    with gc_paused():
        return log_batch(store, definition.name, definition.logStore.folder, batch.id)


def log_store_check(outcome: LogOutcome) -> dg.AssetCheckResult:
    """``log_store_written``: warns when events could not be written into the log store (how
    many, why); they are retried at the next sync, and the catalog has them all the same."""
    waiting = outcome.failed or outcome.pending or outcome.lost
    description = None
    if outcome.failed:
        description = (
            f"{outcome.failed} event(s) not written to the log store ({outcome.reason}); "
            f"{outcome.pending} wait(s) for the next sync. The catalog has them all."
        )
    elif outcome.pending:
        description = f"{outcome.pending} event(s) wait for the next sync to be written"
    if outcome.lost:
        description = (description + " " if description else "") + (
            f"{outcome.lost} event(s) were purged from the event store before they could be "
            "written: the log store lacks them."
        )
    return dg.AssetCheckResult(
        check_name=C.LOG_STORE_WRITTEN,
        passed=not waiting,
        severity=dg.AssetCheckSeverity.WARN,
        description=description,
        metadata={
            "written": outcome.written,
            "retried": outcome.retried,
            "failed": outcome.failed,
            "pending": outcome.pending,
            "lost": outcome.lost,
            "reason": outcome.reason or "",
            **({"example": outcome.example} if outcome.example else {}),
        },
    )


def refresh_lineage_state(context, catalog, definition: Definition, store: EventStore) -> None:
    """After a sync, snapshot what the definition has synced for the asset graph. The UI shows new
    nodes when the code location is next loaded (a reload, or the next process start)."""
    state = export_state(catalog, definition)
    if state is None:
        context.log.info("catalog cannot export its lineage: the asset graph keeps its snapshot")
        return
    store.save_lineage_state(definition.name, state)
    key = job_runs_key(definition.name)
    pruned = prune_job_runs(store.lineage_state(key), state)
    if pruned is not None:
        store.save_lineage_state(key, pruned)


def check_spec(name: str, asset: dg.AssetKey) -> dg.AssetCheckSpec:
    """A check of ``asset`` with its description: what it guards, what a failure means."""
    return dg.AssetCheckSpec(name, asset=asset, description=C.CHECK_DESCRIPTIONS[name])


def removal_limits_check(report: dict[str, Any]) -> dg.AssetCheckResult:
    """``removal_cap``: fails when the planned removals passed ``maxRemovalsPerRun`` or would
    remove more than ``maxRemovalShare`` of the definition's jobs; says which, with the numbers."""
    reason = report["skippedReason"]
    description = None
    if reason == REMOVAL_CAP_EXCEEDED:
        description = (
            f"{report.get('plannedRemovals', 0)} planned removals > maxRemovalsPerRun "
            f"{report.get('maxRemovalsPerRun')}: nothing deleted"
        )
    elif reason == REMOVAL_SHARE_EXCEEDED:
        description = (
            f"{report.get('plannedJobRemovals', 0)} of {report.get('heldJobs', 0)} jobs would be "
            f"removed, more than maxRemovalShare {report.get('maxRemovalShare')}: nothing deleted"
        )
    return dg.AssetCheckResult(
        check_name=C.REMOVAL_CAP,
        passed=reason not in (REMOVAL_CAP_EXCEEDED, REMOVAL_SHARE_EXCEEDED),
        severity=dg.AssetCheckSeverity.WARN,
        description=description,
        metadata={
            "plannedRemovals": report.get("plannedRemovals", 0),
            "maxRemovalsPerRun": report.get("maxRemovalsPerRun", 0),
            "plannedJobRemovals": report.get("plannedJobRemovals", 0),
            "heldJobs": report.get("heldJobs", 0),
            "maxRemovalShare": float(report.get("maxRemovalShare") or 0.0),
        },
    )


def build_assets(
    definition: Definition,
    partitions: dg.DynamicPartitionsDefinition,
    translator: OpenLineageTranslator,
) -> list:
    name = definition.name
    keys = {
        a: dg.AssetKey([name, a])
        for a in (C.RECEIVED_BATCH, C.LINEAGE_GRAPH, C.CATALOG_UPLOAD, C.CATALOG_CLEANUP)
    }
    common: dict[str, Any] = {"group_name": name, "partitions_def": partitions}
    snapshot = definition.snapshotMode is SnapshotMode.BATCH_SNAPSHOT

    @dg.asset(
        key=keys[C.RECEIVED_BATCH],
        kinds={"openlineage"},
        check_specs=[
            check_spec(C.NOT_EMPTY, keys[C.RECEIVED_BATCH]),
            check_spec(C.WHOLE_SNAPSHOT, keys[C.RECEIVED_BATCH]),
            *(
                [check_spec(C.LOG_STORE_WRITTEN, keys[C.RECEIVED_BATCH])]
                if definition.logStore
                else []
            ),
        ],
        **common,
    )
    def received_batch(context: dg.AssetExecutionContext, ol_store: StoreResource):
        """The batch of OpenLineage events this partition stands for, as the receiver stored it:
        how many were received, accepted and rejected (with reasons), split by event kind, type
        and producer."""
        store = ol_store.get()
        batch = _batch(context, store, definition)
        counts = store.event_counts(batch.id)
        logged = _log_events(store, batch, definition)
        rejected_rows = [
            {"index": r.get("index"), "reason": r.get("reason")} for r in batch.rejections
        ]
        yield dg.MaterializeResult(
            metadata={
                "batchId": batch.id,
                "kind": batch.kind.value,
                "status": batch.status.value,
                "received": batch.received_count,
                "accepted": batch.accepted_count,
                "rejected": batch.rejected_count,
                "wholeSnapshot": batch.whole_snapshot,
                "receivedAt": dg.MetadataValue.timestamp(batch.received_at),
                "events": dg.MetadataValue.md(counts_markdown(counts)),
                "rejections": dg.MetadataValue.md(
                    rows_markdown(rejected_rows, ["index", "reason"], _TABLE_ROWS)
                ),
                "dagster/row_count": batch.accepted_count,
                **({"loggedEvents": logged.written} if logged is not None else {}),
            },
            check_results=[
                dg.AssetCheckResult(
                    check_name=C.NOT_EMPTY,
                    passed=batch.accepted_count > 0,
                    description=None
                    if batch.accepted_count
                    else "the batch holds no accepted event: cleanup is skipped (EMPTY_BATCH)",
                    metadata={"accepted": batch.accepted_count},
                ),
                dg.AssetCheckResult(
                    check_name=C.WHOLE_SNAPSHOT,
                    passed=(not snapshot) or batch.rejected_count == 0,
                    severity=dg.AssetCheckSeverity.WARN,
                    description=(
                        "not a snapshot definition"
                        if not snapshot
                        else "every event accepted: a whole snapshot"
                        if batch.rejected_count == 0
                        else f"{batch.rejected_count} event(s) rejected: the batch is not a "
                        "snapshot and gets the day-based cleanup only"
                    ),
                    metadata={"rejected": batch.rejected_count},
                ),
                *([log_store_check(logged)] if logged is not None else []),
            ],
        )

    @dg.asset(
        key=keys[C.LINEAGE_GRAPH],
        deps=[keys[C.RECEIVED_BATCH]],
        kinds={"openlineage"},
        check_specs=[check_spec(C.NO_DANGLING_FLOWS, keys[C.LINEAGE_GRAPH])],
        **common,
    )
    def lineage_graph(context: dg.AssetExecutionContext, ol_store: StoreResource):
        """The batch normalized into jobs, datasets and the data flows between them, with the
        earlier parts of its runs kept in earlier batches: the graph ``catalog_upload`` uploads
        (stored with the batch, so the upload does not normalize again)."""
        store = ol_store.get()
        batch = _batch(context, store, definition)
        # handed over to the upload when it runs in this process (``ol-dagster sync``)
        built = batch_graph(store, definition, batch, hand_over=True)
        graph = built.graph
        jobs = [
            {"namespace": j.namespace, "name": j.name, "integration": j.integration or ""}
            for j in sorted(graph.jobs.values(), key=lambda j: j.key)
        ]
        datasets = [
            {
                "namespace": d.namespace,
                "name": d.name,
                "system": d.system,
                "type": d.type,
                "fields": len(d.fields),
            }
            for d in sorted(graph.datasets.values(), key=lambda d: d.key)
        ]
        dangling = graph.dangling_by_reason()
        yield dg.MaterializeResult(
            metadata={
                **graph.counts(),
                "jobNamespaces": graph.job_namespaces,
                "jobTable": dg.MetadataValue.md(
                    rows_markdown(jobs, ["namespace", "name", "integration"], _TABLE_ROWS)
                ),
                "datasetTable": dg.MetadataValue.md(
                    rows_markdown(
                        datasets, ["namespace", "name", "system", "type", "fields"], _TABLE_ROWS
                    )
                ),
                "danglingFlows": dg.MetadataValue.json(dangling),
                "skippedEvents": len(graph.skipped_events),
                # the batch's events and the earlier events of its runs, read for the graph
                "inputEvents": built.inputs.count,
                "earlierRunEvents": len(built.inputs.earlier),
            },
            check_results=[
                dg.AssetCheckResult(
                    check_name=C.NO_DANGLING_FLOWS,
                    passed=not graph.dangling,
                    severity=dg.AssetCheckSeverity.WARN,
                    description=None
                    if not graph.dangling
                    else f"{len(graph.dangling)} flow(s) dropped: an end is not in the batch",
                    metadata={"danglingFlows": len(graph.dangling), **dangling},
                )
            ],
        )

    @dg.asset(
        key=keys[C.CATALOG_UPLOAD],
        deps=[keys[C.LINEAGE_GRAPH]],
        kinds={"catalog"},
        check_specs=[check_spec(C.UPLOAD_SUCCEEDED, keys[C.CATALOG_UPLOAD])],
        **common,
    )
    def catalog_upload(
        context: dg.AssetExecutionContext, ol_store: StoreResource, ol_catalog: CatalogResource
    ):
        """Everything the batch describes, written to the catalog. The cutoff is read from the
        catalog's clock before the first write; every object sent is touched, changed or not."""
        store = ol_store.get()
        batch = _batch(context, store, definition)
        with ol_catalog.open(name) as catalog:
            try:
                done = upload_batch(
                    store,
                    catalog,
                    definition,
                    batch.id,
                    run_id=context.run_id,
                    is_alive=run_alive(context.instance),
                    wait_seconds=LOCK_WAIT_SECONDS,
                )
            except SyncBusy as exc:
                raise dg.Failure(str(exc)) from None
        if done.graph is None or done.cutoff is None:
            newer = done.record.get("supersededBy")
            # an older snapshot must not bring back what a newer one removed
            yield dg.MaterializeResult(
                metadata={"skippedReason": SUPERSEDED, "supersededBy": newer},
                check_results=[
                    dg.AssetCheckResult(
                        check_name=C.UPLOAD_SUCCEEDED,
                        passed=True,
                        description=f"superseded by batch {newer}: nothing uploaded",
                    )
                ],
            )
            return
        graph, result = done.graph, done.result
        assert result is not None
        runs = batch_job_runs(graph, translator) if result.succeeded else []
        if runs:
            remember_job_runs(store, definition, runs, batch.id)
        if not result.succeeded:
            context.log.error(
                "upload of batch %s failed for %d row(s)", batch.id, len(result.failed)
            )
        failed_rows = [
            {"objectType": f.object_type, "key": f.key, "reason": f.reason} for f in result.failed
        ]
        yield dg.MaterializeResult(
            metadata={
                "cutoff": dg.MetadataValue.timestamp(done.cutoff),
                **(
                    {"renamed": dg.MetadataValue.json(result.renamed)}
                    if getattr(result, "renamed", None)
                    else {}
                ),
                "results": dg.MetadataValue.md(
                    rows_markdown(
                        [
                            {
                                "objectType": t,
                                "written": result.written.get(t, 0),
                                "touched": result.touched.get(t, 0),
                            }
                            for t in sorted(set(result.written) | set(result.touched))
                        ],
                        ["objectType", "written", "touched"],
                        _TABLE_ROWS,
                    )
                ),
                "failed": dg.MetadataValue.md(
                    rows_markdown(failed_rows, ["objectType", "key", "reason"], _TABLE_ROWS)
                ),
                "dropped": dg.MetadataValue.json(result.dropped),
                **job_runs_metadata(runs),
            },
            check_results=[
                dg.AssetCheckResult(
                    check_name=C.UPLOAD_SUCCEEDED,
                    passed=result.succeeded,
                    description=None
                    if result.succeeded
                    else f"{len(result.failed)} row(s) failed: nothing is deleted (UPLOAD_FAILED)",
                    metadata={"failedRows": len(result.failed)},
                )
            ],
        )

    @dg.asset(
        key=keys[C.CATALOG_CLEANUP],
        deps=[keys[C.CATALOG_UPLOAD]],
        kinds={"catalog"},
        check_specs=[
            check_spec(C.REMOVAL_CAP, keys[C.CATALOG_CLEANUP]),
            check_spec(C.CLEANUP_PERMITTED, keys[C.CATALOG_CLEANUP]),
            check_spec(C.OWNED_DATASET_SYSTEMS, keys[C.CATALOG_CLEANUP]),
        ],
        **common,
    )
    def catalog_cleanup(
        context: dg.AssetExecutionContext,
        config: CleanupConfig,
        ol_store: StoreResource,
        ol_catalog: CatalogResource,
    ):
        """What producers no longer describe, removed from the catalog, with the guards of the
        seed (empty batch, failed upload, removal cap, permission, dry run). The ``report``
        metadata is the seed's cleanup report."""
        store = ol_store.get()
        batch = _batch(context, store, definition)
        selection = context.run.asset_selection
        with ol_catalog.open(name) as catalog:
            try:
                report = cleanup_batch(
                    store,
                    catalog,
                    definition,
                    batch.id,
                    run_id=context.run_id,
                    uploaded_in_this_run=selection is None or keys[C.CATALOG_UPLOAD] in selection,
                    overrides=CleanupOverrides(config.maxRemovalsPerRun, config.maxRemovalShare),
                    requested_by={"tags": dict(context.run.tags)},
                    is_alive=run_alive(context.instance),
                    wait_seconds=LOCK_WAIT_SECONDS,
                )
            except SyncBusy as exc:
                raise dg.Failure(str(exc)) from None
            if report["mode"] is not None:
                refresh_lineage_state(context, catalog, definition, store)
        reason = report["skippedReason"]
        downgraded = [
            w["system"] for w in report["warnings"] if w.get("code") == SHARED_SYSTEM_DOWNGRADED
        ]
        yield dg.MaterializeResult(
            metadata={
                "report": dg.MetadataValue.json(report),
                "summary": dg.MetadataValue.md(cleanup_markdown(report)),
                "mode": str(report["mode"]),
                "skippedReason": str(reason),
                "removedJobs": len(report["removedJobs"]),
            },
            check_results=[
                removal_limits_check(report),
                dg.AssetCheckResult(
                    check_name=C.CLEANUP_PERMITTED,
                    passed=reason != CLEANUP_PERMISSION_DENIED,
                    severity=dg.AssetCheckSeverity.WARN,
                ),
                dg.AssetCheckResult(
                    check_name=C.OWNED_DATASET_SYSTEMS,
                    passed=not downgraded,
                    severity=dg.AssetCheckSeverity.WARN,
                    description=None
                    if not downgraded
                    else "CUTOFF Systems not owned by this definition alone were cleaned with "
                    f"DAYS instead (SHARED_SYSTEM_DOWNGRADED): {', '.join(downgraded)}",
                    metadata={"downgradedSystems": len(downgraded)},
                ),
            ],
        )

    return [received_batch, lineage_graph, catalog_upload, catalog_cleanup]
