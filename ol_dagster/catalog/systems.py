"""Which catalog System an object belongs to, from the definition's rules.

Job entities and routines of a namespace live in its job System: the first ``jobSystems`` rule
whose pattern matches the namespace, else the definition's ``openLineageSystem``. A dataset lives in
the System of the first ``datasetSystems`` rule matching its namespace, else in a System named after
the namespace itself (cleanupMode NONE: never cleaned unless a rule says so).
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from ol_dagster.settings import CleanupMode, DatasetSystemRule, Definition


def job_system_for(definition: Definition, job_namespace: str) -> str:
    for rule in definition.jobSystems:
        if fnmatchcase(job_namespace, rule.namespaces):
            return rule.system
    return definition.job_system


def dataset_rule_for(definition: Definition, namespace: str) -> DatasetSystemRule:
    for rule in definition.datasetSystems:
        if fnmatchcase(namespace, rule.namespace) or namespace.rstrip("/") == rule.namespace.rstrip(
            "/"
        ):
            return rule
    return DatasetSystemRule(namespace=namespace, system=namespace, cleanupMode=CleanupMode.NONE)
