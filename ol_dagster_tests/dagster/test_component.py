"""The Dagster Component: a YAML-first (``dg``) project gets what ``ol_dagster.definitions`` builds.

Each test lays out a small ``dg`` project in a temp dir (``pyproject.toml`` with ``[tool.dg]``,
``src/<module>/defs/<folder>/defs.yaml``) and loads it with Dagster's own loader
(``dg.load_from_defs_folder``), as ``dg dev`` and the project's ``definitions.py`` do.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml
from dagster.components.component_scaffolding import scaffold_object
from dagster.components.core.package_entry import discover_entry_point_package_objects
from dagster_shared.serdes.objects import EnvRegistryKey
from starlette.testclient import TestClient

from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.commands.headless import sync_batches
from ol_dagster.definitions import build_defs
from ol_dagster.defs.component import OpenLineageSyncComponent
from ol_dagster.receiver.app import create_app
from ol_dagster.settings import load_settings
from ol_dagster.store import BatchStatus, EventStore
from ol_dagster_tests.conftest import run_event, settings_data

TYPE = "ol_dagster.OpenLineageSyncComponent"
TEMPLATE_UUIDS = ("6f1c2d9e-4b7a-4c1e-9d2f-0a1b2c3d4e5f", "0b7e0c52-2d8f-4f58-8a71-3c5e9e2b6d10")


class Project:
    """A ``dg`` project as ``dg scaffold project`` lays it out, under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.module = f"olproj_{uuid.uuid4().hex[:10]}"
        self.defs = root / "src" / self.module / "defs"
        self.defs.mkdir(parents=True)
        (self.defs.parent / "__init__.py").write_text("")
        (self.defs / "__init__.py").write_text("")
        (self.defs.parent / "definitions.py").write_text(
            "from pathlib import Path\n\nimport dagster as dg\n\n\n@dg.definitions\n"
            "def defs():\n    return dg.load_from_defs_folder(path_within_project=Path(__file__))\n"
        )
        (root / "pyproject.toml").write_text(
            f'[project]\nname = "{self.module}"\nversion = "0.1.0"\n\n'
            f'[tool.dg]\ndirectory_type = "project"\n\n'
            f'[tool.dg.project]\nroot_module = "{self.module}"\n'
        )

    def add(self, folder: str, attributes: dict[str, Any]) -> Path:
        path = self.defs / folder
        path.mkdir()
        (path / "defs.yaml").write_text(yaml.safe_dump({"type": TYPE, "attributes": attributes}))
        return path

    def load(self) -> dg.Definitions:
        sys.path.insert(0, str(self.root / "src"))
        try:
            return dg.load_from_defs_folder(path_within_project=self.root)
        finally:
            sys.path.remove(str(self.root / "src"))
            for name in [m for m in sys.modules if m.split(".")[0] == self.module]:
                del sys.modules[name]


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path / "proj")


@pytest.fixture
def synced_settings(write_settings, tokens) -> Iterator[Path]:
    """Settings with ``snap`` and ``add``; ``snap`` has synced one batch (so the synced lineage
    is part of what both loaders build)."""
    path = write_settings(allowedJobNamespaces=["etl"])
    settings = load_settings(path)
    store = EventStore(settings.store.url)
    client = TestClient(create_app(settings, store))
    batch = {
        "events": [
            run_event(
                "etl",
                "build_kpi",
                inputs=[("postgres://db:5432", "shop.public.orders")],
                outputs=[("postgres://db:5432", "shop.kpi.daily")],
            )
        ]
    }
    r = client.post(
        "/api/v1/lineage/batch", json=batch, headers={"Authorization": f"Bearer {tokens['snap']}"}
    )
    assert r.status_code == 200, r.text
    (path.parent / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(path.parent / "home")) as instance:
        (line,) = sync_batches(str(path), definition="snap", instance=instance)
        assert line["status"] == "synced", line
    yield path
    store.dispose()


def _shape(defs: dg.Definitions) -> dict[str, set]:
    """What a user sees of the definitions: assets, checks, jobs, sensors and schedules."""
    graph = defs.resolve_asset_graph()
    return {
        "assets": set(graph.get_all_asset_keys()),
        "checks": set(graph.asset_check_keys),
        "jobs": {j.name for j in defs.resolve_all_job_defs()} - {"__ASSET_JOB"},
        "sensors": {s.name for s in defs.sensors or []},
        "schedules": {s.name for s in defs.schedules or []},  # type: ignore[union-attr]
    }


def test_a_dg_project_gets_what_the_settings_file_builds(project: Project, synced_settings: Path):
    project.add("ol_sync", {"settings": str(synced_settings)})
    from_component = _shape(project.load())
    expected = _shape(build_defs(str(synced_settings)))
    assert from_component == expected
    # not vacuous: both definitions' sync, the synced lineage, checks, sensors and schedules
    assert {
        dg.AssetKey(["snap", "catalog_cleanup"]),
        dg.AssetKey(["add", "catalog_upload"]),
        dg.AssetKey(["etl", "build_kpi"]),
        dg.AssetKey(["postgres_db_5432", "shop", "kpi", "daily"]),
    } <= expected["assets"]
    assert (
        dg.AssetCheckKey(dg.AssetKey(["snap", "catalog_cleanup"]), "removal_cap")
        in (expected["checks"])
    )
    assert {"snap__new_batches", "add__new_batches"} <= expected["sensors"]
    assert {"snap__stale_cleanup_daily", "add__stale_cleanup_daily"} <= expected["schedules"]


