"""OpenMetadata's cleanup removes the edges OpenMetadata really holds, and only OpenLineage's.

The fake resolves datasets the way OpenMetadata does (``fakes/openmetadata_fake.py``: symlinks
first, ``schema.table`` searched as ``<service>.%.%schema.table``, quoted FQN parts, FQN suffix
searches across services), keeps one edge per table pair with the source that wrote it last, and
answers the lineage and table reads. The client never sees how: after each upload it reads back
which tables the server joined, and its cleanup checks each edge before deleting it. Assertions
are on what an OpenMetadata user sees (the fake's edges) and on the report.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from ol_dagster.catalog.ledger.entries import EDGE, LedgerItem
from ol_dagster.catalog.openmetadata.catalog import OpenMetadataCatalog
from ol_dagster.catalog.openmetadata.settings import OpenMetadataCatalogSettings
from ol_dagster.store import EventStore
from ol_dagster_tests.fakes.faults import Clock, Fault, serve
from ol_dagster_tests.fakes.harness import NS, WH, Syncer, calls, definition, ds, pg, run
from ol_dagster_tests.fakes.openmetadata_fake import CREATE, EDIT_LINEAGE, OpenMetadataFake

JWT = "om-bot-jwt-delete-0001"
USER_JWT = "om-user-jwt-delete-0002"
OTHER_JWT = "om-spark-jwt-delete-0003"  # another OpenLineage producer, with its own user
BOT, PERSON, OTHER = "ol-dagster-bot", "alice", "spark-bot"  # the users the tokens authenticate
TOKEN_ENV = "OL_TEST_OM_DELETE_JWT"
SERVICE = "prod-postgres"
START = datetime(2026, 11, 1, 3, 0, tzinfo=UTC)
KEEP, DROP = "etl.keep", "etl.dropped"


def fqn(table: str, service: str = SERVICE, database: str = "shop") -> str:
    return f"{service}.{database}.public.{table}"


@dataclass
class Env:
    fake: OpenMetadataFake
    url: str
    syncer: Syncer
    store_url: str
    made: list[OpenMetadataCatalog]

    def catalog(self, definition_name: str = "snap", **cfg: Any) -> OpenMetadataCatalog:
        settings = OpenMetadataCatalogSettings.model_validate(
            {
                "kind": "openmetadata",
                "url": self.url,
                "token": {"env": TOKEN_ENV},
                "maxRetries": 1,
                "timeoutSeconds": 5,
                "serviceMapping": dict(self.fake.mapping),
                **cfg,
            }
        )
        c = OpenMetadataCatalog(
            "main",
            settings,
            store_url=self.store_url,
            definition=definition_name,
            sleep=lambda _: None,
        )
        self.made.append(c)
        return c

    def user(self, token: str = USER_JWT) -> httpx.Client:
        """A person (or another connector) using OpenMetadata's API with their own token."""
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {token}"})

    def add_manual_edge(self, src: str, dst: str, source: str = "Manual") -> httpx.Response:
        body = {
            "edge": {
                "fromEntity": {"id": self.fake.table_id(src), "type": "table"},
                "toEntity": {"id": self.fake.table_id(dst), "type": "table"},
                "lineageDetails": {"source": source, "sqlQuery": "insert into x select 1"},
            }
        }
        with self.user() as client:
            return client.put("/api/v1/lineage", json=body)


@contextmanager
def running(
    tmp_path: Path,
    *,
    mapping: dict[str, str] | None = None,
    services: dict[str, list[str]] | None = None,
) -> Iterator[Env]:
    """An OpenMetadata 2.1 fake on loopback (the warehouse namespace mapped to ``SERVICE``, its
    one database ``shop``, unless told otherwise) and a store for the syncs."""
    fake = OpenMetadataFake(
        tokens={JWT: {EDIT_LINEAGE, CREATE}, USER_JWT: {EDIT_LINEAGE}, OTHER_JWT: {EDIT_LINEAGE}},
        users={JWT: BOT, USER_JWT: PERSON, OTHER_JWT: OTHER},
        mapping=mapping if mapping is not None else {WH: SERVICE},
        services=services if services is not None else {SERVICE: ["shop"]},
        clock=Clock(START),
    )
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    store = EventStore(store_url)
    env: Env | None = None
    try:
        with serve(fake.server) as url:
            env = Env(fake, url, Syncer(store, fake.clock), store_url, [])
            yield env
    finally:
        for c in env.made if env else []:
            c.close()
        store.dispose()


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, JWT)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    with running(tmp_path) as e:
        yield e


