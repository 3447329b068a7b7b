"""The one interface every catalog backend implements.

Shaped by the Blindata seed: the cutoff is read from the catalog's own clock, the upload touches
every object it sends (changed or not), and cleanup calls delete what a scope owns and was last
updated before a time, always with a dry run first so the removal cap can be checked before
anything is deleted.

Some backends can do more, and the sync uses it when they can: rehearse a plan for real and roll
it back (``Rehearsing``), take the batch's events (``TakesEvents``), export what a definition has
synced for the asset graph (``ExportsState``), and only the jobs that changed since
(``PatchesState``), hold analysis results (``Annotating``). Each is a
protocol here, found on a catalog with ``isinstance`` (``runtime_checkable``), and pyright checks
each kind declares the ones its backend has (``catalog.kind``), held to them when it opens.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NotRequired, Protocol, TypedDict, runtime_checkable

if TYPE_CHECKING:  # named in signatures only: reading the settings file loads no normalization
    from ol_dagster.lineage import LineageGraph
    from ol_dagster.lineage.graph import NodeKey
    from ol_dagster.lineage_state import DatasetPart, JobPart, LineageState
    from ol_dagster.sync_definition import SyncDefinition


class ObjectType(StrEnum):
    DATA_FLOWS = "dataFlows"  # data and orchestration flows (Blindata: its field flows too)
    FIELD_FLOWS = "fieldFlows"  # column-level flows, where the catalog holds them apart
    PHYSICAL_ENTITIES = "physicalEntities"
    PHYSICAL_FIELDS = "physicalFields"
    ROUTINES = "routines"
    STATEMENTS = "statements"


class CleanupStopped(Exception):
    """The cleanup cannot go on safely: nothing more is deleted. ``code`` is the report's
    ``skippedReason``."""

    code = "CLEANUP_STOPPED"


class CleanupPermissionDenied(CleanupStopped):
    """The catalog refused the cleanup (HTTP 403 / missing SYSTEMS_ADMIN)."""

    code = "CLEANUP_PERMISSION_DENIED"


class CleanupNotConfirmed(CleanupStopped):
    """A cleanup call's answer did not say what the client asked (a dry run not confirmed as one,
    counts in a shape it does not read): the server may not do what the client thinks it does,
    so no further call is made."""

    code = "CLEANUP_NOT_CONFIRMED"


@dataclass(frozen=True, slots=True)
class FailedRow:
    """A row the catalog did not take. ``blocks``: the upload failed with it, so nothing is
    deleted; a row that does not block is one event the catalog refuses for its content (it
    would refuse it on every run), reported with its ``code``, while the others sync."""

    object_type: str
    key: str
    reason: str
    code: str = ""
    blocks: bool = True


class FailedRowRecord(TypedDict):
    objectType: str
    key: str
    reason: str
    code: NotRequired[str]
    blocks: NotRequired[bool]


class _SplitCounts(TypedDict, total=False):
    """``touched`` split, from a catalog that can tell (optional by ``total=False``: this module's
    annotations are strings, which ``NotRequired`` cannot mark at run time)."""

    updated: dict[str, int]
    unchanged: dict[str, int]


class UploadResultRecord(_SplitCounts):
    """An ``UploadResult`` as JSON (``UploadResult.as_dict``): what the store keeps of it."""

    written: dict[str, int]
    touched: dict[str, int]
    failed: list[FailedRowRecord]
    dropped: dict[str, int]
    removed: dict[str, int]
    renamed: list[str]
    succeeded: bool


@dataclass(slots=True)
class UploadResult:
    """Per-row outcome of an upload, by object type: ``written``, the rows it added; ``touched``,
    the rows already there that it gave its time (sent again, or stamped when unchanged). A
    catalog that can tell also splits ``touched`` into ``updated`` (rows whose values it
    changed) and ``unchanged`` (the same values); one that cannot leaves both None, and they
    stay out of the record rather than be guessed."""

    written: dict[str, int] = field(default_factory=dict)
    touched: dict[str, int] = field(default_factory=dict)
    updated: dict[str, int] | None = None
    unchanged: dict[str, int] | None = None
    failed: list[FailedRow] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)
    removed: dict[str, int] = field(default_factory=dict)  # objects a DROP event removed
    renamed: list[str] = field(default_factory=list)  # RENAMEs applied: "ns:name -> ns:name"
    # not recorded: a digest per job and per dataset (by (namespace, name)) of every value the
    # catalog writes for it, from the graph alone (flows' ends, column flows and SQL included),
    # so equal digests mean an equal lineage part (``sync.changes``); None: the catalog has none
    content_digests: dict[str, dict[tuple[str, str], str]] | None = None

    @property
    def succeeded(self) -> bool:
        return not any(f.blocks for f in self.failed)

    def as_dict(self) -> UploadResultRecord:
        out: UploadResultRecord = {
            "written": dict(self.written),
            "touched": dict(self.touched),
            "failed": [_failed_record(f) for f in self.failed],
            "dropped": dict(self.dropped),
            "removed": dict(self.removed),
            "renamed": list(self.renamed),
            "succeeded": self.succeeded,
        }
        if self.updated is not None:
            out["updated"] = dict(self.updated)
        if self.unchanged is not None:
            out["unchanged"] = dict(self.unchanged)
        return out


def _failed_record(row: FailedRow) -> FailedRowRecord:
    out: FailedRowRecord = {"objectType": row.object_type, "key": row.key, "reason": row.reason}
    if row.code:
        out["code"] = row.code
    if not row.blocks:
        out["blocks"] = False
    return out


class Removal(StrEnum):
    """What one delete call really did in the catalog."""

    REMOVED = "removed"
    NOT_FOUND = "notFound"  # the catalog did not have it (404): gone, but not by this call
    KEPT = "kept"  # there, but not ours to remove (an edge another source wrote)
    REFUSED = "refused"  # the catalog answered another 4xx: left for the next run


@dataclass(frozen=True, slots=True)
class Removed:
    """A delete's answer with what the report says beside the outcome: who owns what is
    ``kept`` (the writer the catalog records, and ``why`` in words), or the kind of an object
    left in the catalog on purpose beside what was removed."""

    outcome: Removal
    owner: str | None = None
    left: str | None = None
    why: str | None = None  # a kept object: what it is and who else holds it, for the report


@dataclass(slots=True)
class CleanupCounts:
    """A cleanup call's counts by object type. A dry run's ``counts`` are what it plans; a real
    call's are what the catalog removed, and ``outcomes`` says what happened to the rest
    (``{"notFound": {"dataFlows": 2}}``): only what the catalog really changed counts as removed."""

    counts: dict[str, int] = field(default_factory=dict)
    removed_jobs: list[str] = field(default_factory=list)
    outcomes: dict[str, dict[str, int]] = field(default_factory=dict)
    # the ``kept`` objects by who the catalog says wrote them (``{"alice": 1}``)
    kept_by: dict[str, int] = field(default_factory=dict)
    # objects the catalog made for what was removed and left in it on purpose, by kind
    left: dict[str, int] = field(default_factory=dict)
    kept: list[str] = field(default_factory=list)  # what was kept and why (``Removed.why``)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True, slots=True)
class DatasetRef:
    """A dataset as the catalog files it (System, schema, object name) and as OpenLineage names
    it (namespace, name): what a DROP removes."""

    system: str
    schema: str
    name: str
    ol_namespace: str
    ol_name: str


class Catalog(Protocol):
    def clock(self) -> datetime:
        """The catalog's own time, as an aware UTC datetime."""
        ...

    def upload(
        self,
        graph: LineageGraph,
        definition: SyncDefinition,
        raw_events: Callable[[], Iterable[bytes]] | None = None,
    ) -> UploadResult:
        """Write everything the graph describes. Catalogs that take OpenLineage events (Marquez,
        OpenMetadata) read them from ``raw_events`` (the batch's accepted events)."""
        ...

    def cleanup_flows(
        self,
        *,
        namespaces: Sequence[str] = (),
        jobs: Sequence[NodeKey] = (),
        before: datetime,
        dry_run: bool,
    ) -> CleanupCounts:
        """Data, orchestration and field flows owned by every job of ``namespaces``, or by
        ``jobs`` (both scopes of each), last updated before ``before``. Owners are matched by
        their parts with exact equality (case and every character count)."""
        ...

    def cleanup_job_system(
        self,
        system: str,
        *,
        schemas: list[str] | None,
        before: datetime,
        dry_run: bool,
        routines_before: datetime | None = None,
    ) -> CleanupCounts:
        """Job entities and routines of a job System, at schema level (``None``: all schemas).
        With ``routines_before``, a routine whose job is still there waits until that time."""
        ...

    def cleanup_dataset_system(
        self, system: str, *, before: datetime, dry_run: bool
    ) -> CleanupCounts:
        """Dataset entities no longer referenced, and fields the carried schemas no longer have."""
        ...

    def drop_datasets(self, datasets: list[DatasetRef], *, dry_run: bool) -> CleanupCounts:
        """Remove datasets a DROP lifecycle event named (with their fields and the flows that
        touch them). The cleanup calls it only for Systems this definition owns, after its
        guards; a dry run only counts."""
        ...

    def count_jobs(self, system: str, *, schemas: list[str] | None) -> int:
        """How many job entities a job System holds (in these schemas; ``None``: all)."""
        ...

    def count_held(
        self, *, namespaces: Sequence[str], dataset_systems: Sequence[str]
    ) -> dict[str, int]:
        """What a definition holds, for the removal share: ``dataFlows`` (data and orchestration
        flows owned by jobs of ``namespaces``), ``fieldFlows`` (their field flows, where the
        catalog counts them apart: else they are in ``dataFlows``), ``datasets`` (dataset
        entities in ``dataset_systems``) and ``fields`` (their fields). Jobs: ``count_jobs``."""
        ...

    def disable_quality_checks(self, jobs: list[str]) -> int:
        """Disable (never delete) the checks of these jobs' suites (``<namespace>.<name>``)."""
        ...

    def systems(self) -> list[dict]:
        """Systems and their properties (openLineageOwner, openLineageJobSystem, cleanupMode)."""
        ...

    def job_schemas(self, system: str) -> list[str]:
        """The job namespaces (schemas) holding job entities or routines in a job System."""
        ...

    def lineage(self, node: str, *, depth: int, upstream: bool, downstream: bool) -> dict:
        """``{"nodes": [{"id", "type"}], "edges": [{"from", "to"}]}`` around a node."""
        ...

    def close(self) -> None: ...


