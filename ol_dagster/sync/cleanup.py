"""Removal of deprecated metadata: what a run may delete, and the guards that stop it.

OpenLineage has no "this job is gone" event, so the catalog is kept equal to what producers still
describe by deleting what a run's scopes own and did not touch (seed
``blindata-openlineage-removal-of-deprecated-metadata``):

* **CUTOFF** for a whole snapshot batch of a BATCH_SNAPSHOT definition: in the same run, everything
  in the batch's job namespaces last updated before the cutoff read at the start of the run.
* **DAYS** for everything else: what was not updated for ``cleanup.staleJobDays``.

A broken input must never wipe lineage, so nothing is deleted when cleanup is disabled, the batch is
empty, the upload failed, the dry-run counts exceed ``maxRemovalsPerRun``, the catalog refuses the
cleanup user, or the definition is a dry run. Every call is made as a dry run first.

This first version cleans data flows and job entities; dataset Systems, former job Systems and
quality suites come with the full seed (issue step 4).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ol_dagster.catalog.protocol import Catalog, CleanupCounts, CleanupPermissionDenied
from ol_dagster.catalog.systems import job_system_for
from ol_dagster.lineage.graph import scope_prefix
from ol_dagster.settings import Definition, SnapshotMode

CUTOFF = "CUTOFF"
DAYS = "DAYS"

# skippedReason codes
CLEANUP_DISABLED = "CLEANUP_DISABLED"
EMPTY_BATCH = "EMPTY_BATCH"
UPLOAD_FAILED = "UPLOAD_FAILED"
REMOVAL_CAP_EXCEEDED = "REMOVAL_CAP_EXCEEDED"
CLEANUP_PERMISSION_DENIED = CleanupPermissionDenied.code
DRY_RUN = "DRY_RUN"


@dataclass(frozen=True, slots=True)
class BatchFacts:
    """What the cleanup needs to know about the batch a run synced."""

    posted: bool  # a /lineage/batch post (not single events collected into a stream batch)
    whole_snapshot: bool  # stored whole with every event accepted, to a BATCH_SNAPSHOT definition
    accepted: int
    job_namespaces: list[str]
    upload_succeeded: bool
    dropped: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Call:
    target: str
    description: dict[str, Any]
    run: Callable[[bool], CleanupCounts]
    dry: CleanupCounts | None = None
    real: CleanupCounts | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            **self.description,
            "dryRun": dict(self.dry.counts) if self.dry else None,
            "real": dict(self.real.counts) if self.real else None,
        }


def cleanup_mode(definition: Definition, facts: BatchFacts) -> str:
    if (
        definition.snapshotMode is SnapshotMode.BATCH_SNAPSHOT
        and facts.posted
        and facts.whole_snapshot
    ):
        return CUTOFF
    return DAYS


def _plan(
    catalog: Catalog, definition: Definition, namespaces: list[str], before: datetime
) -> list[_Call]:
    calls: list[_Call] = []
    if not namespaces:
        return calls
    prefixes = [scope_prefix(ns) for ns in namespaces]
    calls.append(
        _Call(
            "flows",
            {"scopePrefixes": prefixes},
            lambda dry: catalog.cleanup_flows(scope_prefixes=prefixes, before=before, dry_run=dry),
        )
    )
    by_system: dict[str, list[str]] = {}
    for ns in namespaces:
        by_system.setdefault(job_system_for(definition, ns), []).append(ns)
    for system, schemas in sorted(by_system.items()):
        calls.append(
            _Call(
                "jobSystem",
                {"system": system, "schemas": schemas, "level": "schema"},
                lambda dry, s=system, sc=schemas: catalog.cleanup_job_system(
                    s, schemas=sc, before=before, dry_run=dry
                ),
            )
        )
    return calls


def run_cleanup(
    catalog: Catalog,
    definition: Definition,
    facts: BatchFacts,
    *,
    cutoff: datetime,
    max_removals: int | None = None,
) -> dict[str, Any]:
    """Plan, guard and (when allowed) carry out the cleanup; returns the seed's report."""
    mode = cleanup_mode(definition, facts)
    cap = definition.cleanup.maxRemovalsPerRun if max_removals is None else max_removals
    before = cutoff if mode == CUTOFF else cutoff - timedelta(days=definition.cleanup.staleJobDays)
    report: dict[str, Any] = {
        "mode": mode,
        "cutoff": cutoff.isoformat(),
        "deleteBefore": before.isoformat(),
        "skippedReason": None,
        "maxRemovalsPerRun": cap,
        "calls": [],
        "removedJobs": [],
        "warnings": [],
    }
    if facts.dropped.get("DANGLING_FLOW"):
        report["warnings"].append(
            {"code": "DANGLING_FLOW", "count": facts.dropped["DANGLING_FLOW"]}
        )

    if not definition.cleanup.enabled:
        report["skippedReason"] = CLEANUP_DISABLED
        return report
    if facts.accepted == 0:
        report["skippedReason"] = EMPTY_BATCH
        return report
    if not facts.upload_succeeded:
        report["skippedReason"] = UPLOAD_FAILED
        return report

    calls = _plan(catalog, definition, facts.job_namespaces, before)
    try:
        for call in calls:
            call.dry = call.run(True)
        planned = sum(c.dry.total for c in calls if c.dry)
        report["plannedRemovals"] = planned
        if planned > cap:
            report["skippedReason"] = REMOVAL_CAP_EXCEEDED
        elif definition.outputOptions.dryRun:
            report["skippedReason"] = DRY_RUN
        else:
            for call in calls:
                call.real = call.run(False)
                report["removedJobs"].extend(call.real.removed_jobs)
            # seed: quality checks of removed jobs are disabled, never deleted
            report["disabledQualityChecks"] = catalog.disable_quality_checks(report["removedJobs"])
    except CleanupPermissionDenied:
        report["skippedReason"] = CLEANUP_PERMISSION_DENIED
    report["calls"] = [c.as_dict() for c in calls]
    report["removedJobs"] = sorted(report["removedJobs"])
    return report
