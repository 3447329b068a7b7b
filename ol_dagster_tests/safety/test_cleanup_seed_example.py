"""The seed's Example end to end through Dagster, and what can go wrong around it.

"A repository publishes its two jobs etl.build_daily_kpi and features.export_anomalies as a
snapshot. The next batch contains only etl.build_daily_kpi." Events go in through the receiver
(a Starlette TestClient on the real app), batches are synced by ``headless.sync_batches`` (the
``<definition>__sync`` job, executed in process on a ``dg.instance_for_test``), and the catalog is
read afterwards. The repository's one job namespace is ``repo``: both jobs are in the snapshot's
namespace, which makes ``allowedJobNamespaces`` exactly one pattern without ``*``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from starlette.testclient import TestClient

from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.commands.headless import QUIET, sync_batches
from ol_dagster.definitions import build_defs
from ol_dagster.receiver.app import create_app
from ol_dagster.settings import load_settings
from ol_dagster.store import BatchStatus, EventStore
from ol_dagster_tests.conftest import settings_data
from ol_dagster_tests.safety.test_cleanup_rules import (
    BUCKET,
    BUCKET_SYSTEM,
    age_dataset,
    calls,
    datasets,
    ds,
    flows,
    job,
    pg,
    quality,
)

NS = "repo"
KPI = "etl.build_daily_kpi"
ANOMALIES = "features.export_anomalies"
S3_ENTITY = "anomalies"
CHECKS_ALL_PASSED = {
    "not_empty": True,
    "whole_snapshot": True,
    "no_dangling_flows": True,
    "upload_succeeded": True,
    "downstream_intact": True,
    "removal_cap": True,
    "cleanup_permitted": True,
    "owned_dataset_systems": True,
}


def build_daily_kpi() -> dict[str, Any]:
    return job(NS, KPI, [pg("orders")], [pg("kpi_daily")], sql="insert into kpi_daily select 1")


def export_anomalies() -> dict[str, Any]:
    return job(
        NS,
        ANOMALIES,
        [pg("kpi_daily", checks=[("not_null", "kpi_date"), ("row_count", None)])],
        [ds(BUCKET, S3_ENTITY)],
    )


def snapshot(*, with_anomalies: bool = True) -> dict[str, Any]:
    return {"events": [build_daily_kpi()] + ([export_anomalies()] if with_anomalies else [])}


class Env:
    """A settings file, the receiver, the event store and a test Dagster instance."""

    def __init__(self, path: Path, tokens: dict[str, str], instance: dg.DagsterInstance) -> None:
        self.path = str(path)
        self.settings = load_settings(path)
        self.store = EventStore(self.settings.store.url)
        self.client = TestClient(create_app(self.settings, self.store))
        self.auth = {"Authorization": f"Bearer {tokens['snap']}"}
        self.instance = instance

    def post(self, body: dict[str, Any]) -> int:
        response = self.client.post("/api/v1/lineage/batch", json=body, headers=self.auth)
        assert response.status_code == 200, response.text
        return response.json()["batchId"]

    def sync(self) -> list[dict[str, Any]]:
        return list(sync_batches(self.path, definition="snap", instance=self.instance))

    def catalog(self) -> EmbeddedCatalog:
        return EmbeddedCatalog(self.settings.catalogs["main"].url)

    def read(self, fn: Callable[[EmbeddedCatalog], Any]) -> Any:
        catalog = self.catalog()
        try:
            return fn(catalog)
        finally:
            catalog.close()

    def jobs(self) -> set[str]:
        return set(self.read(lambda c: c.job_names()))

    def bucket(self) -> set[str]:
        return {n for s, n in self.read(datasets) if s == BUCKET_SYSTEM}

    def defs(self) -> dg.Definitions:
        return build_defs(self.path)

    def materialize(
        self, asset: str, *, partition: int | None = None, config: dict | None = None
    ) -> dg.ExecuteInProcessResult:
        """Materialize one asset of ``snap`` on its own, as a person does from the UI."""
        key = dg.AssetKey(["snap", asset])
        job_def = (
            self.defs().resolve_implicit_global_asset_job_def().get_subset(asset_selection={key})
        )
        run_config: dict[str, Any] = dict(QUIET)
        if config is not None:
            run_config["ops"] = {f"snap__{asset}": {"config": config}}
        return job_def.execute_in_process(
            instance=self.instance,
            partition_key=str(partition) if partition is not None else None,
            run_config=run_config,
        )

    def latest_report(self, asset: str) -> dict[str, Any]:
        event = self.instance.get_latest_materialization_event(dg.AssetKey(["snap", asset]))
        assert event is not None and event.asset_materialization is not None
        return event.asset_materialization.metadata["report"].data


@pytest.fixture
def make_env(
    tmp_path: Path, tokens: dict[str, str], write_settings
) -> Iterator[Callable[..., Env]]:
    """``make_env(**snap_overrides)``: the repository's definition, ``allowedJobNamespaces`` [repo]
    and the anomalies bucket mapped by a datasetSystems rule (cleanupMode CUTOFF unless told)."""
    made: list[Env] = []
    home = tmp_path / "dagster_home"
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as instance:

        def make(cleanup_mode: str = "CUTOFF", **overrides: Any) -> Env:
            snap = {
                "allowedJobNamespaces": [NS],
                "datasetSystems": [
                    {"namespace": BUCKET, "system": BUCKET_SYSTEM, "cleanupMode": cleanup_mode}
                ],
                **overrides,
            }
            env = Env(write_settings(settings_data(tmp_path, **snap)), tokens, instance)
            made.append(env)
            return env

        yield make
        for env in made:
            env.store.dispose()


# == The Example ==================================================================================


def test_example_the_dropped_jobs_flows_and_entity_go_in_that_run_and_its_checks_are_disabled(
    make_env,
):
    """Example: "The second job's flows and its job entity are not uploaded again, so the cutoff
    cleanup deletes them in that run. Its quality checks are disabled." Also: "A run also reads a
    snapshot whole: it reads past limits.maxEventsPerRun rather than cut the last batch it
    started." (here maxEventsPerRun is 1 and the snapshot holds 2 events)."""
    env = make_env(limits={"maxEventsPerRun": 1})
    env.post(snapshot())
    (first,) = env.sync()  # one batch, both events: a snapshot is never cut
    assert first["status"] == "synced"
    assert first["cleanup"]["mode"] == "CUTOFF" and first["cleanup"]["removedJobs"] == []
    assert env.jobs() == {f"{NS}.{KPI}", f"{NS}.{ANOMALIES}"}
    assert {s for s, _, _ in env.read(flows)} == {f"ol:{NS}|{KPI}", f"ol:{NS}|{ANOMALIES}"}
    assert set(env.read(quality).values()) == {True}

    env.post(snapshot(with_anomalies=False))
    (second,) = env.sync()

    report = second["cleanup"]
    assert second["status"] == "synced"
    assert report["mode"] == "CUTOFF" and report["skippedReason"] is None
    assert report["removedJobs"] == [f"{NS}.{ANOMALIES}"]
    assert env.jobs() == {f"{NS}.{KPI}"}
    assert env.read(flows) == {(f"ol:{NS}|{KPI}", "shop.public.orders", "shop.public.kpi_daily")}
    assert env.read(quality) == {
        (f"{NS}.{ANOMALIES}", "not_null"): False,
        (f"{NS}.{ANOMALIES}", "row_count"): False,
    }
    (flows_call,) = calls(report, "flows")
    assert flows_call["scopePrefixes"] == [f"ol:{NS}|"]
    assert flows_call["dryRun"] == flows_call["real"] == {"dataFlows": 1, "fieldFlows": 0}
    assert second["checks"] == CHECKS_ALL_PASSED
    # the report is also the catalog_cleanup materialization's metadata, with a Markdown table
    assert env.latest_report("catalog_cleanup") == report
    event = env.instance.get_latest_materialization_event(dg.AssetKey(["snap", "catalog_cleanup"]))
    summary = event.asset_materialization.metadata["summary"].value
    assert "| call | on | objectType | dryRun | real | notRemoved |" in summary
    assert f"{NS}.{ANOMALIES}" in summary


