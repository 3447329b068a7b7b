"""Never lose a batch to one event Marquez refuses: events conform before they leave, and what
still cannot is that event's own failed row.

Through the real client, the sync's own upload and cleanup, and the strict Marquez fake (which
answers what Jackson cannot read with Marquez's 500 ``{"code": 400, ...}``, refuses a namespace
outside its pattern, and a body that is not ``application/json``). What a user sees: the events
Marquez stored (and the times it read), the failed rows with their code, whether the cleanup ran.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ol_dagster.catalog.marquez.events import MARQUEZ_SCHEMA
from ol_dagster_tests.catalogs.test_catalog_marquez import (
    ANOMALIES_EDGE,
    KPI_EDGE,
    LINEAGE,
    Env,
    anomalies,
    kpi,
    served_env,
    snapshot,
    with_parent,
)
from ol_dagster_tests.fakes.faults import Fault
from ol_dagster_tests.fakes.harness import ANOMALIES, KPI, NS, definition, ds, facet, pg, run

KAFKA = "kafka://a:9092,b:9092"  # a bootstrap list, as some producers name a topic's namespace


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    with served_env(tmp_path) as e:
        yield e


def stored_times(env: Env) -> dict[str, str]:
    return {e["job"]["name"]: e["eventTime"] for e in env.fake.events}


def test_a_date_only_event_time_reaches_marquez_conformed_and_the_rest_is_stored(env: Env):
    """Marquez's date reader refuses ``2026-11-01`` and ``+0200`` (a 500 it would answer every
    run): they are sent as the UTC time ol-dagster read, once each; a time it reads is untouched."""
    catalog = env.catalog()
    dated, shifted, plain = kpi(), anomalies(), run("etl.other", [pg("a")], [pg("b")])
    dated["eventTime"] = "2026-11-01"
    shifted["eventTime"] = "2026-11-01T04:30:00+0200"
    plain["eventTime"] = "2026-11-01T02:00:00.5+01:00"

    synced = env.syncer.sync(catalog, definition(), [dated, shifted, plain])

    assert synced.result.succeeded and synced.result.failed == []
    assert stored_times(env) == {
        KPI: "2026-11-01T00:00:00Z",
        ANOMALIES: "2026-11-01T02:30:00Z",
        "etl.other": "2026-11-01T02:00:00.5+01:00",
    }
    assert env.posts() == 3 and env.sleeps == []
    assert {KPI_EDGE, ANOMALIES_EDGE} <= env.fake.edges()
    assert datetime(2026, 11, 1, 2, 30, tzinfo=UTC) in env.fake.event_times


def test_a_nominal_time_marquez_cannot_read_is_conformed_too(env: Env):
    catalog = env.catalog()
    event = kpi()
    event["run"]["facets"] = {
        "nominalTime": facet(
            "NominalTimeRunFacet",
            nominalStartTime="2026-11-01",
            nominalEndTime="2026-11-01T01:00:00+0100",
        )
    }

    synced = env.syncer.sync(catalog, definition(), [event])

    assert synced.result.failed == []
    (stored,) = env.fake.events
    nominal = stored["run"]["facets"]["nominalTime"]
    assert (nominal["nominalStartTime"], nominal["nominalEndTime"]) == (
        "2026-11-01T00:00:00Z",
        "2026-11-01T00:00:00Z",
    )


def test_an_unconformable_namespace_is_one_failed_row_and_the_others_sync(env: Env):
    """``kafka://a:9092,b:9092`` breaks Marquez's namespace pattern (``,``): renaming it would
    change what it names, so its event stays here as one failed row (MARQUEZ_SCHEMA). The rest
    of the batch is stored, the batch is done, and the cleanup runs for the others."""
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), snapshot())
    stream = run("etl.stream", [ds(KAFKA, "orders")], [pg("orders_copy")])

    synced = env.syncer.sync(catalog, definition(), [kpi(), stream])

    (row,) = synced.result.failed
    assert (row.object_type, row.code, row.blocks) == ("events", MARQUEZ_SCHEMA, False)
    assert f"inputs[0].namespace '{KAFKA}'" in row.reason and "','" in row.reason
    assert {"objectType": "events", "key": row.key, "reason": row.reason} | {
        "code": MARQUEZ_SCHEMA,
        "blocks": False,
    } in synced.result.as_dict()["failed"]
    assert "etl.stream" not in {e["job"]["name"] for e in env.fake.events}  # never sent
    assert synced.result.succeeded and synced.report["skippedReason"] is None
    assert synced.report["removedJobs"] == [f"{NS}.{ANOMALIES}"]
    assert env.fake.visible_jobs() == {(NS, KPI)}

    # the next run finds the job of the refused event still this definition's: not deleted
    again = env.syncer.sync(catalog, definition(), [kpi(), stream])
    assert again.report["removedJobs"] == [] and len(again.result.failed) == 1


def test_a_500_with_jacksons_error_refuses_that_event_alone_and_is_never_retried(env: Env):
    """Marquez's JsonProcessingExceptionMapper answers 500 with ``"code": 400``: the event is
    refused (sending it again changes nothing), the others are posted and the cleanup runs."""
    catalog = env.catalog(maxRetries=3)
    env.syncer.sync(catalog, definition(), snapshot())
    before = env.posts()
    message = 'Cannot deserialize value of type `java.net.URI` from String "a b"'
    body = json.dumps({"code": 400, "message": message}).encode()
    env.fake.server.inject(Fault(status=500, body=body, method="POST", path=LINEAGE))

    synced = env.syncer.sync(catalog, definition(), snapshot())

    (row,) = synced.result.failed
    assert (row.code, row.blocks) == (MARQUEZ_SCHEMA, False)
    assert row.reason.startswith("HTTP 500, Marquez cannot read the event: Cannot deserialize")
    assert env.posts() - before == 2 and env.sleeps == []
    assert synced.result.succeeded and synced.report["skippedReason"] is None


def test_a_500_of_marquezs_database_is_still_retried(env: Env):
    """Its database errors say ``"code": 500`` (JdbiExceptionExceptionMapper): a passing fault,
    retried as any 5xx."""
    catalog = env.catalog(maxRetries=3)
    body = json.dumps({"code": 500, "message": "could not serialize access"}).encode()
    env.fake.server.inject(Fault(status=500, body=body, method="POST", path=LINEAGE))

    synced = env.syncer.sync(catalog, definition(), [kpi()])

    assert synced.result.succeeded and synced.result.failed == []
    assert env.posts() == 2 and len(env.sleeps) == 1
    assert KPI_EDGE in env.fake.edges()


def test_every_event_is_posted_as_application_json(env: Env):
    """Marquez takes ``application/json`` only (415 otherwise, see the contract tests)."""
    catalog = env.catalog()

    env.syncer.sync(catalog, definition(), snapshot())

    posts = env.fake.server.seen("POST", LINEAGE)
    assert len(posts) == 2
    assert {p.headers["content-type"] for p in posts} == {"application/json"}


def test_a_refused_event_keeps_what_was_recorded_of_its_job(env: Env):
    """A child job Marquez holds as ``nightly.child``; its next event is refused. The job is
    still this batch's (not deleted), and the name Marquez holds it under stays recorded: when
    it leaves, that is the name deleted."""
    catalog = env.catalog()
    child = with_parent(run("child", [pg("a")], [pg("b")]), "airflow", "nightly")
    env.syncer.sync(catalog, definition(), [kpi(), child])
    refused = with_parent(run("child", [ds(KAFKA, "t")], [pg("b")]), "airflow", "nightly")

    kept = env.syncer.sync(catalog, definition(), [kpi(), refused])

    assert len(kept.result.failed) == 1 and kept.report["removedJobs"] == []
    assert (NS, "nightly.child") in env.fake.visible_jobs()

    gone = env.syncer.sync(catalog, definition(), [kpi()])

    assert gone.report["removedJobs"] == [f"{NS}.child"]
    assert (NS, "nightly.child") in env.fake.hidden_jobs()


def test_marquezs_own_400_without_a_body_refuses_that_event_alone(env: Env):
    """An IllegalArgumentException while Marquez writes the event answers 400 with no body
    (OpenLineageResource.determineStatusCode): the event's refusal, not the batch's."""
    catalog = env.catalog()
    env.fake.server.inject(Fault(status=400, method="POST", path=LINEAGE))

    synced = env.syncer.sync(catalog, definition(), snapshot())

    (row,) = synced.result.failed
    assert (row.code, row.blocks) == (MARQUEZ_SCHEMA, False)
    assert row.reason == "HTTP 400 without a message: Marquez could not write the event"
    assert synced.result.succeeded and env.posts() == 2
