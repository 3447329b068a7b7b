"""What a sync may delete, through the receiver and ``ol-dagster sync``: the cases where a name, a
shape or a second definition used to make a snapshot delete what its definition does not own.

* a pattern with ``?`` (or ``[...]``) is no single namespace: a snapshot of ``spark1`` kept its
  CUTOFF System's cutoff and removed ``spark2``'s dataset;
* a batch of dataset events describes no job: it removed every entity of the CUTOFF System;
* a CUTOFF System belongs to the definition that created it: another definition's dataset placed
  in it by name was removed by the owner's next snapshot;
* the removal share counted jobs only: a snapshot that kept every job but lost most of its
  datasets passed it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml
from sqlalchemy import create_engine, select
from starlette.testclient import TestClient

from ol_dagster.catalog.embedded.tables import entities, systems
from ol_dagster.commands.headless import sync_batches
from ol_dagster.receiver.app import create_app
from ol_dagster.settings import load_settings
from ol_dagster.store import EventStore
from ol_dagster_tests.conftest import PROJECT_ROOT, TEST_DB_ENV, run_event

PG = "postgres://db:5432"
LAKE = "s3://lake"
SNAP_UUID = "11111111-1111-4111-8111-111111111111"
ADD_UUID = "22222222-2222-4222-8222-222222222222"


def _definition(name: str, uuid: str, token: str, **overrides: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "name": name,
        "uuid": uuid,
        "catalog": "main",
        "snapshotMode": "BATCH_SNAPSHOT",
        "datasetSystems": [{"namespace": LAKE, "system": "lake", "cleanupMode": "CUTOFF"}],
        "receiver": {"token": {"env": token}},
    }
    d.update(overrides)
    return d


def _load_a() -> dict[str, Any]:
    return run_event("etl", "load", inputs=[(PG, "raw.a")], outputs=[(LAKE, "a")])


class Site:
    """A settings file, its receiver and ``ol-dagster sync`` on one Dagster instance."""

    def __init__(
        self, tmp_path: Path, request: pytest.FixtureRequest, definitions: list[dict[str, Any]]
    ) -> None:
        store_url = f"sqlite:///{tmp_path / 'store.db'}"
        catalog_url = f"sqlite:///{tmp_path / 'catalog.db'}"
        if os.environ.get(TEST_DB_ENV) == "postgresql":
            store_url = request.getfixturevalue("pg_url")
            catalog_url = request.getfixturevalue("pg_server").fresh_database("c")
        self.path = tmp_path / "ol_dagster.yaml"
        self.path.write_text(
            yaml.safe_dump(
                {
                    "store": {"url": store_url},
                    "catalogs": {"main": {"kind": "embedded", "url": catalog_url}},
                    "definitions": definitions,
                }
            )
        )
        self.settings = load_settings(self.path)
        self.store = EventStore(self.settings.store.url)
        self.client = TestClient(create_app(self.settings, self.store))
        self.catalog_url = catalog_url
        self.home = tmp_path / "dagster_home"
        self.home.mkdir()

    def post(self, token: str, events: list[dict[str, Any]]) -> dict[str, Any]:
        response = self.client.post(
            "/api/v1/lineage/batch",
            json={"events": events},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status_code == 200, response.text
        return response.json()

    def sync(self, definition: str, instance: dg.DagsterInstance) -> list[dict[str, Any]]:
        return list(sync_batches(str(self.path), definition=definition, instance=instance))

    def cli_sync(self, definition: str) -> list[dict[str, Any]]:
        """``ol-dagster sync --definition D`` in its own process, as an operator runs it."""
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "ol_dagster.commands.cli",
                "--settings",
                str(self.path),
                "sync",
                "--definition",
                definition,
            ],
            capture_output=True,
            text=True,
            cwd=PROJECT_ROOT,
            env={**os.environ, "DAGSTER_HOME": str(self.home)},
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]

    def datasets(self) -> set[tuple[str, str]]:
        """(System, name) of every dataset entity in the catalog."""
        engine = create_engine(self.catalog_url)
        try:
            with engine.connect() as conn:
                rows = conn.execute(
                    select(systems.c.name, entities.c.ol_name)
                    .join(systems, systems.c.id == entities.c.system_id)
                    .where(entities.c.type != "job")
                ).all()
            return {(s, n) for s, n in rows}
        finally:
            engine.dispose()

    def close(self) -> None:
        self.store.dispose()


@pytest.fixture
def site(tmp_path: Path, request: pytest.FixtureRequest, tokens) -> Iterator[Any]:
    made: list[Site] = []

    def make(*definitions: dict[str, Any]) -> Site:
        s = Site(tmp_path, request, list(definitions))
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[dg.DagsterInstance]:
    (tmp_path / "instance").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "instance")) as inst:
        yield inst


def test_a_pattern_with_a_question_mark_is_no_single_namespace(site, tokens, instance):
    """``spark?`` admits ``spark1`` and ``spark2``: a snapshot of ``spark1`` alone must not run the
    dataset cutoff over the System that ``spark2``'s job writes too."""
    s = site(_definition("snap", SNAP_UUID, "OL_TEST_TOKEN_SNAP", allowedJobNamespaces=["spark?"]))
    s.post(
        tokens["snap"],
        [
            run_event("spark1", "load", inputs=[(PG, "raw.a")], outputs=[(LAKE, "a")]),
            run_event("spark2", "load", inputs=[(PG, "raw.b")], outputs=[(LAKE, "b")]),
        ],
    )
    s.post(
        tokens["snap"],
        [run_event("spark1", "load", inputs=[(PG, "raw.a")], outputs=[(LAKE, "a")])],
    )
    first, second = s.sync("snap", instance)
    assert first["status"] == second["status"] == "synced"
    assert ("lake", "b") in s.datasets()
    calls = {
        c["system"]: c["mode"] for c in second["cleanup"]["calls"] if c["target"] == "datasetSystem"
    }
    assert calls.get("lake") == "DAYS"
    assert {"code": "SHARED_SYSTEM_DOWNGRADED", "system": "lake"} in second["cleanup"]["warnings"]


