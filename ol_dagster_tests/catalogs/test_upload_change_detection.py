"""Change detection of the embedded catalog's uploads (issue 14, item 5): an unchanged job is
stamped, not re-sent, and the catalog ends exactly as a full re-send leaves it.

What a user sees is read straight from the catalog's tables, and what an upload sends from
database triggers: every row an upload sends is an INSERT (an upsert is one), which fires a
BEFORE INSERT trigger on SQLite and PostgreSQL alike, even when the row exists; a stamp is an
UPDATE of the last-update alone, which fires none. The reference is the same catalog with
``detect_changes=False``, which re-sends every row as every upload did before; the seed's rules
themselves are proven by the reference-model tests (``test_lineage_safety_model.py``), which run
with change detection on.

The random sequences mix unchanged snapshots, changed, added and removed jobs, a catalog that
loses rows between uploads (a cleanup's cascade, an operator's delete), cutoff cleanups, uploads
that fail half-way, renames, and field flows that share their ends. After every step, every row
of the two catalogs, by natural key, with the upload that last stamped it, must be the same, and
so must the uploads' counts.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, note
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import LargeBinary, delete, func, insert, select

from ol_dagster.catalog.embedded import tables as t
from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.catalog.embedded.confirm import seen
from ol_dagster.catalog.embedded.schema import CHANGED_TABLES, PG_FILLFACTOR, STAMPED_TABLES
from ol_dagster.catalog.embedded.tables import ORCHESTRATION
from ol_dagster.catalog.name_keys import keys_of
from ol_dagster.catalog.protocol import ObjectType, UploadResult
from ol_dagster.lineage import LineageGraph
from ol_dagster.lineage.graph import flow_scope, orchestration_scope
from ol_dagster.lineage.packed import pack
from ol_dagster.settings import SyncDefinition, parse_settings
from ol_dagster.sync.graph import lineage_digest
from ol_dagster.sync.upload import UploadOutcome, build_graph, upload_graph
from ol_dagster_tests.catalogs.test_embedded_catalog import (
    LAKE,
    WH,
    build_kpi,
    export_anomalies,
    graph_of,
    load_orders,
)
from ol_dagster_tests.conftest import settings_data

CONTENT = [t.entities, t.fields, t.routines, t.statements, t.data_flows, t.field_flows]
CONTENT_NAMES = ["entities", "fields", "routines", "statements", "dataFlows", "fieldFlows"]
URL = Callable[[], str]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def new_url(request: pytest.FixtureRequest) -> Iterator[URL]:
    """``new_url()``: the URL of a new, empty catalog database."""
    if request.param == "postgresql":
        yield request.getfixturevalue("pg_server").fresh_database
        return
    with tempfile.TemporaryDirectory(prefix="ol_changes_") as tmp:
        yield lambda: f"sqlite:///{Path(tmp) / f'{uuid.uuid4().hex}.db'}"


def definition(tmp: Path) -> SyncDefinition:
    return parse_settings(
        settings_data(
            tmp, datasetSystems=[{"namespace": LAKE, "system": "lake", "cleanupMode": "CUTOFF"}]
        )
    ).definition("snap")


# Another writer's routine without a statement, there before any upload: the ids of routines
# and of statements then differ (by one), as in a catalog with a history, so that rows counted
# by the wrong one of them (``confirm.COUNTED_BY``) are not taken for the right ones. Neither
# dumped nor touched: its System is no definition's.
ELSEWHERE = "another writer"
SEEDED_AT = datetime(2000, 1, 1)


def _seed(catalog: EmbeddedCatalog) -> None:
    with catalog.engine.begin() as conn:
        key = conn.execute(
            insert(t.systems).values(name=ELSEWHERE, properties={})
        ).inserted_primary_key
        assert key is not None
        system = key[0]
        conn.execute(
            insert(t.routines).values(
                system_id=system, schema="ops", name="no_statement", last_update=SEEDED_AT
            )
        )


class Tracked:
    """A catalog and the time of each upload it took (the catalog's own record of it)."""

    def __init__(self, url: str, *, detect_changes: bool = True) -> None:
        self.catalog = EmbeddedCatalog(url, detect_changes=detect_changes)
        _seed(self.catalog)
        self.stamps: list[datetime] = []
        self.cutoff: datetime | None = None

    def upload(self, graph: LineageGraph, d: SyncDefinition) -> UploadOutcome:
        outcome = upload_graph(self.catalog, graph, d)
        with self.catalog.engine.connect() as conn:
            self.stamps.append(conn.execute(select(t.clock.c.last_stamp)).scalar_one())
        self.cutoff = outcome.cutoff
        return outcome

    def dump(self) -> dict[str, dict[Any, Any]]:
        return dump(self.catalog, self.stamps)[0]

    def close(self) -> None:
        self.catalog.close()


def dump(
    catalog: EmbeddedCatalog, stamps: list[datetime]
) -> tuple[dict[str, dict[Any, Any]], dict[str, dict[Any, int]]]:
    """Every row of the catalog by natural key, ids resolved, each time as the index of the
    upload whose time it carries; and the ids of the content tables' rows by natural key."""
    upload_of = {stamp: i for i, stamp in enumerate(stamps)}

    def when(value: datetime | None) -> int | None:
        return None if value is None else upload_of[value]  # KeyError: no upload's time

    with catalog.engine.connect() as conn:

        def read(table: Any) -> list[dict[str, Any]]:
            """The rows, each time as every reader of the catalog takes it: its own, or the
            upload's that confirmed it (``confirm.seen``)."""
            times = [c for c in ("last_update", "fields_update") if c in table.c]
            query = select(table, *(seen(table.c[c]).label(f"seen_{c}") for c in times))
            rows = [dict(r._mapping) for r in conn.execute(query)]
            for r in rows:
                for c in times:
                    r[c] = r.pop(f"seen_{c}")
            return rows

        system = {r["id"]: r["name"] for r in read(t.systems) if r["name"] != ELSEWHERE}
        ent = {r["id"]: (system[r["system_id"]], r["schema"], r["name"]) for r in read(t.entities)}
        fld = {r["id"]: (ent[r["entity_id"]], r["name"]) for r in read(t.fields)}
        rtn = {
            r["id"]: (system[r["system_id"]], r["schema"], r["name"])
            for r in read(t.routines)
            if r["system_id"] in system
        }
        stm = {r["id"]: rtn[r["routine_id"]] for r in read(t.statements)}
        suite = {r["id"]: r["code"] for r in read(t.quality_suites)}
        flows = read(t.data_flows)
        field_flows = read(t.field_flows)
        rows: dict[str, dict[Any, Any]] = {
            "systems": {r["name"]: r["properties"] for r in read(t.systems)},
            "entities": {
                ent[r["id"]]: (
                    r["type"],
                    r["ol_namespace"],
                    r["ol_name"],
                    r["description"],
                    json.dumps(r["properties"], sort_keys=True),
                    when(r["fields_update"]),
                    when(r["last_update"]),
                )
                for r in read(t.entities)
            },
            "fields": {
                fld[r["id"]]: (
                    r["type"],
                    r["description"],
                    r["ordinal_position"],
                    when(r["last_update"]),
                )
                for r in read(t.fields)
            },
            "routines": {
                rtn[r["id"]]: (when(r["last_update"]),) for r in read(t.routines) if r["id"] in rtn
            },
            "statements": {
                rtn[r["routine_id"]]: (r["text"], r["dialect"], when(r["last_update"]))
                for r in read(t.statements)
            },
            "dataFlows": {
                (r["scope"], ent[r["from_entity"]], ent[r["to_entity"]]): (
                    r["kind"],
                    stm.get(r["statement_id"]),
                    when(r["last_update"]),
                )
                for r in flows
            },
            "fieldFlows": {
                (r["scope"], fld[r["from_field"]], fld[r["to_field"]]): (
                    r["transformation"],
                    r["subtype"],
                    stm.get(r["statement_id"]),
                    when(r["last_update"]),
                )
                for r in field_flows
            },
            "qualityChecks": {
                (suite[r["suite_id"]], r["code"]): (
                    r["enabled"],
                    r["last_success"],
                    r["last_checked"],
                    when(r["last_update"]),
                )
                for r in read(t.quality_checks)
            },
            "runMetrics": {
                ent[r["entity_id"]]: tuple(v for k, v in sorted(r.items()) if k != "entity_id")
                for r in read(t.run_metrics)
            },
        }
    ids = {
        "entities": {v: k for k, v in ent.items()},
        "fields": {v: k for k, v in fld.items()},
        "routines": {v: k for k, v in rtn.items()},
        "statements": {v: k for k, v in stm.items()},
        "dataFlows": {
            (r["scope"], ent[r["from_entity"]], ent[r["to_entity"]]): r["id"] for r in flows
        },
        "fieldFlows": {
            (r["scope"], fld[r["from_field"]], fld[r["to_field"]]): r["id"] for r in field_flows
        },
    }
    return rows, ids


def counts(
    result: UploadResult,
) -> tuple[dict[str, int], dict[str, int], list[str], dict[str, int]]:
    """Written, touched, the failed rows' types, and updated (of the touched rows, those whose
    values changed: the same whether an unchanged job is stamped or sent again)."""
    assert result.updated is not None and result.unchanged is not None
    for kind, touched in result.touched.items():
        assert result.updated.get(kind, 0) + result.unchanged.get(kind, 0) == touched, kind
    return (
        {k: v for k, v in result.written.items() if v},
        {k: v for k, v in result.touched.items() if v},
        sorted(f.object_type for f in result.failed),
        {k: v for k, v in result.updated.items() if v},
    )


def install_sent_log(catalog: EmbeddedCatalog) -> None:
    """Triggers logging every row sent to a content table, as JSON of its columns."""
    with catalog.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS test_sent (tbl TEXT, row TEXT)")
        if catalog.engine.dialect.name == "sqlite":
            for table in CONTENT:
                # JSON holds no BLOB: the names' digests (``name_keys``) are left out
                columns = ", ".join(
                    f"'{c.name}', NEW.\"{c.name}\""
                    for c in table.columns
                    if not isinstance(c.type, LargeBinary)
                )
                conn.exec_driver_sql(
                    f"CREATE TRIGGER test_sent_{table.name} BEFORE INSERT ON {table.name} "
                    f"BEGIN INSERT INTO test_sent VALUES ('{table.name}', json_object({columns})); "
                    "END"
                )
            return
        conn.exec_driver_sql(
            "CREATE OR REPLACE FUNCTION test_sent() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN INSERT INTO test_sent VALUES (TG_TABLE_NAME, to_jsonb(NEW)::text); "
            "RETURN NEW; END $$"
        )
        for table in CONTENT:
            conn.exec_driver_sql(
                f"CREATE TRIGGER test_sent_{table.name} BEFORE INSERT ON {table.name} "
                "FOR EACH ROW EXECUTE FUNCTION test_sent()"
            )


def take_sent(catalog: EmbeddedCatalog) -> list[tuple[str, dict[str, Any]]]:
    with catalog.engine.begin() as conn:
        out = [
            (tbl, json.loads(row))
            for tbl, row in conn.exec_driver_sql("SELECT tbl, row FROM test_sent").all()
        ]
        conn.exec_driver_sql("DELETE FROM test_sent")
    return out


# -- the two requirements, on a small known graph ------------------------------------------------


def shop(hour: int, kpi_sql: str = "select sum(amount) as total from shop.public.orders"):
    """load_orders (child of etl.daily), build_kpi, export_anomalies: new runs at each call."""
    kpi = build_kpi()
    kpi["job"]["facets"]["sql"]["query"] = kpi_sql
    events = [load_orders(parent=("etl", "daily")), kpi, export_anomalies()]
    for e in events:
        e["eventTime"] = e["eventTime"].replace("T02:", f"T{hour:02d}:")
    return events


def test_an_unchanged_snapshot_sends_no_row_and_stamps_every_row(new_url: URL, tmp_path) -> None:
    d = definition(tmp_path)
    fast, full = Tracked(new_url()), Tracked(new_url(), detect_changes=False)
    try:
        first = [c.upload(graph_of(shop(hour=2), d), d) for c in (fast, full)]
        install_sent_log(fast.catalog)
        rows_before, ids_before = dump(fast.catalog, fast.stamps)

        graph = graph_of(shop(hour=3), d)  # the same jobs, new runs
        second = [c.upload(graph, d) for c in (fast, full)]

        assert take_sent(fast.catalog) == []
        rows, ids = dump(fast.catalog, fast.stamps)
        written, touched, failed, updated = counts(second[0].result)
        assert failed == [] and written == {} and updated == {}  # all unchanged
        # every row counted as touched, as a re-send counts it
        assert touched == counts(first[0].result)[0]
        assert counts(second[0].result) == counts(second[1].result)
        for table in CONTENT_NAMES:
            assert ids[table] == ids_before[table], f"{table}: rows replaced"
            assert rows[table].keys() == rows_before[table].keys(), table
            for key, value in rows[table].items():
                assert value[-1] == 1, f"{table} {key}: not stamped by the second upload"
                # all else as it was; an entity's fields_update (5th), when the run carried the
                # schema, is the second upload's too
                expected = list(rows_before[table][key][:-1])
                if table == "entities" and expected[5] is not None:
                    expected[5] = 1
                assert value[:-1] == tuple(expected), f"{table} {key}: changed"
        # the rows and their times are those a full re-send leaves
        assert fast.dump() == full.dump()
    finally:
        fast.close()
        full.close()


@pytest.mark.parametrize("extra", [None, "entities", "dataFlows", "fieldFlows"])
def test_an_unchanged_snapshot_is_confirmed_whole_unless_a_row_of_its_time_is_not_its_own(
    new_url: URL, tmp_path: Path, extra: str | None
) -> None:
    """The same lineage again: the rows of the last upload are confirmed at the new upload's
    time, none written, and read as a re-send leaves them. A row of that time the upload does
    not describe keeps every row from being confirmed, stays as old as it was and goes at the
    cleanup, as after a re-send."""
    d = definition(tmp_path)
    fast, full = Tracked(new_url()), Tracked(new_url(), detect_changes=False)
    both = [fast, full]

    def stored_times() -> list[list[Any]]:
        with fast.catalog.engine.connect() as conn:
            return [
                sorted(map(str, conn.execute(select(x.c.last_update)).scalars())) for x in CONTENT
            ]

    try:
        for c in both:
            c.upload(as_synced(graph_of(shop(hour=2), d)), d)
        if extra is not None:
            key = sorted(fast.dump()[extra], key=repr)[0]
            assert gain(both, extra, key)
        before = stored_times()

        for c in both:
            c.upload(as_synced(graph_of(shop(hour=3), d)), d)

        assert confirmed_at_last(fast) is (extra is None)
        if extra is None:
            assert stored_times() == before  # no row written
        assert fast.dump() == full.dump()
        for c in both:
            cleanup(c, d)
        rows = fast.dump()
        assert rows == full.dump()
        if extra is not None:
            assert len(rows[extra]) == len(before[CONTENT_NAMES.index(extra)]) - 1  # it went
        assert all(when == 1 for table in CONTENT_NAMES for *_, when in rows[table].values())
    finally:
        fast.close()
        full.close()


def test_a_snapshot_whose_upload_failed_is_not_confirmed_over_the_last_one_that_went_through(
    new_url: URL, tmp_path: Path
) -> None:
    """The shop's three jobs are uploaded; a snapshot without export_anomalies then fails to
    upload (the catalog refuses entity writes) after its digests were kept; sent again, its
    lineage is the kept one, but the rows of the last upload's time still describe the job it
    dropped: nothing is confirmed, and the cleanup removes that job's flows, as after a
    re-send."""
    d = definition(tmp_path)
    fast, full = Tracked(new_url()), Tracked(new_url(), detect_changes=False)
    both = [fast, full]

    def fewer(hour: int) -> LineageGraph:
        return as_synced(graph_of(shop(hour)[:2], d))

    try:
        for c in both:
            c.upload(as_synced(graph_of(shop(hour=2), d)), d)
        for c in both:
            set_fault(c.catalog, t.entities.name)
            assert not c.upload(fewer(3), d).result.succeeded
            set_fault(c.catalog, None)

        for c in both:
            assert c.upload(fewer(4), d).result.succeeded

        assert not confirmed_at_last(fast)
        assert fast.dump() == full.dump()
        assert [k for k in fast.dump()["dataFlows"] if "export_anomalies" in k[0]]
        for c in both:
            cleanup(c, d)
        rows = fast.dump()
        assert rows == full.dump()
        assert not [k for k in rows["dataFlows"] if "export_anomalies" in k[0]]
    finally:
        fast.close()
        full.close()


def test_a_changed_job_alone_is_sent_again(new_url: URL, tmp_path) -> None:
    d = definition(tmp_path)
    fast, full = Tracked(new_url()), Tracked(new_url(), detect_changes=False)
    try:
        for c in (fast, full):
            c.upload(graph_of(shop(hour=2), d), d)
        install_sent_log(fast.catalog)

        graph = graph_of(shop(hour=3, kpi_sql="select sum(amount) as total from orders"), d)
        second = [c.upload(graph, d) for c in (fast, full)]

        sent = take_sent(fast.catalog)
        _, ids = dump(fast.catalog, fast.stamps)
        kpi = ("snap_jobs", "etl", "build_kpi")
        scope = flow_scope("etl", "build_kpi")
        mine = {
            # (a row is logged before it is written: a new row has no id yet)
            t.entities.name: lambda r: (r["schema"], r["name"]) == ("etl", "build_kpi"),
            t.routines.name: lambda r: (r["schema"], r["name"]) == ("etl", "build_kpi"),
            t.statements.name: lambda r: r["routine_id"] == ids["routines"][kpi],
            t.data_flows.name: lambda r: r["scope"] == scope,
            t.field_flows.name: lambda r: r["scope"] == scope,
        }
        assert sent and all(mine[tbl](row) for tbl, row in sent), sent
        by_table = {tbl: sum(1 for s, _ in sent if s == tbl) for tbl in mine}
        # all of the job: its entity, routine, statement, data flows (orders -> kpi) and field
        # flows (orders.amount -> kpi.total)
        assert by_table == {
            t.entities.name: 1,
            t.routines.name: 1,
            t.statements.name: 1,
            t.data_flows.name: 1,
            t.field_flows.name: 1,
        }
        assert counts(second[0].result) == counts(second[1].result)
        # the new SQL is the one row whose values changed; the rest of the job sent again as
        # it was (the quality check's new run time is not a change)
        assert counts(second[0].result)[3] == {ObjectType.STATEMENTS: 1}
        rows = fast.dump()
        assert rows == full.dump()
        assert rows["statements"][kpi][0] == "select sum(amount) as total from orders"
        stamped_by_second = [
            (table, key)
            for table in CONTENT_NAMES
            for key, value in rows[table].items()
            if value[-1] != 1
        ]
        assert stamped_by_second == []
    finally:
        fast.close()
        full.close()


def raw_times(c: Tracked) -> list[list[str]]:
    """Every content row's own last update, as stored (not as read), per table."""
    with c.catalog.engine.connect() as conn:
        return [sorted(map(str, conn.execute(select(x.c.last_update)).scalars())) for x in CONTENT]


def carrying(c: Tracked, stamp: datetime) -> int:
    """How many content rows carry ``stamp`` as their own last update."""
    with c.catalog.engine.connect() as conn:
        return sum(
            conn.execute(select(func.count()).where(x.c.last_update == stamp)).scalar_one()
            for x in CONTENT
        )


@pytest.mark.parametrize("case", ["drop", "drop with a schema", "lost flow", "lost field"])
def test_an_edited_snapshot_confirms_the_rows_it_did_not_change(
    new_url: URL, tmp_path: Path, case: str
) -> None:
    """A snapshot that changes build_kpi's SQL and drops export_anomalies (or drops both and
    changes load_orders' SQL): the rows the unchanged objects hold are confirmed, not written
    again; the changed job's are written; the dropped ones read as old as they were and go at
    the cleanup, as after a re-send. A row an unchanged object lost since is written again. The
    same snapshot once more is then unchanged, and confirmed whole."""
    d = definition(tmp_path)
    fast, full = Tracked(new_url()), Tracked(new_url(), detect_changes=False)
    both = [fast, full]

    def edited(hour: int) -> LineageGraph:
        if case == "drop with a schema":
            events = shop(hour)[:1]
            sql = "insert into shop.public.orders select * from shop.public.orders_raw"
            events[0]["job"]["facets"]["sql"]["query"] = sql
        else:
            events = shop(hour, kpi_sql="select sum(amount) as total from orders")[:2]
        return as_synced(graph_of(events, d))

    try:
        for c in both:
            c.upload(as_synced(graph_of(shop(hour=2), d)), d)
        rows = fast.dump()
        if case == "lost flow":
            scope = flow_scope("etl", "load_orders")
            lose(both, "dataFlows", next(k for k in sorted(rows["dataFlows"]) if k[0] == scope))
        if case == "lost field":
            lose(both, "fields", next(k for k in sorted(rows["fields"]) if "orders_raw" in str(k)))
        install_sent_log(fast.catalog)

        for c in both:
            assert c.upload(edited(3), d).result.succeeded

        assert confirmed_at_last(fast)
        assert carrying(fast, fast.stamps[-1]) == 0  # nothing stamped with the upload's time
        sent = take_sent(fast.catalog)
        unchanged = flow_scope("etl", "load_orders")
        resent = [row for _, row in sent if row.get("scope") == unchanged]
        assert bool(resent) is (case != "drop")  # load_orders is changed or lost a row
        assert fast.dump() == full.dump()
        for c in both:
            cleanup(c, d)
        rows = fast.dump()
        assert rows == full.dump()
        assert not [k for k in rows["dataFlows"] if "export_anomalies" in k[0]]
        assert all(when == 1 for table in CONTENT_NAMES for *_, when in rows[table].values())

        before = raw_times(fast)
        for c in both:
            c.upload(edited(4), d)
        assert confirmed_at_last(fast) and raw_times(fast) == before
        assert fast.dump() == full.dump()
    finally:
        fast.close()
        full.close()


# -- random sequences against a full re-send ------------------------------------------------------

DATASETS = [
    (WH, "shop.public.a"),
    (WH, "shop.public.b"),
    (WH, "shop.public.c"),
    (LAKE, "kpi/x.parquet"),
    (LAKE, "kpi/y.csv"),
]
FIELDS = ["id", "amount", "ts"]
JOBS = [("etl", "j1"), ("etl", "j2"), ("etl", "j3"), ("features", "f1")]
TRANSFORMATIONS = [None, ("DIRECT", "IDENTITY"), ("INDIRECT", "FILTER")]


@st.composite
def job_specs(draw: st.DrawFn) -> dict[str, Any]:
    """What one job's run says: its datasets, schemas, column lineage, SQL, parent, a check."""
    inputs = draw(st.lists(st.sampled_from(DATASETS), max_size=2, unique=True))
    outputs = draw(
        st.lists(st.sampled_from([x for x in DATASETS if x not in inputs]), max_size=2, unique=True)
    )
    schemas = {
        x: draw(st.none() | st.lists(st.sampled_from(FIELDS), min_size=1, max_size=3, unique=True))
        for x in inputs + outputs
    }
    sources = [(x, f) for x in inputs for f in schemas[x] or ()]
    lineage: dict[tuple, dict[str, list]] = {}
    for out in outputs:
        for f in schemas[out] or ():
            # the same input field twice, with two transformations, is one row in the catalog
            picked = draw(
                st.lists(st.tuples(st.sampled_from(sources), st.sampled_from(TRANSFORMATIONS)))
                if sources
                else st.just([])
            )
            if picked:
                lineage.setdefault(out, {})[f] = picked
    rename = draw(st.sampled_from([None, None, None, (LAKE, "kpi/y.csv")]))
    return {
        "inputs": inputs,
        "outputs": outputs,
        "schemas": schemas,
        "lineage": lineage,
        "rename": rename,
        "sql": draw(st.sampled_from([None, "select 1", "select 2"])),
        "parent": draw(st.sampled_from([None, ("etl", "dag")])),
        "check": draw(st.booleans()),
        "description": draw(st.sampled_from([None, "docs"])),
    }


def job_event(namespace: str, name: str, spec: dict[str, Any], hour: int) -> dict[str, Any]:
    def dataset(x: tuple[str, str], output: bool) -> dict[str, Any]:
        facets: dict[str, Any] = {}
        if spec["schemas"][x] is not None:
            facets["schema"] = {"fields": [{"name": f, "type": "int"} for f in spec["schemas"][x]]}
        if output and x in spec["lineage"]:
            facets["columnLineage"] = {
                "fields": {
                    f: {
                        "inputFields": [
                            {
                                "namespace": src[0][0],
                                "name": src[0][1],
                                "field": src[1],
                                **(
                                    {"transformations": [{"type": tr[0], "subtype": tr[1]}]}
                                    if tr
                                    else {}
                                ),
                            }
                            for src, tr in inputs
                        ]
                    }
                    for f, inputs in spec["lineage"][x].items()
                }
            }
        if output and spec["rename"] and x == (LAKE, "kpi/x.parquet"):
            facets["lifecycleStateChange"] = {
                "lifecycleStateChange": "RENAME",
                "previousIdentifier": {"namespace": spec["rename"][0], "name": spec["rename"][1]},
            }
        out: dict[str, Any] = {"namespace": x[0], "name": x[1], "facets": facets}
        if not output and spec["check"]:
            out["inputFacets"] = {
                "dataQualityAssertions": {
                    "assertions": [{"assertion": "not_null", "column": "id", "success": True}]
                }
            }
        return out

    job_facets: dict[str, Any] = {}
    if spec["sql"]:
        job_facets["sql"] = {"query": spec["sql"], "dialect": "postgres"}
    if spec["description"]:
        job_facets["documentation"] = {"description": spec["description"]}
    event: dict[str, Any] = {
        "eventType": "COMPLETE",
        "eventTime": f"2026-11-01T{hour % 24:02d}:00:00.000Z",
        "producer": "https://example.com/ol-dagster-tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": namespace, "name": name, "facets": job_facets},
        "inputs": [dataset(x, False) for x in spec["inputs"]],
        "outputs": [dataset(x, True) for x in spec["outputs"]],
    }
    if spec["parent"]:
        event["run"]["facets"] = {
            "parent": {
                "run": {"runId": str(uuid.uuid4())},
                "job": {"namespace": spec["parent"][0], "name": spec["parent"][1]},
            }
        }
    return event


