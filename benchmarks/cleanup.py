"""Cutoff cleanup at scale: a 10,000-job snapshot, then the same snapshot minus 100 jobs.

The seed (``blindata-openlineage-removal-of-deprecated-metadata``) cleans a snapshot in the run that
synced it, with one dry run and one real call per set. This measures that run on a fresh SQLite
embedded catalog (or ``--url``):

1. ``--jobs`` generated RunEvents, one per job of namespace ``repo`` (each job: a SQL facet, a
   parent DAG, a warehouse input with a schema, an output file with a schema and column lineage
   in the ``bench-bucket`` System, cleanupMode CUTOFF and owned by the definition), normalized
   and uploaded: the catalog the second run finds.
2. The same snapshot without ``--drop`` jobs (spread over the DAGs, so no DAG loses every child):
   normalize, upload (timed), then ``run_cleanup`` with the cap high enough (timed).

Before timing means anything the result is checked: the dropped jobs are gone with their routines,
statements, data, orchestration and field flows, and their output files with their fields; every
other count is unchanged. A Markdown table gives the times, the removed counts and the peak RSS.

Usage: ``.venv/bin/python benchmarks/cleanup.py [--jobs 10000] [--drop 100] [--url URL]``
"""

from __future__ import annotations

import argparse
import platform
import resource
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy  # noqa: E402

from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog  # noqa: E402
from ol_dagster.lineage.graph import flow_scope, orchestration_scope  # noqa: E402
from ol_dagster.settings import SyncDefinition  # noqa: E402
from ol_dagster.sync.cleanup import BatchFacts, run_cleanup  # noqa: E402
from ol_dagster.sync.upload import build_graph, graph_facts, upload_graph  # noqa: E402

NS = "repo"
WAREHOUSE = "postgres://warehouse.internal:5432"
BUCKET = "s3://bench-bucket"
PRODUCER = "https://example.com/ol-dagster-benchmarks"
SPEC = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
COLUMNS = 4
SOURCES = 500
JOBS_PER_DAG = 100


def _schema(prefix: str) -> dict[str, Any]:
    return {"fields": [{"name": f"{prefix}_c{c}", "type": "bigint"} for c in range(COLUMNS)]}


def job_name(i: int) -> str:
    return f"model_{i:05d}"


