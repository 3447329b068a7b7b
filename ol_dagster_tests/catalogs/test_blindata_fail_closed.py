"""Blindata fails closed, and its writes are bounded: through the real client and the strict fake.

A cleanup deletes only after the server confirmed the dry run; an answer the client does not
recognise stops the cleanup; a server that ignores ``dryRun`` loses nothing. Uploads survive a
proxy's 413 (halved batches), lost answers (read back before anything is sent again), long
``Retry-After`` (capped) and deletes retried after a timeout (a 404 then is a removal). Retries
never wait: the catalog gets a ``sleep`` that records the delays.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from ol_dagster.catalog.blindata import api
from ol_dagster.catalog.blindata.catalog import BlindataCatalog
from ol_dagster.catalog.http import CatalogUnavailable
from ol_dagster.catalog.protocol import CleanupNotConfirmed, DatasetRef
from ol_dagster.defs import constants as C
from ol_dagster.defs.results import BATCH_CLEANUP_CHECKS, cleanup_result
from ol_dagster.receiver.server import serve_in_background
from ol_dagster.store import EventStore
from ol_dagster_tests.catalogs.test_catalog_blindata import (
    ADMIN,
    API_KEY,
    JOBS,
    KEY_ENV,
    TENANT,
    TOKEN,
    TOKEN_ENV,
    USER,
    Harness,
    Sleeps,
    catalog_settings,
    everything,
    jobs,
    scopes,
    shop,
    snap,
)
from ol_dagster_tests.fakes.blindata_fake import BlindataFake, FakeClock, Fault
from ol_dagster_tests.safety.test_cleanup_rules import WH, job, pg, simple

FLOWS_CLEANUP = r"/dataflows/\*/cleanup$"
IMPORT = r"/import-objects$"
SYSTEM_CLEANUP = r"/systems/[^/]+/cleanup$"


@pytest.fixture
def fake() -> BlindataFake:
    f = BlindataFake(FakeClock())
    f.add_user(USER, tenant=TENANT, api_key=API_KEY, permissions=set(ADMIN))
    return f


@pytest.fixture
def url(fake: BlindataFake) -> Iterator[str]:
    with serve_in_background(fake.app, date_header=False) as base:  # type: ignore[arg-type]
        yield base


@pytest.fixture
def make(
    fake: BlindataFake, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Harness]]:
    """A harness whose catalog has these settings (``timeoutSeconds=0.3``...)."""
    monkeypatch.setenv(KEY_ENV, API_KEY)
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    made: list[Harness] = []

    def harness(**overrides: Any) -> Harness:
        sleeps = Sleeps()
        catalog = BlindataCatalog(
            "main",
            catalog_settings(url, **overrides),
            store_url="",
            definition="snap",
            sleep=sleeps,
        )
        store = EventStore(f"sqlite:///{tmp_path / f'store{len(made)}.db'}")
        made.append(Harness(fake, catalog, store, sleeps))
        return made[-1]

    yield harness
    for h in made:
        h.catalog.close()
        h.store.dispose()


@pytest.fixture
def h(make: Callable[..., Harness]) -> Harness:
    return make()


def statuses(fake: BlindataFake, method: str, path: str, *, count: int = 0) -> list[int]:
    """The statuses the fake answered, waiting (3 s at most) until it has answered ``count``:
    an answer held past the client's timeout is recorded when the fake sends it."""
    deadline = time.monotonic() + 3
    while len(fake.seen(method, path)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return [s.status for s in fake.seen(method, path)]


def two_jobs() -> list[dict[str, Any]]:
    return [simple("etl", "a", sql="select 1"), simple("etl", "b", sql="select 2")]


# == dry runs the server must confirm ============================================================


def test_a_server_that_ignores_dry_run_deletes_nothing_and_the_report_and_check_say_why(
    h: Harness,
):
    d = snap(allowedJobNamespaces=["etl"], cleanup={"maxRemovalShare": 1.0})
    h.sync(d, two_jobs())
    h.fake.ignore_dry_run()
    before = {"jobs": jobs(h.fake), "scopes": scopes(h.fake), "all": everything(h.fake)}
    seen = len(h.fake.requests)

    report = h.sync(d, [simple("etl", "a", sql="select 1")])  # b is gone: its flows would go

    assert report["skippedReason"] == "CLEANUP_NOT_CONFIRMED"
    (warning,) = [w for w in report["warnings"] if w["code"] == "CLEANUP_NOT_CONFIRMED"]
    assert "does not confirm dryRun true: no 'dryRun' field" in warning["message"]
    assert "the server may have deleted for real" in warning["message"]
    assert "removed" not in report and report["removedJobs"] == []
    # what b had is all there: the only cleanup call sent had a cutoff nothing is older than
    assert jobs(h.fake) == before["jobs"] == {"etl.a", "etl.b"}
    assert scopes(h.fake) == before["scopes"]
    assert everything(h.fake) == before["all"]
    cleanups = [s for s in h.fake.requests[seen:] if s.path.endswith("/cleanup")]
    assert [s.path for s in cleanups] == ["/api/v1/dataflows/*/cleanup"]
    assert h.fake.seen("DELETE") == []

    # the cleanup's check in Dagster fails, and says why
    checks = {c.check_name: c for c in cleanup_result(report, BATCH_CLEANUP_CHECKS).check_results}
    permitted = checks[C.CLEANUP_PERMITTED]
    assert permitted.passed is False and permitted.severity == dg.AssetCheckSeverity.ERROR
    assert permitted.description is not None
    assert "CLEANUP_NOT_CONFIRMED" in permitted.description
    assert "no 'dryRun' field" in permitted.description


def test_the_same_server_cleans_once_it_confirms_dry_runs(h: Harness):
    """The refusal is the server's answer, not a state: the next run, on a server that
    confirms, removes what the batch no longer describes."""
    d = snap(allowedJobNamespaces=["etl"], cleanup={"maxRemovalShare": 1.0})
    h.sync(d, two_jobs())
    h.fake.ignore_dry_run()
    assert h.sync(d, [simple("etl", "a", sql="select 1")])["skippedReason"] == (
        "CLEANUP_NOT_CONFIRMED"
    )
    h.fake.ignore_dry_run(False)

    report = h.sync(d, [simple("etl", "a", sql="select 1")])

    assert report["skippedReason"] is None and report["removedJobs"] == ["etl.b"]
    assert jobs(h.fake) == {"etl.a"}


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ({"dryRun": True, "total": 0}, "no count 'matched'"),
        ({"dryRun": True, "matched": "0", "deleted": 0}, "no count 'matched'"),
        ({"dryRun": "true", "matched": 0}, "does not confirm dryRun true: dryRun 'true'"),
        ({"dryRun": True, "matched": 2, "deleted": 2}, "reports 2 deletion(s) for a dry run"),
        ([{"matched": 0}], "the answer is not a JSON object"),
    ],
)
def test_an_unrecognised_flows_cleanup_answer_stops_the_cleanup(h: Harness, answer: Any, said: str):
    d = snap(allowedJobNamespaces=["etl"], cleanup={"maxRemovalShare": 1.0})
    h.sync(d, two_jobs())
    before = everything(h.fake)
    h.fake.inject(Fault(method="POST", path=FLOWS_CLEANUP, body=json.dumps(answer).encode()))

    report = h.sync(d, [simple("etl", "a", sql="select 1")])

    assert report["skippedReason"] == "CLEANUP_NOT_CONFIRMED"
    (warning,) = [w for w in report["warnings"] if w["code"] == "CLEANUP_NOT_CONFIRMED"]
    assert said in warning["message"] and "nothing more is deleted" in warning["message"]
    assert everything(h.fake)["entities"] == before["entities"]
    assert jobs(h.fake) == {"etl.a", "etl.b"} and "ol:etl|b" in scopes(h.fake)
    assert h.fake.seen("DELETE") == []
    assert h.fake.pending_faults() == 0


