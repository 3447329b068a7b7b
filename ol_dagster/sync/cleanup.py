"""Removal of deprecated metadata: what a run may delete, and the guards that stop it.

OpenLineage has no "this job is gone" event, so the catalog is kept equal to what producers still
describe by deleting what a run's scopes own and did not touch (seed
``blindata-openlineage-removal-of-deprecated-metadata``, its table "What a run fully describes"):

* **CUTOFF** for a ``/lineage/batch`` to a BATCH_SNAPSHOT definition with every event accepted:
  every job of every job namespace the batch's events describe *and the definition owns*
  (``allowedJobNamespaces``), in the same run, everything last updated before the cutoff read
  from the catalog clock at the start of the run. A namespace named only by a parent facet is
  another owner's: never a cutoff scope.
* **Replaced jobs**: a JobEvent, or a completed run when ``lineageReplacement`` is JOB, fully
  describes its job: the two scopes of that job get the cutoff, flows call only (its entity is
  uploaded again anyway). PERIODIC and COMPLETE_SNAPSHOT windows describe a window, not the job:
  they replace nothing.
* **DAYS** for everything else: what was not updated for ``cleanup.staleJobDays`` (job Systems and
  flows) or a dataset System's ``cleanupDays``.
* **Inventories** (a reader the definition turned on, ``inventories: [airflow]``): the children
  of a parent that its producer's newest whole list no longer names, in a namespace the
  definition alone writes, are retired by the cutoff (reason ``NOT_IN_INVENTORY``).
* **DROP** lifecycle events remove their dataset through a call of the same plan, in a System this
  definition owns whose policy allows cleaning: every guard below applies to them too.

A broken input must never wipe lineage, so nothing is deleted when the run failed, cleanup is
disabled, the batch is empty, an upload failed, the planned removals exceed
``maxRemovalsPerRun`` or (beyond the seed) remove more than ``maxRemovalShare`` of the jobs the
definition holds, the catalog refuses the cleanup user or answers a cleanup call in a way that
does not confirm what was asked (``CLEANUP_NOT_CONFIRMED``), or the definition is a dry run. Every
call is rehearsed first (a catalog that can roll back runs the whole plan for real and rolls it
back, so each call's planned count is exactly what its real call removes; others count in a dry
run), and no real call is made before the whole plan passed the guards. A rehearsal in which no
call removed or met anything is the cleanup: nothing is called again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import astuple, dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from ol_dagster.catalog.protocol import (
    Catalog,
    CleanupCounts,
    CleanupNotConfirmed,
    CleanupPermissionDenied,
    CleanupStopped,
    DatasetRef,
    ObjectType,
    Rehearsing,
    Removal,
)
from ol_dagster.catalog.systems import job_system_for
from ol_dagster.lineage.graph import NodeKey, flow_scope, orchestration_scope, scope_prefix
from ol_dagster.lineage.inventories import Inventory
from ol_dagster.ownership import (
    CUTOFF,
    DAYS,
    SHARED_SYSTEM_DOWNGRADED,
    SYSTEM_CLAIMED,
    BatchShape,
    SystemInfo,
    Verdict,
    admitted,
    decide,
    decide_stale,
    former_job_systems,
    is_snapshot,
    may_change,
    owns_system,
    removal_cap,
    removal_share,
    share_exceeded,
    systems_by_name,
)
from ol_dagster.settings import SyncDefinition
from ol_dagster.sync import retire
from ol_dagster.sync.reports import (
    CallArgs,
    CallDescription,
    CallReport,
    CleanupReport,
    CleanupWarning,
    JournalCall,
    JournalCounts,
    ShareLimit,
)

# skippedReason codes
RUN_FAILED = "RUN_FAILED"
CLEANUP_DISABLED = "CLEANUP_DISABLED"
EMPTY_BATCH = "EMPTY_BATCH"
UPLOAD_FAILED = "UPLOAD_FAILED"
REMOVAL_CAP_EXCEEDED = "REMOVAL_CAP_EXCEEDED"
REMOVAL_SHARE_EXCEEDED = "REMOVAL_SHARE_EXCEEDED"
CLEANUP_PERMISSION_DENIED = CleanupPermissionDenied.code
CLEANUP_NOT_CONFIRMED = CleanupNotConfirmed.code
DRY_RUN = "DRY_RUN"
SUPERSEDED = "SUPERSEDED"
# a run requested for a pending batch found it synced by another run since: not run again
ALREADY_SYNCED = "ALREADY_SYNCED"

# warnings (SHARED_SYSTEM_DOWNGRADED and SYSTEM_CLAIMED: ``ol_dagster.ownership``)
DANGLING_FLOW = "DANGLING_FLOW"
DROP_NOT_OWNED = "DROP_NOT_OWNED"


@dataclass(frozen=True, slots=True)
class BatchFacts:
    """What the cleanup needs to know about the batch a run synced."""

    posted: bool  # a /lineage/batch post (not single events collected into a stream batch)
    whole_snapshot: bool  # stored whole, every event accepted, to a BATCH_SNAPSHOT definition
    accepted: int
    job_namespaces: list[str]
    upload_succeeded: bool
    dataset_systems: list[str] = field(default_factory=list)  # Systems the batch refers to
    described_jobs: list[tuple[str, str]] = field(default_factory=list)
    completed_jobs: list[tuple[str, str]] = field(default_factory=list)
    jobs: list[str] = field(default_factory=list)  # "<namespace>.<name>" of every job described
    dropped: dict[str, int] = field(default_factory=dict)
    drops: list[DatasetRef] = field(default_factory=list)  # datasets a DROP event named
    # dataset Systems another definition claimed -> the System its datasets were placed in
    claimed: dict[str, str] = field(default_factory=dict)
    # producer inventories its events hold, by the readers the definition turned on
    inventories: list[Inventory] = field(default_factory=list)

    def shape(self, definition: SyncDefinition) -> BatchShape:
        return BatchShape(
            snapshot=is_snapshot(definition, self.posted, self.whole_snapshot),
            job_namespaces=tuple(self.job_namespaces),
            described_jobs=tuple(self.described_jobs),
            completed_jobs=tuple(self.completed_jobs),
            dataset_systems=tuple(self.dataset_systems),
            inventories=tuple(self.inventories),
        )


class Journal(Protocol):
    """Where the real calls are written down before they are made (``sync.journal``): a process
    killed in a call leaves its intent, which the definition's next sync reconciles."""

    def intent(self, position: int, call: JournalCall, planned: JournalCounts) -> int: ...

    def done(self, entry: int, removed: JournalCounts) -> None: ...


