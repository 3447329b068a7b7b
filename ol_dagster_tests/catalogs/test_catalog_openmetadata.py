"""The OpenMetadata backend (issue 6) against an in-process OpenMetadata served on loopback.

The fake (``fakes/openmetadata_fake.py``) is written from the OpenMetadata seed and contract notes,
not from the client, and answers as either generation (2.0: summary and failedEvents only; 2.1:
``partial``, ``unresolvedDatasets``/``unresolvedJobs`` and a 400 when every event failed). Syncs
go the way the assets run them, and assertions are on what an OpenMetadata user sees: the lineage
edges between table FQNs, and the report. What it does as every ledger catalog does (retries,
failures that delete nothing, a refused cleanup, job counts, secrets, the run through Dagster) is
in ``test_ledger_catalogs.py``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ol_dagster.catalog.http import CatalogRefused
from ol_dagster.catalog.ledger.entries import DATASET, EDGE, JOB
from ol_dagster.catalog.openmetadata.catalog import OpenMetadataCatalog, service_for
from ol_dagster.catalog.openmetadata.settings import OpenMetadataCatalogSettings
from ol_dagster.store import EventStore
from ol_dagster_tests.fakes.faults import Clock, Fault, serve
from ol_dagster_tests.fakes.harness import (
    ANOMALIES,
    BUCKET,
    KPI,
    NS,
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
from ol_dagster_tests.fakes.openmetadata_fake import CREATE, EDIT_LINEAGE, OpenMetadataFake

BATCH = "/api/v1/openlineage/lineage/batch"
JWT = "om-bot-jwt-secret-0123"
READER_JWT = "om-reader-jwt-secret-4567"
TOKEN_ENV = "OL_TEST_OM_JWT"
SERVICE = "prod-postgres"
START = datetime(2026, 11, 1, 3, 0, tzinfo=UTC)


def fqn(table: str) -> str:
    return f"{SERVICE}.shop.public.{table}"


def kpi() -> dict[str, Any]:
    return run(KPI, [pg("orders")], [pg("kpi_daily")], sql="insert into kpi_daily select 1")


def anomalies() -> dict[str, Any]:
    """Writes a warehouse table and the S3 entity of the seed (OpenMetadata never creates a
    container: the S3 output stays unresolved)."""
    return run(ANOMALIES, [pg("kpi_daily")], [pg("anomalies"), ds(BUCKET, BUCKET_OBJECT)])


def snapshot(*, with_anomalies: bool = True) -> list[dict[str, Any]]:
    return [kpi()] + ([anomalies()] if with_anomalies else [])


# a path: OpenMetadata reports a storage path no container matches as notFound (a bare name
# would be unparsableName: OpenLineageEntityResolver.unresolvedWithoutTableName)
BUCKET_OBJECT = "exports/anomalies.parquet"
KPI_EDGE = (fqn("orders"), fqn("kpi_daily"))
ANOMALIES_EDGE = (fqn("kpi_daily"), fqn("anomalies"))


@dataclass
class Env:
    fake: OpenMetadataFake
    url: str
    store_url: str
    syncer: Syncer
    sleeps: list[float]
    made: list[OpenMetadataCatalog]

    def catalog(self, definition: str = "snap", **cfg: Any) -> OpenMetadataCatalog:
        settings = OpenMetadataCatalogSettings.model_validate(
            {
                "kind": "openmetadata",
                "url": self.url,
                "token": {"env": TOKEN_ENV},
                "maxRetries": 3,
                "timeoutSeconds": 5,
                "serviceMapping": {WH: SERVICE},
                **cfg,
            }
        )
        c = OpenMetadataCatalog(
            "main",
            settings,
            store_url=self.store_url,
            definition=definition,
            sleep=self.sleeps.append,
        )
        self.made.append(c)
        return c

    def posts(self) -> int:
        return len(self.fake.server.seen("POST", BATCH))


def make_fake(generation: int) -> OpenMetadataFake:
    return OpenMetadataFake(
        generation=generation,
        tokens={JWT: {EDIT_LINEAGE, CREATE}, READER_JWT: set()},
        mapping={WH: SERVICE},
        services={SERVICE: ["shop"]},
        clock=Clock(START),
    )


@pytest.fixture(params=[2, 1], ids=["gen2", "gen1"])
def generation(request: pytest.FixtureRequest) -> int:
    return request.param


@pytest.fixture
def env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[Env]:
    """An OpenMetadata 2.1 fake (2.0 too for tests that take the ``generation`` fixture)."""
    gen = request.getfixturevalue("generation") if "generation" in request.fixturenames else 2
    monkeypatch.setenv(TOKEN_ENV, JWT)
    fake = make_fake(gen)
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    store = EventStore(store_url)
    with serve(fake.server) as url:
        e = Env(fake, url, store_url, Syncer(store, fake.clock), [], [])
        yield e
        for c in e.made:
            c.close()
    store.dispose()


# == upload ======================================================================================


def test_upload_sends_the_run_events_in_chunks_and_records_edges_by_fqn(env: Env, generation: int):
    catalog = env.catalog(chunkSize=2)
    extra = run("etl.extra", [pg("a")], [pg("b")])
    extra["x-team"] = "data-platform"  # a top-level key OpenMetadata's schema does not know
    events = [
        job_event("etl.described", [pg("orders")], [pg("kpi_weekly")]),
        *snapshot(),
        run("etl.c", [pg("kpi_daily")], [pg("c")]),
        extra,
    ]

    synced = env.syncer.sync(catalog, definition(), events)

    assert synced.result.succeeded, synced.result.failed
    assert env.posts() == 2  # 4 RunEvents, 2 a request
    assert len(env.fake.received) == 4
    assert all("x-team" not in e for e in env.fake.received)
    assert synced.result.dropped.get("NOT_A_RUN_EVENT") == 1
    assert env.fake.edge_pairs() == {
        KPI_EDGE,
        ANOMALIES_EDGE,
        (fqn("kpi_daily"), fqn("c")),
        (fqn("a"), fqn("b")),
    }
    details = env.fake.edges[KPI_EDGE]
    assert details["source"] == "OpenLineage" and details["sqlQuery"].startswith("insert")
    payloads = {
        (i.payload["from"]["fqn"], i.payload["to"]["fqn"]) for i in catalog.ledger.all(EDGE)
    }
    assert KPI_EDGE in payloads and ANOMALIES_EDGE in payloads
    assert (fqn("kpi_daily"), None) not in payloads or generation == 1


def test_events_the_server_skips_are_not_failures(env: Env, generation: int):
    """ "By default, the server processes only COMPLETE events" and "Both inputs and outputs must
    contain at least one dataset to create an edge": skipped, not failed."""
    catalog = env.catalog()
    events = [
        run(KPI, [pg("orders")], [pg("kpi_daily")], event_type="START"),
        run("etl.source_only", [pg("orders")], []),
        kpi(),
    ]

    synced = env.syncer.sync(catalog, definition(), events)

    assert synced.result.succeeded
    assert synced.report["skippedReason"] is None
    assert env.fake.edge_pairs() == {KPI_EDGE}


