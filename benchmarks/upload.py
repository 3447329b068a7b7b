"""Catalog upload throughput: a generated dbt-like snapshot into the embedded catalog.

Generates ``--jobs`` dbt-like COMPLETE events (each model reads 1-2 earlier models or sources,
writes one table with 10 columns, column lineage for every column, its SQL, a parent run facet
pointing at the dbt invocation, and a not_null test on every 10th model's input), normalizes them
into one ``LineageGraph`` (timed apart), then uploads the graph into a fresh embedded catalog:

- SQLite: a temporary file (WAL, synchronous=NORMAL, as ``ol_dagster.db`` opens it);
- PostgreSQL with ``--postgres``: a throwaway local server (``ol_dagster_tests.postgres``, which
  runs with fsync=off, so the figures are an upper bound for a durable server).

Per backend: the first upload (everything written), then a second identical upload (nothing new,
everything touched, as every snapshot run re-sends), their rows/s (rows written, resp. touched)
and events/s, the SQL statements sent, and peak RSS. Every result is checked (counts equal the
graph's, the second upload writes nothing), so a fast failure cannot pass as speed.

Usage: ``.venv/bin/python benchmarks/upload.py [--jobs 10000] [--postgres] [--profile]``
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import platform
import pstats
import random
import resource
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import create_engine, event, text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ol_dagster.catalog.embedded import EmbeddedCatalog  # noqa: E402
from ol_dagster.catalog.protocol import UploadResult  # noqa: E402
from ol_dagster.lineage import LineageGraph  # noqa: E402
from ol_dagster.settings import Definition, parse_settings  # noqa: E402
from ol_dagster.sync.upload import build_graph  # noqa: E402

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.40.0/integration/dbt"
WAREHOUSE = "postgres://warehouse.internal:5432"
COLUMNS = 10
SOURCES = 200
TYPES = ["bigint", "varchar", "numeric(18,2)", "timestamp", "date", "bool"]


def _schema(table: str) -> dict[str, Any]:
    return {
        "fields": [
            {"name": f"col_{c:02d}", "type": TYPES[c % len(TYPES)], "description": f"{table} {c}"}
            for c in range(COLUMNS)
        ]
    }


def model_event(i: int, start: datetime, parent_run: str) -> dict[str, Any]:
    """Model i: reads 1-2 earlier models (or sources for the first ones), writes model i."""
    if i < SOURCES:
        upstream = [f"raw.src_{i:04d}"]
    else:
        rng = random.Random(i)  # deterministic: the same snapshot every run
        upstream = [f"analytics.m_{rng.randrange(max(0, i - 1000), i):05d}"]
        if i % 2:
            upstream.append(f"analytics.m_{rng.randrange(max(0, i - 1000), i):05d}")
        upstream = list(dict.fromkeys(upstream))
    out = f"analytics.m_{i:05d}"
    cols = [f"col_{c:02d}" for c in range(COLUMNS)]
    sql = (
        f"select {', '.join(f'coalesce(a.{c}, b.{c}) as {c}' for c in cols)}\n"
        f"from {upstream[0]} a left join {upstream[-1]} b on a.col_00 = b.col_00"
    )
    inputs: list[dict[str, Any]] = [
        {"namespace": WAREHOUSE, "name": f"wh.{u}", "facets": {"schema": _schema(u)}}
        for u in upstream
    ]
    if i % 10 == 0:
        inputs[0]["inputFacets"] = {
            "dataQualityAssertions": {
                "assertions": [{"assertion": "not_null", "column": "col_00", "success": True}]
            }
        }
    return {
        "eventType": "COMPLETE",
        "eventTime": (start + timedelta(milliseconds=i)).isoformat(),
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {
            "runId": str(uuid.uuid4()),
            "facets": {
                "parent": {
                    "run": {"runId": parent_run},
                    "job": {"namespace": "dbt", "name": "dbt-run-analytics"},
                }
            },
        },
        "job": {
            "namespace": "dbt",
            "name": f"analytics.{out.split('.')[-1]}",
            "facets": {
                "sql": {"query": sql, "dialect": "postgres"},
                "jobType": {"integration": "DBT", "jobType": "MODEL", "processingType": "BATCH"},
            },
        },
        "inputs": inputs,
        "outputs": [
            {
                "namespace": WAREHOUSE,
                "name": f"wh.{out}",
                "facets": {
                    "schema": _schema(out),
                    "columnLineage": {
                        "fields": {
                            c: {
                                "inputFields": [
                                    {
                                        "namespace": WAREHOUSE,
                                        "name": f"wh.{u}",
                                        "field": c,
                                        "transformations": [
                                            {"type": "DIRECT", "subtype": "TRANSFORMATION"}
                                        ],
                                    }
                                    for u in upstream
                                ]
                            }
                            for c in cols
                        }
                    },
                },
            }
        ],
    }


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


@dataclass
class Upload:
    seconds: float
    statements: int
    result: UploadResult
    peak_rss_mb: float

    @property
    def rows_written(self) -> int:
        return sum(self.result.written.values())

    @property
    def rows_touched(self) -> int:
        return sum(self.result.touched.values())


def timed_upload(
    catalog: EmbeddedCatalog, graph: LineageGraph, definition: Definition, profile: bool
) -> tuple[Upload, str]:
    statements = 0

    def count(*_: Any) -> None:
        nonlocal statements
        statements += 1

    event.listen(catalog.engine, "before_cursor_execute", count)
    profiler = cProfile.Profile() if profile else None
    t0 = time.perf_counter()
    if profiler:
        profiler.enable()
    result = catalog.upload(graph, definition)
    if profiler:
        profiler.disable()
    seconds = time.perf_counter() - t0
    event.remove(catalog.engine, "before_cursor_execute", count)
    report = ""
    if profiler:
        buf = io.StringIO()
        pstats.Stats(profiler, stream=buf).sort_stats("tottime").print_stats(14)
        report = buf.getvalue()
    return Upload(seconds, statements, result, peak_rss_mb()), report


def expected_rows(graph: LineageGraph) -> dict[str, int]:
    c = graph.counts()
    return {
        "physicalEntities": c["jobs"] + c["datasets"],
        "physicalFields": c["fields"],
        "routines": c["routines"],
        "statements": c["routines"],
        "dataFlows": c["dataFlows"] + c["fieldFlows"] + c["orchestrationFlows"],
        "qualityChecks": c["qualityChecks"],
    }


def check(first: Upload, second: Upload, graph: LineageGraph, backend: str) -> None:
    want = expected_rows(graph)
    got = {k: v for k, v in first.result.written.items() if k in want}
    problems = []
    if not (first.result.succeeded and second.result.succeeded):
        problems.append(f"failed rows: {first.result.failed or second.result.failed}")
    if got != want:
        problems.append(f"first upload wrote {got}, expected {want}")
    if second.rows_written:
        problems.append(f"second upload wrote {second.result.written}")
    if {k: v for k, v in second.result.touched.items() if k in want} != want:
        problems.append(f"second upload touched {second.result.touched}, expected {want}")
    if problems:
        raise SystemExit(f"{backend}: " + "; ".join(problems))


def run_backend(
    name: str, url: str, graph: LineageGraph, definition: Definition, profile: bool
) -> tuple[Upload, Upload, str]:
    catalog = EmbeddedCatalog(url)
    try:
        first, report = timed_upload(catalog, graph, definition, profile)
        second, _ = timed_upload(catalog, graph, definition, False)
    finally:
        catalog.close()
    check(first, second, graph, name)
    return first, second, report


def with_postgres(fn: Callable[[str], Any]) -> Any:
    from ol_dagster_tests.postgres import PostgresServer

    server = PostgresServer().start()
    try:
        engine = create_engine(server.url, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(text('CREATE DATABASE "bench"'))
        engine.dispose()
        return fn(server.database_url("bench"))
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--postgres", action="store_true", help="also upload into PostgreSQL")
    ap.add_argument("--profile", action="store_true", help="cProfile the first uploads")
    args = ap.parse_args()

    definition = parse_settings(
        {
            "catalogs": {"main": {"kind": "embedded", "url": "sqlite:///unused.db"}},
            "definitions": [
                {
                    "name": "bench",
                    "uuid": str(uuid.uuid4()),
                    "catalog": "main",
                    "snapshotMode": "BATCH_SNAPSHOT",
                    "allowedJobNamespaces": ["dbt"],
                    "receiver": {"token": {"env": "OL_BENCH_TOKEN"}},
                }
            ],
        }
    ).definition("bench")

    start = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
    parent = str(uuid.uuid4())
    t0 = time.perf_counter()
    raw = [orjson.dumps(model_event(i, start, parent)) for i in range(args.jobs)]
    gen_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    graph = build_graph(raw, definition)
    normalize_seconds = time.perf_counter() - t0
    normalize_rss = peak_rss_mb()
    if graph.skipped_events or graph.dangling:
        raise SystemExit(f"generated events did not normalize cleanly: {graph.counts()}")

    runs: list[tuple[str, Upload, Upload, str]] = []
    with tempfile.TemporaryDirectory(prefix="ol_bench_upload_") as tmp:
        url = f"sqlite:///{Path(tmp) / 'catalog.db'}"
        runs.append(("SQLite", *run_backend("SQLite", url, graph, definition, args.profile)))
    if args.postgres:
        first, second, report = with_postgres(
            lambda pg: run_backend("PostgreSQL", pg, graph, definition, args.profile)
        )
        runs.append(("PostgreSQL (fsync=off)", first, second, report))

    n = args.jobs
    counts = graph.counts()
    print(
        f"# Catalog upload benchmark\n\n"
        f"machine: {platform.machine()}, nproc={os.cpu_count()}, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}\n"
        f"snapshot: {n:,} dbt-like events, ~{sum(map(len, raw)) // n:,} bytes each "
        f"(generated in {gen_seconds:.1f} s, not timed); graph: "
        + ", ".join(f"{k} {v:,}" for k, v in counts.items() if v)
        + f"\nnormalize (parse + graph): {normalize_seconds:.1f} s = "
        f"{n / normalize_seconds:,.0f} events/s, peak RSS {normalize_rss:,.0f} MB\n"
    )
    print(
        "| catalog | upload | seconds | rows written | rows touched | rows/s | events/s | "
        "events/s incl. normalize | SQL statements | peak RSS MB |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, first, second, _ in runs:
        for label, u in (("first (all new)", first), ("second (identical)", second)):
            rows = u.rows_written or u.rows_touched
            print(
                f"| {name} | {label} | {u.seconds:.2f} | {u.rows_written:,} | "
                f"{u.rows_touched:,} | {rows / u.seconds:,.0f} | {n / u.seconds:,.0f} | "
                f"{n / (u.seconds + normalize_seconds):,.0f} | {u.statements:,} | "
                f"{u.peak_rss_mb:,.0f} |"
            )
    print(
        "\nverified: the first upload wrote exactly the graph's rows per object type, the second "
        "wrote nothing and touched all of them. rows/s counts rows written (first) or touched "
        "(second). Peak RSS is the whole process, cumulative over the run."
    )
    for name, _, _, report in runs:
        if report:
            print(f"\n## Profile of the first upload, {name} (by own time)\n\n```\n{report}```")


if __name__ == "__main__":
    main()
