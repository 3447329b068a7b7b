"""A reference model of what the catalog must hold after each sync, from the documented rules alone.

Written from Blindata's "Removal of deprecated metadata" page, OpenLineage's job type facet page
(how the events of a run combine) and the project's rules for lineage safety, and from
nothing in ``ol_dagster``: no import, no copied rule. It is small on purpose; every rule below is a
sentence of those texts.

The catalog is four sets of objects, each with the serial number of the last upload that sent it
("Every object the job uploads gets its last-update time set to the time of the upload"):

* job entities ``(job System, namespace, name)``;
* dataset entities ``(dataset System, namespace, name)``;
* data flows ``(job namespace, job name, source dataset, target dataset)``, owned by the job's
  scope;
* orchestration flows ``(parent namespace, parent name, child namespace, child name)``, owned by
  the child's orchestration scope.

Serial numbers stand for the catalog clock: an upload reads its cutoff, then everything it sends
is touched *after* it, so "last updated before the cutoff" is ``touched < serial``.

What removes anything (the "touched in this run" idea, in the same run; the test never lets a day
pass, so the day-based cleanup removes nothing):

(a) a ``/lineage/batch`` post to a BATCH_SNAPSHOT definition with every event accepted (and at
    least one): its scopes are the job namespaces of the jobs the batch's events describe (a job
    named only in another event's parent facet does not count). In them: every data and
    orchestration flow not touched by this upload, every job entity of the definition's job
    Systems not touched; and, in each dataset System whose cleanupMode is CUTOFF, that this
    definition created (openLineageOwner) when it has exactly one allowedJobNamespaces pattern
    without ``*``, every dataset entity not touched (the seed's example: the bucket's entity goes
    although the second snapshot names nothing in the bucket; the lead's decision, over the calls
    table's "that the batch refers to").
(b) a JobEvent: the flows (data and orchestration) of that job not touched by this upload.
(c) with lineageReplacement JOB, a run that completes in the batch, of a BATCH job whose events
    are EVENT_BASED and ACCUMULATIVE (a PERIODIC window or a COMPLETE_SNAPSHOT event describes a
    window, not the job; a STREAMING or SERVICE job's COMPLETE "should not be relied upon"): the
    same.
(d) a DROP lifecycle (the latest lifecycle change of the dataset in the batch): the dataset, in a
    System this definition owns whose cleanupMode is not NONE.

Removing an entity removes every flow that touches it. Guards stop the whole cleanup, drops
included: cleanup disabled, an empty batch, a failed upload, planned removals over the cap, removed
job entities over ``maxRemovalShare`` of those the definition holds, the catalog refusing the user
(403), a dry-run definition, a snapshot older than one already synced (SUPERSEDED: not even
uploaded).

How the events of a run combine (job type facet seed): ACCUMULATIVE runs (the default) are judged
whole, over every event of the run received so far; each COMPLETE_SNAPSHOT event stands alone. A
RENAME moves a dataset (with its flows) only in a System the definition owns (cleanupMode not
NONE) when the new name is not taken; otherwise the old one stays and the new one is added.

One sync per definition at a time: the lock is held from the upload to the cleanup's report; a
sync that finds it held by a live holder does not run (its batch stays pending); a holder that
died does not block.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase

# cleanupMode
CUTOFF = "CUTOFF"
DAYS = "DAYS"
NONE = "NONE"

# skippedReason codes of the report
CLEANUP_DISABLED = "CLEANUP_DISABLED"
EMPTY_BATCH = "EMPTY_BATCH"
UPLOAD_FAILED = "UPLOAD_FAILED"
REMOVAL_CAP_EXCEEDED = "REMOVAL_CAP_EXCEEDED"
REMOVAL_SHARE_EXCEEDED = "REMOVAL_SHARE_EXCEEDED"
CLEANUP_PERMISSION_DENIED = "CLEANUP_PERMISSION_DENIED"
DRY_RUN = "DRY_RUN"
SUPERSEDED = "SUPERSEDED"
GUARDS = frozenset(
    {
        CLEANUP_DISABLED,
        EMPTY_BATCH,
        UPLOAD_FAILED,
        REMOVAL_CAP_EXCEEDED,
        REMOVAL_SHARE_EXCEEDED,
        CLEANUP_PERMISSION_DENIED,
        DRY_RUN,
        SUPERSEDED,
    }
)

JobKey = tuple[str, str, str]  # (job System, namespace, name)
DatasetKey = tuple[str, str, str]  # (dataset System, namespace, name)
FlowKey = tuple[str, str, DatasetKey, DatasetKey]  # (job namespace, job name, source, target)
LinkKey = tuple[str, str, str, str]  # (parent namespace, parent name, child namespace, name)


# -- what the test gives the model: definitions and events as plain data ---------------------------


@dataclass(frozen=True)
class DefinitionSpec:
    name: str
    uuid: str
    snapshot: bool  # snapshotMode BATCH_SNAPSHOT (else ADDITIVE)
    replace_jobs: bool  # lineageReplacement JOB (else NONE)
    allowed: tuple[str, ...]  # allowedJobNamespaces (shell patterns)
    job_system: str  # openLineageSystem
    job_system_rules: tuple[tuple[str, str], ...] = ()  # jobSystems: (namespace pattern, System)
    dataset_rules: tuple[
        tuple[str, str, str], ...
    ] = ()  # datasetSystems: (namespace, System, mode)
    cleanup_enabled: bool = True
    max_removals: int = 500
    max_share: float = 0.5
    dry_run: bool = False

    def allows(self, namespace: str) -> bool:
        return any(fnmatchcase(namespace, p) for p in self.allowed)

    def job_system_of(self, namespace: str) -> str:
        for pattern, system in self.job_system_rules:
            if fnmatchcase(namespace, pattern):
                return system
        return self.job_system

    @property
    def job_systems(self) -> set[str]:
        return {self.job_system, *(s for _, s in self.job_system_rules)}

    def dataset_system_of(self, namespace: str) -> tuple[str, str]:
        """The System a dataset namespace is placed in, and the cleanupMode this definition's rule
        gives it (a namespace without a rule is its own System, never cleaned)."""
        for pattern, system, mode in self.dataset_rules:
            if fnmatchcase(namespace, pattern):
                return system, mode
        return namespace, NONE

    @property
    def sole_owner(self) -> bool:
        """CUTOFF is kept only with a single namespace: one allowedJobNamespaces pattern with no
        ``*``, ``?`` or ``[``."""
        return len(self.allowed) == 1 and not any(c in self.allowed[0] for c in "*?[")


@dataclass(frozen=True)
class Dataset:
    namespace: str
    name: str
    lifecycle: str | None = None  # DROP | RENAME
    previous: str | None = None  # RENAME: the previous name, in the same namespace


@dataclass(frozen=True)
class Event:
    kind: str  # run | job | dataset | invalid
    namespace: str = ""  # the job's (run and job events)
    name: str = ""
    run_id: str | None = None
    event_type: str | None = None  # START | RUNNING | COMPLETE | FAIL
    inputs: tuple[Dataset, ...] = ()
    outputs: tuple[Dataset, ...] = ()
    parent: tuple[str, str] | None = None  # the parent facet's job
    trigger: str = "EVENT_BASED"  # emissionPattern.eventTrigger
    content: str = "ACCUMULATIVE"  # emissionPattern.eventContentMode
    processing: str = "BATCH"  # jobType.processingType
    dataset: Dataset | None = None  # a DatasetEvent's
    time: int = 0  # seconds, for eventTime

    @property
    def job(self) -> tuple[str, str]:
        return (self.namespace, self.name)


# -- what the model keeps -----------------------------------------------------------------------


@dataclass
class Description:
    """What one upload of a batch sends, and what the batch says about scopes and lifecycles."""

    jobs: set[tuple[str, str]] = field(default_factory=set)  # described (run or job events)
    parents: set[tuple[str, str]] = field(default_factory=set)  # named by parent facets only
    datasets: set[DatasetKey] = field(default_factory=set)
    flows: set[FlowKey] = field(default_factory=set)
    links: set[LinkKey] = field(default_factory=set)
    systems: dict[str, str] = field(default_factory=dict)  # dataset System -> mode of the rule
    renames: list[tuple[DatasetKey, DatasetKey]] = field(default_factory=list)
    drops: set[DatasetKey] = field(default_factory=set)
    job_events: set[tuple[str, str]] = field(default_factory=set)  # (b)
    completed: set[tuple[str, str]] = field(default_factory=set)  # (c)

    @property
    def empty(self) -> bool:
        return not (self.jobs or self.parents or self.datasets)


@dataclass
class Upload:
    serial: int  # the cutoff; what this upload sends is touched at ``serial``
    run_id: str
    outcome: str  # uploaded | failed | superseded
    description: Description | None = None
    moved: list[tuple[DatasetKey, DatasetKey]] = field(default_factory=list)  # RENAMEs applied


@dataclass
class Batch:
    id: int
    definition: str
    posted: bool
    events: list[Event] = field(default_factory=list)  # accepted, in arrival order
    rejected: int = 0
    status: str = "pending"  # open | pending | done
    upload: Upload | None = None


@dataclass
class Removal:
    jobs: set[JobKey] = field(default_factory=set)
    datasets: set[DatasetKey] = field(default_factory=set)
    flows: set[FlowKey] = field(default_factory=set)
    links: set[LinkKey] = field(default_factory=set)
    calls: bool = False  # whether the cleanup has any call to make (none: nothing to refuse)
    direct_flows: int = 0  # flows removed for themselves (not because an end of theirs went)

    @property
    def total(self) -> int:
        return len(self.jobs) + len(self.datasets) + len(self.flows) + len(self.links)

    @property
    def entities(self) -> int:
        return len(self.jobs) + len(self.datasets)

    @property
    def all_flows(self) -> int:
        return len(self.flows) + len(self.links)

    @property
    def job_names(self) -> list[str]:
        return sorted(f"{ns}.{name}" for _, ns, name in self.jobs)


@dataclass
class Expectation:
    """What a cleanup must do: the guards that stop it (empty: it runs), what it removes, what its
    plan counts (None when no plan could be made), and whether the batch is then done. With no
    call to make, a dry-run definition may say DRY_RUN or nothing, a refused user 403 or
    nothing."""

    reasons: frozenset[str | None]  # one of them is reported (None: no skippedReason)
    removed: Removal
    planned: int | None
    done: bool


class Busy(Exception):
    """The definition's lock is held by another live sync."""


class ReferenceModel:
    def __init__(self, definitions: list[DefinitionSpec]) -> None:
        self.definitions = {d.name: d for d in definitions}
        self.jobs: dict[JobKey, int] = {}
        self.datasets: dict[DatasetKey, int] = {}
        self.flows: dict[FlowKey, int] = {}
        self.links: dict[LinkKey, int] = {}
        self.systems: dict[str, tuple[str, str]] = {}  # dataset System -> (owner uuid, mode)
        self.batches: dict[int, Batch] = {}
        self.locks: dict[str, str] = {}  # definition -> holder (run id)
        self.alive: set[str] = set()
        self.clock = 0
        self.refusing = False  # the catalog refuses the cleanup user (403)
        self.failing = False  # the catalog refuses every write of an upload

    # -- receiving ---------------------------------------------------------------------------

    def accepts(self, d: DefinitionSpec, e: Event) -> bool:
        if e.kind == "invalid":
            return False
        return e.kind == "dataset" or d.allows(e.namespace)

    def post(self, definition: str, batch_id: int, events: list[Event]) -> None:
        """A ``/lineage/batch`` post: one batch, stored whole."""
        d = self.definitions[definition]
        accepted = [e for e in events if self.accepts(d, e)]
        self.batches[batch_id] = Batch(
            batch_id, definition, True, accepted, len(events) - len(accepted)
        )

    def stream(self, definition: str, batch_id: int, events: list[Event]) -> None:
        """Single events, added to the definition's open stream batch."""
        d = self.definitions[definition]
        b = self.batches.setdefault(batch_id, Batch(batch_id, definition, False, status="open"))
        assert b.status == "open" and b.definition == definition
        for e in events:
            if self.accepts(d, e):
                b.events.append(e)
            else:
                b.rejected += 1

    def seal(self, definition: str) -> None:
        for b in self.batches.values():
            if b.definition == definition and b.status == "open":
                b.status = "pending"

    def pending(self, definition: str) -> list[int]:
        return sorted(
            b.id
            for b in self.batches.values()
            if b.definition == definition and b.status == "pending"
        )

    def snapshot(self, b: Batch) -> bool:
        """A batch stored whole as a snapshot: posted to a BATCH_SNAPSHOT definition, every event
        accepted, and at least one."""
        d = self.definitions[b.definition]
        return b.posted and d.snapshot and b.rejected == 0 and bool(b.events)

    # -- the lock ------------------------------------------------------------------------------

    def _lock(self, definition: str, run_id: str) -> None:
        holder = self.locks.get(definition)
        if holder is not None and holder != run_id and holder in self.alive:
            raise Busy(holder)
        self.locks[definition] = run_id
        self.alive.add(run_id)

    def die(self, run_id: str) -> None:
        """The run failed between upload and cleanup: it never reaches the cleanup."""
        self.alive.discard(run_id)

    # -- describing a batch ------------------------------------------------------------------

    def describe(self, d: DefinitionSpec, b: Batch) -> Description:
        out = Description()
        # lifecycle changes by dataset, in event time: the latest one says whether it is dropped
        changes: list[tuple[int, DatasetKey, str, DatasetKey | None]] = []

        def dataset(x: Dataset, time: int) -> DatasetKey:
            system, mode = d.dataset_system_of(x.namespace)
            owner, owner_mode = self.systems.get(system, (d.uuid, mode))
            if owner != d.uuid and owner_mode == CUTOFF:  # claimed: a System of its own
                system = f"{system} [{d.name}]"
            key = (system, x.namespace, x.name)
            out.systems.setdefault(system, mode)
            out.datasets.add(key)
            if x.lifecycle is not None:
                old = (system, x.namespace, x.previous) if x.previous is not None else None
                changes.append((time, key, x.lifecycle, old))
            return key

        def lineage(job: tuple[str, str], events: list[Event]) -> None:
            """One description of a job: inputs x outputs, and its parent."""
            ins = {dataset(x, e.time) for e in events for x in e.inputs}
            outs = {dataset(x, e.time) for e in events for x in e.outputs}
            out.flows |= {(*job, s, t) for s in ins for t in outs if s != t}
            for parent in {e.parent for e in events if e.parent is not None}:
                if parent == job:
                    continue
                out.links.add((*parent, *job))
                if d.allows(parent[0]):
                    out.parents.add(parent)

        runs: dict[tuple[str, str, str], list[Event]] = {}
        for e in b.events:
            if e.kind == "dataset":
                assert e.dataset is not None
                dataset(e.dataset, e.time)
            elif e.kind == "job":
                out.jobs.add(e.job)
                out.job_events.add(e.job)
                lineage(e.job, [e])
            else:
                assert e.run_id is not None
                out.jobs.add(e.job)
                runs.setdefault((e.run_id, *e.job), []).append(e)
        for (run_id, *job_parts), here in runs.items():
            job = (job_parts[0], job_parts[1])
            if here[0].content == "COMPLETE_SNAPSHOT":
                for e in here:  # each event is complete for its window, processed alone
                    lineage(job, [e])
                continue
            # accumulative: the whole run, every event received so far (this batch and earlier)
            whole = [
                e
                for other in self.batches.values()
                if other.definition == d.name and other.id <= b.id
                for e in other.events
                if e.kind == "run" and e.run_id == run_id and e.job == job
            ]
            lineage(job, whole)
            first = here[0]
            if (first.trigger, first.processing) == ("EVENT_BASED", "BATCH") and any(
                e.event_type == "COMPLETE" for e in here
            ):
                out.completed.add(job)
        out.parents -= out.jobs
        latest: dict[DatasetKey, str] = {}
        for _, key, change, old in sorted(changes, key=lambda c: c[0]):
            latest[key] = change
            if change == "RENAME" and old is not None:
                out.renames.append((old, key))
        out.drops = {key for key, change in latest.items() if change == "DROP"}
        return out

    # -- upload ---------------------------------------------------------------------------------

    def upload(self, definition: str, batch_id: int, run_id: str) -> str:
        """``uploaded``, ``failed`` or ``superseded``; raises ``Busy``."""
        d = self.definitions[definition]
        b = self.batches[batch_id]
        self._lock(definition, run_id)
        self.clock += 1
        if self.snapshot(b) and any(
            o.definition == definition and o.id > b.id and self.snapshot(o) and o.status == "done"
            for o in self.batches.values()
        ):
            b.upload = Upload(self.clock, run_id, "superseded")
            return "superseded"
        desc = self.describe(d, b)
        if self.failing and not desc.empty:
            b.upload = Upload(self.clock, run_id, "failed", desc)
            return "failed"
        b.upload = Upload(self.clock, run_id, "uploaded", desc)
        now = self.clock
        for system, mode in desc.systems.items():
            self.systems.setdefault(system, (d.uuid, mode))
        for old, new in desc.renames:
            if self._movable(d, old, new):
                self._move(old, new)
                b.upload.moved.append((old, new))
        for ns, name in desc.jobs | desc.parents:
            self.jobs[(d.job_system_of(ns), ns, name)] = now
        for key in desc.datasets:
            self.datasets[key] = now
        for key in desc.flows:
            self.flows[key] = now
        for key in desc.links:
            self.links[key] = now
        return "uploaded"

    def _owned(self, d: DefinitionSpec, system: str) -> tuple[bool, str]:
        owner, mode = self.systems.get(system, ("", NONE))
        return owner == d.uuid, mode

    def _movable(self, d: DefinitionSpec, old: DatasetKey, new: DatasetKey) -> bool:
        owned, mode = self._owned(d, old[0])
        return (
            owned
            and mode != NONE
            and old in self.datasets
            and new not in self.datasets
            and old != new
        )

    def _move(self, old: DatasetKey, new: DatasetKey) -> None:
        self.datasets[new] = self.datasets.pop(old)
        for key in [k for k in self.flows if old in (k[2], k[3])]:
            touched = self.flows.pop(key)
            s, t = (new if key[2] == old else key[2]), (new if key[3] == old else key[3])
            self.flows[(key[0], key[1], s, t)] = touched

    # -- cleanup -------------------------------------------------------------------------------

    def plan(self, d: DefinitionSpec, b: Batch) -> Removal:
        """What the cleanup of ``b`` removes when no guard stops it."""
        assert b.upload is not None and b.upload.description is not None
        cut, desc = b.upload.serial, b.upload.description
        out = Removal()
        if self.snapshot(b):  # (a)
            scopes = {ns for ns, _ in desc.jobs}
            out.calls = bool(scopes)
            out.flows |= {k for k, t in self.flows.items() if k[0] in scopes and t < cut}
            out.links |= {k for k, t in self.links.items() if k[2] in scopes and t < cut}
            out.jobs |= {
                k
                for k, t in self.jobs.items()
                if k[0] in d.job_systems and k[1] in scopes and t < cut
            }
            if d.sole_owner and scopes:  # a dataset-only batch describes no job of the owner
                for system, policy in self.systems.items():
                    if policy == (d.uuid, CUTOFF):
                        out.calls = True
                        out.datasets |= {
                            k for k, t in self.datasets.items() if k[0] == system and t < cut
                        }
        replaced = desc.job_events | (desc.completed if d.replace_jobs else set())
        out.calls |= bool(replaced)
        for job in replaced:  # (b), (c)
            out.flows |= {k for k, t in self.flows.items() if k[:2] == job and t < cut}
            out.links |= {k for k, t in self.links.items() if k[2:] == job and t < cut}
        for key in desc.drops:  # (d)
            owned, mode = self._owned(d, key[0])
            if owned and mode != NONE:
                out.calls = True
                if key in self.datasets:
                    out.datasets.add(key)
        out.direct_flows = len(out.flows) + len(out.links)
        # an entity goes with every flow that touches it
        gone_jobs = {k[1:] for k in out.jobs}
        out.flows |= {k for k in self.flows if k[2] in out.datasets or k[3] in out.datasets}
        out.links |= {k for k in self.links if k[:2] in gone_jobs or k[2:] in gone_jobs}
        return out

    def held_jobs(self, d: DefinitionSpec) -> int:
        return sum(1 for k in self.jobs if k[0] in d.job_systems and d.allows(k[1]))

    def held_datasets(self, d: DefinitionSpec) -> int:
        return sum(1 for k in self.datasets if self._owned(d, k[0])[0])

    def held_flows(self, d: DefinitionSpec) -> int:
        return sum(1 for k in self.flows if d.allows(k[0])) + sum(
            1 for k in self.links if d.allows(k[2])
        )

    def share_exceeded(self, d: DefinitionSpec, plan: Removal, share: float) -> bool:
        """Each kind against what the definition holds of it: its jobs, the datasets of the
        Systems it created, the flows of its namespaces. Flows are judged only when no job goes
        (a job's flows go with it and the job share judged that)."""
        judged = [(len(plan.jobs), self.held_jobs(d)), (len(plan.datasets), self.held_datasets(d))]
        if not plan.jobs:
            judged.append((plan.direct_flows, self.held_flows(d)))
        return any(held and removing / held > share for removing, held in judged)

    def cleanup(
        self,
        definition: str,
        batch_id: int,
        run_id: str,
        *,
        max_removals: int | None = None,
        max_share: float | None = None,
    ) -> Expectation:
        """The cleanup of a batch on its recorded upload (by the run that uploaded it, or a
        person re-running it with raised limits); raises ``Busy``."""
        d = self.definitions[definition]
        b = self.batches[batch_id]
        self._lock(definition, run_id)
        try:
            return self._cleanup(d, b, max_removals, max_share)
        finally:
            del self.locks[definition]  # the report is recorded: the run is over
            self.alive.discard(run_id)

    def _cleanup(
        self, d: DefinitionSpec, b: Batch, max_removals: int | None, max_share: float | None
    ) -> Expectation:
        nothing = Removal()
        up = b.upload
        assert up is not None
        if up.outcome == "superseded":
            b.status = "done"
            return Expectation(frozenset({SUPERSEDED}), nothing, None, True)
        if up.outcome == "failed":
            b.status = "pending"  # the events stay for the next run
            return Expectation(frozenset({UPLOAD_FAILED}), nothing, None, False)
        b.status = "done"
        if self.snapshot(b) and any(
            o.definition == d.name and o.id > b.id and self.snapshot(o) and o.status == "done"
            for o in self.batches.values()
        ):
            return Expectation(frozenset({SUPERSEDED}), nothing, None, True)
        reasons: set[str] = set()
        if not d.cleanup_enabled:
            reasons.add(CLEANUP_DISABLED)
        if not b.events:
            reasons.add(EMPTY_BATCH)
        if reasons:
            return Expectation(frozenset(reasons), nothing, None, True)
        plan = self.plan(d, b)
        if not plan.calls:  # nothing to call: whether it says so or not, nothing is removed
            quiet = {None, DRY_RUN if d.dry_run else None}
            quiet.add(CLEANUP_PERMISSION_DENIED if self.refusing else None)
            return Expectation(frozenset(quiet if len(quiet) > 1 else ()), plan, 0, True)
        if self.refusing:
            return Expectation(frozenset({CLEANUP_PERMISSION_DENIED}), nothing, None, True)
        cap = d.max_removals if max_removals is None else max_removals
        share = d.max_share if max_share is None else max_share
        if plan.total > cap:
            reasons.add(REMOVAL_CAP_EXCEEDED)
        if self.share_exceeded(d, plan, share):
            reasons.add(REMOVAL_SHARE_EXCEEDED)
        if d.dry_run:
            reasons.add(DRY_RUN)
        if reasons:
            return Expectation(frozenset(reasons), nothing, plan.total, True)
        for key in plan.jobs:
            del self.jobs[key]
        for key in plan.datasets:
            del self.datasets[key]
        for key in plan.flows:
            del self.flows[key]
        for key in plan.links:
            del self.links[key]
        return Expectation(frozenset(), plan, plan.total, True)