def test_example_its_s3_entity_goes_in_the_same_run_when_its_system_is_cutoff_owned(make_env):
    """Example: "The S3 entity it wrote, anomalies, is deleted in the same run if its System is
    owned by this repository (CUTOFF)"."""
    env = make_env("CUTOFF")
    env.post(snapshot())
    env.sync()
    assert env.bucket() == {S3_ENTITY}
    (system,) = [s for s in env.read(lambda c: c.systems()) if s["name"] == BUCKET_SYSTEM]
    assert system["openLineageOwner"] == str(env.settings.definition("snap").uuid)

    env.post(snapshot(with_anomalies=False))
    (line,) = env.sync()

    assert env.bucket() == set()
    (ds_call,) = calls(line["cleanup"], "datasetSystem")
    assert ds_call["system"] == BUCKET_SYSTEM and ds_call["mode"] == "CUTOFF"
    assert ds_call["real"]["physicalEntities"] == 1
    assert line["cleanup"]["warnings"] == []
    assert line["checks"]["owned_dataset_systems"] is True


@pytest.mark.parametrize(
    ("cleanup_mode", "namespaces", "downgraded"),
    [("DAYS", [NS], False), ("CUTOFF", [NS, "other"], True)],
    ids=["days_system", "cutoff_system_shared_with_another_namespace"],
)
def test_example_its_s3_entity_goes_only_after_30_days_otherwise(
    make_env, cleanup_mode: str, namespaces: list[str], downgraded: bool
):
    """Example: "[...] and otherwise after 30 days without references (DAYS)." Ownership: "Otherwise
    the System is cleaned with DAYS and the run reports SHARED_SYSTEM_DOWNGRADED" (check
    ``owned_dataset_systems``, WARN). The daily ``stale_cleanup`` asset does the day-based part."""
    env = make_env(cleanup_mode, allowedJobNamespaces=namespaces)
    env.post(snapshot())
    env.sync()

    env.post(snapshot(with_anomalies=False))
    (line,) = env.sync()

    assert line["status"] == "synced"
    assert line["cleanup"]["removedJobs"] == [f"{NS}.{ANOMALIES}"]
    assert env.bucket() == {S3_ENTITY}  # not in the same run
    assert line["checks"]["owned_dataset_systems"] is (not downgraded)
    warnings = [{"code": "SHARED_SYSTEM_DOWNGRADED", "system": BUCKET_SYSTEM}]
    assert line["cleanup"]["warnings"] == (warnings if downgraded else [])

    env.read(lambda c: age_dataset(c, S3_ENTITY, 29))
    assert env.materialize("stale_cleanup").success
    assert env.bucket() == {S3_ENTITY}  # 29 days without references: not yet

    env.read(lambda c: age_dataset(c, S3_ENTITY, 31))
    assert env.materialize("stale_cleanup").success
    assert env.bucket() == set()
    report = env.latest_report("stale_cleanup")
    assert report["mode"] == "DAYS" and report["skippedReason"] is None
    (ds_call,) = calls(report, "datasetSystem")
    assert ds_call["mode"] == "DAYS" and ds_call["real"]["physicalEntities"] == 1
    assert env.jobs() == {f"{NS}.{KPI}"}  # what producers still describe is kept


