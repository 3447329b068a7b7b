"""The Blindata backend (issue 6) against a fake Blindata served by uvicorn on loopback.

The fake (``fakes/blindata_fake.py``) is written from the notes' contract, not from the client: it
keeps per-tenant state, checks credentials and permissions, stamps every write with its own clock
(also its ``Date`` header) and carries out the cleanup actions with a server-side dry run. Runs go
through the same core the Dagster assets run (receiver intake, event store, normalization,
``upload_graph`` with the cutoff from the catalog clock, ``run_cleanup``); the seed's Example runs
through Dagster itself. Retries never wait: the catalog gets a ``sleep`` that records the delays.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from starlette.testclient import TestClient

from ol_dagster.catalog.blindata.catalog import BlindataCatalog
from ol_dagster.catalog.blindata.settings import BlindataCatalogSettings
from ol_dagster.catalog.http import CatalogRefused
from ol_dagster.catalog.protocol import CleanupPermissionDenied, DatasetRef, ObjectType
from ol_dagster.commands.headless import sync_batches
from ol_dagster.receiver.app import create_app
from ol_dagster.receiver.intake import sort_events
from ol_dagster.receiver.server import serve_in_background
from ol_dagster.settings import SettingsError, SyncDefinition, load_settings, parse_catalog
from ol_dagster.store import EventStore
from ol_dagster.sync.batch import cleanup_batch, upload_batch
from ol_dagster.sync.upload import UploadOutcome, build_graph
from ol_dagster_tests.conftest import settings_data
from ol_dagster_tests.fakes.blindata_fake import BlindataFake, FakeClock, Fault
from ol_dagster_tests.safety.test_cleanup_rules import (
    BUCKET,
    BUCKET_SYSTEM,
    WH,
    calls,
    definition,
    ds,
    job,
    other_definition,
    pg,
    simple,
)
from ol_dagster_tests.safety.test_cleanup_seed_example import (
    ANOMALIES,
    CHECKS_ALL_PASSED,
    KPI,
    NS,
    S3_ENTITY,
    snapshot,
)

TENANT = "7a1e2c44-0d4b-4c4e-9a55-3f6f1b0c2d10"
USER = "ol-dagster"
API_KEY = "bd-apikey-4f9a7c21e8d3"  # the secrets: never in an error, a result or a log
TOKEN = "bd-bearer-91b3e6d0aa57"
KEY_ENV = "OL_TEST_BLINDATA_APIKEY"
TOKEN_ENV = "OL_TEST_BLINDATA_TOKEN"
ADMIN = {"SYSTEMS_ADMIN", "QUALITY_ADMIN"}
EDITOR = {"SYSTEMS_EDITOR", "QUALITY_EDITOR"}
JOBS = "snap_jobs"  # the snap definition's job System (no openLineageSystem: <name>_jobs)
MAX_RETRIES = 3


class Sleeps(list[float]):
    """The catalog's ``sleep``: records each backoff instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture
def fake() -> BlindataFake:
    f = BlindataFake(FakeClock())
    f.add_user(USER, tenant=TENANT, api_key=API_KEY, permissions=set(ADMIN))
    f.add_user("svc-token", tenant=TENANT, token=TOKEN, permissions=set(ADMIN))
    return f


@pytest.fixture
def url(fake: BlindataFake) -> Iterator[str]:
    with serve_in_background(fake.app, date_header=False) as base:  # type: ignore[arg-type]
        yield base


@pytest.fixture
def secrets_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, API_KEY)
    monkeypatch.setenv(TOKEN_ENV, TOKEN)


def catalog_settings(url: str, **overrides: Any) -> BlindataCatalogSettings:
    data: dict[str, Any] = {
        "kind": "blindata",
        "url": url,
        "tenant": TENANT,
        "apiKey": {"env": KEY_ENV},
        "user": USER,
        "maxRetries": MAX_RETRIES,
        "timeoutSeconds": 5,
    }
    data.update(overrides)
    return BlindataCatalogSettings.model_validate(data)


@pytest.fixture
def make_catalog(url: str, secrets_in_env: None) -> Iterator[Callable[..., BlindataCatalog]]:
    opened: list[BlindataCatalog] = []

    def make(sleeps: Sleeps | None = None, **overrides: Any) -> BlindataCatalog:
        c = BlindataCatalog(
            "main",
            catalog_settings(url, **overrides),
            store_url="",
            definition="snap",
            sleep=sleeps if sleeps is not None else Sleeps(),
        )
        opened.append(c)
        return c

    yield make
    for c in opened:
        c.close()


@dataclass
class Harness:
    """What the assets of a batch do, without Dagster: intake, store, normalize, upload with the
    cutoff from the catalog clock, cleanup. Each run is an hour after the last (fake's clock)."""

    fake: BlindataFake
    catalog: BlindataCatalog
    store: EventStore
    sleeps: Sleeps
    uploads: list[UploadOutcome] = field(default_factory=list)

    def sync(
        self, d: SyncDefinition, events: list[dict[str, Any]], *, hours: float = 1
    ) -> dict[str, Any]:
        self.fake.clock.advance(hours=hours)  # type: ignore[attr-defined]
        intake = sort_events(list(events), d.allowedJobNamespaces)
        batch_id = self.store.add_posted_batch(
            d.name,
            intake.accepted,
            received=intake.received,
            rejections=[r.as_dict() for r in intake.rejected],
            snapshot=d.snapshotMode.value == "BATCH_SNAPSHOT",
        )
        # what the assets run: the production code builds the cleanup's facts from the store
        run_id = str(uuid.uuid4())
        done = upload_batch(self.store, self.catalog, d, batch_id, run_id=run_id)
        assert done.cutoff is not None and done.result is not None
        self.uploads.append(UploadOutcome(done.cutoff, done.result))
        return cleanup_batch(self.store, self.catalog, d, batch_id, run_id=run_id)

    @property
    def upload(self) -> dict[str, Any]:
        return self.uploads[-1].result.as_dict()


@pytest.fixture
def h(
    fake: BlindataFake, make_catalog: Callable[..., BlindataCatalog], tmp_path: Path
) -> Iterator[Harness]:
    sleeps = Sleeps()
    store = EventStore(f"sqlite:///{tmp_path / 'store.db'}")
    yield Harness(fake, make_catalog(sleeps), store, sleeps)
    store.dispose()


# -- reading the fake ------------------------------------------------------------------------------


def jobs(fake: BlindataFake) -> set[str]:
    return {f"{schema}.{name}" for _, schema, name in fake.entities(TENANT, system=JOBS)}


def routines(fake: BlindataFake) -> set[str]:
    return {f"{r['schema']}.{r['name']}" for r in fake.tenant(TENANT).routines.values()}