def test_a_batch_of_dataset_events_removes_nothing_by_cutoff(site, tokens, instance):
    s = site(_definition("snap", SNAP_UUID, "OL_TEST_TOKEN_SNAP", allowedJobNamespaces=["etl"]))
    s.post(
        tokens["snap"], [run_event("etl", "load", inputs=[(PG, "raw.a")], outputs=[(LAKE, "a")])]
    )
    s.sync("snap", instance)
    dataset_event = {
        "eventTime": "2026-11-02T02:00:00.000Z",
        "producer": "https://example.com/ol-dagster-tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": {"namespace": LAKE, "name": "z"},
    }
    s.post(tokens["snap"], [dataset_event])
    (line,) = s.sync("snap", instance)
    assert line["status"] == "synced"
    assert line["cleanup"]["plannedRemovals"] == 0
    assert {"what": "batch", "reason": "NO_JOB_DESCRIBED"} in line["cleanup"]["ownership"][
        "skipped"
    ]
    assert {("lake", "a"), ("lake", "z")} <= s.datasets()


def test_another_definitions_dataset_never_lands_in_a_claimed_system(site, tokens, instance):
    """``snap`` created ``lake`` (CUTOFF); ``add`` maps the same bucket to it. ``add``'s dataset
    goes to ``lake [add]``, so ``snap``'s next snapshot, which no longer writes it, cannot take
    it."""
    s = site(
        _definition("snap", SNAP_UUID, "OL_TEST_TOKEN_SNAP", allowedJobNamespaces=["etl"]),
        _definition("add", ADD_UUID, "OL_TEST_TOKEN_ADD", allowedJobNamespaces=["ml"]),
    )
    s.post(
        tokens["snap"], [run_event("etl", "load", inputs=[(PG, "raw.a")], outputs=[(LAKE, "a")])]
    )
    s.sync("snap", instance)
    s.post(tokens["add"], [run_event("ml", "train", outputs=[(LAKE, "m")])])
    (added,) = s.cli_sync("add")
    assert added["status"] == "synced"
    assert {
        "code": "SYSTEM_CLAIMED",
        "system": "lake",
        "placedIn": "lake [add]",
    } in added["cleanup"]["warnings"]
    assert ("lake [add]", "m") in s.datasets() and ("lake", "m") not in s.datasets()

    s.post(
        tokens["snap"], [run_event("etl", "load", inputs=[(PG, "raw.a")], outputs=[(LAKE, "a")])]
    )
    (again,) = s.cli_sync("snap")
    assert again["cleanup"]["skippedReason"] is None
    assert {("lake", "a"), ("lake [add]", "m")} <= s.datasets()