def invoke(catalog: Catalog, target: str, args: Mapping[str, Any], dry: bool) -> CleanupCounts:
    """Make one cleanup call from its recorded arguments (JSON: a plan's call, ``CallArgs``, or
    a journal entry replayed as a dry run to see what is still there)."""
    if target == "flows":
        namespaces, jobs = _flow_owners(args)
        return catalog.cleanup_flows(
            namespaces=namespaces,
            jobs=jobs,
            before=datetime.fromisoformat(args["before"]),
            dry_run=dry,
        )
    if target == "jobSystem":
        routines = args.get("routinesBefore")
        return catalog.cleanup_job_system(
            args["system"],
            schemas=args["schemas"],
            before=datetime.fromisoformat(args["before"]),
            dry_run=dry,
            routines_before=datetime.fromisoformat(routines) if routines else None,
        )
    if target == "datasetSystem":
        return catalog.cleanup_dataset_system(
            args["system"], before=datetime.fromisoformat(args["before"]), dry_run=dry
        )
    if target == "drops":
        return catalog.drop_datasets([DatasetRef(*d) for d in args["datasets"]], dry_run=dry)
    if target == "retireJobs":
        return retire.invoke(catalog, args, dry)
    raise ValueError(f"unknown cleanup call {target!r}")


def _flow_owners(args: Mapping[str, Any]) -> tuple[list[str], list[NodeKey]]:
    """The owners a flows call covers: namespaces (every job of each) and jobs. A call recorded
    before owners were kept as parts names them as scope strings (``ol:<ns>|`` prefixes and
    ``ol:<ns>|<job>[#orchestration]`` scopes), read back as they were written."""
    namespaces = list(args.get("namespaces") or [])
    jobs: list[NodeKey] = [(ns, name) for ns, name in args.get("jobs") or []]
    for prefix in args.get("scopePrefixes") or []:
        namespaces.append(prefix.removeprefix("ol:").removesuffix("|"))
    for scope in args.get("scopes") or []:
        ns, _, name = scope.removeprefix("ol:").partition("|")
        job = (ns, name.removesuffix("#orchestration"))
        if job not in jobs:
            jobs.append(job)
    return namespaces, jobs


