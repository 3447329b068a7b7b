"""A ``LineageGraph`` as compact bytes, and back: the graph built once per sync, kept between steps.

Normalizing a batch costs about twenty times parsing its events; the ``lineage_graph`` step does
it, and the upload (another Dagster step, possibly another process) loads what it built from the
event store instead of normalizing again. ``unpack(pack(g)) == g`` for every graph: every field of
every node, flow, routine, check and dangling flow, and the order of the dicts and lists.

The form: two parts, each a zlib stream (level 1) of JSON lines, ``[section, rows]`` each, after
an 8-byte length of the first. The first holds the lineage (between a ``["format", FORMAT, flows]``
line and an ``["end"]`` line), the second the run facts (job metrics, quality results, described and
completed jobs; between ``["runFacts", FORMAT]`` and ``["end"]``): a batch whose every job is
reused keeps the earlier graph's first part as it is and packs its own run facts only
(``with_run_facts``). A batch that reuses most jobs (``pack(over=...)``) packs its lineage as a
delta: a stream (between ``["delta", FORMAT]`` and ``["end"]``) holding every section but the
field flows of the jobs whose flows are as they were, which it names (``baseFlows``), followed
by the earlier full lineage stream as it is, whose field flows of those jobs load with it; so
an edited snapshot does not pack its unchanged flows again. Deltas are not stacked: the next
one goes over the same base, until it would pass a quarter of the flows (packed whole then).
The jobs a graph took unchanged from the earlier one (``LineageGraph.unchanged_since``) are one
more line of its lineage (``unchangedSince``), which a base lends no delta.
In each part, every (namespace, name), field end and transformation label
is written once, in a table line written before the first row that refers to it by index;
loaded, each is one shared object again (as ``normalize`` builds them), so a loaded graph costs
no more memory than a built one. Rows go at most ``_ROWS`` a line, so packing and loading hold
one line's lists at a time besides the graph, whatever its size (the field flows of a
100,000-event batch are 1.5 million). Bytes of another format, cut short or damaged are refused
(``PackedGraphError``).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator
from datetime import datetime
from itertools import islice
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
    RunMetrics,
)
from ol_dagster.lineage.unread_flows import UnreadFlows, flows_of

FORMAT = 4
_HEAD = struct.Struct(">Q")  # the length of the lineage part
_ROWS = 20_000  # rows a line (a flat section counts its flows)
_READ = 1 << 20  # compressed bytes inflated at a time
# a delta part is packed while its own flows and the base flows it leaves unused are at most
# this share of the graph's flows; past it the graph is packed whole again
_COMPACT = 0.25


class PackedGraphError(ValueError):
    """Bytes that are not a whole graph packed in this ``FORMAT``."""


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _from_time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


# -- packing ----------------------------------------------------------------------------------


class _Writer:
    def __init__(self) -> None:
        self.z = zlib.compressobj(1)
        self.out: list[bytes] = []
        self.index: dict[NodeKey, int] = {}
        self.fields: dict[FieldKey, int] = {}
        self.labels: dict[str | None, int] = {None: -1}
        # table entries not written yet: written before the next line that may refer to them
        self.new_nodes: list[NodeKey] = []
        self.new_fields: list[Any] = []
        self.new_labels: list[str] = []

    def n(self, key: NodeKey) -> int:
        i = self.index.get(key)
        if i is None:
            i = self.index[key] = len(self.index)
            self.new_nodes.append(key)
        return i

    def opt(self, key: NodeKey | None) -> int | None:
        return None if key is None else self.n(key)

    def field(self, key: FieldKey) -> int:
        i = self.fields.get(key)
        if i is None:
            i = self.fields[key] = len(self.fields)
            self.new_fields.extend((self.n((key[0], key[1])), key[2]))
        return i

    def label(self, value: str | None) -> int:
        i = self.labels.get(value)
        if i is None:
            i = self.labels[value] = len(self.labels) - 1
            self.new_labels.append(value)  # type: ignore[arg-type]  (None is in from the start)
        return i

    def _line(self, value: Any) -> None:
        self.out.append(self.z.compress(orjson.dumps(value) + b"\n"))

    def write(self, section: str, rows: list[Any]) -> None:
        for table, new in (
            ("nodes", self.new_nodes),
            ("fields", self.new_fields),
            ("labels", self.new_labels),
        ):
            if new:
                self._line([table, new])
                new.clear()
        self._line([section, rows])

    def rows(
        self, section: str, rows: Iterable[Any], width: int = 1, per_line: int = _ROWS
    ) -> None:
        """``rows`` (``width`` values each when flat) at most ``per_line`` a line."""
        chunk: list[Any] = []
        limit = per_line * width
        for row in rows:
            if width == 1:
                chunk.append(row)
            else:
                chunk.extend(row)
            if len(chunk) >= limit:
                self.write(section, chunk)
                chunk = []
        if chunk:
            self.write(section, chunk)

    def finish(self) -> bytes:
        self._line(["end"])
        self.out.append(self.z.flush())
        return b"".join(self.out)


def pack(
    graph: LineageGraph, *, over: bytes | None = None, same: Collection[NodeKey] = ()
) -> bytes:
    """``graph`` packed. ``over``: the packed graph ``graph`` took the field flows of the jobs
    ``same`` from as they were (``lineage.reuse.build_reusing``): its lineage is kept as the
    base of a delta part that holds the rest, unless that rest would pass ``_COMPACT`` of the
    flows (then packed whole)."""
    with gc_paused():
        lineage = _delta(graph, over, same) if over is not None and same else None
        if lineage is None:
            w = _Writer()
            w._line(["format", FORMAT, len(graph.field_flows)])
            _pack(graph, w, graph.field_flows)
            lineage = w.finish()
        return _join(lineage, _pack_run_facts(graph))


def _delta(graph: LineageGraph, over: bytes, same: Collection[NodeKey]) -> bytes | None:
    """The delta part of ``graph`` over ``over``'s base lineage, followed by that base; None
    when packing whole costs little more than what the delta would leave unused or repeat."""
    try:
        base, kept, base_flows = _base_of(over)
    except PackedGraphError:
        return None
    # ``same``'s own keys, which the graph's flows may share (told equal by identity)
    keep = set(same) if kept is None else {k for k in same if k in kept}
    own = graph.field_flows_of(keep, but=True)  # the kept ones stay unread, if they are
    total = graph.field_flow_count()
    unused = base_flows - (total - len(own))  # the base's flows of jobs not kept
    if base_flows < 0 or (len(own) + unused) > total * _COMPACT:
        return None
    w = _Writer()
    w._line(["delta", FORMAT])
    w._line(["baseFlows", list(keep)])
    _pack(graph, w, own)
    return w.finish() + base


def _base_of(packed: bytes) -> tuple[bytes, set[NodeKey] | None, int]:
    """The full lineage stream of a packed graph (its base when it holds a delta part), the
    jobs whose base field flows it keeps (None: all) and how many field flows the base holds
    (-1: not said)."""
    lineage = lineage_part(packed)
    try:
        head = _first_line(lineage)
        kept: set[NodeKey] | None = None
        if head == ["delta", FORMAT]:
            # inflated to find where it ends, a chunk at a time; only its first lines are kept
            z, start, text = zlib.decompressobj(), 0, b""
            while not z.eof and start < len(lineage):
                out = z.decompress(lineage[start : start + _READ])
                start += _READ
                if text.count(b"\n") < 2:
                    text += out
            if not z.eof:
                raise PackedGraphError("a delta part cut short")
            lineage = z.unused_data + lineage[start:]
            lines = text.split(b"\n", 2)
            section, rows = orjson.loads(lines[1])
            if section != "baseFlows":
                raise PackedGraphError("a delta part without its base flows")
            kept = {(ns, name) for ns, name in rows}
            head = _first_line(lineage)
        if head[:2] != ["format", FORMAT]:
            raise PackedGraphError(f"not a graph packed in format {FORMAT}")
        return lineage, kept, head[2] if len(head) == 3 and type(head[2]) is int else -1
    except (zlib.error, orjson.JSONDecodeError, ValueError, TypeError, LookupError) as exc:
        raise PackedGraphError(f"not a packed graph: {exc}") from None


def _first_line(stream: bytes) -> Any:
    """The header line of the zlib stream ``stream`` begins with (4 KB of it inflated at most)."""
    return orjson.loads(zlib.decompressobj().decompress(stream, 4096).split(b"\n", 1)[0])


def with_run_facts(packed: bytes, graph: LineageGraph) -> bytes:
    """``packed`` with the run facts of ``graph`` instead of its own: for a graph whose lineage
    is ``packed``'s (``lineage.reuse.build_whole``), packed without packing its lineage again."""
    return _join(lineage_part(packed), _pack_run_facts(graph))


