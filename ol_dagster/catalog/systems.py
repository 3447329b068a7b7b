"""Which catalog System an object belongs to, from the definition's rules.

Job entities and routines of a namespace live in its job System: the first ``jobSystems`` rule
whose pattern matches the namespace, else the definition's ``openLineageSystem``. A dataset lives in
the System normalization placed it in (the first matching ``datasetSystems`` rule, else the
namespace itself); that System's policy is its rule's, else cleanupMode NONE (never cleaned).
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from ol_dagster.lineage import JobNode, LineageGraph
from ol_dagster.lineage.graph import NodeKey
from ol_dagster.openlineage.envelope import namespace_allowed
from ol_dagster.settings import CleanupMode, DatasetSystemRule, SyncDefinition


def job_system_for(definition: SyncDefinition, job_namespace: str) -> str:
    for rule in definition.jobSystems:
        if fnmatchcase(job_namespace, rule.namespaces):
            return rule.system
    return definition.job_system


def dataset_system_rules(definition: SyncDefinition) -> list[tuple[str, str]]:
    """The (namespace pattern, System) rules normalization places datasets with."""
    return [(r.namespace, r.system) for r in definition.datasetSystems]


def dataset_policy(definition: SyncDefinition, system: str) -> DatasetSystemRule:
    for rule in definition.datasetSystems:
        if rule.system == system:
            return rule
    return DatasetSystemRule(namespace=system, system=system, cleanupMode=CleanupMode.NONE)


def foreign_job(definition: SyncDefinition, job: JobNode) -> bool:
    """A job known only from a child's parent facet, in a namespace this definition does not
    own: another owner's job, never created, touched or removed in this definition's Systems."""
    return job.referenced_only and not namespace_allowed(
        job.namespace, definition.allowedJobNamespaces
    )


def owned_jobs(graph: LineageGraph, definition: SyncDefinition) -> dict[NodeKey, str]:
    """The graph's jobs this definition writes, each with its job System (foreign ones left
    out; a parent-only job of an owned namespace is the definition's job too)."""
    return {
        key: job_system_for(definition, key[0])
        for key, job in graph.jobs.items()
        if not foreign_job(definition, job)
    }


def owned_by(definition: SyncDefinition, properties: dict) -> bool:
    """A System this definition created (``openLineageOwner`` is its uuid): the only dataset
    Systems in which it may remove, drop or rename anything. A System without an owner is not
    owned."""
    return properties.get("openLineageOwner") == str(definition.uuid)


def may_change(definition: SyncDefinition, properties: dict) -> bool:
    """Whether this definition may remove, drop or rename dataset entities in a System: only in
    one it created (``owned_by``) whose policy lets it clean (cleanupMode not NONE). Every path
    that removes or moves a dataset asks this, the cleanup's DROPs and the uploads' RENAMEs."""
    mode = properties.get("cleanupMode", CleanupMode.NONE.value)
    return owned_by(definition, properties) and mode != CleanupMode.NONE.value


def wanted_systems(graph: LineageGraph, definition: SyncDefinition) -> dict[str, dict]:
    """The Systems an upload of ``graph`` uses, with the properties each gets when created:
    job Systems carry ``openLineageJobSystem`` = [uuid]; dataset Systems ``openLineageOwner`` and
    the policy of their ``datasetSystems`` rule (cleanupMode NONE by default)."""
    owner = str(definition.uuid)
    wanted: dict[str, dict] = {
        system: {"kind": "job", "openLineageJobSystem": [owner]}
        for system in sorted(set(owned_jobs(graph, definition).values()))
    }
    for system in sorted({d.system for d in graph.datasets.values()} - set(wanted)):
        rule = dataset_policy(definition, system)
        wanted[system] = {
            "kind": "dataset",
            "openLineageOwner": owner,
            "cleanupMode": rule.cleanupMode.value,
            "cleanupDays": rule.cleanupDays,
        }
    return wanted
