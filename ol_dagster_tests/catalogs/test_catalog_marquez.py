"""The Marquez backend (issues 6 and 13) against an in-process Marquez served by uvicorn.

The fake (``fakes/marquez_fake.py``) is written from Marquez's sources, not from the client, and
checks every request against Marquez's own ``openapi.yml`` (a request it does not describe fails
the test). Every sync goes the way the assets run it (intake, event store, normalization, upload
with the cutoff from the catalog clock, ``run_cleanup``), and assertions are on what a Marquez
user sees afterwards: visible jobs and datasets, the lineage graph's edges, and the report. What
it does as every ledger catalog does (retries, failures that delete nothing, a refused cleanup,
job counts, secrets, the run through Dagster) is in ``test_ledger_catalogs.py``.

Known and left as Marquez makes it: a parent job Marquez creates in the child's namespace (it
knew no run of the parent) is no entry of the definition and is never removed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ol_dagster.catalog.http import CatalogUnavailable
from ol_dagster.catalog.ledger.entries import DATASET, EDGE, JOB
from ol_dagster.catalog.marquez.catalog import MarquezCatalog
from ol_dagster.catalog.marquez.settings import MarquezCatalogSettings
from ol_dagster.catalog.protocol import DatasetRef
from ol_dagster.store import EventStore
from ol_dagster_tests.fakes.faults import Clock, Fault, serve
from ol_dagster_tests.fakes.harness import (
    ANOMALIES,
    BUCKET,
    BUCKET_SYSTEM,
    KPI,
    NS,
    OTHER_UUID,
    WH,
    Syncer,
    calls,
    definition,
    ds,
    facet,
    job_event,
    pg,
    run,
)
from ol_dagster_tests.fakes.marquez_fake import MarquezFake
from ol_dagster_tests.fakes.reset_proxy import ResetProxy

LINEAGE = "/api/v1/lineage"
SECRET = "marquez-proxy-secret-0123"
START = datetime(2026, 11, 1, 3, 0, tzinfo=UTC)


def kpi() -> dict[str, Any]:
    return run(KPI, [pg("orders")], [pg("kpi_daily")], sql="insert into kpi_daily select 1")


def anomalies() -> dict[str, Any]:
    return run(ANOMALIES, [pg("kpi_daily")], [ds(BUCKET, "anomalies")])


def snapshot(*, with_anomalies: bool = True) -> list[dict[str, Any]]:
    return [kpi()] + ([anomalies()] if with_anomalies else [])


def key(table: str) -> tuple[str, str]:
    return (WH, f"shop.public.{table}")


KPI_EDGE = (key("orders"), (NS, KPI), key("kpi_daily"))
ANOMALIES_EDGE = (key("kpi_daily"), (NS, ANOMALIES), (BUCKET, "anomalies"))


@dataclass
class Env:
    fake: MarquezFake
    url: str
    store_url: str
    syncer: Syncer
    sleeps: list[float]
    made: list[MarquezCatalog]

    def catalog(self, definition: str = "snap", **cfg: Any) -> MarquezCatalog:
        settings = MarquezCatalogSettings.model_validate(
            {"kind": "marquez", "url": self.url, "maxRetries": 3, "timeoutSeconds": 5, **cfg}
        )
        c = MarquezCatalog(
            "main",
            settings,
            store_url=self.store_url,
            definition=definition,
            sleep=self.sleeps.append,
        )
        self.made.append(c)
        return c

    def posts(self) -> int:
        return len(self.fake.server.seen("POST", LINEAGE))


@contextmanager
def served_env(tmp_path: Path) -> Iterator[Env]:
    """A Marquez fake on loopback, an event store and a syncer (other Marquez tests use it)."""
    fake = MarquezFake(Clock(START))
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    store = EventStore(store_url)
    with serve(fake.server) as url:
        e = Env(fake, url, store_url, Syncer(store, fake.clock), [], [])
        yield e
        for c in e.made:
            c.close()
    store.dispose()


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    with served_env(tmp_path) as e:
        yield e


# == upload ======================================================================================


def test_upload_posts_every_event_and_records_what_it_sent_in_the_ledger(env: Env):
    catalog = env.catalog()
    events = snapshot() + [job_event("etl.weekly", [pg("orders")], [pg("kpi_weekly")])]

    synced = env.syncer.sync(catalog, definition(), events)

    assert synced.result.succeeded and synced.result.failed == []
    assert env.posts() == 3 and len(env.fake.events) == 3
    assert env.fake.visible_jobs() == {(NS, KPI), (NS, ANOMALIES), (NS, "etl.weekly")}
    assert env.fake.edges() == {
        KPI_EDGE,
        ANOMALIES_EDGE,
        (key("orders"), (NS, "etl.weekly"), key("kpi_weekly")),
    }
    ledger = catalog.ledger
    assert {(i.payload["namespace"], i.payload["name"]) for i in ledger.all(JOB)} == {
        (NS, KPI),
        (NS, ANOMALIES),
        (NS, "etl.weekly"),
    }
    assert len(ledger.all(EDGE)) == 3
    assert (BUCKET, "anomalies") in {
        (i.payload["namespace"], i.payload["name"]) for i in ledger.all(DATASET)
    }
    assert synced.result.touched == {"physicalEntities": 3 + 4, "dataFlows": 3}
    assert synced.report["skippedReason"] is None


def test_the_cutoff_and_the_touch_times_are_the_marquez_servers_clock(env: Env):
    catalog = env.catalog()
    env.fake.clock.advance(days=400)  # far from this process's clock

    synced = env.syncer.sync(catalog, definition(), snapshot())

    assert synced.upload.cutoff == env.fake.clock.now().replace(microsecond=0)
    assert synced.report["cutoff"] == synced.upload.cutoff.isoformat()


def test_events_are_posted_concurrently_on_a_pool_bounded_by_concurrency(env: Env):
    catalog = env.catalog(concurrency=3)
    events = [run(f"job{i}", [pg(f"in{i}")], [pg(f"out{i}")]) for i in range(9)]
    env.fake.server.inject(*(Fault(delay=0.15, method="POST", path=LINEAGE) for _ in range(9)))

    synced = env.syncer.sync(catalog, definition(), events)

    assert synced.result.succeeded
    assert env.fake.server.max_in_flight == 3
    assert len(env.fake.visible_jobs()) == 9


def test_an_event_marquez_refuses_is_its_own_failed_row_and_the_batch_still_syncs(env: Env):
    """422 (bean validation) refuses one event, and a namespace Marquez's pattern refuses keeps
    its event here: each is one failed row (MARQUEZ_SCHEMA) that blocks nothing; the others are
    stored and the cleanup runs (the snapshot no longer has the anomalies job)."""
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), snapshot())
    untyped_schema = {
        "namespace": WH,
        "name": "shop.public.kpi_daily",
        "facets": {"schema": {"fields": [{"name": "id"}]}},  # no _producer / _schemaURL
    }
    events = [
        kpi(),
        run("etl.untyped", [untyped_schema], [pg("x")]),
        run("etl.spaced", [ds("bad namespace", "t")], [pg("y")]),
    ]

    synced = env.syncer.sync(catalog, definition(), events)

    failed = {f.key: f for f in synced.result.failed}
    assert set(failed) == {"event 1", "event 2"}
    assert {(f.code, f.blocks) for f in failed.values()} == {("MARQUEZ_SCHEMA", False)}
    assert failed["event 1"].reason.startswith("HTTP 422: ")
    assert "inputs[0].facets.schema._producer must not be null" in failed["event 1"].reason
    assert "inputs[0].namespace 'bad namespace'" in failed["event 2"].reason
    assert env.posts() == 2 + 2  # the bad namespace is never sent, a refusal never retried
    assert synced.result.succeeded and synced.report["skippedReason"] is None
    assert synced.report["removedJobs"] == [f"{NS}.{ANOMALIES}"]
    assert env.fake.visible_jobs() == {(NS, KPI)}


def test_a_long_rejection_message_is_trimmed(env: Env):
    catalog = env.catalog()
    body = json.dumps({"errors": ["x" * 2000]}).encode()
    env.fake.server.inject(Fault(status=422, body=body, method="POST", path=LINEAGE))

    synced = env.syncer.sync(catalog, definition(), [kpi()])

    (row,) = synced.result.failed
    assert row.key == "event 0" and row.reason.startswith("HTTP 422: xxx")
    assert len(row.reason) <= 300


# == failures and retries ==========================================================================


@pytest.mark.parametrize("status", [400, 422])
def test_a_400_or_422_that_is_not_marquezs_fails_the_upload_and_deletes_nothing(
    env: Env, status: int
):
    """A proxy's 400 or 422 page is no answer of Marquez about the event: a failed row that
    blocks (the statuses every ledger catalog meets are in ``test_ledger_catalogs.py``)."""
    catalog = env.catalog(maxRetries=3)
    env.syncer.sync(catalog, definition(), snapshot())
    before = env.posts()
    env.fake.server.burst(status, 10, method="POST", path=LINEAGE, body=b"<html>Bad Request</html>")

    synced = env.syncer.sync(catalog, definition(), snapshot(with_anomalies=False))

    (row,) = synced.result.failed
    assert row.key == "event 0" and row.blocks and f"HTTP {status}" in row.reason
    assert env.posts() - before == 1  # a 4xx is never retried
    assert env.sleeps == []
    assert synced.report["skippedReason"] == "UPLOAD_FAILED" and synced.report["calls"] == []
    assert env.fake.visible_jobs() == {(NS, KPI), (NS, ANOMALIES)}
    assert env.fake.edges() == {KPI_EDGE, ANOMALIES_EDGE}


def test_retry_after_of_a_429_is_honoured(env: Env):
    catalog = env.catalog()
    env.fake.server.inject(Fault(status=429, retry_after="7", method="POST", path=LINEAGE))

    synced = env.syncer.sync(catalog, definition(), [kpi()])

    assert synced.result.succeeded
    assert env.sleeps == [7.0]
    assert env.posts() == 2


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_connection_reset_mid_upload_is_retried_and_nothing_is_lost(env: Env, when: str):
    """A connection reset while the snapshot is being posted, before Marquez got the event or
    after it stored it (the answer lost): the post is retried, the upload succeeds and the
    cleanup removes exactly the dropped job."""
    proxy = ResetProxy(env.url)
    try:
        catalog = env.catalog(url=proxy.url)
        env.syncer.sync(catalog, definition(), snapshot())
        proxy.reset_next(f"POST {LINEAGE} ".encode(), when=when)  # type: ignore[arg-type]

        synced = env.syncer.sync(catalog, definition(), snapshot(with_anomalies=False))

        assert proxy.resets == 1
        assert synced.result.succeeded and synced.result.failed == []
        assert len(env.sleeps) == 1
        assert synced.report["removedJobs"] == [f"{NS}.{ANOMALIES}"]
        assert env.fake.visible_jobs() == {(NS, KPI)}
        assert env.fake.edges() == {KPI_EDGE}
    finally:
        proxy.close()


def test_connections_reset_on_every_attempt_fail_the_upload_and_delete_nothing(env: Env):
    proxy = ResetProxy(env.url)
    try:
        catalog = env.catalog(url=proxy.url, maxRetries=2)
        env.syncer.sync(catalog, definition(), snapshot())
        proxy.reset_next(f"POST {LINEAGE} ".encode(), when="before", times=3)

        synced = env.syncer.sync(catalog, definition(), snapshot(with_anomalies=False))

        assert proxy.resets == 3
        (row,) = synced.result.failed
        assert "after 3 attempt(s)" in row.reason
        assert synced.report["skippedReason"] == "UPLOAD_FAILED"
        assert env.fake.visible_jobs() == {(NS, KPI), (NS, ANOMALIES)}
    finally:
        proxy.close()


def test_an_unreachable_marquez_fails_before_anything_is_sent(env: Env):
    with serve(MarquezFake().server) as url:
        pass  # the port is closed again: nothing listens there
    settings = MarquezCatalogSettings(url=url, maxRetries=1)
    catalog = MarquezCatalog(
        "main", settings, store_url=env.store_url, definition="snap", sleep=env.sleeps.append
    )
    try:
        with pytest.raises(
            CatalogUnavailable, match=r"GET /api/v1/namespaces: ConnectError after 2"
        ):
            catalog.clock()
    finally:
        catalog.close()


# == cleanup =======================================================================================


def test_the_seed_example_the_dropped_job_and_its_edges_go_in_that_run(env: Env):
    """Seed Example: "A repository publishes its two jobs etl.build_daily_kpi and
    features.export_anomalies as a snapshot. The next batch contains only etl.build_daily_kpi.
    The second job's flows and its job entity are not uploaded again, so the cutoff cleanup
    deletes them in that run. [...] The S3 entity it wrote, anomalies, is deleted in the same run
    if its System is owned by this repository (CUTOFF)"."""
    catalog = env.catalog()
    first = env.syncer.sync(catalog, definition(), snapshot())
    assert first.report["skippedReason"] is None and first.report["removedJobs"] == []
    assert env.fake.edges() == {KPI_EDGE, ANOMALIES_EDGE}

    second = env.syncer.sync(catalog, definition(), snapshot(with_anomalies=False))

    report = second.report
    assert report["mode"] == "CUTOFF" and report["skippedReason"] is None
    assert report["removedJobs"] == [f"{NS}.{ANOMALIES}"]
    assert env.fake.visible_jobs() == {(NS, KPI)}
    assert env.fake.hidden_jobs() == {(NS, ANOMALIES)}  # a soft delete
    assert env.fake.edges() == {KPI_EDGE}
    assert (BUCKET, "anomalies") not in env.fake.visible_datasets()
    assert key("kpi_daily") in env.fake.visible_datasets()  # cleanupMode NONE: never cleaned
    (flows_call,) = calls(report, "flows")
    assert flows_call["dryRun"] == flows_call["real"] == {"dataFlows": 1}
    (ds_call,) = calls(report, "datasetSystem")
    assert ds_call["system"] == BUCKET_SYSTEM and ds_call["real"] == {"physicalEntities": 1}
    deletes = {r.path for r in env.fake.server.seen("DELETE")}
    assert deletes == {
        f"/api/v1/namespaces/{NS}/jobs/{ANOMALIES}",
        "/api/v1/namespaces/s3%3A%2F%2Fanomalies-bucket/datasets/anomalies",
    }

    # the same snapshot again: nothing left to delete
    third = env.syncer.sync(catalog, definition(), snapshot(with_anomalies=False))
    assert third.report["removedJobs"] == []
    assert all(sum(c["real"].values()) == 0 for c in third.report["calls"])


