"""Synced lineage in the asset graph: specs from the catalog's state, refreshed after each sync."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest
from starlette.testclient import TestClient

from ol_dagster.commands.headless import sync_batches
from ol_dagster.definitions import build_defs
from ol_dagster.defs.assets import job_runs_metadata
from ol_dagster.defs.executor import sync_executor
from ol_dagster.defs.lineage_assets import OpenLineageTranslator, build_lineage_specs
from ol_dagster.receiver.app import create_app
from ol_dagster.settings import load_settings
from ol_dagster.store import EventStore
from ol_dagster_tests.conftest import run_event

PG = "postgres://db:5432"


def _with_columns(event: dict, dataset: str, columns: list[str], lineage: dict | None = None):
    for out in event["outputs"]:
        if out["name"] == dataset:
            out["facets"] = {
                "schema": {"fields": [{"name": c, "type": "INT"} for c in columns]},
            }
            if lineage:
                out["facets"]["columnLineage"] = {
                    "fields": {
                        col: {"inputFields": [{"namespace": PG, "name": src, "field": f}]}
                        for col, (src, f) in lineage.items()
                    }
                }
    return event


def _snapshot(with_second: bool = True) -> dict:
    first = run_event(
        "etl",
        "build_daily_kpi",
        inputs=[(PG, "shop.public.orders")],
        outputs=[(PG, "shop.kpi.daily")],
    )
    first["job"]["facets"] = {
        "jobType": {"processingType": "BATCH", "integration": "DBT", "jobType": "MODEL"},
        "ownership": {"owners": [{"name": "team:analytics"}, {"name": "alice"}]},
        "documentation": {"description": "Daily KPIs"},
    }
    _with_columns(
        first, "shop.kpi.daily", ["day", "revenue"], {"revenue": ("shop.public.orders", "amount")}
    )
    first["inputs"][0]["facets"] = {"schema": {"fields": [{"name": "amount", "type": "INT"}]}}
    events = [first]
    if with_second:
        events.append(
            run_event(
                "etl",
                "export_anomalies",
                inputs=[(PG, "shop.kpi.daily")],
                outputs=[("s3://b", "anomalies")],
            )
        )
    return {"events": events}


@pytest.fixture
def synced(write_settings, tokens, tmp_path: Path):
    path = write_settings(allowedJobNamespaces=["etl"])
    settings = load_settings(path)
    store = EventStore(settings.store.url)
    client = TestClient(create_app(settings, store))
    home = tmp_path / "home"
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as instance:

        def post_and_sync(batch: dict) -> list[dict]:
            r = client.post(
                "/api/v1/lineage/batch",
                json=batch,
                headers={"Authorization": f"Bearer {tokens['snap']}"},
            )
            assert r.status_code == 200, r.text
            return list(sync_batches(str(path), definition="snap", instance=instance))

        yield path, post_and_sync, instance
    store.dispose()


def _graph(path: Path, translator: OpenLineageTranslator | None = None):
    return build_defs(str(path), translator=translator).resolve_asset_graph()


def test_synced_jobs_and_datasets_appear_with_deps_and_column_lineage(synced):
    path, post_and_sync, _ = synced
    post_and_sync(_snapshot())
    graph = _graph(path)
    job = dg.AssetKey(["etl", "build_daily_kpi"])
    # names split into key parts: the graph labels the node with the table's name, whole
    daily = dg.AssetKey(["postgres_db_5432", "shop", "kpi", "daily"])
    orders = dg.AssetKey(["postgres_db_5432", "shop", "public", "orders"])
    export = dg.AssetKey(["etl", "export_anomalies"])
    assert graph.get(job).parent_keys == {orders}
    assert graph.get(daily).parent_keys == {job}
    assert graph.get(export).parent_keys == {daily}
    node = graph.get(daily)
    assert node.group_name == "snap_lineage"
    assert node.kinds == {"postgres"}
    lineage = node.metadata["dagster/column_lineage"]
    assert lineage.deps_by_column["revenue"] == [
        dg.TableColumnDep(asset_key=orders, column_name="amount")
    ]
    schema = node.metadata["dagster/column_schema"]
    assert [c.name for c in schema.columns] == ["day", "revenue"]
    job_node = graph.get(job)
    assert job_node.kinds == {"dbt"}
    assert job_node.description == "Daily KPIs"
    assert job_node.owners == ["team:analytics"]  # "alice" is no Dagster owner: kept in metadata
    assert "alice" in job_node.metadata["openlineage/owners"]


def test_the_state_is_refreshed_after_each_sync(synced):
    path, post_and_sync, _ = synced
    post_and_sync(_snapshot())
    assert dg.AssetKey(["etl", "export_anomalies"]) in _graph(path).get_all_asset_keys()
    (line,) = post_and_sync(_snapshot(with_second=False))
    assert line["cleanup"]["removedJobs"] == ["etl.export_anomalies"]
    keys = _graph(path).get_all_asset_keys()
    assert dg.AssetKey(["etl", "export_anomalies"]) not in keys
    assert dg.AssetKey(["etl", "build_daily_kpi"]) in keys


def test_a_translator_subclass_changes_keys_and_groups(synced):
    path, post_and_sync, _ = synced
    post_and_sync(_snapshot())

    class Prefixed(OpenLineageTranslator):
        def get_group_name(self, definition: str) -> str:
            return "lineage"

        def get_job_key(self, namespace: str, name: str) -> dg.AssetKey:
            return dg.AssetKey(["jobs", namespace, name])

    graph = _graph(path, Prefixed())
    node = graph.get(dg.AssetKey(["jobs", "etl", "build_daily_kpi"]))
    assert node.group_name == "lineage"
    assert node.is_external


def test_each_sync_shows_its_job_runs_on_the_upload_and_the_job_pages(synced):
    path, post_and_sync, instance = synced
    post_and_sync(_snapshot())
    later = _snapshot(with_second=False)
    start = run_event("etl", "export_anomalies", event_type="START")
    start["eventTime"] = "2026-11-02T02:00:00.000Z"
    failed = {**start, "eventType": "FAIL", "eventTime": "2026-11-02T02:00:30.000Z"}
    later["events"] += [start, failed]
    post_and_sync(later)

    upload = instance.get_latest_materialization_event(
        dg.AssetKey(["snap", "catalog_upload"])
    ).asset_materialization.metadata
    table = _md_rows(upload["jobRuns"].value)
    assert [r["job"] for r in table] == [
        "etl.export_anomalies",  # a failed last run comes first
        "etl.build_daily_kpi",
    ]
    failed_row = table[0]
    assert failed_row["lastRunStatus"] == "FAIL"
    assert failed_row["lastRunTime"] == "2026-11-02T02:00:00+00:00"
    assert failed_row["lastRunDurationSeconds"] == "30.0"
    assert failed_row["asset"] == "etl/export_anomalies"
    assert (failed_row["runs"], failed_row["failures"]) == ("1", "1")
    assert (upload["jobsRun"].value, upload["jobsFailed"].value) == (2, 1)

    graph = _graph(path)
    kpi = graph.get(dg.AssetKey(["etl", "build_daily_kpi"])).metadata
    assert kpi["openlineage/lastRunStatus"] == "COMPLETE"
    assert kpi["openlineage/runs"] == 1
    export = graph.get(dg.AssetKey(["etl", "export_anomalies"])).metadata
    assert export["openlineage/lastRunStatus"] == "FAIL"
    assert (
        export["openlineage/lastRunTime"].value == datetime(2026, 11, 2, 2, tzinfo=UTC).timestamp()
    )
    assert export["openlineage/lastRunDurationSeconds"] == 30.0
    assert export["openlineage/lastBatchId"] == str(upload_batch_id(instance))
    # the runs cost no Dagster event per job
    assert not instance.fetch_observations(dg.AssetKey(["etl", "build_daily_kpi"]), limit=1).records


def _md_rows(markdown: str) -> list[dict[str, str]]:
    lines = [line for line in markdown.splitlines() if line.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    return [
        dict(zip(head, (c.strip() for c in line.strip("|").split("|")), strict=True))
        for line in lines[2:]
    ]


def upload_batch_id(instance: dg.DagsterInstance) -> str:
    event = instance.get_latest_materialization_event(dg.AssetKey(["snap", "catalog_upload"]))
    return event.asset_materialization.partition


def test_a_job_keeps_its_latest_run_when_an_older_batch_is_synced_later(synced):
    """A failed batch retried after a newer one must not put an older run back on the page."""
    path, post_and_sync, _ = synced
    newer = {"events": [run_event("etl", "nightly", event_time="2026-11-02T02:00:00.000Z")]}
    older = {
        "events": [
            run_event("etl", "nightly", event_type="FAIL", event_time="2026-11-01T02:00:00.000Z")
        ]
    }
    post_and_sync(newer)
    post_and_sync(older)
    meta = _graph(path).get(dg.AssetKey(["etl", "nightly"])).metadata
    assert meta["openlineage/lastRunStatus"] == "COMPLETE"


def test_a_large_batch_shows_its_failed_runs_first_in_a_bounded_table():
    runs = [
        {
            "namespace": "etl",
            "name": f"job_{i:05d}",
            "asset": f"etl/job_{i:05d}",
            "lastRunStatus": "FAIL" if i % 500 == 7 else "COMPLETE",
            "lastRunTime": f"2026-11-01T02:{i // 60 % 60:02d}:{i % 60:02d}+00:00",
            "lastRunDurationSeconds": 1.0,
            "runs": 1,
            "failures": int(i % 500 == 7),
            "rowsWritten": 0,
            "bytesWritten": 0,
        }
        for i in range(3000)
    ]
    meta = job_runs_metadata(runs)
    markdown = meta["jobRuns"].value
    rows = _md_rows(markdown)
    assert len(rows) == 1000
    assert markdown.endswith("_2000 more not shown_")
    assert [r["lastRunStatus"] for r in rows[:6]] == ["FAIL"] * 6
    assert rows[6]["lastRunStatus"] == "COMPLETE"
    assert [r["lastRunTime"] for r in rows[6:]] == sorted(
        (r["lastRunTime"] for r in rows[6:]), reverse=True
    )
    assert (meta["jobsRun"], meta["jobsFailed"]) == (3000, 6)


def test_definitions_load_without_the_store(write_settings, tmp_path: Path):
    data_path = write_settings()
    broken = data_path.read_text().replace(
        f"sqlite:///{tmp_path / 'store.db'}", "postgresql+psycopg://nobody@127.0.0.1:1/none"
    )
    data_path.write_text(broken)
    defs = build_defs(str(data_path))
    keys = defs.resolve_asset_graph().get_all_asset_keys()
    assert dg.AssetKey(["snap", "received_batch"]) in keys


def test_colliding_keys_are_made_unique():
    state = {
        "jobs": [],
        "datasets": [
            {"namespace": "s3://b", "name": "a/b", "fields": []},
            {"namespace": "s3://b", "name": "a_b", "fields": []},
        ],
    }
    keys = [s.key for s in build_lineage_specs("d", state, OpenLineageTranslator())]
    assert len(set(keys)) == 2


def test_large_states_build_quickly():
    """Tens of thousands of nodes stay usable: the specs build in well under a few seconds."""
    import time

    n = 10_000
    state = {
        "jobs": [
            {
                "namespace": "etl",
                "name": f"job_{i}",
                "inputs": [["pg", f"t_{i}"]],
                "outputs": [["pg", f"t_{i + 1}"]],
            }
            for i in range(n)
        ],
        "datasets": [{"namespace": "pg", "name": f"t_{i}", "fields": []} for i in range(n + 1)],
    }
    # CPU time of this process, not wall time: other processes on a loaded machine (-n 2, other
    # suites) do not stretch it. ~1.5 s here; a pass quadratic in the nodes would take minutes.
    start = time.process_time()
    specs = build_lineage_specs("d", state, OpenLineageTranslator())
    elapsed = time.process_time() - start
    assert len(specs) == 2 * n + 1
    assert elapsed < 20, f"{elapsed:.1f} s of CPU for {n:,} jobs"


def test_a_dataset_two_definitions_touch_is_one_asset():
    """One writes it, the other reads it: one spec, in the writer's group, deps from both."""
    from ol_dagster.defs.lineage_assets import build_all_lineage_specs

    shared = {"namespace": "pg", "name": "t", "fields": [{"name": "id", "type": "INT"}]}
    states = {
        "reader": {
            "jobs": [{"namespace": "r", "name": "read", "inputs": [["pg", "t"]], "outputs": []}],
            "datasets": [{"namespace": "pg", "name": "t", "fields": []}],
        },
        "writer": {
            "jobs": [{"namespace": "w", "name": "write", "inputs": [], "outputs": [["pg", "t"]]}],
            "datasets": [shared],
        },
    }
    specs = build_all_lineage_specs(states, OpenLineageTranslator())
    defs = dg.Definitions(assets=specs)
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    table = graph.get(dg.AssetKey(["pg", "t"]))
    assert table.group_name == "writer_lineage"
    assert table.parent_keys == {dg.AssetKey(["w", "write"])}
    assert [c.name for c in table.metadata["dagster/column_schema"].columns] == ["id"]
    assert graph.get(dg.AssetKey(["r", "read"])).parent_keys == {dg.AssetKey(["pg", "t"])}


