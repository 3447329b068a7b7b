"""Stores and catalogs made by an earlier version take the longest values too, once opened.

PostgreSQL enforces a ``VARCHAR(n)``'s length and refuses a btree index entry over 2,704 bytes:
the event store's ``run_id`` (VARCHAR(200), btree) becomes TEXT with a hash index (version 13),
and the embedded catalog's free-text columns (a field's type, a statement's dialect, a column
lineage's transformation, a quality assertion) become TEXT when it is opened.
"""

from __future__ import annotations

import random
import string

from sqlalchemy import inspect

from ol_dagster.catalog.embedded import tables as t
from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.receiver.intake import sort_events
from ol_dagster.store import EventStore, schema
from ol_dagster_tests.conftest import run_event

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
        assert upgraded.schema_version == schema.SCHEMA_VERSION == 13
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
