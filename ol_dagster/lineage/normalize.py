"""Accepted events -> ``LineageGraph``: what the catalog will be told about one batch.

Events are combined per run (``runs.py``), symlinks are resolved so one physical object is one
dataset, and each run contributes its job (with its SQL as a routine), its datasets with their
fields, data flows input -> output, field flows from column lineage, the orchestration flow to its
parent job, quality checks and run metrics. A flow whose end the batch never describes is dropped
and counted by reason, never silently lost.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from ol_dagster.gcpause import gc_paused
from ol_dagster.lineage.graph import (
    DanglingFlow,
    DataFlow,
    DatasetNode,
    FieldFlow,
    FieldKey,
    FieldNode,
    JobNode,
    LineageGraph,
    NodeKey,
    OrchestrationFlow,
    QualityCheck,
    Routine,
)
from ol_dagster.lineage.naming import normalize_namespace, place_dataset
from ol_dagster.lineage.runs import DatasetView, IoTotals, RunView, combine_runs, facet_items
from ol_dagster.openlineage.envelope import EventKind, EventRejected, parse_event_time
from ol_dagster.openlineage.facets import SchemaField
from ol_dagster.openlineage.models import (
    DatasetEvent,
    Event,
    JobEvent,
    RunEvent,
    parse_event,
)
from ol_dagster.openlineage.run_facts import run_facts_event
from ol_dagster.openlineage.structs import kind_of

# dangling-flow reasons
DATASET_NOT_DESCRIBED = "DATASET_NOT_DESCRIBED"
FIELD_NOT_IN_SCHEMA = "FIELD_NOT_IN_SCHEMA"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _flatten(
    fields: list[SchemaField], prefix: str = "", strings: dict[str, str] | None = None
) -> Iterable[FieldNode]:
    for i, f in enumerate(fields):
        path = f"{prefix}{f.name}" if prefix else f.name
        kind = f.type
        if strings is not None:
            path = strings.setdefault(path, path)
            if kind is not None:
                kind = strings.setdefault(kind, kind)
        yield FieldNode(
            path, kind, f.description, f.ordinal_position or (i + 1 if not prefix else None)
        )
        if f.fields:
            yield from _flatten(f.fields, path + ".", strings)


class _Builder:
    def __init__(self, system_rules: list[tuple[str, str]], plan: _Plan | None = None) -> None:
        self.graph = LineageGraph()
        self.rules = system_rules
        plan = plan or _Plan()
        self.describe = plan.describe  # False: each run's facts only (``add_run``)
        self.describers = plan.describers
        self.pending_out = plan.pending
        self.alias: dict[NodeKey, NodeKey] = {}
        self.pending_field_flows: list[FieldFlow] = []
        # One object per distinct string and key: a batch names each dataset, field and job in
        # many events (each parse makes its own copies), and the graph keeps them in every flow.
        self.strings: dict[str, str] = {}
        self.nodes: dict[NodeKey, NodeKey] = {}
        self.field_keys: dict[FieldKey, FieldKey] = {}
        self.keys: dict[tuple[str, str], NodeKey] = {}  # as sent -> key (aliases applied)

    # -- identity --------------------------------------------------------------------------------

    def key(self, namespace: str, name: str) -> NodeKey:
        k = self.keys.get((namespace, name))
        if k is None:
            k = (normalize_namespace(namespace), name)
            k = self.node_key(self.alias.get(k, k))
            self.keys[(namespace, name)] = k
        return k

    def node_key(self, key: NodeKey) -> NodeKey:
        """The one tuple (of shared strings) standing for ``key`` in this graph."""
        node = self.nodes.get(key)
        if node is None:
            s = self.strings
            node = self.nodes[key] = (s.setdefault(key[0], key[0]), s.setdefault(key[1], key[1]))
        return node

    def field_key(self, node: NodeKey, field: str) -> FieldKey:
        key = (node[0], node[1], field)
        shared = self.field_keys.get(key)
        if shared is None:
            shared = self.field_keys[key] = (
                node[0],
                node[1],
                self.strings.setdefault(field, field),
            )
        return shared

    def learn_symlinks(self, facets: dict[str, Any], namespace: str, name: str) -> None:
        """A TABLE symlink names the physical object (path) as a catalog table: prefer it."""
        symlinks = facets.get("symlinks")
        identifiers = getattr(symlinks, "identifiers", None) or []
        tables = [i for i in identifiers if (i.type or "").upper() == "TABLE"] or identifiers[:1]
        if tables:
            own = (normalize_namespace(namespace), name)
            canonical = (normalize_namespace(tables[0].namespace), tables[0].name)
            if canonical != own:
                self.alias[own] = canonical
                self.keys.clear()  # keys resolved so far may now resolve to ``canonical``

    # -- nodes -----------------------------------------------------------------------------------

    def dataset(self, namespace: str, name: str, facets: dict[str, Any]) -> DatasetNode:
        key = self.key(namespace, name)
        node = self.graph.datasets.get(key)
        if node is None:
            dtype = facets.get("datasetType")
            p = place_dataset(
                key[0],
                key[1],
                dataset_type=getattr(dtype, "datasetType", None),
                system_rules=self.rules,
            )
            s = self.strings
            node = DatasetNode(
                key[0],
                key[1],
                s.setdefault(p.system, p.system),
                s.setdefault(p.schema, p.schema),
                p.name,
                p.type,
            )
            self.graph.datasets[key] = node
        own = (normalize_namespace(namespace), name)
        if own != key:
            node.aliases.add(own)
        doc = facets.get("documentation")
        if doc is not None:
            node.description = doc.description
        owners = facets.get("ownership")
        if owners is not None:
            node.owners = [o.name for o in owners.owners]
        schema = facets.get("schema")
        if schema is not None:
            node.fields = {f.path: f for f in _flatten(schema.fields, "", self.strings)}
            node.has_schema = True
        change = facets.get("lifecycleStateChange")
        if change is not None:
            if change.lifecycleStateChange == "RENAME" and change.previousIdentifier:
                prev = change.previousIdentifier
                node.previous = self.key(prev.namespace, prev.name)
            node.dropped = change.lifecycleStateChange == "DROP"
        return node

    def job(self, view: RunView) -> JobNode:
        key = self.node_key(view.job)
        node = self.graph.jobs.get(key)
        if node is None:
            node = self.graph.jobs[key] = JobNode(*key)
        node.referenced_only = False
        f = view.job_facets
        job_type = f.get("jobType")
        if job_type is not None:
            node.integration = job_type.integration
            node.job_type = job_type.jobType
            node.processing_type = job_type.processingType
        if f.get("documentation") is not None:
            node.description = f["documentation"].description
        if f.get("ownership") is not None:
            node.owners = [o.name for o in f["ownership"].owners]
        if f.get("sourceCodeLocation") is not None:
            node.source_code_location = f["sourceCodeLocation"].url
        sql = f.get("sql")
        if sql is not None:
            self.graph.routines[key] = Routine(key, sql.query, sql.dialect)
        return node

    # -- one run -----------------------------------------------------------------------------------

    def add_run(self, view: RunView) -> None:
        """The run into the graph; not ``describe``: its run facts only (the flows between its
        datasets, its orchestration flow, quality results, metrics), no dataset described."""
        describe = self.describe
        job = self.job(view)
        job_key = self.node_key(job.key)
        if view.run_id is None:  # PERIODIC or COMPLETE_SNAPSHOT windows describe a window only
            self.graph.described_jobs.add(job_key)
        if view.status == "COMPLETE" and view.describes_job:
            self.graph.completed_jobs.add(job_key)
        if describe:
            inputs = [self.dataset(d.namespace, d.name, d.facets).key for d in view.inputs.values()]
            outputs = [
                self.dataset(d.namespace, d.name, d.facets).key for d in view.outputs.values()
            ]
        else:  # the same keys ``dataset`` gives them
            inputs = [self.key(d.namespace, d.name) for d in view.inputs.values()]
            outputs = [self.key(d.namespace, d.name) for d in view.outputs.values()]
        if self.describers is not None:
            for key in (*inputs, *outputs):
                self.describers.setdefault(key, []).append(job_key)
        if view.window_flows is None:
            pairs = ((source, target) for source in inputs for target in outputs)
        else:  # each window's own inputs x outputs
            pairs = ((self.key(*i), self.key(*o)) for i, o in view.window_flows)
        for source, target in pairs:
            if source != target:
                self.graph.data_flows.add(
                    DataFlow(self.node_key(source), self.node_key(target), job_key)
                )
        if describe:
            for out in view.outputs.values():
                self.column_lineage(job_key, out)
        self.orchestration(view, job_key)
        self.quality(view, job_key)
        self.metrics(view, job)

    def column_lineage(self, job: NodeKey, out: DatasetView) -> None:
        lineage = out.facets.get("columnLineage")
        if lineage is None:
            return
        target = self.key(out.namespace, out.name)
        field_key, strings = self.field_key, self.strings
        for out_field, spec in lineage.fields.items():
            target_field = field_key(target, out_field)
            for inp in spec.inputFields:
                t = inp.transformations[0] if inp.transformations else None
                kind = t.type if t else spec.transformationType
                subtype = t.subtype if t else None
                self.pending_field_flows.append(
                    FieldFlow(
                        field_key(self.key(inp.namespace, inp.name), inp.field),
                        target_field,
                        job,
                        strings.setdefault(kind, kind) if kind is not None else None,
                        strings.setdefault(subtype, subtype) if subtype is not None else None,
                    )
                )
        if lineage.dataset:
            out_node = self.graph.datasets[target]
            out_fields = list(out_node.fields) or list(lineage.fields)
            for inp in lineage.dataset:
                t = inp.transformations[0] if inp.transformations else None
                for out_field in out_fields:
                    self.pending_field_flows.append(
                        FieldFlow(
                            field_key(self.key(inp.namespace, inp.name), inp.field),
                            field_key(target, out_field),
                            job,
                            t.type if t else "INDIRECT",
                            t.subtype if t else None,
                        )
                    )

    def orchestration(self, view: RunView, job: NodeKey) -> None:
        parent = view.run_facets.get("parent")
        if parent is None:
            return
        parent_key = self.node_key((parent.job.namespace, parent.job.name))
        if parent_key == job:
            return  # some producers point a run at itself
        root = (
            self.node_key((parent.root.job.namespace, parent.root.job.name))
            if parent.root
            else None
        )
        for key in (parent_key, root):
            if key is not None and key not in self.graph.jobs:
                # known from its child's parent facet only (until an event of its own comes)
                self.graph.jobs[key] = JobNode(*key, referenced_only=True)
        self.graph.orchestration_flows.add(OrchestrationFlow(parent_key, job, root))

    def quality(self, view: RunView, job: NodeKey) -> None:
        for d in (*view.inputs.values(), *view.outputs.values()):
            for facets in (d.facets, d.io_facets):
                assertions = facets.get("dataQualityAssertions")
                if assertions is None:
                    continue
                key = self.key(d.namespace, d.name)
                for a in assertions.assertions:
                    check_key = (job, key, a.assertion, a.column)
                    self.graph.quality_checks[check_key] = QualityCheck(
                        job, key, a.assertion, a.column, a.success, a.severity, view.last_event
                    )

    def metrics(self, view: RunView, job: JobNode) -> None:
        if view.run_id is None:
            return  # a JobEvent describes the job, not a run
        m = job.metrics
        m.runs += 1
        if view.status == "FAIL":
            m.failures += 1
        start = view.started or view.last_event
        if start is not None:
            m.first_run = start if m.first_run is None else min(m.first_run, start)
            if m.last_run is None or start >= m.last_run:
                m.last_run = start
                m.last_status = view.status or "RUNNING"
                m.last_duration_seconds = (
                    (view.ended - view.started).total_seconds()
                    if view.ended and view.started
                    else None
                )
        io = view.window_io
        if io is None:
            io = IoTotals()
            io.add(
                (d.io_facets for d in view.inputs.values()),
                (d.io_facets for d in view.outputs.values()),
            )
        m.rows_read += io.rows_read
        m.bytes_read += io.bytes_read
        m.rows_written += io.rows_written
        m.bytes_written += io.bytes_written

    def dataset_event(self, event: DatasetEvent) -> None:
        self.dataset(event.dataset.namespace, event.dataset.name, facet_items(event.dataset.facets))

    # -- finish ------------------------------------------------------------------------------

    def resolve_field_flows(self) -> None:
        if self.pending_out is not None:  # resolved by the caller, against other datasets too
            self.pending_out.extend(self.pending_field_flows)
        else:
            resolve_field_flows(self.graph, self.pending_field_flows)


def resolve_field_flows(graph: LineageGraph, flows: Iterable[FieldFlow]) -> None:
    """Each field flow into the graph, or into its dangling flows when an end is not in it."""
    add = graph.field_flows.add
    for flow in flows:
        reason = _missing_end(graph, flow.source) or _missing_end(graph, flow.target)
        if reason is None:
            add(flow)
        else:
            graph.dangling.append(
                DanglingFlow(reason, flow.job, ":".join(flow.source), ":".join(flow.target))
            )


def _missing_end(graph: LineageGraph, end: tuple[str, str, str]) -> str | None:
    """Why a field-flow end is not in the graph, or None (adding fields only lineage names)."""
    node = graph.datasets.get(end[:2])
    if node is None:
        return DATASET_NOT_DESCRIBED
    if end[2] not in node.fields:
        if node.has_schema:
            return FIELD_NOT_IN_SCHEMA
        node.fields[end[2]] = FieldNode(end[2])  # known only from lineage
    return None


def parse_all(raw_events: Iterable[bytes | str | Event]) -> tuple[list[Event], list[str]]:
    events: list[Event] = []
    errors: list[str] = []
    for i, raw in enumerate(raw_events):
        if isinstance(raw, RunEvent | JobEvent | DatasetEvent):
            events.append(raw)
            continue
        try:
            events.append(parse_event(raw))
        except EventRejected as exc:
            errors.append(f"event {i}: {exc}")
    return events, errors


Describers = dict[NodeKey, list[NodeKey]]  # dataset -> the job of each run naming it, in order


def normalize(
    raw_events: Iterable[bytes | str | Event],
    *,
    dataset_systems: list[tuple[str, str]] = (),  # type: ignore[assignment]
    describers: Describers | None = None,
    pending: list[FieldFlow] | None = None,
) -> LineageGraph:
    """Build the graph of a batch; ``dataset_systems`` are (namespace pattern, System) rules.
    ``describers``: filled with the jobs whose runs name each dataset, in the order they
    describe it. ``pending``: the field flows are left there, not resolved."""
    with gc_paused():
        plan = _Plan(describers=describers, pending=pending)
        return _normalize(raw_events, plan, dataset_systems)


def normalize_run_facts(
    raw_events: Iterable[bytes | str], *, describers: Describers | None = None
) -> LineageGraph:
    """What a batch's runs say, the way ``normalize`` combines and counts them: its jobs with
    their metrics, the data flows between its datasets, orchestration flows, quality results,
    described and completed jobs; no dataset nor job described. Each event is read for its run
    facts only (``run_facts_event``), else whole."""
    with gc_paused():
        plan = _Plan(reader=run_facts_event, describe=False, describers=describers)
        return _normalize(raw_events, plan, [])


def _normalize(
    raw_events: Iterable[bytes | str | Event],
    plan: _Plan,
    dataset_systems: list[tuple[str, str]],
) -> LineageGraph:
    for raw in raw_events:
        plan.add(raw)
    try:
        return plan.build(list(dataset_systems))
    except _Restart:
        # an event the first pass took for valid is not: the plan may group or order events
        # differently from the models, so the batch is normalized all at once instead
        if plan.describers is not None:
            plan.describers.clear()
        return _normalize_at_once(plan.unpacked(), dataset_systems, plan)


def _normalize_at_once(
    raw_events: Iterable[bytes | str | Event],
    dataset_systems: list[tuple[str, str]],
    plan: _Plan | None = None,
) -> LineageGraph:
    """Every event parsed, then combined and built: simple, but it holds every typed event."""
    events, errors = parse_all(raw_events)
    builder = _Builder(list(dataset_systems), plan)
    dataset_events = [e for e in events if isinstance(e, DatasetEvent)]
    views = combine_runs([e for e in events if not isinstance(e, DatasetEvent)])
    # aliases first, so every mention of a physical object lands on the same node
    for event in dataset_events:
        d = event.dataset
        builder.learn_symlinks(facet_items(d.facets), d.namespace, d.name)
    for view in views:
        for d in (*view.inputs.values(), *view.outputs.values()):
            builder.learn_symlinks(d.facets, d.namespace, d.name)
    # in time order, so the latest description of a job or dataset wins whatever the arrival order
    # (sorted is stable: equal times keep their arrival order)
    timeline: list[tuple[datetime, DatasetEvent | RunView]] = []
    timeline.extend((e.eventTime, e) for e in dataset_events)
    timeline.extend((v.last_event or _EPOCH, v) for v in views)
    timeline.sort(key=lambda item: item[0])
    for _, item in timeline:
        if isinstance(item, DatasetEvent):
            builder.dataset_event(item)
        else:
            builder.add_run(item)
    builder.resolve_field_flows()
    builder.graph.skipped_events = errors
    return builder.graph


# -- the same, one run at a time -------------------------------------------------------------------
#
# Holding every typed event of a batch costs about ten times the batch's bytes (a dbt event with
# column lineage is ~100 model instances). So a first pass keeps each event's bytes and reads
# only what grouping and ordering need (kind, run, job, eventTime, whether it names symlinks) from
# ``orjson.loads``; a second pass parses the events of one run at a time, in the order
# ``_normalize_at_once`` would process them, and builds from them: the same graph with one run's
# typed events in memory. Parsing is ``parse_event(raw, custom_facets=False)``: one msgspec pass
# from the bytes, without the custom facets nothing here reads (``benchmarks/check_fast_paths.py``
# compares it with the full parse). An event that does not look valid in the first pass is parsed
# there with ``parse_event`` (its rejection is reported as before); one that looked valid and is
# not sends the batch back to ``_normalize_at_once``.


class _Restart(Exception):
    """An event taken for valid by the first pass is not."""


# Up to this many bytes of events are held as they came; beyond, each is held zlib-compressed
# (level 1: ~6x smaller for lineage JSON, ~60 us an event to compress and inflate again), so a
# large batch costs the second pass a fraction of its size, not its size again.
_HELD_AS_IS = 64 * 2**20


class _Packed(bytes):
    """An event's bytes, compressed while they wait for the second pass."""

    __slots__ = ()


