"""The log store never blocks the catalog: an event it cannot write waits, the sync goes on.

A file where the log store needs a directory is how a write fails here: tests run as root in CI,
where permissions stop nothing, but no one can make a directory where a file is. The events of the
other jobs are written, the catalog gets every event, the ``log_store_written`` check warns with
the count and the reason, and the next sync writes what waited.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest
import yaml
from sqlalchemy import select

from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.catalog.embedded.tables import JOB, entities
from ol_dagster.commands.headless import sync_batches
from ol_dagster.defs import constants as C
from ol_dagster.logstore import encode_component, iter_logged_files
from ol_dagster.logstore_backlog import backlog_key, log_batch
from ol_dagster.receiver.intake import sort_events
from ol_dagster.settings import load_settings
from ol_dagster.store import BatchStatus, EventStore
from ol_dagster_tests.conftest import run_event


def _add(store: EventStore, definition: str, events: list[dict]) -> int:
    intake = sort_events(events, ["*"])
    assert not intake.rejected, intake.rejected
    return store.add_posted_batch(definition, intake.accepted, received=intake.received)


def _block(folder: Path, namespace: str) -> Path:
    """A file where the namespace's directory would go: every write under it fails."""
    folder.mkdir(parents=True, exist_ok=True)
    blocker = folder / encode_component(namespace)
    blocker.write_text("not a directory")
    return blocker


def _logged_jobs(folder: Path) -> list[str]:
    return sorted(json.loads(p.read_bytes())["job"]["name"] for p in iter_logged_files(folder))


# -- the core, on a real store, without Dagster ---------------------------------------------------


def test_an_unwritable_event_waits_and_the_next_batch_writes_it(event_store: EventStore, tmp_path):
    folder = tmp_path / "logs"
    blocker = _block(folder, "blocked")
    first = _add(
        event_store,
        "d",
        [run_event("etl", f"job_{i}") for i in range(5)]
        + [run_event("blocked", "a"), run_event("blocked", "b")],
    )

    outcome = log_batch(event_store, "d", str(folder), first)

    assert (outcome.written, outcome.failed, outcome.pending) == (5, 2, 2)
    assert outcome.reason is not None and "Not a directory" in outcome.reason
    assert outcome.reason.endswith("2 event(s)")
    assert _logged_jobs(folder) == [f"job_{i}" for i in range(5)]

    # still blocked: the backlog keeps its events, and a new batch is written all the same
    second = _add(event_store, "d", [run_event("etl", "later")])
    outcome = log_batch(event_store, "d", str(folder), second)
    assert (outcome.written, outcome.retried, outcome.failed, outcome.pending) == (1, 0, 2, 2)

    blocker.unlink()
    third = _add(event_store, "d", [run_event("etl", "last")])
    outcome = log_batch(event_store, "d", str(folder), third)

    assert (outcome.written, outcome.retried, outcome.failed, outcome.pending) == (1, 2, 0, 0)
    assert _logged_jobs(folder) == ["a", "b", *[f"job_{i}" for i in range(5)], "last", "later"]
    assert event_store.lineage_state(backlog_key("d")) == {"pending": {}}


def test_a_batch_that_fails_whole_is_kept_as_one_range(event_store: EventStore, tmp_path):
    folder = tmp_path / "logs"
    folder.write_text("the log store folder is a file")  # like a full disk: every write fails
    batch = _add(event_store, "d", [run_event("etl", f"job_{i}") for i in range(300)])

    outcome = log_batch(event_store, "d", str(folder), batch)

    assert (outcome.written, outcome.failed, outcome.pending) == (0, 300, 300)
    assert event_store.lineage_state(backlog_key("d")) == {"pending": {str(batch): [[0, 299]]}}
    # the backlog of another definition is its own
    assert event_store.lineage_state(backlog_key("other")) is None


