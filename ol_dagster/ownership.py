"""Who owns what a sync may remove: every ownership and cutoff decision, made in one place.

Deleting is the most dangerous thing a sync does, and a wrong deletion comes from a wrong answer to
one of a few questions: which job namespaces does this batch speak for, which of them are this
definition's alone, which dataset Systems are its own, which jobs did an event describe whole. They
are answered here, from the settings and from what the catalog records about its Systems, and the
answers are one immutable ``Verdict``: the cleanup turns it into calls (``sync.cleanup``), the
report shows it, the catalogs only execute it. Ownership is data compared by exact equality (a
definition's uuid on a System, a namespace admitted by the definition's patterns), never a string
prefix.

The rules (docs/deletion-rules.md):

* A namespace belongs to one definition per catalog (settings refuse overlaps at load); a namespace
  declared in ``sharedJobNamespaces`` is written by several, so nobody runs a cutoff over it: the
  day-based cleanup only.
* A snapshot's cutoff covers the namespaces in which the batch describes at least one job; a batch
  that describes no job (dataset events only) removes nothing by cutoff.
* A producer inventory (``lineage.inventories``: a parent's event naming all its children) retires
  the parent's children it no longer names, only when the definition turned its reader on, the
  list is whole (never a partial run), and only in a namespace the definition alone writes: the
  newest whole list of each parent counts.
* A dataset System belongs to the definition that created it (``openLineageOwner``). Its CUTOFF is
  kept only when the definition has a single namespace (one literal pattern, nothing shared) and
  the batch describes one of its jobs; another definition's datasets never land in it (they go to
  ``<System> [<definition>]``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ol_dagster.lineage.inventories import Inventory
from ol_dagster.openlineage.envelope import namespace_allowed
from ol_dagster.sync_definition import CleanupMode, LineageReplacement, SnapshotMode, SyncDefinition

NodeKey = tuple[str, str]

CUTOFF = "CUTOFF"
DAYS = "DAYS"

# why a part of a batch gets no cutoff, as the report's ``ownership.skipped`` says
SHARED_NAMESPACE = "SHARED_NAMESPACE"  # declared in sharedJobNamespaces: days only
NOT_ADMITTED = "NOT_ADMITTED"  # a namespace the definition's patterns do not admit
OTHER_OWNER = "OTHER_OWNER"  # a System another definition created
NO_JOB_DESCRIBED = "NO_JOB_DESCRIBED"  # the batch describes no job of the definition
NOT_CLEANED = "NOT_CLEANED"  # cleanupMode NONE
PARTIAL_RUN = "PARTIAL_RUN"  # an inventory of a run that is not whole: retires nothing
OLDER_INVENTORY = "OLDER_INVENTORY"  # a newer whole list of the same parent counts instead

# why a job is retired
NOT_IN_INVENTORY = "NOT_IN_INVENTORY"

# warnings
SHARED_SYSTEM_DOWNGRADED = "SHARED_SYSTEM_DOWNGRADED"
SYSTEM_CLAIMED = "SYSTEM_CLAIMED"


@dataclass(frozen=True, slots=True)
class SystemInfo:
    """A catalog System as the ownership rules read it (the catalogs keep these as properties:
    ``openLineageOwner``, ``openLineageJobSystem``, ``cleanupMode``, ``cleanupDays``)."""

    name: str
    kind: str | None = None
    owner: str | None = None  # uuid of the definition that created it (dataset Systems)
    job_marks: tuple[str, ...] = ()  # uuids of the definitions that put jobs in it, first first
    cleanup_mode: str = CleanupMode.NONE.value
    cleanup_days: int = 30

    @classmethod
    def of(cls, properties: Mapping[str, Any], name: str | None = None) -> SystemInfo:
        """Read a catalog's System record (``Catalog.systems()``: the name and its properties)."""
        marks = properties.get("openLineageJobSystem") or ()
        if isinstance(marks, str):
            marks = (marks,)
        days = properties.get("cleanupDays")
        owner = properties.get("openLineageOwner")
        return cls(
            name=str(name if name is not None else properties.get("name", "")),
            kind=properties.get("kind"),
            owner=str(owner) if owner else None,
            job_marks=tuple(str(m) for m in marks),
            cleanup_mode=str(properties.get("cleanupMode") or CleanupMode.NONE.value),
            cleanup_days=int(days) if days else 30,
        )


def systems_by_name(records: Iterable[Mapping[str, Any]]) -> dict[str, SystemInfo]:
    return {str(r["name"]): SystemInfo.of(r) for r in records}


