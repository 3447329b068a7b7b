"""The cleanup report counts what the catalog really did with each planned removal.

Against the Marquez fake, through the sync path the assets run: a removal the catalog refuses
(a 4xx other than 403/404) is reported ``refused``, warned about, and tried again next run; an
object someone else already removed answers 404 and is reported ``notFound``, never ``removed``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from ol_dagster.catalog.marquez.catalog import MarquezCatalog
from ol_dagster.catalog.marquez.settings import MarquezCatalogSettings
from ol_dagster.store import EventStore
from ol_dagster_tests.fakes.faults import Clock, Fault, serve
from ol_dagster_tests.fakes.harness import ANOMALIES, KPI, NS, Syncer, definition, pg, run
from ol_dagster_tests.fakes.marquez_fake import MarquezFake

START = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
JOBS = "physicalEntities"


def kpi():
    return run(KPI, [pg("orders")], [pg("kpi_daily")])


def anomalies():
    return run(ANOMALIES, [pg("kpi_daily")], [pg("anomalies")])


@pytest.fixture
def env(tmp_path: Path) -> Iterator[tuple[MarquezFake, str, MarquezCatalog, Syncer]]:
    fake = MarquezFake(Clock(START))
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    store = EventStore(store_url)
    with serve(fake.server) as url:
        settings = MarquezCatalogSettings.model_validate(
            {"kind": "marquez", "url": url, "maxRetries": 0, "timeoutSeconds": 5}
        )
        catalog = MarquezCatalog("main", settings, store_url=store_url, definition="snap")
        yield fake, url, catalog, Syncer(store, fake.clock)
        catalog.close()
    store.dispose()


def _job_path(name: str) -> str:
    return f"/api/v1/namespaces/{quote(NS, safe='')}/jobs/{quote(name, safe='')}"


def test_a_refused_removal_is_reported_and_tried_again_next_run(env):
    fake, _, catalog, syncer = env
    syncer.sync(catalog, definition(), [kpi(), anomalies()])
    fake.server.inject(Fault(status=409, method="DELETE", path=_job_path(ANOMALIES)))

    report = syncer.sync(catalog, definition(), [kpi()]).report

    assert report["skippedReason"] is None
    assert report["refused"] == {JOBS: 1}
    assert ANOMALIES not in " ".join(report["removedJobs"])
    assert any(w["code"] == "REMOVAL_REFUSED" for w in report["warnings"])
    assert (NS, ANOMALIES) in fake.visible_jobs()

    again = syncer.sync(catalog, definition(), [kpi()]).report

    assert again["refused"] == {}
    assert again["removedJobs"] == [f"{NS}.{ANOMALIES}"]
    assert (NS, ANOMALIES) not in fake.visible_jobs()


def test_a_job_someone_else_removed_is_not_found_not_removed(env):
    fake, url, catalog, syncer = env
    syncer.sync(catalog, definition(), [kpi(), anomalies()])
    assert httpx.delete(url + _job_path(ANOMALIES)).status_code == 200  # an operator's delete

    report = syncer.sync(catalog, definition(), [kpi()]).report

    assert report["notFound"] == {JOBS: 1}
    assert report["removedJobs"] == []
    assert report["removed"].get(JOBS, 0) == 0
    # the ledger forgot it: the next run plans nothing more
    assert syncer.sync(catalog, definition(), [kpi()]).report["plannedRemovals"] == 0
