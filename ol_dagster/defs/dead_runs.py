"""Runs whose process is gone are failed, so that they never block their definition.

``ol-dagster sync`` executes each run in its own process (``execute_in_process``): no run
launcher started it, so nothing can answer Dagster's run monitoring about it, and a sync killed
outright (SIGKILL, OOM, a closed terminal) leaves its run STARTED until ``max_runtime_seconds``.
Meanwhile that run holds its definition's only slot (the ``ol_dagster/definition`` tag limit in
``dagster.yaml``) and the definition's sensor runs stay QUEUED.

So ``ol-dagster sync`` tags each run with its process (``store.holder``: boot, PID namespace, PID,
start time), and the definition's sensor at each tick and the next ``ol-dagster sync`` fail the
definition's unfinished runs whose tagged process is gone on this machine. A run without the tag
(launched by the daemon: its run worker is watched by the run launcher) or tagged on another
machine is left to run monitoring. Such a run's hooks never sent its FAIL: the caller's ``report``
sends it (``defs.run_lineage.report_failed_run``) before the run is marked failed, so that a crash
between the two leaves FAIL sent and the run still to fail, never the run failed with FAIL unsent.
"""

from __future__ import annotations

from collections.abc import Callable

import dagster as dg

from ol_dagster.defs import constants as C
from ol_dagster.store.holder import process_gone, this_process

# ``<boot id>:<pid namespace>:<pid>:<start time>`` of the process that executes the run
PROCESS_TAG = "ol_dagster/process"

# unfinished: NOT_STARTED (killed before its first step), STARTING, STARTED, CANCELING
_UNFINISHED = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def process_tags() -> dict[str, str]:
    """The tag naming this process, for a run executed in it (empty where it cannot be told)."""
    process = this_process()
    return {PROCESS_TAG: process} if process else {}


def fail_dead_runs(
    instance: dg.DagsterInstance,
    definition: str,
    *,
    report: Callable[[str, str], object] | None = None,
) -> list[str]:
    """Fail the definition's unfinished runs whose process is gone on this machine; returns their
    run ids. ``report(run_id, reason)`` is called for each first (its OpenLineage FAIL)."""
    runs = instance.get_runs(
        filters=dg.RunsFilter(statuses=_UNFINISHED, tags={C.DEFINITION_TAG: definition})
    )
    failed = []
    for run in runs:
        process = run.tags.get(PROCESS_TAG)
        if not process_gone(process):
            continue
        current = instance.get_run_by_id(run.run_id)
        if current is None or current.status not in _UNFINISHED:
            continue  # failed meanwhile by another sync or sensor tick: once is enough
        pid = process.split(":")[-2] if process else "?"
        message = (
            f"ol-dagster: the process that executed this run (PID {pid} on this machine) is "
            f"gone: it was killed or crashed. The run is marked failed so that the next runs "
            f"of definition {definition!r} can start; its batch is synced again."
        )
        if report is not None:
            report(run.run_id, message)
        instance.report_run_failed(run, message=message)
        failed.append(run.run_id)
    return failed