def test_an_event_that_raises_is_a_failed_row_counted_in_the_whole_batch(env: Env, generation: int):
    catalog = env.catalog(chunkSize=2)
    env.syncer.sync(catalog, definition(), snapshot())
    env.fake.raise_for_jobs["etl.broken"] = "Error processing event: boom"
    events = [
        job_event("etl.described"),  # not sent: the batch index still counts it
        kpi(),
        run("etl.c", [pg("kpi_daily")], [pg("c")]),
        run("etl.d", [pg("kpi_daily")], [pg("d")]),
        run("etl.broken", [pg("kpi_daily")], [pg("e")]),
    ]

    synced = env.syncer.sync(catalog, definition(), events)

    assert [(f.key, f.reason) for f in synced.result.failed] == [
        ("event 4", "Error processing event: boom")
    ]
    assert (fqn("kpi_daily"), fqn("d")) in env.fake.edge_pairs()  # the others were written
    assert synced.report["skippedReason"] == "UPLOAD_FAILED" and synced.report["calls"] == []
    assert ANOMALIES_EDGE in env.fake.edge_pairs()  # nothing deleted


def test_unresolved_datasets_are_dropped_by_reason_and_do_not_block_the_cleanup(env: Env):
    """2.1: namespaceNotMapped, missingColumns, notFound (storage) are permanent: dropped rows,
    counted by reason; the snapshot's cleanup still runs."""
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), snapshot())
    events = [
        *snapshot(with_anomalies=False),
        run("etl.mixed", [pg("kpi_daily"), ds("mysql://other:3306", "crm.accounts")], [pg("m")]),
        run("etl.no_columns", [pg("kpi_daily")], [pg("no_columns", columns=None)]),
    ]

    synced = env.syncer.sync(catalog, definition(), events)

    assert synced.result.succeeded, synced.result.failed
    assert synced.result.dropped == {"namespaceNotMapped": 1, "missingColumns": 1}
    assert synced.report["skippedReason"] is None
    assert synced.report["removedJobs"] == [f"{NS}.{ANOMALIES}"]
    assert env.fake.edge_pairs() == {KPI_EDGE, (fqn("kpi_daily"), fqn("m"))}
    # nothing recorded for what OpenMetadata does not hold
    ends = {(i.payload["from"]["name"], i.payload["to"]["name"]) for i in catalog.ledger.all(EDGE)}
    assert ("shop.public.kpi_daily", "shop.public.no_columns") not in ends
    assert ("crm.accounts", "shop.public.m") not in ends