def test_a_capped_definition_shows_its_newest_jobs_and_says_how_many_it_leaves_out(
    write_settings, tokens, tmp_path: Path
):
    """``assetGraph.maxJobs``: the newest jobs by last run, the datasets they touch, and one asset
    that says how many older jobs the graph leaves out; the sync itself still syncs them all."""
    path = write_settings(allowedJobNamespaces=["etl"], assetGraph={"maxJobs": 1})
    settings = load_settings(path)
    store = EventStore(settings.store.url)
    client = TestClient(create_app(settings, store))
    old = run_event(
        "etl",
        "a_old_job",
        inputs=[(PG, "a")],
        outputs=[(PG, "b")],
        event_time="2026-11-01T01:00:00Z",
    )
    new = run_event(
        "etl",
        "z_new_job",
        inputs=[(PG, "c")],
        outputs=[(PG, "d")],
        event_time="2026-11-01T03:00:00Z",
    )
    r = client.post(
        "/api/v1/lineage/batch",
        json={"events": [new, old]},
        headers={"Authorization": f"Bearer {tokens['snap']}"},
    )
    assert r.status_code == 200, r.text
    home = tmp_path / "home"
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        (line,) = sync_batches(str(path), definition="snap", instance=instance)
    store.dispose()
    assert line["status"] == "synced", line
    # the sync line counts the batch's jobs rather than naming each (10,000 jobs: a 500 KB line)
    assert line["upload"]["graph"]["completedJobs"] == 2
    graph = _graph(path)
    keys = graph.get_all_asset_keys()
    assert dg.AssetKey(["etl", "z_new_job"]) in keys
    assert dg.AssetKey(["postgres_db_5432", "c"]) in keys
    assert dg.AssetKey(["etl", "a_old_job"]) not in keys
    assert dg.AssetKey(["postgres_db_5432", "a"]) not in keys
    marker = graph.get(dg.AssetKey(["snap", "lineage_jobs_not_shown"]))
    assert marker.group_name == "snap_lineage"
    assert marker.metadata["openlineage/jobsNotShown"] == 1
    assert "ol-dagster lineage --definition snap" in (marker.description or "")


