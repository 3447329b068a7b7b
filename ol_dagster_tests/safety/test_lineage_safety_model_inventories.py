"""Producer inventories against the independent reference model (``model.inventory``).

Random sequences of Airflow DAG runs, streamed event by event through the receiver's intake and
synced (``sync.batch``, the embedded catalog on SQLite), beside the model written from the docs
alone; after each sync the catalog and the report must be the model's (``Driver.check``,
``check_report``). Three definitions share the catalog: ``orch`` writes the DAGs and their tasks
(namespace ``airflow``, and Spark jobs its DAGs run in ``spark``; inventories on or off, dry
run, caps and shares drawn), ``dbt`` writes jobs whose parent is a DAG (namespace ``dbt``, names
that look like the DAG's tasks, inventories on), ``look`` writes the look-alike namespace
``Airflow`` with a DAG of the same name and children of both DAGs (inventories off). DAG STARTs
list all tasks but one, with whole and partial run types and DAG runs started twice (cleared
tasks). What must hold: a partial run never retires, and
only the owner's children in the list's namespace ever are.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from ol_dagster_tests.model.generate import WAREHOUSE
from ol_dagster_tests.model.reference import Dataset, DefinitionSpec, Event
from ol_dagster_tests.safety.test_lineage_safety_model import Driver, Env

DAGS = ("dag", "dag", "dag2")
TASKS = ("t1", "t2", "t3")
# whole runs more often than partial ones, so that lists retire something now and then
RUN_TYPES = ("manual", "scheduled", "manual", "scheduled", "backfill", "asset_triggered", None)
DAG_RUNS = ("manual__1", "manual__2", "manual__3", "scheduled__1", "scheduled__2")
DROPS = ("t1", "t2", "t3", None)  # the task a DAG's list leaves out (None: none)
EXAMPLES = 12
STEPS = 5


def universe(inventories: bool, dry_run: bool, cap: int, share: float) -> tuple:
    return (
        DefinitionSpec(
            name="orch",
            uuid="5a5a5a5a-0000-4000-8000-000000000001",
            snapshot=False,
            replace_jobs=False,
            allowed=("airflow", "spark"),
            job_system="orch_jobs",
            dry_run=dry_run,
            max_removals=cap,
            max_share=share,
            inventories=("airflow",) if inventories else (),
        ),
        DefinitionSpec(
            name="dbt",
            uuid="5a5a5a5a-0000-4000-8000-000000000002",
            snapshot=False,
            replace_jobs=False,
            allowed=("dbt",),
            job_system="dbt_jobs",
            inventories=("airflow",),
        ),
        DefinitionSpec(
            name="look",
            uuid="5a5a5a5a-0000-4000-8000-000000000003",
            snapshot=False,
            replace_jobs=False,
            allowed=("Airflow",),
            job_system="look_jobs",
        ),
    )


NAMESPACE = {"orch": "airflow", "dbt": "dbt", "look": "Airflow"}


class InventoryMachine(RuleBasedStateMachine):
    env: ClassVar[Env]

    def __init__(self) -> None:
        super().__init__()
        self.env.reset()
        self.driver: Driver | None = None
        self.serial = itertools.count(1)

    @initialize(
        inventories=st.sampled_from([True, True, True, False]),
        dry_run=st.sampled_from([False, False, False, True]),
        cap=st.sampled_from([500, 500, 3]),
        share=st.sampled_from([1.0, 1.0, 0.5]),
    )
    def setup(self, inventories: bool, dry_run: bool, cap: int, share: float) -> None:
        self.driver = Driver(self.env, universe(inventories, dry_run, cap, share))
        # every sequence starts from a synced DAG run with its three tasks, and children of the
        # DAG in the other two definitions: each list drawn afterwards has something to judge
        for name in ("orch", "dbt", "look"):
            self.d.stream(name, [self._task(name, "dag", t, ("airflow", "dag")) for t in TASKS])
            self.d.sync(name)
        self.d.stream("orch", [self._task("orch", "dag", "t1", ("airflow", "dag"), "spark")])
        self.d.stream("look", [self._task("look", "dag", t, ("Airflow", "dag")) for t in TASKS])
        self.d.sync("orch")
        self.d.sync("look")

    @property
    def d(self) -> Driver:
        assert self.driver is not None
        return self.driver

    def _run(self, namespace: str, name: str, **kw) -> Event:
        n = next(self.serial)
        return Event(kind="run", namespace=namespace, name=name, run_id=f"run-{n}", time=n, **kw)

    def _start(self, data: st.DataObject, name: str) -> Event:
        drop = data.draw(st.sampled_from(DROPS), label="left out")
        return self._run(
            NAMESPACE[name],
            data.draw(st.sampled_from(DAGS), label="dag"),
            event_type="START",
            tasks=tuple(t for t in TASKS if t != drop),
            run_type=data.draw(st.sampled_from(RUN_TYPES), label="run type"),
            dag_run=data.draw(st.sampled_from(DAG_RUNS), label="dag run"),
        )

    def _child(self, data: st.DataObject, name: str) -> Event:
        dag = data.draw(st.sampled_from(DAGS), label="dag")
        task = data.draw(st.sampled_from(TASKS), label="task")
        # a child of the ``airflow`` DAG or of its own namespace's (``look``); ``orch`` runs
        # Spark jobs from its DAGs too: its own children, but not Airflow tasks
        parent = ("airflow", dag)
        if name == "look" and data.draw(st.booleans(), label="own parent"):
            parent = (NAMESPACE[name], dag)
        if name == "orch" and data.draw(st.booleans(), label="a Spark job"):
            return self._task(name, dag, task, parent, namespace="spark")
        return self._task(name, dag, task, parent)

    def _task(
        self, name: str, dag: str, task: str, parent: tuple[str, str], namespace: str = ""
    ) -> Event:
        ns = namespace or NAMESPACE[name]
        return self._run(
            ns,
            f"{dag}.{task}",
            event_type="COMPLETE",
            parent=parent,
            inputs=(Dataset(WAREHOUSE, f"{ns}.{task}_in"),),
            outputs=(Dataset(WAREHOUSE, f"{ns}.{task}_out"),),
        )

    @rule(data=st.data())
    def dag_runs_start(self, data: st.DataObject) -> None:
        """A DAG START, now and then followed in the same batch by a run of the task it left out
        (the batch describes it) and by another START, of the same DAG run (cleared tasks) or
        not; then a sync."""
        name = data.draw(st.sampled_from(["orch", "orch", "look"]), label="definition")
        first = self._start(data, name)
        events = [first]
        if data.draw(st.booleans(), label="more"):
            left_out = [t for t in TASKS if t not in (first.tasks or ())] or ["t1"]
            parent = (first.namespace, first.name)
            events.append(self._task(name, first.name, left_out[0], parent))
            again = self._start(data, name)
            if data.draw(st.booleans(), label="the same DAG run again (cleared tasks)"):
                again = replace(again, name=first.name, dag_run=first.dag_run)
            events.append(again)
        self.d.stream(name, events)
        self.d.sync(name)

    @rule(data=st.data())
    def tasks_run(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(NAMESPACE)), label="definition")
        self.d.stream(name, [self._child(data, name)])
        self.d.sync(name)

    @invariant()
    def catalog_is_the_models(self) -> None:
        if self.driver is not None:
            self.d.check()


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(f"sqlite:///{tmp_path / 'store.db'}", f"sqlite:///{tmp_path / 'catalog.db'}")
    yield e
    e.close()


def test_inventories_keep_the_catalog_the_models(env: Env) -> None:
    InventoryMachine.env = env
    run_state_machine_as_test(
        InventoryMachine,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        ),
    )