def test_the_removal_share_counts_datasets_not_only_jobs(site, tokens, instance):
    """Every job is described again but three of its four datasets are gone: 75 % of the
    datasets the definition holds is over ``maxRemovalShare`` (0.5), whatever the jobs."""
    s = site(_definition("snap", SNAP_UUID, "OL_TEST_TOKEN_SNAP", allowedJobNamespaces=["etl"]))
    outs = [(LAKE, n) for n in ("a", "b", "c", "d")]
    s.post(tokens["snap"], [run_event("etl", "load", inputs=[(PG, "raw.a")], outputs=outs)])
    s.post(tokens["snap"], [run_event("etl", "load", inputs=[(PG, "raw.a")], outputs=outs[:1])])
    _, line = s.sync("snap", instance)
    report = line["cleanup"]
    assert report["skippedReason"] == "REMOVAL_SHARE_EXCEEDED"
    assert report["plannedByKind"]["jobs"] == 0 and report["plannedByKind"]["datasets"] == 3
    assert report["heldByKind"]["datasets"] == 5  # raw.a too: a System it created
    assert "datasets" in report["shareExceeded"]
    assert {("lake", n) for n in ("a", "b", "c", "d")} <= s.datasets()


def test_a_rename_moves_a_dataset_in_the_system_of_its_own_a_claimed_system_sent_it_to(
    site, tokens, instance
):
    """``snap`` created ``lake`` (CUTOFF), so ``add``'s datasets of the same bucket live in
    ``lake [add]``, a System ``add`` owns. A RENAME of one of them there is ``add``'s to apply:
    the entity moves in place (its flow going along), instead of the new name being added beside
    a stale old one (the previous name was looked up in ``lake``, which is not ``add``'s)."""
    s = site(
        _definition("snap", SNAP_UUID, "OL_TEST_TOKEN_SNAP", allowedJobNamespaces=["etl"]),
        _definition(
            "add",
            ADD_UUID,
            "OL_TEST_TOKEN_ADD",
            allowedJobNamespaces=["ml"],
            snapshotMode="ADDITIVE",
        ),
    )
    s.post(tokens["snap"], [_load_a()])
    s.sync("snap", instance)
    s.post(tokens["add"], [run_event("ml", "train", inputs=[(PG, "raw.m")], outputs=[(LAKE, "m")])])
    s.sync("add", instance)
    renamed = run_event("ml", "train", inputs=[(PG, "raw.m")], outputs=[(LAKE, "m2")])
    renamed["outputs"][0]["facets"] = {
        "lifecycleStateChange": {
            "_producer": "https://example.com/ol-dagster-tests",
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/"
            "LifecycleStateChangeDatasetFacet.json#/$defs/LifecycleStateChangeDatasetFacet",
            "lifecycleStateChange": "RENAME",
            "previousIdentifier": {"namespace": LAKE, "name": "m"},
        }
    }
    s.post(tokens["add"], [renamed])
    (line,) = s.cli_sync("add")

    assert line["status"] == "synced", line
    assert line["upload"]["renamed"] == [f"{LAKE}:m -> {LAKE}:m2"], line["upload"]
    held = s.datasets()
    assert ("lake [add]", "m2") in held and ("lake [add]", "m") not in held
    assert ("lake", "a") in held  # snap's own, untouched
