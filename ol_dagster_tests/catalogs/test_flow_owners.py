"""Who owns a flow, on every catalog kind: a job's namespace and name, matched with equality.

A snapshot's cleanup removes the flows of its namespaces' jobs and of the jobs it replaces, and
nothing else, whatever the names: case variants (``etl`` beside ``ETL``), the scope string's own
separators and escape inside names (``|``, ``#``, ``%``), SQL and glob wildcards (``_``, ``%``,
``?``, ``*``, ``[``), spaces, the two Unicode forms of one word, the longest name the receiver
takes (2,048 characters), and a job named like another's orchestration scope. Each test runs
through the sync as the assets run it (``fakes/harness.py``'s ``Syncer``) against the embedded
catalog (SQLite and PostgreSQL), Marquez's ledger (SQLite and PostgreSQL) and Blindata's fake,
whose ``scopePrefix`` is matched literally or, as a server filtering with SQL ``ILIKE`` would,
without case and with wildcards.

Also here: the scope string (injective, a namespace's prefix starts its scopes only), what each
catalog counts as held, and catalogs and ledgers made before owners were stored as parts.
"""

from __future__ import annotations

import unicodedata
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    create_engine,
    insert,
    inspect,
    select,
    text,
)

from ol_dagster.catalog.blindata.catalog import BlindataCatalog
from ol_dagster.catalog.blindata.settings import BlindataCatalogSettings
from ol_dagster.catalog.embedded import tables as t
from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.catalog.ledger.catalog import LedgerCatalog
from ol_dagster.catalog.ledger.entries import EDGE, Ledger
from ol_dagster.catalog.marquez.catalog import MarquezCatalog
from ol_dagster.catalog.marquez.settings import MarquezCatalogSettings
from ol_dagster.catalog.protocol import Catalog
from ol_dagster.lineage.graph import (
    FlowOwner,
    NodeKey,
    flow_scope,
    orchestration_scope,
    parse_scope,
    scope_prefix,
)
from ol_dagster.receiver.server import serve_in_background
from ol_dagster.settings import SyncDefinition
from ol_dagster.store import EventStore
from ol_dagster_tests.fakes.blindata_fake import BlindataFake, FakeClock
from ol_dagster_tests.fakes.faults import Clock, serve
from ol_dagster_tests.fakes.harness import (
    BUCKET,
    BUCKET_SYSTEM,
    OTHER_UUID,
    PRODUCER,
    SPEC,
    WH,
    Syncer,
    definition,
    facet,
)
from ol_dagster_tests.fakes.marquez_fake import NAMESPACE as MARQUEZ_NAMESPACE
from ol_dagster_tests.fakes.marquez_fake import MarquezFake

START = datetime(2026, 11, 1, 3, 0, tzinfo=UTC)
TENANT = "7a1e2c44-0d4b-4c4e-9a55-3f6f1b0c2d10"
KEY_ENV = "OL_TEST_BLINDATA_APIKEY"
NFC = unicodedata.normalize("NFC", "café")
NFD = unicodedata.normalize("NFD", "café")
LONGEST = 2048  # limits.maxNameLength's default: the longest name the receiver takes
# names one owner's scope used to share with, or cover, another's (LIKE, case, separators)
NAMESPACES = [
    "etl",
    "ETL",
    "Etl",
    "etl|x",
    "etl_x",
    "etlx",
    "e%l",
    "e_l",
    "etl#orchestration",
    "et?",
    "et*",
    "e[t]l",
    "etl x",
    NFC,
    NFD,
    "n" * LONGEST,
]
JOBS = [
    "x",
    "X",
    "x#orchestration",
    "x|y",
    "x%7Cy",
    "x_",
    "xa",
    "x%",
    "x?",
    "x*",
    "x[1]",
    "x y",
    NFC,
    NFD,
    "j" * LONGEST,
]


# -- events ---------------------------------------------------------------------------------------


