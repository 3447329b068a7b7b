"""Normalization: one test per rule of issue 3, on small hand-written events.

Events go in as dicts (or bytes), the ``LineageGraph`` comes out; every assertion is about what a
catalog would be told.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from ol_dagster.lineage import normalize
from ol_dagster.lineage.graph import DataFlow, FieldFlow, OrchestrationFlow
from ol_dagster.lineage.normalize import DATASET_NOT_DESCRIBED, FIELD_NOT_IN_SCHEMA
from ol_dagster.lineage.runs import combine_runs
from ol_dagster.openlineage.models import parse_event
from ol_dagster_tests.conftest import run_event

PG = "postgres://warehouse.internal:5432"
JOB = ("etl", "build_daily_kpi")


def event(
    *,
    inputs: list[tuple[str, str]] = (),  # type: ignore[assignment]
    outputs: list[tuple[str, str]] = (),  # type: ignore[assignment]
    job_facets: dict[str, Any] | None = None,
    run_facets: dict[str, Any] | None = None,
    input_facets: dict[int, dict[str, Any]] | None = None,
    output_facets: dict[int, dict[str, Any]] | None = None,
    input_io: dict[int, dict[str, Any]] | None = None,
    output_io: dict[int, dict[str, Any]] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """``run_event`` plus facets: ``input_facets[i]`` are the dataset facets of input i,
    ``input_io[i]`` its inputFacets (``output_io[i]``: outputFacets)."""
    data = run_event(inputs=inputs, outputs=outputs, **kwargs)
    if job_facets:
        data["job"]["facets"] = job_facets
    if run_facets:
        data["run"]["facets"] = run_facets
    for side, facets, key in (
        ("inputs", input_facets, "facets"),
        ("outputs", output_facets, "facets"),
        ("inputs", input_io, "inputFacets"),
        ("outputs", output_io, "outputFacets"),
    ):
        for i, f in (facets or {}).items():
            data[side][i][key] = f
    return data


def schema(*names: str | tuple[str, list[Any]]) -> dict[str, Any]:
    def field(n: str | tuple[str, list[Any]]) -> dict[str, Any]:
        if isinstance(n, tuple):
            return {"name": n[0], "type": "struct", "fields": [field(c) for c in n[1]]}
        return {"name": n, "type": "varchar"}

    return {"schema": {"fields": [field(n) for n in names]}}


def input_field(ns: str, name: str, column: str, kind: str = "DIRECT", sub: str = "IDENTITY"):
    return {
        "namespace": ns,
        "name": name,
        "field": column,
        "transformations": [{"type": kind, "subtype": sub}],
    }


def job_type(processing: str = "BATCH", **pattern: Any) -> dict[str, Any]:
    facet: dict[str, Any] = {"processingType": processing, "integration": "SPARK", "jobType": "JOB"}
    if pattern:
        facet["emissionPattern"] = pattern
    return {"jobType": facet}


def at(minute: int, second: int = 0) -> str:
    return f"2026-11-01T02:{minute:02d}:{second:02d}.000Z"


def utc(minute: int, second: int = 0) -> datetime:
    return datetime(2026, 11, 1, 2, minute, second, tzinfo=UTC)


# -- jobs ----------------------------------------------------------------------------------------


def test_job_properties_from_job_facets() -> None:
    facets = {
        "jobType": {"processingType": "BATCH", "integration": "AIRFLOW", "jobType": "TASK"},
        "documentation": {"description": "Builds the daily KPI table."},
        "ownership": {"owners": [{"name": "team:data", "type": "MAINTAINER"}, {"name": "u:ann"}]},
        "sourceCodeLocation": {
            "type": "git",
            "url": "https://git.example.com/etl/blob/main/kpi.py",
            "repoUrl": "https://git.example.com/etl",
        },
    }
    graph = normalize([event(job_facets=facets)])
    job = graph.jobs[JOB]
    assert (job.processing_type, job.integration, job.job_type) == ("BATCH", "AIRFLOW", "TASK")
    assert job.description == "Builds the daily KPI table."
    assert job.owners == ["team:data", "u:ann"]
    assert job.source_code_location == "https://git.example.com/etl/blob/main/kpi.py"
    assert graph.counts()["jobs"] == 1


def test_a_job_without_facets_is_still_a_job() -> None:
    graph = normalize([event()])
    job = graph.jobs[JOB]
    assert (job.integration, job.description, job.owners) == (None, None, [])
    assert graph.routines == {}


def test_sql_becomes_a_routine_with_statement_and_dialect() -> None:
    sql = "INSERT INTO kpi SELECT day, count(*) FROM orders GROUP BY day"
    graph = normalize([event(job_facets={"sql": {"query": sql, "dialect": "postgres"}})])
    routine = graph.routines[JOB]
    assert (routine.job, routine.statement, routine.dialect) == (JOB, sql, "postgres")
    assert graph.counts()["routines"] == 1


# -- datasets: placement per store ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("namespace", "name", "schema_", "object_name", "kind"),
    [
        (PG, "shop.public.orders", "shop.public", "orders", "table"),
        ("mysql://db.internal:3306", "shop.orders", "shop", "orders", "table"),
        ("s3://lake", "raw/orders/2026-11-01.csv", "raw/orders", "2026-11-01.csv", "file"),
        ("s3://lake", "/raw/orders/2026-11-01.parquet", "raw/orders", "2026-11-01.parquet", "file"),
        ("s3://lake", "raw/orders", "raw", "orders", "folder"),
        ("hdfs://namenode:8020", "/warehouse/t2", "warehouse", "t2", "folder"),
        ("kafka://broker:9092", "orders.v1", "", "orders.v1", "topic"),
        ("food_delivery", "public.delivery_7_days", "", "public.delivery_7_days", "other"),
    ],
)
def test_datasets_are_placed_per_store(
    namespace: str, name: str, schema_: str, object_name: str, kind: str
) -> None:
    graph = normalize([event(outputs=[(namespace, name)])])
    node = graph.datasets[(namespace, name)]
    assert (node.schema, node.object_name, node.type) == (schema_, object_name, kind)
    assert node.system == namespace  # no rule: the namespace is the System


@pytest.mark.parametrize(
    ("namespace", "name", "dataset_type", "kind"),
    [
        ("s3://lake", "warehouse/orders", "TABLE", "table"),  # a Delta table is no folder
        ("food_delivery", "orders_stream", "TOPIC", "topic"),
        (PG, "shop.public.orders_v", "VIEW", "table"),
    ],
)
def test_the_dataset_type_facet_overrides_the_guess(
    namespace: str, name: str, dataset_type: str, kind: str
) -> None:
    facets = {"datasetType": {"datasetType": dataset_type}}
    graph = normalize([event(outputs=[(namespace, name)], output_facets={0: facets})])
    assert graph.datasets[(namespace, name)].type == kind


def test_a_trailing_slash_is_trimmed_and_no_port_is_invented() -> None:
    graph = normalize(
        [
            event(inputs=[("s3://lake/", "raw/a.csv")], outputs=[("postgres://pg/", "db.s.t")]),
            event(inputs=[("s3://lake", "raw/a.csv")], outputs=[("postgres://pg", "db.s.t")]),
        ]
    )
    assert set(graph.datasets) == {("s3://lake", "raw/a.csv"), ("postgres://pg", "db.s.t")}
    assert graph.datasets[("postgres://pg", "db.s.t")].system == "postgres://pg"


def test_dataset_system_rules_win() -> None:
    rules = [("postgres://warehouse*", "Warehouse"), ("s3://*", "Data lake")]
    graph = normalize(
        [event(inputs=[("s3://lake", "raw/a.csv")], outputs=[(PG, "shop.public.orders")])],
        dataset_systems=rules,
    )
    assert graph.datasets[(PG, "shop.public.orders")].system == "Warehouse"
    assert graph.datasets[("s3://lake", "raw/a.csv")].system == "Data lake"
    # the rule changes the System, not the identity or the placement
    assert graph.datasets[(PG, "shop.public.orders")].schema == "shop.public"
    # a namespace no rule matches keeps its own System
    other = normalize([event(outputs=[("kafka://k:9092", "t")])], dataset_systems=rules)
    assert other.datasets[("kafka://k:9092", "t")].system == "kafka://k:9092"


def test_dataset_description_and_owners() -> None:
    facets = {
        "documentation": {"description": "One row per order."},
        "ownership": {"owners": [{"name": "team:sales"}]},
    }
    graph = normalize([event(outputs=[(PG, "shop.public.orders")], output_facets={0: facets})])
    node = graph.datasets[(PG, "shop.public.orders")]
    assert (node.description, node.owners) == ("One row per order.", ["team:sales"])


# -- fields --------------------------------------------------------------------------------------


def test_schema_fields_with_nested_fields_are_flattened() -> None:
    facets = schema("id", ("address", ["street", ("geo", ["lat", "lon"])]), "total")
    graph = normalize([event(outputs=[(PG, "shop.public.orders")], output_facets={0: facets})])
    node = graph.datasets[(PG, "shop.public.orders")]
    assert list(node.fields) == [
        "id",
        "address",
        "address.street",
        "address.geo",
        "address.geo.lat",
        "address.geo.lon",
        "total",
    ]
    assert node.fields["address.street"].type == "varchar"
    assert node.fields["address"].type == "struct"
    # top-level fields are numbered by position (1-based) when the producer gives no ordinal
    assert [node.fields[f].ordinal for f in ("id", "address", "total")] == [1, 2, 3]
    assert graph.counts()["fields"] == 7


def test_an_explicit_ordinal_position_is_kept() -> None:
    facets = {
        "schema": {
            "fields": [
                {"name": "b", "ordinal_position": 2, "description": "second"},
                {"name": "a", "ordinal_position": 1},
            ]
        }
    }
    graph = normalize([event(outputs=[(PG, "db.s.t")], output_facets={0: facets})])
    fields = graph.datasets[(PG, "db.s.t")].fields
    assert (fields["a"].ordinal, fields["b"].ordinal) == (1, 2)
    assert fields["b"].description == "second"


# -- symlinks ------------------------------------------------------------------------------------


def test_a_table_symlink_makes_path_and_table_one_dataset() -> None:
    hive = ("hive://metastore:9083", "default.orders")
    hdfs = ("hdfs://namenode:8020", "/warehouse/orders")
    symlinks = {
        "symlinks": {"identifiers": [{"namespace": hive[0], "name": hive[1], "type": "TABLE"}]}
    }
    writer = event(
        name="write_orders",
        inputs=[("s3://lake", "raw/orders.csv")],
        outputs=[hdfs],
        output_facets={0: symlinks},
    )
    reader = event(name="read_orders", inputs=[hive], outputs=[(PG, "shop.public.orders")])
    for batch in ([writer, reader], [reader, writer]):
        graph = normalize(batch)
        table_nodes = [n for n in graph.datasets.values() if hdfs in n.aliases or n.key == hive]
        assert len(table_nodes) == 1
        node = table_nodes[0]
        assert node.key == hive
        assert hdfs in node.aliases
        assert hdfs not in graph.datasets
        assert len(graph.datasets) == 3
        assert DataFlow(("s3://lake", "raw/orders.csv"), hive, ("etl", "write_orders")) in (
            graph.data_flows
        )
        assert DataFlow(hive, (PG, "shop.public.orders"), ("etl", "read_orders")) in (
            graph.data_flows
        )


# -- data flows ----------------------------------------------------------------------------------


def test_each_input_flows_to_each_output_in_the_job_scope() -> None:
    ins = [(PG, "shop.public.orders"), (PG, "shop.public.items")]
    outs = [(PG, "shop.mart.kpi"), ("s3://lake", "export/kpi.csv")]
    graph = normalize([event(inputs=ins, outputs=outs)])
    assert graph.data_flows == {DataFlow(i, o, JOB) for i in ins for o in outs}
    assert {f.scope for f in graph.data_flows} == {"ol:etl|build_daily_kpi"}
    assert graph.counts()["dataFlows"] == 4


def test_a_dataset_read_and_written_by_a_job_is_no_self_loop() -> None:
    orders = (PG, "shop.public.orders")
    updates = (PG, "shop.public.order_updates")
    graph = normalize([event(inputs=[orders, updates], outputs=[orders])])
    assert graph.data_flows == {DataFlow(updates, orders, JOB)}


# -- field flows ---------------------------------------------------------------------------------


def test_field_flows_from_column_lineage_with_transformation() -> None:
    orders, kpi = (PG, "shop.public.orders"), (PG, "shop.mart.kpi")
    lineage = {
        "columnLineage": {
            "fields": {
                "day": {
                    "inputFields": [input_field(*orders, "created_at", "DIRECT", "TRANSFORMATION")]
                },
                "orders": {"inputFields": [input_field(*orders, "id", "DIRECT", "AGGREGATION")]},
            }
        }
    }
    graph = normalize(
        [
            event(
                inputs=[orders],
                outputs=[kpi],
                input_facets={0: schema("id", "created_at")},
                output_facets={0: {**schema("day", "orders"), **lineage}},
            )
        ]
    )
    assert graph.field_flows == {
        FieldFlow((*orders, "created_at"), (*kpi, "day"), JOB, "DIRECT", "TRANSFORMATION"),
        FieldFlow((*orders, "id"), (*kpi, "orders"), JOB, "DIRECT", "AGGREGATION"),
    }
    assert {f.scope for f in graph.field_flows} == {"ol:etl|build_daily_kpi"}
    assert graph.dangling == []


def test_dataset_level_column_inputs_flow_to_every_output_field() -> None:
    orders, kpi = (PG, "shop.public.orders"), (PG, "shop.mart.kpi")
    lineage = {
        "columnLineage": {
            "fields": {"day": {"inputFields": [input_field(*orders, "created_at")]}},
            "dataset": [input_field(*orders, "status", "INDIRECT", "FILTER")],
        }
    }
    graph = normalize(
        [
            event(
                inputs=[orders],
                outputs=[kpi],
                input_facets={0: schema("created_at", "status")},
                output_facets={0: {**schema("day", "orders", "revenue"), **lineage}},
            )
        ]
    )
    filters = {f for f in graph.field_flows if f.subtype == "FILTER"}
    assert filters == {
        FieldFlow((*orders, "status"), (*kpi, out), JOB, "INDIRECT", "FILTER")
        for out in ("day", "orders", "revenue")
    }
    assert len(graph.field_flows) == 4


# -- orchestration -------------------------------------------------------------------------------


def _parent(ns: str, name: str, root: tuple[str, str] | None = None) -> dict[str, Any]:
    facet: dict[str, Any] = {
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": ns, "name": name},
    }
    if root:
        facet["root"] = {
            "run": {"runId": str(uuid.uuid4())},
            "job": {"namespace": root[0], "name": root[1]},
        }
    return {"parent": facet}


def test_orchestration_flow_from_the_parent_facet_with_its_root() -> None:
    graph = normalize(
        [
            event(
                namespace="airflow",
                name="daily.load_orders",
                run_facets=_parent("airflow", "daily", root=("airflow", "daily")),
            ),
            event(
                namespace="spark",
                name="load_orders_app.insert",
                run_facets=_parent("airflow", "daily.load_orders", root=("airflow", "daily")),
            ),
        ]
    )
    assert graph.orchestration_flows == {
        OrchestrationFlow(
            ("airflow", "daily"), ("airflow", "daily.load_orders"), ("airflow", "daily")
        ),
        OrchestrationFlow(
            ("airflow", "daily.load_orders"),
            ("spark", "load_orders_app.insert"),
            ("airflow", "daily"),
        ),
    }
    scopes = {f.child: f.scope for f in graph.orchestration_flows}
    assert (
        scopes[("spark", "load_orders_app.insert")]
        == "ol:spark|load_orders_app.insert#orchestration"
    )
    # the DAG is known only from its children's parent facet, and is a job all the same
    assert ("airflow", "daily") in graph.jobs
    assert graph.jobs[("airflow", "daily")].metrics.runs == 0
    assert graph.counts()["orchestrationFlows"] == 2


def test_a_parent_without_root_and_a_parent_seen_only_as_parent() -> None:
    graph = normalize([event(run_facets=_parent("airflow", "daily"))])
    assert graph.orchestration_flows == {OrchestrationFlow(("airflow", "daily"), JOB, None)}
    assert set(graph.jobs) == {JOB, ("airflow", "daily")}


def test_a_parent_pointing_at_its_own_job_is_ignored() -> None:
    graph = normalize([event(run_facets=_parent(*JOB))])
    assert graph.orchestration_flows == set()
    assert set(graph.jobs) == {JOB}


# -- quality -------------------------------------------------------------------------------------


def _assertions(*results: tuple[str, str | None, bool]) -> dict[str, Any]:
    return {
        "dataQualityAssertions": {
            "assertions": [
                {"assertion": a, "column": c, "success": ok, "severity": "error"}
                if c
                else {"assertion": a, "success": ok}
                for a, c, ok in results
            ]
        }
    }


def test_quality_checks_from_the_input_facet() -> None:
    orders = (PG, "shop.public.orders")
    checks = _assertions(
        ("not_null", "id", True), ("unique", "id", False), ("row_count", None, True)
    )
    graph = normalize([event(inputs=[orders], input_io={0: checks}, event_time=at(5))])
    got = {(q.name, q.column): q for q in graph.quality_checks.values()}
    assert set(got) == {("not_null", "id"), ("unique", "id"), ("row_count", None)}
    assert got[("unique", "id")].success is False
    assert got[("not_null", "id")].success is True
    assert got[("not_null", "id")].severity == "error"
    assert all(q.job == JOB and q.dataset == orders for q in got.values())
    assert got[("unique", "id")].checked_at == utc(5)
    assert graph.counts()["qualityChecks"] == 3


def test_dbt_assertions_as_dataset_facet_and_input_facet_count_once() -> None:
    orders = (PG, "shop.public.orders")
    checks = _assertions(("not_null", "id", True))
    graph = normalize([event(inputs=[orders], input_facets={0: checks}, input_io={0: checks})])
    assert len(graph.quality_checks) == 1
    only = next(iter(graph.quality_checks.values()))
    assert (only.name, only.column, only.success) == ("not_null", "id", True)


def test_dbt_assertions_only_as_a_dataset_facet_are_read() -> None:
    orders = (PG, "shop.public.orders")
    graph = normalize(
        [event(inputs=[orders], input_facets={0: _assertions(("unique", "id", False))})]
    )
    assert [q.success for q in graph.quality_checks.values()] == [False]


@pytest.mark.parametrize("order", ["in time order", "latest first"])
def test_a_quality_check_keeps_its_latest_result(order: str) -> None:
    orders = (PG, "shop.public.orders")
    failed = event(
        inputs=[orders], input_io={0: _assertions(("unique", "id", False))}, event_time=at(1)
    )
    passed = event(
        inputs=[orders], input_io={0: _assertions(("unique", "id", True))}, event_time=at(9)
    )
    batch = [failed, passed] if order == "in time order" else [passed, failed]
    graph = normalize(batch)
    (check,) = graph.quality_checks.values()
    assert (check.success, check.checked_at) == (True, utc(9))


# -- lifecycle -----------------------------------------------------------------------------------


def test_rename_keeps_the_previous_identifier() -> None:
    facets = {
        "lifecycleStateChange": {
            "lifecycleStateChange": "RENAME",
            "previousIdentifier": {"namespace": PG + "/", "name": "shop.public.orders_old"},
        }
    }
    graph = normalize([event(outputs=[(PG, "shop.public.orders")], output_facets={0: facets})])
    node = graph.datasets[(PG, "shop.public.orders")]
    assert node.previous == (PG, "shop.public.orders_old")
    assert node.dropped is False
    # a rename, not a drop plus a create: the old name is no second dataset
    assert set(graph.datasets) == {(PG, "shop.public.orders")}


def test_drop_marks_the_dataset_dropped() -> None:
    facets = {"lifecycleStateChange": {"lifecycleStateChange": "DROP"}}
    graph = normalize([event(outputs=[(PG, "shop.public.tmp")], output_facets={0: facets})])
    assert graph.datasets[(PG, "shop.public.tmp")].dropped is True
    other = normalize([event(outputs=[(PG, "shop.public.tmp")])])
    assert other.datasets[(PG, "shop.public.tmp")].dropped is False


# -- run metrics ---------------------------------------------------------------------------------


def test_run_metrics_per_job() -> None:
    orders, kpi = (PG, "shop.public.orders"), (PG, "shop.mart.kpi")
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    stats_in = {0: {"inputStatistics": {"rowCount": 1000, "size": 64000}}}
    stats_out = {0: {"outputStatistics": {"rowCount": 30, "size": 2048}}}
    batch = [
        event(run_id=first, event_type="START", event_time=at(0), inputs=[orders], outputs=[kpi]),
        event(
            run_id=first,
            event_type="COMPLETE",
            event_time=at(5, 30),
            inputs=[orders],
            outputs=[kpi],
            input_io=stats_in,
            output_io=stats_out,
        ),
        event(run_id=second, event_type="START", event_time=at(10), inputs=[orders]),
        event(
            run_id=second,
            event_type="FAIL",
            event_time=at(12),
            inputs=[orders],
            input_io={0: {"inputStatistics": {"rowCount": 500, "size": 32000}}},
        ),
    ]
    m = normalize(batch).jobs[JOB].metrics
    assert (m.runs, m.failures) == (2, 1)
    assert (m.first_run, m.last_run) == (utc(0), utc(10))
    assert m.last_status == "FAIL"
    assert m.last_duration_seconds == 120.0
    assert (m.rows_read, m.bytes_read) == (1500, 96000)
    assert (m.rows_written, m.bytes_written) == (30, 2048)


def test_last_duration_is_start_to_complete() -> None:
    run = str(uuid.uuid4())
    batch = [
        event(run_id=run, event_type="COMPLETE", event_time=at(5, 30)),
        event(run_id=run, event_type="START", event_time=at(0)),  # arrives late
    ]
    m = normalize(batch).jobs[JOB].metrics
    assert (m.runs, m.last_status, m.last_duration_seconds) == (1, "COMPLETE", 330.0)


def test_statistics_repeated_on_every_event_of_a_run_count_once() -> None:
    run = str(uuid.uuid4())
    out = [(PG, "shop.mart.kpi")]
    stats = {0: {"outputStatistics": {"rowCount": 30, "size": 2048}}}
    batch = [
        event(run_id=run, event_type=t, event_time=at(i), outputs=out, output_io=stats)
        for i, t in enumerate(["START", "RUNNING", "COMPLETE"])
    ]
    m = normalize(batch).jobs[JOB].metrics
    assert (m.runs, m.rows_written, m.bytes_written) == (1, 30, 2048)


# -- combining the events of a run ---------------------------------------------------------------


def test_accumulative_events_are_unioned_and_running_with_no_inputs_erases_nothing() -> None:
    run = str(uuid.uuid4())
    a, b, out = (PG, "db.s.a"), (PG, "db.s.b"), (PG, "db.s.out")
    batch = [
        event(run_id=run, event_type="START", event_time=at(0), inputs=[a], outputs=[out]),
        event(run_id=run, event_type="RUNNING", event_time=at(1)),  # Spark: empty inputs
        event(run_id=run, event_type="COMPLETE", event_time=at(2), inputs=[b], outputs=[out]),
    ]
    graph = normalize(batch)
    assert graph.data_flows == {DataFlow(a, out, JOB), DataFlow(b, out, JOB)}
    assert graph.jobs[JOB].metrics.runs == 1


@pytest.mark.parametrize("order", ["in time order", "reversed"])
def test_the_latest_facet_per_key_wins(order: str) -> None:
    run = str(uuid.uuid4())
    out = [(PG, "db.s.out")]
    early = event(
        run_id=run,
        event_type="START",
        event_time=at(0),
        outputs=out,
        output_facets={0: {"documentation": {"description": "old"}, **schema("a")}},
        job_facets={"documentation": {"description": "old job"}},
    )
    late = event(
        run_id=run,
        event_type="COMPLETE",
        event_time=at(3),
        outputs=out,
        output_facets={0: {"documentation": {"description": "new"}}},
        job_facets={"documentation": {"description": "new job"}},
    )
    batch = [early, late] if order == "in time order" else [late, early]
    graph = normalize(batch)
    node = graph.datasets[(PG, "db.s.out")]
    assert node.description == "new"
    assert list(node.fields) == ["a"]  # kept: the later event did not send a schema
    assert graph.jobs[JOB].description == "new job"


def test_a_deleted_facet_is_removed() -> None:
    run = str(uuid.uuid4())
    out = [(PG, "db.s.out")]
    batch = [
        event(
            run_id=run,
            event_type="START",
            event_time=at(0),
            outputs=out,
            output_facets={0: {**schema("a", "b"), "documentation": {"description": "d"}}},
            job_facets={"sql": {"query": "select 1"}, "documentation": {"description": "j"}},
        ),
        event(
            run_id=run,
            event_type="COMPLETE",
            event_time=at(1),
            outputs=out,
            output_facets={0: {"schema": {"_deleted": True}}},
            job_facets={"sql": {"_deleted": True}},
        ),
    ]
    graph = normalize(batch)
    node = graph.datasets[(PG, "db.s.out")]
    assert node.fields == {} and node.has_schema is False
    assert node.description == "d"
    assert graph.routines == {}
    assert graph.jobs[JOB].description == "j"


def test_every_complete_snapshot_window_reaches_the_graph_whatever_the_batching() -> None:
    """Each COMPLETE_SNAPSHOT event "is self-contained for its time period" and "can be processed
    independently" (jobType seed): both windows' flows are in the graph, as they would be if each
    window came in a batch of its own; the facets of the latest window win."""
    run = str(uuid.uuid4())
    a, b, out = (PG, "db.s.a"), (PG, "db.s.b"), (PG, "db.s.out")
    snapshot = job_type(
        "STREAMING",
        eventTrigger="PERIODIC",
        eventContentMode="COMPLETE_SNAPSHOT",
        windowDuration=300,
    )
    batch = [
        event(
            run_id=run,
            event_type="RUNNING",
            event_time=at(5),
            inputs=[b],
            outputs=[out],
            job_facets=snapshot,
        ),
        event(
            run_id=run,
            event_type="RUNNING",
            event_time=at(0),
            inputs=[a],
            outputs=[out],
            job_facets=snapshot,
        ),
    ]
    graph = normalize(batch)
    assert graph.data_flows == {DataFlow(b, out, JOB), DataFlow(a, out, JOB)}
    one_at_a_time = [normalize([e]) for e in batch]
    assert graph.data_flows == set().union(*(g.data_flows for g in one_at_a_time))


def test_accumulative_is_the_default_without_emission_pattern() -> None:
    run = str(uuid.uuid4())
    a, b, out = (PG, "db.s.a"), (PG, "db.s.b"), (PG, "db.s.out")
    batch = [
        event(run_id=run, event_time=at(0), inputs=[a], outputs=[out], job_facets=job_type()),
        event(run_id=run, event_time=at(5), inputs=[b], outputs=[out], job_facets=job_type()),
    ]
    assert len(normalize(batch).data_flows) == 2


@pytest.mark.parametrize("processing", ["STREAMING", "SERVICE"])
def test_a_streaming_job_without_terminal_event_is_a_run(processing: str) -> None:
    run = str(uuid.uuid4())
    batch = [
        event(
            run_id=run,
            event_type="RUNNING",
            event_time=at(i),
            inputs=[("kafka://broker:9092", "orders")],
            outputs=[(PG, "db.s.orders")],
            job_facets=job_type(processing),
        )
        for i in (1, 2)
    ]
    graph = normalize(batch)
    m = graph.jobs[JOB].metrics
    assert (m.runs, m.failures, m.last_status) == (1, 0, "RUNNING")
    assert m.last_run == utc(1)
    assert m.last_duration_seconds is None
    assert graph.jobs[JOB].processing_type == processing


def test_periodic_windows_are_counted() -> None:
    run = str(uuid.uuid4())
    periodic = job_type(
        "STREAMING", eventTrigger="PERIODIC", eventContentMode="ACCUMULATIVE", windowDuration=60
    )
    batch = [
        event(run_id=run, event_type=t, event_time=at(i), job_facets=periodic if i == 0 else None)
        for i, t in enumerate(["START", "RUNNING", "RUNNING", "RUNNING"])
    ]
    (view,) = combine_runs([parse_event(e) for e in batch])
    assert view.windows == 4
    assert view.emission == ("PERIODIC", "ACCUMULATIVE")
    assert view.job_facets["jobType"].emissionPattern.windowDuration == 60
    # event-based jobs have no windows
    plain = [event(run_id=str(uuid.uuid4()), event_type="START", event_time=at(0))]
    (view,) = combine_runs([parse_event(e) for e in plain])
    assert view.windows == 0


def test_a_run_id_reused_by_another_job_does_not_merge_the_jobs() -> None:
    shared = "01234567-89ab-cdef-0123-456789abcdef"
    a, b = (PG, "db.s.a"), (PG, "db.s.b")
    x, y = ("s3://lake", "x.csv"), ("s3://lake", "y.csv")
    batch = [
        event(namespace="airflow", name="dag.task", run_id=shared, inputs=[a], outputs=[b]),
        event(namespace="spark", name="app.job", run_id=shared, inputs=[x], outputs=[y]),
    ]
    graph = normalize(batch)
    assert graph.data_flows == {
        DataFlow(a, b, ("airflow", "dag.task")),
        DataFlow(x, y, ("spark", "app.job")),
    }
    assert graph.jobs[("airflow", "dag.task")].metrics.runs == 1
    assert graph.jobs[("spark", "app.job")].metrics.runs == 1


# -- dangling flows ------------------------------------------------------------------------------


def test_a_column_lineage_field_missing_from_the_schema_is_dangling() -> None:
    orders, kpi = (PG, "shop.public.orders"), (PG, "shop.mart.kpi")
    lineage = {
        "columnLineage": {
            "fields": {
                "day": {"inputFields": [input_field(*orders, "created_at")]},
                "n": {"inputFields": [input_field(*orders, "no_such_column")]},
            }
        }
    }
    graph = normalize(
        [
            event(
                inputs=[orders],
                outputs=[kpi],
                input_facets={0: schema("created_at")},
                output_facets={0: {**schema("day", "n"), **lineage}},
            )
        ]
    )
    assert graph.field_flows == {
        FieldFlow((*orders, "created_at"), (*kpi, "day"), JOB, "DIRECT", "IDENTITY")
    }
    (dangling,) = graph.dangling
    assert dangling.reason == FIELD_NOT_IN_SCHEMA
    assert dangling.job == JOB
    assert "no_such_column" in dangling.source
    assert "no_such_column" not in graph.datasets[orders].fields  # not invented
    assert graph.counts()["danglingFlows"] == 1
    assert graph.dangling_by_reason() == {FIELD_NOT_IN_SCHEMA: 1}


def test_a_column_lineage_input_never_described_is_dangling() -> None:
    events, target = (PG, "db.s.events"), (PG, "db.s.events_merged")
    staging = ("dbfs", "/demo-warehouse/documentstage")  # cited, but not an input of the event
    lineage = {
        "columnLineage": {
            "fields": {
                "id": {"inputFields": [input_field(*events, "id"), input_field(*staging, "id")]},
                "body": {"inputFields": [input_field(*staging, "body")]},
            }
        }
    }
    graph = normalize(
        [
            event(
                inputs=[events],
                outputs=[target],
                output_facets={0: {**schema("id", "body"), **lineage}},
            )
        ]
    )
    assert graph.field_flows == {
        FieldFlow((*events, "id"), (*target, "id"), JOB, "DIRECT", "IDENTITY")
    }
    assert graph.dangling_by_reason() == {DATASET_NOT_DESCRIBED: 2}
    assert graph.counts()["danglingFlows"] == 2
    assert staging not in graph.datasets


def test_fields_known_only_from_column_lineage_are_added_without_schema() -> None:
    orders, kpi = (PG, "shop.public.orders"), (PG, "shop.mart.kpi")
    lineage = {
        "columnLineage": {"fields": {"total": {"inputFields": [input_field(*orders, "amount")]}}}
    }
    graph = normalize([event(inputs=[orders], outputs=[kpi], output_facets={0: lineage})])
    assert list(graph.datasets[orders].fields) == ["amount"]
    assert list(graph.datasets[kpi].fields) == ["total"]
    assert graph.field_flows == {
        FieldFlow((*orders, "amount"), (*kpi, "total"), JOB, "DIRECT", "IDENTITY")
    }
    assert graph.dangling == []


# -- input forms ---------------------------------------------------------------------------------


def test_normalize_takes_bytes_and_reports_events_it_cannot_parse() -> None:
    good = json.dumps(event(inputs=[(PG, "db.s.a")], outputs=[(PG, "db.s.b")])).encode()
    broken = json.dumps(run_event(event_type="FINISHED")).encode()
    graph = normalize([good, broken])
    assert len(graph.data_flows) == 1
    assert len(graph.skipped_events) == 1
    assert "eventType" in graph.skipped_events[0]


def test_a_dataset_event_describes_a_dataset_without_a_job() -> None:
    ds = {
        "eventTime": "2026-11-01T02:00:00Z",
        "producer": "https://example.com/p",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": {"namespace": PG, "name": "db.s.ref", "facets": schema("code", "label")},
    }
    graph = normalize([ds])
    assert graph.jobs == {}
    assert list(graph.datasets[(PG, "db.s.ref")].fields) == ["code", "label"]


def test_a_job_event_describes_a_job_without_a_run() -> None:
    job = {
        "eventTime": "2026-11-01T02:00:00Z",
        "producer": "https://example.com/p",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
        "job": {"namespace": "etl", "name": "static", "facets": {"sql": {"query": "select 1"}}},
        "inputs": [{"namespace": PG, "name": "db.s.a"}],
        "outputs": [{"namespace": PG, "name": "db.s.b"}],
    }
    graph = normalize([job])
    assert graph.data_flows == {DataFlow((PG, "db.s.a"), (PG, "db.s.b"), ("etl", "static"))}
    assert graph.jobs[("etl", "static")].metrics.runs == 0
    assert graph.routines[("etl", "static")].statement == "select 1"


# -- several runs in one batch: the latest description wins -------------------------------------


@pytest.mark.parametrize("order", ["in time order", "latest first"])
def test_the_latest_run_describes_job_and_dataset(order: str) -> None:
    out = [(PG, "db.s.out")]
    old = event(
        run_id=str(uuid.uuid4()),
        event_time=at(0),
        outputs=out,
        output_facets={0: {**schema("a"), "documentation": {"description": "old"}}},
        job_facets={"documentation": {"description": "old job"}, "sql": {"query": "select 1"}},
    )
    new = event(
        run_id=str(uuid.uuid4()),
        event_time=at(30),
        outputs=out,
        output_facets={0: {**schema("a", "b"), "documentation": {"description": "new"}}},
        job_facets={"documentation": {"description": "new job"}, "sql": {"query": "select 2"}},
    )
    graph = normalize([old, new] if order == "in time order" else [new, old])
    node = graph.datasets[(PG, "db.s.out")]
    assert (node.description, list(node.fields)) == ("new", ["a", "b"])
    assert graph.jobs[JOB].description == "new job"
    assert graph.routines[JOB].statement == "select 2"
    m = graph.jobs[JOB].metrics
    assert (m.runs, m.first_run, m.last_run) == (2, utc(0), utc(30))


@pytest.mark.parametrize(
    ("dataset_event_minute", "expected"), [(30, "from the dataset event"), (0, "from the run")]
)
def test_dataset_events_and_runs_in_time_order(dataset_event_minute: int, expected: str) -> None:
    ds = {
        "eventTime": at(dataset_event_minute),
        "producer": "https://example.com/p",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": {
            "namespace": PG,
            "name": "db.s.out",
            "facets": {"documentation": {"description": "from the dataset event"}},
        },
    }
    run = event(
        event_time=at(10),
        outputs=[(PG, "db.s.out")],
        output_facets={0: {"documentation": {"description": "from the run"}}},
    )
    for batch in ([ds, run], [run, ds]):
        assert normalize(batch).datasets[(PG, "db.s.out")].description == expected


def test_a_run_without_start_has_no_duration() -> None:
    """dbt and others may send a COMPLETE alone: the duration is unknown, not zero."""
    graph = normalize([event(event_type="COMPLETE", event_time=at(5))])
    m = graph.jobs[JOB].metrics
    assert (m.runs, m.last_status, m.last_run) == (1, "COMPLETE", utc(5))
    assert m.last_duration_seconds is None


def test_snapshot_windows_each_count_their_own_statistics() -> None:
    """PERIODIC + COMPLETE_SNAPSHOT: each event is complete for its window ("records processed
    in the last 5 minutes"), so a run's rows written are the sum over its windows."""
    run = str(uuid.uuid4())
    snapshot = job_type(
        "STREAMING",
        eventTrigger="PERIODIC",
        eventContentMode="COMPLETE_SNAPSHOT",
        windowDuration=300,
    )
    batch = [
        event(
            run_id=run,
            event_type="RUNNING",
            event_time=at(5 * i),
            inputs=[("kafka://broker:9092", "orders")],
            outputs=[(PG, "db.s.orders")],
            job_facets=snapshot,
            output_io={0: {"outputStatistics": {"rowCount": 100, "size": 1000}}},
        )
        for i in range(1, 4)
    ]
    m = normalize(batch).jobs[JOB].metrics
    assert m.runs == 1
    assert (m.rows_written, m.bytes_written) == (300, 3000)


def test_the_windows_of_a_complete_snapshot_run_are_not_crossed() -> None:
    """A window is complete for itself: an input of one window and an output of another make no
    flow (the same windows posted apart would not make it either)."""
    run = str(uuid.uuid4())
    a, b = (PG, "db.s.a"), (PG, "db.s.b")
    snapshot = job_type("STREAMING", eventTrigger="PERIODIC", eventContentMode="COMPLETE_SNAPSHOT")
    batch = [
        event(
            run_id=run, event_type="RUNNING", event_time=at(0), inputs=[a, b], job_facets=snapshot
        ),
        event(run_id=run, event_type="RUNNING", event_time=at(5), outputs=[a], job_facets=snapshot),
    ]
    graph = normalize(batch)
    assert graph.data_flows == set()
    assert {a, b} <= set(graph.datasets)