@dataclass(slots=True)
class _Call:
    target: str
    description: CallDescription
    args: CallArgs  # JSON: what ``invoke`` makes the call from
    catalog: Catalog
    dry: CleanupCounts | None = None
    real: CleanupCounts | None = None

    def run(self, dry: bool) -> CleanupCounts:
        return invoke(self.catalog, self.target, self.args, dry)

    def journal_call(self) -> JournalCall:
        return {"target": self.target, **self.description, "args": self.args}

    def as_dict(self) -> CallReport:
        out: CallReport = {
            "target": self.target,
            **self.description,
            "dryRun": dict(self.dry.counts) if self.dry else None,
            "real": dict(self.real.counts) if self.real else None,
        }
        if self.real and self.real.outcomes:
            out["outcomes"] = self.real.outcomes
        if self.real and self.real.kept_by:
            out["keptBy"] = self.real.kept_by
        if self.real and self.real.left:
            out["left"] = self.real.left
        if self.real and self.real.kept:
            out["keptObjects"] = self.real.kept
        return out


def cleanup_mode(definition: SyncDefinition, facts: BatchFacts) -> str:
    return CUTOFF if is_snapshot(definition, facts.posted, facts.whole_snapshot) else DAYS


class _Planner:
    def __init__(self, catalog: Catalog, definition: SyncDefinition, cutoff: datetime) -> None:
        self.catalog = catalog
        self.definition = definition
        self.cutoff = cutoff
        self.calls: list[_Call] = []
        self.warnings: list[CleanupWarning] = []
        self.verdict: Verdict | None = None
        self._systems: dict[str, SystemInfo] | None = None

    @property
    def systems(self) -> dict[str, SystemInfo]:
        if self._systems is None:
            self._systems = systems_by_name(self.catalog.systems())
        return self._systems

    def job_system_names(self) -> list[str]:
        """Every job System of the definition: current (its rules and ``openLineageSystem``)
        and former ones."""
        names = {
            self.definition.job_system,
            *former_job_systems(self.definition, self.systems.values()),
        }
        names |= {r.system for r in self.definition.jobSystems}
        return sorted(names & set(self.systems))

    def held_namespaces(self) -> dict[str, list[str]]:
        """The namespaces of the definition each of its job Systems holds."""
        out: dict[str, list[str]] = {}
        for system in self.job_system_names():
            schemas = admitted(self.definition, self.catalog.job_schemas(system))
            if schemas:
                out[system] = schemas
        return out

    def held(self) -> dict[str, int]:
        """What the definition holds now, per kind: its jobs, the flows of its namespaces, the
        datasets and fields of the Systems it created."""
        by_system = self.held_namespaces()
        jobs = sum(self.catalog.count_jobs(s, schemas=ns) for s, ns in by_system.items())
        namespaces = sorted({ns for schemas in by_system.values() for ns in schemas})
        # every System it created, cleaned or not: the lineage it holds, as a share is read
        owned = sorted(n for n, s in self.systems.items() if owns_system(self.definition, s))
        counts = self.catalog.count_held(namespaces=namespaces, dataset_systems=owned)
        return {"jobs": jobs, **counts}

    def drops(self, datasets: list[DatasetRef]) -> None:
        """Datasets a DROP event named, in Systems this definition owns and may clean; a DROP
        in any other System is reported and left alone."""
        if not datasets:
            return
        allowed: list[DatasetRef] = []
        for d in datasets:
            info = self.systems.get(d.system)
            if info is not None and may_change(self.definition, info):
                allowed.append(d)
            else:
                self.warnings.append(
                    {"code": DROP_NOT_OWNED, "dataset": f"{d.ol_namespace}:{d.ol_name}"}
                )
        if not allowed:
            return
        self.calls.append(
            _Call(
                "drops",
                {"datasets": [f"{d.ol_namespace}:{d.ol_name}" for d in allowed]},
                {"datasets": [list(astuple(d)) for d in allowed]},
                self.catalog,
            )
        )

    def days_ago(self, days: int) -> datetime:
        return self.cutoff - timedelta(days=days)

    def flows(
        self,
        *,
        namespaces: list[str] | tuple[str, ...] = (),
        jobs: list[NodeKey] | tuple[NodeKey, ...] = (),
        before: datetime,
    ) -> None:
        """Flows owned by every job of ``namespaces``, or by ``jobs`` (both their scopes)."""
        if not namespaces and not jobs:
            return
        # the report names them as scopes, as a person reads them in the catalog; the call is
        # made (and journaled) with the owners' parts
        description: CallDescription = {"deleteBefore": before.isoformat()}
        if namespaces:
            description["scopePrefixes"] = [scope_prefix(ns) for ns in namespaces]
        if jobs:
            description["scopes"] = [
                s for j in jobs for s in (flow_scope(*j), orchestration_scope(*j))
            ]
        args: CallArgs = {
            "namespaces": list(namespaces),
            "jobs": [list(j) for j in jobs],
            "before": before.isoformat(),
        }
        self.calls.append(_Call("flows", description, args, self.catalog))

    def job_systems(
        self,
        namespaces: list[str] | tuple[str, ...],
        before: datetime,
        routines_before: datetime | None = None,
    ) -> None:
        """Each job System for the namespaces it holds, and each former one for all of them."""
        if not namespaces:
            return
        by_system: dict[str, list[str]] = {}
        for ns in namespaces:
            by_system.setdefault(job_system_for(self.definition, ns), []).append(ns)
        for former in former_job_systems(self.definition, self.systems.values()):
            # a namespace moved away left its jobs here, untouched: every namespace is looked at
            by_system[former] = list(namespaces)
        for system, schemas in sorted(by_system.items()):
            if system in self.systems:  # a System never created holds nothing to clean
                self._job_call(system, sorted(schemas), before, routines_before)

    def _job_call(
        self,
        system: str,
        schemas: list[str],
        before: datetime,
        routines_before: datetime | None,
    ) -> None:
        self.calls.append(
            _Call(
                "jobSystem",
                {
                    "system": system,
                    "schemas": schemas,
                    "level": "schema",
                    "deleteBefore": before.isoformat(),
                },
                {
                    "system": system,
                    "schemas": schemas,
                    "before": before.isoformat(),
                    "routinesBefore": routines_before.isoformat() if routines_before else None,
                },
                self.catalog,
            )
        )

    def dataset_system(self, system: str, before: datetime, mode: str) -> None:
        self.calls.append(
            _Call(
                "datasetSystem",
                {"system": system, "mode": mode, "deleteBefore": before.isoformat()},
                {"system": system, "before": before.isoformat()},
                self.catalog,
            )
        )

    def retire(self, inventories: Iterable[Inventory]) -> None:
        """The calls of the inventories (``sync.retire``)."""
        calls, warnings = retire.plan(self.catalog, self.definition, inventories, self.cutoff)
        self.warnings += warnings
        self.calls += [_Call("retireJobs", d, a, self.catalog) for d, a in calls]

    def carry_out(self, verdict: Verdict) -> None:
        """The calls of a verdict: cutoff namespaces and replaced jobs by the cutoff, the rest
        after its days, each dataset System as the verdict says."""
        self.verdict = verdict
        stale = self.days_ago(self.definition.cleanup.staleJobDays)
        for name in verdict.downgraded:
            self.warnings.append({"code": SHARED_SYSTEM_DOWNGRADED, "system": name})
        self.flows(namespaces=verdict.cutoff_namespaces, before=self.cutoff)
        # a routine whose job is still described (its sql facet removed) waits for the day-based
        # limit; a removed job's routine goes with it now
        self.job_systems(verdict.cutoff_namespaces, self.cutoff, stale)
        self.flows(jobs=verdict.replaced_jobs, before=self.cutoff)
        self.flows(namespaces=verdict.days_namespaces, before=stale)
        self.job_systems(verdict.days_namespaces, stale)
        for call in verdict.dataset_systems:
            before = self.cutoff if call.mode == CUTOFF else self.days_ago(call.days or 30)
            self.dataset_system(call.system, before, call.mode)


