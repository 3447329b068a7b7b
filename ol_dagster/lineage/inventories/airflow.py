"""The Airflow provider's task list: job facet ``airflow``, key ``tasks``, on a DAG run's START.

``apache-airflow-providers-openlineage`` sends, when a DAG run starts, an event for the DAG's job
(namespace: the provider's ``namespace``, name: the DAG id) whose job facet ``airflow`` holds
``tasks``: one entry per task of the DAG the run was created from, keyed by task id. Each task
runs as its own job, ``<dag_id>.<task_id>``, whose ``parent`` run facet names the DAG's job.

The list is the DAG's whole task list only for a whole DAG run, so it is trusted only when:

* the event is a ``START`` whose ``airflow.tasks`` is an object naming at least one task;
* its run facet ``airflowDagRun.dagRun.run_type`` is ``scheduled`` or ``manual`` (a ``backfill``,
  an asset- or dataset-triggered run, or a run without a type is partial here);
* ``airflowDagRun.dagRun.dag_id`` is the job's name (the children are named after it);
* it is the first START of that DAG run (``dagRun.run_id``) among the events read together: the
  provider sends a START again when cleared tasks re-run a DAG run.

Anything else with a task list is returned as partial, with the reason, and retires nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ol_dagster.lineage.inventories.base import Inventory

NAME = "airflow"
WHOLE_RUN_TYPES = frozenset({"scheduled", "manual"})
RERUN = "PARTIAL_RUN: a START of this DAG run came before (cleared tasks re-run)"


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def read(event: Mapping[str, Any]) -> Inventory | None:
    """The DAG's task list, if this event carries one; None for any other event."""
    if event.get("eventType") != "START":
        return None
    tasks = _get(event, "job", "facets", NAME, "tasks")
    namespace, name = _get(event, "job", "namespace"), _get(event, "job", "name")
    if not isinstance(tasks, Mapping) or not tasks:
        return None
    if not isinstance(namespace, str) or not isinstance(name, str):
        return None
    dag_run = _get(event, "run", "facets", "airflowDagRun", "dagRun")
    run_type = _get(dag_run, "run_type")
    run_id = _get(dag_run, "run_id")
    partial = None
    if run_type not in WHOLE_RUN_TYPES:
        partial = f"PARTIAL_RUN: run_type {run_type!r} is not a whole scheduled or manual run"
    elif _get(dag_run, "dag_id") != name:
        partial = "PARTIAL_RUN: airflowDagRun.dagRun.dag_id is not the job's name"
    return Inventory(
        reader=NAME,
        parent=(namespace, name),
        namespace=namespace,
        children=frozenset(f"{name}.{task_id}" for task_id in tasks),
        time=str(event.get("eventTime", "")),
        run=run_id if isinstance(run_id, str) else None,
        partial=partial,
    )