def test_the_newest_jobs_keep_only_the_field_flows_between_what_is_shown():
    from ol_dagster.defs.lineage_assets import newest_jobs

    def job(name: str, when: str | None, inputs: list, outputs: list) -> dict:
        run = {"lastRunTime": when} if when else None
        return {
            "namespace": "n",
            "name": name,
            "inputs": inputs,
            "outputs": outputs,
            "lastRun": run,
        }

    state = {
        "jobs": [
            job("never_ran", None, [], [["pg", "z"]]),
            job("oldest", "2026-01-01T00:00:00+00:00", [["pg", "a"]], [["pg", "b"]]),
            job("newest", "2026-03-01T00:00:00+00:00", [["pg", "b"]], [["pg", "c"]]),
            job("middle", "2026-02-01T00:00:00+00:00", [["pg", "c"]], [["pg", "d"]]),
        ],
        "datasets": [{"namespace": "pg", "name": n, "fields": []} for n in "abcdz"],
        "columnLineage": [
            {"dataset": ["pg", "c"], "field": "x", "inputs": [["pg", "b", "x"], ["pg", "a", "x"]]},
            {"dataset": ["pg", "b"], "field": "x", "inputs": [["pg", "a", "x"]]},
        ],
    }
    shown = newest_jobs(state, 2)
    assert [j["name"] for j in shown["jobs"]] == ["newest", "middle"]
    assert sorted(d["name"] for d in shown["datasets"]) == ["b", "c", "d"]
    assert shown["columnLineage"] == [
        {"dataset": ["pg", "c"], "field": "x", "inputs": [["pg", "b", "x"]]},
        {"dataset": ["pg", "b"], "field": "x", "inputs": []},
    ]
    assert shown["jobsNotShown"] == 2
    assert newest_jobs(state, 4) is state
    specs = build_lineage_specs("d", shown, OpenLineageTranslator())
    dg.Definitions.validate_loadable(dg.Definitions(assets=specs))


