"""A reference model of what the catalog must hold after each sync, from the documents alone.

Written from the two pages a user reads about deleting, ``docs/deletion-rules.md`` (who owns
what, what removes what, one sync at a time, snapshot order, retention and runs, where the
documents seem to disagree) and ``docs/configuration.md`` (what each setting means), and from
nothing in ``ol_dagster``: no import, no copied rule, no scope string. Every rule below is a
sentence of those pages; where they are silent, the reading chosen is said where it is used.

**Ownership is data.** An owner is an opaque tuple ``(job namespace, job name, kind)``, ``kind``
being ``data`` (a job's data flows) or ``orchestration`` (the link from its parent, owned by the
child). Names are opaque values compared by exact equality (Python's ``==`` on ``str``: case,
Unicode normal form and every character count: ``etl`` is not ``ETL``, ``étl`` in NFC is not
``étl`` in NFD, ``etl|x`` is a name, not a separator). Namespace patterns are shell patterns,
case-sensitive (``fnmatchcase``, as the settings' documentation says).

The catalog is three sets of objects, each with the serial number of the last upload that sent it
("Every object the job uploads gets its last-update time set to the time of the upload"):

* job entities ``(job System, namespace, name)``;
* dataset entities ``(dataset System, namespace, name)``;
* flows ``(owner, source, target)``: a data flow goes from a dataset entity key to a dataset entity
  key, owned by ``(ns, job, DATA)``; an orchestration flow goes from the parent job ``(ns, name)``
  to the child job ``(ns, name)``, owned by ``(child ns, child name, ORCHESTRATION)``.

Serial numbers stand for the catalog clock: an upload reads its cutoff, then everything it sends is
touched *after* it, so "last updated before the cutoff" is ``touched < serial``. The test never lets
a day pass, so the day-based cleanup removes nothing.

**Who owns what** (deletion rules):

* a definition *admits* a namespace its ``allowedJobNamespaces`` or ``sharedJobNamespaces`` match;
  a namespace a shared pattern matches is *shared*: "nobody runs a cutoff over it: its flows and
  jobs go by the day-based cleanup only" (no snapshot cutoff, no job replaced there); the others
  it admits it admits *alone* (settings that let two definitions on one catalog admit a common
  namespace do not load; the generators make only settings that load);
* a dataset System belongs to the definition that created it (``openLineageOwner``); a CUTOFF
  System keeps its cutoff only for that definition, and only when it has a single namespace (one
  ``allowedJobNamespaces`` pattern with no ``*``, ``?`` or ``[``, and no shared one); another
  definition's datasets its rules map to a CUTOFF System someone else created go to
  ``<System> [<definition>]``, a System of its own;
* a cutoff covers only the namespaces in which the batch describes at least one job; a batch of
  dataset events alone removes nothing by cutoff, in job namespaces or dataset Systems.

**What removes anything** (in the same run):

(a) a ``/lineage/batch`` post to a BATCH_SNAPSHOT definition with every event accepted (and at
    least one): its scopes are the namespaces of the jobs the batch's events describe (a job named
    only in another event's parent facet does not count) that the definition admits alone. There:
    every flow (both kinds) whose owner's namespace is a scope not touched by this upload, every
    job entity of the definition's job Systems not touched; and, when the batch describes at least
    one job and the definition has a single namespace, every dataset entity not touched in each
    CUTOFF System it created.
(b) a JobEvent, of a job in a namespace the definition admits alone: the flows (both kinds) whose
    owner is that job, not touched by this upload.
(c) with lineageReplacement JOB, a run that completes in the batch, of a BATCH job whose events are
    EVENT_BASED and ACCUMULATIVE (a PERIODIC window or a COMPLETE_SNAPSHOT event describes a
    window, not the job; a STREAMING or SERVICE job's COMPLETE "should not be relied upon"), in a
    namespace admitted alone: the same.
(d) a DROP lifecycle (the latest lifecycle change of the dataset in the batch): the dataset, in a
    System this definition created whose cleanupMode is not NONE.
(e) a producer inventory the definition reads (``inventories``): the parent's children the list
    no longer names, in a namespace it admits alone (``model.inventory`` has the rules).

Removing an entity removes every flow that touches it. Guards stop the whole cleanup, drops
included: cleanup disabled, an empty batch, a failed upload, planned removals over the cap, any
kind over ``maxRemovalShare`` (jobs and datasets always; flows, those the batch no longer describes,
only when no job goes; fields, which these events never carry, only when no job and no dataset
goes; what goes because an end of it went is judged with that end), the catalog refusing the user
(403), a dry-run definition, a snapshot older than one already synced (SUPERSEDED: not even
uploaded). What a definition *holds*, the share's denominator: the job entities of its job Systems
in namespaces it admits, the flows whose owner's namespace it admits, the dataset entities of the
Systems it created.

How the events of a run combine (job type facet seed): ACCUMULATIVE runs (the default) are judged
whole, over every event of the run received so far; each COMPLETE_SNAPSHOT event stands alone. A
RENAME moves a dataset (with its flows) only in a System the definition owns (cleanupMode not NONE)
when the new name is not taken; otherwise the old one stays and the new one is added.

An event is refused (so a post holding it is no snapshot) when it is not valid, when its job's
namespace is not admitted, or when a namespace or name it carries (its job, each input and output,
a DatasetEvent's dataset, the parent job, a ``previousIdentifier``) is longer than
``limits.maxNameLength`` characters.

One sync per definition at a time: the lock is held from the upload to the cleanup's report; a sync
that finds it held by a live holder does not run (its batch stays pending); a holder that died
does not block.

**Snapshot order.** "A snapshot older than one already synced is ``SUPERSEDED``: neither uploaded
nor cleaned". Two whole snapshots of a definition compare by (carries an ``OL-Snapshot-Sequence``,
the sequence, arrival, the order stored): a numbered one is newer than any unnumbered one, two
numbered ones go by their numbers, otherwise (none, or equal numbers) the later post is newer.
"Already synced" is read as it is written: a snapshot synced once stays the newest the definition
has synced, even after retention removed its batch. "Only whole snapshots are ordered so": a post
that is not a whole snapshot neither supersedes nor is superseded.

**Retention** (``retention.keepDays``, "Retention and runs"): a synced batch past ``keepDays`` is
removed from the event store, unless it holds an event of a run that has not ended (no
``COMPLETE``, ``FAIL`` or ``ABORT`` stored for that run id in the definition's batches), or of a run
another kept batch holds (pending, open, synced within ``keepDays``); events without a run never
keep a batch; the definition's newest synced whole snapshot is kept whatever its age (so that it
still supersedes an older one synced later). Syncing a batch again (a person re-running its
cleanup) makes it synced now. A batch id is never given twice, even after retention removed
every batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from ol_dagster_tests.model import inventory

# cleanupMode
CUTOFF = "CUTOFF"
DAYS = "DAYS"
NONE = "NONE"

# the kinds of owner a flow has
DATA = "data"
ORCHESTRATION = "orchestration"

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
TERMINAL = ("COMPLETE", "FAIL", "ABORT")  # a run has ended (retention)
GLOB_CHARACTERS = "*?["  # what makes a pattern more than one namespace (deletion rules)
MAX_NAME_LENGTH = 2048  # limits.maxNameLength's default

Job = tuple[str, str]  # (namespace, name)
Owner = tuple[str, str, str]  # (job namespace, job name, DATA | ORCHESTRATION)
JobKey = tuple[str, str, str]  # (job System, namespace, name)
DatasetKey = tuple[str, str, str]  # (dataset System, namespace, name)
# (owner, source, target): dataset keys for a data flow, (parent job, child job) for orchestration
FlowKey = tuple[Owner, Any, Any]


def data_flow(job: Job, source: DatasetKey, target: DatasetKey) -> FlowKey:
    return ((job[0], job[1], DATA), source, target)


def link(parent: Job, child: Job) -> FlowKey:
    return ((child[0], child[1], ORCHESTRATION), parent, child)


# -- what the test gives the model: definitions and events as plain data ---------------------------


@dataclass(frozen=True)
class DefinitionSpec:
    name: str
    uuid: str
    snapshot: bool  # snapshotMode BATCH_SNAPSHOT (else ADDITIVE)
    replace_jobs: bool  # lineageReplacement JOB (else NONE)
    allowed: tuple[str, ...]  # allowedJobNamespaces (shell patterns, case-sensitive)
    job_system: str  # openLineageSystem
    job_system_rules: tuple[tuple[str, str], ...] = ()  # jobSystems: (namespace pattern, System)
    dataset_rules: tuple[
        tuple[str, str, str], ...
    ] = ()  # datasetSystems: (namespace pattern, System, mode)
    cleanup_enabled: bool = True
    max_removals: int = 500
    max_share: float = 0.5
    dry_run: bool = False
    shared: tuple[str, ...] = ()  # sharedJobNamespaces
    max_name_length: int = MAX_NAME_LENGTH
    inventories: tuple[str, ...] = ()  # inventory readers turned on (``model.inventory``)

    @property
    def patterns(self) -> tuple[str, ...]:
        return (*self.allowed, *self.shared)

    def admits(self, namespace: str) -> bool:
        """Events of this job namespace are accepted: an allowed or a shared pattern matches."""
        return any(fnmatchcase(namespace, p) for p in self.patterns)

    def is_shared(self, namespace: str) -> bool:
        return any(fnmatchcase(namespace, p) for p in self.shared)

    def admits_alone(self, namespace: str) -> bool:
        """The namespaces a cutoff (a snapshot's, a replaced job's) may cover."""
        return self.admits(namespace) and not self.is_shared(namespace)

    def job_system_of(self, namespace: str) -> str:
        for pattern, system in self.job_system_rules:
            if fnmatchcase(namespace, pattern):
                return system
        return self.job_system

    @property
    def job_systems(self) -> set[str]:
        return {self.job_system, *(s for _, s in self.job_system_rules)}

    def dataset_system_of(self, namespace: str) -> tuple[str, str]:
        """The System a dataset namespace is placed in by this definition's rules (first match),
        and the cleanupMode of the rule. A namespace no rule matches is placed in a System of its
        own, named by the namespace, never cleaned (NONE: "the default")."""
        for pattern, system, mode in self.dataset_rules:
            if fnmatchcase(namespace, pattern):
                return system, mode
        return namespace, NONE

    @property
    def single_namespace(self) -> bool:
        """One ``allowedJobNamespaces`` pattern with no ``*``, ``?`` or ``[``, and no shared one:
        the only definition that keeps a CUTOFF System's cutoff."""
        return (
            len(self.allowed) == 1
            and not any(c in self.allowed[0] for c in GLOB_CHARACTERS)
            and not self.shared
        )

    # kept for the written tests that name it so
    def allows(self, namespace: str) -> bool:
        return self.admits(namespace)


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
    # an Airflow DAG run's START: its task ids (job facet airflow.tasks), run type, run id
    tasks: tuple[str, ...] | None = None
    run_type: str | None = "manual"
    dag_run: str = "manual__1"

    @property
    def job(self) -> Job:
        return (self.namespace, self.name)

    def names(self) -> list[str]:
        """Every namespace and name a catalog keys objects by (``limits.maxNameLength``)."""
        out: list[str] = []
        if self.kind in ("run", "job"):
            out += [self.namespace, self.name]
        if self.parent is not None:
            out += list(self.parent)
        for d in (*self.inputs, *self.outputs, *([self.dataset] if self.dataset else [])):
            out += [d.namespace, d.name]
            if d.previous is not None:
                out.append(d.previous)
        return out


def refused_at_load(
    universe: tuple[DefinitionSpec, ...], namespaces: tuple[str, ...]
) -> tuple[str, str, str] | None:
    """One definition per namespace per catalog: two definitions on one catalog that both admit
    a namespace (of ``namespaces``, those a test knows) which not both declare in
    ``sharedJobNamespaces`` are refused at start-up; the two names and the namespace, or None."""
    for i, a in enumerate(universe):
        for b in universe[:i]:
            for ns in namespaces:
                if a.admits(ns) and b.admits(ns) and not (a.is_shared(ns) and b.is_shared(ns)):
                    return b.name, a.name, ns
    return None


# -- what the model keeps -----------------------------------------------------------------------


@dataclass
class Description:
    """What one upload of a batch sends, and what the batch says about scopes and lifecycles."""

    jobs: set[Job] = field(default_factory=set)  # described (run or job events)
    parents: set[Job] = field(default_factory=set)  # named by parent facets only, admitted
    datasets: set[DatasetKey] = field(default_factory=set)
    flows: set[FlowKey] = field(default_factory=set)
    systems: dict[str, str] = field(default_factory=dict)  # dataset System -> mode of the rule
    renames: list[tuple[DatasetKey, DatasetKey]] = field(default_factory=list)
    drops: set[DatasetKey] = field(default_factory=set)
    job_events: set[Job] = field(default_factory=set)  # (b)
    completed: set[Job] = field(default_factory=set)  # (c)
    inventories: dict[Job, frozenset[str]] = field(default_factory=dict)  # parent -> children

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
    sequence: int | None = None  # the post's OL-Snapshot-Sequence
    synced: int = 0  # when it was last synced (the model's count of syncs), 0: never

    @property
    def runs(self) -> set[str]:
        """The run ids its events carry (retention follows them)."""
        return {e.run_id for e in self.events if e.kind == "run" and e.run_id is not None}

    @property
    def order(self) -> tuple[bool, int, int]:
        """Its place among its definition's snapshots, higher is newer: (numbered, number,
        arrival); posts arrive in id order, and ``id`` also breaks a tie."""
        return (self.sequence is not None, self.sequence or 0, self.id)


@dataclass
class Removal:
    jobs: set[JobKey] = field(default_factory=set)
    datasets: set[DatasetKey] = field(default_factory=set)
    flows: set[FlowKey] = field(default_factory=set)
    calls: bool = False  # whether the cleanup has any call to make (none: nothing to refuse)
    undescribed: int = 0  # flows removed for themselves, not because an end of theirs went

    @property
    def total(self) -> int:
        return len(self.jobs) + len(self.datasets) + len(self.flows)

    @property
    def entities(self) -> int:
        return len(self.jobs) + len(self.datasets)

    @property
    def all_flows(self) -> int:
        return len(self.flows)

    @property
    def data_flows(self) -> set[FlowKey]:
        return {f for f in self.flows if f[0][2] == DATA}

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
        self.systems: dict[str, tuple[str, str]] = {}  # dataset System -> (owner uuid, mode)
        self.batches: dict[int, Batch] = {}
        self.locks: dict[str, str] = {}  # definition -> holder (run id)
        self.alive: set[str] = set()
        self.clock = 0
        self.refusing = False  # the catalog refuses the cleanup user (403)
        self.failing = False  # the catalog refuses every write of an upload
        self.syncs = 0  # syncs so far: a batch's ``synced`` is the count at its last one
        self.newest: dict[str, tuple[bool, int, int]] = {}  # definition -> newest synced snapshot
        self.given: set[int] = set()  # every batch id given, removed batches' too

    # -- receiving ---------------------------------------------------------------------------

    def accepts(self, d: DefinitionSpec, e: Event) -> bool:
        if e.kind == "invalid":
            return False
        if any(len(n) > d.max_name_length for n in e.names()):
            return False
        return e.kind == "dataset" or d.admits(e.namespace)

    def _new_id(self, batch_id: int) -> None:
        assert batch_id not in self.given, f"batch id {batch_id} given twice"
        self.given.add(batch_id)

    def post(
        self, definition: str, batch_id: int, events: list[Event], sequence: int | None = None
    ) -> None:
        """A ``/lineage/batch`` post, with its ``OL-Snapshot-Sequence``: one batch, stored whole."""
        d = self.definitions[definition]
        accepted = [e for e in events if self.accepts(d, e)]
        self._new_id(batch_id)
        self.batches[batch_id] = Batch(
            batch_id, definition, True, accepted, len(events) - len(accepted), sequence=sequence
        )

    def stream(self, definition: str, batch_id: int, events: list[Event]) -> None:
        """Single events, added to the definition's open stream batch."""
        d = self.definitions[definition]
        if batch_id not in self.batches:
            self._new_id(batch_id)
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

    def place(self, d: DefinitionSpec, namespace: str) -> tuple[str, str]:
        """The System this definition's dataset of ``namespace`` lands in, and its rule's mode:
        the rule's System, unless another definition created it as CUTOFF (then
        ``<System> [<definition>]``, a System of the definition's own)."""
        system, mode = d.dataset_system_of(namespace)
        owner, owner_mode = self.systems.get(system, (d.uuid, mode))
        if owner != d.uuid and owner_mode == CUTOFF:
            system = f"{system} [{d.name}]"
        return system, mode

    def describe(self, d: DefinitionSpec, b: Batch) -> Description:
        out = Description()
        # lifecycle changes by dataset, in event time: the latest one says whether it is dropped
        changes: list[tuple[int, DatasetKey, str, DatasetKey | None]] = []

        def dataset(x: Dataset, time: int) -> DatasetKey:
            system, mode = self.place(d, x.namespace)
            key = (system, x.namespace, x.name)
            out.systems.setdefault(system, mode)
            out.datasets.add(key)
            if x.lifecycle is not None:
                old = (system, x.namespace, x.previous) if x.previous is not None else None
                changes.append((time, key, x.lifecycle, old))
            return key

        def lineage(job: Job, events: list[Event]) -> None:
            """One description of a job: inputs x outputs, and its parent."""
            ins = {dataset(x, e.time) for e in events for x in e.inputs}
            outs = {dataset(x, e.time) for e in events for x in e.outputs}
            out.flows |= {data_flow(job, s, t) for s in ins for t in outs if s != t}
            for parent in {e.parent for e in events if e.parent is not None}:
                if parent == job:
                    continue
                out.flows.add(link(parent, job))
                # a parent in a namespace the definition does not admit is never created in
                # its job System (its namespace is another producer's)
                if d.admits(parent[0]):
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
        out.inventories = inventory.inventories(b.events, d.inventories, d.admits_alone)
        return out

    # -- upload ---------------------------------------------------------------------------------

    def _superseded(self, b: Batch) -> bool:
        """A whole snapshot older than one the definition already synced."""
        newest = self.newest.get(b.definition)
        return self.snapshot(b) and newest is not None and newest > b.order

    def upload(self, definition: str, batch_id: int, run_id: str) -> str:
        """``uploaded``, ``failed`` or ``superseded``; raises ``Busy``."""
        d = self.definitions[definition]
        b = self.batches[batch_id]
        self._lock(definition, run_id)
        self.clock += 1
        if self._superseded(b):
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
        return "uploaded"

    def owns(self, d: DefinitionSpec, system: str) -> bool:
        """A System this definition created (a System nobody created is nobody's)."""
        return self.systems.get(system, ("", NONE))[0] == d.uuid

    def cleanable(self, d: DefinitionSpec, system: str) -> bool:
        """A System the definition may drop, rename or cut in: its own, cleanupMode not NONE."""
        return self.owns(d, system) and self.systems[system][1] != NONE

    def _movable(self, d: DefinitionSpec, old: DatasetKey, new: DatasetKey) -> bool:
        return (
            self.cleanable(d, old[0])
            and old in self.datasets
            and new not in self.datasets
            and old != new
        )

    def _move(self, old: DatasetKey, new: DatasetKey) -> None:
        self.datasets[new] = self.datasets.pop(old)
        for key in [k for k in self.flows if k[0][2] == DATA and old in (k[1], k[2])]:
            touched = self.flows.pop(key)
            s, t = (new if key[1] == old else key[1]), (new if key[2] == old else key[2])
            self.flows[(key[0], s, t)] = touched

    # -- cleanup -------------------------------------------------------------------------------

    def plan(self, d: DefinitionSpec, b: Batch) -> Removal:
        """What the cleanup of ``b`` removes when no guard stops it."""
        assert b.upload is not None and b.upload.description is not None
        cut, desc = b.upload.serial, b.upload.description
        out = Removal()
        stale = {k for k, t in self.flows.items() if t < cut}
        if self.snapshot(b):  # (a)
            scopes = {ns for ns, _ in desc.jobs if d.admits_alone(ns)}
            out.calls = bool(scopes)
            out.flows |= {k for k in stale if k[0][0] in scopes}
            out.jobs |= {
                k
                for k, t in self.jobs.items()
                if k[0] in d.job_systems and k[1] in scopes and t < cut
            }
            if desc.jobs and d.single_namespace:
                for system, (owner, mode) in self.systems.items():
                    if owner == d.uuid and mode == CUTOFF:
                        out.calls = True
                        out.datasets |= {
                            k for k, t in self.datasets.items() if k[0] == system and t < cut
                        }
        replaced = desc.job_events | (desc.completed if d.replace_jobs else set())
        replaced = {job for job in replaced if d.admits_alone(job[0])}
        out.calls |= bool(replaced)
        out.flows |= {k for k in stale if k[0][:2] in replaced}  # (b), (c)
        out.undescribed = len(out.flows)
        links = [(k[1], k[2]) for k in self.flows if k[0][2] == ORCHESTRATION]
        for ns, name in inventory.retired(desc.inventories, links, d.admits_alone):  # (e)
            out.calls = True
            key = (d.job_system_of(ns), ns, name)
            if self.jobs.get(key, cut) < cut:
                out.jobs.add(key)
            out.flows |= {k for k in stale if k[0][:2] == (ns, name)}
        for key in desc.drops:  # (d)
            if self.cleanable(d, key[0]):
                out.calls = True
                if key in self.datasets:
                    out.datasets.add(key)
        # an entity goes with every flow that touches it
        gone_jobs = {k[1:] for k in out.jobs}
        for key in self.flows:
            _, source, target = key
            ends = gone_jobs if key[0][2] == ORCHESTRATION else out.datasets
            if source in ends or target in ends:
                out.flows.add(key)
        return out

    def held(self, d: DefinitionSpec) -> dict[str, int]:
        """What the definition holds, per kind: the jobs and flows of the namespaces it admits,
        the datasets of the Systems it created."""
        return {
            "jobs": sum(1 for k in self.jobs if k[0] in d.job_systems and d.admits(k[1])),
            "datasets": sum(1 for k in self.datasets if self.owns(d, k[0])),
            "flows": sum(1 for k in self.flows if d.admits(k[0][0])),
        }

    def share_exceeded(self, d: DefinitionSpec, plan: Removal, share: float) -> bool:
        """Each kind against what the definition holds of it, each removed object judged once,
        by the kind whose rule removes it: flows by those the batch no longer describes, and only
        when no job goes (a removed job's or dataset's flows go with it: its own share judged
        that)."""
        held = self.held(d)
        judged = [(len(plan.jobs), held["jobs"]), (len(plan.datasets), held["datasets"])]
        if not plan.jobs:
            judged.append((plan.undescribed, held["flows"]))
        return any(h and removing / h > share for removing, h in judged)

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
            if b.status == "done":
                self._synced(b)

    def _synced(self, b: Batch) -> None:
        self.syncs += 1
        b.synced = self.syncs
        if self.snapshot(b):
            self.newest[b.definition] = max(self.newest.get(b.definition, b.order), b.order)

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
        if self._superseded(b):
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
        return Expectation(frozenset(), plan, plan.total, True)

    # -- retention -------------------------------------------------------------------------------

    def purge(self, definition: str, synced_by: int | None = None) -> list[int]:
        """``retention.keepDays`` passed for the batches synced by the ``synced_by``-th sync (all
        synced ones: None): the ids of the batches removed, in order. A batch holding an event
        of a run not ended stays, and so does one holding an event of a run a kept batch holds:
        a run's batches go together, once it ended; the newest synced whole snapshot stays."""
        mine = {i: b for i, b in self.batches.items() if b.definition == definition}
        snapshots = [b for b in mine.values() if b.status == "done" and self.snapshot(b)]
        newest = max(snapshots, key=lambda b: b.order).id if snapshots else None
        past = {
            i
            for i, b in mine.items()
            if b.status == "done" and (synced_by is None or b.synced <= synced_by) and i != newest
        }
        ended = {
            e.run_id
            for b in mine.values()
            for e in b.events
            if e.kind == "run" and e.event_type in TERMINAL
        }
        kept = {i for i, b in mine.items() if i not in past or b.runs - ended}
        while True:
            held = set().union(*(mine[i].runs for i in kept))
            more = {i for i in past - kept if mine[i].runs & held}
            if not more:
                break
            kept |= more
        gone = sorted(past - kept)
        for i in gone:
            del self.batches[i]
        return gone