def _ds(namespace: str, name: str, fields: list[str] | None = None, **lineage: Any) -> dict:
    facets: dict[str, Any] = {}
    if fields is not None:
        facets["schema"] = facet(
            "SchemaDatasetFacet", fields=[{"name": f, "type": "integer"} for f in fields]
        )
    if lineage:
        facets["columnLineage"] = facet(
            "ColumnLineageDatasetFacet",
            fields={
                out: {"inputFields": [{"namespace": n, "name": d, "field": f}]}
                for out, (n, d, f) in lineage.items()
            },
        )
    return {"namespace": namespace, "name": name, "facets": facets}


def run(
    namespace: str,
    name: str,
    slot: int,
    *,
    parent: NodeKey | None = None,
    bucket: list[str] | None = None,
) -> dict[str, Any]:
    """A COMPLETE run of ``namespace.name`` reading ``in_<slot>`` and writing ``out_<slot>``
    (a data flow and a field flow), linked to ``parent`` (an orchestration flow); ``bucket``:
    it writes ``kpi_<slot>`` with these fields to the CUTOFF bucket too."""
    outputs = [_ds(WH, f"shop.public.out_{slot}", ["id"], id=(WH, f"shop.public.in_{slot}", "id"))]
    if bucket is not None:
        outputs.append(_ds(BUCKET, f"kpi_{slot}", bucket))
    facets: dict[str, Any] = {}
    if parent is not None:
        facets["parent"] = facet(
            "ParentRunFacet",
            run={"runId": str(uuid.uuid4())},
            job={"namespace": parent[0], "name": parent[1]},
        )
    return {
        "eventType": "COMPLETE",
        "eventTime": "2026-11-01T02:00:00.000Z",
        "producer": PRODUCER,
        "schemaURL": f"{SPEC}#/$defs/RunEvent",
        "run": {"runId": str(uuid.uuid4()), "facets": facets},
        "job": {"namespace": namespace, "name": name},
        "inputs": [_ds(WH, f"shop.public.in_{slot}", ["id"])],
        "outputs": outputs,
    }


def replaced(namespace: str, name: str) -> dict[str, Any]:
    """A JobEvent describing ``namespace.name`` whole, now without inputs or outputs."""
    return {
        "eventTime": "2026-11-01T02:00:00.000Z",
        "producer": PRODUCER,
        "schemaURL": f"{SPEC}#/$defs/JobEvent",
        "job": {"namespace": namespace, "name": name},
        "inputs": [],
        "outputs": [],
    }


def owner_definition(name: str = "snap", **overrides: Any) -> SyncDefinition:
    """``snap``, or ``other`` beside it, without dataset Systems. The removal share is off:
    these syncs remove a large share on purpose, and what each removes is checked whole."""
    data: dict[str, Any] = {
        "name": name,
        "datasetSystems": [],
        "cleanup": {"maxRemovalShare": 1.0},
    }
    if name != "snap":
        data.update(uuid=OTHER_UUID, receiver={"token": {"env": "OL_TEST_TOKEN_ADD"}})
    return definition(**{**data, **overrides})


# -- the catalogs ---------------------------------------------------------------------------------


@dataclass
class Backend:
    """One catalog kind as these tests drive it: a catalog per definition, the sync, and the
    owners whose flows the catalog holds."""

    kind: str
    make: Callable[[str], Catalog]
    syncer: Syncer
    owners: Callable[[Catalog], set[NodeKey]]  # jobs that own at least one flow there
    namespace_ok: Callable[[str], bool] = lambda ns: True  # namespaces the server takes

    def __post_init__(self) -> None:
        self._made: dict[str, Catalog] = {}

    def catalog(self, definition_name: str = "snap") -> Catalog:
        if definition_name not in self._made:
            self._made[definition_name] = self.make(definition_name)
        return self._made[definition_name]

    def sync(self, d: SyncDefinition, events: list[dict[str, Any]]) -> dict[str, Any]:
        report = self.syncer.sync(self.catalog(d.name), d, events).report
        assert report["skippedReason"] is None, report
        return report

    def close(self) -> None:
        for c in self._made.values():
            c.close()