def test_run_workers_reconstruct_the_sync_job_without_the_synced_lineage(synced, monkeypatch):
    """Loaded by Dagster's own code-server loader (what ``dagster dev`` and ``dagster api grpc``
    run), the served definitions show the synced lineage; a run worker, reconstructing them from
    the load data a run carries, leaves it out, rebuilds the same sync job snapshot, and runs it
    in one process."""
    from dagster._core.definitions.definitions_load_context import DefinitionsLoadContext
    from dagster._core.definitions.reconstruct import reconstruct_repository_def_from_pointer
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
    from dagster._grpc.server import LoadedRepositories

    from ol_dagster.defs import dagster_private

    path, post_and_sync, _ = synced
    post_and_sync(_snapshot())
    monkeypatch.setenv("OL_DAGSTER_SETTINGS", str(path))
    monkeypatch.setattr(DefinitionsLoadContext, "_instance", None)  # a fresh process
    monkeypatch.setattr(dagster_private, "_serves_asset_graph", False)
    served = LoadedRepositories(
        LoadableTargetOrigin(module_name="ol_dagster.definitions"),
        container_image=None,
        entry_point=["dagster"],
        container_context=None,
    )
    (name,) = served.definitions_by_name
    server_repo = served.definitions_by_name[name]
    job_key = dg.AssetKey(["etl", "build_daily_kpi"])
    assert job_key in server_repo.asset_graph.get_all_asset_keys()

    monkeypatch.setattr(DefinitionsLoadContext, "_instance", None)  # the run worker's process
    monkeypatch.setattr(dagster_private, "_serves_asset_graph", False)
    worker_repo = reconstruct_repository_def_from_pointer(
        served.code_pointers_by_repo_name[name], server_repo.repository_load_data
    )
    assert job_key not in worker_repo.asset_graph.get_all_asset_keys()
    served_job, rebuilt_job = (r.get_job("snap__sync") for r in (server_repo, worker_repo))
    assert served_job.get_job_snapshot_id() == rebuilt_job.get_job_snapshot_id()
    assert rebuilt_job.executor_def is sync_executor


