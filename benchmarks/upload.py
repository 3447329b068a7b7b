"""Catalog upload throughput: a generated dbt-like snapshot into the embedded catalog.

Generates ``--jobs`` dbt-like COMPLETE events (each model reads 1-2 earlier models or sources,
writes one table with 10 columns, column lineage for every column, its SQL, a parent run facet
pointing at the dbt invocation, and a not_null test on every 10th model's input), normalizes them
into one ``LineageGraph`` (timed apart), then uploads the graph into a fresh embedded catalog:

- SQLite: a temporary file (WAL, synchronous=NORMAL, as ``ol_dagster.db`` opens it);
- PostgreSQL with ``--postgres``: a throwaway local server (``ol_dagster_tests.postgres``, which
  runs with fsync=off, so the figures are an upper bound for a durable server).

Per backend, three snapshots of the same ``--jobs`` models, each a fresh set of runs a day after
the last: the first (everything written), the second (every job unchanged: the embedded catalog
stamps its rows instead of re-sending them, see ``catalog/embedded/changes.py``), the third (every
100th model's SQL changed: those jobs are sent again, the others stamped). Unless
``--no-compare``, the same three go into a second catalog with ``detect_changes=False``, which
re-sends every row as every upload did before change detection: the before/after of one run. For
each upload: wall and CPU seconds, rows written and touched, events/s, the ratio to parse-only
(``orjson.loads`` of the same events, one at a time, best of three), SQL statements and peak RSS.
Every result is checked (the first upload writes exactly the graph's rows, the later ones none and
touch all of them), so a fast failure cannot pass as speed. Each graph is built (not timed) just
before its upload.

Usage: ``.venv/bin/python benchmarks/upload.py [--jobs 10000] [--postgres] [--profile]
[--no-compare]``
"""

from __future__ import annotations

import argparse
import cProfile
import functools
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
from sqlalchemy import event

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog  # noqa: E402
from ol_dagster.catalog.protocol import UploadResult  # noqa: E402
from ol_dagster.lineage import LineageGraph  # noqa: E402
from ol_dagster.settings import SyncDefinition, parse_settings  # noqa: E402
from ol_dagster.sync.upload import build_graph  # noqa: E402

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.40.0/integration/dbt"
WAREHOUSE = "postgres://warehouse.internal:5432"
COLUMNS = 10
SOURCES = 200
CHANGED_EVERY = 100  # the third snapshot changes every 100th model's SQL: 1%
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
    cpu_seconds: float
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
    catalog: EmbeddedCatalog, graph: LineageGraph, definition: SyncDefinition, profile: bool
) -> tuple[Upload, str]:
    statements = 0

    def count(*_: Any) -> None:
        nonlocal statements
        statements += 1

    event.listen(catalog.engine, "before_cursor_execute", count)
    profiler = cProfile.Profile() if profile else None
    t0, c0 = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    result = catalog.upload(graph, definition)
    if profiler:
        profiler.disable()
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    event.remove(catalog.engine, "before_cursor_execute", count)
    report = ""
    if profiler:
        buf = io.StringIO()
        pstats.Stats(profiler, stream=buf).sort_stats("tottime").print_stats(14)
        report = buf.getvalue()
    return Upload(seconds, cpu, statements, result, peak_rss_mb()), report


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


def check(uploads: list[tuple[str, Upload]], want: dict[str, int], backend: str) -> None:
    """The first upload wrote exactly the graph's rows (``want``); every later one (the same
    jobs, new runs, 1% of them changed in place) wrote none and touched them all."""
    problems = []
    for label, u in uploads:
        if not u.result.succeeded:
            problems.append(f"{label}: failed rows: {u.result.failed}")
        written = {k: v for k, v in u.result.written.items() if k in want and v}
        touched = {k: v for k, v in u.result.touched.items() if k in want and v}
        if label.startswith("1"):
            if written != want:
                problems.append(f"{label} wrote {written}, expected {want}")
        elif written or touched != want:
            problems.append(f"{label} wrote {written}, touched {touched}, expected {want}")
    if problems:
        raise SystemExit(f"{backend}: " + "; ".join(problems))


SNAPSHOTS = (
    "1 first (all new)",
    "2 unchanged (new runs)",
    "3 1% changed (new runs)",
)


def snapshot_events(n: int, snapshot: int) -> list[bytes]:
    """Snapshot 1, 2 (the same jobs, new runs a day later), 3 (another day; every 100th model's
    SQL changed)."""
    start = datetime(2026, 11, 1, 2, 0, tzinfo=UTC) + timedelta(days=snapshot - 1)
    parent = str(uuid.uuid4())
    out = []
    for i in range(n):
        e = model_event(i, start, parent)
        if snapshot == 3 and i % CHANGED_EVERY == CHANGED_EVERY // 2:
            e["job"]["facets"]["sql"]["query"] += "\nwhere a.col_00 is not null"
        out.append(orjson.dumps(e))
    return out