def test_example_an_empty_batch_deletes_nothing(make_env):
    """Example: "If the batch had been empty [...] nothing would be deleted." Guards: "The job makes
    no cleanup when: [...] the batch is empty"."""
    env = make_env()
    env.post(snapshot())
    env.sync()
    before = (env.jobs(), env.read(flows), env.bucket())

    env.post({"events": []})
    (line,) = env.sync()

    assert line["cleanup"]["skippedReason"] == "EMPTY_BATCH"
    assert line["cleanup"]["calls"] == []
    assert line["checks"]["not_empty"] is False
    assert (env.jobs(), env.read(flows), env.bucket()) == before


def test_example_a_batch_over_the_cap_deletes_nothing_and_an_override_applies_to_one_run(
    make_env,
):
    """Example: "[...] or the number of objects to delete were above maxRemovalsPerRun, nothing
    would be deleted." (issue: "re-materializing catalog_cleanup for a partition with run config
    {"maxRemovalsPerRun": N} applies N to that run only; the report records the override and the
    run.")"""
    env = make_env(cleanup={"maxRemovalsPerRun": 1})
    env.post(snapshot())
    env.sync()

    env.post(snapshot(with_anomalies=False))
    (line,) = env.sync()

    report = line["cleanup"]
    assert report["skippedReason"] == "REMOVAL_CAP_EXCEEDED"
    assert report["maxRemovalsPerRun"] == 1
    assert report["plannedRemovals"] > 1
    assert report["calls"] and all(c["real"] is None for c in report["calls"])
    assert line["checks"]["removal_cap"] is False
    assert line["status"] == "synced"  # a warning, not a failure: the batch is not retried
    assert env.jobs() == {f"{NS}.{KPI}", f"{NS}.{ANOMALIES}"}
    assert env.bucket() == {S3_ENTITY}

    result = env.materialize(
        "catalog_cleanup", partition=line["batchId"], config={"maxRemovalsPerRun": 50}
    )

    assert result.success
    report = env.store.get_batch(line["batchId"]).cleanup_report
    assert report["skippedReason"] is None
    assert report["maxRemovalsPerRun"] == 50
    assert report["override"]["maxRemovalsPerRun"] == 50
    assert report["override"]["runId"] == result.run_id
    assert env.jobs() == {f"{NS}.{KPI}"} and env.bucket() == set()

    # the next batch is held to the settings' cap again
    env.post({"events": [job(NS, "etl.build_weekly_kpi", [pg("orders")], [pg("kpi_weekly")])]})
    (line,) = env.sync()
    assert line["cleanup"]["skippedReason"] == "REMOVAL_CAP_EXCEEDED"
    assert line["cleanup"]["maxRemovalsPerRun"] == 1 and "override" not in line["cleanup"]
    assert f"{NS}.{KPI}" in env.jobs()