def plan_batch(
    catalog: Catalog, definition: SyncDefinition, facts: BatchFacts, cutoff: datetime
) -> tuple[str, _Planner]:
    """The calls a synced batch makes, by the verdict of ``ol_dagster.ownership``."""
    p = _Planner(catalog, definition, cutoff)
    for system, placed in sorted(facts.claimed.items()):
        p.warnings.append({"code": SYSTEM_CLAIMED, "system": system, "placedIn": placed})
    verdict = decide(definition, facts.shape(definition), p.systems)
    p.carry_out(verdict)
    p.retire(verdict.inventories)
    p.drops(facts.drops)
    return verdict.mode, p


def plan_stale(
    catalog: Catalog, definition: SyncDefinition, cutoff: datetime
) -> tuple[str, _Planner]:
    """The daily day-based cleanup: every job namespace the catalog holds for this definition."""
    p = _Planner(catalog, definition, cutoff)
    held = [ns for s in p.job_system_names() for ns in catalog.job_schemas(s)]
    verdict = decide_stale(definition, held, p.systems)
    p.carry_out(verdict)
    return verdict.mode, p


def new_report(
    mode: str | None, cutoff: datetime | None, cap: int, share: float | None = None
) -> CleanupReport:
    share_limit: ShareLimit = {"maxRemovalShare": share} if share is not None else {}
    return {
        "mode": mode,
        "cutoff": cutoff.isoformat() if cutoff else None,
        "skippedReason": None,
        "maxRemovalsPerRun": cap,
        "plannedRemovals": 0,
        **share_limit,
        "calls": [],
        "removedJobs": [],
        "warnings": [],
    }