def parse_seconds(raw: list[bytes]) -> float:
    """``orjson.loads`` of the events one at a time, best of three: the parse-only yardstick."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for r in raw:
            orjson.loads(r)
        best = min(best, time.perf_counter() - t0)
    return best


@dataclass
class Run:
    backend: str
    mode: str
    label: str
    upload: Upload


def run_backend(
    name: str,
    url: Callable[[], str],
    snapshots: list[Callable[[], LineageGraph]],
    definition: SyncDefinition,
    want: dict[str, int],
    profile: bool,
    compare: bool,
) -> tuple[list[Run], str]:
    """The three snapshots into a fresh catalog with change detection, and (``compare``) into
    another that re-sends every row, as every upload did before."""
    runs: list[Run] = []
    report = ""
    modes = [("change detection", True)] + ([("re-send all", False)] if compare else [])
    for mode, detect in modes:
        catalog = EmbeddedCatalog(url(), detect_changes=detect)
        uploads: list[tuple[str, Upload]] = []
        try:
            for label, build in zip(SNAPSHOTS, snapshots, strict=True):
                graph = build()
                u, prof = timed_upload(catalog, graph, definition, profile and detect)
                if label.startswith("2") and prof:
                    report = prof
                uploads.append((label, u))
                runs.append(Run(name, mode, label, u))
                del graph
        finally:
            catalog.close()
        check(uploads, want, f"{name}, {mode}")
    return runs, report


def with_postgres(fn: Callable[[Callable[[], str]], Any]) -> Any:
    from ol_dagster_tests.postgres import PostgresServer

    server = PostgresServer().start()
    try:
        return fn(server.fresh_database)
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--postgres", action="store_true", help="also upload into PostgreSQL")
    ap.add_argument(
        "--profile", action="store_true", help="cProfile the unchanged snapshot's upload"
    )
    ap.add_argument(
        "--no-compare", action="store_true", help="skip the catalog that re-sends every row"
    )
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

    n = args.jobs
    t0 = time.perf_counter()
    raws = [snapshot_events(n, s) for s in (1, 2, 3)]
    gen_seconds = time.perf_counter() - t0
    parse = [parse_seconds(raw) for raw in raws]
    t0 = time.perf_counter()
    graph = build_graph(raws[0], definition)
    normalize_seconds = time.perf_counter() - t0
    normalize_rss = peak_rss_mb()
    if graph.skipped_events or graph.dangling:
        raise SystemExit(f"generated events did not normalize cleanly: {graph.counts()}")
    counts = graph.counts()
    want = expected_rows(graph)
    del graph
    # each snapshot's graph is built when uploaded (not timed): one graph in memory at a time
    snapshots = [functools.partial(build_graph, raw, definition) for raw in raws]

    runs: list[Run] = []
    reports: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="ol_bench_upload_") as tmp:
        urls = (f"sqlite:///{Path(tmp) / f'catalog{i}.db'}" for i in range(10))
        done, report = run_backend(
            "SQLite",
            lambda: next(urls),
            snapshots,
            definition,
            want,
            args.profile,
            not args.no_compare,
        )
        runs += done
        reports.append(("SQLite", report))
    if args.postgres:
        done, report = with_postgres(
            lambda url: run_backend(
                "PostgreSQL (fsync=off)",
                url,
                snapshots,
                definition,
                want,
                args.profile,
                not args.no_compare,
            )
        )
        runs += done
        reports.append(("PostgreSQL", report))

    print(
        f"# Catalog upload benchmark\n\n"
        f"machine: {platform.machine()}, nproc={os.cpu_count()}, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}\n"
        f"snapshot: {n:,} dbt-like events, ~{sum(map(len, raws[0])) // n:,} bytes each "
        f"(generated in {gen_seconds:.1f} s, not timed); graph: "
        + ", ".join(f"{k} {v:,}" for k, v in counts.items() if v)
        + f"\nnormalize (parse + graph): {normalize_seconds:.1f} s = "
        f"{n / normalize_seconds:,.0f} events/s, peak RSS {normalize_rss:,.0f} MB\n"
        f"parse-only (orjson.loads, one event at a time): "
        + ", ".join(f"snapshot {i + 1} {n / p:,.0f} events/s" for i, p in enumerate(parse))
        + "\n"
    )
    print(
        "| catalog | mode | snapshot | seconds | CPU s | rows written | rows touched | "
        "events/s | ratio to parse-only | SQL statements | peak RSS MB |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        u = r.upload
        index = int(r.label[0]) - 1
        print(
            f"| {r.backend} | {r.mode} | {r.label[2:]} | {u.seconds:.2f} | {u.cpu_seconds:.2f} | "
            f"{u.rows_written:,} | {u.rows_touched:,} | {n / u.seconds:,.0f} | "
            f"{parse[index] / u.seconds:.3f} | {u.statements:,} | {u.peak_rss_mb:,.0f} |"
        )
    print(
        "\nverified: the first upload wrote exactly the graph's rows per object type; the later "
        "ones wrote none and touched all of them (rows written are new rows; an existing row, "
        "re-sent or stamped, counts as touched). The ratio is parse-only seconds over upload "
        "seconds for the same events. Peak RSS is the whole process, cumulative over the run."
    )
    for name, report in reports:
        if report:
            print(f"\n## Profile of the unchanged snapshot's upload, {name} (by own time)")
            print(f"\n```\n{report}```")


if __name__ == "__main__":
    main()