def flows_call(synced: Any) -> dict[str, Any]:
    (call,) = calls(synced.report, "flows")
    return call


def edge_entries(catalog: OpenMetadataCatalog) -> list[LedgerItem]:
    return catalog.ledger.all(EDGE, catalog.definition_name)


# == a dropped job's edges go, however the datasets are named =====================================


def _symlinked(table: str) -> dict[str, Any]:
    """A lake file whose symlink names the warehouse table (Spark on a Hive metastore)."""
    dataset = ds("s3://lake", f"warehouse/shop.db/{table}", ["id"])
    dataset["facets"]["symlinks"] = {
        "_producer": "https://example.com/ol-dagster-tests",
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json"
        "#/$defs/SymlinksDatasetFacet",
        "identifiers": [{"namespace": WH, "name": f"shop.public.{table}", "type": "TABLE"}],
    }
    return dataset


# each case: the fake's mapping and services, the tables that exist before, how a table is named
# in the events, and the FQN OpenMetadata holds it under
CASES = {
    # OpenLineageEntityResolver: a two-part name is searched as <service>.%.%<schema>.<table>;
    # a table it creates goes to the service's only database
    "two_part_schema_table": (
        {WH: SERVICE},
        {SERVICE: ["shop"]},
        ["orders"],
        lambda t: ds(WH, f"public.{t}", ["id"]),
        lambda t: fqn(t),
    ),
    # a service name holding a dot is quoted in every FQN under it: the mapped searches (an
    # unquoted pattern) never match, the suffix search does (FullyQualifiedName.quoteName)
    "dotted_service_quoted": (
        {WH: "prod.pg"},
        {"prod.pg": ["shop"]},
        [],
        lambda t: pg(t),
        lambda t: f'"prod.pg".shop.public.{t}',
    ),
    # a database name holding a dot: found by <service>.%.%<schema>.<table> (the % spans the
    # quoted part), read back under the quoted FQN
    "dotted_database_quoted": (
        {WH: SERVICE},
        {SERVICE: ["shop.eu"]},
        ["orders", "kpi", "report"],
        lambda t: ds(WH, f"eu.public.{t}", ["id"]),
        lambda t: f'{SERVICE}."shop.eu".public.{t}',
    ),
    # OpenLineageDatasetNameNormalizer: the symlink identifiers are tried before the name
    "symlinked_dataset": (
        {WH: SERVICE},
        {SERVICE: ["shop"]},
        [],
        _symlinked,
        lambda t: fqn(t),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_dropped_jobs_edges_are_gone_from_openmetadata_after_the_cleanup(
    tmp_path: Path, case: str
):
    mapping, services, existing, named, held = CASES[case]
    with running(tmp_path, mapping=mapping, services=services) as env:
        for table in existing:
            env.fake.add_table(held(table))
        catalog = env.catalog()
        keep = run(KEEP, [named("orders")], [named("kpi")])
        dropped = run(DROP, [named("kpi")], [named("report")])

        first = env.syncer.sync(catalog, definition(), [keep, dropped])

        assert first.result.succeeded, first.result.failed
        kept_pair, dropped_pair = (held("orders"), held("kpi")), (held("kpi"), held("report"))
        assert env.fake.edge_pairs() == {kept_pair, dropped_pair}
        recorded = {
            (i.payload["from"]["fqn"], i.payload["to"]["fqn"]) for i in edge_entries(catalog)
        }
        assert recorded == {kept_pair, dropped_pair}  # what OpenMetadata holds, not a guess

        second = env.syncer.sync(catalog, definition(), [keep])

        assert second.report["skippedReason"] is None
        assert second.report["removedJobs"] == [f"{NS}.{DROP}"]
        assert env.fake.edge_pairs() == {kept_pair}
        call = flows_call(second)
        assert call["dryRun"] == call["real"] == {"dataFlows": 1}
        assert "outcomes" not in call


# == only OpenLineage's edges ===================================================================


def test_a_manual_edge_on_the_same_tables_survives_the_cleanup_and_is_reported_kept(env: Env):
    """OpenMetadata keeps one edge per table pair: a user who draws the same edge by hand makes
    it theirs (its source becomes Manual). The FQN delete would remove it all the same; the
    cleanup checks the source first and leaves it."""
    catalog = env.catalog()
    keep, dropped = run(KEEP, [pg("orders")], [pg("kpi")]), run(DROP, [pg("kpi")], [pg("report")])
    env.syncer.sync(catalog, definition(), [keep, dropped])
    answer = env.add_manual_edge(fqn("kpi"), fqn("report"))
    assert answer.status_code == 200, answer.text

    synced = env.syncer.sync(catalog, definition(), [keep])

    assert synced.report["removedJobs"] == [f"{NS}.{DROP}"]
    assert (fqn("kpi"), fqn("report")) in env.fake.edge_pairs()
    assert env.fake.edges[(fqn("kpi"), fqn("report"))]["source"] == "Manual"
    assert env.fake.server.seen("DELETE") == []
    call = flows_call(synced)
    assert call["real"] == {"dataFlows": 0}
    assert call["outcomes"] == {"kept": {"dataFlows": 1}}
    assert not [i for i in edge_entries(catalog) if i.payload["to"]["fqn"] == fqn("report")]


def test_another_connectors_edge_is_kept_too(env: Env):
    catalog = env.catalog()
    keep, dropped = run(KEEP, [pg("orders")], [pg("kpi")]), run(DROP, [pg("kpi")], [pg("report")])
    env.syncer.sync(catalog, definition(), [keep, dropped])
    assert env.add_manual_edge(fqn("kpi"), fqn("report"), source="DbtLineage").status_code == 200

    synced = env.syncer.sync(catalog, definition(), [keep])

    assert env.fake.edges[(fqn("kpi"), fqn("report"))]["source"] == "DbtLineage"
    assert flows_call(synced)["outcomes"] == {"kept": {"dataFlows": 1}}


def test_an_edge_someone_else_removed_is_reported_not_found_never_removed(env: Env):
    catalog = env.catalog()
    keep, dropped = run(KEEP, [pg("orders")], [pg("kpi")]), run(DROP, [pg("kpi")], [pg("report")])
    env.syncer.sync(catalog, definition(), [keep, dropped])
    with env.user() as user:  # removed by hand, through OpenMetadata's API
        gone = user.delete(f"/api/v1/lineage/table/name/{fqn('kpi')}/table/name/{fqn('report')}")
    assert gone.status_code == 200

    synced = env.syncer.sync(catalog, definition(), [keep])

    call = flows_call(synced)
    assert call["real"] == {"dataFlows": 0}
    assert call["outcomes"] == {"notFound": {"dataFlows": 1}}
    bot = f"Bearer {JWT}"
    assert [r for r in env.fake.server.seen("DELETE") if r.headers["authorization"] == bot] == []
    assert env.fake.edge_pairs() == {(fqn("orders"), fqn("kpi"))}
    # forgotten: the next run has nothing left to check
    before = len(env.fake.server.seen("GET", "/api/v1/lineage/getLineageEdge"))
    env.syncer.sync(catalog, definition(), [keep])
    assert len(env.fake.server.seen("GET", "/api/v1/lineage/getLineageEdge")) == before


# == identities ====================================================================================


def test_an_edge_two_jobs_name_differently_stays_while_one_still_writes_it(env: Env):
    """``public.orders`` and ``shop.public.orders`` are one table in OpenMetadata: the two
    ledger entries hold the same edge (its ids), so dropping one job deletes nothing."""
    catalog = env.catalog()
    env.fake.add_table(fqn("orders"))
    short = run("etl.short", [ds(WH, "public.orders")], [pg("kpi")])
    full = run("etl.full", [pg("orders")], [pg("kpi")])
    d = definition(cleanup={"maxRemovalShare": 1.0})
    env.syncer.sync(catalog, d, [short, full])
    assert env.fake.edge_pairs() == {(fqn("orders"), fqn("kpi"))}
    assert len(edge_entries(catalog)) == 2

    one_left = env.syncer.sync(catalog, d, [full])

    assert one_left.report["removedJobs"] == [f"{NS}.etl.short"]
    assert env.fake.edge_pairs() == {(fqn("orders"), fqn("kpi"))}
    assert env.fake.server.seen("DELETE") == []

    none_left = env.syncer.sync(catalog, d, [run("etl.other", [pg("a")], [pg("b")])])

    assert sorted(none_left.report["removedJobs"]) == [f"{NS}.etl.full"]
    assert env.fake.edge_pairs() == {(fqn("a"), fqn("b"))}


def test_an_edge_whose_ends_openmetadata_did_not_resolve_is_not_recorded(env: Env):
    catalog = env.catalog()
    unmapped = run(KEEP, [pg("orders")], [ds("mysql://crm:3306", "crm.accounts", ["id"])])

    synced = env.syncer.sync(catalog, definition(), [unmapped])

    assert synced.result.dropped == {"namespaceNotMapped": 1}
    assert edge_entries(catalog) == []


def test_an_end_found_only_by_a_catalog_wide_search_is_read_through_its_other_ends_lineage(
    env: Env,
):
    """An unmapped namespace: OpenMetadata finds ``crm.accounts`` by an FQN suffix under any
    service. The client cannot repeat that search, but the table is a neighbour of the mapped
    end, picked among them by the same pattern."""
    catalog = env.catalog()
    crm = "crm-svc.crmdb.crm.accounts"
    env.fake.add_table(crm)
    env.fake.add_table(fqn("kpi"))
    env.fake.add_table("other-svc.db.sales.orders")  # another neighbour, not matching
    env.fake.add_edge("other-svc.db.sales.orders", fqn("kpi"), source="Manual")
    job = run(DROP, [ds("mysql://crm:3306", "crm.accounts")], [pg("kpi")])

    env.syncer.sync(catalog, definition(), [run(KEEP, [pg("a")], [pg("b")]), job])

    assert (crm, fqn("kpi")) in env.fake.edge_pairs()
    ((src, dst),) = [
        (i.payload["from"]["fqn"], i.payload["to"]["fqn"])
        for i in edge_entries(catalog)
        if i.payload["to"]["fqn"] == fqn("kpi")
    ]
    assert (src, dst) == (crm, fqn("kpi"))

    env.syncer.sync(catalog, definition(), [run(KEEP, [pg("a")], [pg("b")])])

    assert (crm, fqn("kpi")) not in env.fake.edge_pairs()
    assert ("other-svc.db.sales.orders", fqn("kpi")) in env.fake.edge_pairs()


def test_a_two_part_name_in_two_databases_is_told_apart_by_the_lineage(tmp_path: Path):
    """``public.orders`` matches a table in both databases; OpenMetadata took one of them. The
    edge it wrote says which."""
    with running(tmp_path, services={SERVICE: ["shop", "archive"]}) as env:
        env.fake.add_table(fqn("orders", database="archive"))
        env.fake.add_table(fqn("orders"))
        env.fake.add_table(fqn("kpi"))
        catalog = env.catalog()
        job = run(DROP, [ds(WH, "public.orders")], [pg("kpi")])
        other = run(KEEP, [pg("a")], [pg("b")])

        env.syncer.sync(catalog, definition(), [other, job])

        (written,) = [p for p in env.fake.edge_pairs() if p[1] == fqn("kpi")]
        (recorded,) = [
            (i.payload["from"]["fqn"], i.payload["to"]["fqn"])
            for i in edge_entries(catalog)
            if i.payload["to"]["fqn"] == fqn("kpi")
        ]
        assert recorded == written

        env.syncer.sync(catalog, definition(), [other])

        assert written not in env.fake.edge_pairs()


def test_an_entry_recorded_before_the_read_back_is_deleted_by_the_tables_its_fqns_name(env: Env):
    """Entries written by an earlier version carry FQNs only: the tables are looked up, then the
    edge is checked and deleted as any other."""
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), [run(KEEP, [pg("orders")], [pg("kpi")])])
    env.fake.add_table(fqn("report"))
    env.fake.add_edge(fqn("kpi"), fqn("report"), source="OpenLineage", by=BOT)  # its own write
    legacy = LedgerItem(
        EDGE,
        f"ol:{NS}|{DROP}|{WH}|shop.public.kpi|{WH}|shop.public.report",
        {
            "from": {"namespace": WH, "name": "shop.public.kpi", "fqn": fqn("kpi")},
            "to": {"namespace": WH, "name": "shop.public.report", "fqn": fqn("report")},
        },
        scope=f"ol:{NS}|{DROP}",
    )
    catalog.ledger.touch("snap", [legacy], START - timedelta(days=1))

    synced = env.syncer.sync(catalog, definition(), [run(KEEP, [pg("orders")], [pg("kpi")])])

    assert flows_call(synced)["real"] == {"dataFlows": 1}
    assert env.fake.edge_pairs() == {(fqn("orders"), fqn("kpi"))}


