"""What each sync asset shows in Dagster: its materialization metadata and check results.

The assets (``defs.assets``, ``defs.stale``) run a core service and hand its outcome here, so the
metadata keys, check names and descriptions a person (and other tools) read are written once:
the per-batch and the day-based cleanup share one builder (``cleanup_result``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dagster as dg

from ol_dagster.defs import constants as C
from ol_dagster.defs.changes import changes_metadata, downstream_check, skipped_check
from ol_dagster.defs.lineage_assets import JobRunRow
from ol_dagster.defs.report import cleanup_markdown, counts_markdown, rows_markdown
from ol_dagster.logstore_backlog import LogOutcome
from ol_dagster.store import BatchRecord
from ol_dagster.sync.batch import KafkaRejections, UploadDone
from ol_dagster.sync.cleanup import (
    ALREADY_SYNCED,
    CLEANUP_NOT_CONFIRMED,
    CLEANUP_PERMISSION_DENIED,
    REMOVAL_CAP_EXCEEDED,
    REMOVAL_SHARE_EXCEEDED,
    SHARED_SYSTEM_DOWNGRADED,
    SUPERSEDED,
)
from ol_dagster.sync.graph import BatchGraph
from ol_dagster.sync.reports import CleanupReport
from ol_dagster.sync_definition import Severity

_TABLE_ROWS = 200

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

# The checks of the two cleanup assets (declared with the asset, answered by ``cleanup_result``).
BATCH_CLEANUP_CHECKS = (C.REMOVAL_CAP, C.CLEANUP_PERMITTED, C.OWNED_DATASET_SYSTEMS)
STALE_CLEANUP_CHECKS = (C.REMOVAL_CAP, C.CLEANUP_PERMITTED)


def check_spec(name: str, asset: dg.AssetKey) -> dg.AssetCheckSpec:
    """A check of ``asset`` with its description: what it guards, what a failure means."""
    return dg.AssetCheckSpec(name, asset=asset, description=C.CHECK_DESCRIPTIONS[name])


def received_batch_result(
    batch: BatchRecord,
    counts: dict[str, dict[str, int]],
    logged: LogOutcome | None,
    *,
    snapshot: bool,
    kafka: KafkaRejections | None = None,
) -> dg.MaterializeResult:
    """``received_batch``: the batch's counts, rejections and its three checks; for a stream
    batch fed by Kafka, the dead letters received beside its events (``kafka_rejections``)."""
    rejected_rows = [{"index": r.get("index"), "reason": r.get("reason")} for r in batch.rejections]
    kafka_metadata: dict[str, Any] = {}
    if kafka is not None and kafka.count:
        letters = [
            {"topic": d.topic, "partition": d.partition, "offset": d.offset, "reason": d.reason}
            for d in kafka.first
        ]
        kafka_metadata = {
            "kafkaDeadLetters": kafka.count,
            "kafkaDeadLetterReasons": dg.MetadataValue.md(
                rows_markdown(letters, ["topic", "partition", "offset", "reason"], _TABLE_ROWS)
            ),
        }
    return dg.MaterializeResult(
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
            **kafka_metadata,
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
                description=_snapshot_description(batch, snapshot),
                metadata={"rejected": batch.rejected_count},
            ),
            *([log_store_check(logged)] if logged is not None else []),
        ],
    )


def _snapshot_description(batch: BatchRecord, snapshot: bool) -> str:
    if not snapshot:
        return "not a snapshot definition"
    if batch.rejected_count == 0:
        return "every event accepted: a whole snapshot"
    # the first reason says why (a rejected event, or a Kafka snapshot cut by a bound)
    first = next((str(r.get("reason")) for r in batch.rejections if r.get("reason")), None)
    return (
        f"{batch.rejected_count} rejection(s): the batch is not a snapshot and gets the "
        "day-based cleanup only" + (f"; first: {first[:300]}" if first else "")
    )


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


def lineage_graph_result(built: BatchGraph) -> dg.MaterializeResult:
    """``lineage_graph``: the graph's jobs, datasets and the flows it had to drop."""
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
    return dg.MaterializeResult(
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
            # jobs normalized from their events, and jobs whose events say what they said in
            # the last synced batch: their lineage taken as it was, their runs counted anew
            **(
                {"normalize": {"normalized": built.counts[0], "reused": built.counts[1]}}
                if built.counts is not None
                else {}
            ),
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


def job_runs_metadata(runs: Sequence[JobRunRow]) -> dict[str, Any]:
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


def superseded_result(newer: int | None) -> dg.MaterializeResult:
    """``catalog_upload`` of a SUPERSEDED snapshot: nothing uploaded, and the check says why."""
    return dg.MaterializeResult(
        metadata={"skippedReason": SUPERSEDED, "supersededBy": newer},
        check_results=[
            dg.AssetCheckResult(
                check_name=C.UPLOAD_SUCCEEDED,
                passed=True,
                description=f"superseded by batch {newer}: nothing uploaded",
            ),
            skipped_check(f"superseded by batch {newer}: nothing uploaded"),
        ],
    )


def kept_result(synced_in: str) -> dg.MaterializeResult:
    """``catalog_upload`` of a catalog synced by run ``synced_in``: an earlier run a retry leaves
    alone (the retry is for the definition's other catalogs), or another run that synced it
    since this one was requested; nothing uploaded again."""
    return dg.MaterializeResult(
        metadata={"skippedReason": ALREADY_SYNCED, "syncedInRun": synced_in},
        check_results=[
            dg.AssetCheckResult(
                check_name=C.UPLOAD_SUCCEEDED,
                passed=True,
                description=f"synced to this catalog by run {synced_in}: not uploaded again",
            ),
            skipped_check(f"synced to this catalog by run {synced_in}: not uploaded again"),
        ],
    )


def upload_result(
    done: UploadDone, job_runs: dict[str, Any], severity: Severity = Severity.WARN
) -> dg.MaterializeResult:
    """``catalog_upload``: the cutoff, what was written, updated and touched per object type,
    the failed rows, ``job_runs`` (``job_runs_metadata``) when the upload succeeded, and the
    batch's lineage changes with the ``downstream_intact`` check (at ``severity``)."""
    result = done.result
    assert result is not None, "a superseded upload has no result"
    failed_rows = [
        {"objectType": f.object_type, "key": f.key, "code": f.code, "reason": f.reason}
        for f in result.failed
    ]
    # updated and unchanged split touched, from a catalog that can tell them apart
    split = {"updated": result.updated, "unchanged": result.unchanged}
    columns = ["objectType", "written", *(k for k, v in split.items() if v is not None), "touched"]
    counts = [
        {
            "objectType": t,
            "written": result.written.get(t, 0),
            **{k: v.get(t, 0) for k, v in split.items() if v is not None},
            "touched": result.touched.get(t, 0),
        }
        for t in sorted(set(result.written) | set(result.touched))
    ]
    return dg.MaterializeResult(
        metadata={
            # no cutoff: the catalog could not tell its time (down), nothing was sent
            **({"cutoff": dg.MetadataValue.timestamp(done.cutoff)} if done.cutoff else {}),
            **({"renamed": dg.MetadataValue.json(result.renamed)} if result.renamed else {}),
            "results": dg.MetadataValue.md(rows_markdown(counts, columns, _TABLE_ROWS)),
            "failed": dg.MetadataValue.md(
                rows_markdown(failed_rows, ["objectType", "key", "code", "reason"], _TABLE_ROWS)
            ),
            "dropped": dg.MetadataValue.json(result.dropped),
            **job_runs,
            **changes_metadata(done.changes, done.neighbourhood),
        },
        check_results=[
            dg.AssetCheckResult(
                check_name=C.UPLOAD_SUCCEEDED,
                passed=result.succeeded,
                description=None
                if result.succeeded
                else f"{len(result.failed)} row(s) failed: nothing is deleted (UPLOAD_FAILED)",
                metadata={"failedRows": len(result.failed)},
            ),
            downstream_check(done.changes, severity),
        ],
    )


def judged(result: dg.MaterializeResult, batch: str) -> dg.MaterializeResult:
    """``result`` with each of its checks saying which batch (partition) it judged: ``batch`` in
    its metadata and at the start of its description (a check's history lists every batch's
    result one under another)."""
    checks = [
        c._replace(
            metadata={**c.metadata, "batch": dg.MetadataValue.text(batch)},
            description=f"batch {batch}: {c.description}" if c.description else f"batch {batch}",
        )
        for c in result.check_results
    ]
    return result._replace(check_results=checks)


def cleanup_result(report: CleanupReport, checks: Sequence[str]) -> dg.MaterializeResult:
    """A cleanup's report (the seed's, as JSON and as a summary table) and the results of
    ``checks`` (``BATCH_CLEANUP_CHECKS`` or ``STALE_CLEANUP_CHECKS``). The batch cleanup also
    shows its ``mode``; the day-based one is always DAYS."""
    reason = report["skippedReason"]
    results = {
        C.REMOVAL_CAP: lambda: removal_limits_check(report),
        C.CLEANUP_PERMITTED: lambda: cleanup_permitted_check(report),
        C.OWNED_DATASET_SYSTEMS: lambda: owned_systems_check(report),
    }
    per_batch = C.OWNED_DATASET_SYSTEMS in checks
    return dg.MaterializeResult(
        metadata={
            "report": dg.MetadataValue.json(report),
            "summary": dg.MetadataValue.md(cleanup_markdown(report)),
            **({"mode": str(report["mode"])} if per_batch else {}),
            "skippedReason": str(reason),
            "removedJobs": len(report["removedJobs"]),
        },
        check_results=[results[name]() for name in checks],
    )


def cleanup_permitted_check(report: CleanupReport) -> dg.AssetCheckResult:
    """``cleanup_permitted``: a warning when the catalog refused the cleanup user; an error when
    a cleanup call's answer did not confirm what was asked (a dry run the server may carry out
    for real), with the catalog's answer as the reason."""
    reason = report["skippedReason"]
    if reason == CLEANUP_NOT_CONFIRMED:
        why = next((w.get("message", "") for w in report["warnings"] if w["code"] == reason), "")
        return dg.AssetCheckResult(
            check_name=C.CLEANUP_PERMITTED,
            passed=False,
            severity=dg.AssetCheckSeverity.ERROR,
            description=f"nothing more was deleted (CLEANUP_NOT_CONFIRMED): {why}"[:1000],
        )
    return dg.AssetCheckResult(
        check_name=C.CLEANUP_PERMITTED,
        passed=reason != CLEANUP_PERMISSION_DENIED,
        severity=dg.AssetCheckSeverity.WARN,
    )


def removal_limits_check(report: CleanupReport) -> dg.AssetCheckResult:
    """``removal_cap``: fails when the planned removals passed ``maxRemovalsPerRun`` or would
    remove more than ``maxRemovalShare`` of the definition's jobs, datasets, fields or flows; says
    which, with the numbers."""
    reason = report["skippedReason"]
    description = None
    if reason == REMOVAL_CAP_EXCEEDED:
        description = (
            f"{report.get('plannedRemovals', 0)} planned removals > maxRemovalsPerRun "
            f"{report.get('maxRemovalsPerRun')}: nothing deleted"
        )
    elif reason == REMOVAL_SHARE_EXCEEDED:
        planned, held = report.get("plannedByKind") or {}, report.get("heldByKind") or {}
        over = report.get("shareExceeded") or ["jobs"]
        if not planned:  # a report recorded before the share was judged per kind
            planned = {"jobs": report.get("plannedJobRemovals", 0)}
            held = {"jobs": report.get("heldJobs", 0)}
        parts = ", ".join(f"{planned.get(k, 0)} of {held.get(k, 0)} {k}" for k in over)
        description = (
            f"{parts} would be removed, more than maxRemovalShare "
            f"{report.get('maxRemovalShare')}: nothing deleted"
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


def owned_systems_check(report: CleanupReport) -> dg.AssetCheckResult:
    """``owned_dataset_systems``: warns when a CUTOFF System shared with another definition was
    cleaned by age instead (SHARED_SYSTEM_DOWNGRADED), naming the Systems."""
    downgraded = [
        w.get("system", "") for w in report["warnings"] if w["code"] == SHARED_SYSTEM_DOWNGRADED
    ]
    return dg.AssetCheckResult(
        check_name=C.OWNED_DATASET_SYSTEMS,
        passed=not downgraded,
        severity=dg.AssetCheckSeverity.WARN,
        description=None
        if not downgraded
        else "CUTOFF Systems not owned by this definition alone were cleaned with "
        f"DAYS instead (SHARED_SYSTEM_DOWNGRADED): {', '.join(downgraded)}",
        metadata={"downgradedSystems": len(downgraded)},
    )