def test_a_table_the_bot_may_not_create_is_dropped_as_create_not_allowed(env: Env):
    env.fake.tokens[JWT] = {EDIT_LINEAGE}  # no Create
    env.fake.add_table(fqn("orders"))
    catalog = env.catalog()

    synced = env.syncer.sync(catalog, definition(), [run(KPI, [pg("orders")], [pg("new")])])

    assert synced.result.succeeded
    assert synced.result.dropped == {"createNotAllowed": 1}
    assert env.fake.edge_pairs() == set()


def test_a_400_where_every_event_failed_is_read_event_by_event(env: Env):
    """2.1: "A batch returns 400 when every event fails": its body is the answer, not a refusal.
    Failed only for want of datasets that never resolve: dropped; raised: failed rows."""
    catalog = env.catalog()
    only_s3 = run(ANOMALIES, [pg("kpi_daily")], [ds(BUCKET, BUCKET_OBJECT)])

    dropped = env.syncer.sync(catalog, definition(), [only_s3])

    assert env.fake.server.seen("POST", BATCH)  # answered 400...
    assert dropped.result.succeeded  # ...but nothing failed for good
    assert dropped.result.dropped == {"notFound": 1}

    env.fake.raise_for_jobs[KPI] = "Error processing event: db down"
    before = env.posts()
    failed = env.syncer.sync(catalog, definition(), [kpi()])

    assert [(f.key, f.reason) for f in failed.result.failed] == [
        ("event 0", "Error processing event: db down")
    ]
    assert env.posts() - before == 1  # a per-event answer is never retried
    assert failed.report["skippedReason"] == "UPLOAD_FAILED"


def test_a_400_without_an_openlineage_answer_refuses_the_whole_upload(env: Env):
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), snapshot())
    body = json.dumps({"code": 400, "message": "[events[0].run.runId must be a uuid]"}).encode()
    env.fake.server.inject(Fault(status=400, body=body, method="POST", path=BATCH))

    synced = env.syncer.sync(catalog, definition(), snapshot(with_anomalies=False))

    (row,) = synced.result.failed
    assert row.key == "*"
    assert row.reason == f"POST {BATCH}: HTTP 400: [events[0].run.runId must be a uuid]"
    assert synced.report["skippedReason"] == "UPLOAD_FAILED"
    assert ANOMALIES_EDGE in env.fake.edge_pairs()


# == failures and retries ==========================================================================


def test_a_bot_without_edit_lineage_is_refused_and_nothing_is_deleted(env: Env):
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), snapshot())
    env.fake.tokens[JWT] = set()

    synced = env.syncer.sync(catalog, definition(), snapshot(with_anomalies=False))

    (row,) = synced.result.failed
    assert row.reason == f"POST {BATCH}: HTTP 403"
    assert synced.report["skippedReason"] == "UPLOAD_FAILED"
    assert env.fake.edge_pairs() == {KPI_EDGE, ANOMALIES_EDGE}


def test_a_disabled_openlineage_api_fails_the_upload_after_the_retries(env: Env):
    catalog = env.catalog(maxRetries=2)
    env.fake.enabled = False

    synced = env.syncer.sync(catalog, definition(), snapshot())

    (row,) = synced.result.failed
    assert row.reason == f"POST {BATCH}: HTTP 503 after 3 attempt(s)"
    assert env.fake.edge_pairs() == set()


