"""A kept digest is taken only when hashing the job again would give it (``changes.Kept``).

An edited snapshot takes most jobs unchanged from the last graph (``LineageGraph.
unchanged_since``); the upload then takes the digests it kept for them, unless the catalog
identities around them moved: their System, their parents' Systems, the System, schema or name of
a dataset they link, or two of them now sharing one identity. The property: for any graph and any
later graph, the digests with the kept ones taken are those hashing every job from scratch gives.
The test knows only the graphs: it hands over the kept digest of every job whose own parts
(attributes, SQL, data, field and orchestration flows) it sees unchanged, whatever else moved,
with names as platforms send them (case variants, ``|``, ``#``, ``?``, a combining accent).
"""

from __future__ import annotations

import copy
from dataclasses import replace
from functools import partial
from operator import ne
from typing import Any

from hypothesis import HealthCheck, event, given, note
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from ol_dagster.catalog.embedded import changes
from ol_dagster.lineage import LineageGraph
from ol_dagster.lineage.graph import (
    DataFlow,
    DatasetNode,
    FieldFlow,
    FieldNode,
    JobNode,
    NodeKey,
    OrchestrationFlow,
    Routine,
)

NAMESPACES = ("etl", "ETL", "etl|x", "e\u0301tl")
NAMES = ("a", "A", "a#b", "a?b", "b|c")
SYSTEMS = ("wh", "WH", "lake")
SCHEMAS = ("public", "Public", "s|t")
FIELD_NAMES = ("id", "ID", "v", "v#1")
TEXT = st.none() | st.sampled_from(["", "x", "X", "x|y"])
OWNERS = st.lists(st.sampled_from(["o", "O"]), max_size=2)

JOB_ATTRS = (
    "integration",
    "job_type",
    "processing_type",
    "description",
    "owners",
    "source_code_location",
)
DATASET_KEYS = [(ns, n) for ns in ("pg://h", "PG://h", "s3://b?x") for n in NAMES[:3]]
JOB_KEYS = [(ns, n) for ns in NAMESPACES[:3] for n in NAMES[:3]]


@st.composite
def datasets(draw: st.DrawFn, key: NodeKey) -> DatasetNode:
    fields = draw(st.lists(st.sampled_from(FIELD_NAMES), min_size=1, max_size=3, unique=True))
    return DatasetNode(
        key[0],
        key[1],
        system=draw(st.sampled_from(SYSTEMS)),
        schema=draw(st.sampled_from(SCHEMAS)),
        object_name=draw(st.sampled_from(NAMES)),
        type=draw(st.sampled_from(["table", "TABLE", "view"])),
        description=draw(TEXT),
        owners=draw(OWNERS),
        fields={f: FieldNode(f, draw(TEXT), draw(TEXT), i) for i, f in enumerate(fields)},
        has_schema=draw(st.booleans()),
    )


@st.composite
def jobs(draw: st.DrawFn, key: NodeKey) -> JobNode:
    return JobNode(
        key[0],
        key[1],
        integration=draw(TEXT),
        job_type=draw(TEXT),
        processing_type=draw(TEXT),
        description=draw(TEXT),
        owners=draw(OWNERS),
        source_code_location=draw(TEXT),
    )


def _field_flows(draw: st.DrawFn, job: NodeKey, ds: dict[NodeKey, DatasetNode]) -> set[FieldFlow]:
    ends = [(*k, f) for k, d in ds.items() for f in d.fields]
    pairs = draw(st.lists(st.tuples(st.sampled_from(ends), st.sampled_from(ends)), max_size=4))
    labels = st.none() | st.sampled_from(["DIRECT", "INDIRECT"])
    return {FieldFlow(a, b, job, draw(labels), draw(labels)) for a, b in pairs}


@st.composite
def graphs(draw: st.DrawFn) -> tuple[LineageGraph, dict[NodeKey, str]]:
    ds_keys = draw(st.lists(st.sampled_from(DATASET_KEYS), min_size=1, max_size=5, unique=True))
    job_keys = draw(st.lists(st.sampled_from(JOB_KEYS), min_size=1, max_size=5, unique=True))
    g = LineageGraph()
    for k in ds_keys:
        g.datasets[k] = draw(datasets(k))
    for k in job_keys:
        g.jobs[k] = draw(jobs(k))
        if draw(st.booleans()):
            g.routines[k] = Routine(k, draw(st.sampled_from(["select 1", "SELECT 1"])), draw(TEXT))
        for a, b in draw(st.lists(st.tuples(*[st.sampled_from(ds_keys)] * 2), max_size=3)):
            g.data_flows.add(DataFlow(a, b, k))
        g.field_flows |= _field_flows(draw, k, g.datasets)
    for parent, child in draw(st.lists(st.tuples(*[st.sampled_from(job_keys)] * 2), max_size=4)):
        g.orchestration_flows.add(
            OrchestrationFlow(parent, child, draw(st.none() | st.just(parent)))
        )
    systems = {k: draw(st.sampled_from(SYSTEMS)) for k in job_keys}
    return g, systems