def _embedded_owners(catalog: Catalog) -> set[NodeKey]:
    assert isinstance(catalog, EmbeddedCatalog)
    with catalog.engine.connect() as conn:
        return {
            (ns, job)
            for table in (t.data_flows, t.field_flows)
            for ns, job in conn.execute(
                select(table.c.scope_namespace, table.c.scope_job).distinct()
            )
        }


def _ledger_owners(catalog: Catalog) -> set[NodeKey]:
    assert isinstance(catalog, LedgerCatalog)
    return {
        i.flow_owner.job_key
        for i in catalog.ledger.all(EDGE, catalog.definition_name)
        if i.flow_owner is not None
    }


def _blindata_owners(fake: BlindataFake) -> Callable[[Catalog], set[NodeKey]]:
    def owners(_: Catalog) -> set[NodeKey]:
        found = {parse_scope(s) for s in fake.flow_scopes(TENANT)}
        assert None not in found
        return {o.job_key for o in found if o is not None}

    return owners


BACKENDS = [
    "embedded-sqlite",
    pytest.param("embedded-postgresql", marks=pytest.mark.postgres),
    "marquez-sqlite",
    pytest.param("marquez-postgresql", marks=pytest.mark.postgres),
    "blindata",
    "blindata-ilike",
]


@pytest.fixture(params=BACKENDS)
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    kind, _, variant = str(request.param).partition("-")
    pg = variant == "postgresql"
    store_url = request.getfixturevalue("pg_url") if pg else f"sqlite:///{tmp_path / 'store.db'}"
    store = EventStore(store_url)
    made: Backend
    if kind == "embedded":
        catalog_url = (
            request.getfixturevalue("pg_server").fresh_database("c")
            if pg
            else f"sqlite:///{tmp_path / 'catalog.db'}"
        )
        made = Backend(
            kind,
            lambda _: EmbeddedCatalog(catalog_url),
            Syncer(store, Clock(START)),
            _embedded_owners,
        )
        yield made
    elif kind == "marquez":
        fake = MarquezFake(Clock(START))
        with serve(fake.server) as url:
            settings = MarquezCatalogSettings.model_validate(
                {"kind": "marquez", "url": url, "maxRetries": 3, "timeoutSeconds": 5}
            )
            made = Backend(
                kind,
                lambda name: MarquezCatalog("main", settings, store_url=store_url, definition=name),
                Syncer(store, fake.clock),
                _ledger_owners,
                # Marquez refuses other namespaces (its NamespaceName pattern): their events
                # never reach it, and its tests use the names it takes
                lambda ns: MARQUEZ_NAMESPACE.match(ns) is not None,
            )
            yield made
            made.close()
    else:
        monkeypatch.setenv(KEY_ENV, "bd-apikey-test")
        bd = BlindataFake(FakeClock())
        bd.add_user("ol-dagster", tenant=TENANT, api_key="bd-apikey-test")
        if variant == "ilike":
            bd.match_scope_prefixes_like_sql()
        with serve_in_background(bd.app, date_header=False) as url:  # type: ignore[arg-type]
            settings_bd = BlindataCatalogSettings.model_validate(
                {
                    "kind": "blindata",
                    "url": url,
                    "tenant": TENANT,
                    "apiKey": {"env": KEY_ENV},
                    "user": "ol-dagster",
                    "maxRetries": 3,
                    "timeoutSeconds": 5,
                }
            )
            made = Backend(
                kind,
                lambda name: BlindataCatalog("main", settings_bd, definition=name),
                Syncer(store, bd.clock),  # type: ignore[arg-type]
                _blindata_owners(bd),
            )
            yield made
            made.close()
    if kind == "embedded":
        made.close()
    store.dispose()