def skipped_report(reason: str, cutoff: datetime | None, cap: int) -> CleanupReport:
    """The report of a run stopped before any call could be planned (failed, superseded...)."""
    report = new_report(None, cutoff, cap)
    report["skippedReason"] = reason
    return report


def _rehearse(catalog: Catalog, calls: list[_Call]) -> None:
    """Planned counts of every call. A catalog that can roll back makes the real calls in order
    inside a transaction it then rolls back: each call's count is then exactly what its real
    call removes (a flow the flows call takes is not counted again by the job System call whose
    job it touched). Others answer a dry run per call."""
    rehearsing = isinstance(catalog, Rehearsing)
    block: AbstractContextManager[None] = catalog.rehearsal() if rehearsing else nullcontext()
    with block:
        for call in calls:
            call.dry = call.run(not rehearsing)


def _removing(calls: list[_Call], described: frozenset[str]) -> dict[str, int]:
    """What the rehearsed plan removes directly, per kind the share guard compares: jobs (a job
    the batch still describes that leaves a former job System is moved, not removed), dataset
    entities and their fields (dataset System calls and DROPs), and flows (the flows calls: the
    flows the batch no longer describes), field flows apart where the catalog counts them apart.
    What goes only because its end went (the flows of a removed job or dataset) follows from
    those and is not judged again."""
    out = {
        "jobs": len({j for c in calls if c.dry for j in c.dry.removed_jobs} - described),
        "datasets": 0,
        "fields": 0,
        "dataFlows": 0,
        "fieldFlows": 0,
    }
    for c in calls:
        if c.dry is None:
            continue
        if c.target in ("datasetSystem", "drops"):
            out["datasets"] += c.dry.counts.get(ObjectType.PHYSICAL_ENTITIES, 0)
            out["fields"] += c.dry.counts.get(ObjectType.PHYSICAL_FIELDS, 0)
        elif c.target == "flows":
            out["dataFlows"] += c.dry.counts.get(ObjectType.DATA_FLOWS, 0)
            out["fieldFlows"] += c.dry.counts.get(ObjectType.FIELD_FLOWS, 0)
    return out