# == Around the Example ===========================================================================


@pytest.mark.parametrize("offset_hours", [6, -6], ids=["catalog_ahead", "catalog_behind"])
def test_clock_skew_never_deletes_what_the_run_touched(
    make_env, monkeypatch: pytest.MonkeyPatch, offset_hours: int
):
    """The idea: "At the start of the run, the agent reads the time from the Blindata API clock
    (never its own), the cutoff." With the catalog's clock hours away from this process's, the run
    still deletes exactly what it did not touch."""
    offset = timedelta(hours=offset_hours)
    real_clock = EmbeddedCatalog.clock
    monkeypatch.setattr(EmbeddedCatalog, "clock", lambda self: real_clock(self) + offset)
    env = make_env()
    env.post(snapshot())
    env.sync()

    env.post(snapshot(with_anomalies=False))
    (line,) = env.sync()

    cutoff = datetime.fromisoformat(line["cleanup"]["cutoff"])
    assert abs(cutoff - (datetime.now(UTC) + offset)) < timedelta(minutes=5)
    assert line["cleanup"]["removedJobs"] == [f"{NS}.{ANOMALIES}"]
    assert env.jobs() == {f"{NS}.{KPI}"}
    assert env.read(flows) == {(f"ol:{NS}|{KPI}", "shop.public.orders", "shop.public.kpi_daily")}

    env.post(snapshot(with_anomalies=False))  # the same snapshot again: nothing to delete
    (line,) = env.sync()
    assert line["cleanup"]["skippedReason"] is None
    assert all(sum(c["real"].values()) == 0 for c in line["cleanup"]["calls"])
    assert env.jobs() == {f"{NS}.{KPI}"}


