"""``ol-dagster lineage NODE --definition NAME [--depth N] [--upstream|--downstream] [--json]``,
run as a person runs it: a subprocess in the project, against the catalog the settings name.

The catalog is filled first by a real upload of a small chain
``orders_raw -> load_orders -> orders -> build_kpi -> kpi`` (``daily`` orchestrating load_orders),
into the definition's embedded catalog, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.settings import load_settings
from ol_dagster.sync.upload import build_graph
from ol_dagster_tests.conftest import PROJECT_ROOT, run_event, settings_data

WH = "postgres://db:5432"
RAW = f"dataset:{WH}:shop.public.orders_raw"
ORDERS = f"dataset:{WH}:shop.public.orders"
KPI = "dataset:s3://lake:kpi/daily.parquet"
LOAD, BUILD, DAILY = "job:etl:load_orders", "job:etl:build_kpi", "job:etl:daily"


def _event(name: str, inputs: list, outputs: list, parent: str | None = None) -> bytes:
    e = run_event("etl", name, inputs=inputs, outputs=outputs)
    if parent:
        e["run"]["facets"] = {
            "parent": {
                "run": {"runId": str(uuid.uuid4())},
                "job": {"namespace": "etl", "name": parent},
            }
        }
    return json.dumps(e).encode()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def settings_file(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    data: dict[str, Any] = settings_data(tmp_path)
    if request.param == "postgresql":
        data["catalogs"]["main"]["url"] = request.getfixturevalue("pg_url")
    path = tmp_path / "ol_dagster.yaml"
    path.write_text(yaml.safe_dump(data))

    settings = load_settings(path)
    definition = settings.definition("snap")
    graph = build_graph(
        [
            _event(
                "load_orders",
                [(WH, "shop.public.orders_raw")],
                [(WH, "shop.public.orders")],
                parent="daily",
            ),
            _event("build_kpi", [(WH, "shop.public.orders")], [("s3://lake", "kpi/daily.parquet")]),
        ],
        definition,
    )
    catalog = EmbeddedCatalog(settings.catalogs["main"].url)
    try:
        assert catalog.upload(graph, definition).succeeded
    finally:
        catalog.close()
    return path


def lineage(settings: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "ol_dagster.commands.cli",
            "--settings",
            str(settings),
            "lineage",
            *args,
        ],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def as_sets(out: str) -> tuple[dict[str, str], set[tuple[str, str]]]:
    doc = json.loads(out)
    assert set(doc) == {"nodes", "edges"}
    for n in doc["nodes"]:
        assert set(n) == {"id", "type"}
    for e in doc["edges"]:
        assert set(e) == {"from", "to"}
    return {n["id"]: n["type"] for n in doc["nodes"]}, {(e["from"], e["to"]) for e in doc["edges"]}


def test_json_lists_nodes_and_edges_both_ways(settings_file: Path) -> None:
    proc = lineage(settings_file, ORDERS, "--definition", "snap", "--depth", "1", "--json")

    assert proc.returncode == 0, proc.stderr
    nodes, edges = as_sets(proc.stdout)
    assert nodes == {ORDERS: "dataset", LOAD: "job", BUILD: "job"}
    assert edges == {(LOAD, ORDERS), (ORDERS, BUILD)}


def test_depth_widens_the_walk(settings_file: Path) -> None:
    proc = lineage(settings_file, ORDERS, "--definition", "snap", "--depth", "2", "--json")

    assert proc.returncode == 0, proc.stderr
    nodes, edges = as_sets(proc.stdout)
    assert set(nodes) == {ORDERS, LOAD, BUILD, RAW, DAILY, KPI}
    assert nodes[DAILY] == "job" and nodes[KPI] == "dataset"
    assert edges == {
        (LOAD, ORDERS),
        (ORDERS, BUILD),
        (RAW, LOAD),
        (DAILY, LOAD),
        (BUILD, KPI),
    }


def test_upstream_only_walks_upstream(settings_file: Path) -> None:
    proc = lineage(
        settings_file, ORDERS, "--definition", "snap", "--depth", "5", "--upstream", "--json"
    )

    assert proc.returncode == 0, proc.stderr
    nodes, edges = as_sets(proc.stdout)
    assert set(nodes) == {ORDERS, LOAD, RAW, DAILY}
    assert edges == {(LOAD, ORDERS), (RAW, LOAD), (DAILY, LOAD)}


def test_downstream_only_walks_downstream(settings_file: Path) -> None:
    proc = lineage(
        settings_file, RAW, "--definition", "snap", "--depth", "5", "--downstream", "--json"
    )

    assert proc.returncode == 0, proc.stderr
    nodes, edges = as_sets(proc.stdout)
    assert set(nodes) == {RAW, LOAD, ORDERS, BUILD, KPI}
    assert edges == {(RAW, LOAD), (LOAD, ORDERS), (ORDERS, BUILD), (BUILD, KPI)}


def test_text_output_lists_the_edges(settings_file: Path) -> None:
    proc = lineage(settings_file, KPI, "--definition", "snap", "--depth", "1")

    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines == [f"{BUILD}  ->  {KPI}", "2 node(s), 1 edge(s)"]


def test_unknown_node_exits_1_with_a_message(settings_file: Path) -> None:
    missing = f"dataset:{WH}:shop.public.nope"
    proc = lineage(settings_file, missing, "--definition", "snap", "--json")

    assert proc.returncode == 1
    assert proc.stdout == ""
    assert missing in proc.stderr and "not in the catalog" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_malformed_node_exits_1_with_the_expected_form(settings_file: Path) -> None:
    proc = lineage(settings_file, "orders", "--definition", "snap")

    assert proc.returncode == 1
    assert "dataset:<namespace>:<name>" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_definition_must_be_chosen_when_there_are_several(settings_file: Path) -> None:
    proc = lineage(settings_file, ORDERS)

    assert proc.returncode == 2
    assert "--definition" in proc.stderr and "snap" in proc.stderr and "add" in proc.stderr
