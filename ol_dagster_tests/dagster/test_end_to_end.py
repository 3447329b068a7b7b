"""Events in through the receiver, synced through the Dagster job, checked in the catalog."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from starlette.testclient import TestClient

from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.commands.headless import sync_batches
from ol_dagster.definitions import build_defs
from ol_dagster.receiver.app import create_app
from ol_dagster.settings import load_settings
from ol_dagster.store import BatchStatus, EventStore
from ol_dagster_tests.conftest import PROJECT_ROOT, kpi_snapshot, run_event

PG = "postgres://db:5432"


@pytest.fixture
def env(write_settings, tokens, tmp_path: Path):
    path = write_settings(allowedJobNamespaces=["etl"])
    settings = load_settings(path)
    store = EventStore(settings.store.url)
    client = TestClient(create_app(settings, store))
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        yield {
            "path": str(path),
            "settings": settings,
            "store": store,
            "client": client,
            "instance": instance,
            "auth": {"Authorization": f"Bearer {tokens['snap']}"},
        }
    store.dispose()


def _post(env, batch: dict) -> dict:
    response = env["client"].post("/api/v1/lineage/batch", json=batch, headers=env["auth"])
    assert response.status_code == 200, response.text
    return response.json()


def _sync(env, **kwargs) -> list[dict]:
    return list(sync_batches(env["path"], definition="snap", instance=env["instance"], **kwargs))


def _catalog_jobs(env) -> list[str]:
    catalog = EmbeddedCatalog(env["settings"].catalogs["main"].url)
    try:
        return catalog.job_names()
    finally:
        catalog.close()


def test_second_snapshot_removes_the_job_it_no_longer_describes(env):
    _post(env, kpi_snapshot())
    (first,) = _sync(env)
    assert first["status"] == "synced"
    assert first["cleanup"]["mode"] == "CUTOFF"
    assert first["cleanup"]["removedJobs"] == []
    assert set(_catalog_jobs(env)) == {"etl.build_daily_kpi", "etl.features.export_anomalies"}

    _post(env, kpi_snapshot(with_anomalies=False))
    (second,) = _sync(env)
    assert second["status"] == "synced"
    assert second["cleanup"]["skippedReason"] is None
    assert second["cleanup"]["removedJobs"] == ["etl.features.export_anomalies"]
    flows_call = next(c for c in second["cleanup"]["calls"] if c["target"] == "flows")
    assert flows_call["dryRun"]["dataFlows"] == 1 and flows_call["real"]["dataFlows"] == 1
    assert _catalog_jobs(env) == ["etl.build_daily_kpi"]
    # every check of the run was evaluated and passed
    assert second["checks"] == {
        "not_empty": True,
        "whole_snapshot": True,
        "no_dangling_flows": True,
        "upload_succeeded": True,
        "downstream_intact": True,
        "removal_cap": True,
        "cleanup_permitted": True,
        "owned_dataset_systems": True,
    }
    assert env["store"].get_batch(second["batchId"]).status is BatchStatus.SYNCED


def test_empty_batch_deletes_nothing_and_fails_not_empty(env):
    _post(env, kpi_snapshot())
    _sync(env)
    answer = _post(env, {"events": []})
    assert answer["batchId"] is not None
    (line,) = _sync(env)
    assert line["cleanup"]["skippedReason"] == "EMPTY_BATCH"
    assert line["checks"]["not_empty"] is False
    assert set(_catalog_jobs(env)) == {"etl.build_daily_kpi", "etl.features.export_anomalies"}


def test_removal_cap_blocks_every_real_call_and_an_override_lifts_it(env, write_settings):
    write_settings(allowedJobNamespaces=["etl"], cleanup={"maxRemovalsPerRun": 0})
    _post(env, kpi_snapshot())
    _sync(env)
    _post(env, kpi_snapshot(with_anomalies=False))
    (line,) = _sync(env)
    report = line["cleanup"]
    assert report["skippedReason"] == "REMOVAL_CAP_EXCEEDED"
    assert report["plannedRemovals"] >= 2
    assert all(call["real"] is None for call in report["calls"])
    assert line["checks"]["removal_cap"] is False
    assert "etl.features.export_anomalies" in _catalog_jobs(env)

    # A person raises the cap for this partition only, by re-materializing catalog_cleanup.
    defs = build_defs(env["path"])
    cleanup_key = dg.AssetKey(["snap", "catalog_cleanup"])
    result = (
        defs.resolve_implicit_global_asset_job_def()
        .get_subset(asset_selection={cleanup_key})
        .execute_in_process(
            instance=env["instance"],
            partition_key=str(line["batchId"]),
            run_config={"ops": {"snap__catalog_cleanup": {"config": {"maxRemovalsPerRun": 10}}}},
        )
    )
    assert result.success
    report = env["store"].get_batch(line["batchId"]).cleanup_report
    assert report["skippedReason"] is None
    assert report["override"]["maxRemovalsPerRun"] == 10
    assert report["override"]["runId"] == result.run_id
    assert _catalog_jobs(env) == ["etl.build_daily_kpi"]


def test_partial_snapshot_is_not_a_snapshot_and_gets_day_based_cleanup(env):
    _post(env, kpi_snapshot())
    _sync(env)
    batch = kpi_snapshot(with_anomalies=False)
    batch["events"].append({"eventTime": "not a time"})
    answer = env["client"].post("/api/v1/lineage/batch", json=batch, headers=env["auth"]).json()
    assert answer["status"] == "partial_success"
    (line,) = _sync(env)
    assert line["cleanup"]["mode"] == "DAYS"
    assert line["checks"]["whole_snapshot"] is False
    # nothing was stale for staleJobDays, so the job that went missing is kept
    assert "etl.features.export_anomalies" in _catalog_jobs(env)


def test_materializations_and_checks_are_recorded_on_the_instance(env):
    _post(env, kpi_snapshot())
    (line,) = _sync(env)
    instance: dg.DagsterInstance = env["instance"]
    for asset in ("received_batch", "lineage_graph", "catalog_upload", "catalog_cleanup"):
        event = instance.get_latest_materialization_event(dg.AssetKey(["snap", asset]))
        assert event is not None, asset
        assert event.dagster_event.partition == str(line["batchId"])
    cleanup = instance.get_latest_materialization_event(dg.AssetKey(["snap", "catalog_cleanup"]))
    meta = cleanup.asset_materialization.metadata
    assert meta["report"].data["mode"] == "CUTOFF"
    received = instance.get_latest_materialization_event(dg.AssetKey(["snap", "received_batch"]))
    assert received.asset_materialization.metadata["accepted"].value == 2


def test_sync_command_prints_one_json_line_per_batch(write_settings, tokens, tmp_path: Path):
    path = write_settings(allowedJobNamespaces=["etl"])
    settings = load_settings(path)
    store = EventStore(settings.store.url)
    store.add_stream_events(
        "snap",
        [],
        received=0,
    )
    client = TestClient(create_app(settings, store))
    client.post(
        "/api/v1/lineage/batch",
        json=kpi_snapshot(),
        headers={"Authorization": f"Bearer {tokens['snap']}"},
    )
    store.dispose()
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "ol_dagster.commands.cli", "--settings", str(path), "sync"],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env={**os.environ, "DAGSTER_HOME": str(home)},
        timeout=300,
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    # the open (empty) stream batch is sealed and synced first, then the posted snapshot
    assert [line["batchId"] for line in lines] == sorted(line["batchId"] for line in lines)
    assert len(lines) == 2
    for line in lines:
        assert set(line) >= {"definition", "batchId", "status", "upload", "cleanup", "checks"}
    assert lines[0]["cleanup"]["skippedReason"] == "EMPTY_BATCH"
    assert lines[1]["status"] == "synced"
    assert proc.returncode == 0, proc.stderr
    assert tokens["snap"] not in proc.stdout + proc.stderr


def _four_jobs(count: int) -> dict:
    return {
        "events": [
            run_event(
                "etl", f"job{i}", inputs=[(PG, f"shop.in{i}")], outputs=[(PG, f"shop.out{i}")]
            )
            for i in range(count)
        ]
    }


def test_a_partial_snapshot_is_stopped_by_the_removal_share_and_an_override_lifts_it(env):
    _post(env, _four_jobs(4))
    _sync(env)
    _post(env, _four_jobs(1))  # one event sent by hand to a snapshot definition
    (line,) = _sync(env)
    report = line["cleanup"]
    assert report["skippedReason"] == "REMOVAL_SHARE_EXCEEDED"
    assert (report["plannedJobRemovals"], report["heldJobs"]) == (3, 4)
    assert line["checks"]["removal_cap"] is False
    assert len(_catalog_jobs(env)) == 4

    defs = build_defs(env["path"])
    result = (
        defs.resolve_implicit_global_asset_job_def()
        .get_subset(asset_selection={dg.AssetKey(["snap", "catalog_cleanup"])})
        .execute_in_process(
            instance=env["instance"],
            partition_key=str(line["batchId"]),
            run_config={"ops": {"snap__catalog_cleanup": {"config": {"maxRemovalShare": 1.0}}}},
        )
    )
    assert result.success
    report = env["store"].get_batch(line["batchId"]).cleanup_report
    assert report["skippedReason"] is None and report["override"]["maxRemovalShare"] == 1.0
    assert _catalog_jobs(env) == ["etl.job0"]


def test_a_sync_does_not_run_while_another_holds_the_definition(env, monkeypatch):
    from ol_dagster.defs import assets

    monkeypatch.setattr(assets, "LOCK_WAIT_SECONDS", 0.2)
    _post(env, kpi_snapshot())
    (first,) = _sync(env)
    store: EventStore = env["store"]
    # an operator's sync in another process holds the lock (not a run this instance knows)
    assert store.acquire_sync_lock("snap", "operator-sync", lease_seconds=600) is None
    _post(env, kpi_snapshot(with_anomalies=False))
    (blocked,) = _sync(env)
    assert blocked["status"] == "run_failed"
    assert store.get_batch(blocked["batchId"]).status is BatchStatus.SEALED  # still pending
    assert len(_catalog_jobs(env)) == 2
    failure = next(
        e
        for e in env["instance"].all_logs(blocked["runId"])
        if e.dagster_event and e.dagster_event.event_type_value == "STEP_FAILURE"
    )
    assert "operator-sync" in str(failure.dagster_event.event_specific_data)

    # a lock held by a run that has finished is passed over at once
    assert store.release_sync_lock("snap", "operator-sync")
    assert store.acquire_sync_lock("snap", first["runId"], lease_seconds=600) is None
    (done,) = _sync(env)
    assert done["status"] == "synced"
    assert done["cleanup"]["removedJobs"] == ["etl.features.export_anomalies"]
    assert store.sync_lock("snap") is None  # released with the report


def _with_sql(batch: dict, sql: str) -> dict:
    """The snapshot's daily KPI job with this SQL (the same runs' shape, new run ids)."""
    for event in batch["events"]:
        if event["job"]["name"] == "build_daily_kpi":
            event["job"]["facets"] = {"sql": {"query": sql, "dialect": "postgres"}}
    return batch


def test_the_sync_line_says_what_the_upload_changed(env):
    """An edited SQL statement is counted as updated, not as nothing written; the rest of the
    snapshot, as the catalog holds it, as unchanged (``touched`` is the two together)."""
    _post(env, _with_sql(kpi_snapshot(), "select day, sum(amount) from orders group by day"))
    (first,) = _sync(env)
    assert first["upload"]["written"]["statements"] == 1

    _post(env, _with_sql(kpi_snapshot(), "select day, sum(total) from orders group by day"))
    (edited,) = _sync(env)

    upload = edited["upload"]
    assert sum(upload["written"].values()) == 0
    assert {k: v for k, v in upload["updated"].items() if v} == {"statements": 1}
    assert upload["unchanged"]["physicalEntities"] == 5  # 2 jobs, 3 datasets
    assert upload["unchanged"]["statements"] == 0
    for kind, unchanged in upload["unchanged"].items():
        assert upload["touched"][kind] == upload["updated"][kind] + unchanged
