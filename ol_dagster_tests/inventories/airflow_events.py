"""Airflow provider-shaped events for the inventory tests, built on the corpus's real DAG START.

``ct-airflow__line_09.json`` (OpenLineage compatibility tests, Apache-2.0, see
``ol_dagster_tests/corpus/PROVENANCE.md``) is a DAG START of ``apache-airflow-providers-
openlineage`` 1.14.0: job facet ``airflow`` with ``tasks``, run facet ``airflowDagRun``. The
events here are that event with the DAG's tasks, run type and times changed, and task events
shaped like the corpus's ``ct-airflow__line_10.json`` (a task's START with its ``parent`` facet).
"""

from __future__ import annotations

import copy
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "events" / "airflow"


def corpus(name: str) -> dict[str, Any]:
    return json.loads((CORPUS / name).read_text(encoding="utf-8"))


def _now() -> str:
    return datetime.now(UTC).isoformat()


def dag_start(
    dag: str,
    tasks: list[str],
    *,
    namespace: str = "airflow",
    run_type: str = "manual",
    run_id: str | None = None,
) -> dict[str, Any]:
    """The corpus's DAG START, for DAG ``dag`` with ``tasks`` (task ids)."""
    event = copy.deepcopy(corpus("ct-airflow__line_09.json"))
    template = event["job"]["facets"]["airflow"]["tasks"]["task_0"]
    event["job"]["namespace"], event["job"]["name"] = namespace, dag
    event["job"]["facets"]["airflow"]["tasks"] = {t: {**template, "ui_label": t} for t in tasks}
    event["eventTime"] = _now()
    event["run"]["runId"] = str(uuid.uuid4())
    dag_run = event["run"]["facets"]["airflowDagRun"]
    dag_run["dag"]["dag_id"] = dag
    dag_run["dagRun"].update(
        dag_id=dag, run_type=run_type, run_id=run_id or f"{run_type}__{event['eventTime']}"
    )
    return event


def task_run(
    dag: str,
    task: str,
    *,
    namespace: str = "airflow",
    job_namespace: str | None = None,
    inputs: list[dict[str, Any]] = (),  # type: ignore[assignment]
    outputs: list[dict[str, Any]] = (),  # type: ignore[assignment]
) -> dict[str, Any]:
    """A task's COMPLETE, shaped like the corpus's task events: job ``<dag>.<task>`` whose
    ``parent`` facet names the DAG's job in ``namespace``."""
    event = copy.deepcopy(corpus("ct-airflow__line_11.json"))
    event["eventTime"] = _now()
    event["job"] = {"namespace": job_namespace or namespace, "name": f"{dag}.{task}", "facets": {}}
    event["run"]["runId"] = str(uuid.uuid4())
    event["run"]["facets"] = {
        "parent": {
            "run": {"runId": str(uuid.uuid4())},
            "job": {"namespace": namespace, "name": dag},
        }
    }
    event["inputs"], event["outputs"] = list(inputs), list(outputs)
    return event


def table(name: str) -> dict[str, Any]:
    return {"namespace": "postgres://db:5432", "name": f"shop.public.{name}", "facets": {}}
