"""A launched sync run does not walk what it keeps alive in full garbage collections.

The sensor's and the UI's runs each get a process of their own (Dagster's run worker) that runs
the sync's steps and ends; the graph and the catalog rows a sync holds would be walked by the
collector's full collections two or three times a 10,000-job sync, to free nothing. The job's
executor says so to the collector; ``execute_in_process`` (``ol-dagster sync``, the tests) runs
Dagster's own executor instead and leaves the process's collector as it was.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ol_dagster_tests.conftest import PROJECT_ROOT

# a job on the sync's executor whose one step keeps half a million objects, as a sync keeps its
# graph and rows, and reports how many full collections walked them
JOB = """
import gc
import dagster as dg
from ol_dagster.defs.executor import sync_executor

@dg.asset
def keeps() -> dg.MaterializeResult:
    full = []
    count = lambda phase, info: phase == "stop" and info["generation"] == 2 and full.append(1)
    gc.callbacks.append(count)
    kept = [[i] for i in range(500_000)]
    gc.callbacks.remove(count)
    return dg.MaterializeResult(metadata={"full": len(full), "kept": len(kept)})

job = dg.define_asset_job("sync", executor_def=sync_executor)
defs = dg.Definitions(assets=[keeps], jobs=[job])

def sync_job():
    return defs.resolve_job_def("sync")
"""

RUN = """
import json, sys
import dagster as dg
import keeping

def full(result):
    (m,) = [e.materialization for e in result.get_asset_materialization_events()]
    return m.metadata["full"].value

# first as tests and ``ol-dagster sync`` run it, then as a run worker does (the job's executor)
in_process = full(keeping.sync_job().execute_in_process())
with dg.DagsterInstance.ephemeral() as instance:
    launched = full(dg.execute_job(dg.reconstructable(keeping.sync_job), instance))
print(json.dumps([in_process, launched]))
"""


def test_a_launched_sync_run_walks_no_full_collections(tmp_path: Path) -> None:
    (tmp_path / "keeping.py").write_text(JOB)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(PROJECT_ROOT)])}

    done = subprocess.run(
        [sys.executable, "-c", RUN], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    in_process, launched = json.loads(done.stdout.splitlines()[-1])
    assert in_process >= 2  # the collector's defaults, left alone in a process that goes on
    assert launched == 0
