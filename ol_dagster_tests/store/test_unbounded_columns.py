"""Stores and catalogs made by an earlier version take the longest values too, once opened.

PostgreSQL enforces a ``VARCHAR(n)``'s length and refuses a btree index entry over 2,704 bytes:
the event store's ``run_id`` (VARCHAR(200), btree) becomes TEXT with a hash index (version 13),
and the embedded catalog's free-text columns (a field's type, a statement's dialect, a column
lineage's transformation, a quality assertion) become TEXT when it is opened; its unique keys over
names become keys over their digest (``catalog.name_keys``), the digests of the rows it holds
computed by the database as an upload computes them.
"""

from __future__ import annotations

import random
import string
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine, create_engine, inspect, select

from ol_dagster.catalog.embedded import tables as t
from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.catalog.ledger.entries import DATASET, Ledger, LedgerItem
from ol_dagster.catalog.name_keys import keys_of, name_key
from ol_dagster.receiver.intake import sort_events
from ol_dagster.settings import parse_settings
from ol_dagster.store import EventStore, schema
from ol_dagster_tests.catalogs.test_embedded_catalog import (
    WH,
    ds,
    graph_of,
    job,
    shop_events,
    touched,
    written,
)
from ol_dagster_tests.conftest import run_event, settings_data

# the columns of the embedded catalog that an earlier version made VARCHAR(n)
OLD_CATALOG_COLUMNS = {
    (t.fields.name, "type"): 500,
    (t.statements.name, "dialect"): 100,
    (t.field_flows.name, "transformation"): 32,
    (t.field_flows.name, "subtype"): 64,
    (t.quality_checks.name, "assertion"): 1000,
}


def _random_text(length: int, seed: int) -> str:
    """Characters that do not compress: what a btree entry would hold in full."""
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(length))


def _turn_back_to_version_12(store: EventStore) -> None:
    """The store as version 12 made it: ``run_id`` VARCHAR(200) with a btree index."""
    with store.engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql("DROP INDEX ix_ol_events_run")
            conn.exec_driver_sql("ALTER TABLE ol_events ALTER COLUMN run_id TYPE VARCHAR(200)")
            conn.exec_driver_sql("CREATE INDEX ix_ol_events_run ON ol_events (run_id)")
        conn.execute(
            schema.meta.update().where(schema.meta.c.key == "schema_version").values(value="12")
        )


def test_a_version_12_store_takes_run_ids_of_any_length(store_url: str) -> None:
    store = EventStore(store_url)
    short = sort_events([run_event(run_id="r-1")], ["*"]).accepted
    first = store.add_posted_batch("snap", short, received=1)
    _turn_back_to_version_12(store)
    store.dispose()

    upgraded = EventStore(store_url)
    try:
        assert upgraded.schema_version == schema.SCHEMA_VERSION >= 13
        with upgraded.engine.connect() as conn:
            run_id = next(
                c for c in inspect(conn).get_columns("ol_events") if c["name"] == "run_id"
            )
            assert getattr(run_id["type"], "length", None) is None
            if conn.dialect.name == "postgresql":
                method = conn.exec_driver_sql(
                    "SELECT am.amname FROM pg_class c JOIN pg_am am ON am.oid = c.relam "
                    "WHERE c.relname = 'ix_ol_events_run'"
                ).scalar_one()
                assert method == "hash"
        longest = _random_text(2048, seed=1)
        intake = sort_events([run_event(run_id=longest)], ["*"])
        assert intake.rejected == []
        second = upgraded.add_posted_batch("snap", intake.accepted, received=1)
        assert [e.run_id for e in upgraded.iter_events(first)] == ["r-1"]
        assert [e.run_id for e in upgraded.iter_events(second)] == [longest]
        # the index still finds a run's earlier parts
        later = upgraded.add_posted_batch("snap", intake.accepted, received=1)
        runs = upgraded.runs_of(later)
        assert len(upgraded.earlier_run_digests("snap", runs, before_batch=later)) == 1
    finally:
        upgraded.dispose()


def test_a_catalog_made_with_bounded_columns_takes_long_texts(catalog_url: str) -> None:
    catalog = EmbeddedCatalog(catalog_url)
    pg = catalog.engine.dialect.name == "postgresql"
    if pg:
        with catalog.engine.begin() as conn:
            for (table, column), length in OLD_CATALOG_COLUMNS.items():
                conn.exec_driver_sql(
                    f'ALTER TABLE {table} ALTER COLUMN "{column}" TYPE VARCHAR({length})'
                )
    catalog.close()

    reopened = EmbeddedCatalog(catalog_url)
    try:
        with reopened.engine.connect() as conn:
            inspector = inspect(conn)
            for table, column in OLD_CATALOG_COLUMNS:
                found = next(c for c in inspector.get_columns(table) if c["name"] == column)
                assert getattr(found["type"], "length", None) is None, (table, column)
    finally:
        reopened.close()