def test_a_job_described_again_is_undeleted_and_removed_again_when_it_goes(env: Env):
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), snapshot())
    env.syncer.sync(catalog, definition(), snapshot(with_anomalies=False))
    assert env.fake.visible_jobs() == {(NS, KPI)}

    env.syncer.sync(catalog, definition(), snapshot())  # the producer describes it again
    assert env.fake.visible_jobs() == {(NS, KPI), (NS, ANOMALIES)}
    assert env.fake.edges() == {KPI_EDGE, ANOMALIES_EDGE}

    again = env.syncer.sync(catalog, definition(), snapshot(with_anomalies=False))
    assert again.report["removedJobs"] == [f"{NS}.{ANOMALIES}"]
    assert env.fake.edges() == {KPI_EDGE}


def test_an_edge_a_job_no_longer_has_goes_with_its_next_event_and_no_delete_is_sent(env: Env):
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), [kpi()])
    rewired = run(KPI, [pg("customers")], [pg("kpi_daily")])

    synced = env.syncer.sync(catalog, definition(), [rewired])

    (flows_call,) = calls(synced.report, "flows")
    assert flows_call["real"] == {"dataFlows": 1}  # the stale edge left the ledger
    assert env.fake.edges() == {(key("customers"), (NS, KPI), key("kpi_daily"))}
    assert env.fake.server.seen("DELETE") == []