def scopes(fake: BlindataFake) -> set[str]:
    return set(fake.flow_scopes(TENANT))


def everything(fake: BlindataFake) -> dict[str, Any]:
    """All a user could notice in the tenant, to compare before and after a run."""
    t = fake.tenant(TENANT)
    return {
        "entities": fake.entities(TENANT),
        "fields": sorted((f["physicalEntity"]["uuid"], f["name"]) for f in t.fields.values()),
        "routines": routines(fake),
        "flows": sorted(fake.flow_scopes(TENANT)),
        "checks": fake.checks(TENANT),
    }


def posts(fake: BlindataFake, path: str) -> int:
    return len(fake.seen("POST", path))


# -- events ----------------------------------------------------------------------------------------


def shop() -> list[dict[str, Any]]:
    """etl.load_orders (child of etl.daily, with SQL and column lineage) and etl.build_kpi
    (orders -> an S3 file in the bucket, with a not_null check on orders.id)."""
    return [
        job(
            "etl",
            "load_orders",
            [pg("orders_raw", ["id", "amount"])],
            [
                pg(
                    "orders",
                    ["id", "amount"],
                    lineage={
                        "id": [(WH, "shop.public.orders_raw", "id")],
                        "amount": [(WH, "shop.public.orders_raw", "amount")],
                    },
                )
            ],
            sql="insert into shop.public.orders select id, amount from shop.public.orders_raw",
            parent=("etl", "daily"),
        ),
        job(
            "etl",
            "build_kpi",
            [pg("orders", checks=[("not_null", "id")])],
            [ds(BUCKET, "kpi/daily.parquet", ["total"])],
            sql="select sum(amount) as total from shop.public.orders",
        ),
    ]


def snap(**overrides: Any) -> SyncDefinition:
    """BATCH_SNAPSHOT over namespace etl; the bucket is a CUTOFF System it owns."""
    return definition(
        datasetSystems=[{"namespace": BUCKET, "system": BUCKET_SYSTEM, "cleanupMode": "CUTOFF"}],
        **overrides,
    )


# == upload =======================================================================================


def test_upload_writes_every_object_and_a_second_upload_touches_them_without_duplicates(
    h: Harness,
):
    d = snap()
    report = h.sync(d, shop())

    assert h.upload["succeeded"] is True
    assert report["skippedReason"] is None
    assert h.upload["written"] == {
        "physicalEntities": 6,  # 3 jobs, 3 datasets
        "physicalFields": 5,
        "routines": 2,
        "statements": 2,
        "dataFlows": 5,  # 2 data, 1 orchestration, 2 field flows
        "qualityChecks": 1,
    }
    assert jobs(h.fake) == {"etl.load_orders", "etl.build_kpi", "etl.daily"}
    assert h.fake.entities(TENANT, system=BUCKET_SYSTEM) == {
        (BUCKET_SYSTEM, "kpi", "daily.parquet")
    }
    assert h.fake.entities(TENANT, system=WH) == {
        (WH, "shop.public", "orders_raw"),
        (WH, "shop.public", "orders"),
    }
    assert routines(h.fake) == {"etl.load_orders", "etl.build_kpi"}
    (kpi,) = [r for r in h.fake.tenant(TENANT).routines.values() if r["name"] == "build_kpi"]
    assert kpi["definition"] == "select sum(amount) as total from shop.public.orders"
    field_level = [f for f in h.fake.tenant(TENANT).flows.values() if f["fromPhysicalField"]]
    assert len(field_level) == 2  # orders_raw.id -> orders.id, orders_raw.amount -> orders.amount
    assert h.fake.checks(TENANT) == {f"etl.build_kpi|{WH}:shop.public.orders|not_null|id": True}
    # Systems carry the properties the cleanup reads
    uuid = str(d.uuid)
    assert h.fake.system_props(TENANT, JOBS) == {"openLineageJobSystem": [uuid]}
    assert h.fake.system_props(TENANT, BUCKET_SYSTEM) == {
        "openLineageOwner": [uuid],
        "cleanupMode": ["CUTOFF"],
        "cleanupDays": ["30"],
    }
    (jobs_system,) = [s for s in h.fake.tenant(TENANT).systems.values() if s["name"] == JOBS]
    assert jobs_system["subtype"] == "JOB"

    before = everything(h.fake)
    h.sync(d, shop())

    assert h.upload["written"] == dict.fromkeys(h.upload["written"], 0)
    assert h.upload["touched"] == {
        "physicalEntities": 6,
        "physicalFields": 5,
        "routines": 2,
        "statements": 2,
        "dataFlows": 5,
        "qualityChecks": 1,
    }
    assert everything(h.fake) == before
    # every object sent was stamped by the server at this run: at or after its cutoff
    cutoff = h.uploads[-1].cutoff
    t = h.fake.tenant(TENANT)
    stamps = [o["modificationDate"] for s in (t.entities, t.fields, t.routines) for o in s.values()]
    stamps += [f["updateDate"] for f in t.flows.values()]
    assert all(datetime.fromisoformat(s) >= cutoff for s in stamps)


def test_every_flow_is_owned_by_its_jobs_scope(h: Harness):
    h.sync(snap(), shop())

    assert sorted(h.fake.flow_scopes(TENANT)) == [
        "ol:etl|build_kpi",  # orders -> kpi
        "ol:etl|load_orders",  # orders_raw -> orders
        "ol:etl|load_orders",  # orders_raw.id -> orders.id
        "ol:etl|load_orders",  # orders_raw.amount -> orders.amount
        "ol:etl|load_orders#orchestration",  # daily -> load_orders
    ]


def test_the_clock_is_the_servers_date_header_and_needs_valid_credentials(
    fake: BlindataFake, make_catalog: Callable[..., BlindataCatalog], monkeypatch
):
    fake.clock.advance(days=3, seconds=0.75)  # type: ignore[attr-defined]
    catalog = make_catalog()

    assert catalog.clock() == datetime(2026, 11, 7, 10, 0, 0, tzinfo=UTC)  # whole seconds, down
    assert fake.seen("GET", "/api/v1/systems$")[-1].query == "size=1"

    monkeypatch.setenv(KEY_ENV, "not-the-key")
    with pytest.raises(CatalogRefused) as exc:
        make_catalog().clock()
    assert exc.value.status == 401


def test_a_bearer_token_works_like_an_api_key(
    fake: BlindataFake, make_catalog: Callable[..., BlindataCatalog]
):
    catalog = make_catalog(apiKey=None, token={"env": TOKEN_ENV})
    d = snap()
    graph = build_graph([json.dumps(e).encode() for e in shop()], d)

    assert catalog.upload(graph, d).succeeded
    assert jobs(fake) == {"etl.load_orders", "etl.build_kpi", "etl.daily"}


