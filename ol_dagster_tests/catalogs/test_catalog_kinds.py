"""Catalog kinds: each declared once, an unknown one refused everywhere, one of one's own added
from outside the package.

The toy kind (``toy_kind.py``, beside this file) is registered by the settings file alone
(``catalogKinds``): ``ol-dagster sync`` syncs two snapshots into it in a process of its own, and
the job the second snapshot no longer has is deleted from it; ``ol-dagster check`` asks it. The
built-in kinds are held to the capabilities they declare, and a kind nobody registered fails
when the settings load, when a backend opens and when ``check`` asks it.
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

from ol_dagster.catalog import registry
from ol_dagster.catalog.check.findings import Finding
from ol_dagster.catalog.kind import CatalogKind, CheckContext, Opening
from ol_dagster.catalog.protocol import CAPABILITIES, Rehearsing
from ol_dagster.catalog.settings import CatalogSettings
from ol_dagster.receiver.app import create_app
from ol_dagster.settings import SettingsError, load_settings, parse_settings
from ol_dagster.store import EventStore
from ol_dagster_tests.catalogs import toy_kind
from ol_dagster_tests.conftest import PROJECT_ROOT, run_event, settings_data

PG = "postgres://db:5432"
TOY_MODULE = "ol_dagster_tests.catalogs.toy_kind"


def _cli(path: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ol_dagster.commands.cli", "--settings", str(path), *args],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env={**os.environ, "DAGSTER_HOME": str(home)},
        timeout=300,
    )


def _snapshot(*jobs: str) -> dict[str, Any]:
    return {
        "events": [
            run_event("etl", job, inputs=[(PG, "shop.orders")], outputs=[(PG, f"shop.{job}")])
            for job in jobs
        ]
    }


def test_a_kind_of_ones_own_syncs_and_is_checked(tmp_path: Path, tokens: dict[str, str]) -> None:
    folder = tmp_path / "toy"
    data = settings_data(tmp_path)
    data["catalogKinds"] = [TOY_MODULE]
    data["catalogs"]["main"] = {"kind": "toy", "url": "http://toy.invalid", "folder": str(folder)}
    path = tmp_path / "ol_dagster.yaml"
    path.write_text(yaml.safe_dump(data))
    home = tmp_path / "dagster_home"
    home.mkdir()

    settings = load_settings(path)
    store = EventStore(settings.store.url)
    try:
        client = TestClient(create_app(settings, store))
        auth = {"Authorization": f"Bearer {tokens['snap']}"}
        for body in (_snapshot("load_orders", "build_kpi"), _snapshot("load_orders")):
            answer = client.post("/api/v1/lineage/batch", json=body, headers=auth)
            assert answer.status_code == 200, answer.text
    finally:
        store.dispose()

    synced = _cli(path, home, "sync", "--definition", "snap")

    assert synced.returncode == 0, synced.stderr
    first, second = (json.loads(line) for line in synced.stdout.splitlines())
    assert (first["status"], second["status"]) == ("synced", "synced")
    assert first["upload"]["succeeded"] and second["upload"]["succeeded"]
    assert second["cleanup"]["mode"] == "CUTOFF"
    assert second["cleanup"]["removedJobs"] == ["etl.build_kpi"]
    held = toy_kind.holdings(folder)
    assert held["jobs"] == [["etl", "load_orders"]]
    assert held["posts"] == 2  # one post of events per batch

    checked = _cli(path, home, "check", "--definition", "snap", "--json")

    assert checked.returncode == 0, checked.stdout + checked.stderr
    (report,) = json.loads(checked.stdout)["reports"]
    assert (report["catalog"], report["kind"], report["ok"]) == ("main", "toy", True)
    found = {f["check"]: f for f in report["findings"]}
    assert found["toy holdings"]["detail"] == f"1 job(s) in {folder}"
    assert found["toy server"]["holds"]


def test_a_kind_nobody_registered_is_refused_when_the_settings_load(tmp_path: Path) -> None:
    data = settings_data(tmp_path)
    data["catalogs"]["main"] = {"kind": "ghost", "url": "http://ghost.invalid"}

    with pytest.raises(SettingsError) as refused:
        parse_settings(data)

    assert "catalogs.main: kind 'ghost' is not one of embedded, openmetadata" in str(refused.value)
    assert "catalogKinds" in str(refused.value)  # where a kind of one's own is registered


def test_a_catalog_kinds_module_that_cannot_be_imported_is_named(tmp_path: Path) -> None:
    data = settings_data(tmp_path)
    data["catalogKinds"] = [TOY_MODULE, "no_such_module_for_kinds"]

    with pytest.raises(SettingsError, match="catalogKinds.1: module 'no_such_module_for_kinds'"):
        parse_settings(data)


class GhostSettings(CatalogSettings):
    kind: str = "ghost"


class MarquezLookalike(CatalogSettings):
    kind: str = "marquez"


def _never(cfg: Any, at: Any) -> Any:
    raise AssertionError("a kind nobody registered has no backend to open")


def test_a_kind_nobody_registered_is_refused_when_opened_or_checked() -> None:
    ghost = GhostSettings(url="http://ghost.invalid")
    at = Opening("main", "sqlite://")

    with pytest.raises(SettingsError, match="kind 'ghost' is not one of"):
        registry.open_catalog(ghost, at)
    with pytest.raises(SettingsError, match="kind 'ghost' is not one of"):
        registry.check_catalog(ghost, CheckContext(at, None))


def test_a_settings_model_read_by_another_kind_is_refused() -> None:
    """A kind opens only the settings its own model read (never a look-alike by its name)."""
    ghost = GhostSettings.model_construct(kind="embedded", url="sqlite://")

    with pytest.raises(SettingsError, match="GhostSettings, not EmbeddedCatalogSettings"):
        registry.open_catalog(ghost, Opening("main", "sqlite://"))


def test_a_known_name_cannot_be_taken_by_another_kind() -> None:
    taken = CatalogKind(
        name="marquez",
        settings=MarquezLookalike,
        factory=_never,
        checker=lambda cfg, context: [],
    )

    with pytest.raises(SettingsError, match="'marquez' is already registered"):
        registry.register(taken)
    assert registry.catalog_kind("marquez").settings.__name__ == "MarquezCatalogSettings"


def test_a_settings_model_must_carry_its_kinds_name() -> None:
    with pytest.raises(TypeError, match="must default 'kind' to 'phantom', not 'ghost'"):
        CatalogKind(name="phantom", settings=GhostSettings, factory=_never, checker=_never)


def _minimal(kind: str, tmp_path: Path) -> dict[str, Any]:
    """The fewest keys a catalog of each built-in kind opens with (no server is asked)."""
    return {
        "embedded": {"url": f"sqlite:///{tmp_path / 'catalog.db'}"},
        "openmetadata": {"url": "http://om.invalid"},
        "marquez": {"url": "http://marquez.invalid"},
        "blindata": {"url": "http://bd.invalid", "tenant": "t", "token": {"env": "BD_TOY"}},
        "toy": {"url": "http://toy.invalid", "folder": str(tmp_path / "toy")},
    }[kind]


@pytest.mark.parametrize("kind", ["embedded", "openmetadata", "marquez", "blindata", "toy"])
def test_each_kind_has_the_capabilities_it_declares(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the sync finds on a backend (``isinstance`` against the capability protocols) is
    what its kind declares."""
    monkeypatch.setenv("BD_TOY", "token")
    declared = registry.catalog_kind(kind)
    cfg = declared.settings.model_validate({"kind": kind, **_minimal(kind, tmp_path)})
    at = Opening("main", f"sqlite:///{tmp_path / 'store.db'}", "snap")

    backend = declared.open(cfg, at)
    try:
        assert {c for c in CAPABILITIES if isinstance(backend, c)} == declared.capabilities
    finally:
        backend.close()