def test_a_dataset_another_definition_still_uses_is_not_deleted(env: Env):
    """The embedded catalog keeps one last-update time per object; the ledger keeps one per
    definition, so a dataset another definition still refers to must not be deleted."""
    snap = definition()
    other = definition(
        name="other",
        uuid=OTHER_UUID,
        allowedJobNamespaces=["ml"],
        datasetSystems=[{"namespace": BUCKET, "system": BUCKET_SYSTEM, "cleanupMode": "DAYS"}],
        receiver={"token": {"env": "OL_TEST_TOKEN_ADD"}},
    )
    snap_catalog, other_catalog = env.catalog("snap"), env.catalog("other")
    env.syncer.sync(snap_catalog, snap, snapshot())
    reader = run("score", [ds(BUCKET, "anomalies")], [pg("scores")], namespace="ml")
    env.syncer.sync(other_catalog, other, [reader])

    second = env.syncer.sync(snap_catalog, snap, snapshot(with_anomalies=False))

    assert second.report["removedJobs"] == [f"{NS}.{ANOMALIES}"]
    assert (BUCKET, "anomalies") in env.fake.visible_datasets()
    assert ((BUCKET, "anomalies"), ("ml", "score"), key("scores")) in env.fake.edges()
    assert [r.path for r in env.fake.server.seen("DELETE")] == [
        f"/api/v1/namespaces/{NS}/jobs/{ANOMALIES}"
    ]