# -- a snapshot removes its namespaces' flows, and no one else's ----------------------------------


def test_a_snapshot_of_etl_never_removes_the_flows_of_ETL_written_by_another_definition(
    backend: Backend,
) -> None:
    """Two definitions on one catalog, ``[etl]`` and ``[ETL]``: the first one's snapshot that no
    longer describes ``etl.load`` removes its flows, and ``ETL.load``'s stay, as
    ``ol-dagster lineage`` reads them."""
    a = owner_definition("snap", allowedJobNamespaces=["etl"])
    b = owner_definition("other", allowedJobNamespaces=["ETL"])
    backend.sync(b, [run("ETL", "load", 0)])
    before = backend.catalog("other").lineage(
        "job:ETL:load", depth=1, upstream=True, downstream=True
    )
    backend.sync(a, [run("etl", "load", 1), run("etl", "keep", 2), run("etl", "keep2", 3)])
    assert ("etl", "load") in backend.owners(backend.catalog("snap"))

    report = backend.sync(a, [run("etl", "keep", 2), run("etl", "keep2", 3)])

    assert report["mode"] == "CUTOFF" and "etl.load" in report["removedJobs"]
    assert ("etl", "load") not in backend.owners(backend.catalog("snap"))
    assert ("ETL", "load") in backend.owners(backend.catalog("other"))
    after = backend.catalog("other").lineage(
        "job:ETL:load", depth=1, upstream=True, downstream=True
    )
    assert after == before and len(after["edges"]) == 2


def test_each_namespace_is_its_own_owner_whatever_its_name(backend: Backend) -> None:
    """One definition admits every namespace; each holds one job with a data, a field and an
    orchestration flow. A snapshot describing a new job of one namespace removes that
    namespace's old job's flows and leaves every other namespace's, one namespace after the
    other."""
    namespaces = [ns for ns in NAMESPACES if backend.namespace_ok(ns)]
    assert {"etl", "ETL", "etl_x"} <= set(namespaces)
    d = owner_definition(allowedJobNamespaces=["*"])
    backend.sync(d, [run(ns, "load", i, parent=(ns, "dag")) for i, ns in enumerate(namespaces)])
    held = {(ns, "load") for ns in namespaces}
    assert backend.owners(backend.catalog()) == held

    for i, ns in enumerate(namespaces):
        report = backend.sync(d, [run(ns, "fresh", 100 + i)])
        assert report["mode"] == "CUTOFF"
        held = (held - {(ns, "load")}) | {(ns, "fresh")}
        assert backend.owners(backend.catalog()) == held, f"after the snapshot of {ns!r}"


def test_a_replaced_job_loses_its_two_scopes_and_no_other_jobs(backend: Backend) -> None:
    """A JobEvent describes its job whole: its data and orchestration flows go, those of the
    job named like its orchestration scope (``x#orchestration``), of ``X``, ``x|y``, ``x_``...
    stay, one job after the other."""
    d = owner_definition(snapshotMode="ADDITIVE", allowedJobNamespaces=["etl"])
    backend.sync(d, [run("etl", job, i, parent=("etl", "dag")) for i, job in enumerate(JOBS)])
    held = {("etl", job) for job in JOBS}
    assert backend.owners(backend.catalog()) == held

    for job in JOBS:
        backend.sync(d, [replaced("etl", job)])
        held -= {("etl", job)}
        assert backend.owners(backend.catalog()) == held, f"after {job!r} was replaced"


