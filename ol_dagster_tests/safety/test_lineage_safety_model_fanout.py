"""The reference model, once per catalog, for definitions that feed two catalogs.

Every definition of a random universe feeds ``catalogs: [main, lineage]``: two embedded catalogs on
their own SQLite files, each with its own fault triggers (refusing writes) and its own cleanup
user (refusing the cleanup). The reference model of ``test_lineage_safety_model`` is unchanged
and knows nothing of fan-out: one instance per catalog, each fed every post and stream of the
sequence and only its own catalog's moods, says what that catalog must hold. The production side
is ``sync.batch`` as the Dagster job runs it: ``begin_run``, then each catalog's upload and
cleanup with ``catalog_key``.

Runs of the whole job go step by step, so they interleave: a run starts (``begin_run``), then takes
its catalogs' steps (each an upload, then its cleanup) in any order, between other runs' steps, of
the same batch too (a retry and a person's run); an upload that finds a live run holding that
catalog's lock fails, and the run's failure sends it to the failure sensor (``fail_run``). A run may
die anywhere (between a catalog's upload and its cleanup, between two catalogs), seen by the
failure sensor or not. Sequences run on SQLite and, a share of them, on PostgreSQL.

After every step each catalog must be its model's (its objects, its reports' guards and counts),
and the store's batch status what ``model.fanout`` says of the two catalogs together: synced once a
cleanup left both finished, pending otherwise. A run must leave alone exactly the catalogs
``model.fanout`` says it keeps (``begin_run`` names them, and their steps touch nothing).
Written sequences at the end replay the interleavings found or feared.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
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

from ol_dagster.settings import SyncDefinition
from ol_dagster.store import BatchStatus
from ol_dagster.sync.batch import begin_run, cleanup_batch, fail_run, upload_batch
from ol_dagster_tests.model.fanout import FanoutModel
from ol_dagster_tests.model.generate import EventFactory, definition_spec, to_json, universes
from ol_dagster_tests.model.reference import Dataset, DefinitionSpec, Event
from ol_dagster_tests.safety.test_lineage_safety_model import (
    _OVERRIDES,
    AVOID,
    PG_A,
    PG_B,
    Driver,
    Env,
    Overrides,
    _diff,
    _event,
    _examples,
    _note,
    _run_event,
    expected,
    observe,
)

KEYS = ("main", "lineage")
STEPS = 10
MAX_INFLIGHT = 3  # runs in flight at once (of one batch or several)
SHARE = 0.1  # of the SQLite budget: 50 sequences in the ci profile
PG_SHARE = 0.04  # 20 sequences on PostgreSQL


def _fan(definition: SyncDefinition) -> SyncDefinition:
    return definition.model_copy(update={"catalog": None, "catalogs": list(KEYS)})


class CatalogDriver(Driver):
    """The model test's driver for one catalog of fanned-out definitions."""

    def __init__(self, env: Env, universe: tuple[DefinitionSpec, ...], key: str, first: int):
        super().__init__(env, universe)
        self.catalog_key = key
        self.defs = {n: _fan(d) for n, d in self.defs.items()}
        self.runs = itertools.count(first)  # reruns: run ids apart from the other catalog's


@dataclass
class Run:
    """A run of the whole sync job in flight: its batch, the catalogs it keeps, and the steps
    each other catalog still has (upload, then cleanup), taken in any interleaving."""

    name: str
    batch_id: int
    kept: frozenset[str]
    steps: dict[str, list[str]]
    busy: set[str] = field(default_factory=set)  # catalogs whose upload found the lock held

    def left(self) -> list[str]:
        return sorted(k for k, s in self.steps.items() if s)