def execute(
    catalog: Catalog,
    definition: SyncDefinition,
    mode: str,
    planner: _Planner,
    report: CleanupReport,
    cap: int,
    described: frozenset[str] = frozenset(),
    share: float | None = None,
    journal: Journal | None = None,
) -> CleanupReport:
    """Rehearse every call, check the guards, then make the real calls (unless a dry run), each
    written to the ``journal`` before it is made and completed after."""
    report["mode"] = mode
    report["warnings"].extend(planner.warnings)
    if planner.verdict is not None:
        report["ownership"] = planner.verdict.as_dict()
    calls = planner.calls
    try:
        _rehearse(catalog, calls)
        planned = sum(c.dry.total for c in calls if c.dry)
        report["plannedRemovals"] = planned
        over: list[str] = []
        if share is not None:
            removing = _removing(calls, described)
            held = planner.held() if any(removing.values()) else dict.fromkeys(removing, 0)
            over = share_exceeded(removing, held, share)
            report["plannedJobRemovals"] = removing["jobs"]
            report["heldJobs"] = held.get("jobs", 0)
            report["plannedByKind"] = removing
            report["heldByKind"] = held
            report["shareExceeded"] = over
        if planned > cap:
            report["skippedReason"] = REMOVAL_CAP_EXCEEDED
        elif over:
            report["skippedReason"] = REMOVAL_SHARE_EXCEEDED
        elif definition.outputOptions.dryRun:
            report["skippedReason"] = DRY_RUN
        else:
            # a rehearsal made every call for real: when none changed or met anything, each
            # made again on the catalog it rolled back to finds the same nothing
            settled = isinstance(catalog, Rehearsing) and not any(map(_did_anything, calls))
            for position, call in enumerate(calls):
                assert call.dry is not None
                if settled:
                    call.real = call.dry
                    continue
                intent: JournalCounts = {
                    "counts": dict(call.dry.counts),
                    "jobs": list(call.dry.removed_jobs),
                }
                entry = journal.intent(position, call.journal_call(), intent) if journal else None
                call.real = call.run(False)
                if journal is not None and entry is not None:
                    journal.done(entry, _journal_removed(call.real))
                report["removedJobs"].extend(call.real.removed_jobs)
            gone = set(report["removedJobs"])
            # a job the batch still describes left a former job System: moved, not removed
            report["movedJobs"] = sorted(gone & described)
            report["removedJobs"] = sorted(gone - described)
            retired = retire.retired(
                (c.description, c.real.removed_jobs)
                for c in calls
                if c.target == "retireJobs" and c.real
            )
            if retired:
                report["retired"] = retired
            report["removed"] = _totals(c.real for c in calls)
            # what the catalog did not remove: it did not have it, it is another source's, or it
            # refused (that entry is tried again next run)
            report["notFound"] = _outcome_totals(calls, Removal.NOT_FOUND)
            report["kept"] = _outcome_totals(calls, Removal.KEPT)
            # who the catalog says owns what was kept; what it made and was left on purpose
            report["keptBy"] = _sums(c.real.kept_by for c in calls if c.real)
            report["left"] = _sums(c.real.left for c in calls if c.real)
            report["refused"] = refused = _outcome_totals(calls, Removal.REFUSED)
            if refused:
                report["warnings"].append(
                    {
                        "code": "REMOVAL_REFUSED",
                        "message": f"the catalog refused {sum(refused.values())} "
                        "removal(s); they are tried again next run",
                    }
                )
            # seed: quality checks of removed jobs are disabled, never deleted
            report["disabledQualityChecks"] = catalog.disable_quality_checks(report["removedJobs"])
    except CleanupStopped as exc:
        # a refused user, or an answer that does not confirm what was asked (a dry run the
        # server may have carried out for real): no further call is made
        report["skippedReason"] = exc.code
        if not isinstance(exc, CleanupPermissionDenied):
            report["warnings"].append({"code": exc.code, "message": str(exc)})
    report["calls"] = [c.as_dict() for c in calls]
    return report


