"""One feed, several catalogs: a definition with ``catalogs: [main, lineage]`` syncs each alone.

Real parts: two embedded catalogs on SQLite files (on PostgreSQL with the store, in the second
pass of ``make test``: ``OL_DAGSTER_TEST_DB=postgresql``), or the embedded catalog beside the
strict Marquez fake served on loopback; events through the real receiver app; syncs through
``ol-dagster sync`` (``sync_batches``, and once the CLI itself) and through the Dagster job.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml
from sqlalchemy import create_engine, text
from starlette.testclient import TestClient

from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.commands.headless import sync_batches
from ol_dagster.definitions import build_defs
from ol_dagster.receiver.app import create_app
from ol_dagster.receiver.intake import sort_events
from ol_dagster.settings import SettingsError, load_settings, parse_settings
from ol_dagster.store import BatchStatus, EventStore
from ol_dagster.store.schema import batches
from ol_dagster.sync import fanout
from ol_dagster.sync.batch import cleanup_batch, fail_run, sync_batch
from ol_dagster_tests.conftest import PROJECT_ROOT, TEST_DB_ENV, kpi_snapshot, settings_data
from ol_dagster_tests.fakes.faults import Clock, Fault, serve
from ol_dagster_tests.fakes.marquez_fake import MarquezFake

KPI = "etl.build_daily_kpi"
ANOMALIES = "etl.features.export_anomalies"
START = datetime(2026, 11, 1, 3, 0, tzinfo=UTC)


@dataclass
class Env:
    path: Path
    tmp: Path
    instance: dg.DagsterInstance
    auth: dict[str, str]
    store: EventStore | Any = None
    client: TestClient | Any = None
    cursors: dict[str, str | None] = field(default_factory=dict)  # the sensors' cursors
    # the store's and the embedded catalogs' databases on PostgreSQL (empty: SQLite files)
    databases: dict[str, str] = field(default_factory=dict)

    def write(self, lineage: dict[str, Any], **overrides: Any) -> None:
        data = settings_data(self.tmp, allowedJobNamespaces=["etl"], **overrides)
        del data["definitions"][0]["catalog"]
        data["definitions"][0]["catalogs"] = ["main", "lineage"]
        if self.databases:
            data["store"]["url"] = self.databases["store"]
            data["catalogs"]["main"]["url"] = self.databases["main"]
            if lineage["kind"] == "embedded" and lineage["url"].startswith("sqlite:"):
                lineage = {
                    **lineage,
                    "url": self.databases["lineage"],
                }  # its SQLite file's stand-in
        data["catalogs"]["lineage"] = lineage
        self.path.write_text(yaml.safe_dump(data))

    def post(self, batch: dict[str, Any]) -> int:
        response = self.client.post("/api/v1/lineage/batch", json=batch, headers=self.auth)
        assert response.status_code == 200, response.text
        return response.json()["batchId"]

    def sync(self, **kwargs: Any) -> list[dict[str, Any]]:
        return list(
            sync_batches(str(self.path), definition="snap", instance=self.instance, **kwargs)
        )

    def embedded_jobs(self, key: str) -> set[str]:
        catalog = EmbeddedCatalog(load_settings(self.path).catalogs[key].url)
        try:
            return set(catalog.job_names())
        finally:
            catalog.close()


def _databases(request: pytest.FixtureRequest) -> dict[str, str]:
    """With ``OL_DAGSTER_TEST_DB=postgresql``: a fresh database each for the store and the
    embedded catalogs, on the throwaway server (``conftest.write_settings`` does the same)."""
    if os.environ.get(TEST_DB_ENV) != "postgresql":
        return {}
    server = request.getfixturevalue("pg_server")
    return {k: server.fresh_database(k[0]) for k in ("store", "main", "lineage")}


def _env(
    request: pytest.FixtureRequest, tmp_path: Path, tokens: dict[str, str], lineage: dict[str, Any]
) -> Iterator[Env]:
    home = tmp_path / "dagster_home"
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        auth = {"Authorization": f"Bearer {tokens['snap']}"}
        e = Env(tmp_path / "ol_dagster.yaml", tmp_path, instance, auth)
        e.databases = _databases(request)
        e.write(lineage)
        path = e.path
        settings = load_settings(path)
        e.store = EventStore(settings.store.url)
        e.client = TestClient(create_app(settings, e.store))
        try:
            yield e
        finally:
            e.store.dispose()


@pytest.fixture
def two_embedded(
    request: pytest.FixtureRequest, tmp_path: Path, tokens: dict[str, str]
) -> Iterator[Env]:
    lineage = {"kind": "embedded", "url": f"sqlite:///{tmp_path / 'lineage.db'}"}
    yield from _env(request, tmp_path, tokens, lineage)


@dataclass
class WithMarquez:
    env: Env
    fake: MarquezFake
    url: str

    def config(self, url: str | None = None) -> dict[str, Any]:
        return {"kind": "marquez", "url": url or self.url, "maxRetries": 1, "timeoutSeconds": 5}

    def jobs(self) -> set[str]:
        return {f"{ns}.{name}" for ns, name in self.fake.visible_jobs() if ns == "etl"}


@pytest.fixture
def with_marquez(
    request: pytest.FixtureRequest, tmp_path: Path, tokens: dict[str, str]
) -> Iterator[WithMarquez]:
    fake = MarquezFake(Clock(START))
    with serve(fake.server) as url:
        config = {"kind": "marquez", "url": url, "maxRetries": 1, "timeoutSeconds": 5}
        for env in _env(request, tmp_path, tokens, config):
            yield WithMarquez(env, fake, url)


# == settings ======================================================================================


def _parse(definition: dict[str, Any], catalogs: dict[str, Any] | None = None):
    data = {
        "catalogs": catalogs or {"main": {}, "lineage": {}},
        "definitions": [
            {
                "name": "snap",
                "uuid": "11111111-1111-4111-8111-111111111111",
                "receiver": {"token": {"env": "T"}},
                **definition,
            }
        ],
    }
    return parse_settings(data, "test.yaml")


def test_a_definition_names_one_catalog_or_a_list_of_them_the_first_primary():
    assert _parse({"catalog": "main"}).definitions[0].catalog_keys == ("main",)
    assert _parse({"catalogs": ["lineage", "main"]}).definitions[0].catalog_keys == (
        "lineage",
        "main",
    )
    for definition, message in [
        ({}, "give exactly one of 'catalog' (one key) and 'catalogs' (a list)"),
        ({"catalog": "main", "catalogs": ["main"]}, "give exactly one of"),
        ({"catalogs": []}, "catalogs: names no catalog"),
        ({"catalogs": ["main", "main"]}, "catalogs.1: 'main' is listed twice"),
        ({"catalogs": ["main", "mar-quez"]}, "catalogs.1: 'mar-quez' must start with a letter"),
        ({"catalogs": ["main", "other"]}, "definitions.0.catalogs.1: 'other' is not a key of"),
        ({"catalog": "other"}, "definitions.0.catalog: 'other' is not a key of 'catalogs'"),
    ]:
        with pytest.raises(SettingsError, match=message.replace("(", r"\(").replace(")", r"\)")):
            _parse(definition, {"main": {}, "lineage": {}, "mar-quez": {}})


# == two embedded catalogs through ol-dagster sync ================================================


def test_both_catalogs_receive_the_batch_and_each_cleans_with_its_own_cutoff(two_embedded: Env):
    e = two_embedded
    e.post(kpi_snapshot())
    (first,) = e.sync()
    assert first["status"] == "synced"
    assert set(first["catalogs"]) == {"main", "lineage"}
    for key in ("main", "lineage"):
        assert first["catalogs"][key]["status"] == "synced"
        assert first["catalogs"][key]["cleanup"]["mode"] == "CUTOFF"
        assert e.embedded_jobs(key) == {KPI, ANOMALIES}

    batch = e.post(kpi_snapshot(with_anomalies=False))
    (second,) = e.sync()
    assert second["status"] == "synced"
    records = e.store.catalog_records(batch)
    for key in ("main", "lineage"):
        section = second["catalogs"][key]
        assert section["cleanup"]["removedJobs"] == [ANOMALIES]
        assert section["checks"] == {
            "upload_succeeded": True,
            "downstream_intact": True,
            "removal_cap": True,
            "cleanup_permitted": True,
            "owned_dataset_systems": True,
        }
        # each catalog's cutoff is its own clock's, recorded with its own upload
        assert section["cleanup"]["cutoff"] == records[key].cutoff.isoformat()  # type: ignore[union-attr]
        assert e.embedded_jobs(key) == {KPI}
    assert records["main"].cutoff != records["lineage"].cutoff
    # the line's own upload and cleanup are the primary catalog's, as with one catalog
    assert second["cleanup"] == second["catalogs"]["main"]["cleanup"]
    assert set(second["checks"]) == {"not_empty", "whole_snapshot", "no_dangling_flows"}
    # per-catalog asset keys, materialized for the batch's partition
    for key in ("main", "lineage"):
        for asset in ("catalog_upload", "catalog_cleanup"):
            event = e.instance.get_latest_materialization_event(dg.AssetKey(["snap", key, asset]))
            assert event is not None and event.dagster_event.partition == str(batch)  # type: ignore[union-attr]


def test_a_removal_cap_hit_in_one_catalog_does_not_stop_the_other(two_embedded: Env):
    e = two_embedded
    e.write(
        {"kind": "embedded", "url": f"sqlite:///{e.tmp / 'lineage.db'}"},
        cleanup={"maxRemovalsPerRun": 0},
    )
    e.post(kpi_snapshot())
    e.sync()
    e.post(kpi_snapshot(with_anomalies=False))
    # the cap is raised for the lineage catalog's cleanup only (its own asset's run config)
    raised = {"ops": {"snap__lineage__catalog_cleanup": {"config": {"maxRemovalsPerRun": 100}}}}
    (line,) = e.sync(run_config=raised)
    main, lineage = line["catalogs"]["main"], line["catalogs"]["lineage"]
    assert main["cleanup"]["skippedReason"] == "REMOVAL_CAP_EXCEEDED"
    assert main["checks"]["removal_cap"] is False
    assert e.embedded_jobs("main") == {KPI, ANOMALIES}
    assert lineage["cleanup"]["skippedReason"] is None
    assert lineage["cleanup"]["removedJobs"] == [ANOMALIES]
    assert lineage["checks"]["removal_cap"] is True
    assert e.embedded_jobs("lineage") == {KPI}
    # a cap is not a retry reason: both catalogs finished the batch, which is synced
    assert line["status"] == "synced"


# == the embedded catalog beside Marquez ==========================================================


def test_a_failing_catalog_blocks_only_its_own_cleanup_and_a_retry_completes_it(
    with_marquez: WithMarquez,
):
    m, e = with_marquez, with_marquez.env
    e.post(kpi_snapshot())
    (first,) = e.sync()
    assert first["status"] == "synced", first
    assert m.jobs() == {KPI, ANOMALIES} and e.embedded_jobs("main") == {KPI, ANOMALIES}
    # cutoffs independent: each read from its own catalog's clock (Marquez's is frozen)
    records = e.store.catalog_records(first["batchId"])
    assert records["lineage"].cutoff == START
    assert records["main"].cutoff is not None and records["main"].cutoff > START

    m.fake.clock.advance(seconds=10)
    batch = e.post(kpi_snapshot(with_anomalies=False))
    m.fake.server.inject(
        *(Fault(status=500, method="POST", path="/api/v1/lineage") for _ in range(4))
    )
    (failed,) = e.sync()
    main, lineage = failed["catalogs"]["main"], failed["catalogs"]["lineage"]
    assert main["status"] == "synced" and main["cleanup"]["removedJobs"] == [ANOMALIES]
    assert e.embedded_jobs("main") == {KPI}
    assert lineage["status"] == "failed"
    assert lineage["cleanup"]["skippedReason"] == "UPLOAD_FAILED"
    assert lineage["checks"]["upload_succeeded"] is False
    assert m.jobs() == {KPI, ANOMALIES}  # nothing deleted in the catalog that failed
    assert failed["status"] == "failed"
    assert e.store.get_batch(batch).status is BatchStatus.FAILED
    main_upload_run = e.store.catalog_records(batch)["main"].upload_result["runId"]  # type: ignore[index]

    m.fake.server.faults.clear()  # the server answers again
    m.fake.clock.advance(seconds=10)
    (retried,) = e.sync()
    assert retried["batchId"] == batch and retried["status"] == "synced"
    assert retried["runId"] != failed["runId"]
    assert retried["catalogs"]["lineage"]["cleanup"]["removedJobs"] == [ANOMALIES]
    assert m.jobs() == {KPI}
    # the embedded catalog was not uploaded nor cleaned again: its record is the first run's
    records = e.store.catalog_records(batch)
    assert records["main"].upload_result["runId"] == main_upload_run == failed["runId"]  # type: ignore[index]
    assert records["main"].run_id == failed["runId"]
    upload = e.instance.get_latest_materialization_event(
        dg.AssetKey(["snap", "main", "catalog_upload"])
    )
    assert upload is not None and upload.run_id == retried["runId"]
    meta = upload.asset_materialization.metadata  # type: ignore[union-attr]
    assert meta["skippedReason"].value == "ALREADY_SYNCED"
    assert meta["syncedInRun"].value == failed["runId"]


def test_a_catalog_that_is_down_is_its_own_failed_upload(with_marquez: WithMarquez):
    m, e = with_marquez, with_marquez.env
    e.post(kpi_snapshot())
    e.sync()
    m.fake.clock.advance(seconds=10)
    batch = e.post(kpi_snapshot(with_anomalies=False))
    with serve(MarquezFake().server) as closed:
        pass  # nothing listens there any more
    e.write(m.config(closed))
    (down,) = e.sync()
    assert down["catalogs"]["main"]["cleanup"]["removedJobs"] == [ANOMALIES]
    lineage = down["catalogs"]["lineage"]
    assert lineage["cleanup"]["skippedReason"] == "UPLOAD_FAILED"
    assert "clock: CatalogUnavailable" in lineage["upload"]["failed"][0]["reason"]
    assert down["status"] == "failed" and "failure" not in down

    e.write(m.config())  # back up
    m.fake.clock.advance(seconds=10)
    (back,) = e.sync()
    assert back["batchId"] == batch and back["status"] == "synced"
    assert m.jobs() == {KPI}


def test_ol_dagster_sync_prints_a_section_per_catalog(with_marquez: WithMarquez):
    e = with_marquez.env
    e.post(kpi_snapshot())
    env = {**os.environ, "DAGSTER_HOME": str(e.tmp / "dagster_home")}
    proc = subprocess.run(
        [sys.executable, "-m", "ol_dagster.commands.cli", "--settings", str(e.path), "sync"],
        capture_output=True,
        text=True,
        env=env,
        cwd=PROJECT_ROOT,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.strip()]
    snap = [x for x in lines if x["definition"] == "snap"]
    assert len(snap) == 1 and snap[0]["status"] == "synced"
    assert {k: v["status"] for k, v in snap[0]["catalogs"].items()} == {
        "main": "synced",
        "lineage": "synced",
    }
    assert with_marquez.jobs() == {KPI, ANOMALIES}


# == through the Dagster job ======================================================================


def test_the_job_has_per_catalog_assets_and_a_cleanup_rerun_touches_one_catalog(
    two_embedded: Env,
):
    e = two_embedded
    e.write(
        {"kind": "embedded", "url": f"sqlite:///{e.tmp / 'lineage.db'}"},
        cleanup={"maxRemovalsPerRun": 0},
    )
    e.post(kpi_snapshot())
    e.sync()
    batch = e.post(kpi_snapshot(with_anomalies=False))
    (capped,) = e.sync()
    assert {capped["catalogs"][k]["cleanup"]["skippedReason"] for k in ("main", "lineage")} == {
        "REMOVAL_CAP_EXCEEDED"
    }

    defs = build_defs(str(e.path))
    job = defs.resolve_job_def("snap__sync")
    keys = {k.to_user_string() for k in job.asset_layer.executable_asset_keys}
    assert keys == {
        "snap/received_batch",
        "snap/lineage_graph",
        "snap/main/catalog_upload",
        "snap/main/catalog_cleanup",
        "snap/lineage/catalog_upload",
        "snap/lineage/catalog_cleanup",
    }
    graph = defs.resolve_asset_graph()
    checks = {(c.asset_key.to_user_string(), c.name) for c in graph.asset_check_keys}
    assert ("snap/lineage/catalog_cleanup", "removal_cap") in checks
    assert ("snap/main/catalog_cleanup", "removal_cap") in checks

    # a person raises the cap for the lineage catalog's cleanup of this batch only
    cleanup = dg.AssetKey(["snap", "lineage", "catalog_cleanup"])
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(
        instance=e.instance,
        partition_key=str(batch),
        asset_selection=[cleanup],
        run_config={
            "ops": {"snap__lineage__catalog_cleanup": {"config": {"maxRemovalsPerRun": 50}}}
        },
    )
    assert result.success
    assert e.embedded_jobs("lineage") == {KPI}
    assert e.embedded_jobs("main") == {KPI, ANOMALIES}
    records = e.store.catalog_records(batch)
    assert records["lineage"].cleanup_report["override"]["maxRemovalsPerRun"] == 50  # type: ignore[index]
    assert records["main"].cleanup_report["skippedReason"] == "REMOVAL_CAP_EXCEEDED"  # type: ignore[index]
    # the day-based cleanup: one asset per catalog, one schedule for both
    assert {
        dg.AssetKey(["snap", "main", "stale_cleanup"]),
        dg.AssetKey(["snap", "lineage", "stale_cleanup"]),
    } <= set(graph.get_all_asset_keys())


def _daemon_tick(
    e: Env, defs: dg.Definitions
) -> list[tuple[dg.RunRequest, dg.ExecuteInProcessResult]]:
    """What the daemon does with one tick of ``snap__new_batches``: evaluate it, add the
    partitions it asks for, launch the runs it requests (each executed here, to its end)."""
    context = dg.build_sensor_context(
        instance=e.instance,
        instance_ref=e.instance.get_ref(),
        cursor=e.cursors.get("snap"),
        definitions=defs,
        resources=defs.resources,
        sensor_name="snap__new_batches",
    )
    with warnings.catch_warnings(), context:
        warnings.simplefilter("ignore", UserWarning)  # get_sensor_def binds no resources
        data = defs.get_sensor_def("snap__new_batches").evaluate_tick(context)
    for req in data.dynamic_partitions_requests or []:
        assert isinstance(req, dg.AddDynamicPartitionsRequest)
        e.instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
    e.cursors["snap"] = data.cursor
    job = defs.resolve_job_def("snap__sync")
    return [
        (
            req,
            job.execute_in_process(
                instance=e.instance,
                partition_key=req.partition_key,
                tags=req.tags,
                raise_on_error=False,
            ),
        )
        for req in data.run_requests or []
    ]


def _failure_sensor(e: Env, defs: dg.Definitions, result: dg.ExecuteInProcessResult) -> None:
    context = dg.build_run_status_sensor_context(
        sensor_name="snap__failed_syncs",
        dagster_event=result.get_run_failure_event(),
        dagster_instance=e.instance,
        dagster_run=result.dagster_run,
        resources={"ol_store": (defs.resources or {})["ol_store"]},
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        defs.get_sensor_def("snap__failed_syncs")(context.for_run_failure())


def test_per_catalog_nodes_name_their_catalog_and_each_check_its_batch(two_embedded: Env):
    e = two_embedded
    batch = e.post(kpi_snapshot())
    e.store.seal_due("snap", window_seconds=0, max_events=1, force=True)
    defs = build_defs(str(e.path))
    graph = defs.resolve_asset_graph()

    # the nodes of the two catalogs have one name each (catalog_upload...): what the graph shows
    # under it, and a tag, say which catalog
    for catalog in ("main", "lineage"):
        for asset in ("catalog_upload", "catalog_cleanup", "stale_cleanup"):
            node = graph.get(dg.AssetKey(["snap", catalog, asset]))
            assert (node.description or "").startswith(f"Catalog '{catalog}': "), node.description
            assert node.tags["ol_dagster/catalog"] == catalog

    e.instance.add_dynamic_partitions("snap__batches", [str(batch)])
    result = defs.resolve_job_def("snap__sync").execute_in_process(
        instance=e.instance, partition_key=str(batch)
    )
    assert result.success
    evaluations = result.get_asset_check_evaluations()
    assert len(evaluations) == 13  # 2 on received_batch, 1 on lineage_graph, 5 per catalog
    for evaluation in evaluations:
        # the check's history lists every batch's result: each says which it judged
        assert (evaluation.description or "").startswith(f"batch {batch}"), evaluation
        assert evaluation.metadata["batch"] == dg.MetadataValue.text(str(batch))


def test_the_sensor_retries_a_run_that_failed_in_one_catalog_for_that_catalog_only(
    two_embedded: Env,
):
    """The daemon's path: the new-batches sensor requests the batch's run; the lineage catalog
    cannot be opened, so its upload step raises and the run fails, while main syncs; the failure
    sensor marks the batch for a retry; once the backoff passed the sensor requests a retry run,
    which leaves main alone and syncs lineage."""
    e = two_embedded
    e.post(kpi_snapshot())
    e.sync()  # both catalogs hold the first snapshot
    lineage = {"kind": "embedded", "url": "postgresql+psycopg://nobody@127.0.0.1:1/none"}
    e.write(lineage)
    batch = e.post(kpi_snapshot(with_anomalies=False))
    defs = build_defs(str(e.path))
    e.cursors["snap"] = str(batch - 1)  # the first batch was synced by ``ol-dagster sync``

    ((request, failed),) = _daemon_tick(e, defs)
    assert request.run_key == str(batch)
    assert not failed.success
    steps = {ev.step_key: ev.event_type_value for ev in failed.all_events if ev.step_key}
    assert steps["snap__lineage__catalog_upload"] == "STEP_FAILURE"
    assert steps["snap__main__catalog_cleanup"] == "STEP_SUCCESS"
    assert e.embedded_jobs("main") == {KPI}  # main synced and cleaned in the failed run
    # nothing marks the batch but the failure sensor: lineage's cleanup step never ran
    assert e.store.get_batch(batch).status is BatchStatus.SEALED
    assert "lineage" not in e.store.catalog_records(batch)
    _failure_sensor(e, defs, failed)
    stored = e.store.get_batch(batch)
    assert stored.status is BatchStatus.FAILED and stored.attempts == 1
    records = e.store.catalog_records(batch)
    assert records["main"].status is BatchStatus.SYNCED
    assert records["lineage"].status is BatchStatus.FAILED
    assert records["lineage"].cleanup_report["skippedReason"] == "RUN_FAILED"  # type: ignore[index]
    assert _daemon_tick(e, defs) == []  # not before its backoff

    e.write({"kind": "embedded", "url": f"sqlite:///{e.tmp / 'lineage.db'}"})  # reachable again
    with e.store.engine.begin() as conn:  # the backoff has passed
        conn.execute(
            batches.update()
            .where(batches.c.id == batch)
            .values(next_attempt_at=datetime(2000, 1, 1))
        )
    ((request, retried),) = _daemon_tick(e, defs)
    assert request.run_key == f"{batch}:retry1"  # a new run key: the daemon launches it
    assert retried.success
    assert e.store.get_batch(batch).status is BatchStatus.SYNCED
    assert e.embedded_jobs("lineage") == {KPI}
    records = e.store.catalog_records(batch)
    # main was neither uploaded nor cleaned again: its part is the failed run's
    assert records["main"].run_id == failed.run_id
    assert records["main"].upload_result["runId"] == failed.run_id  # type: ignore[index]
    assert records["lineage"].run_id == retried.run_id
    upload = e.instance.get_latest_materialization_event(
        dg.AssetKey(["snap", "main", "catalog_upload"])
    )
    assert upload is not None and upload.run_id == retried.run_id
    assert upload.asset_materialization.metadata["skippedReason"].value == "ALREADY_SYNCED"  # type: ignore[union-attr]


# == the store: one catalog's facts across the upgrade to version 11 ==============================


def _as_v9(url: str) -> None:
    """Turn the store back into what version 9 left: the batches' own columns hold the facts."""
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE ol_batch_catalogs"))
        conn.execute(text("ALTER TABLE ol_cleanup_journal DROP COLUMN catalog"))
        conn.execute(text("DROP TABLE IF EXISTS ol_kafka_offsets"))
        conn.execute(text("DROP TABLE IF EXISTS ol_kafka_dead_letters"))
        conn.execute(text("UPDATE ol_store_meta SET value = '9' WHERE key = 'schema_version'"))
    engine.dispose()


