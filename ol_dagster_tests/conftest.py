"""Shared fixtures: settings files, stores on SQLite and on a real PostgreSQL, the corpus."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import settings as hypothesis_settings
from sqlalchemy import func, select

from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.store import EventStore
from ol_dagster.store.schema import events
from ol_dagster_tests.fakes.faults import CONTRACT_VIOLATIONS
from ol_dagster_tests.kafka_broker import TansuBroker
from ol_dagster_tests.postgres import PostgresServer

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# public OpenLineage events and schemas, copied in (see corpus/PROVENANCE.md)
CORPUS = PROJECT_ROOT / "ol_dagster_tests" / "corpus"

# Hypothesis profiles. ``ci`` (the default, every ``make test``): 150 sequences of the lineage
# safety model on SQLite (a share of them on PostgreSQL and through Dagster, see
# test_lineage_safety_model.py). ``long``, for a nightly run, 5,000:
#   .venv/bin/pytest ol_dagster_tests/safety/test_lineage_safety_model.py --hypothesis-profile=long
hypothesis_settings.register_profile("ci", max_examples=150, deadline=None, print_blob=True)
hypothesis_settings.register_profile("long", max_examples=5000, deadline=None, print_blob=True)
hypothesis_settings.load_profile("ci")

TOKENS = {"OL_TEST_TOKEN_SNAP": "snap-secret-token", "OL_TEST_TOKEN_ADD": "add-secret-token"}


# The longest tests (over 20 s each on 2 cores) start first: started last, as collection order
# would have it, they leave the other test processes idle at the end of the run.
LONGEST_FIRST = (
    "safety/test_lineage_safety_model.py::test_random_sequences",
    "commands/test_plain_install.py::test_the_wheel_installed_without_extras",
    "kafka/test_kafka_snapshot_order.py::test_an_older_snapshot",
    "safety/test_lineage_safety_model_http.py::test_random_sequences",
    "safety/test_retention_runs_cli.py::test_a_run_whose_start_is_past_retention",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: not any(name in item.nodeid for name in LONGEST_FIRST))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "postgres: needs the throwaway PostgreSQL server")
    config.addinivalue_line(
        "markers",
        "contract_violations_allowed: the test itself sends a fake requests the real server "
        "refuses (to see the fake refuse them)",
    )
    config.addinivalue_line(
        "markers",
        "producers: installs and runs a real producer (dbt, Airflow) or a browser; left out of "
        "`make test` (pyproject's addopts), run by `make test-producers`",
    )


@pytest.fixture(autouse=True)
def _catalog_contracts(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test in which a request reached a fake catalog that the real server's own
    definition forbids (see fakes/faults.py ``contract``)."""
    start = len(CONTRACT_VIOLATIONS)
    yield
    found = CONTRACT_VIOLATIONS[start:]
    del CONTRACT_VIOLATIONS[start:]
    if found and request.node.get_closest_marker("contract_violations_allowed") is None:
        listed = "\n".join(str(v) for v in found[:10])
        pytest.fail(f"{len(found)} request(s) break the server's published contract:\n{listed}")


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.fail(f"the OpenLineage corpus is expected at {CORPUS}")
    return CORPUS


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    try:
        server = PostgresServer().start()
    except (FileNotFoundError, OSError) as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required in CI: {exc}")
        pytest.skip(f"PostgreSQL binaries not available: {exc}")
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server: PostgresServer) -> str:
    """A fresh, empty database on the throwaway server."""
    return pg_server.fresh_database()


BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


