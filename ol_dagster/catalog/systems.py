"""Which catalog System an object belongs to, from the definition's rules.

Job entities and routines of a namespace live in its job System: the first ``jobSystems`` rule
whose pattern matches the namespace, else the definition's ``openLineageSystem``. A dataset lives in
the System normalization placed it in (the first matching ``datasetSystems`` rule, else the
namespace itself); that System's policy is its rule's, else cleanupMode NONE (never cleaned).
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from ol_dagster.lineage import LineageGraph
from ol_dagster.settings import CleanupMode, DatasetSystemRule, Definition


def job_system_for(definition: Definition, job_namespace: str) -> str:
    for rule in definition.jobSystems:
        if fnmatchcase(job_namespace, rule.namespaces):
            return rule.system
    return definition.job_system


def dataset_system_rules(definition: Definition) -> list[tuple[str, str]]:
    """The (namespace pattern, System) rules normalization places datasets with."""
    return [(r.namespace, r.system) for r in definition.datasetSystems]


def dataset_policy(definition: Definition, system: str) -> DatasetSystemRule:
    for rule in definition.datasetSystems:
        if rule.system == system:
            return rule
    return DatasetSystemRule(namespace=system, system=system, cleanupMode=CleanupMode.NONE)


def owned_by(definition: Definition, properties: dict) -> bool:
    """A System this definition created (``openLineageOwner`` is its uuid): the only dataset
    Systems in which it may remove, drop or rename anything. A System without an owner is not
    owned."""
    return properties.get("openLineageOwner") == str(definition.uuid)


def wanted_systems(graph: LineageGraph, definition: Definition) -> dict[str, dict]:
    """The Systems an upload of ``graph`` uses, with the properties each gets when created:
    job Systems carry ``openLineageJobSystem`` = [uuid]; dataset Systems ``openLineageOwner`` and
    the policy of their ``datasetSystems`` rule (cleanupMode NONE by default)."""
    owner = str(definition.uuid)
    wanted: dict[str, dict] = {
        job_system_for(definition, ns): {"kind": "job", "openLineageJobSystem": [owner]}
        for ns in graph.job_namespaces
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