# -- what some backends can do beyond the protocol ------------------------------------------------

# an analysis result for one entity: (kind "job" or "dataset", namespace, name, properties)
AnalysisItem = tuple[str, str, str, dict[str, Any]]


@runtime_checkable
class Rehearsing(Protocol):
    """A catalog that can run a cleanup plan for real inside a transaction it rolls back: each
    call's rehearsed count is then exactly what its real call removes (``sync.cleanup``)."""

    def rehearsal(self) -> AbstractContextManager[None]: ...


@runtime_checkable
class TakesEvents(Protocol):
    """A catalog that receives the batch's OpenLineage events itself (Marquez, OpenMetadata): the
    sync reads them once and hands them to ``upload`` (``sync.batch``)."""

    takes_events: bool


@runtime_checkable
class ExportsState(Protocol):
    """A catalog that can say what a definition has synced, as the lineage state the asset graph
    is built from (``lineage_state``)."""

    def export_state(self, definition: SyncDefinition) -> LineageState: ...


@runtime_checkable
class PatchesState(Protocol):
    """A catalog that signs each job's part of a definition's lineage state (a digest of what
    the part is exported from; None: it cannot tell) and exports the parts of some jobs: a sync
    then exports only the jobs whose signature is not the one stored (``sync.lineage_refresh``).
    ``state_sources`` signs the jobs a whole export keeps (``assetGraph.maxJobs``) and counts
    the others."""

    def state_sources(
        self, definition: SyncDefinition
    ) -> tuple[dict[NodeKey, str | None], int]: ...

    def export_parts(
        self, definition: SyncDefinition, jobs: Collection[NodeKey]
    ) -> tuple[list[JobPart], list[DatasetPart]]: ...

    def state_jobs(self, definition: SyncDefinition) -> tuple[set[NodeKey], int]:
        """The jobs a whole export keeps and how many it leaves out, without their signatures:
        what a capped definition shows moves with its jobs' runs."""
        ...


