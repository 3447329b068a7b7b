"""The lineage graph every catalog receives: jobs, datasets and the flows between them.

It is the contract between normalization and the catalogs: whatever the producer (Spark, Airflow,
dbt...), a batch ends up as these objects, keyed by OpenLineage identity (namespace, name), and
each flow carries the scope that owns it in the catalog (``ol:<job namespace>|<job name>``), which
is what the cutoff cleanup removes by.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NodeKey = tuple[str, str]  # (namespace, name)


def flow_scope(job_namespace: str, job_name: str) -> str:
    """The scope owning a job's data flows (seed: ``ol:<job namespace>|<job name>``)."""
    return f"ol:{job_namespace}|{job_name}"


def scope_prefix(job_namespace: str) -> str:
    """The prefix that covers every scope of a job namespace, data and orchestration flows."""
    return f"ol:{job_namespace}|"


@dataclass(slots=True)
class JobNode:
    namespace: str
    name: str
    integration: str | None = None
    job_type: str | None = None
    processing_type: str | None = None
    description: str | None = None

    @property
    def key(self) -> NodeKey:
        return (self.namespace, self.name)


@dataclass(slots=True)
class DatasetNode:
    namespace: str
    name: str

    @property
    def key(self) -> NodeKey:
        return (self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class DataFlow:
    """Input dataset -> output dataset, through a job, owned by the job's scope."""

    source: NodeKey
    target: NodeKey
    job: NodeKey

    @property
    def scope(self) -> str:
        return flow_scope(*self.job)


@dataclass(slots=True)
class LineageGraph:
    jobs: dict[NodeKey, JobNode] = field(default_factory=dict)
    datasets: dict[NodeKey, DatasetNode] = field(default_factory=dict)
    data_flows: set[DataFlow] = field(default_factory=set)

    @property
    def job_namespaces(self) -> list[str]:
        return sorted({ns for ns, _ in self.jobs})

    def counts(self) -> dict[str, int]:
        return {
            "jobs": len(self.jobs),
            "datasets": len(self.datasets),
            "dataFlows": len(self.data_flows),
        }