def test_an_answer_lost_after_the_server_created_the_object_does_not_duplicate_it(h: Harness):
    """A create whose answer a gateway lost (502: it may still be running) is not sent again
    before the object was looked for: found by its natural key, it is written once more by PUT.
    A create the server answered 503 after all is sent again: the server answers 409, the
    client reads the object and updates it."""
    h.fake.burst(502, 2, method="POST", path="/physical_entities$", after=True)
    h.fake.inject(Fault(status=503, method="POST", path="/dataflows$", after=True))

    h.sync(snap(), shop())

    assert h.upload["succeeded"] is True
    assert h.fake.pending_faults() == 0
    entity_posts = [s.status for s in h.fake.seen("POST", "/physical_entities$")]
    assert sorted(entity_posts) == [201] * 4 + [502] * 2  # no create sent twice
    assert [s.status for s in h.fake.seen("POST", "/dataflows$")].count(409) == 1
    assert len(h.fake.tenant(TENANT).entities) == 6  # not 8
    assert len(h.fake.tenant(TENANT).flows) == 5  # not 6
    assert len(h.sleeps) == 3


# == partial failure ==============================================================================


@pytest.mark.parametrize("status", [400, 422])
def test_a_refused_row_is_a_failed_row_and_blocks_the_cleanup(h: Harness, status: int):
    d = snap()
    h.sync(d, shop())
    before = everything(h.fake)
    h.fake.refuse(
        "physical_entities",
        lambda body: body["name"] == "orders",
        status=status,
        message="name is not valid",
    )

    report = h.sync(d, [shop()[1]])  # load_orders no longer described: it would be removed

    (row,) = h.upload["failed"]
    assert row["objectType"] == "physicalEntities"
    assert row["key"] == "shop.public.orders"
    assert f"HTTP {status}" in row["reason"] and "name is not valid" in row["reason"]
    assert h.sleeps == []  # a 4xx is the server's last word: never retried
    assert report["skippedReason"] == "UPLOAD_FAILED"
    assert report["calls"] == [] and report["removedJobs"] == []
    assert everything(h.fake) == before


def test_a_refused_row_does_not_stop_the_other_rows(h: Harness):
    d = snap()
    h.fake.refuse("physical_entities", lambda body: body["name"] == "daily", status=400)

    h.sync(d, shop())

    assert [r["key"] for r in h.upload["failed"]] == ["etl.daily"]
    assert jobs(h.fake) == {"etl.load_orders", "etl.build_kpi"}
    assert len(h.fake.entities(TENANT)) == 5


# == failure statuses =============================================================================


@pytest.mark.parametrize("status", [400, 401, 403, 422])
def test_a_4xx_answer_is_never_retried_and_fails_the_upload(h: Harness, status: int):
    h.fake.inject(Fault(status=status, method="POST", path="/physical_entities$"))

    report = h.sync(snap(), shop())

    assert h.upload["succeeded"] is False
    (row,) = h.upload["failed"]
    assert row["objectType"] == "physicalEntities"
    assert f"HTTP {status}" in row["reason"]
    assert h.sleeps == []
    refused = [s for s in h.fake.seen("POST", "/physical_entities$") if s.status == status]
    assert len(refused) == 1
    assert posts(h.fake, "/dataflows$") == 0  # later objects refer to the entities
    assert report["skippedReason"] == "UPLOAD_FAILED"


@pytest.mark.parametrize("status", [401, 403])
def test_refused_credentials_stop_the_upload(h: Harness, status: int):
    """Every later call would be refused the same way: the upload stops at the first."""
    h.fake.burst(status, 100, method="POST", path="/physical_entities$")

    h.sync(snap(), [simple("etl", f"job_{i:02d}") for i in range(30)])  # 90 entities

    assert h.upload["succeeded"] is False
    attempted = len(h.fake.seen("POST", "/physical_entities$"))
    assert attempted < 30  # the rows already sent, not the 90
    assert h.fake.entities(TENANT) == set()
    assert h.sleeps == []


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_a_retryable_answer_is_retried_and_the_upload_succeeds(h: Harness, status: int):
    retry_after = "7" if status == 429 else None
    h.fake.burst(status, 2, method="POST", path="/physical_entities$", retry_after=retry_after)

    h.sync(snap(), shop())

    assert h.upload["succeeded"] is True
    assert h.fake.pending_faults() == 0
    assert len(h.fake.entities(TENANT)) == 6
    assert len(h.sleeps) == 2
    if retry_after:
        assert h.sleeps == [7.0, 7.0]  # Retry-After honoured
    else:
        assert all(0 <= s <= 1.0 for s in h.sleeps)  # backoff with full jitter: 0.5 s, 1 s


def test_a_retry_after_date_is_honoured(h: Harness):
    when = datetime.now(UTC) + timedelta(seconds=20)
    h.fake.inject(
        Fault(
            status=429,
            method="POST",
            path="/system_routines$",
            retry_after=when.strftime("%a, %d %b %Y %H:%M:%S GMT"),
        )
    )

    h.sync(snap(), shop())

    assert h.upload["succeeded"] is True
    assert len(h.sleeps) == 1
    assert 10 < h.sleeps[0] <= 20  # an HTTP date is read as the seconds until then


def test_retries_that_give_up_fail_the_upload_and_nothing_is_deleted(h: Harness):
    d = snap()
    h.sync(d, shop())
    before = everything(h.fake)
    h.fake.burst(503, MAX_RETRIES + 1, method="POST", path="/data-quality/suites/")
    h.fake.burst(503, 100, method="PUT", path="/dataflows/")

    report = h.sync(d, [shop()[1]])

    assert h.upload["succeeded"] is False
    reasons = [r["reason"] for r in h.upload["failed"]]
    assert any(f"HTTP 503 after {MAX_RETRIES + 1} attempt(s)" in r for r in reasons)
    assert len(h.sleeps) == MAX_RETRIES  # then the upload stops
    assert report["skippedReason"] == "UPLOAD_FAILED"
    assert everything(h.fake) == before  # load_orders is still there


def test_a_slow_answer_times_out_and_is_retried(
    fake: BlindataFake, make_catalog: Callable[..., BlindataCatalog], tmp_path: Path
):
    sleeps = Sleeps()
    store = EventStore(f"sqlite:///{tmp_path / 'store.db'}")
    h = Harness(fake, make_catalog(sleeps, timeoutSeconds=0.3), store, sleeps)
    fake.inject(Fault(delay=1.5, method="GET", path="/physical_entities$"))

    report = h.sync(snap(), shop())

    assert h.upload["succeeded"] is True and report["skippedReason"] is None
    assert len(sleeps) == 1
    store.dispose()