@pytest.mark.parametrize(
    ("results", "said"),
    [
        (None, "no 'results' by resource type"),
        ({"PHYSICAL_ENTITY": {"matched": 0}, "DATA_PRODUCT": {"matched": 4}}, "unknown type"),
        ({"PHYSICAL_ENTITY": 3}, "PHYSICAL_ENTITY: no count 'matched'"),
    ],
)
def test_an_unrecognised_system_cleanup_answer_stops_the_cleanup(
    h: Harness, results: Any, said: str
):
    d = snap(allowedJobNamespaces=["etl"], cleanup={"maxRemovalShare": 1.0})
    h.sync(d, two_jobs())
    answer = {"dryRun": True, "cutoff": "2026-11-04T10:00:00+00:00", "results": results}
    h.fake.inject(
        Fault(method="POST", path=r"/systems/.*/cleanup$", body=json.dumps(answer).encode())
    )

    report = h.sync(d, [simple("etl", "a", sql="select 1")])

    assert report["skippedReason"] == "CLEANUP_NOT_CONFIRMED"
    assert any(said in w.get("message", "") for w in report["warnings"])
    assert jobs(h.fake) == {"etl.a", "etl.b"} and "ol:etl|b" in scopes(h.fake)


def test_a_real_call_whose_answer_is_not_confirmed_stops_the_calls_after_it(h: Harness):
    """The real call has been made (the server may have deleted): the client stops there and
    says so, rather than count its answer as nothing removed."""
    d = snap(allowedJobNamespaces=["etl"])
    h.sync(d, two_jobs())
    h.fake.clock.advance(hours=1)  # type: ignore[attr-defined]
    now = h.catalog.clock()
    assert h.catalog.cleanup_flows(jobs=[("etl", "b")], before=now, dry_run=True).total == 1
    h.fake.inject(Fault(method="POST", path=FLOWS_CLEANUP, body=b'{"removed": 1}'))

    with pytest.raises(CleanupNotConfirmed) as exc:
        h.catalog.cleanup_flows(jobs=[("etl", "b")], before=now, dry_run=False)

    assert "(real call): the answer does not confirm dryRun false" in str(exc.value)


