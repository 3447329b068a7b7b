"""The lineage graph every catalog receives: jobs, datasets, fields and the flows between them.

It is the contract between normalization and the catalogs: whatever the producer (Spark, Airflow,
dbt...), a batch ends up as these objects, keyed by OpenLineage identity (namespace, name). Each
flow carries the scope that owns it in the catalog (``ol:<job namespace>|<job name>``, and
``...#orchestration`` for parent/child links), which is what the cutoff cleanup removes by.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

NodeKey = tuple[str, str]  # (namespace, name)
FieldKey = tuple[str, str, str]  # (namespace, name, field path)


def flow_scope(job_namespace: str, job_name: str) -> str:
    """The scope owning a job's data flows (seed: ``ol:<job namespace>|<job name>``)."""
    return f"ol:{job_namespace}|{job_name}"


def orchestration_scope(job_namespace: str, job_name: str) -> str:
    return f"{flow_scope(job_namespace, job_name)}#orchestration"


def job_of_scope(scope: str) -> NodeKey | None:
    """The (namespace, name) of the job whose data or orchestration flows a scope holds; None
    for a scope that is not an OpenLineage one."""
    if not scope.startswith("ol:") or "|" not in scope:
        return None
    namespace, _, name = scope[3:].partition("|")
    return namespace, name.removesuffix("#orchestration")


def scope_prefix(job_namespace: str) -> str:
    """The prefix that covers every scope of a job namespace, data and orchestration flows."""
    return f"ol:{job_namespace}|"


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
    def scope(self) -> str:
        return flow_scope(*self.job)


@dataclass(slots=True, unsafe_hash=True)  # a value: see DataFlow
class OrchestrationFlow:
    """Parent job -> child job (Airflow DAG -> task, Spark application -> action)."""

    parent: NodeKey
    child: NodeKey
    root: NodeKey | None = None

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


@dataclass(slots=True)
class LineageGraph:
    jobs: dict[NodeKey, JobNode] = field(default_factory=dict)
    datasets: dict[NodeKey, DatasetNode] = field(default_factory=dict)
    data_flows: set[DataFlow] = field(default_factory=set)
    field_flows: set[FieldFlow] = field(default_factory=set)
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
            "fieldFlows": len(self.field_flows),
            "orchestrationFlows": len(self.orchestration_flows),
            "routines": len(self.routines),
            "qualityChecks": len(self.quality_checks),
            "danglingFlows": len(self.dangling),
        }