def test_count_held_counts_the_definitions_own_flows_datasets_and_fields(
    backend: Backend,
) -> None:
    """``count_held``: flows of the jobs of the namespaces (``ETL``'s are not ``etl``'s), the
    dataset entities of the Systems and their fields, as each catalog can count them."""
    a = owner_definition(
        allowedJobNamespaces=["etl"],
        datasetSystems=[{"namespace": BUCKET, "system": BUCKET_SYSTEM, "cleanupMode": "CUTOFF"}],
    )
    b = owner_definition("other", allowedJobNamespaces=["ETL"])
    backend.sync(a, [run("etl", "load", 1, parent=("etl", "dag"), bucket=["a", "b"])])
    backend.sync(b, [run("ETL", "load", 2, parent=("ETL", "dag"))])

    held = backend.catalog().count_held(namespaces=["etl"], dataset_systems=[BUCKET_SYSTEM])
    none = backend.catalog().count_held(namespaces=["ETL_"], dataset_systems=["nope"])

    # the embedded catalog and Blindata hold the data, the field and the orchestration flow (the
    # embedded catalog counts the field flow apart, Blindata's API among its data flows); a
    # ledger records the data flows (edges) and datasets it sent, no fields
    expected = {
        "embedded": {"dataFlows": 3, "fieldFlows": 1, "datasets": 1, "fields": 2},
        "blindata": {"dataFlows": 4, "datasets": 1, "fields": 2},
        "marquez": {"dataFlows": 2, "datasets": 1, "fields": 0},
    }[backend.kind]
    assert held == expected
    assert none == {k: 0 for k in expected}


# -- the scope string -----------------------------------------------------------------------------

ADVERSARIAL = st.text(alphabet=st.sampled_from("eEtl|#%_?*[]: .7Cc\u00e9\u0301"), max_size=8)


@given(a=st.tuples(ADVERSARIAL, ADVERSARIAL), b=st.tuples(ADVERSARIAL, ADVERSARIAL))
def test_scope_strings_are_injective_and_a_namespace_prefix_starts_its_own_only(
    a: NodeKey, b: NodeKey
) -> None:
    for kind in ("data", "orchestration"):
        owner = FlowOwner(*a, kind)  # type: ignore[arg-type]
        assert parse_scope(owner.scope) == owner
    scopes_a = {flow_scope(*a), orchestration_scope(*a)}
    scopes_b = {flow_scope(*b), orchestration_scope(*b)}
    assert (a == b) == bool(scopes_a & scopes_b)
    assert len(scopes_a) == 2
    for scope in scopes_b:
        assert scope.startswith(scope_prefix(a[0])) == (a[0] == b[0])


def test_names_without_a_separator_keep_the_seeds_strings() -> None:
    assert flow_scope("etl", "build_daily_kpi") == "ol:etl|build_daily_kpi"
    assert orchestration_scope("ETL", "a b?*[1]_") == "ol:ETL|a b?*[1]_#orchestration"
    assert flow_scope("a|b", "c#orchestration") == "ol:a%7Cb|c%23orchestration"
    assert flow_scope("50%", "x") == "ol:50%25|x"


# -- catalogs and ledgers made before owners were parts -------------------------------------------


def _old_flow_tables(metadata: MetaData) -> tuple[Table, Table]:
    """``cat_data_flows`` and ``cat_field_flows`` as the earlier version created them: the scope
    string alone, bounded."""
    data = Table(
        "cat_data_flows",
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("scope", String(3000), nullable=False),
        Column("kind", String(16), nullable=False),
        Column(
            "from_entity",
            BigInteger,
            ForeignKey(t.entities.c.id, ondelete="CASCADE"),
            nullable=False,
        ),
        Column(
            "to_entity", BigInteger, ForeignKey(t.entities.c.id, ondelete="CASCADE"), nullable=False
        ),
        Column("statement_id", BigInteger),
        Column("last_update", DateTime, nullable=False),
        Column("created_by", String(36)),
        UniqueConstraint("scope", "from_entity", "to_entity", name="ux_cat_flow_identity"),
    )
    field = Table(
        "cat_field_flows",
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("scope", String(3000), nullable=False),
        Column("from_field", BigInteger, nullable=False),
        Column("to_field", BigInteger, nullable=False),
        Column("transformation", String(32)),
        Column("subtype", String(64)),
        Column("statement_id", BigInteger),
        Column("last_update", DateTime, nullable=False),
        Column("created_by", String(36)),
        UniqueConstraint("scope", "from_field", "to_field", name="ux_cat_field_flow_identity"),
    )
    return data, field


