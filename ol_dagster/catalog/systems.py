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
from ol_dagster.ownership import admits, own_place
from ol_dagster.sync_definition import CleanupMode, DatasetSystemRule, SyncDefinition


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
        # a System another definition claimed: its datasets of this one go to one of its own,
        # with the rule's policy (``ownership.own_place``)
        if system in (rule.system, own_place(definition, rule.system)):
            return rule
    return DatasetSystemRule(namespace=system, system=system, cleanupMode=CleanupMode.NONE)


def foreign_job(definition: SyncDefinition, job: JobNode) -> bool:
    """A job known only from a child's parent facet, in a namespace this definition does not
    own: another owner's job, never created, touched or removed in this definition's Systems."""
    return job.referenced_only and not admits(definition, job.namespace)


def owned_jobs(graph: LineageGraph, definition: SyncDefinition) -> dict[NodeKey, str]:
    """The graph's jobs this definition writes, each with its job System (foreign ones left
    out; a parent-only job of an owned namespace is the definition's job too)."""
    return {
        key: job_system_for(definition, key[0])
        for key, job in graph.jobs.items()
        if not foreign_job(definition, job)
    }


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
