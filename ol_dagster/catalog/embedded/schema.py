"""Opening the embedded catalog's database: its tables, what earlier versions lack, its storage.

Catalogs opened at once on an empty PostgreSQL database (runs, a sensor, the webserver) would
race on CREATE TABLE and on the first user, so it all happens in one transaction under an
advisory lock. A catalog created by an earlier version gains the columns and indexes added since
(the flows' owners as parts, filled from their scope strings: ``catalog.owner_columns``; which
upload last changed each row, ``changed_by``, unknown for the rows written before), its name
columns become unbounded on PostgreSQL, its unique keys over names become keys over their digests
(``catalog.name_keys``), and it loses the indexes no query needs any more.
"""

from __future__ import annotations

from sqlalchemy import Connection, Engine, inspect

from ol_dagster.catalog import name_keys, owner_columns
from ol_dagster.catalog.embedded import clock, permissions
from ol_dagster.catalog.embedded.bulk import Bulk
from ol_dagster.catalog.embedded.tables import (
    RETIRED_CONSTRAINTS,
    data_flows,
    entities,
    field_flows,
    fields,
    metadata,
    quality_checks,
    routines,
    run_metrics,
    statements,
)
from ol_dagster.db import create_missing_indexes, lock_schema

# PostgreSQL tables whose rows every upload updates, and the share of each page filled by inserts
STAMPED_TABLES = (
    entities,
    fields,
    routines,
    statements,
    data_flows,
    field_flows,
    quality_checks,
    run_metrics,
)
PG_FILLFACTOR = 50
# tables whose rows say which upload last changed them (``changed_by``, added in a later version)
CHANGED_TABLES = (entities, fields, routines, statements, data_flows, field_flows, quality_checks)
# Indexes earlier versions created that no query needs: each costs every upload a btree insert
# per row (the scope ones repeat the leading column of the flows' unique keys); and btree indexes
# over names, which PostgreSQL refuses long entries in (replaced: ``tables``).
RETIRED_INDEXES = (
    "ix_cat_flows_scope",
    "ix_cat_field_flows_scope",
    "ix_cat_entities_system_type",
    "ix_cat_entities_ol",
)
_SCHEMA_LOCK = 0x6F6C5F636174616C  # "ol_catal": the advisory lock of this schema's changes


def prepare(engine: Engine, bulk: Bulk, user: str) -> None:
    """Create or bring up to date the catalog's tables, its clock row and its first user."""
    with engine.begin() as conn:
        lock_schema(conn, _SCHEMA_LOCK)
        metadata.create_all(conn)
        # a catalog created by an earlier version gains the columns and indexes added since
        inspector = inspect(conn)
        present = {c["name"] for c in inspector.get_columns(entities.name)}
        for column, ddl in (("analysis", "JSON"), ("content_hash", "VARCHAR(32)")):
            if column not in present:
                conn.exec_driver_sql(f"ALTER TABLE {entities.name} ADD COLUMN {column} {ddl}")
        for table in CHANGED_TABLES:
            if "changed_by" not in {c["name"] for c in inspector.get_columns(table.name)}:
                conn.exec_driver_sql(f"ALTER TABLE {table.name} ADD COLUMN changed_by VARCHAR(36)")
        owner_columns.widen(conn, metadata.sorted_tables)
        owner_columns.add_owner_columns(conn, data_flows, [data_flows.c.scope], data_flows.c.kind)
        owner_columns.add_owner_columns(conn, field_flows, [field_flows.c.scope])
        # after the owners' migration, which rewrites scope strings
        name_keys.add_keys(conn, metadata.sorted_tables)
        name_keys.drop_constraints(conn, RETIRED_CONSTRAINTS)
        create_missing_indexes(conn, metadata.sorted_tables)
        for name in RETIRED_INDEXES:
            conn.exec_driver_sql(f"DROP INDEX IF EXISTS {name}")
        if bulk.pg:
            set_fillfactor(conn)
        clock.ensure_row(conn, bulk)
        permissions.admit_first_user(conn, user)


def set_fillfactor(conn: Connection) -> None:
    """Leave half of each new page of the stamped tables free (PostgreSQL).

    Every upload updates every row it describes (a stamp, or an upsert of run results). On a
    full page the new row version goes to another page and every index of the table gets an
    entry for it: at 10,000 jobs an unchanged snapshot took ~6 s, then ~10 s as the indexes
    grew, the catalog 285 then 450 MB after seven snapshots. With room on the page the
    update is heap-only (no index entry; the previous version is pruned when the page is
    next updated): ~1.7 s every time, 155 MB (``benchmarks/upload.py``). A catalog created
    before gets it for the pages written from now on (``VACUUM FULL`` rewrites the others)."""
    names = [t.name for t in STAMPED_TABLES]
    found = conn.exec_driver_sql(
        "SELECT relname, reloptions FROM pg_class "
        "WHERE oid = ANY(ARRAY[" + ", ".join(["%s::regclass"] * len(names)) + "])",
        tuple(names),
    ).all()
    wanted = f"fillfactor={PG_FILLFACTOR}"
    for name, options in found:
        if wanted not in (options or []):
            conn.exec_driver_sql(f"ALTER TABLE {name} SET (fillfactor = {PG_FILLFACTOR})")