def test_a_v9_store_keeps_working_for_one_catalog_and_becomes_the_primarys(
    tmp_path: Path, write_settings, tokens
):
    path = write_settings(allowedJobNamespaces=["etl"])
    settings = load_settings(path)
    d = settings.definition("snap")
    url = settings.store.url
    store = EventStore(url)
    older, newer = (_post(store, kpi_snapshot()) for _ in range(2))
    catalog = EmbeddedCatalog(settings.catalogs["main"].url)
    try:
        sync_batch(store, catalog, d, newer, run_id="r-newer")
        assert fail_run(store, d, older, "r-older")
        store.dispose()
        _as_v9(url)

        store = EventStore(url)  # migrated to 11 on open
        assert store.catalog_records(newer) == {}
        # a retry of the older snapshot is SUPERSEDED by the newer one, synced under version 9
        _done, report = sync_batch(store, catalog, d, older, run_id="r-retry")
        assert report["skippedReason"] == "SUPERSEDED" and report["supersededBy"] == newer
        # the cleanup of the newer batch, re-materialized, runs on its version-9 upload facts
        again = cleanup_batch(
            store, catalog, d, newer, run_id="r-person", uploaded_in_this_run=False
        )
        assert again["mode"] == "CUTOFF" and again["skippedReason"] is None
        assert store.get_batch(newer).status is BatchStatus.SYNCED

        # the definition now also feeds a second catalog: the version-9 facts are main's
        two = d.model_copy(update={"catalog": None, "catalogs": ["main", "lineage"]})
        batch = store.get_batch(newer)
        legacy = fanout.record(batch, store.catalog_records(newer), fanout.target(two, "main"))
        assert legacy is not None and legacy.status is BatchStatus.SYNCED
        assert (
            fanout.record(batch, store.catalog_records(newer), fanout.target(two, "lineage"))
            is None
        )
    finally:
        catalog.close()
        store.dispose()


def _post(store: EventStore, batch: dict[str, Any]) -> int:
    intake = sort_events(batch["events"], ["etl"])
    return store.add_posted_batch("snap", intake.accepted, received=intake.received, snapshot=True)