# == parents, drops, job counts ==================================================================


def with_parent(event: dict[str, Any], namespace: str, name: str) -> dict[str, Any]:
    """The event of a run whose parent (an Airflow DAG, say) is the job ``namespace.name``."""
    event["run"]["facets"] = {
        "parent": facet(
            "ParentRunFacet",
            run={"runId": str(uuid.uuid4())},
            job={"namespace": namespace, "name": name},
        )
    }
    return event


def ledger_jobs(catalog: MarquezCatalog) -> dict[tuple[str, str], str | None]:
    return {
        (i.payload["namespace"], i.payload["name"]): i.system
        for i in catalog.ledger.all(JOB, catalog.definition_name)
    }


def ledger_datasets(catalog: MarquezCatalog) -> set[tuple[str, str]]:
    return {
        (i.payload["namespace"], i.payload["name"])
        for i in catalog.ledger.all(DATASET, catalog.definition_name)
    }


def test_a_foreign_parent_job_is_never_recorded_or_deleted_as_this_definitions_job(env: Env):
    """A parent job in a namespace the definition does not own is another owner's: Marquez
    makes it from the events (the parent facet is sent as it is), but it is never this
    definition's JOB entry, so its cleanup can never delete it. The child, held by Marquez as
    ``nightly.child``, is deleted under that name."""
    catalog = env.catalog()
    child = with_parent(run("child", [pg("a")], [pg("b")]), "airflow", "nightly")

    first = env.syncer.sync(catalog, definition(), [kpi(), child])

    assert first.result.succeeded
    assert ledger_jobs(catalog) == {(NS, KPI): "snap_jobs", (NS, "child"): "snap_jobs"}
    assert first.result.touched["physicalEntities"] == 2 + 4  # the jobs it owns, 4 datasets
    (posted,) = [e for e in env.fake.events if e["job"]["name"] == "child"]
    assert posted["run"]["facets"]["parent"]["job"] == {"namespace": "airflow", "name": "nightly"}
    # Marquez knew no run of airflow's nightly: it made the parent in the child's namespace
    assert env.fake.visible_jobs() == {(NS, KPI), (NS, "nightly.child"), (NS, "nightly")}

    second = env.syncer.sync(catalog, definition(), [kpi()])  # the child is gone

    assert second.report["removedJobs"] == [f"{NS}.child"]
    assert [r.path for r in env.fake.server.seen("DELETE")] == [
        f"/api/v1/namespaces/{NS}/jobs/nightly.child"
    ]
    assert catalog.count_jobs("snap_jobs", schemas=None) == 1
    # the parent Marquez made is no entry of this definition: it stays (see the module notes)
    assert env.fake.visible_jobs() == {(NS, KPI), (NS, "nightly")}