def test_a_wrong_token_fails_at_the_clock_without_showing_the_token(
    env: Env, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv(TOKEN_ENV, "not-the-" + JWT)
    catalog = env.catalog()

    with pytest.raises(CatalogRefused) as raised:
        catalog.clock()

    assert str(raised.value) == "GET /api/v1/users/loggedInUser: HTTP 401"
    assert JWT not in str(raised.value) and JWT not in raised.value.body
    assert env.fake.server.requests[-1].headers["authorization"] == f"Bearer not-the-{JWT}"


# == cleanup =======================================================================================


def test_the_seed_example_the_dropped_jobs_edges_go_in_that_run(env: Env, generation: int):
    """Seed Example: "The next batch contains only etl.build_daily_kpi. The second job's flows
    [...] are not uploaded again, so the cutoff cleanup deletes them in that run." In
    OpenMetadata the flows are table-to-table edges, read back after the upload, checked and
    deleted by the tables' ids."""
    catalog = env.catalog()
    first = env.syncer.sync(catalog, definition(), snapshot())
    assert first.result.succeeded and first.report["removedJobs"] == []
    assert first.result.dropped == ({"notFound": 1} if generation == 2 else {})
    assert env.fake.edge_pairs() == {KPI_EDGE, ANOMALIES_EDGE}

    second = env.syncer.sync(catalog, definition(), snapshot(with_anomalies=False))

    report = second.report
    assert report["mode"] == "CUTOFF" and report["skippedReason"] is None
    assert report["removedJobs"] == [f"{NS}.{ANOMALIES}"]
    assert env.fake.edge_pairs() == {KPI_EDGE}
    assert fqn("anomalies") in env.fake.tables  # tables are never deleted
    ids = env.fake.table_id(fqn("kpi_daily")), env.fake.table_id(fqn("anomalies"))
    deletes = [r.path for r in env.fake.server.seen("DELETE")]
    assert deletes == [f"/api/v1/lineage/table/{ids[0]}/table/{ids[1]}"]
    (flows_call,) = calls(report, "flows")
    # 2.0 drops the S3 end silently, but the read-back finds no table for it: not recorded
    assert flows_call["dryRun"] == flows_call["real"] == {"dataFlows": 1}

    third = env.syncer.sync(catalog, definition(), snapshot(with_anomalies=False))
    assert third.report["removedJobs"] == []
    assert env.fake.edge_pairs() == {KPI_EDGE}
    assert len(env.fake.server.seen("DELETE")) == 1


def test_an_edge_a_job_no_longer_writes_is_deleted_and_the_rest_kept(env: Env):
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), [kpi()])

    rewired = run(KPI, [pg("customers")], [pg("kpi_daily")])
    synced = env.syncer.sync(catalog, definition(), [rewired])

    assert synced.report["skippedReason"] is None
    assert env.fake.edge_pairs() == {(fqn("customers"), fqn("kpi_daily"))}


def test_an_edge_another_job_still_writes_is_kept(env: Env):
    """OpenMetadata has one edge per table pair, whichever job wrote it: removing one job must
    not delete the edge the other still describes."""
    catalog = env.catalog()
    twin = run("etl.twin", [pg("orders")], [pg("kpi_daily")])
    env.syncer.sync(catalog, definition(), [kpi(), twin])

    synced = env.syncer.sync(catalog, definition(), [twin])

    assert synced.report["removedJobs"] == [f"{NS}.{KPI}"]
    assert env.fake.edge_pairs() == {KPI_EDGE}
    assert env.fake.server.seen("DELETE") == []


def test_an_edge_already_gone_or_unnamed_does_not_stop_the_cleanup(env: Env):
    catalog = env.catalog()
    d = definition(cleanup={"maxRemovalShare": 1.0})  # two of its three jobs go, on purpose
    unmapped = run("etl.export", [pg("kpi_daily")], [ds("mysql://other:3306", "crm.kpi")])
    env.syncer.sync(catalog, d, [*snapshot(), unmapped])
    del env.fake.edges[ANOMALIES_EDGE]  # someone removed it by hand

    synced = env.syncer.sync(catalog, d, snapshot(with_anomalies=False))

    assert synced.report["skippedReason"] is None
    assert sorted(synced.report["removedJobs"]) == [f"{NS}.etl.export", f"{NS}.{ANOMALIES}"]
    assert env.fake.server.seen("DELETE") == []  # the edge is checked first: not found
    (flows_call,) = calls(synced.report, "flows")
    # the unmapped end resolves to no table: that flow was never recorded
    assert flows_call["real"] == {"dataFlows": 0}
    assert flows_call["outcomes"] == {"notFound": {"dataFlows": 1}}


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


