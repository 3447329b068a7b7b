"""The analyses and the log store, wired into Dagster: tables, the schedule check, the catalog."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
from sqlalchemy import select

from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.catalog.embedded.tables import entities
from ol_dagster.commands.headless import sync_batches
from ol_dagster.defs.analysis import JOBS_ON_SCHEDULE, RUN_PROFILES, analyses
from ol_dagster.defs.resources import StoreResource
from ol_dagster.receiver.intake import sort_events
from ol_dagster.settings import load_settings
from ol_dagster.store import EventStore
from ol_dagster_tests.conftest import run_event


def _runs(name: str, starts: list[datetime], *, fail_at: int | None = None) -> list[dict]:
    events = []
    for i, start in enumerate(starts):
        run_id = f"00000000-0000-4000-8000-{abs(hash((name, i))) % 10**12:012d}"
        for event_type, at in (
            ("START", start),
            ("FAIL" if i == fail_at else "COMPLETE", start + timedelta(minutes=5)),
        ):
            events.append(
                run_event(
                    "etl",
                    name,
                    event_type=event_type,
                    run_id=run_id,
                    event_time=at.isoformat(),
                    inputs=[("postgres://db:5432", "shop.public.orders")],
                    outputs=[("postgres://db:5432", f"shop.kpi.{name}")],
                )
            )
    return events


def _history(now: datetime) -> list[dict]:
    hourly = [now - timedelta(hours=h) for h in range(24, 0, -1)]
    stopped = [now - timedelta(days=d) for d in range(12, 4, -1)]  # daily, last run 5 days ago
    return _runs("hourly_kpi", hourly, fail_at=3) + _runs("daily_export", stopped)


def _store_and_sync(path: Path, instance: dg.DagsterInstance, events: list[dict]) -> None:
    settings = load_settings(path)
    store = EventStore(settings.store.url)
    intake = sort_events(events, ["*"])
    assert not intake.rejected, intake.rejected
    store.add_posted_batch("add", intake.accepted, received=intake.received)
    store.dispose()
    lines = list(sync_batches(str(path), definition="add", instance=instance))
    assert lines and lines[-1]["status"] == "synced", lines


def test_analyses_show_tables_warn_on_a_stopped_job_and_annotate_the_catalog(
    write_settings, tmp_path
):
    path = write_settings()
    home = tmp_path / "home"
    home.mkdir()
    now = datetime.now(UTC)
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        _store_and_sync(path, instance, _history(now))
        result = dg.materialize(
            [analyses],
            instance=instance,
            resources={"ol_store": StoreResource(settings_path=str(path))},
        )
        assert result.success
        (check,) = [
            c for c in result.get_asset_check_evaluations() if c.check_name == JOBS_ON_SCHEDULE
        ]
        assert check.passed is False
        assert check.severity == dg.AssetCheckSeverity.WARN
        assert "etl.daily_export" in (check.description or "")
        assert "hourly_kpi" not in (check.description or "")
        meta = instance.get_latest_materialization_event(
            RUN_PROFILES
        ).asset_materialization.metadata
        table = meta["profiles"].value
        assert "HOURLY" in table and "DAILY" in table
        assert meta["jobs"].value == 2

    settings = load_settings(path)
    catalog = EmbeddedCatalog(settings.catalogs["other"].url)  # add's catalog
    try:
        with catalog.engine.connect() as conn:
            analysis = conn.execute(
                select(entities.c.analysis).where(
                    entities.c.ol_namespace == "etl", entities.c.ol_name == "hourly_kpi"
                )
            ).scalar_one()
    finally:
        catalog.close()
    profile = analysis["runProfile"]
    assert profile["schedule"] == "HOURLY"
    assert abs(profile["failureRate"] - 1 / 24) < 1e-3


def test_the_log_store_keeps_every_accepted_event_as_a_file(write_settings, tmp_path):
    folder = tmp_path / "logs"
    data = yaml_settings_with_log_store(write_settings, folder)
    home = tmp_path / "home"
    home.mkdir()
    hostile = run_event("etl", "../../escape", outputs=[("s3://b", "x")])
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        _store_and_sync(data, instance, [run_event("etl", "daily"), hostile])
    files = [p for p in folder.rglob("*.json")]
    assert len(files) == 2
    assert all(p.resolve().is_relative_to(folder.resolve()) for p in files)
    names = sorted(json.loads(p.read_text())["job"]["name"] for p in files)
    assert names == ["../../escape", "daily"]


def yaml_settings_with_log_store(write_settings, folder: Path) -> Path:
    path = write_settings()
    import yaml

    data = yaml.safe_load(path.read_text())
    data["definitions"][1]["logStore"] = {"folder": str(folder)}
    path.write_text(yaml.safe_dump(data))
    return path
