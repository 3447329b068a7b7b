"""Normalization throughput: events/s of ``normalize`` against parsing alone, in the same run.

Generates ``--events`` dbt-like RunEvents (default 10,000): model runs as START+COMPLETE pairs or a
COMPLETE alone, each with a 20-column schema facet on the output (and on its inputs), column lineage
for the 20 columns from one or two inputs, the SQL, jobType and parent facets, ``outputStatistics``
on COMPLETE and a few dbt custom facets. Every event is serialized to bytes once, then:

- (a) ``orjson.loads`` of every event (parse only: the floor no validator beats);
- (b) ``parse_event`` of every event (validation into the pydantic models, one pass from bytes);
- (c) ``normalize`` of all the bytes (parse, combine runs, build the graph) end to end.

Each is run ``--repeat`` times and the best time is reported, with the ratio to parse-only (goal:
normalize at least a third as fast as ``orjson.loads``) and the peak RSS after each stage. The graph
is checked against what the generator produced, so a fast wrong answer cannot pass as speed.
``--profile`` adds a cProfile of one ``normalize`` run (top functions by own time).

Usage: ``.venv/bin/python benchmarks/normalize.py [--events 10000] [--repeat 3] [--profile]``
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import platform
import pstats
import random
import resource
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pydantic  # noqa: E402

from ol_dagster.lineage import normalize  # noqa: E402
from ol_dagster.openlineage.models import parse_event  # noqa: E402

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.40.0/integration/dbt"
CORE = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
FACETS = "https://openlineage.io/spec/facets"
WAREHOUSE = "postgres://warehouse.internal:5432"
JOB_NAMESPACE = "dbt"
PROJECT = "shop"
COLUMNS = 20
MODELS = 200
SOURCES = 40
COLUMN_TYPES = ["bigint", "integer", "varchar", "text", "numeric(12,2)", "timestamp", "date"]


def _facet(schema: str, **fields: object) -> dict:
    return {"_producer": PRODUCER, "_schemaURL": f"{FACETS}/{schema}", **fields}


def _columns(table: str) -> list[str]:
    return [f"{table}_c{i:02d}" for i in range(COLUMNS)]


def _schema(table: str) -> dict:
    return _facet(
        "1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet",
        fields=[
            {"name": c, "type": COLUMN_TYPES[i % len(COLUMN_TYPES)], "ordinal_position": i + 1}
            for i, c in enumerate(_columns(table))
        ],
    )


def _table(kind: str, i: int) -> tuple[str, str]:
    schema = "raw" if kind == "src" else "mart"
    return (WAREHOUSE, f"analytics.{schema}.{kind}_{i:03d}")


class Generator:
    """A dbt project of MODELS models over SOURCES sources, run over and over."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.t0 = datetime(2026, 11, 1, tzinfo=UTC)
        # model i reads one or two earlier models or sources
        self.upstream: list[list[tuple[str, str]]] = []
        for i in range(MODELS):
            pool = [_table("src", s) for s in range(SOURCES)] + [
                _table("model", m) for m in range(i)
            ]
            self.upstream.append(self.rng.sample(pool, 1 + (i % 2)))

    def event(
        self, model: int, run_id: str, parent_run: str, event_type: str, when: datetime
    ) -> dict:
        out_ns, out_name = _table("model", model)
        out_table = out_name.rsplit(".", 1)[1]
        ins = self.upstream[model]
        lineage = {}
        for c, column in enumerate(_columns(out_table)):
            fields = []
            for ns, name in ins[: 1 + (c % len(ins))]:
                in_column = _columns(name.rsplit(".", 1)[1])[c]
                fields.append(
                    {
                        "namespace": ns,
                        "name": name,
                        "field": in_column,
                        "transformations": [
                            {"type": "DIRECT", "subtype": "IDENTITY" if c % 3 else "TRANSFORMATION"}
                        ],
                    }
                )
            lineage[column] = {"inputFields": fields}
        select = ", ".join(_columns(out_table))
        sources = " JOIN ".join(name for _, name in ins)
        output: dict = {
            "namespace": out_ns,
            "name": out_name,
            "facets": {
                "schema": _schema(out_table),
                "columnLineage": _facet(
                    "1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet",
                    fields=lineage,
                ),
                "dataSource": _facet(
                    "1-0-1/DatasourceDatasetFacet.json#/$defs/DatasourceDatasetFacet",
                    name=out_ns,
                    uri=out_ns,
                ),
            },
        }
        if event_type == "COMPLETE":
            output["outputFacets"] = {
                "outputStatistics": _facet(
                    "1-0-2/OutputStatisticsOutputDatasetFacet.json",
                    rowCount=self.rng.randint(1, 10**6),
                    size=self.rng.randint(1, 10**9),
                )
            }
        return {
            "eventType": event_type,
            "eventTime": when.isoformat(),
            "producer": PRODUCER,
            "schemaURL": f"{CORE}#/$defs/RunEvent",
            "run": {
                "runId": run_id,
                "facets": {
                    "parent": _facet(
                        "1-1-0/ParentRunFacet.json#/$defs/ParentRunFacet",
                        run={"runId": parent_run},
                        job={"namespace": JOB_NAMESPACE, "name": f"dbt-run-{PROJECT}"},
                    ),
                    "dbt_version": {"_producer": PRODUCER, "version": "1.10.15"},
                    "processing_engine": _facet(
                        "1-1-1/ProcessingEngineRunFacet.json#/$defs/ProcessingEngineRunFacet",
                        version="1.10.15",
                        name="dbt",
                        openlineageAdapterVersion="1.40.0",
                    ),
                },
            },
            "job": {
                "namespace": JOB_NAMESPACE,
                "name": f"analytics.mart.{PROJECT}.{out_table}",
                "facets": {
                    "jobType": _facet(
                        "2-0-3/JobTypeJobFacet.json#/$defs/JobTypeJobFacet",
                        processingType="BATCH",
                        integration="DBT",
                        jobType="MODEL",
                    ),
                    "sql": _facet(
                        "1-1-0/SQLJobFacet.json#/$defs/SQLJobFacet",
                        query=f"select {select} from {sources}",
                        dialect="postgres",
                    ),
                },
            },
            "inputs": [
                {
                    "namespace": ns,
                    "name": name,
                    "facets": {"schema": _schema(name.rsplit(".", 1)[1])},
                }
                for ns, name in ins
            ],
            "outputs": [output],
        }

    def events(self, n: int) -> tuple[list[bytes], int]:
        """``n`` events as bytes, and the number of runs they describe."""
        out: list[bytes] = []
        runs = 0
        when = self.t0
        parent = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        model = 0
        while len(out) < n:
            if model == MODELS:  # a new dbt invocation
                model = 0
                parent = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
            run_id = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
            pair = self.rng.random() < 0.5 and len(out) + 2 <= n
            if pair:
                out.append(orjson.dumps(self.event(model, run_id, parent, "START", when)))
            when += timedelta(seconds=self.rng.randint(1, 30))
            out.append(orjson.dumps(self.event(model, run_id, parent, "COMPLETE", when)))
            runs += 1
            model += 1
        return out, runs


