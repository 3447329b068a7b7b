"""The ``<definition>__new_batches`` sensor, evaluated the way the Dagster daemon does it.

The Definitions are built from a settings file (``build_defs``); batches are written straight into
the event store the settings name; each tick goes through ``SensorDefinition.evaluate_tick`` with a
real (temporary) Dagster instance, so run requests are resolved against the job and its dynamic
partitions exactly as the daemon would, and the dynamic-partition requests are then applied to the
instance like the daemon applies them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster._core.definitions.sensor_definition import SensorExecutionData

from ol_dagster.definitions import build_defs
from ol_dagster.defs import constants as C
from ol_dagster.settings import SETTINGS_ENV, load_settings
from ol_dagster.store import BatchStatus, EventStore, NewEvent
from ol_dagster_tests.conftest import PROJECT_ROOT, TOKENS

SNAP_SENSOR = "snap__new_batches"
ADD_SENSOR = "add__new_batches"


def ev(i: int = 0, namespace: str = "etl") -> NewEvent:
    return NewEvent(
        raw=b'{"i": %d}' % i,
        kind="run",
        event_type="COMPLETE",
        event_time=datetime(2026, 11, 1, 2, 0, tzinfo=UTC) + timedelta(seconds=i),
        producer="https://example.com/ol-dagster-tests",
        job_namespace=namespace,
        job_name=f"job_{i}",
        run_id=f"run-{i}",
    )


def utcnow() -> datetime:
    return datetime.now(UTC)


class Harness:
    """The code location built from one settings file, its event store and a Dagster instance."""

    def __init__(self, settings_file: Path, instance: dg.DagsterInstance) -> None:
        self.settings_file = settings_file
        self.defs = build_defs(str(settings_file))
        self.store = EventStore(load_settings(settings_file).store.url)
        self.instance = instance
        self.cursors: dict[str, str | None] = {}

    def sensor(self, name: str) -> dg.SensorDefinition:
        with warnings.catch_warnings():
            # 1.11+: get_sensor_def does not bind resources; the context gets them below
            warnings.simplefilter("ignore", UserWarning)
            return self.defs.get_sensor_def(name)

    def tick(
        self, name: str = SNAP_SENSOR, cursor: str | None | object = ...
    ) -> SensorExecutionData:
        """One evaluation; by default with the cursor the previous tick of this sensor left."""
        if cursor is ...:
            cursor = self.cursors.get(name)
        context = dg.build_sensor_context(
            instance=self.instance,
            instance_ref=self.instance.get_ref(),
            cursor=cursor,  # type: ignore[arg-type]
            definitions=self.defs,
            resources=self.defs.resources,
            sensor_name=name,
        )
        with context:
            data = self.sensor(name).evaluate_tick(context)
        # what the daemon does with the result
        for req in data.dynamic_partitions_requests or []:
            assert isinstance(req, dg.AddDynamicPartitionsRequest)
            self.instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
        self.cursors[name] = data.cursor
        return data

    def close(self) -> None:
        self.store.dispose()


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


@pytest.fixture
def harness(
    write_settings: Callable[..., Path], instance: dg.DagsterInstance
) -> Iterator[Callable[..., Harness]]:
    made: list[Harness] = []

    def make(**definition_overrides: Any) -> Harness:
        h = Harness(write_settings(**definition_overrides), instance)
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()


def keys_of(data: SensorExecutionData) -> list[str]:
    return [r.partition_key for r in data.run_requests]  # type: ignore[misc]


def added_keys(data: SensorExecutionData, partitions_name: str = "snap__batches") -> list[str]:
    out: list[str] = []
    for req in data.dynamic_partitions_requests or []:
        assert isinstance(req, dg.AddDynamicPartitionsRequest)
        assert req.partitions_def_name == partitions_name
        out.extend(req.partition_keys)
    return out


# -- posted batches -------------------------------------------------------------------------------


def test_posted_batches_become_one_run_each_in_order(harness: Callable[..., Harness]) -> None:
    h = harness()
    ids = [
        h.store.add_posted_batch("snap", [ev(i), ev(i + 100)], received=2, snapshot=True)
        for i in range(3)
    ]
    expected = [str(i) for i in ids]

    data = h.tick()

    assert keys_of(data) == expected
    for req, key in zip(data.run_requests, expected, strict=True):
        assert req.run_key == key
        assert req.partition_key == key
        assert req.tags[C.DEFINITION_TAG] == "snap"
        assert req.tags[C.BATCH_TAG] == key
        assert req.tags["dagster/partition"] == key  # resolved against the job's partitions
        assert req.job_name in (None, "snap__sync")
    assert added_keys(data) == expected
    assert data.cursor == expected[-1]
    assert data.skip_message is None
    assert h.instance.get_dynamic_partitions("snap__batches") == expected


def test_second_tick_with_the_new_cursor_requests_nothing_new(
    harness: Callable[..., Harness],
) -> None:
    h = harness()
    first_ids = [h.store.add_posted_batch("snap", [ev(i)], received=1) for i in range(2)]
    first = h.tick()
    assert keys_of(first) == [str(i) for i in first_ids]

    second = h.tick()

    assert second.run_requests == []
    assert added_keys(second) == []
    assert second.skip_message
    assert second.cursor == first.cursor

    # a batch arriving later is requested alone
    later = h.store.add_posted_batch("snap", [ev(9)], received=1)
    third = h.tick()
    assert keys_of(third) == [str(later)]
    assert added_keys(third) == [str(later)]
    assert third.cursor == str(later)
    assert h.instance.get_dynamic_partitions("snap__batches") == [
        *(str(i) for i in first_ids),
        str(later),
    ]


def test_without_cursor_pending_batches_are_requested_again(
    harness: Callable[..., Harness],
) -> None:
    # A reset cursor re-requests sealed batches; the run_key (= batch id) lets the daemon
    # drop the duplicates, so no batch is ever launched twice.
    h = harness()
    batch = h.store.add_posted_batch("snap", [ev(0)], received=1)
    first = h.tick()
    again = h.tick(cursor=None)
    assert [r.run_key for r in again.run_requests] == [r.run_key for r in first.run_requests]
    assert [r.run_key for r in again.run_requests] == [str(batch)]


def test_only_sealed_batches_are_requested(harness: Callable[..., Harness]) -> None:
    h = harness()
    synced = h.store.add_posted_batch("snap", [ev(0)], received=1)
    h.store.set_status(synced, BatchStatus.SYNCED)
    pending = h.store.add_posted_batch("snap", [ev(1)], received=1)

    assert keys_of(h.tick()) == [str(pending)]


def test_empty_posted_batch_is_still_requested(harness: Callable[..., Harness]) -> None:
    # The downstream not_empty guard must see an empty post (it protects the catalog from a
    # snapshot that would clean everything); the sensor must not swallow it.
    h = harness()
    empty = h.store.add_posted_batch("snap", [], received=0, snapshot=True)
    full = h.store.add_posted_batch("snap", [ev(1)], received=1, snapshot=True)

    data = h.tick()

    assert keys_of(data) == [str(empty), str(full)]
    assert added_keys(data) == [str(empty), str(full)]


def test_other_definitions_batches_are_not_requested(harness: Callable[..., Harness]) -> None:
    h = harness(limits={"batchWindowSeconds": 60, "maxEventsPerRun": 1000})
    add_posted = h.store.add_posted_batch("add", [ev(0)], received=1)
    # old enough to be due, but it belongs to "add": the snap sensor must not seal it
    add_stream = h.store.add_stream_events(
        "add", [ev(1)], received=1, now=utcnow() - timedelta(hours=2)
    )
    snap_posted = h.store.add_posted_batch("snap", [ev(2)], received=1)

    snap = h.tick(SNAP_SENSOR)

    assert keys_of(snap) == [str(snap_posted)]
    assert all(r.tags[C.DEFINITION_TAG] == "snap" for r in snap.run_requests)
    assert h.store.get_batch(add_stream).status is BatchStatus.OPEN

    add = h.tick(ADD_SENSOR)

    # "add" has the default 60 s window, so its old stream batch is sealed now
    assert keys_of(add) == [str(add_posted), str(add_stream)]
    assert added_keys(add, "add__batches") == [str(add_posted), str(add_stream)]
    assert all(r.tags[C.DEFINITION_TAG] == "add" for r in add.run_requests)
    assert h.instance.get_dynamic_partitions("snap__batches") == [str(snap_posted)]
    assert h.instance.get_dynamic_partitions("add__batches") == [str(add_posted), str(add_stream)]


# -- stream batches -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("age_seconds", "due"),
    [(0, False), (250, False), (350, True), (7200, True)],
)
def test_stream_batch_is_sealed_after_the_window(
    harness: Callable[..., Harness], age_seconds: int, due: bool
) -> None:
    h = harness(limits={"batchWindowSeconds": 300, "maxEventsPerRun": 1000})
    batch = h.store.add_stream_events(
        "snap", [ev(0), ev(1)], received=2, now=utcnow() - timedelta(seconds=age_seconds)
    )

    data = h.tick()

    record = h.store.get_batch(batch)
    if due:
        assert record.status is BatchStatus.SEALED
        assert keys_of(data) == [str(batch)]
        assert added_keys(data) == [str(batch)]
        assert data.run_requests[0].run_key == str(batch)
        assert data.cursor == str(batch)
    else:
        assert record.status is BatchStatus.OPEN
        assert data.run_requests == []
        assert added_keys(data) == []
        # more events still go into the same open batch
        assert h.store.add_stream_events("snap", [ev(2)], received=1) == batch


def test_stream_batch_at_max_events_is_sealed_even_if_young(
    harness: Callable[..., Harness],
) -> None:
    h = harness(limits={"batchWindowSeconds": 3600, "maxEventsPerRun": 3})
    batch = h.store.add_stream_events("snap", [ev(0), ev(1)], received=2)

    below = h.tick()
    assert below.run_requests == []
    assert h.store.get_batch(batch).status is BatchStatus.OPEN

    h.store.add_stream_events("snap", [ev(2)], received=1)
    at_limit = h.tick()

    assert keys_of(at_limit) == [str(batch)]
    assert h.store.get_batch(batch).status is BatchStatus.SEALED
    # the next single event opens a new batch, not requested until it is due
    nxt = h.store.add_stream_events("snap", [ev(3)], received=1)
    assert nxt != batch
    assert h.tick().run_requests == []


def test_stream_batch_opened_before_a_posted_batch_is_not_lost(
    harness: Callable[..., Harness],
) -> None:
    # A stream batch gets its id when its first event arrives; a post during its window gets a
    # higher id and is requested first, moving the cursor past the still-open stream batch.
    # When the stream batch is sealed later it must still be requested.
    h = harness(limits={"batchWindowSeconds": 3600, "maxEventsPerRun": 2})
    stream = h.store.add_stream_events("snap", [ev(0)], received=1)
    posted = h.store.add_posted_batch("snap", [ev(1)], received=1)

    first = h.tick()
    assert keys_of(first) == [str(posted)]

    h.store.add_stream_events("snap", [ev(2)], received=1)  # reaches maxEventsPerRun
    second = h.tick()

    assert keys_of(second) == [str(stream)]
    assert added_keys(second) == [str(stream)]
    assert h.instance.get_dynamic_partitions("snap__batches") == [str(posted), str(stream)]
    # and it is not requested again on the tick after
    assert h.tick().run_requests == []


def test_sealed_stream_and_posted_batches_come_in_batch_order(
    harness: Callable[..., Harness],
) -> None:
    h = harness(limits={"batchWindowSeconds": 60, "maxEventsPerRun": 1000})
    p1 = h.store.add_posted_batch("snap", [ev(0)], received=1)
    stream = h.store.add_stream_events(
        "snap", [ev(1)], received=1, now=utcnow() - timedelta(minutes=5)
    )
    p2 = h.store.add_posted_batch("snap", [ev(2)], received=1)

    data = h.tick()

    assert keys_of(data) == [str(p1), str(stream), str(p2)]
    assert data.cursor == str(p2)


# -- the whole code location ----------------------------------------------------------------------


def test_definitions_are_loadable(
    write_settings: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in TOKENS:  # loading must not need the receiver tokens
        monkeypatch.delenv(name, raising=False)
    defs = build_defs(str(write_settings()))

    dg.Definitions.validate_loadable(defs)

    repo = defs.get_repository_def()
    assert {s.name for s in repo.sensor_defs} == {
        SNAP_SENSOR,
        ADD_SENSOR,
        "snap__failed_syncs",
        "add__failed_syncs",
    }
    assert {"snap__sync", "add__sync"} <= {j.name for j in repo.get_all_jobs()}
    keys = {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}
    for name in ("snap", "add"):
        for asset in ("received_batch", "lineage_graph", "catalog_upload", "catalog_cleanup"):
            assert f"{name}/{asset}" in keys
    snap_sensor = repo.get_sensor_def(SNAP_SENSOR)
    assert snap_sensor.job_name == "snap__sync"
    assert snap_sensor.default_status is dg.DefaultSensorStatus.RUNNING


def test_dagster_definitions_validate_command(
    write_settings: Callable[..., Path], tmp_path: Path
) -> None:
    settings_file = write_settings()
    env = {k: v for k, v in os.environ.items() if k not in TOKENS}
    env[SETTINGS_ENV] = str(settings_file)
    env["DAGSTER_HOME"] = str(tmp_path / "dagster_home")
    (tmp_path / "dagster_home").mkdir()
    dagster = Path(sys.executable).parent / "dagster"

    proc = subprocess.run(
        [str(dagster), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )

    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dagster_definitions_validate_fails_on_a_bad_settings_file(tmp_path: Path) -> None:
    bad = tmp_path / "ol_dagster.yaml"
    bad.write_text("definitions:\n  - name: bad-name\n", encoding="utf-8")
    env = dict(os.environ)
    env[SETTINGS_ENV] = str(bad)
    env["DAGSTER_HOME"] = str(tmp_path / "dagster_home")
    (tmp_path / "dagster_home").mkdir()
    dagster = Path(sys.executable).parent / "dagster"

    proc = subprocess.run(
        [str(dagster), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )

    assert proc.returncode != 0
    assert "definitions.0.name" in proc.stdout + proc.stderr
