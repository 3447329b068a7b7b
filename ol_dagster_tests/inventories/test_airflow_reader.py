"""The Airflow inventory reader on the provider's real events (corpus, ``ct-airflow__*``).

Plain Python: no store, no catalog. What it trusts is what README and docs/deletion-rules.md say.
"""

from __future__ import annotations

import copy

import pytest

from ol_dagster.catalog.protocol import RetiresChildren
from ol_dagster.catalog.registry import catalog_kind, kind_names
from ol_dagster.lineage.inventories import READERS, read_inventories
from ol_dagster.lineage.inventories.airflow import read
from ol_dagster.settings import SyncDefinition
from ol_dagster_tests.inventories.airflow_events import corpus, dag_start


def test_the_providers_dag_start_is_read_as_the_dags_whole_task_list() -> None:
    inventory = read(corpus("ct-airflow__line_13.json"))  # gcs_hook, 9 tasks, a manual run
    assert inventory is not None
    assert inventory.partial is None
    assert inventory.parent == ("airflow", "gcs_hook") and inventory.namespace == "airflow"
    assert len(inventory.children) == 9
    # the names the provider gives the tasks' own jobs (corpus line 14 is one of them)
    task = corpus("ct-airflow__line_14.json")
    assert task["job"]["name"] in inventory.children
    assert task["run"]["facets"]["parent"]["job"]["name"] == inventory.parent[1]


@pytest.mark.parametrize(
    "name",
    ["ct-airflow__line_10.json", "ct-airflow__line_11.json", "ct-airflow__line_12.json"],
    ids=["task_start", "task_complete", "dag_complete"],
)
def test_events_without_a_task_list_hold_no_inventory(name: str) -> None:
    assert read(corpus(name)) is None


def test_only_a_start_carries_an_inventory() -> None:
    event = corpus("ct-airflow__line_09.json")
    event["eventType"] = "COMPLETE"
    assert read(event) is None


@pytest.mark.parametrize(
    ("run_type", "trusted"),
    [
        ("manual", True),
        ("scheduled", True),
        ("backfill", False),
        ("dataset_triggered", False),
        ("asset_triggered", False),
        (None, False),
    ],
)
def test_only_whole_scheduled_or_manual_runs_are_trusted(
    run_type: str | None, trusted: bool
) -> None:
    inventory = read(dag_start("d", ["a", "b"], run_type=run_type))  # type: ignore[arg-type]
    assert inventory is not None
    assert (inventory.partial is None) is trusted
    if not trusted:
        assert inventory.partial is not None and inventory.partial.startswith("PARTIAL_RUN")


def test_a_dag_run_whose_id_is_not_the_jobs_name_is_not_trusted() -> None:
    event = dag_start("d", ["a"])
    event["run"]["facets"]["airflowDagRun"]["dagRun"]["dag_id"] = "other"
    inventory = read(event)
    assert inventory is not None and inventory.partial is not None


def test_a_second_start_of_the_same_dag_run_is_a_rerun_not_an_inventory() -> None:
    first = dag_start("d", ["a", "b"], run_id="manual__1")
    again = copy.deepcopy(first)
    again["job"]["facets"]["airflow"]["tasks"].pop("b")
    other_run = dag_start("d", ["a"], run_id="manual__2")
    found = read_inventories([first, again, other_run], ["airflow"])
    assert [i.partial is None for i in found] == [True, False, True]


def test_readers_are_named_in_settings_and_off_by_default() -> None:
    base = {
        "name": "d",
        "uuid": "22222222-2222-4222-8222-222222222222",
        "catalog": "main",
        "receiver": {"token": {"env": "T"}},
    }
    assert SyncDefinition.model_validate(base).inventories == []
    assert SyncDefinition.model_validate({**base, "inventories": ["airflow"]}).inventories == [
        "airflow"
    ]
    with pytest.raises(ValueError, match=r"inventories.0: 'dagster' is not an inventory reader"):
        SyncDefinition.model_validate({**base, "inventories": ["dagster"]})
    assert sorted(READERS) == ["airflow"]


def test_only_the_embedded_catalog_retires_chosen_jobs_as_the_docs_say() -> None:
    """docs/deletion-rules.md: the other kinds warn INVENTORY_NOT_SUPPORTED and retire nothing
    (the kind's declaration is held to what its backend does when it opens)."""
    able = [n for n in kind_names() if RetiresChildren in catalog_kind(n).capabilities]
    assert able == ["embedded"]