# == reading back ==================================================================================


def test_a_failed_read_before_the_upload_fails_it_sends_nothing_and_deletes_nothing(env: Env):
    """Whose each new pair is must be read before anything is written over it."""
    catalog = env.catalog()
    keep, dropped = run(KEEP, [pg("orders")], [pg("kpi")]), run(DROP, [pg("kpi")], [pg("report")])
    env.syncer.sync(catalog, definition(), [keep, dropped])
    posts = len(env.fake.server.seen("POST"))
    env.fake.server.burst(503, 4, method="GET", path="/api/v1/tables/")

    synced = env.syncer.sync(catalog, definition(), [keep])

    (row,) = synced.result.failed
    assert row.reason.startswith("GET /api/v1/tables/name/")
    assert len(env.fake.server.seen("POST")) == posts
    assert synced.report["skippedReason"] == "UPLOAD_FAILED"
    assert len(env.fake.edge_pairs()) == 2


def test_a_failed_read_back_fails_the_upload_and_deletes_nothing(env: Env):
    """Without the tables the edges cannot be recorded; recording none would make last run's
    entries stale and delete edges this batch still writes. The table the upload creates is
    read before it (not there yet) and after it (its id): the second read fails here."""
    catalog = env.catalog()
    keep, dropped = run(KEEP, [pg("orders")], [pg("kpi")]), run(DROP, [pg("kpi")], [pg("report")])
    env.syncer.sync(catalog, definition(), [keep, dropped])
    fresh = f"/api/v1/tables/name/{fqn('fresh')}"
    env.fake.server.inject(
        Fault(method="GET", path=fresh), *[Fault(503, method="GET", path=fresh)] * 2
    )

    synced = env.syncer.sync(
        catalog, definition(), [keep, run("etl.new", [pg("kpi")], [pg("fresh")])]
    )

    (row,) = synced.result.failed
    assert row.object_type == "dataFlows"
    assert row.reason.startswith("read back: GET /api/v1/tables/name/")
    assert synced.report["skippedReason"] == "UPLOAD_FAILED"
    assert (fqn("kpi"), fqn("report")) in env.fake.edge_pairs()