# edits and cleanups twice as often as the other steps: an edited upload sets rows aside, and
# only a cleanup after it shows whether they read as old as they were
STEPS = [
    *["again", "again", "again"],
    *["change", "change"],
    *["lose", "gain"],
    *["cleanup", "cleanup"],
    "fault",
]
FAULT_SQLITE = (
    "CREATE TRIGGER {name} BEFORE {op} ON {table} BEGIN SELECT RAISE(ABORT, 'refused'); END"
)
FAULT_PG = [
    "CREATE OR REPLACE FUNCTION test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ "
    "BEGIN RAISE EXCEPTION 'refused'; END $$",
    "CREATE TRIGGER {name} BEFORE INSERT OR UPDATE ON {table} "
    "FOR EACH ROW EXECUTE FUNCTION test_refuse()",
]


def set_fault(catalog: EmbeddedCatalog, table: str | None) -> None:
    """The database refuses every write to ``table`` (None: lift every fault), and so every
    confirmation of its rows: taking them as written again is a write of their times."""
    sqlite = catalog.engine.dialect.name == "sqlite"
    confirmations = t.confirmations.name
    with catalog.engine.begin() as conn:
        for name in CONTENT:
            for op in ("insert", "update"):
                trigger = f"test_fault_{name.name}_{op}"
                if sqlite:
                    conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {trigger}")
                else:
                    conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {trigger} ON {name.name}")
        if sqlite:
            conn.exec_driver_sql("DROP TRIGGER IF EXISTS test_fault_confirm")
        else:
            conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS test_fault_confirm ON {confirmations}")
        if table is None:
            return
        if sqlite:
            conn.exec_driver_sql(
                f"CREATE TRIGGER test_fault_confirm BEFORE INSERT ON {confirmations} "
                f"WHEN NEW.of_table = '{table}' BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )
        else:
            conn.exec_driver_sql(FAULT_PG[0])
            conn.exec_driver_sql(
                f"CREATE TRIGGER test_fault_confirm BEFORE INSERT ON {confirmations} "
                f"FOR EACH ROW WHEN (NEW.of_table = '{table}') EXECUTE FUNCTION test_refuse()"
            )
        if sqlite:
            for op in ("insert", "update"):
                conn.exec_driver_sql(
                    FAULT_SQLITE.format(name=f"test_fault_{table}_{op}", op=op, table=table)
                )
        else:
            for sql in FAULT_PG:
                conn.exec_driver_sql(sql.format(name=f"test_fault_{table}_insert", table=table))


def lose(catalogs: list[Tracked], table: str, key: Any) -> None:
    """Both catalogs lose the row of ``key`` (and what cascades with it)."""
    target = dict(zip(CONTENT_NAMES, CONTENT, strict=True))[table]
    for c in catalogs:
        row_id = dump(c.catalog, c.stamps)[1][table][key]
        column = target.c.id
        with c.catalog.engine.begin() as conn:
            conn.execute(delete(target).where(column == row_id))


GONE = ("etl", "gone")  # a job no snapshot has: the scope of the flows a catalog gains
GONE_SCOPES = {flow_scope(*GONE), orchestration_scope(*GONE)}


def gain(catalogs: list[Tracked], table: str, key: Any) -> bool:
    """Both catalogs gain a row no upload of theirs described, with the time the row of ``key``
    carries (in each catalog, its own): an entity beside it, or a flow like it in the scope of
    a job no snapshot has. Such a row must stay as old as that time, whether the next upload
    confirms the rows of that time or stamps them, and go at the next cleanup. False for the
    other tables."""
    target = dict(zip(CONTENT_NAMES, CONTENT, strict=True)).get(table)
    if table not in ("entities", "dataFlows", "fieldFlows") or target is None:
        return False
    gained = {"entities": lambda k: (k[0], k[1], k[2] + "~")}.get(table)
    if gained is not None and gained(key) in catalogs[0].dump()[table]:
        return False  # gained beside it already (the catalogs hold the same rows)
    if gained is None and any(k[0] in GONE_SCOPES for k in catalogs[0].dump()[table]):
        return False
    for c in catalogs:
        row_id = dump(c.catalog, c.stamps)[1][table][key]
        with c.catalog.engine.begin() as conn:
            row = dict(conn.execute(select(target).where(target.c.id == row_id)).one()._mapping)
            for column in ["id", *keys_of(target)]:  # the keys: made again from the new names
                del row[column]
            if table == "entities":
                row.update(name=row["name"] + "~", ol_name=row["ol_name"] + "~")
                row.update(content_hash=None, fields_update=None)
            else:
                gone = GONE
                orchestration = row.get("kind") == ORCHESTRATION
                row["scope"] = (orchestration_scope if orchestration else flow_scope)(*gone)
                row.update(scope_namespace=gone[0], scope_job=gone[1])
            conn.execute(target.insert().values(**row))
    return True


def confirmed_at_last(c: Tracked) -> bool:
    """Whether the catalog's last upload confirmed an earlier one's rows whole."""
    with c.catalog.engine.connect() as conn:
        return bool(
            conn.execute(
                select(t.confirmations.c.stamp).where(t.confirmations.c.confirmed == c.stamps[-1])
            ).first()
        )


def as_synced(graph: LineageGraph) -> LineageGraph:
    """The graph with the name of its lineage the sync gives it, so an upload of the same
    lineage as the last one takes its kept digests and may confirm it whole."""
    graph.lineage_digest = lineage_digest(pack(graph))
    return graph


def cleanup(c: Tracked, d: SyncDefinition) -> None:
    """The cutoff cleanup of a snapshot of the definition's namespaces, with the last cutoff."""
    assert c.cutoff is not None
    catalog, before = c.catalog, c.cutoff
    namespaces = ["etl", "features"]
    catalog.cleanup_flows(namespaces=namespaces, before=before, dry_run=False)
    catalog.cleanup_job_system("snap_jobs", schemas=namespaces, before=before, dry_run=False)
    for system in (WH, "lake"):
        catalog.cleanup_dataset_system(system, before=before, dry_run=False)


def _examples(divisor: int) -> int:
    return max(5, (hypothesis_settings.default.max_examples or 100) // divisor)


@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "backend, examples",
    [
        ("sqlite", _examples(5)),
        pytest.param("postgresql", _examples(20), marks=pytest.mark.postgres),
    ],
)
def test_random_sequences_end_as_a_full_resend_leaves_them(
    backend: str, examples: int, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    d = definition(tmp_path)
    server = request.getfixturevalue("pg_server") if backend == "postgresql" else None

    def url() -> str:
        if server is not None:
            return server.fresh_database()
        return f"sqlite:///{tmp_path / f'{uuid.uuid4().hex}.db'}"

    @hypothesis_settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def sequence(data: st.DataObject) -> None:
        fast, full = Tracked(url()), Tracked(url(), detect_changes=False)
        both = [fast, full]
        for c in both:
            install_sent_log(c.catalog)
        try:
            world: dict[tuple[str, str], dict[str, Any]] = {
                j: data.draw(job_specs(), label=f"{j}")
                for j in data.draw(st.lists(st.sampled_from(JOBS), min_size=1, unique=True))
            }
            hour = 0
            fault: str | None = None
            last_ok = False
            for step in ["again"] + data.draw(st.lists(st.sampled_from(STEPS), max_size=10)):
                if step == "change":
                    j = data.draw(st.sampled_from(JOBS), label="job")
                    if j in world and data.draw(st.booleans(), label="remove"):
                        del world[j]
                    else:
                        world[j] = data.draw(job_specs(), label=f"{j}")
                    step = "again"
                if step == "lose":
                    rows = fast.dump()
                    table = data.draw(st.sampled_from(CONTENT_NAMES), label="table")
                    if rows[table]:
                        key = data.draw(st.sampled_from(sorted(rows[table], key=repr)), label="row")
                        note(f"both catalogs lose {table} {key}")
                        lose(both, table, key)
                    continue
                if step == "gain":
                    rows = fast.dump()
                    table = data.draw(st.sampled_from(CONTENT_NAMES), label="table")
                    if rows[table]:
                        key = data.draw(st.sampled_from(sorted(rows[table], key=repr)), label="row")
                        if gain(both, table, key):
                            note(f"both catalogs gain a row beside {table} {key}")
                    continue
                if step == "cleanup":
                    if last_ok:
                        note("cleanup")
                        for c in both:
                            cleanup(c, d)
                    continue
                if step == "fault":
                    fault = data.draw(st.sampled_from([x.name for x in CONTENT]), label="fault")
                    note(f"the catalogs refuse writes to {fault}")
                    for c in both:
                        set_fault(c.catalog, fault)
                hour += 1
                events = [job_event(ns, name, spec, hour) for (ns, name), spec in world.items()]
                graph = as_synced(build_graph([json.dumps(e).encode() for e in events], d))
                note(f"upload {len(fast.stamps)}: {sorted(world)}")
                outcomes = [c.upload(graph, d) for c in both]
                if fault is not None:
                    for c in both:
                        set_fault(c.catalog, None)
                    fault = None
                assert counts(outcomes[0].result) == counts(outcomes[1].result)
                sent = [len(take_sent(c.catalog)) for c in both]
                event("rows re-sent: " + ("fewer" if sent[0] < sent[1] else "all"))
                event("confirmed whole" if confirmed_at_last(fast) else "not confirmed")
                last_ok = outcomes[0].result.succeeded
                assert fast.dump() == full.dump()
            assert fast.dump() == full.dump()
        finally:
            fast.close()
            full.close()

    sequence()


# -- an earlier catalog -----------------------------------------------------------------------


def test_a_catalog_without_digests_is_sent_once_then_stamped(new_url: URL, tmp_path) -> None:
    """A catalog written by an earlier version has no digest column and no clock row: opened,
    it gains them; its first upload re-sends every row (no digest to compare), the next one
    only stamps."""
    d = definition(tmp_path)
    url = new_url()
    old = EmbeddedCatalog(url, detect_changes=False)
    old.upload(graph_of(shop(hour=2), d), d)
    with old.engine.begin() as conn:
        conn.exec_driver_sql(f"ALTER TABLE {t.entities.name} DROP COLUMN content_hash")
        conn.exec_driver_sql(f"DROP TABLE {t.clock.name}")
        for table in CHANGED_TABLES:
            conn.exec_driver_sql(f"ALTER TABLE {table.name} DROP COLUMN changed_by")
    old.close()

    catalog = EmbeddedCatalog(url)
    try:
        install_sent_log(catalog)
        first = catalog.upload(graph_of(shop(hour=3), d), d)
        assert first.succeeded and take_sent(catalog), "the first upload re-sends everything"
        second = catalog.upload(graph_of(shop(hour=4), d), d)
        assert second.succeeded and take_sent(catalog) == []
        # neither writes a new row; both touch every row
        assert counts(first)[0] == counts(second)[0] == {}
        assert counts(second)[1] == counts(first)[1]
    finally:
        catalog.close()


def test_the_upload_time_is_never_an_earlier_uploads(new_url: URL, tmp_path, monkeypatch) -> None:
    """Two uploads in one tick of the database clock (SQLite counts milliseconds), or with the
    clock set back, still get distinct times: the later one just after the earlier one's, never
    before the clock, so never before a cutoff read from it."""
    d = definition(tmp_path)
    catalog = Tracked(new_url())
    try:
        catalog.upload(graph_of(shop(hour=2), d), d)
        first = catalog.stamps[-1]
        real_clock = EmbeddedCatalog.clock
        monkeypatch.setattr(
            EmbeddedCatalog, "clock", lambda self: real_clock(self) - timedelta(hours=1)
        )
        outcome = catalog.upload(graph_of(shop(hour=3), d), d)
        assert outcome.result.succeeded
        assert catalog.stamps[-1] == first + timedelta(microseconds=1)
        assert catalog.stamps[-1] >= outcome.cutoff.replace(tzinfo=None)
        rows = catalog.dump()
        assert all(v[-1] == 1 for table in CONTENT_NAMES for v in rows[table].values())
    finally:
        catalog.close()


@pytest.mark.postgres
def test_postgresql_pages_keep_room_for_the_stamps(pg_url: str) -> None:
    """Every upload updates every row it describes; on PostgreSQL the tables leave half of each
    page free, so that the new version stays on its page (no new index entry per stamp). A
    catalog created before gets the setting when opened."""
    earlier = EmbeddedCatalog(pg_url)
    with earlier.engine.begin() as conn:
        for table in STAMPED_TABLES:
            conn.exec_driver_sql(f"ALTER TABLE {table.name} RESET (fillfactor)")
    earlier.close()

    reopened = EmbeddedCatalog(pg_url)
    try:
        with reopened.engine.connect() as conn:
            options = {
                name: opts
                for name, opts in conn.exec_driver_sql(
                    "SELECT relname, reloptions FROM pg_class WHERE relkind = 'r'"
                )
            }
        for table in STAMPED_TABLES:
            assert options[table.name] == [f"fillfactor={PG_FILLFACTOR}"], table.name
    finally:
        reopened.close()
