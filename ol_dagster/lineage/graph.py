"""The lineage graph every catalog receives: jobs, datasets, fields and the flows between them.

It is the contract between normalization and the catalogs: whatever the producer (Spark, Airflow,
dbt...), a batch ends up as these objects, keyed by OpenLineage identity (namespace, name). Each
flow has an owner (``FlowOwner``: its job and the scope kind, ``orchestration`` for parent/child
links), which is what the cutoff cleanup removes by, matching the parts with equality. Its scope
string (``ol:<job namespace>|<job name>``, ``...#orchestration``) is the seed's, with the
separators inside names encoded, for Blindata and for display.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

from ol_dagster.gcpause import gc_paused

NodeKey = tuple[str, str]  # (namespace, name)
FieldKey = tuple[str, str, str]  # (namespace, name, field path)

DATA_SCOPE = "data"  # a job's data and field flows
ORCHESTRATION_SCOPE = "orchestration"  # parent -> child links, owned by the child
ScopeKind = Literal["data", "orchestration"]

_SCHEME = "ol:"
_ORCHESTRATION_SUFFIX = "#orchestration"
# Inside a name: the escape character itself and the two separators of the string. Blindata's
# flow filters are taken to compare scopes literally and with case (our contract of its [I]
# API: ``ol_dagster/catalog/blindata/api.py``); the Blindata cleanup does not rely on it anyway,
# it decides by the parts (``ol_dagster/catalog/blindata/cleanup.py``).
_ESCAPED = {"%": "%25", "|": "%7C", "#": "%23"}
_ENCODE = str.maketrans(_ESCAPED)
_DECODE = re.compile("|".join(re.escape(v) for v in _ESCAPED.values()))
_DECODED = {v: k for k, v in _ESCAPED.items()}


def encode_scope_part(name: str) -> str:
    """A namespace or job name as it appears inside a scope string: ``%``, ``|`` and ``#``
    percent-encoded, so no name can end one part early or fake the orchestration suffix."""
    if "%" in name or "|" in name or "#" in name:
        return name.translate(_ENCODE)
    return name  # most names: the translation is the upload's hot path otherwise


def _decode_part(part: str) -> str:
    return _DECODE.sub(lambda m: _DECODED[m.group(0)], part)


@dataclass(frozen=True, slots=True, order=True)
class FlowOwner:
    """Who owns a flow in a catalog: a job (namespace, name) and the scope kind, ``data`` for
    its data and field flows, ``orchestration`` for the link from its parent. Catalogs store and
    match these parts with equality; the scope string is for Blindata and for display."""

    namespace: str
    job: str
    kind: ScopeKind = DATA_SCOPE

    @property
    def job_key(self) -> NodeKey:
        return (self.namespace, self.job)

    @property
    def scope(self) -> str:
        """The seed's scope string, ``ol:<ns>|<job>`` (``...#orchestration``), its names
        encoded (``encode_scope_part``): two owners never make one string, and the namespace
        prefix ``scope_prefix(ns)`` starts the scopes of that namespace only."""
        if self.kind == ORCHESTRATION_SCOPE:
            return orchestration_scope(self.namespace, self.job)
        return flow_scope(self.namespace, self.job)


def flow_scope(job_namespace: str, job_name: str) -> str:
    """The scope owning a job's data flows (seed: ``ol:<job namespace>|<job name>``, the names
    encoded: ``FlowOwner.scope``)."""
    return f"{_SCHEME}{encode_scope_part(job_namespace)}|{encode_scope_part(job_name)}"


def orchestration_scope(job_namespace: str, job_name: str) -> str:
    return flow_scope(job_namespace, job_name) + _ORCHESTRATION_SUFFIX


def parse_scope(scope: str) -> FlowOwner | None:
    """The owner a scope string names (the inverse of ``FlowOwner.scope``); None for a scope
    that is not an OpenLineage one."""
    if not scope.startswith(_SCHEME) or "|" not in scope:
        return None
    namespace, _, rest = scope[len(_SCHEME) :].partition("|")
    if "|" in rest:
        return None  # not a string ``FlowOwner.scope`` makes
    kind: ScopeKind = DATA_SCOPE
    if rest.endswith(_ORCHESTRATION_SUFFIX):
        rest, kind = rest.removesuffix(_ORCHESTRATION_SUFFIX), ORCHESTRATION_SCOPE
    if "#" in rest:
        return None
    return FlowOwner(_decode_part(namespace), _decode_part(rest), kind)


def parse_legacy_scope(scope: str, kind: str = DATA_SCOPE) -> FlowOwner | None:
    """The owner of a scope stored before names were encoded (``ol:<ns>|<job>`` verbatim), for
    migrations: the namespace ends at the first ``|``, and only an orchestration flow's scope
    ends in the suffix (a data flow's job may be named ``x#orchestration``). Best effort: such
    a string was ambiguous when a namespace held a ``|``."""
    if not scope.startswith(_SCHEME) or "|" not in scope:
        return None
    namespace, _, job = scope[len(_SCHEME) :].partition("|")
    if kind == ORCHESTRATION_SCOPE:
        return FlowOwner(namespace, job.removesuffix(_ORCHESTRATION_SUFFIX), ORCHESTRATION_SCOPE)
    return FlowOwner(namespace, job)


def job_of_scope(scope: str) -> NodeKey | None:
    """The (namespace, name) of the job whose data or orchestration flows a scope holds; None
    for a scope that is not an OpenLineage one."""
    owner = parse_scope(scope)
    return owner.job_key if owner else None


def scope_prefix(job_namespace: str) -> str:
    """The prefix that starts every scope of a job namespace, data and orchestration flows, and
    of no other namespace (a read filter: no deletion is decided by a prefix)."""
    return f"{_SCHEME}{encode_scope_part(job_namespace)}|"


@dataclass(slots=True)
class RunMetrics:
    """Per job, as Egeria keeps them in the RunMetrics classification."""

    runs: int = 0
    failures: int = 0
    first_run: datetime | None = None
    last_run: datetime | None = None
    last_duration_seconds: float | None = None
    last_status: str | None = None
    rows_read: int = 0
    rows_written: int = 0
    bytes_read: int = 0
    bytes_written: int = 0


@dataclass(slots=True)
class JobNode:
    namespace: str
    name: str
    integration: str | None = None
    job_type: str | None = None
    processing_type: str | None = None
    description: str | None = None
    owners: list[str] = field(default_factory=list)
    source_code_location: str | None = None
    metrics: RunMetrics = field(default_factory=RunMetrics)
    # known only from another job's parent facet: no event of the batch describes it, so its
    # namespace is no cutoff scope and, outside the definition's namespaces, no job it owns
    referenced_only: bool = False

    @property
    def key(self) -> NodeKey:
        return (self.namespace, self.name)


@dataclass(slots=True)
class FieldNode:
    path: str  # nested fields flattened as parent.child
    type: str | None = None
    description: str | None = None
    ordinal: int | None = None


@dataclass(slots=True)
class DatasetNode:
    namespace: str
    name: str
    system: str = ""
    schema: str = ""
    object_name: str = ""
    type: str = "other"
    description: str | None = None
    owners: list[str] = field(default_factory=list)
    fields: dict[str, FieldNode] = field(default_factory=dict)
    has_schema: bool = False  # the run carried the schema facet: the field list is complete
    previous: NodeKey | None = None  # a RENAME's previous identifier
    dropped: bool = False
    aliases: set[NodeKey] = field(default_factory=set)  # symlinks resolved into this node

    @property
    def key(self) -> NodeKey:
        return (self.namespace, self.name)


# Flows are values kept in sets and never changed once made; they are not ``frozen`` because a
# frozen dataclass sets each field through ``object.__setattr__``: three times slower to build,
# and a 10,000-event snapshot builds ~400,000 of them twice (normalized, then unpacked).
@dataclass(slots=True, unsafe_hash=True)
class DataFlow:
    """Input dataset -> output dataset, through a job, owned by the job's scope."""

    source: NodeKey
    target: NodeKey
    job: NodeKey

    @property
    def owner(self) -> FlowOwner:
        return FlowOwner(*self.job)

    @property
    def scope(self) -> str:
        return flow_scope(*self.job)


@dataclass(slots=True, unsafe_hash=True)  # a value: see DataFlow
class FieldFlow:
    source: FieldKey
    target: FieldKey
    job: NodeKey
    transformation: str | None = None  # DIRECT / INDIRECT
    subtype: str | None = None  # IDENTITY, AGGREGATION, JOIN, FILTER...

    @property
    def owner(self) -> FlowOwner:
        return FlowOwner(*self.job)

    @property
    def scope(self) -> str:
        return flow_scope(*self.job)


@dataclass(slots=True, unsafe_hash=True)  # a value: see DataFlow
class OrchestrationFlow:
    """Parent job -> child job (Airflow DAG -> task, Spark application -> action)."""

    parent: NodeKey
    child: NodeKey
    root: NodeKey | None = None

    @property
    def owner(self) -> FlowOwner:
        return FlowOwner(*self.child, ORCHESTRATION_SCOPE)

    @property
    def scope(self) -> str:
        return orchestration_scope(*self.child)


@dataclass(frozen=True, slots=True)
class Routine:
    """A job's SQL, catalogued as a routine with its statement."""

    job: NodeKey
    statement: str
    dialect: str | None = None


@dataclass(slots=True)
class QualityCheck:
    job: NodeKey  # the suite is the job's
    dataset: NodeKey
    name: str
    column: str | None
    success: bool
    severity: str | None = None
    checked_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class DanglingFlow:
    reason: str
    job: NodeKey
    source: str
    target: str


class UnreadFieldFlows(Protocol):
    """Field flows kept as they were stored until something reads them (``lineage.packed``)."""

    def __len__(self) -> int: ...
    def read(self, jobs: Container[NodeKey], *, but: bool = False) -> Iterator[FieldFlow]:
        """The flows of ``jobs`` (of every job but those, with ``but``), built now."""
        ...

    def all(self) -> set[FieldFlow]:
        """Every flow, built now."""
        ...


class _FieldFlows:
    """``LineageGraph.field_flows``: a set, which a graph read back from storage may hold unread
    (``LineageGraph.read_later``) until it is first used. An unchanged night's sync takes the
    whole earlier graph and its upload only stamps the field flows of unchanged jobs: building
    one object per flow (150,000 at 10,000 jobs) only to count them was a twentieth of it."""

    def __get__(self, graph: LineageGraph | None, owner: object = None) -> set[FieldFlow]:
        if graph is None:  # the dataclass asks for the default: ``__set__`` makes a new set
            return None  # type: ignore[return-value]
        unread = graph._unread_field_flows
        if unread is not None:
            # built before the flows are marked read: another thread reading them meanwhile
            # builds them too, never takes the empty set that stands for them until then
            graph._field_flows = unread.all()
            graph._unread_field_flows = None
        return graph._field_flows

    def __set__(self, graph: LineageGraph, flows: set[FieldFlow] | None) -> None:
        graph._unread_field_flows = None
        graph._field_flows = set() if flows is None else flows


@dataclass  # no slots: ``field_flows`` is a descriptor
class LineageGraph:
    jobs: dict[NodeKey, JobNode] = field(default_factory=dict)
    datasets: dict[NodeKey, DatasetNode] = field(default_factory=dict)
    data_flows: set[DataFlow] = field(default_factory=set)
    field_flows: _FieldFlows = _FieldFlows()
    orchestration_flows: set[OrchestrationFlow] = field(default_factory=set)
    routines: dict[NodeKey, Routine] = field(default_factory=dict)
    quality_checks: dict[tuple[NodeKey, NodeKey, str, str | None], QualityCheck] = field(
        default_factory=dict
    )
    dangling: list[DanglingFlow] = field(default_factory=list)
    skipped_events: list[str] = field(default_factory=list)  # stored events that no longer parse
    # jobs an event describes completely: a JobEvent (seed: "A JobEvent ... for a job")
    described_jobs: set[NodeKey] = field(default_factory=set)
    # jobs with a COMPLETE run that describes them whole (``RunView.describes_job``)
    completed_jobs: set[NodeKey] = field(default_factory=set)
    # the jobs it took from an earlier graph (of this lineage digest) with every part of them as
    # it was there: attributes, SQL, data, field and orchestration flows (``lineage.reuse.
    # unchanged_jobs``); packed with its lineage. Not compared: what the embedded upload's memo
    # is told, so that such a job's kept digest is taken without hashing it again
    unchanged_since: tuple[bytes, frozenset[NodeKey]] | None = field(
        default=None, compare=False, repr=False
    )
    # dataset Systems another definition claimed -> the System of this definition's own its
    # datasets (and the previous names its RENAMEs give) are filed in instead (set at upload)
    claimed_systems: dict[str, str] = field(default_factory=dict)
    # a digest of its lineage as the sync stored it packed (set by ``sync.graph``; None: not
    # known): graphs with the same one have the same lineage, whatever their run facts. Neither
    # compared nor packed; ``dataclasses.replace`` keeps it, so whoever changes a graph's lineage
    # after it was set clears it (the embedded upload keys it with the datasets' placement too)
    lineage_digest: bytes | None = field(default=None, compare=False, repr=False)

    _field_flows: set[FieldFlow] = field(init=False, compare=False, repr=False)
    _unread_field_flows: UnreadFieldFlows | None = field(
        default=None, init=False, compare=False, repr=False
    )

    def read_later(self, flows: UnreadFieldFlows) -> None:
        """Hold ``flows`` as the graph's field flows, built when ``field_flows`` is first read."""
        self._field_flows = set()
        self._unread_field_flows = flows

    def held_field_flows(self) -> UnreadFieldFlows | None:
        """The field flows held unread (``read_later``); None once built, or never held."""
        return self._unread_field_flows

    def field_flow_count(self) -> int:
        """``len(field_flows)``, without building flows held unread."""
        unread = self._unread_field_flows
        return len(unread) if unread is not None else len(self._field_flows)

    def field_flows_of(self, jobs: Container[NodeKey], *, but: bool = False) -> list[FieldFlow]:
        """The field flows of ``jobs`` (of every job but those, with ``but``); of flows held
        unread, only those are built."""
        unread = self._unread_field_flows
        if unread is not None:
            with gc_paused():  # new objects without cycles, as ``all`` builds them
                return list(unread.read(jobs, but=but))
        if but:
            return [f for f in self._field_flows if f.job not in jobs]
        return [f for f in self._field_flows if f.job in jobs]

    @property
    def job_namespaces(self) -> list[str]:
        """Namespaces of the jobs the batch's events describe (not those only named as a
        parent): the only namespaces a snapshot can speak for."""
        return sorted({ns for (ns, _), j in self.jobs.items() if not j.referenced_only})

    def dangling_by_reason(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for d in self.dangling:
            out[d.reason] = out.get(d.reason, 0) + 1
        return out

    def counts(self) -> dict[str, int]:
        return {
            "jobs": len(self.jobs),
            "datasets": len(self.datasets),
            "fields": sum(len(d.fields) for d in self.datasets.values()),
            "dataFlows": len(self.data_flows),
            "fieldFlows": self.field_flow_count(),
            "orchestrationFlows": len(self.orchestration_flows),
            "routines": len(self.routines),
            "qualityChecks": len(self.quality_checks),
            "danglingFlows": len(self.dangling),
        }
