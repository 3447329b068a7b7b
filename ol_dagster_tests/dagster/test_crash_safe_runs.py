"""A sync killed at any step never blocks its definition: a real ``ol-dagster sync`` SIGKILLed
mid-upload and mid-cleanup, on the shipped local ``dagster.yaml``, then the next ``sync``, or the
definition's sensor and the run queue (its Dagster run, left STARTED, is failed at once).

The next sync proceeds at once on the same machine (the dead holder's process is gone: its lock
is passed over before its lease ends, which the tests check on the times the store recorded, not
on the wall clock) and the catalog ends right: every job of the snapshot there, exactly the ones
it no longer describes removed, and the reports (the next one's ``reconciled`` included) name
every removed job once."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster._core.definitions.repository_definition import SINGLETON_REPOSITORY_NAME
from dagster._core.remote_origin import (
    InProcessCodeLocationOrigin,
    RemoteJobOrigin,
    RemoteRepositoryOrigin,
)
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import (
    QueuedRunCoordinatorDaemon,
)

from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.definitions import build_defs
from ol_dagster.defs import constants as C
from ol_dagster.defs import names
from ol_dagster.defs.dead_runs import PROCESS_TAG
from ol_dagster.receiver.intake import sort_events
from ol_dagster.settings import load_settings
from ol_dagster.store import EventStore
from ol_dagster.store.holder import process_gone
from ol_dagster.sync.batch import sync_batch
from ol_dagster.sync.graph import batch_graph
from ol_dagster_tests.conftest import PROJECT_ROOT, events_of

JOBS = 1500
DROPPED = 600


@pytest.fixture
def project(write_settings, tokens, tmp_path: Path):
    # the cap raised: the second snapshot removes DROPPED jobs with their flows in one run
    path = write_settings(allowedJobNamespaces=["etl"], cleanup={"maxRemovalsPerRun": 100_000})
    settings = load_settings(path)
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(PROJECT_ROOT / "dagster.yaml", home / "dagster.yaml")  # the shipped instance
    store = EventStore(settings.store.url)
    catalog = EmbeddedCatalog(settings.catalogs["main"].url)
    yield {
        "path": str(path),
        "settings": settings,
        "home": home,
        "store": store,
        "catalog": catalog,
    }
    catalog.close()
    store.dispose()


def post(project: dict[str, Any], events: list[dict[str, Any]]) -> int:
    d = project["settings"].definition("snap")
    intake = sort_events(events, d.allowedJobNamespaces)
    return project["store"].add_posted_batch(
        "snap", intake.accepted, received=intake.received, snapshot=True
    )


def sync_command(project: dict[str, Any]) -> list[str]:
    return [sys.executable, "-m", "ol_dagster.commands.cli", "--settings", project["path"], "sync"]


def env_of(project: dict[str, Any]) -> dict[str, str]:
    return {**os.environ, "DAGSTER_HOME": str(project["home"])}


def kill_when(project: dict[str, Any], ready: Callable[[], bool]) -> None:
    """Start ``ol-dagster sync`` and SIGKILL it as soon as ``ready()`` (polled on the store)."""
    proc = subprocess.Popen(
        sync_command(project),
        cwd=PROJECT_ROOT,
        env=env_of(project),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    try:
        while not ready():
            assert proc.poll() is None, "the sync ended before the point it was to be killed at"
            assert time.monotonic() < deadline, "the sync never reached the point"
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL


def next_sync(project: dict[str, Any]) -> list[dict[str, Any]]:
    done = subprocess.run(
        sync_command(project),
        cwd=PROJECT_ROOT,
        env=env_of(project),
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert done.returncode == 0, (lines, done.stderr[-3000:])
    return lines


def started_runs(project: dict[str, Any]) -> list[dg.DagsterRun]:
    with dg.DagsterInstance.from_config(str(project["home"])) as instance:
        assert instance.run_monitoring_enabled  # the shipped dagster.yaml fails such runs
        return [
            r
            for r in instance.get_runs(
                filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED])
            )
        ]


def failure_of(project: dict[str, Any], run_id: str) -> str:
    """The status of a run and the message of its failure event."""
    with dg.DagsterInstance.from_config(str(project["home"])) as instance:
        run = instance.get_run_by_id(run_id)
        assert run is not None
        (failed,) = instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
        assert failed.dagster_event is not None
        return f"{run.status.value}: {failed.dagster_event.message}"


def killed_mid_upload(project: dict[str, Any], batch: int) -> dg.DagsterRun:
    """``ol-dagster sync`` SIGKILLed while it uploads ``batch``: its run, left STARTED."""
    store = project["store"]

    def uploading() -> bool:
        lock = store.sync_lock("snap")
        return lock is not None and store.get_batch(batch).upload_result is None

    kill_when(project, uploading)
    (killed,) = started_runs(project)  # nobody watches it: it stays STARTED
    assert killed.tags[C.DEFINITION_TAG] == "snap"
    assert process_gone(killed.tags[PROCESS_TAG])  # the sync tagged it with its process
    return killed


def test_a_sync_killed_mid_upload_does_not_block_the_next(project) -> None:
    store, catalog = project["store"], project["catalog"]
    jobs = events_of(JOBS, "etl")
    batch = post(project, jobs)

    killed = killed_mid_upload(project, batch)
    dead = store.sync_lock("snap")
    assert dead is not None  # the dead run's lock is still there, its lease not run out
    assert store.get_batch(batch).upload_result is None
    assert killed.run_id == dead.holder

    (line,) = next_sync(project)

    # the next sync failed the dead run first: it no longer holds the definition's run slot
    assert started_runs(project) == []
    assert failure_of(project, killed.run_id).startswith("FAILURE: ol-dagster: the process")

    assert line["batchId"] == batch and line["status"] == "synced"
    done = store.get_batch(batch)
    # taken over before the dead holder's lease ended: it did not wait for it
    assert done.cutoff is not None and done.cutoff < dead.expires_at
    assert store.sync_lock("snap") is None
    assert len(catalog.job_names()) == JOBS
    assert line["upload"]["succeeded"] and line["cleanup"]["skippedReason"] is None


def test_a_sync_killed_mid_cleanup_does_not_block_the_next_and_reports_every_removal(
    project,
) -> None:
    store, catalog, settings = project["store"], project["catalog"], project["settings"]
    d = settings.definition("snap")
    first = post(project, events_of(JOBS, "etl"))
    batch_graph(store, d, store.get_batch(first))
    sync_batch(store, catalog, d, first, run_id="first")
    assert len(catalog.job_names()) == JOBS
    kept = events_of(JOBS, "etl")[: JOBS - DROPPED]
    batch = post(project, kept)
    dropped = sorted(f"etl.job_{i}" for i in range(JOBS - DROPPED, JOBS))

    def cleaning() -> bool:  # the first real cleanup call of the run is journaled
        return any(e.run_id != "first" for e in store.journal("snap"))

    kill_when(project, cleaning)
    dead = store.sync_lock("snap")
    assert dead is not None
    assert store.get_batch(batch).cleanup_report is None

    (line,) = next_sync(project)

    assert line["batchId"] == batch and line["status"] == "synced"
    done = store.get_batch(batch)
    assert done.cutoff is not None and done.cutoff < dead.expires_at
    assert sorted(catalog.job_names()) == sorted(f"etl.job_{i}" for i in range(JOBS - DROPPED))
    # what the dead run removed (reconciled) and what this one removed: each dropped job once
    report = done.cleanup_report
    assert report is not None and report["skippedReason"] is None
    # the dead run's calls, made or cut short, are in this report
    assert {r["runId"] for r in report["reconciled"]} == {dead.holder}
    reconciled = [j for r in report["reconciled"] for j in r["removedJobs"]]
    assert sorted(reconciled + report["removedJobs"]) == dropped
    # the cleanup's summary in the Dagster UI shows them too, once, with the dead run's id
    with dg.DagsterInstance.from_config(str(project["home"])) as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey(["snap", "catalog_cleanup"]))
        assert event is not None and event.asset_materialization is not None
        summary = str(event.asset_materialization.metadata["summary"].value)
    earlier, _, own = summary.partition("**removed by earlier runs that died before their report**")
    assert dead.holder in own and dead.holder not in earlier
    they_removed = own.rpartition("**jobs they removed**: ")[2].split(", ")
    assert sorted(they_removed) == (sorted(reconciled) or ["none"])


def test_a_killed_sync_run_does_not_keep_the_sensor_runs_queued(project) -> None:
    """The killed run holds the definition's one run slot (``dagster.yaml`` tag limit): the run
    queue (Dagster's own dequeue pass) holds the sensor's run back, until the sensor's next tick
    fails the dead run; then the queue lets it start."""
    store, catalog, settings = project["store"], project["catalog"], project["settings"]
    d = settings.definition("snap")
    batch = post(project, events_of(JOBS, "etl"))
    killed = killed_mid_upload(project, batch)
    defs = build_defs(project["path"])

    with dg.DagsterInstance.from_config(str(project["home"])) as instance:
        # a run the sensor requested for the batch, waiting in the queue (as the daemon submits
        # it: with the origin of the code location it launches the run from)
        job = defs.resolve_job_def(names.job(d.name))
        location = InProcessCodeLocationOrigin(
            LoadableTargetOrigin(module_name="ol_dagster.definitions", attribute="defs"),
            location_name="ol_dagster",
        )
        queued = instance.create_run_for_job(
            job,
            status=dg.DagsterRunStatus.QUEUED,
            tags={C.DEFINITION_TAG: "snap", C.BATCH_TAG: str(batch)},
            remote_job_origin=RemoteJobOrigin(
                RemoteRepositoryOrigin(location, SINGLETON_REPOSITORY_NAME), job.name
            ),
        )

        def dequeued() -> set[str]:
            queue = QueuedRunCoordinatorDaemon(interval_seconds=5)
            runs = queue._get_runs_to_dequeue(instance, instance.get_concurrency_config(), None)
            return {r.run_id for r in runs}

        assert queued.run_id not in dequeued()  # held back by the dead run

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            sensor = defs.get_sensor_def(names.new_batches_sensor(d.name))
        context = dg.build_sensor_context(
            instance=instance,
            instance_ref=instance.get_ref(),
            definitions=defs,
            resources=defs.resources,
            sensor_name=names.new_batches_sensor(d.name),
        )
        with context:
            tick = sensor.evaluate_tick(context)

        assert [r.partition_key for r in tick.run_requests or []] == [str(batch)]
        failed = instance.get_run_by_id(killed.run_id)
        assert failed is not None and failed.status is dg.DagsterRunStatus.FAILURE
        assert (
            instance.get_runs(
                filters=dg.RunsFilter(
                    statuses=[dg.DagsterRunStatus.STARTED], tags={C.DEFINITION_TAG: "snap"}
                )
            )
            == []
        )
        assert queued.run_id in dequeued()  # the queue lets the sensor's run start

    # and the sync of the batch proceeds, the catalog right
    (line,) = next_sync(project)
    assert line["batchId"] == batch and line["status"] == "synced"
    assert len(catalog.job_names()) == JOBS
    assert store.sync_lock("snap") is None
