"""Unique keys over names of any size: a digest of the names, and the names compared as well.

Names are accepted up to ``limits.maxNameLength`` characters (2,048 by default, up to ~8 KB in
UTF-8), but PostgreSQL's btree refuses an index entry over ~2,704 bytes ("index row size ...
exceeds btree version 4 maximum"): a unique key over the names themselves refused every object
whose names do not compress below that. Each such key of the catalogs' tables is over a key
column instead: SHA-256 of the names (each one's length in UTF-8, then its bytes, so no two
tuples share an encoding), 32 bytes whatever the names. An upsert conflicts on it; every lookup
asks for the digest (what the index finds) and for the names themselves with equality (case and
every character count), so a digest only ever narrows a search, never decides a match.

A table declares its key columns with ``key_column``; SQLAlchemy fills them on a Core insert, the
bulk upserts with ``with_keys``. ``add_keys`` brings a table an earlier version made up to date:
the columns added and filled in SQL (PostgreSQL's ``sha256``, or this module's function registered
on a SQLite connection), before the unique indexes are created over them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from hashlib import sha256 as _sha256
from typing import Any

from sqlalchemy import Column, ColumnElement, Connection, LargeBinary, Table, and_, inspect

KEY_OF = "name_key_of"  # a key column's ``info``: the columns it is the digest of
_SQLITE_FUNCTION = "ol_name_key"


def name_key(*parts: str) -> bytes:
    """SHA-256 of ``parts``, each as its UTF-8 length (8 bytes, big-endian) and its bytes."""
    if len(parts) == 1:  # most keys: a field's, a flow's scope, a System's (a third faster)
        data = parts[0].encode("utf-8", "surrogatepass")
        return _sha256(len(data).to_bytes(8, "big") + data).digest()
    framed = []
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        framed += (len(data).to_bytes(8, "big"), data)
    return _sha256(b"".join(framed)).digest()


def key_column(name: str, *parts: str) -> Column:
    """A key column holding ``name_key`` of the columns ``parts``, in that order; a Core insert
    that does not give it gets it from the row's parts."""

    def default(context: Any) -> bytes:
        params = context.get_current_parameters()
        return name_key(*(params[p] for p in parts))

    return Column(name, LargeBinary, nullable=False, default=default, info={KEY_OF: parts})


def keys_of(table: Table) -> dict[str, tuple[str, ...]]:
    """The table's key columns, each with the columns it is the digest of."""
    return {c.name: c.info[KEY_OF] for c in table.columns if KEY_OF in c.info}


def conflict_target(table: Table, natural: Sequence[str]) -> list[str]:
    """The columns of the unique index standing for the natural key ``natural``: each group of
    names a key column digests is replaced by that column (where its first name was)."""
    out = list(natural)
    for key, parts in keys_of(table).items():
        if set(parts) <= set(out):
            at = min(out.index(p) for p in parts)
            out = [c for c in out if c not in parts]
            out.insert(at, key)
    return out


def with_keys(table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Give each row the key columns it lacks and has the parts of (rows share their columns)."""
    if not rows:
        return
    first = rows[0]
    for key, parts in keys_of(table).items():
        if key in first or parts[0] not in first:
            continue
        if len(parts) == 1:
            (part,) = parts
            for row in rows:
                row[key] = name_key(row[part])
        else:
            for row in rows:
                row[key] = name_key(*(row[p] for p in parts))


def is_(table: Table, key: str, *values: str) -> ColumnElement[bool]:
    """The row whose names ``key`` digests are ``values``: the digest and each name equal."""
    parts = keys_of(table)[key]
    names = (table.c[p] == v for p, v in zip(parts, values, strict=True))
    return and_(table.c[key] == name_key(*values), *names)


def among(table: Table, key: str, values: Sequence[str]) -> ColumnElement[bool]:
    """Rows whose single name (the one ``key`` digests) is one of ``values``, with equality."""
    (part,) = keys_of(table)[key]
    return and_(table.c[key].in_([name_key(v) for v in values]), table.c[part].in_(values))


def _sql_key(conn: Connection, parts: Sequence[str]) -> str:
    """``name_key`` of the columns ``parts``, computed by the database."""
    quote = conn.dialect.identifier_preparer.quote
    if conn.dialect.name != "postgresql":
        return f"{_SQLITE_FUNCTION}({', '.join(quote(p) for p in parts)})"
    encoded = [f"convert_to({quote(p)}, 'UTF8')" for p in parts]
    framed = [f"int8send(octet_length({e})::bigint) || {e}" for e in encoded]
    return f"sha256({' || '.join(framed)})"


def add_keys(conn: Connection, tables: Iterable[Table]) -> list[str]:
    """Add and fill the key columns ``tables`` lack (made by an earlier version); returns them
    as ``table.column``. The unique indexes over them are the caller's to create afterwards."""
    keyed = {table.name: keys_of(table) for table in tables if keys_of(table)}
    # one query on PostgreSQL, whatever the number of tables: this runs at every opening
    found = inspect(conn).get_multi_columns(filter_names=list(keyed))
    present = {(table, c["name"]) for (_, table), columns in found.items() for c in columns}
    missing = [
        (table, key, parts)
        for table, keys in keyed.items()
        for key, parts in keys.items()
        if (table, key) not in present
    ]
    pg = conn.dialect.name == "postgresql"
    if missing and not pg:
        raw = conn.connection.dbapi_connection
        assert raw is not None
        raw.create_function(_SQLITE_FUNCTION, -1, name_key, deterministic=True)  # type: ignore[attr-defined]
    for table, key, parts in missing:
        conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {key} {'BYTEA' if pg else 'BLOB'}")
        conn.exec_driver_sql(f"UPDATE {table} SET {key} = {_sql_key(conn, parts)}")
        if pg:
            conn.exec_driver_sql(f"ALTER TABLE {table} ALTER COLUMN {key} SET NOT NULL")
    return [f"{table}.{key}" for table, key, _ in missing]


def drop_constraints(conn: Connection, retired: Mapping[str, Sequence[str]]) -> None:
    """Drop the unique constraints an earlier version made over the names themselves
    (``retired``: table -> constraint names), where they are (a drop locks its table, even of
    a constraint that is not there). PostgreSQL only: SQLite takes index entries of any size,
    and cannot drop a table's constraint without rebuilding the table, so a database made
    before keeps it there beside the new key (both hold the same rows unique)."""
    if conn.dialect.name != "postgresql":
        return
    wanted = [(table, name) for table, names in retired.items() for name in names]
    found = conn.exec_driver_sql(
        "SELECT conrelid::regclass::text, conname FROM pg_constraint "
        "WHERE connamespace = current_schema()::regnamespace AND conname = ANY(%s)",
        ([name for _, name in wanted],),
    ).all()
    for table, name in sorted(set(wanted) & {(str(t), str(n)) for t, n in found}):
        conn.exec_driver_sql(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
