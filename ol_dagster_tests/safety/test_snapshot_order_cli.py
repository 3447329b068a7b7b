"""Snapshots posted over HTTP are ordered by their producer's ``OL-Snapshot-Sequence`` when they
carry one, by their arrival otherwise; an older snapshot arriving after a newer one (another
connection, a retry) is SUPERSEDED and brings nothing back. Through ``ol-dagster serve``, ``sync``
and ``lineage``; a malformed sequence is refused with the header, the value and the rule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from starlette.testclient import TestClient

from ol_dagster.receiver.app import create_app
from ol_dagster.settings import load_settings
from ol_dagster.snapshot_order import HTTP_HEADER
from ol_dagster.store import EventStore
from ol_dagster_tests.conftest import PROJECT_ROOT, run_event
from ol_dagster_tests.receiver.test_receiver_faults import receivers

PG = "postgres://db:5432"
SNAP_UUID = "11111111-1111-4111-8111-111111111111"


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
                        "uuid": SNAP_UUID,
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


def _load(name: str) -> dict[str, Any]:
    return run_event("etl", name, inputs=[(PG, f"raw.{name}")], outputs=[(PG, f"mart.{name}")])


def _cli(path: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ol_dagster.commands.cli", "--settings", str(path), *args],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env={**os.environ, "DAGSTER_HOME": str(home)},
        timeout=300,
    )


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_an_older_numbered_snapshot_posted_after_a_newer_one_is_superseded(
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

    def sync() -> list[dict[str, Any]]:
        proc = _cli(path, home, "sync", "--definition", "snap")
        assert proc.returncode == 0, proc.stderr[-3000:]
        lines = [json.loads(x) for x in proc.stdout.splitlines() if x.strip()]
        assert all(line["status"] == "synced" for line in lines), lines
        return lines

    def upstream(table: str) -> set[str]:
        node = f"dataset:{PG}:{table}"
        proc = _cli(path, home, "lineage", node, "--upstream", "--depth", "1", "--json")
        assert proc.returncode == 0, proc.stderr
        return {e["from"] for e in json.loads(proc.stdout)["edges"]}

    with receivers(path, [tmp_path / "serve.log"]) as (served,):

        def post(events: list[dict[str, Any]], sequence: str | None) -> dict[str, Any]:
            headers = {"Authorization": f"Bearer {tokens['snap']}"}
            if sequence is not None:
                headers[HTTP_HEADER] = sequence
            # a client, and a connection, of its own for every post
            with httpx.Client(base_url=served.url, timeout=30) as client:
                answer = client.post(
                    "/api/v1/lineage/batch", json={"events": events}, headers=headers
                )
            assert answer.status_code == 200, answer.text
            assert answer.json()["wholeSnapshot"] is True
            return answer.json()

        post([_load("a"), _load("b")], "1")
        sync()
        assert upstream("mart.b") == {"job:etl:b"}

        # the producer's snapshot 3 (without b) arrives before its snapshot 2 (with b)
        newer = post([_load("a")], "3")
        older = post([_load("a"), _load("b")], "2")
        assert f"({HTTP_HEADER} 3)" in newer["message"]
        assert older["batchId"] > newer["batchId"]

        newer_line, older_line = sync()
        assert newer_line["batchId"] == newer["batchId"]
        assert newer_line["cleanup"]["removedJobs"] == ["etl.b"]
        assert older_line["upload"] == {
            "skippedReason": "SUPERSEDED",
            "supersededBy": newer["batchId"],
            "runId": older_line["runId"],
        }
        assert older_line["cleanup"]["skippedReason"] == "SUPERSEDED"
        assert upstream("mart.b") == set()  # not brought back by the older snapshot
        assert upstream("mart.a") == {"job:etl:a"}

        # a snapshot without a sequence is older than every numbered one of its definition
        unnumbered = post([_load("a"), _load("b")], None)
        assert HTTP_HEADER not in unnumbered["message"]
        (line,) = sync()
        assert line["upload"]["skippedReason"] == "SUPERSEDED"
        assert line["upload"]["supersededBy"] == newer["batchId"]
        assert upstream("mart.b") == set()


@pytest.mark.parametrize("value", ["-1", "2.5", "1e6", "12a", "", "9" * 19, "2026-11-01T00:00:00Z"])
def test_a_malformed_sequence_is_refused_and_nothing_is_stored(
    write_settings, tokens: dict[str, str], value: str
) -> None:
    settings = load_settings(write_settings(allowedJobNamespaces=["etl"]))
    store = EventStore(settings.store.url)
    try:
        with TestClient(create_app(settings, store)) as client:
            answer = client.post(
                "/api/v1/lineage/batch",
                json={"events": [_load("a")]},
                headers={"Authorization": f"Bearer {tokens['snap']}", HTTP_HEADER: value},
            )
        assert answer.status_code == 400
        body = answer.json()
        assert body["message"] == (
            f"{HTTP_HEADER} must be a decimal integer from 0 to {'9' * 18} (ASCII digits "
            f"only, e.g. a Unix time in milliseconds), not {value!r}; nothing of the post was "
            "stored"
        )
        assert (body["batchId"], body["retriable"]) == (None, False)
        assert store.batches() == []
    finally:
        store.dispose()


def test_a_sequence_on_a_single_event_post_is_refused(write_settings, tokens) -> None:
    settings = load_settings(write_settings(allowedJobNamespaces=["etl"]))
    store = EventStore(settings.store.url)
    try:
        with TestClient(create_app(settings, store)) as client:
            answer = client.post(
                "/api/v1/lineage",
                json=_load("a"),
                headers={"Authorization": f"Bearer {tokens['snap']}", HTTP_HEADER: "4"},
            )
        assert answer.status_code == 400
        assert answer.json()["message"].startswith(f"{HTTP_HEADER} orders whole snapshots")
        assert store.batches() == []
    finally:
        store.dispose()