def ledger_keys(catalog: OpenMetadataCatalog, kind: str) -> set[tuple[str, str]]:
    return {
        (i.payload["namespace"], i.payload["name"])
        for i in catalog.ledger.all(kind, catalog.definition_name)
    }


def test_a_foreign_parent_job_is_never_recorded_as_this_definitions_job(env: Env):
    """A parent job in a namespace the definition does not own is another owner's: the event
    goes to OpenMetadata with its parent facet, but the parent is never this definition's JOB
    entry, so no cleanup of this definition ever counts or removes it."""
    catalog = env.catalog()
    child = with_parent(run("child", [pg("orders")], [pg("child_out")]), "airflow", "nightly")

    first = env.syncer.sync(catalog, definition(), [kpi(), child])

    assert first.result.succeeded
    assert ledger_keys(catalog, JOB) == {(NS, KPI), (NS, "child")}
    (sent,) = [e for e in env.fake.received if e["job"]["name"] == "child"]
    assert sent["run"]["facets"]["parent"]["job"] == {"namespace": "airflow", "name": "nightly"}

    second = env.syncer.sync(catalog, definition(), [kpi()])

    assert second.report["removedJobs"] == [f"{NS}.child"]
    assert ledger_keys(catalog, JOB) == {(NS, KPI)}
    assert catalog.count_jobs("snap_jobs", schemas=[NS, "airflow"]) == 1


def test_a_drop_only_leaves_the_ledger_through_the_cleanup(env: Env):
    """A DROP goes through the cleanup's ``drop_datasets`` call: the DatasetEvent is not sent
    (OpenMetadata takes RunEvents), the upload deletes nothing, and the call forgets the
    dataset's ledger entry; OpenMetadata's table (metadata others own) is never deleted."""
    d = definition(
        datasetSystems=[{"namespace": WH, "system": "warehouse", "cleanupMode": "CUTOFF"}]
    )
    catalog = env.catalog()
    env.syncer.sync(catalog, d, [kpi()])
    assert (WH, "shop.public.kpi_daily") in ledger_keys(catalog, DATASET)
    drop = {
        "eventTime": "2026-11-01T02:30:00.000Z",
        "producer": "https://example.com/ol-dagster-tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": {
            "namespace": WH,
            "name": "shop.public.kpi_daily",
            "facets": {
                "lifecycleStateChange": facet(
                    "LifecycleStateChangeDatasetFacet", lifecycleStateChange="DROP"
                )
            },
        },
    }

    synced = env.syncer.sync(catalog, d, [drop])

    assert synced.result.succeeded and synced.result.removed == {}
    (call,) = calls(synced.report, "drops")
    assert call["dryRun"] == call["real"] == {"physicalEntities": 1}
    assert (WH, "shop.public.kpi_daily") not in ledger_keys(catalog, DATASET)
    assert env.fake.server.seen("DELETE") == []
    assert fqn("kpi_daily") in env.fake.tables


# == identity ======================================================================================


@pytest.mark.parametrize(
    ("namespace", "mapping", "expected"),
    [
        (WH, {WH: "exact", "postgres://db": "prefix"}, "exact"),
        ("postgres://db:5432/x", {"postgres://": "short", WH: "long"}, "long"),
        (WH, {"": "ignored", "postgres://db": ""}, None),
        ("mysql://other", {WH: "svc"}, None),
    ],
    ids=["exact_wins", "longest_prefix", "empty_entries_ignored", "unmapped"],
)
def test_namespaces_map_to_services_as_openmetadata_maps_them(
    namespace: str, mapping: dict[str, str], expected: str | None
):
    """OpenLineageNamespaceMapping: the client reads back under the service the server maps to."""
    fake = OpenMetadataFake(mapping=mapping)
    assert service_for(namespace, mapping) == fake.service_for(namespace) == expected