# == bounded uploads ==============================================================================


def checked(n: int, *, long_name: int = 0) -> list[dict[str, Any]]:
    """etl.check reads orders and asserts ``n`` things on it; one assertion's name is
    ``long_name`` characters long when given."""
    asserts = [(f"assertion_{i:02d}", "id") for i in range(n)]
    if long_name:
        asserts.append(("x" * long_name, "id"))
    return [job("etl", "check", [pg("orders", ["id"], checks=asserts)], [pg("report", ["id"])])]


def test_a_413_from_a_proxy_halves_the_batch_and_every_check_lands(h: Harness):
    h.fake.limit_body(4000)  # every row fits; the suite's 24 checks in one import do not

    report = h.sync(snap(), checked(24))

    assert h.upload["succeeded"] is True and report["skippedReason"] is None
    assert len(h.fake.checks(TENANT)) == 24
    imports = statuses(h.fake, "POST", IMPORT)
    assert imports[0] == 413 and imports.count(200) >= 2
    assert h.upload["written"]["qualityChecks"] == 24


def test_one_check_still_too_large_alone_is_its_own_failed_row(h: Harness):
    h.fake.limit_body(4000)

    report = h.sync(snap(), checked(6, long_name=5000))

    assert len(h.fake.checks(TENANT)) == 6  # every other check landed
    (row,) = h.upload["failed"]
    assert row["objectType"] == "qualityChecks" and "x" * 100 in row["key"]
    assert "HTTP 413" in row["reason"] and "too large for the server even alone" in row["reason"]
    assert report["skippedReason"] == "UPLOAD_FAILED"  # so nothing is deleted


