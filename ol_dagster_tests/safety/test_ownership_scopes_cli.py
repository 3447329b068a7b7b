"""A flow's owner is its job, compared with equality, through the receiver and the commands.

Two definitions write one embedded catalog with disjoint namespaces: ``snap`` owns ``etl``,
``add`` owns ``ETL`` and ``etl|x``. Scopes used to be strings matched with SQL ``LIKE``: on
SQLite a snapshot of ``etl`` removed ``ETL``'s flows (``LIKE`` ignores case there), and on any
database ``ol:etl|`` was a prefix of ``etl|x``'s scopes. After ``snap``'s snapshot stops
describing ``etl.load``, ``ol-dagster sync`` removes that job's lineage, and
``ol-dagster lineage`` still shows ``add``'s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from starlette.testclient import TestClient

from ol_dagster.receiver.app import create_app
from ol_dagster.settings import load_settings
from ol_dagster.store import EventStore
from ol_dagster_tests.conftest import PROJECT_ROOT, TEST_DB_ENV, run_event

PG = "postgres://db:5432"
KEPT = [f"keep{i}" for i in range(8)]  # what snap still describes: the removal is a small share


def _definition(name: str, uuid: str, token_env: str, namespaces: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "uuid": uuid,
        "catalog": "main",
        "snapshotMode": "BATCH_SNAPSHOT",
        "allowedJobNamespaces": namespaces,
        "receiver": {"token": {"env": token_env}},
    }


def _job(namespace: str, name: str) -> dict[str, Any]:
    return run_event(namespace, name, inputs=[(PG, f"raw.{name}")], outputs=[(PG, f"out.{name}")])


def _cli(settings: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ol_dagster.commands.cli", "--settings", str(settings), *args],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env={**os.environ, "DAGSTER_HOME": str(home)},
        timeout=300,
    )


def _sync(settings: Path, home: Path, definition: str) -> list[dict[str, Any]]:
    proc = _cli(settings, home, "sync", "--definition", definition)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def _lineage(settings: Path, home: Path, node: str, definition: str) -> dict[str, Any] | None:
    """``ol-dagster lineage NODE --json``; None when the catalog has no such node."""
    proc = _cli(settings, home, "lineage", node, "--definition", definition, "--json")
    if proc.returncode == 1 and "not in the catalog" in proc.stderr:
        return None
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_snapshot_of_etl_leaves_the_lineage_of_ETL_and_of_etl_x(
    tmp_path: Path, request: pytest.FixtureRequest, tokens: dict[str, str]
) -> None:
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    catalog_url = f"sqlite:///{tmp_path / 'catalog.db'}"
    if os.environ.get(TEST_DB_ENV) == "postgresql":
        store_url = request.getfixturevalue("pg_url")
        catalog_url = request.getfixturevalue("pg_server").fresh_database("c")
    settings = tmp_path / "ol_dagster.yaml"
    settings.write_text(
        yaml.safe_dump(
            {
                "store": {"url": store_url},
                "catalogs": {"main": {"kind": "embedded", "url": catalog_url}},
                "definitions": [
                    _definition(
                        "snap",
                        "11111111-1111-4111-8111-111111111111",
                        "OL_TEST_TOKEN_SNAP",
                        ["etl"],
                    ),
                    _definition(
                        "add",
                        "22222222-2222-4222-8222-222222222222",
                        "OL_TEST_TOKEN_ADD",
                        ["ETL", "etl|x"],
                    ),
                ],
            }
        )
    )
    home = tmp_path / "dagster_home"
    home.mkdir()
    loaded = load_settings(settings)
    store = EventStore(loaded.store.url)
    client = TestClient(create_app(loaded, store))

    def post(token: str, events: list[dict[str, Any]]) -> None:
        response = client.post(
            "/api/v1/lineage/batch",
            json={"events": events},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status_code == 200, response.text

    try:
        post(tokens["add"], [_job("ETL", "load"), _job("etl|x", "load")])
        (added,) = _sync(settings, home, "add")
        assert added["status"] == "synced"
        theirs = {
            node: _lineage(settings, home, node, "add")
            for node in ("job:ETL:load", "job:etl|x:load")
        }
        assert all(found is not None and len(found["edges"]) == 2 for found in theirs.values())

        post(tokens["snap"], [_job("etl", "load"), *(_job("etl", k) for k in KEPT)])
        post(tokens["snap"], [_job("etl", k) for k in KEPT])
        first, second = _sync(settings, home, "snap")

        assert first["status"] == second["status"] == "synced"
        assert second["cleanup"]["skippedReason"] is None
        assert second["cleanup"]["removedJobs"] == ["etl.load"]
        assert _lineage(settings, home, "job:etl:load", "snap") is None
        for node, before in theirs.items():
            assert _lineage(settings, home, node, "add") == before, node
    finally:
        client.close()
        store.dispose()