def test_a_capped_definition_exports_only_its_newest_jobs_after_each_sync(
    write_settings, tokens, tmp_path: Path
):
    """The sync exports no more than ``assetGraph.maxJobs`` jobs (the catalog's most recently
    updated, ties by name) with only their datasets and field flows, so a large definition's
    sync does not read and store every job it holds; the jobs left out stay in the catalog."""
    path = write_settings(
        allowedJobNamespaces=["etl"], snapshotMode="ADDITIVE", assetGraph={"maxJobs": 2}
    )
    settings = load_settings(path)
    store = EventStore(settings.store.url)
    client = TestClient(create_app(settings, store))
    home = tmp_path / "home"
    home.mkdir()

    def job(name: str, when: str) -> dict:
        event = run_event(
            "etl", name, inputs=[(PG, f"{name}_in")], outputs=[(PG, f"{name}_out")], event_time=when
        )
        return _with_columns(
            event, f"{name}_out", ["x"], {"x": (f"{name}_in", "x")} if name else None
        )

    with dg.instance_for_test(temp_dir=str(home)) as instance:
        for events in (
            [job("b", "2026-11-01T01:00:00Z"), job("a", "2026-11-01T01:00:00Z")],
            [job("c", "2026-11-01T02:00:00Z")],
        ):
            r = client.post(
                "/api/v1/lineage/batch",
                json={"events": events},
                headers={"Authorization": f"Bearer {tokens['snap']}"},
            )
            assert r.status_code == 200, r.text
            (line,) = sync_batches(str(path), definition="snap", instance=instance)
            assert line["status"] == "synced", line
    state = store.lineage_state("snap")
    store.dispose()
    assert state is not None
    assert [(j["name"], j["outputs"]) for j in state["jobs"]] == [
        ("a", [[PG, "a_out"]]),
        ("c", [[PG, "c_out"]]),
    ]
    assert {d["name"] for d in state["datasets"]} == {"a_in", "a_out", "c_in", "c_out"}
    assert {cl["dataset"][1] for cl in state["columnLineage"]} == {"a_out", "c_out"}
    assert state["jobsNotShown"] == 1
    marker = _graph(path).get(dg.AssetKey(["snap", "lineage_jobs_not_shown"]))
    assert marker.metadata["openlineage/jobsNotShown"] == 1
    from sqlalchemy import select

    from ol_dagster.catalog.embedded import tables as t
    from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog

    catalog = EmbeddedCatalog(settings.catalogs["main"].url)
    try:
        with catalog.engine.connect() as conn:
            held = set(conn.scalars(select(t.entities.c.ol_name).where(t.entities.c.type == t.JOB)))
    finally:
        catalog.close()
    assert held == {"a", "b", "c"}