# -- Systems ---------------------------------------------------------------------------------------


def owns_system(definition: SyncDefinition, system: SystemInfo | Mapping[str, Any]) -> bool:
    """A System this definition created. A System without an owner is nobody's."""
    info = system if isinstance(system, SystemInfo) else SystemInfo.of(system)
    return info.owner is not None and info.owner == str(definition.uuid)


def may_change(definition: SyncDefinition, system: SystemInfo | Mapping[str, Any]) -> bool:
    """Whether this definition may remove, drop or rename dataset entities in a System: only in one
    it created whose policy lets it clean (cleanupMode not NONE)."""
    info = system if isinstance(system, SystemInfo) else SystemInfo.of(system)
    return owns_system(definition, info) and info.cleanup_mode != CleanupMode.NONE.value


def claimed_by_another(definition: SyncDefinition, system: SystemInfo) -> bool:
    """A CUTOFF System another definition created: its owner's snapshots delete what they do not
    describe there, so no other definition's dataset may live in it."""
    return (
        system.cleanup_mode == CleanupMode.CUTOFF.value
        and system.owner is not None
        and system.owner != str(definition.uuid)
    )


def own_place(definition: SyncDefinition, system: str) -> str:
    """Where this definition's datasets go when their System is claimed by another."""
    return f"{system} [{definition.name}]"


def placements(
    definition: SyncDefinition, wanted: Iterable[str], catalog_systems: Mapping[str, SystemInfo]
) -> dict[str, str]:
    """The dataset Systems of an upload that another definition claimed, each with the System of
    this definition's own the datasets go to instead (``SYSTEM_CLAIMED``)."""
    out: dict[str, str] = {}
    for name in sorted(set(wanted)):
        info = catalog_systems.get(name)
        if info is not None and claimed_by_another(definition, info):
            out[name] = own_place(definition, name)
    return out


def keeps_cutoff(definition: SyncDefinition, system: SystemInfo) -> bool:
    """CUTOFF is safe on a dataset System only if this definition is its only producer: it
    created it, and it has a single namespace (one pattern without a glob character, nothing
    shared)."""
    return owns_system(definition, system) and definition.sole_namespace


def former_job_systems(definition: SyncDefinition, systems: Iterable[SystemInfo]) -> list[str]:
    """The definition's ``openLineageSystem`` when it exists, and every System whose first
    ``openLineageJobSystem`` mark is the definition's uuid (one another definition created first
    is not visited)."""
    uuid = str(definition.uuid)
    return [
        s.name
        for s in systems
        if s.name == definition.job_system or (s.job_marks and s.job_marks[0] == uuid)
    ]


# -- namespaces ------------------------------------------------------------------------------------


def admits(definition: SyncDefinition, namespace: str) -> bool:
    """Whether the definition writes jobs of this namespace (its own or shared patterns)."""
    return namespace_allowed(namespace, list(definition.namespace_patterns))


def admitted(definition: SyncDefinition, namespaces: Iterable[str]) -> list[str]:
    return sorted(ns for ns in set(namespaces) if admits(definition, ns))


def exclusive(definition: SyncDefinition, namespace: str) -> bool:
    """A namespace this definition alone writes on its catalogs: the only kind a cutoff covers."""
    return admits(definition, namespace) and not definition.is_shared(namespace)


# -- the verdict -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BatchShape:
    """What the rules need to know about a synced batch."""

    snapshot: bool  # a /lineage/batch post stored whole to a BATCH_SNAPSHOT definition
    job_namespaces: tuple[str, ...]  # of the jobs its events describe (not parents only)
    described_jobs: tuple[NodeKey, ...] = ()  # JobEvents
    completed_jobs: tuple[NodeKey, ...] = ()  # runs completed in it, judged whole
    dataset_systems: tuple[str, ...] = ()  # Systems its datasets are in
    inventories: tuple[Inventory, ...] = ()  # read by the readers the definition turned on


@dataclass(frozen=True, slots=True)
class DatasetSystemCall:
    system: str
    mode: str  # CUTOFF | DAYS
    days: int | None  # DAYS: cleanupDays


