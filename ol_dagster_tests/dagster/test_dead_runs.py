"""``defs.dead_runs``: a definition's unfinished runs whose process is gone are failed, and only
those: a live process's run, a run of another machine, one without the tag, another definition's,
a finished one are left alone (a real process, started and ended, stands for the killed sync)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import dagster as dg
import pytest
from dagster._core.test_utils import create_run_for_test

from ol_dagster.defs import constants as C
from ol_dagster.defs.dead_runs import PROCESS_TAG, fail_dead_runs, process_tags
from ol_dagster.store.holder import this_process

pytestmark = pytest.mark.skipif(this_process() is None, reason="needs Linux /proc")


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


def ended_process() -> str:
    """The identity a real process recorded for itself, once it has ended."""
    code = "from ol_dagster.store.holder import this_process; print(this_process())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def run(
    instance: dg.DagsterInstance,
    process: str | None,
    *,
    definition: str = "snap",
    status: dg.DagsterRunStatus = dg.DagsterRunStatus.STARTED,
) -> str:
    tags = {C.DEFINITION_TAG: definition, **({PROCESS_TAG: process} if process else {})}
    r = create_run_for_test(instance, job_name=f"{definition}__sync", status=status, tags=tags)
    return r.run_id


def status(instance: dg.DagsterInstance, run_id: str) -> dg.DagsterRunStatus:
    r = instance.get_run_by_id(run_id)
    assert r is not None
    return r.status


def test_only_the_definitions_unfinished_runs_of_a_gone_process_are_failed(instance) -> None:
    gone = ended_process()  # <boot id>:<pid namespace>:<pid>:<start time>
    started = run(instance, gone)
    starting = run(instance, gone, status=dg.DagsterRunStatus.NOT_STARTED)
    alive = run(instance, process_tags()[PROCESS_TAG])
    elsewhere = run(instance, "another-boot:4026531836:" + gone.split(":", 2)[2])
    untagged = run(instance, None)
    other_definition = run(instance, gone, definition="add")
    finished = run(instance, gone, status=dg.DagsterRunStatus.SUCCESS)

    assert sorted(fail_dead_runs(instance, "snap")) == sorted([started, starting])

    for run_id in (started, starting):
        assert status(instance, run_id) is dg.DagsterRunStatus.FAILURE
        (event,) = instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
        assert event.dagster_event is not None
        message = event.dagster_event.message or ""
        assert f"PID {gone.split(':')[-2]} on this machine" in message and "'snap'" in message
    assert status(instance, alive) is dg.DagsterRunStatus.STARTED
    assert status(instance, elsewhere) is dg.DagsterRunStatus.STARTED
    assert status(instance, untagged) is dg.DagsterRunStatus.STARTED
    assert status(instance, other_definition) is dg.DagsterRunStatus.STARTED
    assert status(instance, finished) is dg.DagsterRunStatus.SUCCESS
    # once: the next sync or tick finds nothing more to fail
    assert fail_dead_runs(instance, "snap") == []
    assert len(instance.all_logs(started, of_type=dg.DagsterEventType.RUN_FAILURE)) == 1