def test_a_catalog_made_before_owners_were_parts_is_migrated(catalog_url: str) -> None:
    """The earlier schema kept the scope string only, names verbatim: opening it adds the
    owner's columns, fills them from the strings (an orchestration scope's suffix is the
    kind's, a data flow's job may end in ``#orchestration``), rewrites the strings as they are
    written now, and the cleanup then matches by parts."""
    EmbeddedCatalog(catalog_url).close()  # every other table as it is
    engine = create_engine(catalog_url)
    old = MetaData()
    old_data, old_field = _old_flow_tables(old)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE cat_field_flows"))
        conn.execute(text("DROP TABLE cat_data_flows"))
        old.create_all(conn)
        if engine.dialect.name == "postgresql":  # names were bounded then
            conn.execute(
                text("ALTER TABLE cat_physical_entities ALTER COLUMN schema TYPE VARCHAR(1000)")
            )
        sid = conn.execute(
            insert(t.systems).values(name="snap_jobs", properties={}).returning(t.systems.c.id)
        ).scalar_one()
        stamp = datetime(2026, 11, 1, 2, 0)
        ids = (
            conn.execute(
                insert(t.entities).returning(t.entities.c.id),
                [
                    {
                        "system_id": sid,
                        "schema": "s",
                        "name": f"e{i}",
                        "type": "table",
                        "ol_namespace": "s",
                        "ol_name": f"e{i}",
                        "properties": {},
                        "last_update": stamp,
                    }
                    for i in range(2)
                ],
            )
            .scalars()
            .all()
        )
        old_scopes = [
            ("ol:etl|load", "data"),
            ("ol:ETL|load", "data"),
            ("ol:etl|load#orchestration", "orchestration"),
            ("ol:etl|x#orchestration", "data"),  # job x#orchestration's data flow
            ("ol:etl|a|b", "data"),  # job a|b (a namespace ended at the first |)
            ("ol:e%l|50%", "data"),
        ]
        conn.execute(
            insert(old_data),
            [
                {
                    "scope": s,
                    "kind": k,
                    "from_entity": ids[0],
                    "to_entity": ids[1],
                    "last_update": stamp,
                }
                for s, k in old_scopes
            ],
        )
        conn.execute(
            insert(old_field),
            [{"scope": "ol:etl|load", "from_field": 1, "to_field": 2, "last_update": stamp}],
        )
    engine.dispose()

    catalog = EmbeddedCatalog(catalog_url)
    try:
        with catalog.engine.connect() as conn:
            rows = set(
                conn.execute(
                    select(
                        t.data_flows.c.scope,
                        t.data_flows.c.kind,
                        t.data_flows.c.scope_namespace,
                        t.data_flows.c.scope_job,
                    )
                ).tuples()
            )
            field_rows = set(
                conn.execute(
                    select(
                        t.field_flows.c.scope,
                        t.field_flows.c.scope_namespace,
                        t.field_flows.c.scope_job,
                    )
                ).tuples()
            )
        assert rows == {
            ("ol:etl|load", "data", "etl", "load"),
            ("ol:ETL|load", "data", "ETL", "load"),
            ("ol:etl|load#orchestration", "orchestration", "etl", "load"),
            ("ol:etl|x%23orchestration", "data", "etl", "x#orchestration"),
            ("ol:etl|a%7Cb", "data", "etl", "a|b"),
            ("ol:e%25l|50%25", "data", "e%l", "50%"),
        }
        assert field_rows == {("ol:etl|load", "etl", "load")}
        if catalog.engine.dialect.name == "postgresql":  # the longest names fit now
            with catalog.engine.connect() as conn:
                types = conn.execute(
                    text(
                        "SELECT data_type FROM information_schema.columns WHERE table_name IN "
                        "('cat_physical_entities', 'cat_data_flows') AND column_name IN "
                        "('schema', 'scope', 'scope_namespace', 'scope_job')"
                    )
                ).scalars()
                assert sorted(types) == ["text"] * 4
        before = datetime(2027, 1, 1, tzinfo=UTC)
        counts = catalog.cleanup_flows(jobs=[("etl", "load")], before=before, dry_run=False)
        assert counts.total == 3  # its data, orchestration and field flows; not ETL's
        counts = catalog.cleanup_flows(namespaces=["etl"], before=before, dry_run=False)
        assert counts.total == 2
        assert _embedded_owners(catalog) == {("ETL", "load"), ("e%l", "50%")}
    finally:
        catalog.close()