class FanoutDriver:
    """Two ``CatalogDriver``s over one store: each post and stream reaches both models. Runs of
    the whole job go step by step (``begin``, ``step``, ``die``), so that runs interleave."""

    def __init__(self, envs: tuple[Env, Env], universe: tuple[DefinitionSpec, ...]) -> None:
        self.drivers = (
            CatalogDriver(envs[0], universe, KEYS[0], 1),
            CatalogDriver(envs[1], universe, KEYS[1], 100_000),
        )
        self.by_key = {d.catalog_key: d for d in self.drivers}
        self.store = envs[0].store
        self.specs = self.drivers[0].specs
        self.fan = FanoutModel(KEYS)
        self.runs = itertools.count(1)
        self.inflight: dict[str, Run] = {}

    def post(self, name: str, events: list[Event]) -> None:
        batch_id = self.drivers[0].post(name, events)
        self.drivers[1].model.post(name, batch_id, events)

    def stream(self, name: str, events: list[Event]) -> None:
        for e in events:
            intake = self.drivers[0]._intake(name, [to_json(e)])
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

    # -- runs of the whole job -------------------------------------------------------------

    def begin(self, name: str, batch_id: int) -> str:
        """The run's ``received_batch`` step (``begin_run``): which catalogs it keeps."""
        run_id = f"fan-{next(self.runs)}"
        want = self.fan.begin(run_id, batch_id)
        kept = begin_run(self.store, self.drivers[0].defs[name], batch_id, run_id)
        _note(f"run {run_id} of batch {batch_id} begins: keeps {kept}")
        assert sorted(kept) == sorted(want), f"{run_id} keeps {kept}, the model: {sorted(want)}"
        _event(f"a run keeps {len(kept)} catalog(s)")
        steps = {k: (["kept"] if k in kept else ["upload", "cleanup"]) for k in KEYS}
        self.inflight[run_id] = Run(name, batch_id, frozenset(kept), steps)
        return run_id

    def step(self, run_id: str, key: str, overrides: Overrides) -> None:
        """The run's next step in catalog ``key``; the run ends after its last step."""
        run = self.inflight[run_id]
        d = self.by_key[key]
        what = run.steps[key].pop(0)
        if what == "kept":
            self._left_alone(d, run.name, run.batch_id, run_id)
        elif what == "upload":
            if d.upload(run.name, run.batch_id, run_id):
                self.fan.uploaded(run.batch_id, key)
            else:
                # the step fails (another live run holds the lock): no cleanup step follows
                run.busy.add(key)
                run.steps[key] = []
                _event("an upload step finds the catalog's lock held")
        elif d.cleanup(run.name, run.batch_id, run_id, overrides):
            self._cleaned(d, run.batch_id)
        if not run.left():
            self._end(run_id)

    def _cleaned(self, d: CatalogDriver, batch_id: int) -> None:
        assert d.catalog_key is not None
        self.fan.cleaned(batch_id, d.catalog_key, d.model.batches[batch_id].status == "done")

    def _end(self, run_id: str) -> None:
        run = self.inflight.pop(run_id)
        if run.busy:
            # a failed step fails the run: the failure sensor marks the batch for a retry
            self._failure_sensor(run, run_id)

    def die(self, run_id: str, *, sensed: bool) -> None:
        """The run dies wherever it is (between a catalog's upload and its cleanup, between two
        catalogs); ``sensed``: Dagster marks it failed and the failure sensor runs."""
        run = self.inflight.pop(run_id)
        for d in self.drivers:
            d.live.discard(run_id)
            d.model.die(run_id)
        _note(f"  {run_id} died with steps {run.steps} left" + (", sensed" if sensed else ""))
        _event(f"a run dies with {len(run.left())} catalog(s) unfinished")
        if sensed:
            self._failure_sensor(run, run_id)

    def _failure_sensor(self, run: Run, run_id: str) -> None:
        fail_run(self.store, self.drivers[0].defs[run.name], run.batch_id, run_id)

    def sync(self, name: str, overrides: Overrides) -> None:
        """The sensor's runs: every batch pending in either catalog, in order, each a run of the
        whole job over both catalogs, run to its end."""
        for batch_id in self.pending(name):
            run_id = self.begin(name, batch_id)
            for key in KEYS:
                while run_id in self.inflight and self.inflight[run_id].steps[key]:
                    self.step(run_id, key, overrides)

    def rerun(self, d: CatalogDriver, name: str, batch_id: int, overrides: Overrides) -> None:
        if d.rerun(name, batch_id, overrides):  # busy (a run in flight holds the lock): no cleanup
            self._cleaned(d, batch_id)

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
        assert done.kept_from is not None, f"{d.catalog_key}: uploaded again by {run_id}"
        cleanup_batch(
            self.store,
            d.env.catalog,
            d.defs[name],
            batch_id,
            run_id=run_id,
            catalog_key=d.catalog_key,
        )
        assert d.env.catalog.counts() == before, f"{d.catalog_key}: touched by {run_id}"

    def check(self) -> None:
        for d in self.drivers:
            diff = _diff(expected(d.model), observe(d.env.catalog, d.job_systems))
            assert not diff, f"catalog {d.catalog_key} is not its model's:\n" + diff
        status = {b.id: b.status for b in self.store.batches()}
        for batch_id in self.drivers[0].model.batches:
            models = {d.model.batches[batch_id].status for d in self.drivers}
            if batch_id in self.fan.synced:
                want = {BatchStatus.SYNCED}
            elif "open" in models:
                want = {BatchStatus.OPEN}
            else:
                want = {BatchStatus.SEALED, BatchStatus.FAILED}
            assert status[batch_id] in want, (
                f"batch {batch_id}: store {status[batch_id]}, the models {sorted(models)}, "
                f"synced as a whole: {batch_id in self.fan.synced}"
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

    @precondition(lambda self: len(self.d.inflight) < MAX_INFLIGHT)
    @rule(data=st.data(), overrides=_OVERRIDES)
    def start_run(self, data: st.DataObject, overrides: Overrides) -> None:
        """A run starts (the sensor's, a retry's, a person's; after a post when nothing waits)
        and takes a few steps, maybe none: other runs, of this batch too, may take steps before
        its next one."""
        name = self._name(data)
        pending = self.d.pending(name)
        if not pending or data.draw(st.booleans(), label="post first"):
            self.d.post(name, self.factory.events(data, self.d.specs[name]))
            pending = self.d.pending(name)
        batch_id = data.draw(st.sampled_from(pending), label="batch")
        self.d.begin(name, batch_id)
        if len(self.d.inflight) < MAX_INFLIGHT and data.draw(st.booleans(), label="twice"):
            self.d.begin(name, batch_id)  # a retry and a person's run start together
        self._steps(data, overrides, 0)

    @precondition(lambda self: bool(self.d.inflight))
    @rule(data=st.data(), overrides=_OVERRIDES)
    def run_steps(self, data: st.DataObject, overrides: Overrides) -> None:
        """A few steps of the runs in flight, each a catalog's upload or its cleanup."""
        self._steps(data, overrides, 1)

    def _steps(self, data: st.DataObject, overrides: Overrides, least: int) -> None:
        for _ in range(data.draw(st.integers(least, 4), label="steps")):
            if not self.d.inflight:
                return
            run_id = data.draw(st.sampled_from(sorted(self.d.inflight)), label="run")
            key = data.draw(st.sampled_from(self.d.inflight[run_id].left()), label="catalog")
            self.d.step(run_id, key, overrides)

    @precondition(lambda self: bool(self.d.inflight))
    @rule(data=st.data(), sensed=st.booleans())
    def run_dies(self, data: st.DataObject, sensed: bool) -> None:
        """A run in flight dies where it is; the failure sensor sees it, or not (yet)."""
        self.d.die(data.draw(st.sampled_from(sorted(self.d.inflight)), label="run"), sensed=sensed)

    @precondition(lambda self: any(d.rerunnable() for d in self.d.drivers))
    @rule(data=st.data(), overrides=_OVERRIDES)
    def rerun_cleanup(self, data: st.DataObject, overrides: Overrides) -> None:
        d = data.draw(st.sampled_from([d for d in self.d.drivers if d.rerunnable()]))
        name, batch_id = data.draw(st.sampled_from(d.rerunnable()), label="batch")
        self.d.rerun(d, name, batch_id, overrides)

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


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def both_databases(request: pytest.FixtureRequest) -> Iterator[tuple[Env, Env]]:
    """``two_catalogs``, or the store and the two catalogs on PostgreSQL."""
    if request.param == "sqlite":
        yield request.getfixturevalue("two_catalogs")
        return
    pg = request.getfixturevalue("pg_server")
    store = pg.fresh_database("s")
    envs = (Env(store, pg.fresh_database("main")), Env(store, pg.fresh_database("lineage")))
    yield envs
    for env in envs:
        env.close()


def _run(envs: tuple[Env, Env], examples: int) -> None:
    FanoutMachine.envs = envs
    run_state_machine_as_test(
        FanoutMachine,
        settings=settings(
            settings.default,
            max_examples=examples,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        ),
    )


@pytest.mark.timeout(1800)
def test_random_sequences_keep_each_catalog_its_own_models(two_catalogs: tuple[Env, Env]):
    _run(two_catalogs, _examples(SHARE))


@pytest.mark.postgres
@pytest.mark.timeout(1800)
def test_random_sequences_on_postgresql_keep_each_catalog_its_own_models(pg_server):
    store = pg_server.fresh_database("s")
    envs = (
        Env(store, pg_server.fresh_database("main")),
        Env(store, pg_server.fresh_database("lineage")),
    )
    try:
        _run(envs, _examples(PG_SHARE))
    finally:
        for env in envs:
            env.close()


# -- written sequences: runs that interleave or die, replayed by the same driver ------------------


def _written(envs: tuple[Env, Env]) -> FanoutDriver:
    for env in envs:
        env.reset()
    return FanoutDriver(envs, (definition_spec("snap"),))


def _load(run: str, *outputs: Dataset) -> Event:
    return _run_event("load", "COMPLETE", run, inputs=(PG_A,), outputs=outputs)


def _fail_lineage_once(d: FanoutDriver) -> None:
    """Batch 1 synced to main; its upload to lineage fails (lineage refuses writes)."""
    d.post("snap", [_load("r1", PG_B)])
    d.drivers[1].refuse_writes(True)
    d.sync("snap", None)
    d.check()
    d.drivers[1].refuse_writes(False)


def test_two_retries_of_one_batch_both_leave_the_finished_catalog_alone(
    both_databases: tuple[Env, Env],
):
    """Two runs of a batch that main finished (a retry and a person's run) start before either
    takes a step: each must leave main alone, the later start must not take that from the
    earlier one."""
    d = _written(both_databases)
    _fail_lineage_once(d)
    first = d.begin("snap", 1)
    second = d.begin("snap", 1)
    for run in (first, second):
        for key in KEYS:
            while run in d.inflight and d.inflight[run].steps[key]:
                d.step(run, key, None)
                d.check()


@pytest.mark.parametrize("sensed", [False, True])
@pytest.mark.parametrize("where", ["after main's upload", "between the catalogs"])
def test_a_run_that_dies_mid_way_is_completed_by_the_next(
    both_databases: tuple[Env, Env], where: str, sensed: bool
):
    """A run dies between main's upload and its cleanup, or after main's cleanup and before
    lineage's upload; the failure sensor marks it or not. The next run of the batch keeps main
    only when main finished, and completes the rest."""
    d = _written(both_databases)
    d.post("snap", [_load("r1", PG_B)])
    d.pending("snap")
    run = d.begin("snap", 1)
    d.step(run, "main", None)
    if where == "between the catalogs":
        d.step(run, "main", None)
    d.die(run, sensed=sensed)
    d.check()
    d.post("snap", [_load("r2")])  # the next snapshot: r1's output goes once synced
    d.sync("snap", None)
    d.check()


def test_a_run_of_a_batch_another_run_is_syncing_fails_for_that_catalog_only(
    both_databases: tuple[Env, Env],
):
    """Run 2 of a batch starts while run 1 holds main between its upload and cleanup: run 2's
    upload to main finds the lock held and fails (the failure sensor marks the batch), its
    lineage part goes on; run 1 then ends main, and the batch is synced."""
    d = _written(both_databases)
    d.post("snap", [_load("r1", PG_B)])
    d.pending("snap")
    first = d.begin("snap", 1)
    d.step(first, "main", None)
    second = d.begin("snap", 1)
    for key in KEYS:
        while second in d.inflight and d.inflight[second].steps[key]:
            d.step(second, key, None)
            d.check()
    d.step(first, "main", None)
    d.check()
    while first in d.inflight:
        d.step(first, "lineage", None)
        d.check()


def test_an_upload_in_flight_holds_the_batch_back_until_its_cleanup(
    both_databases: tuple[Env, Env],
):
    """Found by the machine: run 1 syncs lineage and uploads main; run 2 of the same batch
    uploads lineage again; run 1's cleanup of main does not make the batch synced, lineage's new
    upload owes its cleanup. Run 2 dies: the next run keeps main and syncs lineage again."""
    d = _written(both_databases)
    d.post("snap", [_load("r1", PG_B)])
    d.pending("snap")
    first = d.begin("snap", 1)
    second = d.begin("snap", 1)
    for run, key in ((first, "lineage"), (first, "lineage"), (first, "main"), (second, "lineage")):
        d.step(run, key, None)
        d.check()
    d.step(second, "main", None)  # busy: run 1 holds main
    d.step(first, "main", None)
    d.check()
    d.die(second, sensed=False)
    d.sync("snap", None)
    d.check()