def test_timeouts_that_outlast_the_retries_fail_the_upload(
    fake: BlindataFake, make_catalog: Callable[..., BlindataCatalog], tmp_path: Path
):
    sleeps = Sleeps()
    store = EventStore(f"sqlite:///{tmp_path / 'store.db'}")
    h = Harness(fake, make_catalog(sleeps, timeoutSeconds=0.3, maxRetries=1), store, sleeps)
    d = snap()
    h.sync(d, shop())
    before = everything(fake)
    fake.inject(*(Fault(delay=1.5, method="GET", path="/system_routines$") for _ in range(2)))

    report = h.sync(d, [shop()[1]])

    (row,) = h.upload["failed"]
    assert "ReadTimeout after 2 attempt(s)" in row["reason"]
    assert report["skippedReason"] == "UPLOAD_FAILED"
    assert everything(fake) == before
    store.dispose()


# == cleanup ======================================================================================


def test_a_snapshot_cleanup_removes_the_flows_entities_and_routines_the_run_did_not_touch(
    h: Harness,
):
    # two of its three jobs go: above the default maxRemovalShare (0.5), on purpose here
    d = snap(allowedJobNamespaces=["etl"], cleanup={"maxRemovalShare": 1.0})
    other = other_definition(allowedJobNamespaces=["crm"])
    h.sync(other, [simple("crm", "sync_accounts", sql="select 1")])
    h.sync(
        d,
        [
            simple("etl", "a", sql="select 1"),
            simple("etl", "b", sql="select 2", parent=("etl", "dag")),
        ],
    )
    assert jobs(h.fake) == {"etl.a", "etl.b", "etl.dag"}

    seen = len(h.fake.requests)
    report = h.sync(d, [simple("etl", "a", sql="select 1")])

    assert report["skippedReason"] is None and report["mode"] == "CUTOFF"
    assert report["removedJobs"] == ["etl.b", "etl.dag"]
    assert jobs(h.fake) == {"etl.a"}
    assert routines(h.fake) == {"etl.a", "crm.sync_accounts"}
    assert scopes(h.fake) == {"ol:etl|a", "ol:crm|sync_accounts"}
    assert {n for _, _, n in h.fake.entities(TENANT, system="other_jobs")} == {"sync_accounts"}
    # datasets of a System with cleanupMode NONE are never cleaned
    assert (WH, "shop.public", "b_out") in h.fake.entities(TENANT)
    (flows_call,) = calls(report, "flows")
    assert flows_call["scopePrefixes"] == ["ol:etl|"]
    assert flows_call["dryRun"] == flows_call["real"] == {"dataFlows": 2}
    (job_call,) = calls(report, "jobSystem")
    assert job_call["system"] == JOBS and job_call["schemas"] == ["etl"]
    # the dry runs all come first: the orchestration flow into b still existed then
    assert job_call["dryRun"] == {
        "physicalEntities": 2,
        "routines": 1,
        "statements": 1,
        "dataFlows": 1,
    }
    assert job_call["real"] == {
        "physicalEntities": 2,
        "routines": 1,
        "statements": 1,
        "dataFlows": 0,
    }
    # one dry run, then one real call, per set, on the server
    # every dry run first, then the real calls: flows, then the job System's entities and (with
    # the day-based limit) its routines; the first dry run of each endpoint is preceded by one
    # with a cutoff nothing is older than, which must confirm dryRun before a dry run that could
    # delete is sent
    cleanups = [s for s in h.fake.requests[seen:] if s.path.endswith("/cleanup")]
    sets = [("dataflows", 200), ("systems", 200), ("systems", 200)]
    assert [(s.path.split("/")[3], s.status) for s in cleanups] == [
        ("dataflows", 200),
        sets[0],
        ("systems", 200),
        *sets[1:],
        *sets,
    ]
    assert len(h.fake.seen("DELETE", "/system_routines/")) == 1  # b's, whose job went


def test_a_routine_the_job_no_longer_has_is_left_to_the_age_based_cleanup(h: Harness):
    """Seed: "A routine that the job no longer has (the sql facet was removed) is left to the
    age-based cleanup of its job System." """
    d = snap()
    h.sync(d, [simple("etl", "x", sql="select 1")])

    report = h.sync(d, [simple("etl", "x")])  # the same job, its sql facet removed

    assert report["skippedReason"] is None and report["removedJobs"] == []
    assert routines(h.fake) == {"etl.x"}

    report = h.sync(d, [simple("etl", "x")], hours=24 * 31)

    assert routines(h.fake) == set()
    (job_call,) = calls(report, "jobSystem")
    assert job_call["real"]["routines"] == 1 and job_call["real"]["physicalEntities"] == 0
    assert jobs(h.fake) == {"etl.x"}


def test_an_additive_definition_removes_what_was_not_updated_for_stale_job_days(h: Harness):
    d = definition(snapshotMode="ADDITIVE", allowedJobNamespaces=["etl"])
    h.sync(d, [simple("etl", "a"), simple("etl", "b")])

    report = h.sync(d, [simple("etl", "a")], hours=24 * 10)
    assert report["mode"] == "DAYS" and report["removedJobs"] == []
    assert jobs(h.fake) == {"etl.a", "etl.b"}

    report = h.sync(d, [simple("etl", "a")], hours=24 * 21)  # b: 31 days without an update

    assert report["removedJobs"] == ["etl.b"]
    assert jobs(h.fake) == {"etl.a"}
    assert scopes(h.fake) == {"ol:etl|a"}


def test_a_cutoff_system_loses_the_entities_and_the_fields_the_snapshot_no_longer_has(
    h: Harness,
):
    d = snap()

    def run(fields: list[str] | None, extra: bool) -> dict[str, Any]:
        outs = [ds(BUCKET, "kpi/daily.parquet", fields)]
        if extra:
            outs.append(ds(BUCKET, "kpi/extra.parquet", ["x"]))
        return h.sync(d, [job("etl", "build_kpi", [pg("orders")], outs)])

    def bucket_fields() -> set[str]:
        t = h.fake.tenant(TENANT)
        return {
            f"{t.entities[f['physicalEntity']['uuid']]['name']}.{f['name']}"
            for f in t.fields.values()
            if t.systems[t.entities[f["physicalEntity"]["uuid"]]["system"]["uuid"]]["name"]
            == BUCKET_SYSTEM
        }

    run(["total", "count"], extra=True)
    assert bucket_fields() == {"daily.parquet.total", "daily.parquet.count", "extra.parquet.x"}

    report = run(["total"], extra=False)

    assert bucket_fields() == {"daily.parquet.total"}
    (ds_call,) = calls(report, "datasetSystem")
    assert ds_call["mode"] == "CUTOFF"
    assert ds_call["real"] == {"physicalEntities": 1, "physicalFields": 2, "dataFlows": 0}

    run(None, extra=False)  # referenced without its schema: its fields are not judged
    assert bucket_fields() == {"daily.parquet.total"}