@pytest.mark.parametrize(
    ("child", "parent", "held"),
    [
        ("child", "nightly", "nightly.child"),  # prefixed with its parent's name
        ("nightly.load", "nightly", "nightly.load"),  # Airflow's "dag.task": not prefixed twice
        ("dag.task", "dag.task", "dag.task"),  # a facet naming the child: the parent is "dag"
    ],
)
def test_a_child_job_is_hidden_under_the_name_marquez_holds_after_it_leaves_the_snapshot(
    env: Env, child: str, parent: str, held: str
):
    """Issue 13: "a Marquez child job is really hidden after it leaves a snapshot". Marquez
    stores a job with a parent facet as ``<parent>.<job>``; deleting the event's job name would
    answer 404 and leave the child visible."""
    catalog = env.catalog()
    events = [*snapshot(), with_parent(run(child, [pg("a")], [pg("b")]), "airflow", parent)]

    env.syncer.sync(catalog, definition(), events)

    assert (NS, held) in env.fake.visible_jobs()
    (entry,) = [i for i in catalog.ledger.all(JOB) if i.payload["name"] == child]
    assert entry.payload["heldAs"] == [held]

    second = env.syncer.sync(catalog, definition(), snapshot())

    assert (NS, held) in env.fake.hidden_jobs()
    assert (NS, held) not in env.fake.visible_jobs()
    assert second.report["removedJobs"] == [f"{NS}.{child}"]
    assert second.report["notFound"] == {}
    assert f"/api/v1/namespaces/{NS}/jobs/{held}" in {
        r.path for r in env.fake.server.seen("DELETE")
    }


