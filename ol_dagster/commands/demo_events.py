"""Sample events of a small warehouse, written by ol-dagster itself for ``ol-dagster demo``.

An Airflow DAG loads raw orders into PostgreSQL, dbt models build a revenue fact table from them,
a Spark job builds customer features, and an Airflow task exports the revenue facts to S3. The
events have the shape the real producers send (jobType, parent, sql, schema and columnLineage
facets), so the demo exercises the same path a real deployment does. The second snapshot no longer
has the export task: the catalog must lose it and its flows in that run.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

PRODUCERS = {
    "AIRFLOW": "https://github.com/apache/airflow/tree/providers-openlineage/1.14.0",
    "DBT": "https://github.com/OpenLineage/OpenLineage/tree/1.40.0/integration/dbt",
    "SPARK": "https://github.com/OpenLineage/OpenLineage/tree/1.23.0/integration/spark",
}
SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
FACET = "https://openlineage.io/spec/facets/"
PG = "postgres://warehouse-db:5432"
S3 = "s3://warehouse-exports"

# One repository, one job namespace: the snapshot describes everything it owns (seed's Example).
NS = "warehouse"
EXPORT_JOB = (NS, "warehouse_daily.export_revenue")
FOCUS = (PG, "warehouse.analytics.fct_revenue")  # the dataset whose lineage the demo prints


def _facet(name: str, version: str, **fields: Any) -> dict[str, Any]:
    return {
        "_producer": PRODUCERS["SPARK"],
        "_schemaURL": f"{FACET}{version}/{name}.json",
        **fields,
    }


def _dataset(ns: str, name: str, columns: list[str] | None = None, lineage: dict | None = None):
    facets: dict[str, Any] = {}
    if columns:
        facets["schema"] = _facet(
            "SchemaDatasetFacet",
            "1-2-0",
            fields=[{"name": c, "type": "VARCHAR"} for c in columns],
        )
    if lineage:
        facets["columnLineage"] = _facet(
            "ColumnLineageDatasetFacet",
            "1-2-0",
            fields={
                out: {
                    "inputFields": [
                        {
                            "namespace": ns_in,
                            "name": name_in,
                            "field": field_in,
                            "transformations": [{"type": "DIRECT", "subtype": "IDENTITY"}],
                        }
                        for ns_in, name_in, field_in in sources
                    ]
                }
                for out, sources in lineage.items()
            },
        )
    return {"namespace": ns, "name": name, "facets": facets}


_ORDERS = ["order_id", "customer_id", "amount", "ordered_at"]
_STG = ["order_id", "customer_id", "amount", "order_date"]
_FCT = ["order_date", "revenue"]

# (namespace, name, integration, jobType, inputs, outputs, sql, parent)
_JOBS: list[tuple] = [
    (NS, "warehouse_daily", "AIRFLOW", "DAG", [], [], None, None),
    (
        NS,
        "warehouse_daily.load_orders",
        "AIRFLOW",
        "TASK",
        [_dataset("s3://raw-landing", "orders/orders.csv")],
        [_dataset(PG, "warehouse.raw.orders", _ORDERS)],
        "COPY raw.orders FROM 's3://raw-landing/orders/orders.csv'",
        (NS, "warehouse_daily"),
    ),
    (
        NS,
        "dbt.stg_orders",
        "DBT",
        "MODEL",
        [_dataset(PG, "warehouse.raw.orders", _ORDERS)],
        [
            _dataset(
                PG,
                "warehouse.analytics.stg_orders",
                _STG,
                {
                    "order_id": [(PG, "warehouse.raw.orders", "order_id")],
                    "customer_id": [(PG, "warehouse.raw.orders", "customer_id")],
                    "amount": [(PG, "warehouse.raw.orders", "amount")],
                    "order_date": [(PG, "warehouse.raw.orders", "ordered_at")],
                },
            )
        ],
        "select order_id, customer_id, amount, ordered_at::date as order_date from raw.orders",
        (NS, "warehouse_daily"),
    ),
    (
        NS,
        "dbt.fct_revenue",
        "DBT",
        "MODEL",
        [_dataset(PG, "warehouse.analytics.stg_orders", _STG)],
        [
            _dataset(
                PG,
                "warehouse.analytics.fct_revenue",
                _FCT,
                {
                    "order_date": [(PG, "warehouse.analytics.stg_orders", "order_date")],
                    "revenue": [(PG, "warehouse.analytics.stg_orders", "amount")],
                },
            )
        ],
        "select order_date, sum(amount) as revenue from analytics.stg_orders group by 1",
        (NS, "warehouse_daily"),
    ),
    (
        NS,
        "spark.customer_features",
        "SPARK",
        "JOB",
        [_dataset(PG, "warehouse.analytics.stg_orders", _STG)],
        [_dataset("s3://feature-store", "customers/features.parquet", ["customer_id", "orders"])],
        None,
        None,
    ),
    (
        *EXPORT_JOB,
        "AIRFLOW",
        "TASK",
        [_dataset(PG, "warehouse.analytics.fct_revenue", _FCT)],
        [_dataset(S3, "revenue/daily.parquet", _FCT)],
        None,
        (NS, "warehouse_daily"),
    ),
]


def _run_events(job: tuple, start: datetime, parent_run: str | None) -> list[dict[str, Any]]:
    ns, name, integration, job_type, inputs, outputs, sql, parent = job
    run_id = str(uuid.uuid4())
    job_facets: dict[str, Any] = {
        "jobType": _facet(
            "JobTypeJobFacet",
            "2-0-4",
            processingType="BATCH",
            integration=integration,
            jobType=job_type,
        )
    }
    if sql:
        job_facets["sql"] = _facet("SQLJobFacet", "1-1-0", query=sql, dialect="postgres")
    run_facets: dict[str, Any] = {}
    if parent and parent_run:
        run_facets["parent"] = _facet(
            "ParentRunFacet",
            "1-2-0",
            run={"runId": parent_run},
            job={"namespace": parent[0], "name": parent[1]},
        )
    events = []
    for offset, event_type in ((0, "START"), (45, "COMPLETE")):
        events.append(
            {
                "eventType": event_type,
                "eventTime": (start + timedelta(seconds=offset)).isoformat(),
                "producer": PRODUCERS[integration],
                "schemaURL": SCHEMA_URL,
                "run": {"runId": run_id, "facets": run_facets},
                "job": {"namespace": ns, "name": name, "facets": job_facets},
                "inputs": inputs,
                "outputs": outputs,
            }
        )
    return events


def _day_start(days_ago: int) -> datetime:
    today = datetime.now(UTC).replace(hour=2, minute=0, second=0, microsecond=0)
    return today - timedelta(days=days_ago)


def snapshot(day: int, *, drop: set[tuple[str, str]] = frozenset()) -> dict[str, Any]:  # type: ignore[assignment]
    """One snapshot batch (``{"events": [...]}``) of the warehouse on day ``day`` (0: two days ago,
    so the analyses' window always holds the demo)."""
    start = _day_start(2 - day)
    dag_run = str(uuid.uuid5(uuid.NAMESPACE_URL, f"warehouse_daily/{day}"))
    events: list[dict[str, Any]] = []
    for i, job in enumerate(_JOBS):
        if (job[0], job[1]) in drop:
            continue
        evs = _run_events(job, start + timedelta(minutes=5 * i), dag_run)
        if job[1] == "warehouse_daily":
            for e in evs:
                e["run"]["runId"] = dag_run
        events.extend(evs)
    return {"events": events}


def _ops_run(name: str, start: datetime, *, failed: bool, rows: int, checks: dict[str, bool]):
    run_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{name}/{start.isoformat()}"))
    job = {
        "namespace": OPS,
        "name": name,
        "facets": {
            "jobType": _facet(
                "JobTypeJobFacet",
                "2-0-4",
                processingType="BATCH",
                integration="AIRFLOW",
                jobType="TASK",
            )
        },
    }
    source = {
        "namespace": PG,
        "name": "warehouse.raw.orders",
        "inputFacets": {
            "dataQualityAssertions": _facet(
                "DataQualityAssertionsDatasetFacet",
                "1-0-1",
                assertions=[
                    {"assertion": a, "success": ok, "column": "order_id"}
                    for a, ok in checks.items()
                ],
            )
        },
    }
    target = {
        "namespace": S3,
        "name": f"ops/{name}.parquet",
        "outputFacets": {
            "outputStatistics": _facet("OutputStatisticsOutputDatasetFacet", "1-0-2", rowCount=rows)
        },
    }
    common = {"producer": PRODUCERS["AIRFLOW"], "schemaURL": SCHEMA_URL, "job": job}
    return [
        {
            **common,
            "eventType": "START",
            "eventTime": start.isoformat(),
            "run": {"runId": run_id},
            "inputs": [source],
            "outputs": [],
        },
        {
            **common,
            "eventType": "FAIL" if failed else "COMPLETE",
            "eventTime": (start + timedelta(minutes=4)).isoformat(),
            "run": {"runId": run_id},
            "inputs": [source],
            "outputs": [] if failed else [target],
        },
    ]


OPS = "ops"


def history() -> dict[str, Any]:
    """Two days of an hourly extract (one failure, one failing uniqueness test) and a daily digest
    that stopped four days ago: what the analyses and the jobs_on_schedule check are for."""
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    events: list[dict[str, Any]] = []
    for h in range(47, -1, -1):  # the last run started this hour: on schedule
        events += _ops_run(
            "orders_hourly_extract",
            now - timedelta(hours=h),
            failed=h == 30,
            rows=1000 + h,
            checks={"not_null": True, "unique": h != 20},
        )
    for d in range(12, 3, -1):
        events += _ops_run(
            "daily_digest", _day_start(d), failed=False, rows=50, checks={"not_null": True}
        )
    return {"events": events}


def demo_batches() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("day 1: the whole warehouse", snapshot(0)),
        ("day 2: the S3 export task was retired", snapshot(1, drop={EXPORT_JOB})),
    ]
