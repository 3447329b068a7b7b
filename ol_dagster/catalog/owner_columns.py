"""Flow owners stored as parts, in databases an earlier version made.

The embedded catalog's flow tables and the sync ledger keep each flow's owner as its job's
namespace and name (columns ``scope_namespace`` and ``scope_job``), which every cleanup matches
with equality. A database made before has only the scope string, written with the names verbatim:
``add_owner_columns`` adds the two columns, fills them by parsing those strings
(``parse_legacy_scope``) and rewrites each string as ``FlowOwner.scope`` writes it now (unchanged
for names without ``%``, ``|`` or ``#``), so the next upload of the same flow finds its row.

Name columns were ``VARCHAR(n)`` before; PostgreSQL enforces the length, so ``widen`` makes them
``TEXT`` there (SQLite ignores the length).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import (
    Column,
    Connection,
    String,
    Table,
    and_,
    bindparam,
    inspect,
    select,
    text,
    update,
)

from ol_dagster.lineage.graph import DATA_SCOPE, FlowOwner, parse_legacy_scope

OWNER_COLUMNS = ("scope_namespace", "scope_job")
_MOVING = "~"  # a scope string never starts so: where a rewritten row waits for its new string


def widen(conn: Connection, tables: Sequence[Table]) -> None:
    """Every string column of ``tables`` whose model is unbounded (``Text``) but which the
    database holds as ``VARCHAR(n)`` becomes ``TEXT`` (PostgreSQL only; no table rewrite)."""
    if conn.dialect.name != "postgresql":
        return
    wanted = {
        (table.name, column.name)
        for table in tables
        for column in table.columns
        if isinstance(column.type, String) and column.type.length is None
    }
    found = conn.execute(
        text(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND data_type = 'character varying' "
            "AND character_maximum_length IS NOT NULL"
        )
    ).all()
    for table_name, column_name in sorted({(r[0], r[1]) for r in found} & wanted):
        conn.exec_driver_sql(f'ALTER TABLE {table_name} ALTER COLUMN "{column_name}" TYPE TEXT')


def add_owner_columns(
    conn: Connection, table: Table, keys: Sequence[Column], kind: Column | None = None
) -> bool:
    """Add and fill the owner columns of ``table`` if it lacks them; True if it did.

    ``keys`` are the columns, ``scope`` last, whose values select the rows of one scope through
    an index (the rows are updated one scope at a time); ``kind`` is the flow's scope kind
    (``data``/``orchestration``), where the table has one, else every row is a data scope."""
    present = {c["name"] for c in inspect(conn).get_columns(table.name)}
    missing = [name for name in OWNER_COLUMNS if name not in present]
    if not missing:
        return False
    for name in missing:
        conn.exec_driver_sql(f"ALTER TABLE {table.name} ADD COLUMN {name} TEXT")
    selected = [*keys, *([kind] if kind is not None else [])]
    scope = keys[-1]
    rows = conn.execute(select(*selected).where(scope.is_not(None)).distinct()).all()
    same: list[dict[str, str]] = []
    moved: list[dict[str, str]] = []
    for row in rows:
        values = {c.name: row[i] for i, c in enumerate(selected)}
        scope_kind = values[kind.name] if kind is not None else DATA_SCOPE
        owner = parse_legacy_scope(values[scope.name], scope_kind)
        if owner is None:
            continue  # not an OpenLineage scope: no owner, no cleanup matches it
        (same if owner.scope == values[scope.name] else moved).append(_params(values, owner))
    match = and_(*(c == bindparam(f"k_{c.name}") for c in selected))
    owner_values = {
        "scope_namespace": bindparam("v_namespace"),
        "scope_job": bindparam("v_job"),
    }
    if same:
        conn.execute(update(table).where(match).values(owner_values), same)
    if moved:
        # in two passes: a rewritten string may be another row's old string (a job named
        # ``b%7Cc`` beside a namespace ``a|b``), so every row to rewrite leaves its old one first
        aside = [{**p, "v_aside": _MOVING + p[f"k_{scope.name}"]} for p in moved]
        conn.execute(update(table).where(match).values({scope.name: bindparam("v_aside")}), aside)
        back = [{**p, f"k_{scope.name}": p["v_aside"]} for p in aside]
        conn.execute(
            update(table).where(match).values({scope.name: bindparam("v_scope"), **owner_values}),
            back,
        )
    return True


def _params(values: dict[str, str], owner: FlowOwner) -> dict[str, str]:
    return {
        **{f"k_{name}": value for name, value in values.items()},
        "v_namespace": owner.namespace,
        "v_job": owner.job,
        "v_scope": owner.scope,
    }
