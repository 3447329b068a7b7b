"""Each job's and dataset's part of a lineage graph, as the change set compares them.

A job's part is what a person would call the job's lineage: the datasets it reads and writes, its
data flows (input -> output), its column flows and its SQL. A dataset's part is its field list,
known only when a run carried its whole schema (else None: unknown, not empty). A part is plain
JSON, kept in the store between syncs, and its digest tells an unchanged one without reading it.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import orjson

from ol_dagster.lineage.graph import LineageGraph, NodeKey

JobPart = dict[str, Any]  # inputs, outputs, dataFlows, fieldFlows, sql
DatasetPart = dict[str, Any]  # fields (None: not known)


def digest(part: dict[str, Any]) -> str:
    return hashlib.blake2b(orjson.dumps(part), digest_size=16).hexdigest()


def job_parts(graph: LineageGraph, admitted: Callable[[str], bool]) -> dict[NodeKey, JobPart]:
    """The part of each job the graph describes (not a parent named only by its children) in a
    namespace ``admitted`` (the definition's own)."""
    jobs = {k for k, j in graph.jobs.items() if not j.referenced_only and admitted(k[0])}
    flows: dict[NodeKey, set[tuple[NodeKey, NodeKey]]] = defaultdict(set)
    for f in graph.data_flows:
        if f.job in jobs:
            flows[f.job].add((f.source, f.target))
    columns: dict[NodeKey, set[tuple[tuple[str, str, str], tuple[str, str, str]]]] = defaultdict(
        set
    )
    for f in graph.field_flows:
        if f.job in jobs:
            columns[f.job].add((f.source, f.target))
    out: dict[NodeKey, JobPart] = {}
    for key in jobs:
        pairs = flows.get(key, set())
        routine = graph.routines.get(key)
        out[key] = {
            "inputs": sorted({s for s, _ in pairs}),
            "outputs": sorted({t for _, t in pairs}),
            "dataFlows": sorted(pairs),
            "fieldFlows": sorted(columns.get(key, set())),
            "sql": routine.statement if routine is not None else None,
        }
    return {k: _as_json(p) for k, p in out.items()}


def dataset_parts(graph: LineageGraph) -> dict[NodeKey, DatasetPart]:
    """Each dataset's fields, when a run carried its whole schema."""
    return {
        key: {"fields": sorted(d.fields) if d.has_schema else None}
        for key, d in graph.datasets.items()
        if not d.dropped
    }


def dropped_datasets(graph: LineageGraph) -> list[NodeKey]:
    """The datasets a DROP named."""
    return sorted(key for key, d in graph.datasets.items() if d.dropped)


def _as_json(part: dict[str, Any]) -> dict[str, Any]:
    """Tuples as lists, as the part reads back from the store (so a digest is the same)."""
    loaded: dict[str, Any] = orjson.loads(orjson.dumps(part))
    return loaded
