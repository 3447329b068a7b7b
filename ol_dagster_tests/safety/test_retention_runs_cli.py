"""Retention never breaks a run, through ``ol-dagster serve``, ``sync`` and ``lineage``.

``retention.keepDays`` purged the stream batch holding a still-running run's START; the run's
COMPLETE (no inputs, no outputs: they were given at START) then stood for the whole run, and with
``lineageReplacement: JOB`` replaced the job's lineage with nothing. Now a batch holding an event
of a run that has not ended is kept, and the run's batches go together once it has ended and all
of them are past retention. Retention runs where it runs in production: the definition's
new-batches sensor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import httpx
import pytest
import yaml
from sqlalchemy import update

from ol_dagster.definitions import build_defs
from ol_dagster.store import EventStore
from ol_dagster.store.schema import batches
from ol_dagster_tests.conftest import PROJECT_ROOT, run_event
from ol_dagster_tests.receiver.test_receiver_faults import receivers

PG = "postgres://db:5432"


def _write(tmp_path: Path, store: str, catalog: str) -> Path:
    path = tmp_path / "ol_dagster.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "store": {"url": store},
                "catalogs": {"main": {"kind": "embedded", "url": catalog}},
                "retention": {"keepDays": 7},
                "definitions": [
                    {
                        "name": "runs",
                        "uuid": "33333333-3333-4333-8333-333333333333",
                        "catalog": "main",
                        "snapshotMode": "ADDITIVE",
                        "lineageReplacement": "JOB",
                        "allowedJobNamespaces": ["etl"],
                        "receiver": {"token": {"env": "OL_TEST_TOKEN_SNAP"}},
                    }
                ],
            }
        )
    )
    return path


def _cli(path: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ol_dagster.commands.cli", "--settings", str(path), *args],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env={**os.environ, "DAGSTER_HOME": str(home)},
        timeout=300,
    )


def _retention_tick(path: Path, instance: dg.DagsterInstance) -> list[str]:
    """One tick of the definition's new-batches sensor: the partitions it deletes (purged)."""
    defs = build_defs(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        sensor = defs.get_sensor_def("runs__new_batches")
    context = dg.build_sensor_context(
        instance=instance,
        instance_ref=instance.get_ref(),
        definitions=defs,
        resources=defs.resources,
        sensor_name="runs__new_batches",
    )
    with context:
        data = sensor.evaluate_tick(context)
    return [
        key
        for r in data.dynamic_partitions_requests or []
        if isinstance(r, dg.DeleteDynamicPartitionsRequest)
        for key in r.partition_keys
    ]


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_a_run_whose_start_is_past_retention_still_completes_whole(
    tmp_path: Path, request: pytest.FixtureRequest, tokens: dict[str, str], backend: str
) -> None:
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    catalog_url = f"sqlite:///{tmp_path / 'catalog.db'}"
    if backend == "postgresql":
        store_url = request.getfixturevalue("pg_url")
        catalog_url = request.getfixturevalue("pg_server").fresh_database("c")
    path = _write(tmp_path, store_url, catalog_url)
    home = tmp_path / "dagster_home"
    home.mkdir()
    store = EventStore(store_url)

    def sync() -> dict[str, Any]:
        proc = _cli(path, home, "sync")
        assert proc.returncode == 0, proc.stderr[-3000:]
        (line,) = [json.loads(x) for x in proc.stdout.splitlines() if x.strip()]
        assert line["status"] == "synced", line
        return line

    def upstream(table: str) -> set[str]:
        node = f"dataset:{PG}:{table}"
        proc = _cli(path, home, "lineage", node, "--upstream", "--depth", "1", "--json")
        assert proc.returncode == 0, proc.stderr
        return {e["from"] for e in json.loads(proc.stdout)["edges"]}

    def age_everything() -> None:
        """Every synced batch synced 30 days ago: past ``keepDays``."""
        with store.engine.begin() as conn:
            conn.execute(
                update(batches)
                .where(batches.c.synced_at.is_not(None))
                .values(synced_at=datetime.now(UTC).replace(tzinfo=None) - timedelta(days=30))
            )

    long_run = str(uuid.uuid4())
    try:
        with (
            receivers(path, [tmp_path / "serve.log"]) as (served,),
            dg.instance_for_test() as sensor_instance,
        ):

            def post(event: dict[str, Any]) -> int:
                with httpx.Client(base_url=served.url, timeout=30) as client:
                    answer = client.post(
                        "/api/v1/lineage",
                        json=event,
                        headers={"Authorization": f"Bearer {tokens['snap']}"},
                    )
                assert answer.status_code == 200, answer.text
                return answer.json()["batchId"]

            # a short run that ends in its batch, and the START of a long one
            short = post(
                run_event("etl", "short", inputs=[(PG, "raw.s")], outputs=[(PG, "mart.s")])
            )
            sync()
            started = post(
                run_event(
                    "etl",
                    "long",
                    event_type="START",
                    run_id=long_run,
                    inputs=[(PG, "raw.orders")],
                    outputs=[(PG, "mart.kpi")],
                )
            )
            assert started != short
            sync()
            assert upstream("mart.kpi") == {"job:etl:long"}

            age_everything()
            purged = _retention_tick(path, sensor_instance)

            assert purged == [str(short)]  # the ended run's batch goes, the START's stays
            assert [b.id for b in store.batches("runs")] == [started]

            # the run ends weeks later, naming no dataset: its START still counts
            ended = post(run_event("etl", "long", event_type="COMPLETE", run_id=long_run))
            line = sync()
            assert line["batchId"] == ended
            assert line["cleanup"]["skippedReason"] is None
            assert line["cleanup"]["plannedRemovals"] == 0, line["cleanup"]
            assert upstream("mart.kpi") == {"job:etl:long"}

            # ended, and every batch of it past retention: its batches go together
            age_everything()
            assert sorted(_retention_tick(path, sensor_instance)) == sorted(
                [str(started), str(ended)]
            )
            assert store.batches("runs") == []
            assert upstream("mart.kpi") == {"job:etl:long"}  # the catalog keeps what was synced
    finally:
        store.dispose()
