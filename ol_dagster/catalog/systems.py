"""Which catalog System an object belongs to, from the definition's rules.

Job entities and routines of a namespace live in its job System: the first ``jobSystems`` rule
whose pattern matches the namespace, else the definition's ``openLineageSystem``. A dataset lives in
the System normalization placed it in (the first matching ``datasetSystems`` rule, else the
namespace itself); that System's policy is its rule's, else cleanupMode NONE (never cleaned).
"""

from __future__ import annotations

from fnmatch import fnmatchcase

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
