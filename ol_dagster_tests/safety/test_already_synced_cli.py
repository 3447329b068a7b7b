"""One sync of a batch: two ``ol-dagster sync`` processes started together both synced every batch
in turn (safe, but twice the work, and twice the window in which an older snapshot is the
catalog's state). A sync that finds a batch synced by another process after it listed it now skips
it: ``ALREADY_SYNCED`` on its line, with the run that synced it, and in its run's metadata.

Through ``ol-dagster sync``: once deterministically, the other sync holding the definition's real
lock while the command lists the batch and waits for it; once with two processes started
together."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml
from starlette.testclient import TestClient

from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.receiver.app import create_app
from ol_dagster.settings import load_settings
from ol_dagster.store import BatchStatus, EventStore
from ol_dagster.store.holder import this_process
from ol_dagster.sync.batch import sync_batch
from ol_dagster_tests.conftest import PROJECT_ROOT, run_event

PG = "postgres://db:5432"


def _write(tmp_path: Path, store: str, catalog: str) -> Path:
    path = tmp_path / "ol_dagster.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "store": {"url": store},
                "catalogs": {"main": {"kind": "embedded", "url": catalog}},
                "definitions": [
                    {
                        "name": "snap",
                        "uuid": "11111111-1111-4111-8111-111111111111",
                        "catalog": "main",
                        "snapshotMode": "BATCH_SNAPSHOT",
                        "allowedJobNamespaces": ["etl"],
                        "receiver": {"token": {"env": "OL_TEST_TOKEN_SNAP"}},
                    }
                ],
            }
        )
    )
    return path


def _urls(tmp_path: Path, request: pytest.FixtureRequest, backend: str) -> tuple[str, str]:
    if backend == "postgresql":
        return (
            request.getfixturevalue("pg_url"),
            request.getfixturevalue("pg_server").fresh_database("c"),
        )
    return f"sqlite:///{tmp_path / 'store.db'}", f"sqlite:///{tmp_path / 'catalog.db'}"


def _make_instance(home: Path) -> None:
    """Dagster's SQLite storage made before a command starts: two processes creating it at once
    can both stamp its schema version, and every later open then fails on two heads."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert instance.get_runs() == []


def _sync_cmd(path: Path, home: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ol_dagster.commands.cli", "--settings", str(path), "sync"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=PROJECT_ROOT,
        env={**os.environ, "DAGSTER_HOME": str(home)},
    )