@dataclass(frozen=True, slots=True)
class Skip:
    what: str  # "namespace:<ns>", "system:<name>", "job:<ns>|<name>"
    reason: str


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one cleanup may remove, decided before any call is planned."""

    mode: str  # CUTOFF for a whole snapshot, else DAYS
    cutoff_namespaces: tuple[str, ...]  # every job of these: flows and job entities by cutoff
    days_namespaces: tuple[str, ...]  # flows and job entities after staleJobDays
    replaced_jobs: tuple[NodeKey, ...]  # both scopes of each by cutoff (flows only)
    dataset_systems: tuple[DatasetSystemCall, ...]
    downgraded: tuple[str, ...]  # CUTOFF Systems cleaned by days (SHARED_SYSTEM_DOWNGRADED)
    skipped: tuple[Skip, ...]
    inventories: tuple[Inventory, ...] = ()  # whole lists whose missing children are retired

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "cutoffNamespaces": list(self.cutoff_namespaces),
            "daysNamespaces": list(self.days_namespaces),
            "replacedJobs": [list(j) for j in self.replaced_jobs],
            "datasetSystems": [
                {"system": c.system, "mode": c.mode, **({"days": c.days} if c.days else {})}
                for c in self.dataset_systems
            ],
            "skipped": [{"what": s.what, "reason": s.reason} for s in self.skipped],
            **(
                {"inventories": [i.as_dict() for i in self.inventories]} if self.inventories else {}
            ),
        }


def is_snapshot(definition: SyncDefinition, posted: bool, whole: bool) -> bool:
    """A ``/lineage/batch`` post stored whole (every event accepted) to a BATCH_SNAPSHOT
    definition: the only batch that speaks for every job of its namespaces."""
    return definition.snapshotMode is SnapshotMode.BATCH_SNAPSHOT and posted and whole


def decide(
    definition: SyncDefinition, batch: BatchShape, systems: Mapping[str, SystemInfo]
) -> Verdict:
    """The verdict on a synced batch (docs/deletion-rules.md)."""
    skipped: list[Skip] = []
    namespaces = sorted(set(batch.job_namespaces))
    for ns in namespaces:
        if not admits(definition, ns):
            skipped.append(Skip(f"namespace:{ns}", NOT_ADMITTED))
        elif definition.is_shared(ns):
            skipped.append(Skip(f"namespace:{ns}", SHARED_NAMESPACE))
    own = [ns for ns in namespaces if exclusive(definition, ns)]
    shared = [ns for ns in namespaces if admits(definition, ns) and definition.is_shared(ns)]
    mode = CUTOFF if batch.snapshot else DAYS
    replaced: list[NodeKey] = []
    if mode == DAYS:
        jobs = set(batch.described_jobs)
        if definition.lineageReplacement is LineageReplacement.JOB:
            jobs |= set(batch.completed_jobs)
        for job in sorted(jobs):
            if exclusive(definition, job[0]):
                replaced.append(job)
            elif admits(definition, job[0]):
                skipped.append(Skip(f"job:{job[0]}|{job[1]}", SHARED_NAMESPACE))
    cutoff_ns = own if mode == CUTOFF else []
    days_ns = shared if mode == CUTOFF else own + shared
    calls, downgraded = _dataset_systems(
        definition, batch, systems, snapshot_cutoff=mode == CUTOFF and bool(own), skipped=skipped
    )
    if mode == CUTOFF and not own:
        skipped.append(Skip("batch", NO_JOB_DESCRIBED))
    inventories = _inventories(definition, batch.inventories, skipped)
    return Verdict(
        mode=mode,
        cutoff_namespaces=tuple(cutoff_ns),
        days_namespaces=tuple(sorted(days_ns)),
        replaced_jobs=tuple(replaced),
        dataset_systems=tuple(calls),
        downgraded=tuple(downgraded),
        skipped=tuple(skipped),
        inventories=inventories,
    )


def _inventories(
    definition: SyncDefinition, found: Iterable[Inventory], skipped: list[Skip]
) -> tuple[Inventory, ...]:
    """The newest whole list of each parent, from a reader the definition turned on, speaking
    for a namespace the definition alone writes; every other list is skipped with its reason."""
    newest: dict[tuple[str, str, str], Inventory] = {}
    for inv in found:
        what = f"inventory:{inv.parent[0]}|{inv.parent[1]}"
        if inv.reader not in definition.inventories:
            continue
        if inv.partial is not None:
            skipped.append(Skip(what, PARTIAL_RUN))
        elif not admits(definition, inv.namespace):
            skipped.append(Skip(what, NOT_ADMITTED))
        elif definition.is_shared(inv.namespace):
            skipped.append(Skip(what, SHARED_NAMESPACE))
        else:
            key = (inv.reader, *inv.parent)
            older = newest.get(key)
            if older is not None:
                skipped.append(Skip(what, OLDER_INVENTORY))
            # the events are read in arrival order; the later of two equal times wins
            if older is None or _when(inv) >= _when(older):
                newest[key] = inv
            else:
                newest[key] = older
    return tuple(newest[k] for k in sorted(newest))


def _when(inventory: Inventory) -> datetime:
    try:
        at = datetime.fromisoformat(inventory.time)
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def retired_children(
    definition: SyncDefinition, inventory: Inventory, children: Iterable[NodeKey]
) -> list[NodeKey]:
    """The children of the inventory's parent (as the catalog links them) that a whole list no
    longer names: only in the namespace the list speaks for, when the definition alone writes
    it. A child in any other namespace is another producer's or another definition's: kept."""
    return sorted(
        {
            child
            for child in children
            if child[0] == inventory.namespace
            and child != inventory.parent
            and child[1] not in inventory.children
            and exclusive(definition, child[0])
        }
    )


def decide_stale(
    definition: SyncDefinition, held_namespaces: Iterable[str], systems: Mapping[str, SystemInfo]
) -> Verdict:
    """The verdict of the daily day-based cleanup: every namespace the catalog holds for the
    definition, and its DAYS Systems."""
    namespaces = admitted(definition, held_namespaces)
    calls, downgraded = _dataset_systems(
        definition, BatchShape(False, ()), systems, snapshot_cutoff=False, skipped=[]
    )
    return Verdict(DAYS, (), tuple(namespaces), (), tuple(calls), tuple(downgraded), ())


def _dataset_systems(
    definition: SyncDefinition,
    batch: BatchShape,
    systems: Mapping[str, SystemInfo],
    *,
    snapshot_cutoff: bool,
    skipped: list[Skip],
) -> tuple[list[DatasetSystemCall], list[str]]:
    """The dataset Systems the batch refers to or this definition created: CUTOFF ones by the
    cutoff (a snapshot that describes a job of the definition, which alone owns them), DAYS ones
    after their days, a CUTOFF one it does not own alone by days (downgraded)."""
    owned = {n for n, s in systems.items() if owns_system(definition, s)}
    calls: list[DatasetSystemCall] = []
    downgraded: list[str] = []
    for name in sorted((set(batch.dataset_systems) | owned) & set(systems)):
        info = systems[name]
        if info.owner is not None and name not in owned:
            skipped.append(Skip(f"system:{name}", OTHER_OWNER))
            continue
        if info.cleanup_mode == CleanupMode.CUTOFF.value:
            if not keeps_cutoff(definition, info):
                downgraded.append(name)
                calls.append(DatasetSystemCall(name, DAYS, info.cleanup_days))
            elif snapshot_cutoff:
                # owned alone: the snapshot describes all of it, including what it no longer
                # refers to at all (the retired job's bucket entity goes too)
                calls.append(DatasetSystemCall(name, CUTOFF, None))
        elif info.cleanup_mode == CleanupMode.DAYS.value:
            calls.append(DatasetSystemCall(name, DAYS, info.cleanup_days))
    return calls, downgraded


# -- limits ----------------------------------------------------------------------------------------


def removal_cap(definition: SyncDefinition, override: int | None = None) -> int:
    """``maxRemovalsPerRun``, or the override a person gave this run."""
    return definition.cleanup.maxRemovalsPerRun if override is None else override


def removal_share(definition: SyncDefinition, override: float | None = None) -> float:
    return definition.cleanup.maxRemovalShare if override is None else override


SHARE_KINDS = ("jobs", "datasets", "fields", "dataFlows", "fieldFlows")
# what goes with a removed object of another kind: judged by that kind's share, not again
FOLLOWS = {"dataFlows": ("jobs",), "fieldFlows": ("jobs",), "fields": ("jobs", "datasets")}


def share_exceeded(removing: Mapping[str, int], held: Mapping[str, int], share: float) -> list[str]:
    """The kinds of which the plan removes more than ``share`` of what the definition holds.
    Jobs and datasets are always judged; flows (data and field flows, each on its own) only when
    the plan keeps every job, fields only when it keeps every job and dataset (a removed job's
    flows and a removed dataset's fields go with it, and that kind's share judged it), so a batch
    that keeps its jobs but loses their lineage or their column lineage, or its datasets but
    their columns, is stopped too."""
    judged = [k for k in SHARE_KINDS if not any(removing.get(o, 0) > 0 for o in FOLLOWS.get(k, ()))]
    return [
        kind for kind in judged if held.get(kind, 0) and removing.get(kind, 0) / held[kind] > share
    ]
