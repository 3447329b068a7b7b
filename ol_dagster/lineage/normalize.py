"""Accepted events -> ``LineageGraph``.

A job's events are combined (inputs and outputs of every event of the batch are unioned: events of
a run are accumulative unless the producer says otherwise), then each input is linked to each
output through the job.
"""

from __future__ import annotations

from collections.abc import Iterable

import pydantic_core

from ol_dagster.lineage.graph import DataFlow, DatasetNode, JobNode, LineageGraph, NodeKey


def _datasets(value: object) -> list[NodeKey]:
    out: list[NodeKey] = []
    if isinstance(value, list):
        for d in value:
            if isinstance(d, dict):
                ns, name = d.get("namespace"), d.get("name")
                if isinstance(ns, str) and isinstance(name, str) and ns and name:
                    out.append((ns, name))
    return out


def normalize(raw_events: Iterable[bytes]) -> LineageGraph:
    graph = LineageGraph()
    io: dict[NodeKey, tuple[set[NodeKey], set[NodeKey]]] = {}
    for raw in raw_events:
        event = pydantic_core.from_json(raw)
        if not isinstance(event, dict):
            continue
        job = event.get("job")
        inputs, outputs = _datasets(event.get("inputs")), _datasets(event.get("outputs"))
        for key in (*inputs, *outputs):
            graph.datasets.setdefault(key, DatasetNode(*key))
        if "dataset" in event and isinstance(event["dataset"], dict):
            for key in _datasets([event["dataset"]]):
                graph.datasets.setdefault(key, DatasetNode(*key))
        if not isinstance(job, dict):
            continue
        key = (job.get("namespace"), job.get("name"))
        if not all(isinstance(k, str) and k for k in key):
            continue
        node = graph.jobs.setdefault(key, JobNode(*key))  # type: ignore[arg-type]
        facets = job.get("facets") if isinstance(job.get("facets"), dict) else {}
        job_type = facets.get("jobType") if isinstance(facets, dict) else None
        if isinstance(job_type, dict):
            node.integration = job_type.get("integration") or node.integration
            node.job_type = job_type.get("jobType") or node.job_type
            node.processing_type = job_type.get("processingType") or node.processing_type
        doc = facets.get("documentation") if isinstance(facets, dict) else None
        if isinstance(doc, dict) and isinstance(doc.get("description"), str):
            node.description = doc["description"]
        ins, outs = io.setdefault(key, (set(), set()))  # type: ignore[arg-type]
        ins.update(inputs)
        outs.update(outputs)
    for job_key, (ins, outs) in io.items():
        for source in ins:
            for target in outs:
                graph.data_flows.add(DataFlow(source, target, job_key))
    return graph