def test_each_dataset_is_read_once_per_upload(env: Env):
    catalog = env.catalog()
    env.fake.add_table(fqn("orders"))
    jobs = [run(f"etl.j{i}", [pg("orders")], [pg(f"out{i}")]) for i in range(6)]

    env.syncer.sync(catalog, definition(), jobs)

    reads = Counter(r.path for r in env.fake.server.seen("GET", "/api/v1/tables/name/"))
    # a table there before the upload is read once; one it creates, before (not there) and after
    assert reads[f"/api/v1/tables/name/{fqn('orders')}"] == 1
    assert [reads[f"/api/v1/tables/name/{fqn(f'out{i}')}"] for i in range(6)] == [2] * 6
    assert len(reads) == 7
    assert len(edge_entries(catalog)) == 6


def test_a_flow_still_written_keeps_its_entry_when_its_tables_cannot_be_told_this_time(env: Env):
    """Recorded once; then a second table matching ``public.orders`` appears and the lineage
    cannot tell them apart (both feed kpi). The entry stays (it is still written) and nothing is
    deleted."""
    catalog = env.catalog()
    env.fake.add_table(fqn("orders"))
    job = run(KEEP, [ds(WH, "public.orders")], [pg("kpi")])
    env.syncer.sync(catalog, definition(), [job])
    (entry,) = edge_entries(catalog)
    env.fake.add_table(fqn("orders", database="archive"))
    env.fake.add_edge(fqn("orders", database="archive"), fqn("kpi"), source="OpenLineage")

    synced = env.syncer.sync(catalog, definition(), [job])

    assert synced.report["skippedReason"] is None
    assert edge_entries(catalog) == [entry]
    assert env.fake.server.seen("DELETE") == []