def lineage_part(packed: bytes) -> bytes:
    """The lineage part of a packed graph as it is stored: the same bytes for a batch that
    reused every job (``with_run_facts``), whatever its run facts."""
    return _parts(packed)[0]


def _join(lineage: bytes, run_facts: bytes) -> bytes:
    return _HEAD.pack(len(lineage)) + lineage + run_facts


def _parts(data: bytes) -> tuple[bytes, bytes]:
    if len(data) < _HEAD.size:
        raise PackedGraphError("not a packed graph: too short")
    (length,) = _HEAD.unpack_from(data)
    if length > len(data) - _HEAD.size:
        raise PackedGraphError("not a packed graph: a part longer than the whole")
    end = _HEAD.size + length
    return data[_HEAD.size : end], data[end:]


def _pack_run_facts(graph: LineageGraph) -> bytes:
    w = _Writer()
    w._line(["runFacts", FORMAT])
    n, unrun = w.n, RunMetrics()
    w.rows(
        "metrics",
        (
            [
                n(key),
                m.runs,
                m.failures,
                _time(m.first_run),
                _time(m.last_run),
                m.last_duration_seconds,
                m.last_status,
                m.rows_read,
                m.rows_written,
                m.bytes_read,
                m.bytes_written,
            ]
            for key, j in graph.jobs.items()
            if (m := j.metrics) != unrun
        ),
    )
    w.rows(
        "qualityChecks",
        (
            [n(k[0]), n(k[1]), k[2], k[3], n(q.job), n(q.dataset), q.name, q.column]
            + [q.success, q.severity, _time(q.checked_at)]
            for k, q in graph.quality_checks.items()
        ),
    )
    w.rows("describedJobs", (n(k) for k in graph.described_jobs))
    w.rows("completedJobs", (n(k) for k in graph.completed_jobs))
    return w.finish()