# -- column lineage open-source Dagster shows, readable labels ------------------------------------


def _table_rows(value: dg.TableMetadataValue) -> list[dict]:
    return [dict(r.data) for r in value.records]


def test_column_lineage_is_a_table_open_source_dagster_shows(synced):
    """Only Dagster+ draws ``dagster/column_lineage``: each dataset also has a table of its
    columns' upstream columns, with the transformation the producer reported."""
    path, post_and_sync, _ = synced
    batch = _snapshot(with_second=False)
    out = batch["events"][0]["outputs"][0]
    out["facets"]["columnLineage"]["fields"]["day"] = {
        "inputFields": [
            {
                "namespace": PG,
                "name": "shop.public.orders",
                "field": "ordered_at",
                "transformations": [{"type": "DIRECT", "subtype": "TRANSFORMATION"}],
            }
        ]
    }
    batch["events"][0]["inputs"][0]["facets"]["schema"]["fields"].append(
        {"name": "ordered_at", "type": "TIMESTAMP"}
    )
    post_and_sync(batch)
    daily = _graph(path).get(dg.AssetKey(["postgres_db_5432", "shop", "kpi", "daily"])).metadata
    table = daily["openlineage/columnLineage"]
    assert isinstance(table, dg.TableMetadataValue)
    assert sorted(_table_rows(table), key=lambda r: r["column"]) == [
        {
            "column": "day",
            "upstream": "shop.public.orders.ordered_at",
            "transformation": "DIRECT/TRANSFORMATION",
            "upstream_asset": "postgres_db_5432/shop/public/orders",
        },
        {
            "column": "revenue",
            "upstream": "shop.public.orders.amount",
            "transformation": "",  # none reported
            "upstream_asset": "postgres_db_5432/shop/public/orders",
        },
    ]
    orders = dg.AssetKey(["postgres_db_5432", "shop", "public", "orders"])
    assert daily["dagster/column_lineage"].deps_by_column["day"] == [
        dg.TableColumnDep(asset_key=orders, column_name="ordered_at")
    ]