# the earlier catalog's unique keys over the names themselves, and its btree indexes over names
OLD_NAME_KEYS = {
    "cat_systems_name_key": (t.systems, "name"),
    "ux_cat_entity_identity": (t.entities, "system_id, schema, name"),
    "ux_cat_field_identity": (t.fields, "entity_id, name"),
    "ux_cat_routine_identity": (t.routines, "system_id, schema, name"),
    "ux_cat_flow_identity": (t.data_flows, "scope, from_entity, to_entity"),
    "ux_cat_field_flow_identity": (t.field_flows, "scope, from_field, to_field"),
    "cat_quality_suites_code_key": (t.quality_suites, "code"),
    "ux_cat_quality_check_identity": (t.quality_checks, "suite_id, code"),
}
OLD_NAME_INDEXES = {
    "ix_cat_entities_system_type": (t.entities, "system_id, type, schema"),
    "ix_cat_entities_ol": (t.entities, "ol_namespace, ol_name"),
}
NEW_NAME_INDEXES = ("ix_cat_entities_system_kind", "ix_cat_entities_ol_name")


def _turn_back_to_keys_over_names(engine: Engine) -> None:
    """The catalog as the earlier version made it: no key columns, unique keys over the names
    (constraints on PostgreSQL; on SQLite, where a constraint cannot be added to a table, the
    same unique indexes)."""
    pg = engine.dialect.name == "postgresql"
    with engine.begin() as conn:
        for table in t.metadata.sorted_tables:
            for index in table.indexes:
                if index.unique or index.name in NEW_NAME_INDEXES:
                    conn.exec_driver_sql(f"DROP INDEX {index.name}")
            for key in keys_of(table):
                conn.exec_driver_sql(f"ALTER TABLE {table.name} DROP COLUMN {key}")
        for name, (table, columns) in OLD_NAME_KEYS.items():
            quoted = ", ".join(f'"{c}"' for c in columns.split(", "))
            if pg:
                conn.exec_driver_sql(
                    f'ALTER TABLE {table.name} ADD CONSTRAINT "{name}" UNIQUE ({quoted})'
                )
            else:
                conn.exec_driver_sql(f"CREATE UNIQUE INDEX {name} ON {table.name} ({quoted})")
        for name, (table, columns) in OLD_NAME_INDEXES.items():
            quoted = ", ".join(f'"{c}"' for c in columns.split(", "))
            conn.exec_driver_sql(f"CREATE INDEX {name} ON {table.name} ({quoted})")


def _multibyte(length: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(chr(rng.randrange(0x4E00, 0x9FA0)) for _ in range(length))


def test_a_catalog_keyed_by_names_is_keyed_by_their_digests_once_opened(
    catalog_url: str, tmp_path: Path
) -> None:
    """Opened, a catalog of the earlier schema gains its key columns, filled with the digests
    an upload computes (the same graph uploaded again finds every row: nothing written, all
    touched), loses its keys over the names (PostgreSQL), and takes names of any size."""
    d = parse_settings(settings_data(tmp_path)).definition("snap")
    catalog = EmbeddedCatalog(catalog_url)
    first = catalog.upload(graph_of(shop_events(), d), d)
    assert first.succeeded
    _turn_back_to_keys_over_names(catalog.engine)
    catalog.close()

    reopened = EmbeddedCatalog(catalog_url)
    try:
        with reopened.engine.connect() as conn:
            for table in t.metadata.sorted_tables:
                for key, parts in keys_of(table).items():
                    found = conn.execute(select(table.c[key], *(table.c[p] for p in parts)))
                    assert all(bytes(k) == name_key(*names) for k, *names in found), table.name
            if conn.dialect.name == "postgresql":
                left = conn.exec_driver_sql(
                    "SELECT conname FROM pg_constraint UNION SELECT indexname FROM pg_indexes"
                ).scalars()
                assert not set(left) & {*OLD_NAME_KEYS, *OLD_NAME_INDEXES}
        again = reopened.upload(graph_of(shop_events(), d), d)
        assert again.succeeded and written(again) == {}
        assert touched(again) == touched(first) | written(first)

        # 2,048 characters of three bytes each, in a job, a dataset and a field name
        job_name, dataset, field = (_multibyte(2_048, seed) for seed in range(3))
        events = [job("etl", job_name, [], [ds(WH, dataset, [field], checks=[("ok", field)])])]
        long = reopened.upload(graph_of(events, d), d)
        assert long.failed == [] and written(long)
    finally:
        reopened.close()


def test_the_ledger_takes_identities_and_systems_of_any_size(store_url: str) -> None:
    """The sync ledger (in the store's database) keys an identity and a System's name by their
    digest too: 2,048 characters of three bytes each are touched, found and counted once."""
    engine = create_engine(store_url)
    try:
        ledger = Ledger(engine, "main")
        system, identity, other = (_multibyte(2_048, seed) for seed in range(3))
        now = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
        items = [LedgerItem(DATASET, i, system=system) for i in (identity, other)]
        for _ in range(2):  # the second time updates the same entries
            assert ledger.touch("snap", items, now) == 2
            ledger.ensure_systems({system: {"kind": "lake"}})
        found = ledger.entries("snap", DATASET, [(identity, system)])
        assert [e.item.identity for e in found] == [identity]
        assert ledger.count("snap", DATASET, system=system) == 2
        assert [s["name"] for s in ledger.systems()] == [system]
    finally:
        engine.dispose()