# == the fake answers as OpenMetadata ============================================================


def test_the_fqn_delete_removes_an_edge_whatever_its_source(env: Env):
    """LineageRepository.deleteLineageByFQN reads no source: why the cleanup never uses it."""
    for table in ("kpi", "report"):
        env.fake.add_table(fqn(table))
    assert env.add_manual_edge(fqn("kpi"), fqn("report")).status_code == 200

    with env.user() as user:
        gone = user.delete(f"/api/v1/lineage/table/name/{fqn('kpi')}/table/name/{fqn('report')}")
        again = user.delete(f"/api/v1/lineage/table/name/{fqn('kpi')}/table/name/{fqn('report')}")
        missing = user.delete(f"/api/v1/lineage/table/name/{fqn('nope')}/table/name/{fqn('kpi')}")

    assert gone.status_code == 200 and env.fake.edge_pairs() == set()
    assert again.status_code == 404 and again.json()["message"] == "Lineage edge not found"
    assert missing.json() == {
        "code": 404,
        "message": f"table instance for {fqn('nope')} not found",
    }


def test_the_source_scoped_delete_removes_every_edge_of_that_source_into_the_table(env: Env):
    """LineageRepository.deleteLineageBySource: all OpenLineage edges into the table go, not
    one: why the cleanup does not use it either."""
    for table in ("a", "b", "kpi"):
        env.fake.add_table(fqn(table))
    env.fake.add_edge(fqn("a"), fqn("kpi"), source="OpenLineage")
    env.fake.add_edge(fqn("b"), fqn("kpi"), source="OpenLineage")

    with env.user() as user:
        answer = user.delete(
            f"/api/v1/lineage/table/{env.fake.table_id(fqn('kpi'))}/type/OpenLineage"
        )

    assert answer.status_code == 200
    assert env.fake.edge_pairs() == set()