@dataclass(slots=True)
class _Group:
    """The events of one run (or one JobEvent), by input index, in arrival order."""

    indexes: list[int]
    last: datetime
    symlinks: bool


@dataclass(slots=True)
class _Plan:
    inputs: list[bytes | str | Event] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    held: int = 0  # bytes of events held as they came
    parsed: dict[int, Event] = field(default_factory=dict)  # events the first pass had to parse
    times: dict[int, datetime] = field(default_factory=dict)
    dataset_events: list[tuple[int, bool]] = field(default_factory=list)  # (index, symlinks)
    groups: list[_Group] = field(default_factory=list)  # in order of first appearance
    runs: dict[tuple[str, str, str], _Group] = field(default_factory=dict)
    # reads an event's bytes into the typed event the build needs (None: parsed whole as usual)
    reader: Callable[[bytes | str], Event | None] | None = None
    describe: bool = True  # False: each run's facts only (``_Builder.add_run``)
    describers: Describers | None = None  # filled, when given (``normalize``)
    pending: list[FieldFlow] | None = None  # the field flows left here, when given

    def add(self, raw: bytes | str | Event) -> None:
        index = len(self.inputs)
        if self.reader is not None and isinstance(raw, bytes | str):
            raw = self.reader(raw) or raw
        if type(raw) is bytes and self.held > _HELD_AS_IS:
            self.inputs.append(_Packed(zlib.compress(raw, 1)))
        else:
            self.inputs.append(raw)
            if isinstance(raw, bytes | str):
                self.held += len(raw)
        peek = _peek(raw) if isinstance(raw, bytes | str) else None
        if peek is None:
            if isinstance(raw, RunEvent | JobEvent | DatasetEvent):
                event = raw
            else:
                try:
                    event = parse_event(raw)
                except EventRejected as exc:
                    self.errors.append(f"event {index}: {exc}")
                    return
                self.parsed[index] = event
            peek = _peek_event(event)
        kind, run_key, time, symlinks = peek
        self.times[index] = time
        if kind is EventKind.DATASET:
            self.dataset_events.append((index, symlinks))
        elif run_key is None:  # a JobEvent: a view of its own
            self.groups.append(_Group([index], time, symlinks))
        else:
            group = self.runs.get(run_key)
            if group is None:
                group = self.runs[run_key] = _Group([index], time, symlinks)
                self.groups.append(group)
            else:
                group.indexes.append(index)
                group.last = max(group.last, time)
                group.symlinks = group.symlinks or symlinks

    def event(self, index: int) -> Event:
        event = self.parsed.get(index)
        if event is not None:
            return event
        raw = self.inputs[index]
        if isinstance(raw, RunEvent | JobEvent | DatasetEvent):
            return raw
        if type(raw) is _Packed:
            raw = zlib.decompress(raw)
        try:
            event = parse_event(raw, custom_facets=False)  # type: ignore[arg-type]
        except EventRejected:
            raise _Restart from None
        if event.eventTime != self.times[index]:
            raise _Restart
        return event

    def unpacked(self) -> Iterator[bytes | str | Event]:
        for raw in self.inputs:
            yield zlib.decompress(raw) if type(raw) is _Packed else raw

    def view(self, group: _Group) -> RunView:
        events = [self.event(i) for i in group.indexes]
        views = combine_runs(events)  # type: ignore[arg-type]
        if len(views) != 1 or views[0].last_event != group.last:
            raise _Restart
        return views[0]

    def build(self, dataset_systems: list[tuple[str, str]]) -> LineageGraph:
        builder = _Builder(dataset_systems, self)
        # aliases first, so every mention of a physical object lands on the same node (a run
        # naming no symlinks facet teaches none)
        for index, symlinks in self.dataset_events:
            if symlinks:
                d = self.dataset_event(index).dataset
                builder.learn_symlinks(facet_items(d.facets), d.namespace, d.name)
        for group in self.groups:
            if group.symlinks:
                view = self.view(group)
                for d in (*view.inputs.values(), *view.outputs.values()):
                    builder.learn_symlinks(d.facets, d.namespace, d.name)
        # in time order, so the latest description of a job or dataset wins whatever the arrival
        # order (sorted is stable: equal times keep their arrival order)
        timeline: list[tuple[datetime, int | _Group]] = []
        timeline.extend((self.times[index], index) for index, _ in self.dataset_events)
        timeline.extend((group.last, group) for group in self.groups)
        timeline.sort(key=lambda item: item[0])
        for _, item in timeline:
            if isinstance(item, int):
                builder.dataset_event(self.dataset_event(item))
            else:
                builder.add_run(self.view(item))
        builder.resolve_field_flows()
        builder.graph.skipped_events = self.errors
        return builder.graph

    def dataset_event(self, index: int) -> DatasetEvent:
        event = self.event(index)
        if not isinstance(event, DatasetEvent):
            raise _Restart
        return event


