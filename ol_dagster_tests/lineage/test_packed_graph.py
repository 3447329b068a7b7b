"""A packed graph loads back as the graph normalization built: the upload uploads what was built.

``catalog_upload`` loads the graph ``lineage_graph`` stored (``lineage.packed``) instead of
normalizing again, so anything the packed form loses or changes would reach the catalog. Each
graph here comes from ``normalize`` (the public corpus, the benchmark's dbt events, hand-written
events for every rule with a field of its own) and must load back equal, field by field.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import struct
import sys
import threading
import uuid
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from ol_dagster.commands.eventfiles import BrokenLine, read_events
from ol_dagster.lineage import LineageGraph, normalize
from ol_dagster.lineage import graph as g
from ol_dagster.lineage.packed import FORMAT, PackedGraphError, pack, unpack, with_run_facts
from ol_dagster_tests.lineage.test_normalize import _assertions, _parent, event, schema

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

PG = "postgres://warehouse.internal:5432"


def round_trip(graph: LineageGraph) -> LineageGraph:
    loaded = unpack(pack(graph))
    assert loaded == graph
    # the dicts keep their order (a catalog writes in it)
    assert list(loaded.jobs) == list(graph.jobs)
    assert list(loaded.datasets) == list(graph.datasets)
    for key, node in graph.datasets.items():
        assert list(loaded.datasets[key].fields) == list(node.fields)
    assert list(loaded.quality_checks) == list(graph.quality_checks)
    return loaded


def _corpus_events(corpus: Path) -> list[bytes]:
    out = []
    for path in sorted((corpus / "events").rglob("*.json")):
        try:
            events = read_events(path)
        except ValueError:
            continue  # the corpus's one file that is not JSON
        out += [json.dumps(e).encode() for e in events if not isinstance(e, BrokenLine)]
    return out


def test_the_whole_corpus_as_one_batch_loads_back_equal(corpus: Path) -> None:
    graph = normalize(_corpus_events(corpus), dataset_systems=[("s3://*", "lake")])
    assert graph.jobs and graph.datasets and graph.skipped_events and graph.dangling
    round_trip(graph)


def test_each_corpus_event_alone_loads_back_equal(corpus: Path) -> None:
    for raw in _corpus_events(corpus):
        round_trip(normalize([raw]))


def test_the_benchmark_snapshot_loads_back_equal_and_shares_its_strings() -> None:
    from upload import model_event  # benchmarks/upload.py: the dbt-like snapshot generator

    start = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
    parent = str(uuid.uuid4())
    graph = normalize(
        [orjson.dumps(model_event(i, start, parent)) for i in range(300)],
        dataset_systems=[(PG, "warehouse")],
    )
    assert graph.field_flows and graph.quality_checks and graph.orchestration_flows
    loaded = round_trip(graph)
    # one object per field path, as normalize builds it: a loaded graph costs no more memory
    paths = {id(f.source[2]) for f in loaded.field_flows if f.source[2] == "col_00"}
    assert len(paths) == 1


def test_a_loaded_graph_is_freed_as_soon_as_nothing_holds_it() -> None:
    """The sync loads the last kept graph to reuse it and drops it after the graph step: it must
    go then, not wait for a full collection that walks every object the process holds (0.3-0.5 s
    at 10,000 jobs, in whichever step it falls) and keeps its memory until then."""
    from upload import model_event

    start = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
    data = pack(normalize([orjson.dumps(model_event(i, start, "p")) for i in range(50)]))
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        loaded = unpack(data)
        assert loaded.field_flows
        del loaded
        assert gc.collect() == 0  # nothing of it left for the collector: no reference cycle
        loaded = unpack(data, field_flows_later=True)  # its field flows never read
        assert loaded.field_flow_count()
        del loaded
        assert gc.collect() == 0
    finally:
        if was:
            gc.enable()


def _every_rule() -> list[dict[str, Any]]:
    """Events whose graph sets every field of every node and flow to something not default."""
    run_id = str(uuid.uuid4())
    kpi = event(
        inputs=[(PG, "shop.public.orders"), ("s3://lake", "raw/orders")],
        outputs=[(PG, "shop.kpi.daily")],
        job_facets={
            "jobType": {"processingType": "BATCH", "integration": "DBT", "jobType": "MODEL"},
            "documentation": {"description": "Daily KPIs"},
            "ownership": {"owners": [{"name": "team:analytics"}]},
            "sourceCodeLocation": {"type": "git", "url": "https://git.example.com/kpi"},
            "sql": {"query": "insert into kpi select * from orders", "dialect": "postgres"},
        },
        run_facets=_parent("airflow", "nightly", root=("airflow", "root_dag")),
        input_facets={
            0: {
                **schema("id", ("customer", ["name", "email"])),
                "documentation": {"description": "Orders"},
                "ownership": {"owners": [{"name": "sales"}]},
            },
            1: {
                "symlinks": {
                    "identifiers": [{"namespace": PG, "name": "shop.raw.orders", "type": "TABLE"}]
                }
            },
        },
        output_facets={
            0: {
                **schema("day", "revenue"),
                "columnLineage": {
                    "fields": {
                        "revenue": {
                            "inputFields": [
                                {
                                    "namespace": PG,
                                    "name": "shop.public.orders",
                                    "field": "id",
                                    "transformations": [
                                        {"type": "DIRECT", "subtype": "AGGREGATION"}
                                    ],
                                },
                                {"namespace": PG, "name": "shop.public.orders", "field": "gone"},
                                {"namespace": PG, "name": "nowhere", "field": "x"},
                            ]
                        },
                        "day": {
                            "inputFields": [
                                {"namespace": PG, "name": "shop.unknown_fields", "field": "d"}
                            ]
                        },
                    },
                    "dataset": [{"namespace": PG, "name": "shop.public.orders", "field": "id"}],
                },
            }
        },
        input_io={0: {**_assertions(("not_null", "id", True), ("unique", None, False))}},
        output_io={0: {"outputStatistics": {"rowCount": 10, "size": 2048}}},
        run_id=run_id,
        event_type="COMPLETE",
        event_time="2026-11-01T02:05:00.123456+02:00",
    )
    start = event(
        run_id=run_id,
        event_type="START",
        event_time="2026-11-01T02:00:00+02:00",
        inputs=[(PG, "shop.unknown_fields")],
    )
    renamed = event(
        name="rename_job",
        outputs=[(PG, "shop.kpi.new"), (PG, "shop.kpi.dropped")],
        output_facets={
            0: {
                "lifecycleStateChange": {
                    "lifecycleStateChange": "RENAME",
                    "previousIdentifier": {"namespace": PG, "name": "shop.kpi.old"},
                }
            },
            1: {"lifecycleStateChange": {"lifecycleStateChange": "DROP"}},
        },
        event_type="FAIL",
    )
    job_only = {
        "eventTime": "2026-11-01T03:00:00Z",
        "producer": "https://example.com/p",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
        "job": {"namespace": "etl", "name": "described"},
        "inputs": [],
        "outputs": [],
    }
    return [start, kpi, renamed, job_only]


def test_a_graph_that_uses_every_field_loads_back_equal() -> None:
    raw = [json.dumps(e).encode() for e in _every_rule()] + [b'{"not": "an event"}']
    graph = normalize(raw, dataset_systems=[("s3://*", "lake")])
    # every kind of object is there, and the fields that default to nothing are set somewhere
    job = graph.jobs[("etl", "build_daily_kpi")]
    assert job.integration and job.description and job.owners and job.source_code_location
    assert job.metrics.runs and job.metrics.first_run and job.metrics.last_duration_seconds
    assert graph.jobs[("airflow", "nightly")].referenced_only
    assert any(d.aliases for d in graph.datasets.values())
    assert any(d.previous for d in graph.datasets.values())
    assert any(d.dropped for d in graph.datasets.values())
    assert any(d.owners and d.description for d in graph.datasets.values())
    assert any(f.subtype for f in graph.field_flows)
    assert any(o.root for o in graph.orchestration_flows)
    assert graph.routines and graph.quality_checks and graph.dangling and graph.skipped_events
    assert graph.described_jobs and graph.completed_jobs
    loaded = round_trip(graph)
    # a time keeps its offset, to the microsecond
    assert loaded.jobs[job.key].metrics.last_run == job.metrics.last_run
    assert loaded.jobs[job.key].metrics.last_run.utcoffset() == job.metrics.last_run.utcoffset()  # type: ignore[union-attr]


def test_a_field_known_by_another_key_than_its_path_keeps_both() -> None:
    graph = LineageGraph()
    node = g.DatasetNode("pg", "t", fields={"alias": g.FieldNode("real.path", "int", None, 3)})
    graph.datasets[node.key] = node
    assert unpack(pack(graph)).datasets[node.key].fields == node.fields


# Every field of the graph's classes is packed (``lineage/packed.py``): a field added to one of
# them must be added there, and here, or loaded graphs would silently lose it.
PACKED_FIELDS = {
    g.LineageGraph: "jobs datasets data_flows field_flows orchestration_flows routines "
    "quality_checks dangling skipped_events described_jobs completed_jobs unchanged_since",
    g.JobNode: "namespace name integration job_type processing_type description owners "
    "source_code_location metrics referenced_only",
    g.RunMetrics: "runs failures first_run last_run last_duration_seconds last_status rows_read "
    "rows_written bytes_read bytes_written",
    g.DatasetNode: "namespace name system schema object_name type description owners fields "
    "has_schema previous dropped aliases",
    g.FieldNode: "path type description ordinal",
    g.DataFlow: "source target job",
    g.FieldFlow: "source target job transformation subtype",
    g.OrchestrationFlow: "parent child root",
    g.Routine: "job statement dialect",
    g.QualityCheck: "job dataset name column success severity checked_at",
    g.DanglingFlow: "reason job source target",
}


# fields the packed form leaves out on purpose: the claimed Systems are decided at upload
# (``sync.upload.place_claimed``), on the graph read back from its packed form; the lineage
# digest names the packed form itself (``sync.graph.lineage_digest``); the field flows are
# ``field_flows`` (held there, or held unread until it is read)
NOT_PACKED = {
    g.LineageGraph: "claimed_systems lineage_digest _field_flows _unread_field_flows",
}


@pytest.mark.parametrize("cls", list(PACKED_FIELDS), ids=lambda c: c.__name__)
def test_every_field_of_the_graph_is_one_the_packed_form_knows(cls: type) -> None:
    assert [f.name for f in dataclasses.fields(cls)] == (
        PACKED_FIELDS[cls].split() + NOT_PACKED.get(cls, "").split()
    )


def _stream(*lines: Any) -> bytes:
    return zlib.compress(b"".join(orjson.dumps(line) + b"\n" for line in lines))


def _lines(*lines: Any, run_facts: bytes | None = None) -> bytes:
    """A packed graph whose lineage part is ``lines`` (and its run facts none, or as given)."""
    lineage = _stream(*lines)
    facts = _stream(["runFacts", FORMAT], ["end"]) if run_facts is None else run_facts
    return struct.pack(">Q", len(lineage)) + lineage + facts


def _lineage_lines(data: bytes) -> bytes:
    z = zlib.decompressobj()
    return z.decompress(data[8:])


def _small_graph() -> LineageGraph:
    return normalize([json.dumps(e).encode() for e in _every_rule()])


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not zlib at all",
        zlib.compress(b"{not json"),
        b"\0\0\0\0\0\0\0\xff" + zlib.compress(b"[]"),  # a part longer than the whole
        _lines(["format", FORMAT + 1], ["end"]),
        _lines([1, 2]),
        _lines(["format", FORMAT]),  # no end line
        _lines(["format", FORMAT], ["jobs", [[7, "etl", "j"]]], ["end"]),  # no node 7
        _lines(["format", FORMAT], ["nowhere", []], ["end"]),
        _lines(["format", FORMAT], ["end"], ["jobs", []]),
        _lines(["format", FORMAT], ["end"], run_facts=_stream(["runFacts", FORMAT])),
        _lines(
            ["format", FORMAT],
            ["end"],
            run_facts=_stream(
                ["runFacts", FORMAT], ["nodes", [["etl", "j"]]], ["metrics", [[0] * 11]], ["end"]
            ),
        ),  # metrics of a job the lineage has not
        pack(_small_graph())[:-8],  # cut short
    ],
    ids=[
        "empty",
        "not-zlib",
        "not-json",
        "other-format",
        "no-format",
        "no-end",
        "unknown-node",
        "unknown-section",
        "after-the-end",
        "longer-part",
        "run-facts-without-end",
        "metrics-of-no-job",
        "cut-short",
    ],
)
def test_bytes_that_are_not_a_whole_packed_graph_are_refused(data: bytes) -> None:
    with pytest.raises(PackedGraphError):
        unpack(data)


def _flows(*rows: list[Any]) -> bytes:
    """A packed graph of two fields of one dataset, a job and a label, with these field flow
    rows (source, target, job, transformation, subtype: indexes into those tables)."""
    return _lines(
        ["format", FORMAT],
        ["nodes", [[PG, "shop.orders"], ["dbt", "orders"]]],
        ["fields", [0, "id", 0, "total"]],
        ["labels", ["DIRECT"]],
        *(["fieldFlows", r] for r in rows),
        ["end"],
    )


def test_field_flows_that_name_what_the_graph_does_not_hold_are_refused_when_loaded() -> None:
    """A graph's field flows are built when first read (``LineageGraph.read_later``): a damaged
    flow row must still be refused by ``unpack``, where the sync normalizes again, not fail
    whichever step reads the flows first."""
    order, job = (PG, "shop.orders"), ("dbt", "orders")
    for later in (False, True):
        assert unpack(_flows([0, 1, 1, 0, -1]), field_flows_later=later).field_flows == {
            g.FieldFlow((*order, "id"), (*order, "total"), job, "DIRECT")
        }
    for rows in (
        [0, 1, 1, 0],  # a row cut short
        [0, 2, 1, 0, -1],  # no field 2
        [0, 1, 2, 0, -1],  # no node 2
        [0, 1, -1, 0, -1],  # a node from the end: never written
        [0, 1, 1, 1, -1],  # no label 1 (the last entry is "none")
        [0, 1, 1, 0, -2],
        [0, 1, 1, "0", -1],
        [0, 1, 1, 0.0, -1],
        [0, 1, 1, 0, 2**63],  # beyond a machine integer
    ):
        with pytest.raises(PackedGraphError):
            unpack(_flows(rows), field_flows_later=True)
    # read at once, the same rows but those whose negative indexes Python's lists take
    for rows in (
        [0, 1, 1, 0],
        [0, 2, 1, 0, -1],
        [0, 1, 2, 0, -1],
        [0, 1, 1, 2, 0],  # no label 2
        [0, 1, 1, "0", -1],
    ):
        with pytest.raises(PackedGraphError):
            unpack(_flows(rows))


def test_field_flows_are_built_only_when_read_and_as_they_would_be_at_once() -> None:
    """An unchanged night reuses the last graph whole and its upload only stamps the flows of
    unchanged jobs: it counts them and takes those of the other jobs without building the rest.
    What it builds, and the whole set once read, are what reading them at once gives, from a
    whole graph and from one packed over an earlier one (whose base keeps some jobs' flows)."""
    earlier = _models(60)
    first = pack(earlier)
    now = _models(59, frozenset({3, 7}))
    delta = pack(now, over=first, same=_flows_as_before(now, earlier))
    for graph, data in ((earlier, first), (now, delta)):
        some = set(list(graph.jobs)[::4])
        assert unpack(data)._unread_field_flows is None  # read at once unless asked
        loaded = unpack(data, field_flows_later=True)
        assert loaded.field_flow_count() == len(graph.field_flows)
        assert loaded.counts() == graph.counts()
        assert loaded.field_flows_of(()) == []
        assert loaded._unread_field_flows is not None  # nothing built yet
        assert set(loaded.field_flows_of(some)) == {f for f in graph.field_flows if f.job in some}
        assert set(loaded.field_flows_of(some, but=True)) == {
            f for f in graph.field_flows if f.job not in some
        }
        assert loaded._unread_field_flows is not None
        assert loaded.field_flows == graph.field_flows
        assert loaded._unread_field_flows is None
        assert set(loaded.field_flows_of(some)) == {f for f in graph.field_flows if f.job in some}
        assert set(loaded.field_flows_of(some, but=True)) == {
            f for f in graph.field_flows if f.job not in some
        }
        assert loaded.field_flow_count() == len(graph.field_flows)
        # a graph whose flows were never read compares, copies and packs as its flows
        fresh = unpack(data, field_flows_later=True)
        assert dataclasses.replace(fresh, jobs=fresh.jobs) == graph
        assert unpack(pack(unpack(data, field_flows_later=True))) == graph
        replaced = unpack(data, field_flows_later=True)
        replaced.field_flows = set()
        assert replaced.field_flow_count() == 0 and replaced.field_flows_of((), but=True) == []


def test_field_flows_read_by_several_threads_at_once_are_all_there_for_each() -> None:
    """The first read builds the flows; a thread reading them meanwhile (a catalog client's
    workers) must get them all too, never the empty set held until they are built."""
    graph = _models(60)
    data = pack(graph)
    was = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns often, as a loaded machine may make them
    try:
        for _ in range(20):
            loaded = unpack(data, field_flows_later=True)
            start = threading.Barrier(4)
            seen: list[int] = []

            def read(
                held: LineageGraph = loaded,
                start: threading.Barrier = start,
                seen: list[int] = seen,
            ) -> None:
                start.wait()
                seen.append(len(held.field_flows))

            threads = [threading.Thread(target=read) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert seen == [len(graph.field_flows)] * 4
    finally:
        sys.setswitchinterval(was)


def test_a_large_graph_is_packed_in_many_lines_and_loads_back_equal() -> None:
    """More field flows, datasets and jobs than one line holds: each table entry is written
    before the first line that refers to it."""
    events = [
        event(
            name=f"job_{i}",
            inputs=[(PG, f"in_{i}")],
            outputs=[(PG, f"out_{i}")],
            input_facets={0: schema(*(f"c{c}" for c in range(30)))},
            output_facets={
                0: {
                    **schema(*(f"c{c}" for c in range(30))),
                    "columnLineage": {
                        "fields": {
                            f"c{c}": {
                                "inputFields": [
                                    {"namespace": PG, "name": f"in_{i}", "field": f"c{c}"}
                                ]
                            }
                            for c in range(30)
                        }
                    },
                }
            },
        )
        for i in range(1500)
    ]
    graph = normalize([json.dumps(e).encode() for e in events])
    assert len(graph.field_flows) == 45_000 and len(graph.datasets) == 3000
    data = pack(graph)
    assert _lineage_lines(data).count(b"\n") > 10
    round_trip(graph)


def test_a_graph_with_another_graphs_lineage_packs_its_own_run_facts_over_the_lineage_bytes():
    """A batch whose every job is reused keeps the earlier lineage part byte for byte: what
    loads is its own run facts (metrics, quality results, described and completed jobs) on it."""
    earlier = _small_graph()
    data = pack(earlier)
    now = unpack(data)
    job = next(j for j in now.jobs.values() if not j.referenced_only)
    job.metrics = g.RunMetrics(runs=9, failures=2, last_status="FAIL", rows_read=5)
    now.quality_checks = dict(list(now.quality_checks.items())[:1])
    now.completed_jobs = set()
    assert now != earlier
    both = with_run_facts(data, now)
    assert (
        both[: 8 + struct.unpack(">Q", data[:8])[0]] == data[: 8 + struct.unpack(">Q", data[:8])[0]]
    )
    assert unpack(both) == now


def _models(count: int, edited: frozenset[int] = frozenset()) -> LineageGraph:
    """The benchmark's dbt-like models, those of ``edited`` without their first column's lineage."""
    from upload import model_event

    start = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
    events = []
    for i in range(count):
        e = model_event(i, start, "p")
        if i in edited:
            e["outputs"][0]["facets"]["columnLineage"]["fields"].pop("col_00")
        events.append(orjson.dumps(e))
    return normalize(events, dataset_systems=[(PG, "warehouse")])


def _flows_as_before(now: LineageGraph, before: LineageGraph) -> set[g.NodeKey]:
    def by_job(graph: LineageGraph) -> dict[g.NodeKey, set[g.FieldFlow]]:
        out: dict[g.NodeKey, set[g.FieldFlow]] = {}
        for f in graph.field_flows:
            out.setdefault(f.job, set()).add(f)
        return out

    a, b = by_job(now), by_job(before)
    return {job for job in now.jobs if job in before.jobs and a.get(job) == b.get(job)}


def _lineage(data: bytes) -> bytes:
    return data[8 : 8 + struct.unpack(">Q", data[:8])[0]]


def test_a_graph_packed_over_an_earlier_one_keeps_its_lineage_and_loads_back_equal() -> None:
    """An edited snapshot (a few jobs changed, one dropped) packs what changed over the earlier
    lineage bytes as they are; the next one over the same bytes (not over the delta); once the
    changes pass a quarter of the flows, it is packed whole again."""
    earlier = _models(200)
    first = pack(earlier)
    now = _models(199, frozenset({3, 50}))
    second = pack(now, over=first, same=_flows_as_before(now, earlier))
    assert _lineage(second).endswith(_lineage(first))
    assert _lineage_lines(second).startswith(orjson.dumps(["delta", FORMAT]) + b"\n")
    loaded = round_trip_over(now, second)
    assert len({id(f.job) for f in loaded.field_flows if f.job[1].endswith("m_00100")}) == 1

    later = _models(199, frozenset({3, 50, 120}))
    third = pack(later, over=second, same=_flows_as_before(later, now))
    assert _lineage(third).endswith(_lineage(first))
    assert _lineage(second)[: -len(_lineage(first))] not in _lineage(third)  # not stacked
    round_trip_over(later, third)

    many = _models(199, frozenset(range(0, 199, 3)))
    whole = pack(many, over=third, same=_flows_as_before(many, later))
    assert _lineage_lines(whole).startswith(b'["format",%d,' % FORMAT)
    round_trip_over(many, whole)


def round_trip_over(graph: LineageGraph, data: bytes) -> LineageGraph:
    loaded = unpack(data)
    assert loaded == graph and loaded.field_flows == graph.field_flows
    assert list(loaded.jobs) == list(graph.jobs) and list(loaded.datasets) == list(graph.datasets)
    return loaded


def test_a_damaged_delta_is_refused() -> None:
    earlier = _models(40)
    first = pack(earlier)
    now = _models(40, frozenset({3}))
    data = pack(now, over=first, same=_flows_as_before(now, earlier))
    lineage, facts = _lineage(data), data[8 + len(_lineage(data)) :]
    base = _lineage(first)
    delta = lineage[: -len(base)]

    def joined(part: bytes) -> bytes:
        return struct.pack(">Q", len(part)) + part + facts

    assert unpack(joined(lineage)) == now
    for bad in (
        delta,  # no base
        delta + base[:-6],  # the base cut short
        delta + base + b"more",  # bytes after the base
        delta + delta,  # a delta over a delta
        base + b"more",  # bytes after a whole lineage
        _stream(["delta", FORMAT], ["end"]) + base,  # no base flows named
        _stream(["format", FORMAT, 0], ["baseFlows", []], ["end"]),  # base flows in a whole one
    ):
        with pytest.raises(PackedGraphError):
            unpack(joined(bad))


def test_the_jobs_taken_unchanged_load_back_with_the_lineage_they_were_taken_from() -> None:
    """What the upload is told (``LineageGraph.unchanged_since``) loads back from a delta and
    from a whole graph alike; a delta's base, packed with its own, does not lend it."""
    earlier = _models(60)
    earlier.unchanged_since = (b"\x01" * 32, frozenset(list(earlier.jobs)[:5]))
    first = pack(earlier)
    assert unpack(first).unchanged_since == earlier.unchanged_since
    now = _models(59, frozenset({3}))
    assert (
        unpack(pack(now, over=first, same=_flows_as_before(now, earlier))).unchanged_since is None
    )
    now.unchanged_since = (b"\x02" * 32, frozenset(list(now.jobs)[10:20]))
    for data in (pack(now, over=first, same=_flows_as_before(now, earlier)), pack(now)):
        assert unpack(data).unchanged_since == now.unchanged_since
