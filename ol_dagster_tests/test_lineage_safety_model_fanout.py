"""The reference model, once per catalog, for definitions that feed two catalogs.

Every definition of a random universe feeds ``catalogs: [main, lineage]``: two embedded catalogs on
their own SQLite files, each with its own fault triggers (refusing writes) and its own cleanup
user (refusing the cleanup). The reference model of ``test_lineage_safety_model`` is unchanged
and knows nothing of fan-out: one instance per catalog, each fed every post and stream of the
sequence and only its own catalog's moods, says what that catalog must hold. The production side
is ``sync.batch`` as the Dagster job runs it: ``begin_run``, then each catalog's upload and
cleanup with ``catalog_key``.

After every step each catalog must be its model's (its objects, its reports' guards and counts),
and the store's batch status the two models' together: synced when both say done, pending while
either waits. A retry must leave alone the catalog whose model says the batch is done
(``begin_run`` keeps exactly those, and their steps touch nothing).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ol_dagster.receiver.intake import sort_events
from ol_dagster.settings import SyncDefinition
from ol_dagster.store import BatchStatus
from ol_dagster.sync.batch import begin_run, cleanup_batch, upload_batch
from ol_dagster_tests.model.generate import EventFactory, to_json, universes
from ol_dagster_tests.model.reference import DefinitionSpec, Event
from ol_dagster_tests.test_lineage_safety_model import (
    _OVERRIDES,
    AVOID,
    Driver,
    Env,
    Overrides,
    _diff,
    _event,
    _examples,
    _note,
    expected,
    observe,
)

KEYS = ("main", "lineage")
STEPS = 10
SHARE = 0.1  # of the SQLite budget: 50 sequences in the ci profile


def _fan(definition: SyncDefinition) -> SyncDefinition:
    return definition.model_copy(update={"catalog": None, "catalogs": list(KEYS)})


class CatalogDriver(Driver):
    """The model test's driver for one catalog of fanned-out definitions."""

    def __init__(self, env: Env, universe: tuple[DefinitionSpec, ...], key: str, first: int):
        super().__init__(env, universe)
        self.catalog_key = key
        self.defs = {n: _fan(d) for n, d in self.defs.items()}
        self.runs = itertools.count(first)  # reruns: run ids apart from the other catalog's


class FanoutDriver:
    """Two ``CatalogDriver``s over one store: each post and stream reaches both models."""

    def __init__(self, envs: tuple[Env, Env], universe: tuple[DefinitionSpec, ...]) -> None:
        self.drivers = (
            CatalogDriver(envs[0], universe, KEYS[0], 1),
            CatalogDriver(envs[1], universe, KEYS[1], 100_000),
        )
        self.store = envs[0].store
        self.specs = self.drivers[0].specs
        self.runs = itertools.count(1)

    def post(self, name: str, events: list[Event]) -> None:
        batch_id = self.drivers[0].post(name, events)
        self.drivers[1].model.post(name, batch_id, events)

    def stream(self, name: str, events: list[Event]) -> None:
        for e in events:
            intake = sort_events([to_json(e)], list(self.specs[name].allowed))
            batch_id = self.store.add_stream_events(
                name,
                intake.accepted,
                received=intake.received,
                rejections=[r.as_dict() for r in intake.rejected],
            )
            for d in self.drivers:
                d.model.stream(name, batch_id, [e])

    def waiting(self, name: str) -> bool:
        return any(d.waiting(name) for d in self.drivers)

    def pending(self, name: str) -> list[int]:
        self.drivers[0].seal(name)  # the store and the first model
        self.drivers[1].model.seal(name)
        return sorted(set().union(*(d.model.pending(name) for d in self.drivers)))

    def sync(self, name: str, overrides: Overrides) -> None:
        """The sensor's runs: every batch pending in either catalog, in order, each a run of the
        whole job over both catalogs."""
        for batch_id in self.pending(name):
            run_id = f"fan-{next(self.runs)}"
            done = [
                d.catalog_key for d in self.drivers if d.model.batches[batch_id].status == "done"
            ]
            kept = begin_run(self.store, self.drivers[0].defs[name], batch_id, run_id)
            _note(f"run {run_id} of batch {batch_id}: keeps {kept}")
            assert sorted(kept) == sorted(done), f"kept {kept}, the models: done in {done}"
            _event(f"retry keeps {len(kept)} catalog(s)")
            for d in self.drivers:
                if d.catalog_key in kept:
                    self._left_alone(d, name, batch_id, run_id)
                    continue
                assert d.upload(name, batch_id, run_id), "no other sync holds a lock here"
                d.cleanup(name, batch_id, run_id, overrides)

    def _left_alone(self, d: CatalogDriver, name: str, batch_id: int, run_id: str) -> None:
        before = d.env.catalog.counts()
        done = upload_batch(
            self.store,
            d.env.catalog,
            d.defs[name],
            batch_id,
            run_id=run_id,
            catalog_key=d.catalog_key,
        )
        assert done.kept_from is not None, f"{d.catalog_key}: uploaded again"
        cleanup_batch(
            self.store,
            d.env.catalog,
            d.defs[name],
            batch_id,
            run_id=run_id,
            catalog_key=d.catalog_key,
        )
        assert d.env.catalog.counts() == before, f"{d.catalog_key}: touched by the retry"

    def check(self) -> None:
        for d in self.drivers:
            diff = _diff(expected(d.model), observe(d.env.catalog, d.job_systems))
            assert not diff, f"catalog {d.catalog_key} is not its model's:\n" + diff
        status = {b.id: b.status for b in self.store.batches()}
        for batch_id in self.drivers[0].model.batches:
            models = {d.model.batches[batch_id].status for d in self.drivers}
            if models == {"done"}:
                want = {BatchStatus.SYNCED}
            elif "open" in models:
                want = {BatchStatus.OPEN}
            else:
                want = {BatchStatus.SEALED, BatchStatus.FAILED}
            assert status[batch_id] in want, (
                f"batch {batch_id}: store {status[batch_id]}, the models {sorted(models)}"
            )