def test_the_edge_and_table_reads_answer_as_openmetadata(env: Env):
    env.fake.add_table(fqn("kpi"))
    quoted = '"svc.eu".shop.public.orders'
    env.fake.add_table(quoted)
    env.fake.add_table(fqn("old"), deleted=True)
    env.fake.add_edge(quoted, fqn("kpi"), source="OpenLineage")
    src, dst = env.fake.table_id(quoted), env.fake.table_id(fqn("kpi"))
    unknown = str(uuid.uuid4())

    with env.user() as user:
        edge = user.get(f"/api/v1/lineage/getLineageEdge/{src}/{dst}")
        reversed_ = user.get(f"/api/v1/lineage/getLineageEdge/{dst}/{src}")
        table = user.get("/api/v1/tables/name/%22svc.eu%22.shop.public.orders")
        deleted = user.get(f"/api/v1/tables/name/{fqn('old')}")
        deleted_all = user.get(f"/api/v1/tables/name/{fqn('old')}", params={"include": "all"})
        lineage = user.get(
            f"/api/v1/lineage/table/name/{fqn('kpi')}", params={"downstreamDepth": 0}
        )
        by_id = user.delete(f"/api/v1/lineage/table/{unknown}/table/{dst}")
        databases = user.get("/api/v1/databases", params={"service": SERVICE, "limit": 1})

    assert edge.json()["edge"]["source"] == "OpenLineage"
    assert reversed_.status_code == 404
    assert reversed_.json()["message"] == f"Lineage edge not found between {dst} and  {src}"
    assert table.json()["id"] == src
    assert table.json()["fullyQualifiedName"] == quoted
    assert deleted.status_code == 404 and deleted_all.status_code == 200
    body = lineage.json()
    assert body["entity"]["id"] == dst and body["downstreamEdges"] == []
    ((up),) = body["upstreamEdges"]
    assert (up["fromEntity"], up["toEntity"]) == (src, dst)
    assert up["lineageDetails"]["source"] == "OpenLineage"
    assert [n["fullyQualifiedName"] for n in body["nodes"]] == [quoted]
    assert by_id.json() == {"code": 404, "message": f"table instance for {unknown} not found"}
    assert [d["name"] for d in databases.json()["data"]] == ["shop"]


