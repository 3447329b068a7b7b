"""Airflow with its OpenLineage provider, for real: a three-task DAG, then the same DAG less a task.

``airflow dags test`` sends no DAG run START (only the scheduler's start of a run does, and that
START alone carries the DAG's task list, the ``airflow`` job facet's ``tasks``), so the test runs
``airflow standalone`` (scheduler, DAG processor, API server, triggerer on SQLite, on loopback
ports of its own) and triggers the DAG from the command line, as a user would. After each run the
definition syncs; the catalog holds the DAG's job as parent of each task's job.

Slow (a venv with Airflow, about a minute and a half from a warm pip cache; Airflow's start and
two DAG runs, three to five minutes on two busy cores): marked ``producers``, run by
``make test-producers``, not by ``make test``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest

from ol_dagster_tests.producers.harness import (
    TOKEN,
    Producer,
    free_port,
    jobs,
    producer_venv,
    receiver,
    stored_events,
    sync,
    synced_state,
    write_settings,
)

pytestmark = [pytest.mark.producers, pytest.mark.timeout(1800)]

NAMESPACE = "shop_airflow"
DAG_ID = "shop_orders"
REQUIREMENTS = ["apache-airflow", "apache-airflow-providers-openlineage"]
DAG_FILE = """
from datetime import datetime

from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG

with DAG("{dag_id}", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):
    previous = None
    for name in {tasks!r}:
        task = BashOperator(task_id=name, bash_command=f"echo {{name}}")
        if previous is not None:
            previous >> task
        previous = task
"""


# run by Airflow's own Python: the task ids of the DAG version a trigger would run
SERIALIZED_TASKS = """
import sys
from airflow.models.serialized_dag import SerializedDagModel
from airflow.utils.session import create_session
with create_session() as session:
    model = SerializedDagModel.get(sys.argv[1], session=session)
    print(" ".join(model.dag.task_ids) if model is not None else "")
