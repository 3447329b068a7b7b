"""What every ledger catalog does alike, run against both: Marquez and OpenMetadata.

Both take the batch's OpenLineage events and record what they sent in the sync ledger
(``catalog/ledger_catalog.py``), so retries, failures that delete nothing, a refused cleanup, job
counts, secrets and the run through Dagster behave the same whatever the server. Each test runs
once per backend, against that backend's strict in-process fake (``fakes/``), with that backend's
own events and edges (``Backend``). What only one server does stays in its own file
(``test_catalog_marquez.py``, ``test_catalog_openmetadata.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from starlette.testclient import TestClient

from ol_dagster.catalog.ledger.catalog import LedgerCatalog
from ol_dagster.commands.headless import sync_batches
from ol_dagster.receiver.app import create_app
from ol_dagster.settings import load_settings
from ol_dagster.store import EventStore
from ol_dagster_tests.catalogs import test_catalog_marquez as marquez
from ol_dagster_tests.catalogs import test_catalog_openmetadata as openmetadata
from ol_dagster_tests.conftest import settings_data
from ol_dagster_tests.fakes.faults import Clock, Fault, serve
from ol_dagster_tests.fakes.harness import (
    ANOMALIES,
    BUCKET,
    BUCKET_SYSTEM,
    KPI,
    NS,
    Syncer,
    definition,
)
from ol_dagster_tests.fakes.marquez_fake import MarquezFake
from ol_dagster_tests.fakes.openmetadata_fake import CREATE, EDIT_LINEAGE

MARQUEZ_SECRET_ENV = "OL_TEST_MARQUEZ_TOKEN"


@dataclass
class Backend:
    """One backend as these tests see it: its test environment (fake, catalogs, syncer), its
    events and edges, and what a user of the server sees."""

    kind: str
    env: marquez.Env | openmetadata.Env
    post_path: str  # where the events go
    secret: str  # the token the catalog sends (configured by ``catalog_settings``)
    catalog_settings: dict[str, Any]  # beyond kind and url
    kpi: Callable[[], dict[str, Any]]
    snapshot: Callable[..., list[dict[str, Any]]]
    kpi_edge: Any
    anomalies_edge: Any
    edges: Callable[[], set[Any]]
    visible: Callable[[], Any]  # everything a user of the server sees that a cleanup may remove
    refuse_deletes: Callable[[], None]  # the cleanup's user loses the right to delete
    allow_deletes: Callable[[], None]

    @property
    def fake(self) -> Any:
        return self.env.fake

    def catalog(self, definition: str = "snap", **cfg: Any) -> LedgerCatalog:
        return self.env.catalog(definition, **cfg)

    def posts(self) -> int:
        return self.env.posts()


def _marquez(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
    monkeypatch.setenv(MARQUEZ_SECRET_ENV, marquez.SECRET)
    fake = MarquezFake(Clock(marquez.START))
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    store = EventStore(store_url)
    with serve(fake.server) as url:
        env = marquez.Env(fake, url, store_url, Syncer(store, fake.clock), [], [])
        yield Backend(
            kind="marquez",
            env=env,
            post_path=marquez.LINEAGE,
            secret=marquez.SECRET,
            catalog_settings={"token": {"env": MARQUEZ_SECRET_ENV}},
            kpi=marquez.kpi,
            snapshot=marquez.snapshot,
            kpi_edge=marquez.KPI_EDGE,
            anomalies_edge=marquez.ANOMALIES_EDGE,
            edges=fake.edges,
            visible=lambda: (fake.visible_jobs(), fake.visible_datasets(), fake.edges()),
            # a proxy in front of Marquez refuses the next DELETE
            refuse_deletes=lambda: fake.server.inject(Fault(status=403, method="DELETE")),
            allow_deletes=lambda: None,
        )
        for c in env.made:
            c.close()
    store.dispose()


def _openmetadata(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
    monkeypatch.setenv(openmetadata.TOKEN_ENV, openmetadata.JWT)
    fake = openmetadata.make_fake(2)
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    store = EventStore(store_url)
    tokens = fake.tokens
    with serve(fake.server) as url:
        env = openmetadata.Env(fake, url, store_url, Syncer(store, fake.clock), [], [])
        yield Backend(
            kind="openmetadata",
            env=env,
            post_path=openmetadata.BATCH,
            secret=openmetadata.JWT,
            catalog_settings={
                "token": {"env": openmetadata.TOKEN_ENV},
                "serviceMapping": {openmetadata.WH: openmetadata.SERVICE},
                "chunkSize": 1,  # a request an event
            },
            kpi=openmetadata.kpi,
            snapshot=openmetadata.snapshot,
            kpi_edge=openmetadata.KPI_EDGE,
            anomalies_edge=openmetadata.ANOMALIES_EDGE,
            edges=fake.edge_pairs,
            visible=fake.edge_pairs,  # OpenMetadata loses edges only (tables are others')
            # the bot loses EditLineage
            refuse_deletes=lambda: tokens.__setitem__(openmetadata.JWT, {CREATE}),
            allow_deletes=lambda: tokens.__setitem__(openmetadata.JWT, {EDIT_LINEAGE, CREATE}),
        )
        for c in env.made:
            c.close()
    store.dispose()


@pytest.fixture(params=["marquez", "openmetadata"])
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    make = _marquez if request.param == "marquez" else _openmetadata
    yield from make(tmp_path, monkeypatch)


# == failures and retries ==========================================================================


@pytest.mark.parametrize(
    ("status", "attempts"),
    [(401, 1), (403, 1), (429, 4), (500, 4), (502, 4), (503, 4)],
)
def test_every_failure_status_fails_the_upload_and_deletes_nothing(
    backend: Backend, status: int, attempts: int
):
    """401 and 403 are the server's last word; 429 and 5xx are retried, then given up. Either
    way the upload fails as a whole and the cleanup deletes nothing."""
    catalog = backend.catalog(maxRetries=3)
    backend.env.syncer.sync(catalog, definition(), backend.snapshot())
    seen, before = backend.visible(), backend.posts()
    backend.fake.server.burst(status, 10, method="POST", path=backend.post_path)

    synced = backend.env.syncer.sync(catalog, definition(), backend.snapshot(with_anomalies=False))

    (row,) = synced.result.failed
    assert row.key == "*" and f"HTTP {status}" in row.reason
    assert backend.posts() - before == attempts
    assert len(backend.env.sleeps) == attempts - 1
    assert synced.report["skippedReason"] == "UPLOAD_FAILED" and synced.report["calls"] == []
    assert backend.visible() == seen
    assert backend.edges() == {backend.kpi_edge, backend.anomalies_edge}


def test_server_errors_then_recovery_upload_and_clean_honouring_retry_after(backend: Backend):
    catalog = backend.catalog(maxRetries=4)
    backend.env.syncer.sync(catalog, definition(), backend.snapshot())
    path = backend.post_path
    backend.fake.server.inject(
        Fault(status=502, method="POST", path=path),
        Fault(status=503, method="POST", path=path),
        Fault(status=429, retry_after="3", method="POST", path=path),
    )

    synced = backend.env.syncer.sync(catalog, definition(), backend.snapshot(with_anomalies=False))

    assert synced.result.succeeded
    sleeps = backend.env.sleeps
    assert len(sleeps) == 3 and all(0 <= s <= 30 for s in sleeps) and sleeps[-1] == 3.0
    assert synced.report["removedJobs"] == [f"{NS}.{ANOMALIES}"]
    assert backend.edges() == {backend.kpi_edge}


def test_a_slow_answer_times_out_and_is_retried(backend: Backend):
    if backend.kind == "openmetadata":
        pytest.skip("OpenMetadata never sends a batch again blindly: test_openmetadata_batches.py")
    catalog = backend.catalog(timeoutSeconds=0.3)
    backend.fake.server.inject(Fault(delay=1.0, method="POST", path=backend.post_path))

    synced = backend.env.syncer.sync(catalog, definition(), [backend.kpi()])

    assert synced.result.succeeded
    assert len(backend.env.sleeps) == 1
    assert backend.edges() == {backend.kpi_edge}


def test_answers_that_stay_too_slow_fail_the_upload_and_delete_nothing(backend: Backend):
    if backend.kind == "openmetadata":
        pytest.skip("OpenMetadata never sends a batch again blindly: test_openmetadata_batches.py")
    catalog = backend.catalog(timeoutSeconds=0.2, maxRetries=1)
    backend.env.syncer.sync(catalog, definition(), backend.snapshot())
    seen = backend.visible()
    path = backend.post_path
    backend.fake.server.inject(*(Fault(delay=0.6, method="POST", path=path) for _ in range(2)))

    synced = backend.env.syncer.sync(catalog, definition(), backend.snapshot(with_anomalies=False))

    (row,) = synced.result.failed
    assert row.reason == f"POST {path}: ReadTimeout after 2 attempt(s)"
    assert synced.report["skippedReason"] == "UPLOAD_FAILED"
    assert backend.visible() == seen


# == cleanup =======================================================================================


def test_a_refused_cleanup_deletes_nothing_and_the_next_run_does_it(backend: Backend):
    """Guards: "The user that runs the cleanup is refused (403, CLEANUP_PERMISSION_DENIED):
    nothing is deleted and the run ends in warning." The right to delete goes between the
    upload and the cleanup, and comes back before the next run."""
    catalog = backend.catalog()
    backend.env.syncer.sync(catalog, definition(), backend.snapshot())
    seen = backend.visible()

    refused = backend.env.syncer.sync(
        catalog,
        definition(),
        backend.snapshot(with_anomalies=False),
        between=backend.refuse_deletes,
    )

    assert refused.result.succeeded
    assert refused.report["skippedReason"] == "CLEANUP_PERMISSION_DENIED"
    assert refused.report["removedJobs"] == []
    assert backend.visible() == seen
    assert backend.edges() == {backend.kpi_edge, backend.anomalies_edge}

    backend.allow_deletes()
    allowed = backend.env.syncer.sync(catalog, definition(), backend.snapshot(with_anomalies=False))
    assert allowed.report["removedJobs"] == [f"{NS}.{ANOMALIES}"]
    assert backend.edges() == {backend.kpi_edge}


def test_count_jobs_counts_this_definitions_jobs_in_a_system(backend: Backend):
    snap_catalog, other_catalog = backend.catalog("snap"), backend.catalog("other")
    backend.env.syncer.sync(snap_catalog, definition(), backend.snapshot())

    assert snap_catalog.count_jobs("snap_jobs", schemas=[NS]) == 2
    assert snap_catalog.count_jobs("snap_jobs", schemas=None) == 2
    assert snap_catalog.count_jobs("snap_jobs", schemas=[]) == 0
    assert snap_catalog.count_jobs("snap_jobs", schemas=["ml"]) == 0
    assert snap_catalog.count_jobs("other_jobs", schemas=None) == 0
    assert snap_catalog.count_jobs(BUCKET_SYSTEM, schemas=None) == 0
    assert other_catalog.count_jobs("snap_jobs", schemas=None) == 0  # the ledger is per definition


# == secrets =======================================================================================


def test_the_token_is_sent_as_a_bearer_token_and_never_shows_in_results(backend: Backend):
    catalog = backend.catalog(**backend.catalog_settings)
    backend.fake.server.burst(401, 1, method="POST", path=backend.post_path)

    synced = backend.env.syncer.sync(catalog, definition(), [backend.kpi()])

    assert {r.headers.get("authorization") for r in backend.fake.server.requests} == {
        f"Bearer {backend.secret}"
    }
    assert not synced.result.succeeded
    assert synced.result.failed[0].reason == f"POST {backend.post_path}: HTTP 401"
    text = json.dumps(synced.result.as_dict()) + json.dumps(synced.report, default=str)
    assert backend.secret not in text and backend.secret not in repr(catalog.cfg)


# == through Dagster ==============================================================================


@pytest.fixture
def dagster_env(
    backend: Backend, tmp_path: Path, tokens: dict[str, str], write_settings: Callable[..., Path]
) -> Iterator[dict[str, Any]]:
    data = settings_data(
        tmp_path,
        allowedJobNamespaces=[NS],
        datasetSystems=[{"namespace": BUCKET, "system": BUCKET_SYSTEM, "cleanupMode": "CUTOFF"}],
    )
    data["catalogs"] |= {
        "main": {
            "kind": backend.kind,
            "url": backend.env.url,
            "maxRetries": 0,
            **backend.catalog_settings,
        }
    }
    path = write_settings(data)
    settings = load_settings(path)
    store = EventStore(settings.store.url)
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        yield {
            "path": str(path),
            "settings": settings,
            "client": TestClient(create_app(settings, store)),
            "auth": {"Authorization": f"Bearer {tokens['snap']}"},
            "instance": instance,
        }
    store.dispose()


def test_the_seed_example_through_dagster(backend: Backend, dagster_env: dict[str, Any]):
    """A definition whose catalog is this backend: the ``<definition>__sync`` job uploads to it
    and removes the dropped job's objects in the same run."""
    d = dagster_env
    catalog = d["settings"].open_catalog("main", definition="snap")
    assert isinstance(catalog, LedgerCatalog) and catalog.cfg.kind == backend.kind
    catalog.close()

    def post_and_sync(events: list[dict[str, Any]]) -> dict[str, Any]:
        backend.fake.clock.advance(minutes=1)
        response = d["client"].post(
            "/api/v1/lineage/batch", json={"events": events}, headers=d["auth"]
        )
        assert response.status_code == 200, response.text
        (line,) = sync_batches(d["path"], definition="snap", instance=d["instance"])
        return line

    first = post_and_sync(backend.snapshot())
    assert first["status"] == "synced", first
    assert backend.edges() == {backend.kpi_edge, backend.anomalies_edge}

    second = post_and_sync(backend.snapshot(with_anomalies=False))

    assert second["status"] == "synced"
    assert second["cleanup"]["removedJobs"] == [f"{NS}.{ANOMALIES}"]
    assert second["checks"]["upload_succeeded"] and second["checks"]["cleanup_permitted"]
    assert backend.edges() == {backend.kpi_edge}
    if backend.kind == "marquez":
        assert backend.fake.visible_jobs() == {(NS, KPI)}
        assert (BUCKET, "anomalies") not in backend.fake.visible_datasets()
    else:  # OpenMetadata never creates a container: the S3 output is not found
        assert first["upload"]["dropped"] == {"notFound": 1}