def test_a_403_on_cleanup_is_cleanup_permission_denied_and_nothing_is_deleted(h: Harness):
    d = snap()
    h.sync(d, shop())
    h.fake.set_permissions(USER, EDITOR)  # may write inside Systems, not clean them
    before = everything(h.fake)
    seen = len(h.fake.requests)

    report = h.sync(d, [shop()[1]])

    assert h.upload["succeeded"] is True  # the upload needs no SYSTEMS_ADMIN
    assert report["skippedReason"] == "CLEANUP_PERMISSION_DENIED"
    assert report["removedJobs"] == []
    assert all(c["real"] is None for c in report["calls"])
    assert everything(h.fake) == before
    refused = [s for s in h.fake.requests[seen:] if s.path.endswith("/cleanup")]
    assert len(refused) == 1 and refused[0].status == 403  # the first dry run


def test_a_refused_cleanup_raises_permission_denied_without_secrets(
    fake: BlindataFake, make_catalog: Callable[..., BlindataCatalog]
):
    fake.set_permissions(USER, EDITOR)
    catalog = make_catalog()

    with pytest.raises(CleanupPermissionDenied) as exc:
        catalog.cleanup_flows(jobs=[("etl", "j")], before=catalog.clock(), dry_run=True)

    message = str(exc.value)
    assert "HTTP 403" in message and "SYSTEMS_ADMIN" in message
    assert API_KEY not in message and TOKEN not in message


def test_quality_checks_of_removed_jobs_are_disabled_not_deleted_and_come_back(h: Harness):
    d = snap()
    h.sync(d, shop())
    code = f"etl.build_kpi|{WH}:shop.public.orders|not_null|id"
    assert h.fake.checks(TENANT) == {code: True}

    report = h.sync(d, [shop()[0]])  # build_kpi is gone

    assert "etl.build_kpi" in report["removedJobs"]
    assert report["disabledQualityChecks"] == 1
    assert h.fake.checks(TENANT) == {code: False}  # kept, with its history
    imports = h.fake.seen("POST", "/import-objects$")
    assert imports[-1].query == "cleanup=true"

    h.sync(d, shop())  # the job is back: so is its check
    assert h.fake.checks(TENANT) == {code: True}


# == secrets ======================================================================================


def test_secrets_are_never_in_failed_rows_reports_errors_or_logs(
    h: Harness, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.DEBUG)
    d = snap()
    h.fake.refuse(  # a server that echoes the credential back in its error message
        "physical_entities",
        lambda body: body["name"] == "orders",
        message=f"user {USER} with key {API_KEY} may not write this",
    )

    report = h.sync(d, shop())

    text = json.dumps(h.upload) + json.dumps(report) + caplog.text + repr(h.catalog)
    assert "may not write this" in text and "***" in text
    assert API_KEY not in text and TOKEN not in text