def _wide_state(columns: int, inputs_per_column: int = 1) -> dict:
    return {
        "jobs": [],
        "datasets": [
            {"namespace": "pg", "name": "wide", "fields": []},
            {"namespace": "pg", "name": "src", "fields": []},
        ],
        "columnLineage": [
            {
                "dataset": ["pg", "wide"],
                "field": f"c{i}",
                "inputs": [["pg", "src", f"s{i}_{j}", "DIRECT"] for j in range(inputs_per_column)],
            }
            for i in range(columns)
        ],
    }


def test_a_wide_tables_column_lineage_table_is_bounded_and_says_what_it_leaves_out():
    from ol_dagster.defs.lineage_assets import COLUMN_LINEAGE_MAX_ROWS

    n = COLUMN_LINEAGE_MAX_ROWS + 50
    specs = build_lineage_specs(
        "d", _wide_state(n // 2, inputs_per_column=2), OpenLineageTranslator()
    )
    (wide,) = [s for s in specs if s.key == dg.AssetKey(["pg", "wide"])]
    rows = _table_rows(wide.metadata["openlineage/columnLineage"])
    assert len(rows) == COLUMN_LINEAGE_MAX_ROWS + 1
    assert rows[0] == {
        "column": "c0",
        "upstream": "src.s0_0",
        "transformation": "DIRECT",
        "upstream_asset": "pg/src",
    }
    assert rows[-1]["upstream"] == f"50 more not shown (of {n})"
    # the Dagster+ lineage keeps every column
    assert len(wide.metadata["dagster/column_lineage"].deps_by_column) == n // 2


def test_a_state_without_transformations_still_shows_its_column_lineage():
    """Lineage states exported before transformations were kept have [namespace, name, field]."""
    state = _wide_state(2)
    for cl in state["columnLineage"]:
        cl["inputs"] = [i[:3] for i in cl["inputs"]]
    (wide,) = [
        s
        for s in build_lineage_specs("d", state, OpenLineageTranslator())
        if s.key.path[-1] == "wide"
    ]
    rows = _table_rows(wide.metadata["openlineage/columnLineage"])
    assert [(r["column"], r["upstream"], r["transformation"]) for r in rows] == [
        ("c0", "src.s0_0", ""),
        ("c1", "src.s1_0", ""),
    ]


def test_labels_are_the_table_or_file_and_split_names_false_keeps_whole_names(synced):
    """The graph labels a node with the last key component, cut in the middle past about 30
    characters: by default names are split, so the label is the table, file or task, never a
    long name cut in two; ``split_names=False`` keeps ``[namespace, name]``."""
    path, post_and_sync, _ = synced
    batch = _snapshot()
    long_name = "warehouse.analytics_marts.customer_lifetime_value_by_region_daily"
    batch["events"][1]["outputs"] = [
        {"namespace": "s3://b", "name": "exports/anomalies.csv"},
        {"namespace": "postgres://db:5432", "name": long_name},
    ]
    post_and_sync(batch)

    keys = _graph(path).get_all_asset_keys()
    labels = {k.path[-1] for k in keys}
    assert {"daily", "orders", "anomalies.csv", "customer_lifetime_value_by_region_daily"} <= labels
    assert dg.AssetKey(["s3_b", "exports", "anomalies.csv"]) in keys
    assert not any("." in k.path[-1] and k.path[0] == "postgres_db_5432" for k in keys)

    whole = _graph(path, OpenLineageTranslator(split_names=False))
    daily = dg.AssetKey(["postgres_db_5432", "shop.kpi.daily"])
    orders = dg.AssetKey(["postgres_db_5432", "shop.public.orders"])
    job = dg.AssetKey(["etl", "build_daily_kpi"])
    assert whole.get(daily).parent_keys == {job}
    assert whole.get(job).parent_keys == {orders}
    assert dg.AssetKey(["postgres_db_5432", long_name]) in whole.get_all_asset_keys()
    lineage = whole.get(daily).metadata["dagster/column_lineage"]
    assert lineage.deps_by_column["revenue"][0].asset_key == orders
    rows = _table_rows(whole.get(daily).metadata["openlineage/columnLineage"])
    assert rows[0]["upstream_asset"] == "postgres_db_5432/shop.public.orders"