def _pack(graph: LineageGraph, w: _Writer, field_flows: Iterable[FieldFlow]) -> None:
    n, opt = w.n, w.opt
    w.rows(
        "jobs",
        (
            [
                n(key),
                j.namespace,
                j.name,
                j.integration,
                j.job_type,
                j.processing_type,
                j.description,
                j.owners,
                j.source_code_location,
                j.referenced_only,
            ]
            for key, j in graph.jobs.items()
        ),
    )
    w.rows(
        "datasets",
        (
            [
                n(key),
                d.namespace,
                d.name,
                d.system,
                d.schema,
                d.object_name,
                d.type,
                d.description,
                d.owners,
                [
                    [f.path, f.type, f.description, f.ordinal]
                    if p == f.path
                    else [f.path, f.type, f.description, f.ordinal, p]
                    for p, f in d.fields.items()
                ],
                d.has_schema,
                opt(d.previous),
                d.dropped,
                [n(a) for a in d.aliases],
            ]
            for key, d in graph.datasets.items()
        ),
        per_line=_ROWS // 20,  # a dataset brings its fields
    )
    w.rows("dataFlows", ((n(f.source), n(f.target), n(f.job)) for f in graph.data_flows), 3)
    _field_flows(field_flows, w)
    w.rows(
        "orchestrationFlows",
        ([n(o.parent), n(o.child), opt(o.root)] for o in graph.orchestration_flows),
    )
    w.rows(
        "routines",
        ([n(k), n(r.job), r.statement, r.dialect] for k, r in graph.routines.items()),
    )
    w.rows("dangling", ([d.reason, n(d.job), d.source, d.target] for d in graph.dangling))
    w.rows("skippedEvents", graph.skipped_events)
    if graph.unchanged_since is not None:
        since, jobs = graph.unchanged_since
        w.write("unchangedSince", [since.hex(), [n(k) for k in jobs]])