def test_every_name_a_job_was_held_under_is_deleted_when_it_leaves(env: Env):
    """A job first sent without a parent facet and later with one is two jobs in Marquez (its
    name, then ``<parent>.<name>``): the ledger keeps both names, and both go."""
    catalog = env.catalog()
    loaded = run("load", [pg("a")], [pg("b")])
    env.syncer.sync(catalog, definition(), [*snapshot(), loaded])
    child = with_parent(run("load", [pg("a")], [pg("b")]), "airflow", "dag")
    env.syncer.sync(catalog, definition(), [*snapshot(), child])
    assert {(NS, "load"), (NS, "dag.load")} <= env.fake.visible_jobs()

    third = env.syncer.sync(catalog, definition(), snapshot())

    assert {(NS, "load"), (NS, "dag.load")} <= env.fake.hidden_jobs()
    assert third.report["removedJobs"] == [f"{NS}.load"]


def test_a_renamed_job_is_deleted_under_its_current_name(env: Env):
    """A job renamed in Marquez (migration V44_3 or an operator) answers 301 for its old name
    (JobRedirectFilter): the DELETE goes again to the name in ``Location``, never as a GET."""
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), snapshot())
    env.fake.rename(NS, ANOMALIES, "features.anomalies_v2")
    assert (NS, "features.anomalies_v2") in env.fake.visible_jobs()

    second = env.syncer.sync(catalog, definition(), snapshot(with_anomalies=False))

    assert (NS, "features.anomalies_v2") in env.fake.hidden_jobs()
    assert env.fake.visible_jobs() == {(NS, KPI)}
    assert second.report["removedJobs"] == [f"{NS}.{ANOMALIES}"]
    assert second.report["refused"] == {} and second.report["notFound"] == {}
    job_calls = [
        (r.method, r.path)
        for r in env.fake.server.requests
        if "/jobs/" in r.path and r.method != "POST"
    ]
    assert job_calls == [
        ("DELETE", f"/api/v1/namespaces/{NS}/jobs/{ANOMALIES}"),
        ("DELETE", f"/api/v1/namespaces/{NS}/jobs/features.anomalies_v2"),
    ]


def test_an_event_time_without_an_offset_is_accepted_in_marquezs_zone(env: Env):
    """Marquez reads a zone-less ``eventTime`` in its own zone (FlexibleDateTimeDeserializer):
    the event is sent as the producer wrote it and stored, not refused."""
    catalog = env.catalog()
    event = kpi()
    event["eventTime"] = "2026-11-01T02:00:00.123456"

    synced = env.syncer.sync(catalog, definition(), [event])

    assert synced.result.succeeded and synced.result.failed == []
    (stored,) = env.fake.events
    assert stored["eventTime"] == "2026-11-01T02:00:00.123456"
    assert env.fake.event_times == [datetime(2026, 11, 1, 2, 0, 0, 123456, tzinfo=UTC)]
    assert KPI_EDGE in env.fake.edges()


def test_the_events_of_one_job_are_stored_in_batch_order_whatever_the_concurrency(env: Env):
    """Marquez makes a job's current inputs and outputs from its last finished run as it stores
    them: two runs of a job in one batch must arrive in order, even when the first is slow."""
    catalog = env.catalog(concurrency=4)
    first = run(KPI, [pg("orders")], [pg("kpi_daily")])
    rewired = run(KPI, [pg("customers")], [pg("kpi_daily")])
    env.fake.server.inject(Fault(delay=0.3, method="POST", path=LINEAGE))

    synced = env.syncer.sync(catalog, definition(), [first, rewired, anomalies()])

    assert synced.result.succeeded
    assert [e["run"]["runId"] for e in env.fake.events if e["job"]["name"] == KPI] == [
        first["run"]["runId"],
        rewired["run"]["runId"],
    ]
    assert env.fake.current((NS, KPI)) == ({key("customers")}, {key("kpi_daily")})