def test_a_failed_upload_deletes_nothing_and_a_good_retry_syncs_the_batch(
    make_env, monkeypatch: pytest.MonkeyPatch
):
    """Guards: "any upload of the run failed [...] the cleanup is skipped for the whole run, and the
    events stay for the next run." (issue: "UPLOAD_FAILED (events stay pending: the batch is
    retried by the sensor with backoff)")."""
    env = make_env()
    env.post(snapshot())
    env.sync()
    real_upload = EmbeddedCatalog.upload
    failures = [RuntimeError("catalog unavailable")]

    def flaky_upload(self, *args: Any, **kwargs: Any):
        if failures:
            raise failures.pop()
        return real_upload(self, *args, **kwargs)

    monkeypatch.setattr(EmbeddedCatalog, "upload", flaky_upload)
    batch_id = env.post(snapshot(with_anomalies=False))

    (line,) = env.sync()

    assert line["cleanup"]["skippedReason"] == "UPLOAD_FAILED"
    assert line["cleanup"]["calls"] == [] and line["cleanup"]["removedJobs"] == []
    assert line["upload"]["succeeded"] is False
    assert "catalog unavailable" in line["upload"]["failed"][0]["reason"]
    assert line["checks"]["upload_succeeded"] is False
    assert line["status"] == "failed"
    batch = env.store.get_batch(batch_id)
    assert batch.status is BatchStatus.FAILED and batch.attempts == 1
    assert batch.next_attempt_at is not None and batch.next_attempt_at > datetime.now(UTC)
    assert env.jobs() == {f"{NS}.{KPI}", f"{NS}.{ANOMALIES}"}
    assert env.bucket() == {S3_ENTITY}

    (retry,) = env.sync()  # the same batch, its events kept

    assert retry["upload"]["failed"] == [], retry["upload"]
    assert retry["batchId"] == batch_id and retry["status"] == "synced"
    assert retry["cleanup"]["skippedReason"] is None
    assert retry["cleanup"]["removedJobs"] == [f"{NS}.{ANOMALIES}"]
    assert retry["checks"] == CHECKS_ALL_PASSED
    assert env.store.get_batch(batch_id).status is BatchStatus.SYNCED
    assert env.jobs() == {f"{NS}.{KPI}"} and env.bucket() == set()


def test_a_failed_run_deletes_nothing_and_the_batch_is_synced_next_time(
    make_env, monkeypatch: pytest.MonkeyPatch
):
    """Guards: "The job makes no cleanup when: The run failed [...]" and "the events stay for the
    next run"."""
    env = make_env()
    env.post(snapshot())
    env.sync()
    batch_id = env.post(snapshot(with_anomalies=False))

    def broken(*_args: Any, **_kwargs: Any):
        raise RuntimeError("normalization crashed")

    with monkeypatch.context() as m:
        # the one step every graph goes through, normalized whole or reusing the last graph
        m.setattr("ol_dagster.sync.graph._build", broken)
        (line,) = env.sync()

    assert line["status"] == "run_failed"
    assert env.jobs() == {f"{NS}.{KPI}", f"{NS}.{ANOMALIES}"}
    assert env.bucket() == {S3_ENTITY}
    assert env.store.get_batch(batch_id).status is not BatchStatus.SYNCED

    (line,) = env.sync()
    assert line["batchId"] == batch_id and line["status"] == "synced"
    assert env.jobs() == {f"{NS}.{KPI}"}


def test_a_superseded_snapshot_is_neither_uploaded_nor_cleaned(make_env):
    """(issue) "SUPERSEDED (a snapshot older than one already synced: neither uploaded nor
    cleaned)": an older snapshot must not bring back what a newer one removed."""
    env = make_env()
    env.post(snapshot())
    env.sync()
    older = env.post(snapshot())  # still describes export_anomalies
    newer = env.post(snapshot(with_anomalies=False))
    # the newer batch is synced first (a sensor run; the older one is retried later)
    defs = env.defs()
    env.instance.add_dynamic_partitions("snap__batches", [str(older), str(newer)])
    result = defs.resolve_job_def("snap__sync").execute_in_process(
        instance=env.instance, partition_key=str(newer), run_config=QUIET
    )
    assert result.success
    assert env.jobs() == {f"{NS}.{KPI}"}

    (line,) = env.sync()

    assert line["batchId"] == older
    assert line["upload"]["skippedReason"] == "SUPERSEDED"
    assert line["upload"]["supersededBy"] == newer
    assert line["cleanup"]["skippedReason"] == "SUPERSEDED"
    assert line["cleanup"]["calls"] == []
    assert line["status"] == "synced"
    assert env.jobs() == {f"{NS}.{KPI}"}  # export_anomalies is not brought back
    assert env.bucket() == set()