def _field_flows(field_flows: Iterable[FieldFlow], w: _Writer) -> None:
    # most of a graph (150,000 for 10,000 dbt models): a line at a time, the lookups inline
    flows = iter(field_flows)  # not copied whole: one line's flows at a time
    fields, nodes, labels = w.fields, w.index, w.labels
    while chunk := list(islice(flows, _ROWS)):
        flat: list[int] = []
        add = flat.extend
        for f in chunk:
            a, b, j = fields.get(f.source), fields.get(f.target), nodes.get(f.job)
            t, u = labels.get(f.transformation), labels.get(f.subtype)
            add(
                (
                    w.field(f.source) if a is None else a,
                    w.field(f.target) if b is None else b,
                    w.n(f.job) if j is None else j,
                    w.label(f.transformation) if t is None else t,
                    w.label(f.subtype) if u is None else u,
                )
            )
        w.write("fieldFlows", flat)


# -- loading ----------------------------------------------------------------------------------


def unpack(data: bytes, *, field_flows_later: bool = False) -> LineageGraph:
    """The graph ``data`` holds. ``field_flows_later``: its field flows are built when first
    read (``LineageGraph.read_later``): for a caller likely to need few or none of them."""
    lineage, run_facts = _parts(data)
    with gc_paused():
        graph = LineageGraph()
        strings: dict[str, str] = {}
        unread = UnreadFlows() if field_flows_later else None
        reader = _Reader(graph, strings, unread)
        first, base = _read(lineage, ("format", "delta"), reader)
        if (first == "delta") != (reader.keep is not None):
            raise PackedGraphError("base flows outside a delta part, or a delta without them")
        if reader.keep is not None:
            base_reader = _BaseReader(graph, strings, reader.keep, unread)
            _, rest = _read(base, ("format",), base_reader, _NOT_BASE)
            base = rest
        if base:
            raise PackedGraphError("bytes after the lineage of a packed graph")
        _read(run_facts, ("runFacts",), _Reader(graph, strings))
        if unread is not None and unread.chunks:
            graph.read_later(unread)
        return graph


# the sections of a base lineage a delta part holds itself: not even parsed
_NOT_BASE = tuple(
    b'["%s",' % name.encode()
    for name in (
        "jobs",
        "datasets",
        "dataFlows",
        "orchestrationFlows",
        "routines",
        "dangling",
        "skippedEvents",
        "unchangedSince",
    )
)


def _read(
    data: bytes, first: tuple[str, ...], reader: _Reader, skip: tuple[bytes, ...] = ()
) -> tuple[str, bytes]:
    """Read the stream ``data`` begins with (but its lines that begin with one of ``skip``);
    its header's name and the bytes after it."""
    tail: list[bytes] = []
    try:
        lines = _lines(data, tail, skip)
        head = next(lines, None)
        if not isinstance(head, list) or head[1:2] != [FORMAT] or head[0] not in first:
            raise PackedGraphError(f"not a graph packed in format {FORMAT}")
        for line in lines:
            if line == ["end"]:
                if next(lines, None) is not None:
                    raise PackedGraphError("lines after the end of a packed graph")
                return head[0], tail[0] if tail else b""
            reader.read(line)
    except PackedGraphError:
        raise
    except (zlib.error, orjson.JSONDecodeError) as exc:
        raise PackedGraphError(f"not a packed graph: {exc}") from None
    except (LookupError, TypeError, ValueError, AttributeError) as exc:
        raise PackedGraphError(f"a damaged packed graph: {type(exc).__name__}") from None
    raise PackedGraphError("a packed graph cut short (no end line)")


def _lines(data: bytes, tail: list[bytes], skip: tuple[bytes, ...]) -> Iterator[Any]:
    """The lines of the zlib stream ``data`` begins with; the bytes after it go in ``tail``."""
    z = zlib.decompressobj()
    rest = b""
    for start in range(0, len(data), _READ):
        rest += z.decompress(data[start : start + _READ])
        if z.eof:
            tail.append(z.unused_data + data[start + _READ :])
            break
        *whole, rest = rest.split(b"\n")
        for line in whole:
            if not line.startswith(skip):
                yield orjson.loads(line)
    rest += z.flush()
    if not z.eof:
        raise PackedGraphError("a packed graph cut short (an incomplete zlib stream)")
    for line in rest.split(b"\n"):
        if line and not line.startswith(skip):
            yield orjson.loads(line)