def test_split_names_reaches_the_translator(project: Project, synced_settings: Path):
    project.add("ol_sync", {"settings": str(synced_settings), "split_names": False})
    keys = _shape(project.load())["assets"]
    assert dg.AssetKey(["postgres_db_5432", "shop.kpi.daily"]) in keys
    assert dg.AssetKey(["postgres_db_5432", "shop", "kpi", "daily"]) not in keys


def test_the_settings_path_is_relative_to_the_defs_yaml(project: Project, write_settings):
    settings = write_settings()
    folder = project.add("ol_sync", {"settings": "ol_dagster.yaml"})
    (folder / "ol_dagster.yaml").write_text(settings.read_text())
    assert _shape(project.load()) == _shape(build_defs(str(settings)))


def test_definitions_selects_sync_definitions(project: Project, write_settings):
    settings = write_settings()
    project.add("ol_sync", {"settings": str(settings), "definitions": ["add"]})
    shape = _shape(project.load())
    assert dg.AssetKey(["add", "catalog_upload"]) in shape["assets"]
    assert not any(k.path[0] == "snap" for k in shape["assets"])
    assert "snap__new_batches" not in shape["sensors"]
    assert "add__new_batches" in shape["sensors"]


def test_unknown_definitions_are_all_named_with_the_file(project: Project, write_settings):
    settings = write_settings()
    project.add("ol_sync", {"settings": str(settings), "definitions": ["add", "nope", "nada"]})
    with pytest.raises(Exception) as raised:
        project.load()
    message = _messages(raised.value)
    assert "definitions: 'nope', 'nada' not in" in message
    assert str(settings.resolve()) in message
    assert "(it has: snap, add)" in message


def test_a_missing_settings_file_is_named(project: Project, tmp_path: Path):
    project.add("ol_sync", {"settings": "missing.yaml"})
    with pytest.raises(Exception) as raised:
        project.load()
    assert str(project.defs / "ol_sync" / "missing.yaml") in _messages(raised.value)