def test_a_backend_without_a_declared_capability_is_refused_when_it_opens(tmp_path: Path) -> None:
    toy = registry.catalog_kind("toy")
    boasting = CatalogKind(
        name="toy",
        settings=toy_kind.ToyCatalogSettings,
        factory=toy_kind.open_toy,
        checker=toy_kind.check_toy,
        capabilities=toy.capabilities | {Rehearsing},
    )
    cfg = toy_kind.ToyCatalogSettings(url="http://toy.invalid", folder=str(tmp_path))

    with pytest.raises(
        TypeError, match="declares the capabilities .*Rehearsing.*, but its backend"
    ):
        boasting.open(cfg, Opening("main", f"sqlite:///{tmp_path / 'store.db'}"))


def test_the_secret_keys_of_each_kind_are_found_by_their_type() -> None:
    found = {name: registry.catalog_kind(name).secret_fields for name in registry.kind_names()}
    assert found["embedded"] == ()
    assert found["openmetadata"] == found["marquez"] == found["toy"] == ("token",)
    assert found["blindata"] == ("token", "apiKey")


def test_a_checker_answers_for_its_kind_only(tmp_path: Path) -> None:
    """``check`` asks a catalog through its kind's checker: the toy's findings, not another's."""
    cfg = toy_kind.ToyCatalogSettings(url="http://toy.invalid", folder=str(tmp_path / "toy"))
    found = registry.check_catalog(
        cfg, CheckContext(Opening("main", f"sqlite:///{tmp_path / 'store.db'}"), None)
    )
    assert [f.name for f in found] == ["toy server", "toy holdings"]
    assert all(isinstance(f, Finding) and f.holds for f in found)


def test_reading_the_settings_loads_no_catalog_backend(tmp_path: Path) -> None:
    """Each kind's factory and checker import its backend when called: a process that only reads
    the settings file (the receiver, ``inspect``) loads no catalog client, and neither SQLAlchemy
    nor httpx on their account."""
    data = settings_data(tmp_path)
    data["catalogs"]["om"] = {"kind": "openmetadata", "url": "http://om.invalid"}
    data["catalogs"]["bd"] = {
        "kind": "blindata",
        "url": "http://bd.invalid",
        "tenant": "t",
        "token": {"env": "BD_TOKEN"},
    }
    data["catalogs"]["mq"] = {"kind": "marquez", "url": "http://mq.invalid"}
    path = tmp_path / "ol_dagster.yaml"
    path.write_text(yaml.safe_dump(data))
    script = (
        "import sys; from ol_dagster.settings import load_settings; "
        f"s = load_settings({str(path)!r}); assert len(s.catalogs) == 5; "
        "print(sorted(m for m in sys.modules if m.startswith(('httpx', 'sqlalchemy')) "
        "or m.endswith(('.catalog.catalog', '.blindata.catalog', '.marquez.catalog', "
        "'.openmetadata.catalog', '.embedded.catalog', '.check'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
