"""Receiver ingest throughput: events/s through HTTP into the event store, against parse-only.

Runs the real receiver (uvicorn, one worker, loopback port, background thread) on a temporary SQLite
store and posts dbt-like events (a ~20-column schema facet, column lineage, SQL, dbt run facets):

- (a) ``--batches`` posts of ``--batch-size`` events to ``/api/v1/lineage/batch``;
- (b) ``--singles`` single events to ``/api/v1/lineage`` (one request each, as the
  openlineage-python HTTP transport sends them).

Each stage is also timed as ``orjson.loads`` over the very same request bytes (the parse-only
limit), measured in the same run, and reported as a ratio. Every answer is checked (200, all
accepted) and the store's counts are verified at the end, so a fast failure cannot pass as speed.

Usage: ``.venv/bin/python benchmarks/ingest.py [--batches 20] [--batch-size 1000] [--singles 2000]``
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import resource
import secrets
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ol_dagster.receiver.app import create_app  # noqa: E402
from ol_dagster.receiver.server import serve_in_background  # noqa: E402
from ol_dagster.settings import parse_settings  # noqa: E402
from ol_dagster.store import EventStore  # noqa: E402

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.40.0/integration/dbt"
CLIENT_PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.40.0/client/python"
WAREHOUSE = "postgres://warehouse.internal:5432"
TOKEN_ENV = "OL_BENCH_TOKEN"
COLUMN_TYPES = [
    "bigint",
    "integer",
    "varchar",
    "text",
    "numeric(18,2)",
    "timestamp",
    "date",
    "bool",
]


def _facet(schema: str, **fields: object) -> dict:
    return {
        "_producer": CLIENT_PRODUCER,
        "_schemaURL": f"https://openlineage.io/spec/facets/{schema}",
        **fields,
    }


def dbt_event(i: int, start: datetime, parent_run: str) -> dict:
    """A COMPLETE event of one dbt model: 20 output columns, each with its column lineage."""
    model = f"model_{i % 500:03d}"
    upstream = [f"stg_{(i + k) % 300:03d}" for k in range(2)]
    columns = [(f"col_{c:02d}_{model}", COLUMN_TYPES[c % len(COLUMN_TYPES)]) for c in range(20)]
    sql = (
        f"with a as (select * from analytics.{upstream[0]}), b as (select * from analytics."
        f"{upstream[1]})\nselect "
        + ",\n  ".join(f"coalesce(a.{name}, b.{name}) as {name}" for name, _ in columns)
        + "\nfrom a left join b on a.id = b.id where a.updated_at > current_date - 7"
    )
    return {
        "eventType": "COMPLETE",
        "eventTime": (start + timedelta(milliseconds=i)).isoformat(),
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {
            "runId": str(uuid.uuid4()),
            "facets": {
                "parent": _facet(
                    "1-1-0/ParentRunFacet.json#/$defs/ParentRunFacet",
                    job={"namespace": "dbt", "name": "dbt-run-analytics"},
                    run={"runId": parent_run},
                ),
                "dbt_version": _facet("dbt-version-run-facet.json", version="1.10.15"),
                "processing_engine": _facet(
                    "1-1-1/ProcessingEngineRunFacet.json#/$defs/ProcessingEngineRunFacet",
                    name="dbt",
                    version="1.10.15",
                    openlineageAdapterVersion="1.40.0",
                ),
            },
        },
        "job": {
            "namespace": "dbt",
            "name": f"analytics.public.{model}",
            "facets": {
                "sql": _facet(
                    "1-1-0/SQLJobFacet.json#/$defs/SQLJobFacet", query=sql, dialect="postgres"
                ),
                "jobType": _facet(
                    "2-0-3/JobTypeJobFacet.json#/$defs/JobTypeJobFacet",
                    integration="DBT",
                    jobType="MODEL",
                    processingType="BATCH",
                ),
            },
        },
        "inputs": [
            {"namespace": WAREHOUSE, "name": f"analytics.public.{u}", "facets": {}}
            for u in upstream
        ],
        "outputs": [
            {
                "namespace": WAREHOUSE,
                "name": f"analytics.public.{model}",
                "facets": {
                    "schema": _facet(
                        "1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet",
                        fields=[
                            {"name": n, "type": t, "description": f"{n} of {model}"}
                            for n, t in columns
                        ],
                    ),
                    "columnLineage": _facet(
                        "1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet",
                        fields={
                            n: {
                                "inputFields": [
                                    {
                                        "namespace": WAREHOUSE,
                                        "name": f"analytics.public.{u}",
                                        "field": n,
                                        "transformations": [
                                            {"type": "DIRECT", "subtype": "TRANSFORMATION"}
                                        ],
                                    }
                                    for u in upstream
                                ]
                            }
                            for n, _ in columns
                        },
                    ),
                },
                "outputFacets": {},
            }
        ],
    }


@dataclass
class Stage:
    name: str
    events: int
    requests: int
    body_bytes: int
    seconds: float
    parse_seconds: float
    parse_seconds_gc_off: float
    peak_rss_mb: float

    @property
    def rate(self) -> float:
        return self.events / self.seconds

    @property
    def parse_rate(self) -> float:
        return self.events / self.parse_seconds


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def parse_only(bodies: list[bytes], *, gc_off: bool = False) -> float:
    """Best of three timings of orjson.loads over the bodies (the parse-only limit).

    With the garbage collector on (as in the server), big bodies pay for GC passes over the
    object graph they build; ``gc_off`` shows the pure parse for comparison.
    """
    best = float("inf")
    if gc_off:
        gc.disable()
    try:
        for _ in range(3):
            t0 = time.perf_counter()
            for body in bodies:
                orjson.loads(body)
            best = min(best, time.perf_counter() - t0)
    finally:
        gc.enable()
    return best


def post_all(client: httpx.Client, path: str, bodies: list[bytes], per_body: int) -> float:
    t0 = time.perf_counter()
    for body in bodies:
        resp = client.post(path, content=body)
        if resp.status_code != 200:
            raise SystemExit(f"{path}: HTTP {resp.status_code}: {resp.text[:500]}")
        summary = resp.json()["summary"]
        if summary["accepted"] != per_body:
            raise SystemExit(f"{path}: only {summary} accepted: {resp.text[:500]}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=1000)
    ap.add_argument("--singles", type=int, default=2000)
    args = ap.parse_args()

    token = secrets.token_urlsafe(24)
    os.environ[TOKEN_ENV] = token
    start = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
    parent = str(uuid.uuid4())

    t0 = time.perf_counter()
    batch_bodies = [
        orjson.dumps(
            {
                "events": [
                    dbt_event(b * args.batch_size + i, start, parent)
                    for i in range(args.batch_size)
                ]
            }
        )
        for b in range(args.batches)
    ]
    single_bodies = [orjson.dumps(dbt_event(i, start, parent)) for i in range(args.singles)]
    gen_seconds = time.perf_counter() - t0
    event_bytes = (
        len(single_bodies[0]) if single_bodies else len(batch_bodies[0]) // args.batch_size
    )

    with tempfile.TemporaryDirectory(prefix="ol_bench_") as tmp:
        store_url = f"sqlite:///{Path(tmp) / 'store.db'}"
        settings = parse_settings(
            {
                "store": {"url": store_url},
                "catalogs": {
                    "main": {"kind": "embedded", "url": f"sqlite:///{Path(tmp) / 'c.db'}"}
                },
                "definitions": [
                    {
                        "name": "bench",
                        "uuid": str(uuid.uuid4()),
                        "catalog": "main",
                        "allowedJobNamespaces": ["*"],
                        "receiver": {"token": {"env": TOKEN_ENV}},
                    }
                ],
            }
        )
        store = EventStore(store_url)
        stages: list[Stage] = []
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        with (
            serve_in_background(create_app(settings, store)) as url,
            httpx.Client(base_url=url, headers=headers, timeout=120) as client,
        ):
            client.get("/healthz").raise_for_status()
            # warm-up (connection, first-write, imports): not timed, not counted
            post_all(client, "/api/v1/lineage", single_bodies[:5], 1)

            if args.batches:
                secs = post_all(client, "/api/v1/lineage/batch", batch_bodies, args.batch_size)
                stages.append(
                    Stage(
                        f"(a) /lineage/batch, {args.batches} x {args.batch_size}-event posts",
                        args.batches * args.batch_size,
                        args.batches,
                        sum(map(len, batch_bodies)),
                        secs,
                        parse_only(batch_bodies),
                        parse_only(batch_bodies, gc_off=True),
                        peak_rss_mb(),
                    )
                )
            if args.singles:
                secs = post_all(client, "/api/v1/lineage", single_bodies, 1)
                stages.append(
                    Stage(
                        f"(b) /lineage, {args.singles} single-event posts",
                        args.singles,
                        args.singles,
                        sum(map(len, single_bodies)),
                        secs,
                        parse_only(single_bodies),
                        parse_only(single_bodies, gc_off=True),
                        peak_rss_mb(),
                    )
                )

        # The store must hold what was posted, or the figures mean nothing.
        stored = sum(b.accepted_count for b in store.batches("bench"))
        expected = args.batches * args.batch_size + args.singles + 5
        store.dispose()
        if stored != expected:
            raise SystemExit(f"store holds {stored} events, expected {expected}")

    print(
        f"# Receiver ingest benchmark\n\n"
        f"machine: {platform.machine()}, nproc={os.cpu_count()}, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}\n"
        f"store: temporary SQLite (WAL); server: uvicorn, 1 worker, loopback; client: httpx, "
        f"sequential, keep-alive\n"
        f"event: dbt-like RunEvent, 20-column schema + columnLineage + SQL, ~{event_bytes:,} bytes "
        f"(generation took {gen_seconds:.1f}s, not timed)\n"
    )
    print(
        "| stage | events | requests | MB posted | seconds | events/s | "
        "parse-only events/s (orjson.loads) | ratio to parse-only | "
        "parse-only events/s, GC off | peak RSS MB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in stages:
        print(
            f"| {s.name} | {s.events:,} | {s.requests:,} | {s.body_bytes / 1e6:,.1f} | "
            f"{s.seconds:.2f} | {s.rate:,.0f} | {s.parse_rate:,.0f} | "
            f"{s.rate / s.parse_rate:.3f} | {s.events / s.parse_seconds_gc_off:,.0f} | "
            f"{s.peak_rss_mb:,.0f} |"
        )
    print(
        f"\nverified: the store holds all {expected:,} posted events (incl. 5 warm-up singles). "
        "Peak RSS is the whole process (client, server and store), cumulative over the run."
    )


if __name__ == "__main__":
    main()