def _old_ledger_items(metadata: MetaData) -> Table:
    """``ol_ledger_items`` as the earlier version created it."""
    return Table(
        "ol_ledger_items",
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("catalog", String(200), nullable=False),
        Column("definition", String(200), nullable=False),
        Column("kind", String(16), nullable=False),
        Column("identity", String(4000), nullable=False),
        Column("scope", String(3000)),
        Column("system", String(500)),
        Column("schema", String(1000)),
        Column("payload", JSON, nullable=False),
        Column("last_touched", DateTime, nullable=False),
        UniqueConstraint("catalog", "definition", "kind", "identity", name="ux_ol_ledger_identity"),
        Index("ix_ol_ledger_scope", "catalog", "definition", "kind", "scope"),
    )


def test_a_ledger_made_before_owners_were_parts_is_migrated(store_url: str) -> None:
    engine = create_engine(store_url)
    old = MetaData()
    items = _old_ledger_items(old)
    stamp = datetime(2026, 11, 1, 2, 0)
    with engine.begin() as conn:
        old.create_all(conn)
        conn.execute(
            insert(items),
            [
                {
                    "catalog": "main",
                    "definition": "snap",
                    "kind": EDGE,
                    "identity": f"{scope}|a|b",
                    "scope": scope,
                    "payload": {},
                    "last_touched": stamp,
                }
                for scope in ("ol:etl|load", "ol:ETL|load", "ol:etl|a|b", "ol:etlx|y")
            ]
            + [
                {
                    "catalog": "main",
                    "definition": "snap",
                    "kind": "job",
                    "identity": "etl|load",
                    "scope": None,
                    "payload": {"namespace": "etl", "name": "load"},
                    "last_touched": stamp,
                }
            ],
        )
    ledger = Ledger(engine, "main")
    try:
        before = datetime(2027, 1, 1, tzinfo=UTC)
        stale = ledger.stale("snap", EDGE, before=before, namespaces=["etl"])
        assert {(e.item.scope, e.item.flow_owner) for e in stale} == {
            ("ol:etl|load", FlowOwner("etl", "load")),
            ("ol:etl|a%7Cb", FlowOwner("etl", "a|b")),
        }
        assert [
            e.item.identity
            for e in ledger.stale("snap", EDGE, before=before, jobs=[("ETL", "load")])
        ] == ["ol:ETL|load|a|b"]
        assert ledger.stale("snap", EDGE, before=before, namespaces=[], jobs=[]) == []
        assert ledger.count("snap", EDGE, namespaces=["etl", "etlx"]) == 3
        with engine.connect() as conn:
            indexes = {i["name"] for i in inspect(conn).get_indexes("ol_ledger_items")}
        # keyed by the identity's digest; no index over the names themselves (``name_keys``)
        assert "ux_ol_ledger_key" in indexes
        assert not indexes & {"ix_ol_ledger_owner", "ix_ol_ledger_scope"}
    finally:
        engine.dispose()