@pytest.mark.contract_violations_allowed
def test_the_fake_refuses_an_edge_body_openmetadata_refuses(env: Env):
    for table in ("kpi", "report"):
        env.fake.add_table(fqn(table))
    bad_id = {"edge": {"fromEntity": {"id": "kpi", "type": "table"}, "toEntity": {"type": "x"}}}

    with env.user() as user:
        refused = user.put("/api/v1/lineage", json=bad_id)
        unknown_source = env.add_manual_edge(fqn("kpi"), fqn("report"), source="Guesswork")

    assert refused.status_code == 400 and refused.json()["code"] == 400
    assert "is not a 'uuid'" in refused.json()["message"]
    assert "'id' is a required property" in refused.json()["message"]
    assert unknown_source.status_code == 400
    assert env.fake.edge_pairs() == set()
    assert [v.path for v in env.fake.server.violations] == ["/api/v1/lineage"]


def test_every_request_of_a_sync_and_cleanup_keeps_to_openmetadatas_definitions(env: Env):
    """The autouse contract fixture fails any test in which a request broke the schemas; here a
    whole upload, read-back, check and delete go through and the fake saw no violation."""
    catalog = env.catalog()
    keep, dropped = run(KEEP, [pg("orders")], [pg("kpi")]), run(DROP, [pg("kpi")], [pg("report")])
    env.syncer.sync(catalog, definition(), [keep, dropped])
    env.syncer.sync(catalog, definition(), [keep])

    methods = {(r.method, r.path.split("/")[3]) for r in env.fake.server.requests}
    assert {("GET", "tables"), ("GET", "lineage"), ("DELETE", "lineage")} <= methods
    assert env.fake.server.violations == []
    assert json.dumps([i.payload for i in edge_entries(catalog)]).count('"id"') == 2


# == names, as OpenMetadata reads them ===========================================================

GLUE = "arn:aws:glue:eu-west-1:123456789012"


@pytest.mark.parametrize(
    ("namespace", "name", "symlinks", "expected"),
    [
        ("postgres://db:5432", "shop.public.orders", [], [("shop.public.orders", None)]),
        ("hive://metastore", "sales/orders", [], [("sales.orders", None)]),
        ("s3://lake", "sales/orders", [], []),  # a storage path is no short db/table
        ("s3://lake", "warehouse/sales.db/orders", [], [("sales.orders", None)]),
        ("s3://lake", "data/orders.parquet", [], []),
        ("s3://lake", "orders", [], []),
        ("postgres://db:5432", "shop..orders", [], []),
        (
            "s3://lake",
            "warehouse/sales.db/orders",
            [(GLUE, "table/sales/orders"), ("hive://metastore", "sales.orders")],
            [("sales.orders", GLUE)],  # de-duplicated: the first namespace kept
        ),
        (
            "s3://lake",
            "x/y",
            [("hive://m", "cat.sales.orders"), ("hive://m", "bad")],
            [("cat.sales.orders", "hive://m")],
        ),
    ],
    ids=[
        "dotted",
        "short_slash",
        "storage_path",
        "hive_warehouse",
        "file",
        "bare",
        "empty_part",
        "glue_symlink_first",
        "symlink_then_unparsable",
    ],
)
def test_candidate_names_are_read_as_openmetadata_reads_them(
    namespace: str, name: str, symlinks: list[tuple[str, str]], expected: list[tuple[str, Any]]
):
    """OpenLineageDatasetNameNormalizer: the client's read-back and the fake agree with it."""
    from ol_dagster.catalog.openmetadata.tables import candidates
    from ol_dagster_tests.fakes.openmetadata_fake import dataset_candidates

    facets = {"symlinks": {"identifiers": [{"namespace": n, "name": v} for n, v in symlinks]}}
    want = [(dotted, ns if ns is not None else namespace) for dotted, ns in expected]
    assert [(c.name, c.namespace) for c in candidates(namespace, name, facets)] == want
    assert dataset_candidates(namespace, name, facets) == want