def _did_anything(call: _Call) -> bool:
    """Whether a rehearsed call removed, kept, left or met anything (``CleanupCounts``)."""
    d = call.dry
    return d is None or any((d.total, d.removed_jobs, d.outcomes, d.kept_by, d.left, d.kept))


def _journal_removed(counts: CleanupCounts) -> JournalCounts:
    removed: JournalCounts = {"counts": dict(counts.counts), "jobs": list(counts.removed_jobs)}
    if counts.outcomes:
        removed["outcomes"] = counts.outcomes
    return removed


def _outcome_totals(calls: list[_Call], outcome: Removal) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in calls:
        for kind, n in (c.real.outcomes.get(outcome, {}) if c.real else {}).items():
            out[kind] = out.get(kind, 0) + n
    return out


def _sums(parts: Iterable[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in parts:
        for key, n in part.items():
            out[key] = out.get(key, 0) + n
    return out


def _totals(counts: Iterable[CleanupCounts | None]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in counts:
        if c is None:
            continue
        for kind, n in c.counts.items():
            out[kind] = out.get(kind, 0) + n
    return out


def run_cleanup(
    catalog: Catalog,
    definition: SyncDefinition,
    facts: BatchFacts,
    *,
    cutoff: datetime,
    max_removals: int | None = None,
    max_share: float | None = None,
    journal: Journal | None = None,
) -> CleanupReport:
    """Plan, guard and (when allowed) carry out a batch's cleanup; returns the seed's report.
    ``max_removals`` and ``max_share`` override the definition's limits for this run."""
    cap = removal_cap(definition, max_removals)
    share = removal_share(definition, max_share)
    report = new_report(cleanup_mode(definition, facts), cutoff, cap, share)
    if facts.dropped.get(DANGLING_FLOW):
        report["warnings"].append({"code": DANGLING_FLOW, "count": facts.dropped[DANGLING_FLOW]})
    # a failed upload first: it alone keeps the batch's events pending for a retry, whatever
    # else would have stopped the cleanup
    for skipped, reason in (
        (not facts.upload_succeeded, UPLOAD_FAILED),
        (not definition.cleanup.enabled, CLEANUP_DISABLED),
        (facts.accepted == 0, EMPTY_BATCH),
    ):
        if skipped:
            report["skippedReason"] = reason
            return report
    mode, planner = plan_batch(catalog, definition, facts, cutoff)
    return execute(
        catalog, definition, mode, planner, report, cap, frozenset(facts.jobs), share, journal
    )


def run_stale_cleanup(
    catalog: Catalog,
    definition: SyncDefinition,
    *,
    max_removals: int | None = None,
    journal: Journal | None = None,
) -> CleanupReport:
    """The daily day-based cleanup of a definition (``<definition>/stale_cleanup``). The share
    guard is for batches: what has not been described for staleJobDays is meant to go."""
    cap = removal_cap(definition, max_removals)
    cutoff = catalog.clock()
    report = new_report(DAYS, cutoff, cap)
    if not definition.cleanup.enabled:
        report["skippedReason"] = CLEANUP_DISABLED
        return report
    mode, planner = plan_stale(catalog, definition, cutoff)
    return execute(catalog, definition, mode, planner, report, cap, journal=journal)