def test_a_413_on_a_flows_cleanup_halves_its_scopes_and_the_counts_add_up(h: Harness):
    d = snap(allowedJobNamespaces=["etl"])
    h.sync(d, [simple("etl", f"j{i}") for i in range(3)])
    h.fake.clock.advance(hours=1)  # type: ignore[attr-defined]
    now = h.catalog.clock()
    named = [("etl", f"j{i}") for i in range(3)] + [("etl", f"gone_{i:03d}") for i in range(60)]
    h.fake.limit_body(1500)

    planned = h.catalog.cleanup_flows(jobs=named, before=now, dry_run=True)
    done = h.catalog.cleanup_flows(jobs=named, before=now, dry_run=False)

    assert planned.counts == done.counts == {"dataFlows": 3}
    assert scopes(h.fake) == set()
    calls = statuses(h.fake, "POST", FLOWS_CLEANUP)
    assert 413 in calls and calls.count(200) > 3


def test_a_413_on_a_system_cleanup_splits_its_schemas_and_the_counts_add_up(h: Harness):
    d = snap(allowedJobNamespaces=["etl"])
    h.sync(d, [simple("etl", f"j{i}") for i in range(3)])
    h.fake.clock.advance(hours=1)  # type: ignore[attr-defined]
    now = h.catalog.clock()
    schemas = ["etl"] + [f"gone_{i:03d}" for i in range(200)]
    h.fake.limit_body(1500)

    planned = h.catalog.cleanup_job_system(JOBS, schemas=schemas, before=now, dry_run=True)
    done = h.catalog.cleanup_job_system(JOBS, schemas=schemas, before=now, dry_run=False)

    assert planned.counts == done.counts
    assert done.counts["physicalEntities"] == 3
    assert sorted(done.removed_jobs) == [f"etl.j{i}" for i in range(3)]
    assert jobs(h.fake) == set()
    calls = statuses(h.fake, "POST", SYSTEM_CLEANUP)
    assert 413 in calls and calls.count(200) > 3


def test_a_create_whose_answer_is_lost_is_read_back_not_sent_again(make: Callable[..., Harness]):
    h = make(timeoutSeconds=0.3)
    h.fake.inject(Fault(method="POST", path="/physical_entities$", linger=1.0))

    h.sync(snap(), shop())

    assert h.upload["succeeded"] is True
    posts = statuses(h.fake, "POST", "/physical_entities$", count=6)
    assert len(posts) == 6 and 409 not in posts  # each entity created once, none sent twice
    assert len(h.fake.tenant(TENANT).entities) == 6
    assert len(h.sleeps) == 1  # the pause before the read-back


def test_an_import_whose_answer_is_lost_is_read_back_not_sent_again(make: Callable[..., Harness]):
    h = make(timeoutSeconds=0.3)
    h.fake.inject(Fault(method="POST", path=IMPORT, linger=1.0))

    h.sync(snap(), checked(3))

    assert h.upload["succeeded"] is True
    assert statuses(h.fake, "POST", IMPORT, count=2) == [200]  # read back: all three there
    assert len(h.fake.checks(TENANT)) == 3


def test_a_real_cleanup_call_whose_answer_is_lost_is_not_sent_again(
    make: Callable[..., Harness],
):
    """Blindata cannot say what a lost cleanup call removed except by asking again, which
    could remove more: the call is not sent again, and the cleanup stops saying so (the next
    sync reconciles the call from its journal entry)."""
    h = make(timeoutSeconds=0.3)
    d = snap(allowedJobNamespaces=["etl"])
    h.sync(d, two_jobs())
    h.fake.clock.advance(hours=1)  # type: ignore[attr-defined]
    now = h.catalog.clock()
    h.catalog.cleanup_flows(jobs=[("etl", "b")], before=now, dry_run=True)
    h.fake.inject(Fault(method="POST", path=FLOWS_CLEANUP, linger=1.0))
    calls = len(h.fake.seen("POST", FLOWS_CLEANUP))

    with pytest.raises(CatalogUnavailable) as exc:
        h.catalog.cleanup_flows(jobs=[("etl", "b")], before=now, dry_run=False)

    assert "not sent again; the next sync reconciles this call" in str(exc.value)
    assert len(statuses(h.fake, "POST", FLOWS_CLEANUP, count=calls + 2)) == calls + 1


