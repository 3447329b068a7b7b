"""Producer inventories through the real sync path, on the embedded catalog (SQLite).

A DAG with three tasks is synced from Airflow provider-shaped events (``airflow_events``); then a
START of the DAG lists two: the third task's job is retired at that sync, with reason
``NOT_IN_INVENTORY``, through every guard of the cleanup. Each test says what a user would see:
the catalog's jobs and flows, and the cleanup report.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.defs.report import cleanup_markdown
from ol_dagster.settings import SyncDefinition
from ol_dagster.store import EventStore
from ol_dagster.sync.reports import CleanupReport
from ol_dagster_tests.inventories.airflow_events import dag_start, table, task_run
from ol_dagster_tests.safety.test_cleanup_rules import Harness, flows, jobs

DAG = "shop_daily"
TASKS = ["extract", "transform", "export"]


def airflow_definition(**overrides: Any) -> SyncDefinition:
    data: dict[str, Any] = {
        "name": "airflow_prod",
        "uuid": "22222222-2222-4222-8222-222222222222",
        "catalog": "main",
        "allowedJobNamespaces": ["airflow"],
        "receiver": {"token": {"env": "OL_TEST_TOKEN_AIRFLOW"}},
        "inventories": ["airflow"],
    }
    data.update(overrides)
    return SyncDefinition.model_validate(data)


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    catalog = EmbeddedCatalog(f"sqlite:///{tmp_path / 'catalog.db'}")
    store = EventStore(f"sqlite:///{tmp_path / 'store.db'}")
    yield Harness(catalog, store)
    store.dispose()
    catalog.close()


def dag_run(tasks: list[str], **start: Any) -> list[dict[str, Any]]:
    """A DAG run as the provider sends it: the DAG's START, then each task's run."""
    return [
        dag_start(DAG, tasks, **start),
        *(task_run(DAG, t, inputs=[table(f"{t}_in")], outputs=[table(f"{t}_out")]) for t in tasks),
    ]


def first_sync(h: Harness, d: SyncDefinition) -> None:
    report = h.sync(d, dag_run(TASKS), stream=True)
    assert report["skippedReason"] in (None, "DRY_RUN")
    assert {f"airflow.{DAG}.{t}" for t in TASKS} <= jobs(h.catalog)


def test_a_task_the_dag_no_longer_lists_is_retired_and_nothing_else_moves(h: Harness) -> None:
    retire_one_task(h)


def test_the_retirement_on_each_database(catalog: EmbeddedCatalog, tmp_path: Path) -> None:
    """The same on the embedded catalog of the suite's databases (SQLite, PostgreSQL)."""
    store = EventStore(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        retire_one_task(Harness(catalog, store))
    finally:
        store.dispose()


def retire_one_task(h: Harness) -> None:
    d = airflow_definition()
    first_sync(h, d)
    before_jobs, before_flows = jobs(h.catalog), flows(h.catalog)

    report = h.sync(d, [dag_start(DAG, ["extract", "transform"])], stream=True)

    gone = f"airflow.{DAG}.export"
    assert report["skippedReason"] is None
    assert report["retired"] == [
        {"job": gone, "parent": f"airflow.{DAG}", "reader": "airflow", "reason": "NOT_IN_INVENTORY"}
    ]
    assert report["removedJobs"] == [gone]
    assert jobs(h.catalog) == before_jobs - {gone}
    # its data flow and its link to the DAG went with it; every other flow stayed
    assert flows(h.catalog) == {f for f in before_flows if "export" not in f[0]}
    assert report["ownership"]["inventories"][0]["children"] == [
        f"{DAG}.extract",
        f"{DAG}.transform",
    ]


@pytest.mark.parametrize(
    "start",
    [{"run_type": "backfill"}, {"run_type": "asset_triggered"}, {"run_type": None}],
    ids=["backfill", "asset_triggered", "no_run_type"],
)
def test_a_partial_run_never_retires(h: Harness, start: dict[str, Any]) -> None:
    d = airflow_definition()
    first_sync(h, d)
    before = jobs(h.catalog)

    report = h.sync(d, [dag_start(DAG, ["extract"], **start)], stream=True)

    assert jobs(h.catalog) == before
    assert "retired" not in report
    assert {"what": f"inventory:airflow|{DAG}", "reason": "PARTIAL_RUN"} in report["ownership"][
        "skipped"
    ]


def test_a_cleared_dag_run_starting_again_never_retires(h: Harness) -> None:
    """A DAG run whose tasks were cleared starts again: its second START is not a whole run."""
    d = airflow_definition()
    first_sync(h, d)
    before = jobs(h.catalog)
    again = "scheduled__2026-12-01T00:00:00+00:00"
    starts = [
        dag_start(DAG, TASKS, run_type="scheduled", run_id=again),
        dag_start(DAG, ["extract"], run_type="scheduled", run_id=again),
    ]

    report = h.sync(d, starts, stream=True)

    assert jobs(h.catalog) == before
    assert "retired" not in report


def test_a_dry_run_reports_the_retirement_without_removing(h: Harness) -> None:
    d = airflow_definition(outputOptions={"dryRun": True})
    first_sync(h, d)
    before = jobs(h.catalog)

    report = h.sync(d, [dag_start(DAG, ["extract", "transform"])], stream=True)

    assert report["skippedReason"] == "DRY_RUN"
    assert jobs(h.catalog) == before
    (call,) = [c for c in report["calls"] if c["target"] == "retireJobs"]
    assert call["reason"] == "NOT_IN_INVENTORY"
    assert call["jobs"] == [f"airflow.{DAG}.export"]
    assert call["dryRun"] is not None and call["dryRun"]["physicalEntities"] == 1
    assert call["real"] is None
    # the cleanup's materialization says it in one line
    assert (
        f"**NOT_IN_INVENTORY** (airflow list of airflow.{DAG}, planned, not retired): "
        f"airflow.{DAG}.export" in cleanup_markdown(cast(CleanupReport, report))
    )


def test_the_removal_cap_holds(h: Harness) -> None:
    d = airflow_definition()
    first_sync(h, d)
    before = jobs(h.catalog)

    report = h.sync(d, [dag_start(DAG, ["extract"])], stream=True, max_removals=1)

    assert report["skippedReason"] == "REMOVAL_CAP_EXCEEDED"
    assert jobs(h.catalog) == before


def test_the_share_holds(h: Harness) -> None:
    """Two of three tasks would go (with the DAG, 2 of 4 jobs): above a share of 0.4."""
    d = airflow_definition()
    first_sync(h, d)
    before = jobs(h.catalog)

    report = h.sync(d, [dag_start(DAG, ["extract"])], stream=True, max_share=0.4)

    assert report["skippedReason"] == "REMOVAL_SHARE_EXCEEDED"
    assert jobs(h.catalog) == before


def test_inventories_off_retire_nothing(h: Harness) -> None:
    d = airflow_definition(inventories=[])
    first_sync(h, d)
    before = jobs(h.catalog)

    report = h.sync(d, [dag_start(DAG, ["extract"])], stream=True)

    assert jobs(h.catalog) == before
    assert "retired" not in report and "inventories" not in report["ownership"]


def test_children_in_a_namespace_of_another_definition_are_never_retired(h: Harness) -> None:
    """A dbt job of another definition whose parent is the DAG: not in the list, and kept."""
    d = airflow_definition()
    dbt = airflow_definition(
        name="dbt_prod",
        uuid=str(uuid.UUID(int=7)),
        allowedJobNamespaces=["dbt"],
        receiver={"token": {"env": "OL_TEST_TOKEN_DBT"}},
        inventories=[],
    )
    first_sync(h, d)
    h.sync(dbt, [task_run(DAG, "orders", job_namespace="dbt", outputs=[table("orders")])])
    assert f"dbt.{DAG}.orders" in jobs(h.catalog)

    report = h.sync(d, [dag_start(DAG, TASKS)], stream=True)

    assert f"dbt.{DAG}.orders" in jobs(h.catalog)
    assert "retired" not in report


def test_a_task_described_in_the_same_batch_is_never_retired(h: Harness) -> None:
    """The list says two tasks, but the batch also runs the third: the producer described it."""
    d = airflow_definition()
    first_sync(h, d)
    before = jobs(h.catalog)

    report = h.sync(
        d, [dag_start(DAG, ["extract", "transform"]), task_run(DAG, "export")], stream=True
    )

    assert jobs(h.catalog) == before
    assert "retired" not in report