class FanoutMachine(RuleBasedStateMachine):
    envs: ClassVar[tuple[Env, Env]]

    def __init__(self) -> None:
        super().__init__()
        for env in self.envs:
            env.reset()
        self.driver: FanoutDriver | None = None
        self.factory = EventFactory(avoid=AVOID)

    @initialize(universe=universes())
    def setup(self, universe: tuple[DefinitionSpec, ...]) -> None:
        self.driver = FanoutDriver(self.envs, universe)

    @property
    def d(self) -> FanoutDriver:
        assert self.driver is not None
        return self.driver

    def _name(self, data: st.DataObject, names: list[str] | None = None) -> str:
        return data.draw(st.sampled_from(sorted(names or self.d.specs)), label="definition")

    @rule(data=st.data())
    def post(self, data: st.DataObject) -> None:
        name = self._name(data)
        self.d.post(name, self.factory.events(data, self.d.specs[name]))

    @rule(data=st.data())
    def stream(self, data: st.DataObject) -> None:
        name = self._name(data)
        self.d.stream(name, self.factory.events(data, self.d.specs[name], max_size=2, stream=True))

    @rule(
        which=st.sampled_from(range(len(KEYS))),
        mood=st.sampled_from(["refuses writes", "403", "writes again", "admin again"]),
    )
    def catalog_mood(self, which: int, mood: str) -> None:
        d = self.d.drivers[which]
        _note(f"catalog {d.catalog_key} {mood}")
        if mood in ("refuses writes", "writes again"):
            d.refuse_writes(mood == "refuses writes")
        else:
            d.refuse_cleanup_user(mood == "403")

    @rule(data=st.data(), overrides=_OVERRIDES)
    def post_and_sync(self, data: st.DataObject, overrides: Overrides) -> None:
        name = self._name(data)
        self.d.post(name, self.factory.events(data, self.d.specs[name]))
        self.d.sync(name, overrides)

    @precondition(lambda self: any(self.d.waiting(n) for n in self.d.specs))
    @rule(data=st.data(), overrides=_OVERRIDES)
    def sync(self, data: st.DataObject, overrides: Overrides) -> None:
        self.d.sync(self._name(data, [n for n in self.d.specs if self.d.waiting(n)]), overrides)

    @precondition(lambda self: any(d.rerunnable() for d in self.d.drivers))
    @rule(data=st.data(), overrides=_OVERRIDES)
    def rerun_cleanup(self, data: st.DataObject, overrides: Overrides) -> None:
        d = data.draw(st.sampled_from([d for d in self.d.drivers if d.rerunnable()]))
        name, batch_id = data.draw(st.sampled_from(d.rerunnable()), label="batch")
        d.rerun(name, batch_id, overrides)

    @invariant()
    def catalogs_are_the_models(self) -> None:
        if self.driver is not None:
            self.driver.check()

    def teardown(self) -> None:
        for env in self.envs:
            env.set_fault(False)


@pytest.fixture
def two_catalogs(tmp_path: Path) -> Iterator[tuple[Env, Env]]:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    envs = (
        Env(store, f"sqlite:///{tmp_path / 'main.db'}"),
        Env(store, f"sqlite:///{tmp_path / 'lineage.db'}"),
    )
    yield envs
    for env in envs:
        env.close()


@pytest.mark.timeout(1800)
def test_random_sequences_keep_each_catalog_its_own_models(two_catalogs: tuple[Env, Env]):
    FanoutMachine.envs = two_catalogs
    run_state_machine_as_test(
        FanoutMachine,
        settings=settings(
            settings.default,
            max_examples=_examples(SHARE),
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        ),
    )