class _Reader:
    def __init__(
        self, graph: LineageGraph, strings: dict[str, str], unread: UnreadFlows | None = None
    ) -> None:
        self.graph = graph
        self.unread = unread  # field flows are left unread there, when given
        self.s: Callable[[str, str], str] = strings.setdefault
        self.keep: set[NodeKey] | None = None  # a delta part: the jobs whose base flows it keeps
        self.nodes: list[NodeKey] = []
        self.fields: list[FieldKey] = []
        self.labels: list[str | None] = [None]  # index -1 (the last) is no label

    def read(self, line: list[Any]) -> None:
        section, rows = line
        if not isinstance(rows, list):
            raise PackedGraphError(f"section {section!r} holds no rows")
        handler = _SECTIONS.get(section)
        if handler is None:
            raise PackedGraphError(f"an unknown section {section!r}")
        handler(self, rows)

    def add_nodes(self, rows: list[Any]) -> None:
        s = self.s
        self.nodes += [(s(ns, ns), s(name, name)) for ns, name in rows]

    def add_fields(self, rows: list[Any]) -> None:
        nodes, s = self.nodes, self.s
        self.fields += [
            (*nodes[rows[i]], s(rows[i + 1], rows[i + 1])) for i in range(0, len(rows), 2)
        ]

    def add_labels(self, rows: list[Any]) -> None:
        s = self.s
        self.labels[-1:-1] = [s(x, x) for x in rows]  # before the last: None stays at -1

    def opt(self, i: int | None) -> NodeKey | None:
        return None if i is None else self.nodes[i]

    def jobs(self, rows: list[Any]) -> None:
        nodes, s = self.nodes, self.s
        for key, ns, name, integration, jtype, ptype, desc, owners, scl, ref in rows:
            self.graph.jobs[nodes[key]] = JobNode(
                s(ns, ns),
                s(name, name),
                integration,
                jtype,
                ptype,
                desc,
                owners,
                scl,
                referenced_only=ref,
            )

    def metrics(self, rows: list[Any]) -> None:
        jobs, nodes = self.graph.jobs, self.nodes
        for key, runs, failures, first, last, duration, status, rr, rw, br, bw in rows:
            jobs[nodes[key]].metrics = RunMetrics(
                runs,
                failures,
                _from_time(first),
                _from_time(last),
                duration,
                status,
                rr,
                rw,
                br,
                bw,
            )

    def datasets(self, rows: list[Any]) -> None:
        nodes, s = self.nodes, self.s
        for row in rows:
            key, ns, name, system, schema, object_name, kind, desc, owners, fields = row[:10]
            has_schema, previous, dropped, aliases = row[10:]
            by_key: dict[str, FieldNode] = {}
            for f in fields:
                path = s(f[0], f[0])
                node = FieldNode(path, None if f[1] is None else s(f[1], f[1]), f[2], f[3])
                by_key[s(f[4], f[4]) if len(f) == 5 else path] = node
            self.graph.datasets[nodes[key]] = DatasetNode(
                s(ns, ns),
                s(name, name),
                s(system, system),
                s(schema, schema),
                object_name,
                kind,
                desc,
                owners,
                by_key,
                has_schema,
                self.opt(previous),
                dropped,
                {nodes[a] for a in aliases},
            )

    def data_flows(self, rows: list[int]) -> None:
        nodes = self.nodes
        self.graph.data_flows.update(
            DataFlow(nodes[a], nodes[b], nodes[j])
            for a, b, j in zip(rows[::3], rows[1::3], rows[2::3], strict=True)
        )

    def field_flows(self, rows: list[int]) -> None:
        tables = (self.fields, self.nodes, self.labels)
        if self.unread is not None:
            self.unread.add(rows, tables)
        else:
            self.graph.field_flows.update(flows_of(rows, *tables))

    def orchestration_flows(self, rows: list[Any]) -> None:
        nodes = self.nodes
        self.graph.orchestration_flows.update(
            OrchestrationFlow(nodes[p], nodes[c], self.opt(r)) for p, c, r in rows
        )

    def routines(self, rows: list[Any]) -> None:
        nodes = self.nodes
        for key, job, statement, dialect in rows:
            self.graph.routines[nodes[key]] = Routine(nodes[job], statement, dialect)

    def quality_checks(self, rows: list[Any]) -> None:
        nodes = self.nodes
        for kj, kd, kname, kcol, job, ds, name, col, ok, severity, at in rows:
            self.graph.quality_checks[(nodes[kj], nodes[kd], kname, kcol)] = QualityCheck(
                nodes[job], nodes[ds], name, col, ok, severity, _from_time(at)
            )

    def dangling(self, rows: list[Any]) -> None:
        nodes = self.nodes
        self.graph.dangling += [DanglingFlow(r, nodes[j], a, b) for r, j, a, b in rows]

    def described_jobs(self, rows: list[int]) -> None:
        self.graph.described_jobs.update(self.nodes[i] for i in rows)

    def completed_jobs(self, rows: list[int]) -> None:
        self.graph.completed_jobs.update(self.nodes[i] for i in rows)

    def skipped_events(self, rows: list[Any]) -> None:
        self.graph.skipped_events.extend(rows)

    def unchanged_since(self, rows: list[Any]) -> None:
        since, jobs = rows
        nodes = self.nodes
        self.graph.unchanged_since = (bytes.fromhex(since), frozenset(nodes[i] for i in jobs))

    def base_flows(self, rows: list[Any]) -> None:
        s = self.s
        self.keep = {(s(ns, ns), s(name, name)) for ns, name in rows}


