"""The sync job's executor: Dagster's in-process executor, in a process that runs one sync.

A run the sensor or the UI launches gets a process of its own (Dagster's run worker), which runs
the sync's steps one after another and ends. Like ``ol-dagster sync``, it has no use for full
garbage collections walking the graph and the catalog rows the sync keeps alive
(``gcpause.one_sync_process``). ``execute_in_process`` (``ol-dagster sync``, tests) puts
Dagster's own executor in this one's place, so this one only starts in a run's own process.
"""

from __future__ import annotations

import dagster as dg

from ol_dagster.gcpause import one_sync_process


def _in_one_sync_process(init_context: dg.InitExecutorContext) -> dg.Executor:
    one_sync_process()
    create = dg.in_process_executor.executor_creation_fn
    assert create is not None  # Dagster's in-process executor is made by a function
    return create(init_context)


# Dagster's name and settings: a run's ``execution: in_process:`` configuration is unchanged
sync_executor = dg.ExecutorDefinition(
    name=dg.in_process_executor.name,
    config_schema=dg.in_process_executor.config_schema.as_field(),
    executor_creation_fn=_in_one_sync_process,
    description="Runs the sync's steps one after another in the run's own process.",
)