def test_events_purged_before_they_were_written_are_counted_lost(event_store, tmp_path):
    folder = tmp_path / "logs"
    blocker = _block(folder, "blocked")
    old = _add(event_store, "d", [run_event("blocked", "a"), run_event("etl", "x")])
    log_batch(event_store, "d", str(folder), old)
    # retention purges synced batches, with the events the log store still waited for
    # (a newer batch first: SQLite may give the newest batch's id again once it is deleted)
    newer = _add(event_store, "d", [run_event()])
    event_store.set_status(old, BatchStatus.SYNCED)
    assert event_store.purge_synced("d", before=datetime(2999, 1, 1, tzinfo=UTC)) == [old]
    blocker.unlink()

    outcome = log_batch(event_store, "d", str(folder), newer)

    assert (outcome.lost, outcome.retried, outcome.pending) == (1, 0, 0)


def test_a_name_too_long_for_the_file_system_fails_alone(event_store: EventStore, tmp_path):
    """A path deeper than PATH_MAX: the file system refuses it (ENAMETOOLONG), even to root."""
    folder = tmp_path / ("f" * 200)
    deep = folder
    for i in range(25):  # 25 levels of 200 characters: well past 4,096 bytes
        deep = deep / (str(i) * 200)[:200]
    batch = _add(event_store, "d", [run_event("etl", "fine")])
    # the folder itself is a path too long to make: every event fails alone, none is lost
    outcome = log_batch(event_store, "d", str(deep), batch)

    assert (outcome.written, outcome.failed, outcome.pending) == (0, 1, 1)
    assert outcome.reason is not None and "ENAMETOOLONG" in outcome.reason


# -- through Dagster: the sync goes on and the check warns -----------------------------------------


@pytest.fixture
def log_settings(write_settings, tmp_path) -> tuple[Path, Path]:
    folder = tmp_path / "logs"
    path = write_settings()
    data = yaml.safe_load(path.read_text())
    data["definitions"][1]["logStore"] = {"folder": str(folder)}
    path.write_text(yaml.safe_dump(data))
    return path, folder


def _post_and_sync(path: Path, instance, events: list[dict]) -> dict:
    settings = load_settings(path)
    store = EventStore(settings.store.url)
    try:
        _add(store, "add", events)
    finally:
        store.dispose()
    (line,) = sync_batches(str(path), definition="add", instance=instance)
    return line


def _catalog_jobs(path: Path) -> set[str]:
    catalog = EmbeddedCatalog(load_settings(path).catalogs["other"].url)  # add's catalog
    try:
        with catalog.engine.connect() as conn:
            rows = conn.execute(
                select(entities.c.ol_namespace, entities.c.ol_name).where(entities.c.type == JOB)
            ).all()
    finally:
        catalog.close()
    return {f"{ns}.{name}" for ns, name in rows}


def _check(instance, run_id: str) -> dg.AssetCheckEvaluation:
    (evaluation,) = [
        e.dagster_event.event_specific_data
        for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
        if e.dagster_event.event_specific_data.check_name == C.LOG_STORE_WRITTEN
    ]
    return evaluation


def test_the_sync_goes_on_and_the_check_warns_then_the_next_sync_writes(log_settings, tmp_path):
    path, folder = log_settings
    blocker = _block(folder, "blocked")
    events = [run_event("etl", f"job_{i}") for i in range(30)] + [run_event("blocked", "stuck")]
    home = tmp_path / "home"
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        line = _post_and_sync(path, instance, events)

        assert line["status"] == "synced", line
        assert line["checks"][C.LOG_STORE_WRITTEN] is False
        assert _catalog_jobs(path) >= {"blocked.stuck", *(f"etl.job_{i}" for i in range(30))}
        check = _check(instance, line["runId"])
        assert check.severity == dg.AssetCheckSeverity.WARN
        assert "1 event(s) not written" in (check.description or "")
        assert "Not a directory" in (check.description or "")
        assert check.metadata["failed"].value == 1 and check.metadata["pending"].value == 1
        assert len(_logged_jobs(folder)) == 30

        blocker.unlink()
        line = _post_and_sync(path, instance, [run_event("etl", "next")])

        assert line["status"] == "synced" and line["checks"][C.LOG_STORE_WRITTEN] is True
        check = _check(instance, line["runId"])
        assert check.metadata["retried"].value == 1 and check.metadata["pending"].value == 0
    assert "stuck" in _logged_jobs(folder) and "next" in _logged_jobs(folder)