@pytest.mark.parametrize(
    ("parts", "fqn"),
    [
        (("svc", "shop", "public", "orders"), "svc.shop.public.orders"),
        (("prod.pg", "shop", "public", "orders"), '"prod.pg".shop.public.orders'),
        (('"svc"', "shop.eu", "public", "t"), 'svc."shop.eu".public.t'),
        (('"a.b"', "c"), '"a.b".c'),
    ],
)
def test_fqns_quote_dotted_parts_as_openmetadata_does(parts: tuple[str, ...], fqn: str):
    """FullyQualifiedName.build/quoteName, in the client and in the fake."""
    from ol_dagster.catalog.openmetadata.tables import build_fqn, quote_name
    from ol_dagster_tests.fakes.openmetadata_fake import build_fqn as fake_build
    from ol_dagster_tests.fakes.openmetadata_fake import split_fqn

    assert build_fqn(*parts) == fake_build(*parts) == fqn
    assert split_fqn(fqn) == [p.strip('"') for p in parts]
    with pytest.raises(ValueError):
        quote_name('a"b')


def test_like_matches_as_sql_like_does():
    """``_`` is one character, ``%`` any run, ``!`` escapes (LikeEscape); the server's patterns
    are not escaped, so ``kpi_daily`` also matches ``kpiXdaily``."""
    from ol_dagster.catalog.openmetadata.tables import like, like_escape
    from ol_dagster_tests.fakes.openmetadata_fake import sql_like

    cases = [
        ("svc.%.%public.kpi_daily", "svc.shop.public.kpi_daily", None, True),
        ("svc.%.%public.kpi_daily", "svc.shop.xpublic.kpiXdaily", None, True),
        ("svc.%.%public.kpi_daily", "svc.shop.public.kpi_daily.v2", None, False),
        (f"{like_escape('svc')}.%.{like_escape('kpi_daily')}", "svc.a.b.kpiXdaily", "!", False),
        (f"{like_escape('svc')}.%.{like_escape('kpi_daily')}", "svc.a.b.kpi_daily", "!", True),
        ("%shop.public.t", '"prod.pg".shop.public.t', None, True),
        ("prod.pg.%.%public.t", '"prod.pg".shop.public.t', None, False),
    ]
    for pattern, value, escape, expected in cases:
        assert like(pattern, value, escape=escape) is expected, (pattern, value)
        assert sql_like(pattern, value, escape) is expected, (pattern, value)


# == only the edges OpenMetadata wrote are recorded ==============================================


def test_a_flow_joined_across_a_runs_events_is_not_recorded_nor_deleted(env: Env):
    """OpenMetadata writes each event's inputs x outputs on its own, for the event types its
    filter takes (COMPLETE by default): a run whose START named the input and whose COMPLETE
    named the output has a flow in ol-dagster's graph and no edge in OpenMetadata."""
    catalog = env.catalog()
    run_id = str(uuid.uuid4())
    start = run("etl.split", [pg("orders")], [], event_type="START")
    complete = run("etl.split", [], [pg("kpi")])
    start["run"]["runId"] = complete["run"]["runId"] = run_id
    whole = run(KEEP, [pg("orders")], [pg("kpi_daily")])

    env.syncer.sync(catalog, definition(), [start, complete, whole])

    assert env.fake.edge_pairs() == {(fqn("orders"), fqn("kpi_daily"))}
    recorded = {(e.payload["from"]["name"], e.payload["to"]["name"]) for e in edge_entries(catalog)}
    assert recorded == {("shop.public.orders", "shop.public.kpi_daily")}

    # the server told to write edges of START events too: the START alone has no output, so
    # the joined flow is still no edge
    told = env.catalog(eventTypeFilter=["START", "COMPLETE"])
    env.syncer.sync(told, definition(), [start, complete, whole])
    assert ("shop.public.orders", "shop.public.kpi") not in {
        (e.payload["from"]["name"], e.payload["to"]["name"]) for e in edge_entries(told)
    }

    later = env.syncer.sync(catalog, definition(), [run(KEEP, [pg("orders")], [pg("kpi")])])

    assert later.report["notFound"] == {}
    assert env.fake.edge_pairs() == {(fqn("orders"), fqn("kpi"))}