class _BaseReader(_Reader):
    """The lineage a delta part was packed over: its tables, and of its field flows those of
    the jobs the delta keeps; every other section is the delta's."""

    def __init__(
        self,
        graph: LineageGraph,
        strings: dict[str, str],
        keep: set[NodeKey],
        unread: UnreadFlows | None = None,
    ):
        super().__init__(graph, strings, unread)
        self.wanted = keep
        self.kept: set[int] = set()  # the node indexes of the jobs kept

    def read(self, line: list[Any]) -> None:
        section, rows = line
        if not isinstance(rows, list):
            raise PackedGraphError(f"section {section!r} holds no rows")
        if section == "fieldFlows":
            self.kept_flows(rows)
        elif section == "nodes":
            start = len(self.nodes)
            self.add_nodes(rows)
            wanted, nodes = self.wanted, self.nodes
            self.kept.update(i for i in range(start, len(nodes)) if nodes[i] in wanted)
        elif section in ("fields", "labels"):
            _SECTIONS[section](self, rows)
        elif section not in _SECTIONS or section == "baseFlows":
            raise PackedGraphError(f"an unknown section {section!r} in a base lineage")

    def kept_flows(self, rows: list[int]) -> None:
        tables = (self.fields, self.nodes, self.labels)
        if self.unread is not None:
            self.unread.add(rows, tables, self.kept)
        else:
            self.graph.field_flows.update(flows_of(rows, *tables, self.kept))


# by the class, not bound to a reader: a reader holding its own bound methods would be a
# reference cycle, and the graph it holds would then outlive its last use until a full
# collection walks it (0.3-0.5 s at 10,000 jobs, at whatever step it happens to fall in)
_SECTIONS: dict[str, Callable[[_Reader, list[Any]], None]] = {
    "nodes": _Reader.add_nodes,
    "fields": _Reader.add_fields,
    "labels": _Reader.add_labels,
    "jobs": _Reader.jobs,
    "datasets": _Reader.datasets,
    "dataFlows": _Reader.data_flows,
    "fieldFlows": _Reader.field_flows,
    "orchestrationFlows": _Reader.orchestration_flows,
    "routines": _Reader.routines,
    "qualityChecks": _Reader.quality_checks,
    "dangling": _Reader.dangling,
    "skippedEvents": _Reader.skipped_events,
    "describedJobs": _Reader.described_jobs,
    "completedJobs": _Reader.completed_jobs,
    "metrics": _Reader.metrics,
    "baseFlows": _Reader.base_flows,
    "unchangedSince": _Reader.unchanged_since,
}