def test_credentials_come_from_the_environment_when_the_catalog_opens(
    url: str, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(SettingsError) as exc:
        BlindataCatalog("main", catalog_settings(url), store_url="", definition="snap")
    assert KEY_ENV in str(exc.value)

    # no credential at all is refused when the settings load, before anything opens
    with pytest.raises(SettingsError) as exc:
        parse_catalog({"kind": "blindata", "url": url, "tenant": TENANT})
    assert "catalogs.main: " in str(exc.value)
    assert "needs either 'token' (a bearer token) or 'apiKey'" in str(exc.value)


# == reads ========================================================================================


def test_systems_job_schemas_and_lineage_read_back_what_was_uploaded(h: Harness):
    d = snap()
    h.sync(d, shop())

    by_name = {s["name"]: s for s in h.catalog.systems()}
    assert by_name[JOBS]["openLineageJobSystem"] == [str(d.uuid)]
    assert by_name[BUCKET_SYSTEM]["cleanupMode"] == "CUTOFF"
    assert by_name[BUCKET_SYSTEM]["cleanupDays"] == 30
    assert h.catalog.job_schemas(JOBS) == ["etl"]
    graph = h.catalog.lineage("job:etl:build_kpi", depth=2, upstream=True, downstream=True)
    assert {(e["from"], e["to"]) for e in graph["edges"]} == {
        (f"dataset:{WH}:shop.public.orders", "job:etl:build_kpi"),
        ("job:etl:build_kpi", f"dataset:{BUCKET}:kpi/daily.parquet"),
        ("job:etl:load_orders", f"dataset:{WH}:shop.public.orders"),
    }


# == the seed's Example, end to end through Dagster ===============================================


def test_the_seed_example_end_to_end(
    tmp_path: Path, tokens, write_settings, fake: BlindataFake, url: str, secrets_in_env: None
):
    """ "A repository publishes its two jobs etl.build_daily_kpi and features.export_anomalies as a
    snapshot. The next batch contains only etl.build_daily_kpi. The second job's flows and its job
    entity are not uploaded again, so the cutoff cleanup deletes them in that run. Its quality
    checks are disabled. The S3 entity it wrote, anomalies, is deleted in the same run if its
    System is owned by this repository (CUTOFF)". The catalog is opened by the factory from the
    settings file, as the Dagster resources do."""
    data = settings_data(
        tmp_path,
        allowedJobNamespaces=[NS],
        datasetSystems=[{"namespace": BUCKET, "system": BUCKET_SYSTEM, "cleanupMode": "CUTOFF"}],
    )
    data["catalogs"] |= {
        "main": {
            "kind": "blindata",
            "url": url,
            "tenant": TENANT,
            "user": USER,
            "apiKey": {"env": KEY_ENV},
        }
    }
    path = write_settings(data)
    settings = load_settings(path)
    store = EventStore(settings.store.url)
    client = TestClient(create_app(settings, store))
    auth = {"Authorization": f"Bearer {tokens['snap']}"}
    home = tmp_path / "dagster_home"
    home.mkdir()

    def post_and_sync(body: dict[str, Any]) -> dict[str, Any]:
        response = client.post("/api/v1/lineage/batch", json=body, headers=auth)
        assert response.status_code == 200, response.text
        (line,) = sync_batches(str(path), definition="snap", instance=instance)
        return line

    checks = {
        f"{NS}.{ANOMALIES}|{WH}:shop.public.kpi_daily|not_null|kpi_date",
        f"{NS}.{ANOMALIES}|{WH}:shop.public.kpi_daily|row_count|",
    }
    try:
        with dg.instance_for_test(temp_dir=str(home)) as instance:
            first = post_and_sync(snapshot())
            assert first["status"] == "synced" and first["checks"] == CHECKS_ALL_PASSED
            assert jobs(fake) == {f"{NS}.{KPI}", f"{NS}.{ANOMALIES}"}
            assert scopes(fake) == {f"ol:{NS}|{KPI}", f"ol:{NS}|{ANOMALIES}"}
            assert fake.entities(TENANT, system=BUCKET_SYSTEM) == {(BUCKET_SYSTEM, "", S3_ENTITY)}
            assert fake.checks(TENANT) == dict.fromkeys(checks, True)

            fake.clock.advance(hours=1)  # type: ignore[attr-defined]
            second = post_and_sync(snapshot(with_anomalies=False))

        report = second["cleanup"]
        assert second["status"] == "synced" and second["checks"] == CHECKS_ALL_PASSED
        assert report["mode"] == "CUTOFF" and report["skippedReason"] is None
        assert report["removedJobs"] == [f"{NS}.{ANOMALIES}"]
        assert jobs(fake) == {f"{NS}.{KPI}"}
        assert scopes(fake) == {f"ol:{NS}|{KPI}"}
        assert fake.entities(TENANT, system=BUCKET_SYSTEM) == set()  # CUTOFF: in the same run
        assert fake.checks(TENANT) == dict.fromkeys(checks, False)  # disabled, not deleted
        (flows_call,) = calls(report, "flows")
        assert flows_call["scopePrefixes"] == [f"ol:{NS}|"]
        assert flows_call["dryRun"] == flows_call["real"] == {"dataFlows": 1}
        (ds_call,) = calls(report, "datasetSystem")
        assert ds_call["system"] == BUCKET_SYSTEM and ds_call["real"]["physicalEntities"] == 1
        assert report["disabledQualityChecks"] == 2
        # the catalog the assets used is the one the factory opens for this settings file
        catalog = settings.open_catalog("main", definition="snap")
        try:
            assert isinstance(catalog, BlindataCatalog)
            assert {s["name"] for s in catalog.systems()} >= {"snap_jobs", BUCKET_SYSTEM}
        finally:
            catalog.close()
    finally:
        store.dispose()


def test_object_types_of_counts_are_the_protocols(h: Harness):
    """The report names object types as every catalog does (``ObjectType``)."""
    d = snap()
    h.sync(d, shop())
    report = h.sync(d, [shop()[0]])
    names = {k for c in report["calls"] for k in (c["dryRun"] or {})}
    assert names <= {t.value for t in ObjectType}


# == more of the upload ===========================================================================


def _kpi_dataset(**kw: Any) -> dict[str, Any]:
    from ol_dagster_tests.catalogs.test_embedded_catalog import ds as lifecycle_ds

    return lifecycle_ds(BUCKET, "kpi/daily.parquet", **kw)


def _kpi_job() -> dict[str, Any]:
    return job("etl", "build_kpi", [pg("orders")], [_kpi_dataset(fields=["total"])])


def _touching(fake: BlindataFake, entity_uuid: str) -> tuple[set[str], set[str]]:
    """The fields of an entity and the flows touching it or them, by uuid."""
    t = fake.tenant(TENANT)
    fields = {f["uuid"] for f in t.fields.values() if f["physicalEntity"]["uuid"] == entity_uuid}
    flows = {
        f["uuid"]
        for f in t.flows.values()
        if entity_uuid in (_uuid_of(f["fromPhysicalEntity"]), _uuid_of(f["toPhysicalEntity"]))
        or _uuid_of(f["fromPhysicalField"]) in fields
        or _uuid_of(f["toPhysicalField"]) in fields
    }
    return fields, flows


def _uuid_of(ref: dict[str, Any] | None) -> str | None:
    return ref["uuid"] if ref else None


def _entity(fake: BlindataFake, system: str, schema: str, name: str) -> dict[str, Any]:
    t = fake.tenant(TENANT)
    (e,) = [
        e
        for e in t.entities.values()
        if t.systems[e["system"]["uuid"]]["name"] == system
        and (e.get("schema") or "") == schema
        and e["name"] == name
    ]
    return e


@pytest.mark.parametrize(("mode", "removed"), [("CUTOFF", True), ("DAYS", True), ("NONE", False)])
def test_a_drop_is_a_call_of_the_cleanup_only_where_the_policy_allows(
    h: Harness, mode: str, removed: bool
):
    """A DROP is carried out by the cleanup (``drop_datasets``, behind its guards), never by the
    upload; its planned counts are exactly what it removes: the entity, its fields and every
    flow touching them."""
    from ol_dagster_tests.catalogs.test_embedded_catalog import dataset_event

    d = definition(
        datasetSystems=[{"namespace": BUCKET, "system": BUCKET_SYSTEM, "cleanupMode": mode}]
    )
    h.sync(d, [_kpi_job()])
    kpi = _entity(h.fake, BUCKET_SYSTEM, "kpi", "daily.parquet")
    fields, flows = _touching(h.fake, kpi["uuid"])
    assert len(fields) == 1 and len(flows) == 1  # total; orders -> kpi
    deletes_before = len(h.fake.seen("DELETE"))
    upload_deletes: list[int] = []
    upload = h.catalog.upload

    def upload_then_count(*args: Any, **kwargs: Any) -> Any:
        result = upload(*args, **kwargs)
        upload_deletes.append(len(h.fake.seen("DELETE")) - deletes_before)
        return result

    h.catalog.upload = upload_then_count  # type: ignore[method-assign]

    report = h.sync(d, [dataset_event(_kpi_dataset(lifecycle="DROP"))])

    assert h.upload["succeeded"] is True
    assert h.upload["removed"] == {} and upload_deletes == [0]  # the upload deleted nothing
    drops = calls(report, "drops")
    if removed:
        (call,) = drops
        expected = {"physicalEntities": 1, "physicalFields": 1, "dataFlows": 1}
        assert call["dryRun"] == call["real"] == expected
        assert h.fake.entities(TENANT, system=BUCKET_SYSTEM) == set()
        t = h.fake.tenant(TENANT)
        assert not fields & set(t.fields) and not flows & set(t.flows)
        assert "ol:etl|build_kpi" not in scopes(h.fake)  # its flows went with it
    else:
        assert drops == []
        assert {"code": "DROP_NOT_OWNED", "dataset": f"{BUCKET}:kpi/daily.parquet"} in report[
            "warnings"
        ]
        assert h.fake.entities(TENANT, system=BUCKET_SYSTEM) != set()


def test_drop_datasets_counts_in_a_dry_run_exactly_what_the_real_call_removes(h: Harness):
    """Each object once: the entity, its fields, and the flows touching the entity or a field
    (a field flow touches both), whoever's scope they are in."""
    h.sync(snap(), shop())
    orders = _entity(h.fake, WH, "shop.public", "orders")
    fields, flows = _touching(h.fake, orders["uuid"])
    assert len(fields) == 2 and len(flows) == 4  # 2 data flows, 2 field flows
    ref = DatasetRef(WH, "shop.public", "orders", WH, "shop.public.orders")
    missing = DatasetRef(WH, "shop.public", "nowhere", WH, "shop.public.nowhere")
    before = everything(h.fake)

    planned = h.catalog.drop_datasets([ref, ref, missing], dry_run=True)

    assert planned.counts == {"physicalEntities": 1, "physicalFields": 2, "dataFlows": 4}
    assert everything(h.fake) == before and h.fake.seen("DELETE") == []

    done = h.catalog.drop_datasets([ref, ref, missing], dry_run=False)

    assert done.counts == planned.counts
    t = h.fake.tenant(TENANT)
    assert orders["uuid"] not in t.entities
    assert not fields & set(t.fields) and not flows & set(t.flows)
    after = everything(h.fake)
    assert len(before["entities"]) - len(after["entities"]) == 1
    assert len(before["fields"]) - len(after["fields"]) == 2
    assert len(before["flows"]) - len(after["flows"]) == 4
    assert h.catalog.drop_datasets([ref], dry_run=True).total == 0  # nothing left to drop


@pytest.mark.parametrize(
    ("permissions", "dry_run"), [(EDITOR, True), ({"SYSTEMS_VIEWER", "QUALITY_VIEWER"}, False)]
)
def test_a_refused_drop_is_cleanup_permission_denied_and_deletes_nothing(
    h: Harness, permissions: set[str], dry_run: bool
):
    """Without SYSTEMS_ADMIN the dry run is refused already (it asks the System for an empty
    cleanup), so the plan stops before any real call; a refused delete is the same refusal."""
    h.sync(snap(), shop())
    h.fake.set_permissions(USER, permissions)
    before = everything(h.fake)

    with pytest.raises(CleanupPermissionDenied) as exc:
        h.catalog.drop_datasets(
            [DatasetRef(WH, "shop.public", "orders", WH, "shop.public.orders")], dry_run=dry_run
        )

    assert "HTTP 403" in str(exc.value) and API_KEY not in str(exc.value)
    assert everything(h.fake) == before


def test_a_rename_moves_the_entity_in_place_with_its_fields(h: Harness):
    d = snap()
    h.sync(d, [job("etl", "build_kpi", [pg("orders")], [_kpi_dataset(fields=["total"])])])
    (before,) = [e for e in h.fake.tenant(TENANT).entities.values() if e["name"] == "daily.parquet"]

    renamed = {
        **_kpi_dataset(
            fields=["total"], lifecycle="RENAME", previous=(BUCKET, "kpi/daily.parquet")
        ),
        "name": "kpi/day.parquet",
    }
    h.sync(d, [job("etl", "build_kpi", [pg("orders")], [renamed])])

    assert h.upload["succeeded"] is True
    assert h.fake.entities(TENANT, system=BUCKET_SYSTEM) == {(BUCKET_SYSTEM, "kpi", "day.parquet")}
    after = h.fake.tenant(TENANT).entities[before["uuid"]]  # the same object, renamed
    assert after["name"] == "day.parquet"
    t = h.fake.tenant(TENANT)
    assert [
        f["name"] for f in t.fields.values() if f["physicalEntity"]["uuid"] == before["uuid"]
    ] == ["total"]
    assert h.upload["renamed"] == [f"{BUCKET}:kpi/daily.parquet -> {BUCKET}:kpi/day.parquet"]


@pytest.mark.parametrize("whose", ["another definition's System", "a System it never cleans"])
def test_a_rename_moves_nothing_in_a_system_this_definition_may_not_clean(h: Harness, whose: str):
    """Renames respect ownership: the previous identifier's entity is moved only in a System
    this definition owns whose policy lets it clean; otherwise the new name is a new entity and
    the old one stays as it is, for its owner."""
    rules = [{"namespace": BUCKET, "system": BUCKET_SYSTEM, "cleanupMode": "CUTOFF"}]
    if whose == "a System it never cleans":
        creator = d = definition(
            datasetSystems=[{"namespace": BUCKET, "system": BUCKET_SYSTEM, "cleanupMode": "NONE"}]
        )
    else:
        creator = other_definition(allowedJobNamespaces=["crm"], datasetSystems=rules)
        d = snap()
    namespace = "crm" if creator is not d else "etl"
    h.sync(creator, [job(namespace, "build_kpi", [pg("orders")], [_kpi_dataset(fields=["total"])])])
    old = _entity(h.fake, BUCKET_SYSTEM, "kpi", "daily.parquet")
    renamed = {
        **_kpi_dataset(
            fields=["total"], lifecycle="RENAME", previous=(BUCKET, "kpi/daily.parquet")
        ),
        "name": "kpi/day.parquet",
    }

    h.sync(d, [job("etl", "build_kpi", [pg("orders")], [renamed])])

    assert h.upload["succeeded"] is True and h.upload["renamed"] == []
    assert h.fake.seen("PUT", f"/physical_entities/{old['uuid']}$") == []
    kept = h.fake.tenant(TENANT).entities[old["uuid"]]
    assert (kept["name"], kept["modificationDate"]) == ("daily.parquet", old["modificationDate"])
    if creator is d:
        assert (BUCKET_SYSTEM, "kpi", "day.parquet") in h.fake.entities(
            TENANT, system=BUCKET_SYSTEM
        )
    else:  # a CUTOFF System another definition created: the new name goes to one of its own
        own = f"{BUCKET_SYSTEM} [{d.name}]"
        assert h.fake.entities(TENANT, system=BUCKET_SYSTEM) == {
            (BUCKET_SYSTEM, "kpi", "daily.parquet")
        }
        assert (own, "kpi", "day.parquet") in h.fake.entities(TENANT, system=own)


# == parent jobs of other owners ==================================================================


def _orchestration(fake: BlindataFake) -> set[tuple[str, str, str]]:
    """(scope, parent entity uuid, child entity uuid) of every orchestration flow."""
    return {
        (f["scope"], f["fromPhysicalEntity"]["uuid"], f["toPhysicalEntity"]["uuid"])
        for f in fake.tenant(TENANT).flows.values()
        if f["scope"].endswith("#orchestration")
    }


def test_a_foreign_parent_job_is_referenced_or_created_neutral_and_never_cleaned(h: Harness):
    """A parent job in a namespace the definition does not own is another owner's: the
    orchestration flow to it is written, but the job is never created, touched or removed in
    this definition's job Systems. Where its owner's entity exists it is referenced as it is;
    where it exists nowhere it is created in a neutral System named after its namespace, which
    carries neither openLineageOwner nor openLineageJobSystem, so no definition cleans it."""
    other = other_definition(allowedJobNamespaces=["crm"])
    h.sync(other, [simple("crm", "dag")])
    crm_dag = _entity(h.fake, "other_jobs", "crm", "dag")
    d = snap(allowedJobNamespaces=["etl"])
    events = [
        simple("etl", "child", parent=("crm", "dag")),
        simple("etl", "b", parent=("airflow", "nightly")),
    ]

    h.sync(d, events)

    assert h.upload["succeeded"] is True and h.upload["dropped"] == {}
    assert jobs(h.fake) == {"etl.child", "etl.b"}  # neither parent in this definition's System
    nightly = _entity(h.fake, "airflow", "airflow", "nightly")
    assert h.fake.system_props(TENANT, "airflow") == {}  # neutral: no owner, no job-System mark
    child, b = _entity(h.fake, JOBS, "etl", "child"), _entity(h.fake, JOBS, "etl", "b")
    assert _orchestration(h.fake) == {
        ("ol:etl|child#orchestration", crm_dag["uuid"], child["uuid"]),
        ("ol:etl|b#orchestration", nightly["uuid"], b["uuid"]),
    }
    assert h.fake.tenant(TENANT).entities[crm_dag["uuid"]] == crm_dag  # referenced, not updated
    graph = h.catalog.lineage("job:etl:child", depth=1, upstream=True, downstream=False)
    assert {"from": "job:crm:dag", "to": "job:etl:child"} in graph["edges"]

    h.sync(d, events)  # again: both parents referenced as they are, nothing created
    for parent in (crm_dag, nightly):
        assert h.fake.seen("PUT", f"/physical_entities/{parent['uuid']}$") == []
    assert h.upload["written"]["physicalEntities"] == 0

    report = h.sync(d, [simple("etl", "b", parent=("airflow", "nightly"))])  # child is gone

    assert report["skippedReason"] is None and report["removedJobs"] == ["etl.child"]
    assert _orchestration(h.fake) == {("ol:etl|b#orchestration", nightly["uuid"], b["uuid"])}
    assert {"crm.dag", "airflow.nightly"} <= {
        f"{schema}.{name}" for _, schema, name in h.fake.entities(TENANT)
    }
    t = h.fake.tenant(TENANT)
    airflow = next(uid for uid, s in t.systems.items() if s["name"] == "airflow")
    assert h.fake.seen("POST", f"/systems/{airflow}/cleanup") == []
    assert all(c.get("system") != "airflow" for c in report["calls"])


def test_a_foreign_parent_whose_namespace_names_someones_system_is_not_placed(h: Harness):
    """A System named after the parent's namespace that a definition owns is not neutral:
    nothing is created in it, and the flow to that parent is a dropped row (it blocks nothing)."""
    other = other_definition(allowedJobNamespaces=["crm"], openLineageSystem="airflow")
    h.sync(other, [simple("crm", "x")])  # "airflow" is the other definition's job System

    report = h.sync(snap(), [simple("etl", "b", parent=("airflow", "nightly"))])

    assert h.upload["succeeded"] is True
    assert h.upload["dropped"] == {"FOREIGN_PARENT_NOT_PLACED": 1}
    assert h.fake.entities(TENANT, system="airflow") == {("airflow", "crm", "x")}
    assert _orchestration(h.fake) == set()
    assert report["skippedReason"] is None


def test_a_parent_in_an_owned_namespace_goes_to_its_own_job_system(h: Harness):
    """A parent known only from its child's parent facet, in a namespace the definition owns,
    is this definition's job: written to the job System of its namespace (created if need be),
    though no event of the batch describes that namespace."""
    d = snap(
        allowedJobNamespaces=["etl", "ops"],
        jobSystems=[{"namespaces": "ops", "system": "ops_jobs"}],
    )

    h.sync(d, [simple("etl", "child", parent=("ops", "dag"))])

    assert h.upload["succeeded"] is True
    assert h.fake.entities(TENANT, system="ops_jobs") == {("ops_jobs", "ops", "dag")}
    assert h.fake.system_props(TENANT, "ops_jobs") == {"openLineageJobSystem": [str(d.uuid)]}
    assert jobs(h.fake) == {"etl.child"}


# == counting jobs ================================================================================


def test_count_jobs_counts_the_job_entities_of_a_system_page_by_page(h: Harness):
    d = snap(allowedJobNamespaces=["etl", "ops"])
    h.sync(d, [simple("etl", "a"), simple("etl", "b", parent=("etl", "dag")), simple("ops", "c")])
    t = h.fake.tenant(TENANT)
    jobs_uuid = next(uid for uid, s in t.systems.items() if s["name"] == JOBS)
    stamp = h.fake.clock().isoformat()
    for i in range(1005):  # more than a page (1000) of the fake, written straight into it
        uid = f"bulk-{i:04d}"
        t.entities[uid] = {
            "uuid": uid,
            "system": {"uuid": jobs_uuid},
            "schema": "bulk",
            "name": f"job_{i:04d}",
            "tableType": "JOB" if i < 1002 else "TABLE",  # three entities that are no job
            "additionalProperties": [],
            "creationDate": stamp,
            "modificationDate": stamp,
        }

    assert h.catalog.count_jobs(JOBS, schemas=["etl"]) == 3
    assert h.catalog.count_jobs(JOBS, schemas=["etl", "ops"]) == 4
    seen = len(h.fake.seen("GET", "/physical_entities$"))
    assert h.catalog.count_jobs(JOBS, schemas=["bulk"]) == 1002
    assert len(h.fake.seen("GET", "/physical_entities$")) - seen == 2  # two pages
    assert h.catalog.count_jobs(JOBS, schemas=None) == 4 + 1002
    assert h.catalog.count_jobs(JOBS, schemas=[]) == 0
    assert h.catalog.count_jobs(JOBS, schemas=["crm"]) == 0
    assert h.catalog.count_jobs("no_such_system", schemas=None) == 0
    assert h.catalog.count_jobs(WH, schemas=None) == 0  # a dataset System holds no job


def test_a_user_who_may_not_create_systems_fails_the_upload(h: Harness):
    h.fake.set_permissions(USER, EDITOR)  # Systems are created by a SYSTEMS_ADMIN

    report = h.sync(snap(), shop())

    (row,) = h.upload["failed"]
    assert row["objectType"] == "systems" and "HTTP 403" in row["reason"]
    assert h.fake.entities(TENANT) == set()
    assert report["skippedReason"] == "UPLOAD_FAILED"


def test_checks_are_disabled_one_by_one_when_the_import_is_refused(h: Harness):
    d = snap()
    h.sync(d, shop())
    h.fake.inject(Fault(status=400, method="POST", path="/import-objects$"))

    report = h.sync(d, [shop()[0]])

    assert report["disabledQualityChecks"] == 1
    assert set(h.fake.checks(TENANT).values()) == {False}
    assert [s.status for s in h.fake.seen("PUT", "/data-quality/checks/")] == [200]
