"""Each job's and dataset's part of a lineage graph, as the change set compares them.

A job's part is what a person would call the job's lineage: the datasets it reads and writes, its
data flows (input -> output), its column flows and its SQL. A dataset's part is its field list,
known only when a run carried its whole schema (else None: unknown, not empty). A part is plain
JSON, kept in the store between syncs, and its digest tells an unchanged one without reading it.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Collection
from operator import attrgetter
from typing import Any

import orjson

from ol_dagster.lineage.graph import LineageGraph, NodeKey

_flow = attrgetter("job", "source", "target")

JobPart = dict[str, Any]  # inputs, outputs, dataFlows, fieldFlows, sql
DatasetPart = dict[str, Any]  # fields (None: not known)


def digest(part: dict[str, Any]) -> str:
    return hashlib.blake2b(orjson.dumps(part), digest_size=16).hexdigest()


def described_jobs(graph: LineageGraph, admitted: Callable[[str], bool]) -> set[NodeKey]:
    """The jobs that have a part: those the graph describes (not a parent named only by its
    children) in a namespace ``admitted`` (the definition's own)."""
    return {k for k, j in graph.jobs.items() if not j.referenced_only and admitted(k[0])}


def job_parts(
    graph: LineageGraph,
    admitted: Callable[[str], bool],
    only: Collection[NodeKey] | None = None,
) -> dict[NodeKey, JobPart]:
    """The part of each job ``described_jobs`` gives, or of those of them in ``only``."""
    jobs = described_jobs(graph, admitted)
    if only is not None:
        jobs &= set(only)
    # grouped for every job (a snapshot has a million column flows: one pass, in C where it can)
    flows: dict[NodeKey, set[tuple[NodeKey, NodeKey]]] = defaultdict(set)
    columns: dict[NodeKey, set[Any]] = defaultdict(set)
    if only is None:
        for flow_set, grouped in ((graph.data_flows, flows), (graph.field_flows, columns)):
            for job, source, target in map(_flow, flow_set):
                grouped[job].add((source, target))
    elif jobs:  # a few jobs: the flows of the others are only looked at (or not built), by job
        for job, source, target in map(_flow, [f for f in graph.data_flows if f.job in jobs]):
            flows[job].add((source, target))
        for job, source, target in map(_flow, graph.field_flows_of(jobs)):
            columns[job].add((source, target))
    out: dict[NodeKey, JobPart] = {}
    empty: set[Any] = set()
    for key in jobs:
        pairs = flows.get(key, empty)
        routine = graph.routines.get(key)
        # tuples: serialized as the lists the store gives back, so digests agree
        out[key] = {
            "inputs": sorted({s for s, _ in pairs}),
            "outputs": sorted({t for _, t in pairs}),
            "dataFlows": sorted(pairs),
            "fieldFlows": sorted(columns.get(key, empty)),
            "sql": routine.statement if routine is not None else None,
        }
    return out


def merged(old: JobPart, new: JobPart) -> JobPart:
    """A job's part after a run that adds to its lineage without replacing it (an additive
    definition's run): what it had and what the run adds; its SQL, the run's when it has one."""
    out: JobPart = {}
    for name in ("inputs", "outputs", "dataFlows", "fieldFlows"):
        both = {orjson.dumps(v) for v in [*old.get(name, []), *new.get(name, [])]}
        out[name] = sorted(orjson.loads(v) for v in both)  # lists alike, whatever they came as
    out["sql"] = new.get("sql") if new.get("sql") is not None else old.get("sql")
    return out


def dataset_parts(
    graph: LineageGraph, only: Collection[NodeKey] | None = None
) -> dict[NodeKey, DatasetPart]:
    """Each dataset's fields, when a run carried its whole schema (of those in ``only``)."""
    datasets = graph.datasets
    keys = datasets if only is None else [k for k in only if k in datasets]
    return {
        key: {"fields": sorted(d.fields) if d.has_schema else None}
        for key in keys
        if not (d := datasets[key]).dropped
    }


def dropped_datasets(graph: LineageGraph) -> list[NodeKey]:
    """The datasets a DROP named."""
    return sorted(key for key, d in graph.datasets.items() if d.dropped)