def test_a_delete_retried_after_a_timeout_that_finds_404_counts_as_removed(
    make: Callable[..., Harness],
):
    h = make(timeoutSeconds=0.3)
    h.sync(snap(), shop())
    orders = DatasetRef(WH, "shop.public", "orders", WH, "shop.public.orders")
    planned = h.catalog.drop_datasets([orders], dry_run=True)
    # the server removes the entity, but its answer comes after the client gave up
    h.fake.inject(Fault(method="DELETE", path="/physical_entities/", linger=1.0))

    done = h.catalog.drop_datasets([orders], dry_run=False)

    assert sorted(statuses(h.fake, "DELETE", "/physical_entities/", count=2)) == [204, 404]
    assert (
        done.counts
        == planned.counts
        == {
            "physicalEntities": 1,
            "physicalFields": 2,
            "dataFlows": 4,
        }
    )
    assert done.outcomes == {}  # not notFound: the first attempt removed it


def test_a_delete_that_finds_404_without_a_lost_answer_is_not_found(h: Harness):
    h.sync(snap(), shop())
    orders = DatasetRef(WH, "shop.public", "orders", WH, "shop.public.orders")
    assert h.catalog.drop_datasets([orders], dry_run=True).counts["physicalEntities"] == 1
    # someone removes it between the read and the delete: the 404 is not this call's removal
    h.fake.inject(Fault(status=404, method="DELETE", path="/physical_entities/"))

    done = h.catalog.drop_datasets([orders], dry_run=False)

    assert done.counts["physicalEntities"] == 0
    assert done.outcomes["notFound"] == {"physicalEntities": 1, "physicalFields": 2}


@pytest.mark.parametrize(("maximum", "waited"), [(None, 30.0), (2, 2.0), (600, 600.0)])
def test_retry_after_beyond_the_maximum_is_capped(
    make: Callable[..., Harness], maximum: float | None, waited: float
):
    h = make(**({} if maximum is None else {"maxRetryAfterSeconds": maximum}))
    h.fake.inject(Fault(status=429, method="POST", path="/system_routines$", retry_after="3600"))
    later = datetime.now(UTC) + timedelta(hours=2)
    h.fake.inject(
        Fault(
            status=503,
            method="POST",
            path="/dataflows$",
            retry_after=later.strftime("%a, %d %b %Y %H:%M:%S GMT"),
        )
    )

    h.sync(snap(), shop())

    assert h.upload["succeeded"] is True
    assert h.sleeps == [waited, waited]


# == what the server accepts ======================================================================


def test_text_plain_bodies_fail_with_415_and_nothing_is_written(h: Harness):
    body = {"system": {"uuid": "x"}, "schema": "s", "name": "n"}
    answer = h.catalog.http.client.post(
        api.PHYSICAL_ENTITIES,
        content=json.dumps(body).encode(),
        headers={"Content-Type": "text/plain;charset=UTF-8"},
    )

    assert answer.status_code == 415
    assert answer.headers["accept"] == "application/json, application/*+json"
    assert answer.json()["message"] == "Content-Type 'text/plain;charset=UTF-8' is not supported"
    assert h.fake.tenant(TENANT).entities == {}
    # no Content-Type is read as application/octet-stream: the same
    bare = h.catalog.http.client.put(f"{api.PHYSICAL_ENTITIES}/x", content=b"{}")
    assert bare.status_code == 415
    assert "'application/octet-stream' is not supported" in bare.json()["message"]


def test_a_415_is_a_failed_row_never_retried_and_the_client_sends_json(h: Harness):
    h.fake.inject(Fault(status=415, method="POST", path="/system_routines$"))

    report = h.sync(snap(), shop())

    (row,) = h.upload["failed"]
    assert row["objectType"] == "routines" and "HTTP 415" in row["reason"]
    assert report["skippedReason"] == "UPLOAD_FAILED" and h.sleeps == []
    # every other body the client sent was JSON: the server refused none of them
    h.sync(snap(), shop())
    assert h.upload["succeeded"] is True
    assert [s.status for s in h.fake.requests].count(415) == 1