def peak_rss_mb() -> float:
    # ru_maxrss is KiB on Linux, bytes on macOS
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def best_of(repeat: int, fn: Callable[[], object]) -> tuple[float, object]:
    best = float("inf")
    result: object = None
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="cProfile one normalize run")
    args = ap.parse_args()

    rss_start = peak_rss_mb()
    bodies, runs = Generator().events(args.events)
    total_bytes = sum(map(len, bodies))
    rss_generated = peak_rss_mb()

    def parse_only() -> int:
        loads = orjson.loads
        return sum(1 for b in bodies if loads(b))

    def validate() -> int:
        return sum(1 for b in bodies if parse_event(b))

    t_loads, n_loaded = best_of(args.repeat, parse_only)
    rss_loads = peak_rss_mb()
    t_parse, n_parsed = best_of(args.repeat, validate)
    rss_parse = peak_rss_mb()
    t_norm, graph = best_of(args.repeat, lambda: normalize(bodies))
    rss_norm = peak_rss_mb()

    # the answer must be right before its speed means anything
    assert n_loaded == n_parsed == len(bodies)
    counts = graph.counts()
    models_run = min(runs, MODELS)
    assert not graph.skipped_events, graph.skipped_events[:3]
    assert counts["jobs"] == models_run + 1, counts  # the models and their dbt-run parent
    assert counts["routines"] == models_run, counts
    assert counts["orchestrationFlows"] == models_run, counts
    assert counts["danglingFlows"] == 0, graph.dangling_by_reason()
    assert sum(j.metrics.runs for j in graph.jobs.values()) == runs
    assert counts["fieldFlows"] >= COLUMNS * models_run, counts

    n = len(bodies)
    rows = [
        ("(a) orjson.loads (parse only)", t_loads, rss_loads),
        ("(b) parse_event (validate)", t_parse, rss_parse),
        ("(c) normalize (end to end)", t_norm, rss_norm),
    ]
    print(
        f"{n:,} dbt-like events ({runs:,} runs, {total_bytes / 2**20:.1f} MiB, "
        f"{total_bytes / n / 1024:.1f} KiB/event), best of {args.repeat}; Python "
        f"{platform.python_version()}, pydantic {pydantic.VERSION}, orjson {orjson.__version__}, "
        f"{platform.machine()}"
    )
    print()
    print("| stage | best time (s) | events/s | MiB/s | vs parse-only | peak RSS after (MiB) |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, t, rss in rows:
        print(
            f"| {label} | {t:.3f} | {n / t:,.0f} | {total_bytes / 2**20 / t:,.1f} | "
            f"{t_loads / t:.2f} | {rss:,.0f} |"
        )
    print()
    ratio = t_loads / t_norm
    print(
        f"normalize / parse-only = {ratio:.2f} (goal >= 0.33: "
        f"{'met' if ratio >= 1 / 3 else 'NOT met'}); normalize / validate = {t_parse / t_norm:.2f}"
    )
    print(
        f"peak RSS: {rss_start:,.0f} MiB at start, {rss_generated:,.0f} MiB with the events "
        f"generated, {rss_norm:,.0f} MiB at the end"
    )
    print("graph: " + ", ".join(f"{k} {v:,}" for k, v in counts.items()))

    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        normalize(bodies)
        profiler.disable()
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("tottime").print_stats(20)
        print()
        print(out.getvalue())


if __name__ == "__main__":
    main()
