"""Normalization: accepted OpenLineage events become one job/dataset graph per batch."""

from ol_dagster.lineage.graph import DataFlow, DatasetNode, JobNode, LineageGraph, flow_scope
from ol_dagster.lineage.normalize import normalize

__all__ = ["DataFlow", "DatasetNode", "JobNode", "LineageGraph", "flow_scope", "normalize"]
