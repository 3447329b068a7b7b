"""Marquez meets a proxy's body limit and lost answers the way every HTTP catalog does
(``catalog.bounded``): a 413 on one event is that event's failed row, and a delete whose answer a
gateway lost, then answered 404, removed what it was sent for.

Through the real client, the sync's own upload and cleanup, and the strict Marquez fake behind a
proxy that refuses a body over its limit (``limit_body``) or loses the answer of a request Marquez
carried out (``Fault(after=True)``). What a user sees: what Marquez holds, the failed rows, the
cleanup report's counts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ol_dagster_tests.catalogs.test_catalog_marquez import (
    KPI_EDGE,
    Env,
    kpi,
    served_env,
    snapshot,
)
from ol_dagster_tests.fakes.faults import Fault
from ol_dagster_tests.fakes.harness import ANOMALIES, BUCKET, KPI, NS, calls, definition, pg, run


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    with served_env(tmp_path) as e:
        yield e


def test_an_event_over_a_proxys_body_limit_is_its_own_failed_row_and_the_rest_is_stored(
    env: Env,
):
    catalog = env.catalog()
    big = run("etl.big", [pg("orders")], [pg("big")], sql="select " + "x" * 8000)
    env.fake.server.limit_body(6000)

    synced = env.syncer.sync(catalog, definition(), [kpi(), big])

    (row,) = synced.result.failed
    assert row.key == "event 1" and row.blocks
    assert "HTTP 413" in row.reason and "too large for the server even alone" in row.reason
    assert env.posts() == 2 and env.sleeps == []  # the 413 is never sent again as it was
    assert len(env.fake.server.too_large) == 1
    assert env.fake.visible_jobs() == {(NS, KPI)}  # the other event is stored
    assert synced.report["skippedReason"] == "UPLOAD_FAILED"  # so nothing is deleted


def test_a_delete_whose_answer_a_gateway_lost_and_then_404_counts_as_removed(env: Env):
    """Marquez hid the job and the dataset; the gateway answered 504. Sent again, each DELETE is
    answered 404: the first attempt removed them, so the report counts them removed, not
    ``notFound``."""
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), snapshot())
    env.fake.server.inject(
        Fault(status=504, after=True, method="DELETE", path=f"/api/v1/namespaces/{NS}/jobs/"),
        Fault(status=504, after=True, method="DELETE", path="/api/v1/namespaces/s3%3A"),
    )

    synced = env.syncer.sync(catalog, definition(), snapshot(with_anomalies=False))

    report = synced.report
    assert report["skippedReason"] is None
    assert report["removedJobs"] == [f"{NS}.{ANOMALIES}"]
    assert report["notFound"] == {}
    (ds_call,) = calls(report, "datasetSystem")
    assert ds_call["real"] == {"physicalEntities": 1}
    assert [r.path for r in env.fake.server.seen("DELETE")] == [
        f"/api/v1/namespaces/{NS}/jobs/{ANOMALIES}",
        f"/api/v1/namespaces/{NS}/jobs/{ANOMALIES}",
        "/api/v1/namespaces/s3%3A%2F%2Fanomalies-bucket/datasets/anomalies",
        "/api/v1/namespaces/s3%3A%2F%2Fanomalies-bucket/datasets/anomalies",
    ]
    assert env.fake.hidden_jobs() == {(NS, ANOMALIES)}
    assert (BUCKET, "anomalies") not in env.fake.visible_datasets()
    assert env.fake.edges() == {KPI_EDGE}
    assert len(env.sleeps) == 2  # one backoff before each second attempt