"""


class Airflow:
    """An Airflow home in ``directory`` whose OpenLineage events go to ``url``."""

    def __init__(self, producer: Producer, directory: Path, url: str) -> None:
        self.bin = producer.bin
        self.dags = directory / "dags"
        self.dags.mkdir(parents=True)
        self.api_port = free_port()
        transport = f'{{"type": "http", "url": "{url}", "auth": {{"type": "api_key", '
        transport += f'"apiKey": "{TOKEN}"}}}}'
        self.env = {
            **os.environ,
            "PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}",
            "AIRFLOW_HOME": str(directory / "home"),
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__PARALLELISM": "2",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.api_port),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{self.api_port}/execution/",
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "AIRFLOW__OPENLINEAGE__NAMESPACE": NAMESPACE,
            "AIRFLOW__OPENLINEAGE__TRANSPORT": transport,
        }
        self.log = directory / "airflow.log"

    def run(self, *args: str) -> str:
        done = subprocess.run(
            [str(self.bin / "airflow"), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-3000:])
        return done.stdout

    def write_dag(self, tasks: list[str]) -> None:
        """The DAG file with these tasks in a line, parsed into Airflow's database; returns once
        the DAG a trigger runs (the latest one Airflow serialized) has them. With Airflow
        running, ``reserialize`` may leave the earlier version the latest until its DAG
        processor stores the new one, and a run triggered before would list the old tasks."""
        (self.dags / "shop_dag.py").write_text(DAG_FILE.format(dag_id=DAG_ID, tasks=tasks))
        self.run("dags", "reserialize")
        deadline = time.monotonic() + 180
        while (found := self.serialized_tasks()) != set(tasks):
            assert time.monotonic() < deadline, (found, self.log.read_text()[-4000:])
            time.sleep(1)

    def serialized_tasks(self) -> set[str]:
        """The tasks of the latest version of the DAG in Airflow's database."""
        done = subprocess.run(
            [str(self.bin / "python"), "-c", SERIALIZED_TASKS, DAG_ID],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return set(done.stdout.split())

    @contextmanager
    def standalone(self) -> Iterator[None]:
        """``airflow standalone`` until the block ends, its whole process group ended then."""
        with self.log.open("ab") as log:
            proc = subprocess.Popen(
                [str(self.bin / "airflow"), "standalone"],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            health = f"http://127.0.0.1:{self.api_port}/api/v2/monitor/health"
            deadline = time.monotonic() + 300
            while not _answers(health):
                assert proc.poll() is None, self.log.read_text()[-4000:]
                assert time.monotonic() < deadline, self.log.read_text()[-4000:]
                time.sleep(2)
            yield
        finally:
            for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=wait)
                    time.sleep(2)  # its workers leave after it
                except subprocess.TimeoutExpired:
                    continue
            with suppress(ProcessLookupError):  # workers that outlived the group's leader
                os.killpg(proc.pid, signal.SIGKILL)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def dag_runs(settings: Path, event_type: str) -> list[dict[str, Any]]:
    """The DAG's own events of this type (not its tasks'), by event time."""
    found = [
        e
        for e in stored_events(settings)
        if e["job"]["name"] == DAG_ID and e["eventType"] == event_type
    ]
    return sorted(found, key=lambda e: e["eventTime"])


def run_dag(airflow: Airflow, settings: Path, runs_before: int) -> None:
    """Trigger the DAG and wait for its run's COMPLETE at the receiver."""
    airflow.run("dags", "trigger", DAG_ID)
    deadline = time.monotonic() + 600
    while len(dag_runs(settings, "COMPLETE")) <= runs_before:
        failed = dag_runs(settings, "FAIL")
        assert not failed, failed[-1]["run"]["facets"].get("errorMessage")
        assert time.monotonic() < deadline, airflow.log.read_text()[-4000:]
        time.sleep(3)


def dag_tasks(start: dict[str, Any]) -> set[str]:
    """The tasks a DAG run START lists (the ``airflow`` job facet)."""
    return set(start["job"]["facets"]["airflow"]["tasks"])


def test_a_dag_then_the_dag_with_a_task_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    producer = producer_venv("airflow", REQUIREMENTS)
    print(f"airflow venv installed in {producer.install_seconds:.0f} s (0: already there)")
    settings = write_settings(tmp_path, "shop", [NAMESPACE], inventories=["airflow"])
    with receiver(settings, monkeypatch) as served:
        airflow = Airflow(producer, tmp_path / "airflow", served.url)
        airflow.run("db", "migrate")
        airflow.write_dag(["extract", "transform", "load"])
        with airflow.standalone():
            run_dag(airflow, settings, 0)
            first = sync(settings, "shop")
            state = synced_state(settings, "shop")

            airflow.write_dag(["extract", "transform"])
            run_dag(airflow, settings, 1)
            second = sync(settings, "shop")
            after = synced_state(settings, "shop")

    starts = dag_runs(settings, "START")
    for event in starts + dag_runs(settings, "COMPLETE"):  # shown with -s: what Airflow sent
        facets = event["run"]["facets"]
        print(event["eventType"], sorted(event["job"]["facets"]), sorted(facets))
        print("  dagRun:", json.dumps(facets["airflowDagRun"]["dagRun"], sort_keys=True))
        print("  tasksState:", facets.get("airflowState", {}).get("tasksState"))
    assert [dag_tasks(s) for s in starts] == [
        {"extract", "transform", "load"},
        {"extract", "transform"},
    ]
    for start in starts:  # a whole run, started by a user: what a partial run would differ in
        run = start["run"]["facets"]["airflowDagRun"]["dagRun"]
        assert (run["run_type"], run["clear_number"]) == ("manual", 0)
    tasks = {f"{DAG_ID}.{t}" for t in ("extract", "transform", "load")}
    assert first["status"] == "synced" and all(first["checks"].values()), first["checks"]
    assert set(jobs(state)) == {DAG_ID, *tasks}
    assert sorted(state["parents"]) == sorted([[NAMESPACE, DAG_ID], [NAMESPACE, t]] for t in tasks)
    assert second["status"] == "synced" and all(second["checks"].values()), second["checks"]
    assert set(second["upload"]["graph"]["jobs"]) == {
        f"{NAMESPACE}.{j}" for j in (DAG_ID, f"{DAG_ID}.extract", f"{DAG_ID}.transform")
    }
    # the DAG run's START no longer lists `load`: its job is retired, and nothing else moves
    gone = f"{NAMESPACE}.{DAG_ID}.load"
    assert second["cleanup"]["retired"] == [
        {
            "job": gone,
            "parent": f"{NAMESPACE}.{DAG_ID}",
            "reader": "airflow",
            "reason": "NOT_IN_INVENTORY",
        }
    ], second["cleanup"]
    assert second["cleanup"]["removedJobs"] == [gone]
    assert set(jobs(after)) == {DAG_ID, f"{DAG_ID}.extract", f"{DAG_ID}.transform"}
    assert sorted(after["parents"]) == sorted(
        [[NAMESPACE, DAG_ID], [NAMESPACE, t]] for t in tasks - {f"{DAG_ID}.load"}
    )