def test_a_parent_in_an_owned_namespace_is_recorded_in_its_job_system(env: Env):
    """A parent in a namespace the definition owns is its job, in the job System of that
    namespace, though no event of the batch describes the namespace."""
    d = definition(
        allowedJobNamespaces=[NS, "ops"], jobSystems=[{"namespaces": "ops", "system": "ops_jobs"}]
    )
    catalog = env.catalog()

    synced = env.syncer.sync(catalog, d, [with_parent(run("child"), "ops", "dag")])

    assert synced.result.succeeded
    assert ledger_jobs(catalog) == {(NS, "child"): "snap_jobs", ("ops", "dag"): "ops_jobs"}
    systems = {s["name"]: s for s in catalog.systems()}
    assert systems["ops_jobs"]["openLineageJobSystem"] == [str(d.uuid)]


def test_a_drop_is_carried_out_by_the_cleanup_not_by_the_upload(env: Env):
    """A DROP goes through the cleanup's ``drop_datasets`` call (its guards apply): the upload
    sends the event and deletes nothing; the call's planned count is what it removes."""
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), snapshot())
    assert (BUCKET, "anomalies") in env.fake.visible_datasets()
    drop = {
        "eventTime": "2026-11-01T02:30:00.000Z",
        "producer": "https://example.com/ol-dagster-tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": {
            "namespace": BUCKET,
            "name": "anomalies",
            "facets": {
                "lifecycleStateChange": facet(
                    "LifecycleStateChangeDatasetFacet", lifecycleStateChange="DROP"
                )
            },
        },
    }
    deletes_after_upload: list[int] = []

    synced = env.syncer.sync(
        catalog,
        definition(),
        [drop],
        between=lambda: deletes_after_upload.append(len(env.fake.server.seen("DELETE"))),
    )

    assert synced.result.succeeded and synced.result.removed == {}
    assert deletes_after_upload == [0]
    (call,) = calls(synced.report, "drops")
    assert call["dryRun"] == call["real"] == {"physicalEntities": 1}
    assert [r.path for r in env.fake.server.seen("DELETE")] == [
        "/api/v1/namespaces/s3%3A%2F%2Fanomalies-bucket/datasets/anomalies"
    ]
    assert (BUCKET, "anomalies") not in env.fake.visible_datasets()
    assert (BUCKET, "anomalies") not in ledger_datasets(catalog)


def test_drop_datasets_counts_first_and_keeps_what_another_definition_still_holds(env: Env):
    snap = definition()
    other = definition(
        name="other",
        uuid=OTHER_UUID,
        allowedJobNamespaces=["ml"],
        datasetSystems=[{"namespace": BUCKET, "system": BUCKET_SYSTEM, "cleanupMode": "DAYS"}],
        receiver={"token": {"env": "OL_TEST_TOKEN_ADD"}},
    )
    snap_catalog, other_catalog = env.catalog("snap"), env.catalog("other")
    env.syncer.sync(snap_catalog, snap, snapshot())
    env.syncer.sync(other_catalog, other, [run("score", [ds(BUCKET, "anomalies")], namespace="ml")])
    ref = DatasetRef(BUCKET_SYSTEM, "", "anomalies", BUCKET, "anomalies")
    elsewhere = DatasetRef("another-system", "", "anomalies", BUCKET, "anomalies")

    planned = snap_catalog.drop_datasets([ref, elsewhere], dry_run=True)

    assert planned.counts == {"physicalEntities": 1}
    assert (BUCKET, "anomalies") in ledger_datasets(snap_catalog)

    done = snap_catalog.drop_datasets([ref, elsewhere], dry_run=False)

    assert done.counts == planned.counts
    assert (BUCKET, "anomalies") not in ledger_datasets(snap_catalog)
    assert (BUCKET, "anomalies") in ledger_datasets(other_catalog)  # still referred to there
    assert env.fake.server.seen("DELETE") == []  # so Marquez keeps it
    assert (BUCKET, "anomalies") in env.fake.visible_datasets()


# == secrets =======================================================================================


def test_no_token_is_sent_when_none_is_configured(env: Env):
    """Marquez has no authentication of its own: a token goes only to a proxy that asks for one
    (how a configured one is sent and kept secret: ``test_ledger_catalogs.py``)."""
    plain = env.catalog()

    synced = env.syncer.sync(plain, definition(), [kpi()])

    assert synced.result.succeeded and env.fake.server.requests
    assert all("authorization" not in r.headers for r in env.fake.server.requests)