@runtime_checkable
class Annotating(Protocol):
    """A catalog that holds analysis results on its entities (``defs.analysis``); returns how
    many entities it wrote."""

    def annotate(self, key: str, items: list[AnalysisItem]) -> int: ...


@runtime_checkable
class RetiresChildren(Protocol):
    """A catalog that can tell a parent job's children (the jobs whose orchestration flow comes
    from it) and remove chosen jobs with their flows: what a producer inventory retires
    (``sync.cleanup``). A catalog without it reports ``INVENTORY_NOT_SUPPORTED``."""

    def children(self, parent: NodeKey) -> list[NodeKey]: ...

    def retire_jobs(
        self, system: str, *, jobs: Sequence[NodeKey], before: datetime, dry_run: bool
    ) -> CleanupCounts:
        """These jobs' entities and routines in ``system`` and every flow they own or touch,
        each only when last updated before ``before``."""
        ...


# every capability a kind may declare (``catalog.kind.CatalogKind.capabilities``)
CAPABILITIES: tuple[type[Any], ...] = (
    Rehearsing,
    TakesEvents,
    ExportsState,
    PatchesState,
    Annotating,
    RetiresChildren,
)


def export_state(catalog: object, definition: SyncDefinition) -> LineageState | None:
    """The catalog's state for ``definition``, or None when the backend cannot export one."""
    return catalog.export_state(definition) if isinstance(catalog, ExportsState) else None