@st.composite
def edits(draw: st.DrawFn, graph: LineageGraph, systems: dict[NodeKey, str]) -> tuple[Any, ...]:
    """The graph a later snapshot gives: each job and dataset possibly changed in one way."""
    g = copy.deepcopy(graph)
    js = dict(systems)
    for k in list(g.datasets):
        what = draw(st.sampled_from(["none", "none", "system", "schema", "object", "attrs"]))
        d = g.datasets[k]
        if what == "system":
            g.datasets[k] = replace(d, system=draw(st.sampled_from(SYSTEMS)))
        elif what == "schema":
            g.datasets[k] = replace(d, schema=draw(st.sampled_from(SCHEMAS)))
        elif what == "object":
            g.datasets[k] = replace(d, object_name=draw(st.sampled_from(NAMES)))
        elif what == "attrs":
            g.datasets[k] = replace(d, description=draw(TEXT), has_schema=draw(st.booleans()))
    for k in draw(st.lists(st.sampled_from(DATASET_KEYS), max_size=2)):  # new datasets
        if k not in g.datasets:
            g.datasets[k] = draw(datasets(k))
    keys = list(g.datasets)
    for k in list(g.jobs):
        what = draw(
            st.sampled_from(
                [
                    "none",
                    "none",
                    "none",
                    "attrs",
                    "sql",
                    "flows",
                    "parents",
                    "system",
                    "system",
                    "fields",
                ]
            )
        )
        if what == "attrs":  # one of them, to another value: the others as they were
            attr = draw(st.sampled_from(JOB_ATTRS))
            values = OWNERS if attr == "owners" else TEXT
            old = getattr(g.jobs[k], attr)
            g.jobs[k] = replace(g.jobs[k], **{attr: draw(values.filter(partial(ne, old)))})
        elif what == "sql":
            if k in g.routines and draw(st.booleans()):
                del g.routines[k]
            else:
                g.routines[k] = Routine(k, draw(st.sampled_from(["select 2", "select 1"])), None)
        elif what == "flows":
            g.data_flows = {f for f in g.data_flows if f.job != k}
            for a, b in draw(st.lists(st.tuples(*[st.sampled_from(keys)] * 2), max_size=3)):
                g.data_flows.add(DataFlow(a, b, k))
        elif what == "parents":
            g.orchestration_flows = {o for o in g.orchestration_flows if o.child != k}
            if draw(st.booleans()):
                parent = draw(st.sampled_from(list(g.jobs)))
                g.orchestration_flows.add(OrchestrationFlow(parent, k, None))
        elif what == "system":
            js[k] = draw(st.sampled_from(SYSTEMS))
        elif what == "fields":
            g.field_flows = {f for f in g.field_flows if f.job != k}
            g.field_flows |= _field_flows(draw, k, g.datasets)
    return g, js


def _own_parts(graph: LineageGraph, job: NodeKey) -> tuple[Any, ...]:
    """What the test sees of a job itself: its attributes, SQL, and every flow it owns."""
    return (
        graph.jobs.get(job),
        graph.routines.get(job),
        {(f.source, f.target) for f in graph.data_flows if f.job == job},
        {(o.parent, o.root) for o in graph.orchestration_flows if o.child == job},
        {
            (f.source, f.target, f.transformation, f.subtype)
            for f in graph.field_flows
            if f.job == job
        },
    )


def _kept(
    graph: LineageGraph, systems: dict[NodeKey, str], made: changes.Contents, jobs: set[NodeKey]
) -> changes.Kept:
    return changes.Kept(
        {k: made.jobs[k] for k in jobs if k in made.jobs},
        dict(systems),
        {k: (d.system, d.schema, d.object_name) for k, d in graph.datasets.items()},
    )


@given(data=st.data())
@hypothesis_settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_kept_digest_is_taken_only_when_hashing_again_gives_it(data: st.DataObject) -> None:
    first, systems = data.draw(graphs())
    then = changes.contents(first, systems)
    now, systems_now = data.draw(edits(first, systems))
    unchanged = {
        k for k in now.jobs if k in first.jobs and _own_parts(first, k) == _own_parts(now, k)
    }
    taken = changes.contents(now, systems_now, _kept(first, systems, then, unchanged))
    fresh = changes.contents(now, systems_now)
    note(f"unchanged {sorted(unchanged)}")
    moved = {k for k in now.jobs if systems_now.get(k) != systems.get(k)}
    under = {o.child for o in now.orchestration_flows if o.parent in moved} & unchanged
    event(f"jobs hashed: {len(fresh.jobs)}, unchanged: {len(unchanged)}")
    event(f"unchanged jobs under a parent that moved: {bool(under)}")
    assert taken == fresh  # the digests, and the row counts the stamps expect


def test_a_kept_digest_is_taken_as_it_is_while_the_identities_around_it_stay() -> None:
    """The path is taken: a kept digest that is not what hashing gives (written by hand here) is
    the one given while the job's System and its datasets' identities are as they were; once
    one moves, the job is hashed again."""
    job, ds = ("etl", "kpi"), ("pg://h", "orders")
    g = LineageGraph()
    g.datasets[ds] = DatasetNode(*ds, system="wh", schema="public", object_name="orders")
    g.datasets[ds].fields = {"id": FieldNode("id")}
    g.jobs[job] = JobNode(*job)
    g.field_flows.add(FieldFlow((*ds, "id"), (*ds, "id"), job, "DIRECT"))
    systems = {job: "jobs"}
    made = changes.contents(g, systems)
    forged = changes.Contents({job: replace(made.jobs[job], digest="0" * 32)}, made.datasets)
    kept = _kept(g, systems, forged, {job})

    assert changes.contents(g, systems, kept).jobs[job].digest == "0" * 32
    moved = copy.deepcopy(g)
    moved.datasets[ds] = replace(moved.datasets[ds], schema="Public")  # its identity moved
    assert changes.contents(moved, systems, kept).jobs[job].digest == (
        changes.contents(moved, systems).jobs[job].digest
    )
    assert changes.contents(g, {job: "other"}, kept) == changes.contents(g, {job: "other"})