def _post(settings_file: Path, token: str, events: list[dict[str, Any]]) -> None:
    settings = load_settings(settings_file)
    store = EventStore(settings.store.url)
    try:
        r = TestClient(create_app(settings, store)).post(
            "/api/v1/lineage/batch",
            json={"events": events},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert r.status_code == 200, r.text
    finally:
        store.dispose()


def _sales_settings(tmp_path: Path, project: Project) -> Path:
    """A second settings file in the project (``teams/sales.yaml``): definition ``sales``,
    its own store and catalog."""
    folder = tmp_path / "sales"
    folder.mkdir()
    data = settings_data(folder)
    sales = {
        **data["definitions"][0],
        "name": "sales",
        "uuid": "33333333-3333-4333-8333-333333333333",
    }
    data["definitions"] = [sales]
    del data["catalogs"]["other"]
    path = project.root / "teams" / "sales.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(data))
    return path


def test_two_components_of_two_settings_files_load_run_and_show_one_lineage(
    project: Project, synced_settings: Path, tokens: dict[str, str], tmp_path: Path
):
    # the project root's file (synced: etl.build_kpi reads shop.public.orders) and teams/sales
    (project.root / "ol_dagster.yaml").write_text(synced_settings.read_text())
    sales = _sales_settings(tmp_path, project)
    project.add("ol_sync", {"settings": "{{ context.project_root }}/ol_dagster.yaml"})
    project.add("sales_sync", {"settings": "{{ context.project_root }}/teams/sales.yaml"})
    raw, orders = (
        ("postgres://db:5432", "shop.raw.orders"),
        ("postgres://db:5432", "shop.public.orders"),
    )
    _post(sales, tokens["snap"], [run_event("etl", "load_orders", inputs=[raw], outputs=[orders])])

    defs = project.load()  # was: "different resources with same key 'ol_store'"

    # each file its resources and analyses: the project root's the plain names
    assert set(defs.resources or {}) == {
        "ol_store",
        "ol_catalog",
        "ol_store__teams_sales",
        "ol_catalog__teams_sales",
    }
    shape = _shape(defs)
    assert {dg.AssetKey("run_profiles"), dg.AssetKey(["teams_sales", "run_profiles"])} <= (
        shape["assets"]
    )
    assert {"analyses_daily", "analyses_daily__teams_sales"} <= shape["schedules"]
    assert {"snap__new_batches", "add__new_batches", "sales__new_batches"} <= shape["sensors"]

    # the second file's sync runs in Dagster with its own resources, into its own catalog
    store = EventStore(load_settings(sales).store.url)
    (tmp_path / "home2").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home2")) as instance:
        store.seal_due("sales", window_seconds=0, max_events=1, force=True)
        (batch,) = store.batches("sales", statuses=[BatchStatus.SEALED])
        instance.add_dynamic_partitions("sales__batches", [batch.partition_key])
        result = defs.resolve_job_def("sales__sync").execute_in_process(
            instance=instance, partition_key=batch.partition_key
        )
        assert result.success
    assert store.get_batch(batch.id).status is BatchStatus.SYNCED
    store.dispose()
    catalog = EmbeddedCatalog(load_settings(sales).catalogs["main"].url)
    try:
        assert catalog.job_names() == ["etl.load_orders"]
    finally:
        catalog.close()

    # one graph: the dataset both files touch is one asset, written by sales' job and read
    # by the root file's
    graph = project.load().resolve_asset_graph()
    orders_key = dg.AssetKey(["postgres_db_5432", "shop", "public", "orders"])
    assert graph.get(orders_key).parent_keys == {dg.AssetKey(["etl", "load_orders"])}
    assert orders_key in graph.get(dg.AssetKey(["etl", "build_kpi"])).parent_keys


def test_components_of_one_settings_file_share_it_and_build_other_definitions(
    project: Project, write_settings
):
    settings = write_settings()
    project.add("one", {"settings": str(settings), "definitions": ["snap"]})
    project.add("two", {"settings": str(settings), "definitions": ["add"]})

    defs = project.load()

    assert set(defs.resources or {}) == {"ol_store", "ol_catalog"}
    shape = _shape(defs)
    assert {dg.AssetKey(["snap", "catalog_upload"]), dg.AssetKey(["add", "catalog_upload"])} <= (
        shape["assets"]
    )
    assert dg.AssetKey("run_profiles") in shape["assets"]  # once: the file's


def test_two_components_building_one_definition_are_refused_naming_both(
    project: Project, write_settings
):
    settings = write_settings()
    project.add("one", {"settings": str(settings)})
    project.add("two", {"settings": str(settings), "definitions": ["add"]})
    with pytest.raises(Exception) as raised:
        project.load()
    assert (
        f"definition 'add' of {settings.resolve()} is built by two components "
        "(src/" in _messages(raised.value)
    )
    assert "give each its own 'definitions'" in _messages(raised.value)


def test_scaffolding_writes_the_defs_yaml_and_a_starter_settings_file(project: Project):
    scaffold_object(
        path=project.defs / "ol_sync",
        typename=TYPE,
        json_params=None,
        scaffold_format="yaml",
        project_root=project.root,
    )
    decl = yaml.safe_load((project.defs / "ol_sync" / "defs.yaml").read_text())
    assert decl == {
        "type": TYPE,
        "attributes": {"settings": "{{ context.project_root }}/ol_dagster.yaml"},
    }
    starter = (project.root / "ol_dagster.yaml").read_text()
    assert not any(u in starter for u in TEMPLATE_UUIDS)  # each project owns its catalog objects
    uuids = [d["uuid"] for d in yaml.safe_load(starter)["definitions"]]
    assert len(set(uuids)) == 2 and all(uuid.UUID(u) for u in uuids)

    shape = _shape(project.load())
    # loading (what dg check defs does) opens no store: nothing is written in the project
    assert not (project.root / ".ol_dagster").exists()
    # the starter's demo definition feeds two catalogs: per-catalog keys (docs/catalogs.md)
    assert dg.AssetKey(["analytics_repo", "main", "catalog_upload"]) in shape["assets"]
    assert "streaming_jobs__new_batches" in shape["sensors"]


def test_scaffolding_keeps_an_existing_settings_file(project: Project, write_settings):
    mine = write_settings()
    (project.root / "ol_dagster.yaml").write_text(mine.read_text())
    scaffold_object(
        path=project.defs / "ol_sync",
        typename=TYPE,
        json_params=None,
        scaffold_format="yaml",
        project_root=project.root,
    )
    assert (project.root / "ol_dagster.yaml").read_text() == mine.read_text()
    assert "snap__new_batches" in _shape(project.load())["sensors"]


def test_scaffolding_with_a_settings_path_writes_no_settings(project: Project):
    scaffold_object(
        path=project.defs / "ol_sync",
        typename=TYPE,
        json_params='{"settings": "/etc/ol_dagster.yaml"}',
        scaffold_format="yaml",
        project_root=project.root,
    )
    decl = yaml.safe_load((project.defs / "ol_sync" / "defs.yaml").read_text())
    assert decl["attributes"] == {"settings": "/etc/ol_dagster.yaml"}
    assert not (project.root / "ol_dagster.yaml").exists()


def test_dg_finds_the_component_by_its_entry_point():
    found = discover_entry_point_package_objects()
    assert found[EnvRegistryKey(name="OpenLineageSyncComponent", namespace="ol_dagster")] is (
        OpenLineageSyncComponent
    )


def _messages(exc: BaseException | None) -> str:
    """The messages of an exception and of its causes: Dagster wraps a component's error."""
    out: list[str] = []
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        out.append(str(exc))
        exc = exc.__cause__ or exc.__context__
    return "\n".join(out)