def _names_symlinks(datasets: object) -> bool:
    if type(datasets) is not list:
        return False
    for d in datasets:
        facets = d.get("facets") if type(d) is dict else None
        if type(facets) is dict and "symlinks" in facets:
            return True
    return False


def _peek(raw: bytes | str) -> tuple[EventKind, tuple[str, str, str] | None, datetime, bool] | None:
    """What grouping and ordering need of an event, as the models would read it, if it looks
    valid: (kind, run key of a RunEvent, eventTime, whether a dataset names symlinks)."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict:
        return None
    kind = kind_of(obj)
    if kind is None:
        return None
    try:
        time = parse_event_time(obj.get("eventTime"))
    except EventRejected:
        return None
    if kind == EventKind.DATASET:
        return EventKind.DATASET, None, time, _names_symlinks([obj.get("dataset")])
    symlinks = _names_symlinks(obj.get("inputs")) or _names_symlinks(obj.get("outputs"))
    if kind == EventKind.JOB:
        return EventKind.JOB, None, time, symlinks
    run, job = obj.get("run"), obj.get("job")
    if type(run) is not dict or type(job) is not dict:
        return None
    key = (run.get("runId"), job.get("namespace"), job.get("name"))
    if not all(type(part) is str for part in key):
        return None
    return EventKind.RUN, key, time, symlinks  # type: ignore[return-value]


def _peek_event(
    event: Event,
) -> tuple[EventKind, tuple[str, str, str] | None, datetime, bool]:
    if isinstance(event, DatasetEvent):
        return EventKind.DATASET, None, event.eventTime, True
    symlinks = any(d.facets.symlinks is not None for d in (*event.inputs, *event.outputs))
    if isinstance(event, JobEvent):
        return EventKind.JOB, None, event.eventTime, symlinks
    return (
        EventKind.RUN,
        (event.run.runId, event.job.namespace, event.job.name),
        event.eventTime,
        symlinks,
    )
