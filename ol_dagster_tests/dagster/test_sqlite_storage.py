"""An instance on Dagster's default SQLite storage, as ``ol-dagster sync`` opens it: its database
files are opened once per process, not once per stored Dagster event, and what it writes is what
Dagster's own storage (the UI, the daemon) reads.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from sqlalchemy import Engine, event

from ol_dagster.defs.dagster_private import (
    MirroredComputeLogManager,
    PooledSqliteEventLogStorage,
    sqlite_instance,
)
from ol_dagster_tests.conftest import PROJECT_ROOT


@contextmanager
def counted_connections() -> Iterator[list[object]]:
    """Every database connection any engine of this process opens meanwhile."""
    opened: list[object] = []

    def on_connect(dbapi_connection: object, _record: object) -> None:
        opened.append(dbapi_connection)

    event.listen(Engine, "connect", on_connect)
    try:
        yield opened
    finally:
        event.remove(Engine, "connect", on_connect)


def _assets(lines: int) -> list[dg.AssetsDefinition]:
    """An asset that logs ``lines`` lines (each a stored Dagster event) and a check of it."""

    @dg.asset(name="numbers")
    def numbers(context) -> dg.MaterializeResult:  # noqa: ANN001 - Dagster reads the annotation
        for i in range(lines):
            context.log.info(f"line {i}")
        return dg.MaterializeResult(metadata={"lines": lines})

    @dg.asset_check(asset=numbers, name="logged")
    def logged() -> dg.AssetCheckResult:
        return dg.AssetCheckResult(passed=True)

    return [numbers, logged]


def _run(instance: dg.DagsterInstance, lines: int) -> tuple[str, int, int]:
    """(run id, events stored, connections opened) of a run logging ``lines`` lines."""
    with counted_connections() as opened:
        result = dg.materialize(_assets(lines), instance=instance)
    assert result.success
    return result.run_id, len(instance.all_logs(result.run_id)), len(opened)


def test_connections_do_not_grow_with_stored_events(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    instance = sqlite_instance()
    try:
        assert isinstance(instance.event_log_storage, PooledSqliteEventLogStorage)
        # the first run also opens the index and checks its schema, once per process
        _, few_events, few_connections = _run(instance, 2)
        run_id, many_events, many_connections = _run(instance, 60)
    finally:
        instance.dispose()
    assert many_events == few_events + 58  # a stored event per logged line
    # a run opens its own shard once, however many events it stores (Dagster's own storage: a
    # connection per stored event and more, 65 for the first run and 120 for this one)
    assert many_connections <= min(few_connections, 2)

    # Dagster's own storage, as the UI and the daemon open it, reads the run written
    dagster_own = dg.DagsterInstance.from_config(str(tmp_path))
    try:
        assert not isinstance(dagster_own.event_log_storage, PooledSqliteEventLogStorage)
        run = dagster_own.get_run_by_id(run_id)
        assert run is not None and run.status == dg.DagsterRunStatus.SUCCESS
        assert len(dagster_own.all_logs(run_id)) == many_events
        latest = dagster_own.get_latest_materialization_event(dg.AssetKey("numbers"))
        assert latest is not None and latest.run_id == run_id
        checks = dagster_own.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
        assert [e.get_dagster_event().asset_check_evaluation_data.passed for e in checks] == [True]
        assert len(dagster_own.get_runs()) == 2
    finally:
        dagster_own.dispose()


def _database_file(path: Path) -> tuple[list[Any], list[Any], list[list[Any]]]:
    """What makes a SQLite file the one Dagster made: its schema, its revision, its journal."""
    with sqlite3.connect(path) as conn:
        pragmas = ("journal_mode", "user_version", "application_id", "page_size", "encoding")
        return (
            sorted(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")),
            conn.execute("SELECT version_num FROM alembic_version").fetchall(),
            [conn.execute(f"PRAGMA {p}").fetchall() for p in pragmas],
        )


def test_a_new_runs_shard_is_the_file_dagster_makes(tmp_path: Path, monkeypatch) -> None:
    """A run's event log file is a copy of an empty one Dagster made once for the instance: the
    same file Dagster's own storage makes for a run; a later process copies it without running
    Dagster's migration environment, and the copy is no run of Dagster's."""
    dagster_own = SqliteEventLogStorage(str(tmp_path / "dagster"))
    with dagster_own.run_connection("a-run"):
        pass
    expected = _database_file(tmp_path / "dagster" / "a-run.db")
    assert expected[1] and expected[2][0] == [("wal",)]

    made = []
    dagster_initdb = SqliteEventLogStorage._initdb
    monkeypatch.setattr(
        SqliteEventLogStorage,
        "_initdb",
        lambda self, engine, *args: (
            made.append(engine.url.database) or dagster_initdb(self, engine, *args)
        ),
    )
    ours, runs = tmp_path / "ours", []
    for run_id in ("first", "second"):  # the first process of the instance, a later one
        storage = PooledSqliteEventLogStorage(str(ours))
        with storage.run_connection(run_id) as conn:
            conn.exec_driver_sql("SELECT 1")
        storage.dispose()
        runs.append(run_id)
        assert _database_file(ours / f"{run_id}.db") == expected
        assert sorted(storage.get_all_run_ids()) == runs
    assert made[0].endswith("index.db") and len(made) == 2  # the index, the template: once


def test_commits_do_not_wait_for_the_disk_on_files_in_write_ahead_mode(
    tmp_path: Path, monkeypatch
) -> None:
    """Dagster's files (all in write-ahead mode) are written with ``synchronous=NORMAL``, as
    ol-dagster's own store; a file in another journal mode keeps SQLite's default."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    instance = sqlite_instance()
    try:
        run_id = "a-run"
        events = instance.event_log_storage
        assert isinstance(events, PooledSqliteEventLogStorage)
        runs = instance.run_storage
        # one at a time: the event log storage holds a lock while a connection is open
        for connection in (
            lambda: events.run_connection(run_id),
            events.index_connection,
            runs.connect,  # pyright: ignore[reportAttributeAccessIssue]
        ):
            with connection() as conn:
                assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
                assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
        other = PooledSqliteEventLogStorage(str(tmp_path / "other"))
        sqlite3.connect(tmp_path / "other" / "rollback.db").close()  # no journal mode set
        with other.run_connection("rollback") as conn:
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
        other.dispose()
    finally:
        instance.dispose()