def _backend_url(request: pytest.FixtureRequest, tmp_path: Path, sqlite_file: str) -> str:
    """A SQLite file in ``tmp_path`` or a fresh database on the throwaway PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / sqlite_file}"
    return request.getfixturevalue("pg_url")


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return _backend_url(request, tmp_path, "store.db")


@pytest.fixture(params=BACKENDS)
def catalog_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return _backend_url(request, tmp_path, "catalog.db")


@pytest.fixture
def catalog(catalog_url: str) -> Iterator[EmbeddedCatalog]:
    c = EmbeddedCatalog(catalog_url)
    yield c
    c.close()


@pytest.fixture
def event_store(store_url: str) -> Iterator[EventStore]:
    store = EventStore(store_url)
    yield store
    store.dispose()


@pytest.fixture
def tokens(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for k, v in TOKENS.items():
        monkeypatch.setenv(k, v)
    return {"snap": TOKENS["OL_TEST_TOKEN_SNAP"], "add": TOKENS["OL_TEST_TOKEN_ADD"]}


def settings_data(tmp_path: Path, **definition_overrides: Any) -> dict[str, Any]:
    """Two definitions: ``snap`` (BATCH_SNAPSHOT, namespaces etl, features) on catalog ``main``,
    and ``add`` (every namespace) on catalog ``other``: one owner per namespace per catalog."""
    snap: dict[str, Any] = {
        "name": "snap",
        "uuid": "11111111-1111-4111-8111-111111111111",
        "catalog": "main",
        "snapshotMode": "BATCH_SNAPSHOT",
        "allowedJobNamespaces": ["etl", "features"],
        "receiver": {"token": {"env": "OL_TEST_TOKEN_SNAP"}},
    }
    snap.update(definition_overrides)
    return {
        "store": {"url": f"sqlite:///{tmp_path / 'store.db'}"},
        "catalogs": {
            "main": {"kind": "embedded", "url": f"sqlite:///{tmp_path / 'catalog.db'}"},
            "other": {"kind": "embedded", "url": f"sqlite:///{tmp_path / 'other.db'}"},
        },
        "definitions": [
            snap,
            {
                "name": "add",
                "uuid": "22222222-2222-4222-8222-222222222222",
                "catalog": "other",
                "receiver": {"token": {"env": "OL_TEST_TOKEN_ADD"}},
            },
        ],
    }


TEST_DB_ENV = "OL_DAGSTER_TEST_DB"


@pytest.fixture
def write_settings(tmp_path: Path, request: pytest.FixtureRequest) -> Callable[..., Path]:
    """Write a settings file; pass a full mapping, or definition overrides for ``snap``.

    With ``OL_DAGSTER_TEST_DB=postgresql`` (the second pass of ``make test``), the settings put
    the event store and the embedded catalogs on the throwaway PostgreSQL server (one fresh
    database each per test for the store and ``main``; ``other`` in the store's database, as
    ``databaseUrl`` would) instead of SQLite files."""
    databases: dict[str, str] = {}
    if os.environ.get(TEST_DB_ENV) == "postgresql":
        databases = {"store": request.getfixturevalue("pg_url")}
        databases["catalog"] = request.getfixturevalue("pg_server").fresh_database("c")

    def write(data: dict[str, Any] | None = None, **definition_overrides: Any) -> Path:
        path = tmp_path / "ol_dagster.yaml"
        content = data or settings_data(tmp_path, **definition_overrides)
        if databases and data is None:
            content["store"]["url"] = databases["store"]
            content["catalogs"]["main"]["url"] = databases["catalog"]
            content["catalogs"]["other"]["url"] = databases["store"]
        path.write_text(yaml.safe_dump(content))
        return path

    return write


def run_event(
    namespace: str = "etl",
    name: str = "build_daily_kpi",
    *,
    event_type: str = "COMPLETE",
    inputs: list[tuple[str, str]] = (),  # type: ignore[assignment]
    outputs: list[tuple[str, str]] = (),  # type: ignore[assignment]
    run_id: str | None = None,
    event_time: str = "2026-11-01T02:00:00.000Z",
) -> dict[str, Any]:
    """A minimal, spec-valid RunEvent."""
    return {
        "eventType": event_type,
        "eventTime": event_time,
        "producer": "https://example.com/ol-dagster-tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": run_id or str(uuid.uuid4())},
        "job": {"namespace": namespace, "name": name},
        "inputs": [{"namespace": ns, "name": n} for ns, n in inputs],
        "outputs": [{"namespace": ns, "name": n} for ns, n in outputs],
    }


def kpi_snapshot(*, with_anomalies: bool = True) -> dict[str, Any]:
    """A snapshot batch: ``etl.build_daily_kpi`` (orders -> daily KPI), and unless told
    otherwise ``etl.features.export_anomalies`` (daily KPI -> S3 anomalies)."""
    pg, s3 = "postgres://db:5432", "s3://anomalies-bucket"
    events = [
        run_event(
            "etl",
            "build_daily_kpi",
            inputs=[(pg, "shop.public.orders")],
            outputs=[(pg, "shop.kpi.daily")],
        ),
    ]
    if with_anomalies:
        events.append(
            run_event(
                "etl",
                "features.export_anomalies",
                inputs=[(pg, "shop.kpi.daily")],
                outputs=[(s3, "anomalies")],
            )
        )
    return {"events": events}


def events_of(n: int, namespace: str = "etl", tag: str = "job") -> list[dict[str, Any]]:
    """``n`` completed runs of jobs ``<tag>_<i>``, each reading ``raw.<tag>_<i>`` and writing
    ``mart.<tag>_<i>``."""
    return [
        run_event(
            namespace,
            f"{tag}_{i}",
            inputs=[("postgres://db:5432", f"raw.{tag}_{i}")],
            outputs=[("postgres://db:5432", f"mart.{tag}_{i}")],
        )
        for i in range(n)
    ]


def wait_until(condition: Callable[[], bool], timeout: float) -> None:
    """Poll ``condition`` every 0.1 s; fail the test once ``timeout`` seconds have gone by."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def stored_raws(store_url: str) -> list[bytes]:
    """The raw bytes of every event in the store, read on a connection of its own."""
    store = EventStore(store_url)
    try:
        with store.engine.connect() as conn:
            return [bytes(r[0]) for r in conn.execute(select(events.c.raw))]
    finally:
        store.dispose()


def stored_count(store_url: str) -> int:
    """How many events the store holds, read on a connection of its own."""
    store = EventStore(store_url)
    try:
        with store.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(events)).scalar_one())
    finally:
        store.dispose()


@pytest.fixture(scope="session")
def broker() -> Iterator[TansuBroker]:
    """A real Kafka-compatible broker (Tansu, in memory) for this test process; each test uses its
    own topics and consumer group."""
    tansu = TansuBroker().start()
    try:
        yield tansu
    finally:
        tansu.stop()