def event(i: int) -> bytes:
    """Job ``repo.model_<i>``: source ``src_<i % 500>`` -> ``out/model_<i>.parquet``."""
    src = f"analytics.raw.src_{i % SOURCES:03d}"
    src_prefix = f"src{i % SOURCES}"
    out = f"out/{job_name(i)}.parquet"
    return orjson.dumps(
        {
            "eventType": "COMPLETE",
            "eventTime": "2026-11-01T02:00:00.000Z",
            "producer": PRODUCER,
            "schemaURL": SPEC,
            "run": {
                "runId": str(uuid.UUID(int=i + 1, version=4)),
                "facets": {
                    "parent": {
                        "run": {"runId": str(uuid.UUID(int=10**9 + i // JOBS_PER_DAG, version=4))},
                        "job": {"namespace": NS, "name": f"dag_{i // JOBS_PER_DAG:03d}"},
                    }
                },
            },
            "job": {
                "namespace": NS,
                "name": job_name(i),
                "facets": {
                    "sql": {"query": f"insert into {out} select * from {src}", "dialect": "spark"}
                },
            },
            "inputs": [
                {"namespace": WAREHOUSE, "name": src, "facets": {"schema": _schema(src_prefix)}}
            ],
            "outputs": [
                {
                    "namespace": BUCKET,
                    "name": out,
                    "facets": {
                        "schema": _schema("o"),
                        "columnLineage": {
                            "fields": {
                                f"o_c{c}": {
                                    "inputFields": [
                                        {
                                            "namespace": WAREHOUSE,
                                            "name": src,
                                            "field": f"{src_prefix}_c{c}",
                                        }
                                    ]
                                }
                                for c in range(COLUMNS)
                            }
                        },
                    },
                }
            ],
        }
    )


def definition() -> SyncDefinition:
    return SyncDefinition.model_validate(
        {
            "name": "bench",
            "uuid": "44444444-4444-4444-8444-444444444444",
            "catalog": "main",
            "snapshotMode": "BATCH_SNAPSHOT",
            "allowedJobNamespaces": [NS],
            "datasetSystems": [
                {"namespace": BUCKET, "system": "bench-bucket", "cleanupMode": "CUTOFF"}
            ],
            "cleanup": {"maxRemovalsPerRun": 500},
            "receiver": {"token": {"env": "OL_BENCH_TOKEN"}},
        }
    )


def peak_rss_mb() -> float:
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: KiB on Linux, bytes on macOS
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def timed(fn):  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    result = fn()
    return time.perf_counter() - t, result


def flow_scopes(catalog: EmbeddedCatalog) -> set[str]:
    from ol_dagster.catalog.embedded import tables as t

    with catalog.engine.connect() as conn:
        return {r[0] for r in conn.execute(sqlalchemy.select(t.data_flows.c.scope).distinct())} | {
            r[0] for r in conn.execute(sqlalchemy.select(t.field_flows.c.scope).distinct())
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--drop", type=int, default=100)
    ap.add_argument("--url", help="catalog URL (default: a fresh SQLite file in a temp dir)")
    args = ap.parse_args()
    if not 0 < args.drop < args.jobs:
        ap.error("--drop must be between 1 and --jobs - 1")

    d = definition()
    step = args.jobs // args.drop
    dropped = {i for i in range(0, step * args.drop, step)}  # spread: every DAG keeps children
    all_events = [event(i) for i in range(args.jobs)]
    kept_events = [e for i, e in enumerate(all_events) if i not in dropped]

    with tempfile.TemporaryDirectory(prefix="ol_dagster_bench_") as tmp:
        url = args.url or f"sqlite:///{Path(tmp) / 'catalog.db'}"
        catalog = EmbeddedCatalog(url)
        try:
            # 1. the catalog as the previous snapshot left it
            t_norm1, graph1 = timed(lambda: build_graph(all_events, d))
            t_up1, first = timed(lambda: upload_graph(catalog, graph1, d))
            assert first.result.succeeded, first.result.failed[:3]
            before = catalog.counts()

            # 2. the same snapshot minus the dropped jobs: upload, then the cutoff cleanup
            t_norm2, graph2 = timed(lambda: build_graph(kept_events, d))
            time.sleep(0.005)  # SQLite's clock has millisecond steps
            t_up2, second = timed(lambda: upload_graph(catalog, graph2, d))
            assert second.result.succeeded, second.result.failed[:3]
            g = graph_facts(graph2)
            facts = BatchFacts(
                posted=True,
                whole_snapshot=True,
                accepted=len(kept_events),
                job_namespaces=g["jobNamespaces"],
                upload_succeeded=True,
                dataset_systems=g["datasetSystems"],
                dropped=second.result.dropped,
            )
            t_clean, report = timed(
                lambda: run_cleanup(catalog, d, facts, cutoff=second.cutoff, max_removals=10**9)
            )
            rss = peak_rss_mb()
            after = catalog.counts()

            # the answer must be right before its speed means anything
            n = len(dropped)
            assert report["mode"] == "CUTOFF" and report["skippedReason"] is None, report
            assert report["removedJobs"] == sorted(f"{NS}.{job_name(i)}" for i in dropped)
            expected = dict(before)
            for key, per_job in (
                ("jobs", 1),
                ("datasets", 1),  # the output file, in the CUTOFF-owned bucket System
                ("fields", COLUMNS),
                ("routines", 1),
                ("dataFlows", 1),
                ("orchestrationFlows", 1),
                ("fieldFlows", COLUMNS),
            ):
                expected[key] -= per_job * n
            assert after == expected, {k: (before[k], after[k], expected[k]) for k in after}
            remaining = set(catalog.job_names())
            assert not remaining & {f"{NS}.{job_name(i)}" for i in dropped}
            gone = {flow_scope(NS, job_name(i)) for i in dropped}
            gone |= {orchestration_scope(NS, job_name(i)) for i in dropped}
            assert not flow_scopes(catalog) & gone
            real = {}
            for call in report["calls"]:
                for kind, k in (call["real"] or {}).items():
                    real[kind] = real.get(kind, 0) + k
        finally:
            catalog.close()

    backend = sqlalchemy.engine.make_url(url).get_backend_name()
    print(
        f"{args.jobs:,}-job snapshot, then the same minus {n} jobs; embedded catalog on {backend}; "
        f"Python {platform.python_version()}, SQLAlchemy {sqlalchemy.__version__}, "
        f"{platform.machine()}"
    )
    print()
    print(
        "| run | normalize (s) | upload (s) | cleanup (s) | removed jobs | removed by the calls "
        "(real counts) | peak RSS (MiB) |"
    )
    print("|---|---:|---:|---:|---:|---|---:|")
    print(f"| 1: full snapshot | {t_norm1:.2f} | {t_up1:.2f} | — | — | — | — |")
    removed = ", ".join(f"{k} {v:,}" for k, v in sorted(real.items()))
    print(
        f"| 2: minus {n} jobs | {t_norm2:.2f} | {t_up2:.2f} | {t_clean:.2f} | "
        f"{len(report['removedJobs'])} | {removed} | {rss:,.0f} |"
    )
    print()
    print(
        "calls: "
        + "; ".join(
            f"{c['target']} {c.get('system') or ','.join(c.get('scopePrefixes') or [])}"
            for c in report["calls"]
        )
        + f"; planned removals {report['plannedRemovals']:,}"
    )
    print("catalog after: " + ", ".join(f"{k} {v:,}" for k, v in after.items()))
    print("verified: the dropped jobs and their flows, routines and files are gone; nothing else.")


if __name__ == "__main__":
    main()