CUSTOM = {"module": "ol_dagster.defs.dagster_private", "class": "PooledSqliteStorage"}


@pytest.mark.parametrize("named", ["sqlite", "custom"])
def test_named_sqlite_storage_is_opened_pooled(tmp_path: Path, monkeypatch, named) -> None:
    """A ``dagster.yaml`` naming Dagster's SQLite storage gets the same (one leaving the storage
    out: the test above); one naming ol-dagster's (docs/deploying.md) gets it in any Dagster
    process."""
    where = {"base_dir": str(tmp_path / "elsewhere")}
    storage = {"sqlite": where} if named == "sqlite" else {"custom": {**CUSTOM, "config": where}}
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump({"storage": storage}))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    instance = sqlite_instance() if named == "sqlite" else dg.DagsterInstance.get()
    try:
        assert isinstance(instance.event_log_storage, PooledSqliteEventLogStorage)
        assert (tmp_path / "elsewhere" / "history" / "runs" / "index.db").exists()
    finally:
        instance.dispose()


def test_a_relative_dagster_home_is_refused_as_dagster_does(monkeypatch) -> None:
    monkeypatch.setenv("DAGSTER_HOME", "relative/home")
    with pytest.raises(dg.DagsterInvariantViolationError, match="must be an absolute path"):
        sqlite_instance()


def test_a_runs_output_is_in_its_logs_and_still_on_the_console(
    tmp_path: Path, monkeypatch, capfd
) -> None:
    """What a run writes to stdout and stderr is in its captured logs (the UI's view of them)
    and, mirrored from there, where it went before (a thread, not ``tail`` processes), to its
    last line."""

    @dg.asset(name="talker")
    def talker() -> None:
        print("a line of the run", flush=True)  # noqa: T201 - what the test looks for
        print("\n".join(f"err {i}" for i in range(2000)), file=sys.stderr, flush=True)

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    instance = sqlite_instance()
    try:
        assert isinstance(instance.compute_log_manager, MirroredComputeLogManager)
        result = dg.materialize([talker], instance=instance)
        captured = [e for e in result.all_events if e.event_type_value == "LOGS_CAPTURED"]
        assert len(captured) == 1
        manager = instance.compute_log_manager
        log_key = manager.build_log_key_for_run(
            result.run_id, captured[0].logs_captured_data.file_key
        )
        logs = manager.get_log_data(log_key)
        assert manager.is_capture_complete(log_key)
    finally:
        instance.dispose()
    console = capfd.readouterr()
    assert "a line of the run" in (logs.stdout or b"").decode()
    assert (logs.stderr or b"").decode().count("err ") == 2000
    assert "a line of the run" in console.out
    assert "err 1999" in console.err and console.err.count("err ") == 2000


_OPEN_WHEN_TOLD = """
import os, sys, time
from ol_dagster.defs.dagster_private import sqlite_instance
go, homes = sys.argv[1], sys.argv[2:]
open(go + "." + str(os.getpid()), "w").close()  # ready
while not os.path.exists(go):
    time.sleep(0.001)
for home in homes:
    os.environ["DAGSTER_HOME"] = home
    sqlite_instance().dispose()
"""


def test_new_homes_opened_by_several_syncs_at_once_open_afterwards(tmp_path: Path) -> None:
    """Syncs started together on a new ``DAGSTER_HOME`` each create Dagster's files. All of them
    run, and each home opens afterwards in Dagster's own storage too. (Unguarded, one fails with
    "table runs already exists", or the home is left with two schema versions stamped, and every
    later open fails with "more than one head present".)"""
    homes = [tmp_path / f"home{i}" for i in range(6)]
    for home in homes:
        home.mkdir()
    go = tmp_path / "go"
    syncs = [
        subprocess.Popen(
            [sys.executable, "-c", _OPEN_WHEN_TOLD, str(go), *map(str, homes)],
            cwd=PROJECT_ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("go.*"))) < len(syncs):  # all have imported what they need
        assert all(sync.poll() is None for sync in syncs)
        assert time.monotonic() < deadline
        time.sleep(0.01)
    go.touch()
    for sync in syncs:
        _, err = sync.communicate(timeout=120)
        assert sync.returncode == 0, err[-2000:]
    for home in homes:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            assert instance.get_runs() == []