def _lines(proc: subprocess.Popen[str]) -> list[dict[str, Any]]:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def _post(client: TestClient, token: str, names: list[str]) -> int:
    events = [
        run_event("etl", n, inputs=[(PG, f"raw.{n}")], outputs=[(PG, f"mart.{n}")]) for n in names
    ]
    answer = client.post(
        "/api/v1/lineage/batch",
        json={"events": events},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["batchId"]


BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


def _upload_started(instance: dg.DagsterInstance) -> bool:
    """Whether the command's first run has started its upload step."""
    runs = instance.get_runs(limit=1)
    return bool(runs) and any(
        "catalog_upload" in (e.step_key or "")
        for e in instance.all_logs(runs[0].run_id, of_type=dg.DagsterEventType.STEP_START)
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_batch_synced_by_another_sync_while_the_command_waited_is_not_synced_again(
    tmp_path: Path, request: pytest.FixtureRequest, tokens: dict[str, str], backend: str
) -> None:
    path = _write(tmp_path, *_urls(tmp_path, request, backend))
    settings = load_settings(path)
    definition = settings.definition("snap")
    home = tmp_path / "dagster_home"
    home.mkdir()
    store = EventStore(settings.store.url)
    catalog = EmbeddedCatalog(settings.catalogs["main"].url)
    client = TestClient(create_app(settings, store))
    try:
        _post(client, tokens["snap"], ["a", "b"])
        batch_id = _post(client, tokens["snap"], ["a"])  # a snapshot without b
        first = _post(client, tokens["snap"], ["a", "b"])
        assert first > batch_id
        # the first snapshot is synced beforehand: only `batch_id` and `first` are pending
        sync_batch(store, catalog, definition, batch_id - 1, run_id="earlier-sync")

        # another sync holds the definition's lock (the real one, in the event store)
        assert (
            store.acquire_sync_lock("snap", "other-sync", lease_seconds=600, process=this_process())
            is None
        )
        _make_instance(home)
        command = _sync_cmd(path, home)
        # the command has listed the batches and its run for the first has reached its upload
        # step: it waits for the lock. (Not merely started: a run that has not yet taken the
        # batch in when the other sync finishes it keeps the other's result instead.)
        with dg.DagsterInstance.from_config(str(home)) as instance:
            deadline = time.monotonic() + 300
            while not _upload_started(instance):
                assert command.poll() is None, command.communicate()
                assert time.monotonic() < deadline, "ol-dagster sync reached no upload step"
                time.sleep(0.2)
        # meanwhile the other sync syncs it (under the lock it holds), and lets go
        _, report = sync_batch(store, catalog, definition, batch_id, run_id="other-sync")
        assert report["removedJobs"] == ["etl.b"]

        skipped, synced = _lines(command)

        assert skipped["batchId"] == batch_id
        assert skipped["status"] == "synced"
        assert skipped["skippedReason"] == "ALREADY_SYNCED"
        assert skipped["syncedInRun"] == "other-sync"
        assert skipped["upload"] == {"skippedReason": "ALREADY_SYNCED", "syncedInRun": "other-sync"}
        assert skipped["cleanup"]["skippedReason"] == "ALREADY_SYNCED"
        assert (skipped["cleanup"]["calls"], skipped["cleanup"]["removedJobs"]) == ([], [])
        # what the other sync recorded stands
        stored = store.get_batch(batch_id)
        assert stored.cleanup_report is not None
        assert stored.cleanup_report["removedJobs"] == ["etl.b"]
        # the run the command started says so in its metadata
        with dg.DagsterInstance.from_config(str(home)) as instance:
            run = instance.get_run_by_id(skipped["runId"])
            assert run is not None and run.is_success
            records = instance.get_records_for_run(skipped["runId"]).records
            metadata = [
                r.event_log_entry.dagster_event.event_specific_data.materialization.metadata
                for r in records
                if r.event_log_entry.dagster_event is not None
                and r.event_log_entry.dagster_event.is_step_materialization
            ]
        reasons = {m["skippedReason"].value for m in metadata if "skippedReason" in m}
        assert reasons == {"ALREADY_SYNCED"}
        # the next batch, which nobody else synced, was synced by the command as usual
        assert synced["batchId"] == first and "skippedReason" not in synced
        assert synced["cleanup"]["skippedReason"] is None
        assert store.get_batch(first).status is BatchStatus.SYNCED
    finally:
        client.close()
        catalog.close()
        store.dispose()


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_syncs_started_together_sync_each_batch_once(
    tmp_path: Path, request: pytest.FixtureRequest, tokens: dict[str, str], backend: str
) -> None:
    path = _write(tmp_path, *_urls(tmp_path, request, backend))
    settings = load_settings(path)
    home = tmp_path / "dagster_home"
    home.mkdir()
    store = EventStore(settings.store.url)
    client = TestClient(create_app(settings, store))
    try:
        posted = [
            _post(client, tokens["snap"], ["a", "b", "c"]),
            _post(client, tokens["snap"], ["a", "b"]),
            _post(client, tokens["snap"], ["a"]),
        ]
        _make_instance(home)
        first, second = _sync_cmd(path, home), _sync_cmd(path, home)
        lines = _lines(first) + _lines(second)
    finally:
        client.close()

    try:
        for batch_id in posted:
            mine = [line for line in lines if line.get("batchId") == batch_id]
            done = [line for line in mine if line.get("skippedReason") != "ALREADY_SYNCED"]
            assert len(done) == 1, mine  # synced once, by one of the two
            assert done[0]["status"] == "synced"
            others = [line for line in mine if line not in done]
            assert all(o["syncedInRun"] == done[0]["runId"] for o in others), mine
        removed = [j for line in lines for j in line["cleanup"]["removedJobs"]]
        assert sorted(removed) == ["etl.b", "etl.c"]  # each removal made and counted once
        assert all(b.status is BatchStatus.SYNCED for b in store.batches("snap"))
    finally:
        store.dispose()


def test_a_partition_added_by_another_sync_between_the_check_and_the_insert_is_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race two syncs started together run into: both find the batch's partition missing, the
    other inserts it first, and this one's insert fails on the storage's unique key. Made
    deterministic: the other sync's insert lands between this one's look-up and its insert, which
    then runs on the real storage."""
    from dagster._core.storage.event_log.schema import DynamicPartitionsTable

    from ol_dagster.commands.headless import _add_partition

    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        storage: Any = instance.event_log_storage
        real_add = instance.add_dynamic_partitions

        def lose_the_race(partitions: str, keys: list[str]) -> None:
            real_add(partitions, keys)  # the other sync, first
            with storage.index_connection() as conn:  # this one's insert, after its stale look-up
                conn.execute(
                    DynamicPartitionsTable.insert(),
                    [dict(partitions_def_name=partitions, partition=k) for k in keys],
                )

        monkeypatch.setattr(instance, "add_dynamic_partitions", lose_the_race)
        _add_partition(instance, "snap__batches", "1")
        assert instance.get_dynamic_partitions("snap__batches") == ["1"]
