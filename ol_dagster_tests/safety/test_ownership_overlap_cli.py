"""Two definitions on one catalog that can both own a job namespace, through ``ol-dagster``.

They used to load without a word (the default ``["*"]`` beside ``["fin"]``, or ``["fin"]`` twice),
and one's snapshot of a single event removed the other's flows. Now every command refuses such
settings before it touches anything: one line, exit 2, both definitions, the catalog and a
namespace both admit. A namespace both declare in ``sharedJobNamespaces`` is written by both and
cut by neither (days only), while each keeps the cutoff over its own namespaces.
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
from ol_dagster_tests.conftest import PROJECT_ROOT, TOKENS, run_event

FIN_UUID = "11111111-1111-4111-8111-111111111111"
REST_UUID = "22222222-2222-4222-8222-222222222222"
PG = "postgres://db:5432"


def _definition(name: str, uuid: str, token: str, **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "uuid": uuid,
        "catalog": "main",
        "snapshotMode": "BATCH_SNAPSHOT",
        "receiver": {"token": {"env": token}},
        **more,
    }


def _write(tmp_path: Path, definitions: list[dict[str, Any]], **urls: str) -> Path:
    path = tmp_path / "ol_dagster.yaml"
    store = urls.get("store", f"sqlite:///{tmp_path / 'store.db'}")
    catalog = urls.get("catalog", f"sqlite:///{tmp_path / 'catalog.db'}")
    path.write_text(
        yaml.safe_dump(
            {
                "store": {"url": store},
                "catalogs": {"main": {"kind": "embedded", "url": catalog}},
                "definitions": definitions,
            }
        )
    )
    return path


def _cli(path: Path, *args: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in TOKENS}
    if home is not None:
        env = {**os.environ, "DAGSTER_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "ol_dagster.commands.cli", "--settings", str(path), *args],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env=env,
        timeout=300,
    )


@pytest.mark.parametrize(
    "command",
    [
        ["sync"],
        ["serve", "--port", "0"],
        ["check"],
        ["lineage", "job:fin:load", "--definition", "fin"],
    ],
    ids=["sync", "serve", "check", "lineage"],
)
def test_every_command_refuses_two_owners_of_one_namespace_on_one_catalog(
    tmp_path: Path, command: list[str]
) -> None:
    path = _write(
        tmp_path,
        [
            _definition("fin", FIN_UUID, "OL_TEST_TOKEN_SNAP", allowedJobNamespaces=["fin"]),
            _definition("rest", REST_UUID, "OL_TEST_TOKEN_ADD"),  # the default: ["*"]
        ],
    )

    proc = _cli(path, *command)

    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    (line,) = proc.stderr.splitlines()
    assert line.startswith("ol-dagster: ") and "Traceback" not in proc.stderr
    assert "definitions fin and rest both feed catalog 'main'" in line
    assert "both admit job namespace 'fin'" in line
    assert "sharedJobNamespaces" in line
    assert proc.stdout == ""
    # refused before anything was opened: no store, no catalog
    assert not (tmp_path / "store.db").exists() and not (tmp_path / "catalog.db").exists()


def _job(namespace: str, name: str, source: str, target: str) -> dict[str, Any]:
    return run_event(namespace, name, inputs=[(PG, source)], outputs=[(PG, target)])


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_a_shared_namespace_is_written_by_both_and_cut_by_neither(
    tmp_path: Path, request: pytest.FixtureRequest, tokens: dict[str, str], backend: str
) -> None:
    urls = {}
    if backend == "postgresql":
        urls["store"] = request.getfixturevalue("pg_url")
        urls["catalog"] = request.getfixturevalue("pg_server").fresh_database("c")
    path = _write(
        tmp_path,
        [
            _definition(
                "fin",
                FIN_UUID,
                "OL_TEST_TOKEN_SNAP",
                allowedJobNamespaces=["fin"],
                sharedJobNamespaces=["common"],
            ),
            _definition(
                "rest",
                REST_UUID,
                "OL_TEST_TOKEN_ADD",
                allowedJobNamespaces=["ops*"],
                sharedJobNamespaces=["comm?n"],
            ),
        ],
        **urls,
    )
    home = tmp_path / "dagster_home"
    home.mkdir()
    settings = load_settings(path)
    store = EventStore(settings.store.url)
    client = TestClient(create_app(settings, store))

    def post(definition: str, events: list[dict[str, Any]]) -> None:
        token = tokens["snap" if definition == "fin" else "add"]
        answer = client.post(
            "/api/v1/lineage/batch",
            json={"events": events},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["summary"]["rejected"] == 0, answer.text

    def sync(definition: str) -> dict[str, Any]:
        proc = _cli(path, "sync", "--definition", definition, home=home)
        assert proc.returncode == 0, proc.stderr[-3000:]
        (line,) = [json.loads(x) for x in proc.stdout.splitlines() if x.strip()]
        assert line["status"] == "synced", line
        return line

    def upstream(table: str) -> set[str]:
        proc = _cli(
            path,
            "lineage",
            f"dataset:{PG}:{table}",
            "--definition",
            "rest",
            "--upstream",
            "--depth",
            "1",
            "--json",
        )
        assert proc.returncode == 0, proc.stderr
        return {e["from"] for e in json.loads(proc.stdout)["edges"]}

    try:
        post("rest", [_job("common", "rest_job", "raw.r", "mart.r"), _job("ops", "x", "a", "b")])
        sync("rest")
        fin_jobs = [_job("fin", "load", "raw.f", "mart.f"), _job("common", "fin_job", "c", "d")]
        post("fin", [*fin_jobs, _job("fin", "old", "raw.o", "mart.o")])
        sync("fin")

        post("fin", fin_jobs)  # a snapshot without fin.old, which describes a job of common
        line = sync("fin")
    finally:
        client.close()
        store.dispose()

    # the cutoff still covers fin's own namespace, and nothing of the shared one
    assert line["cleanup"]["removedJobs"] == ["fin.old"]
    assert upstream("mart.r") == {"job:common:rest_job"}
