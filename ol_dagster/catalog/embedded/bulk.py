"""Bulk upserts straight to the driver: how the embedded catalog's upload writes its rows.

Every object is an upsert on its natural key, chunked; ``created_by`` (the upload's id, kept on
conflict) tells rows an upload wrote from rows it only touched, and ``changed_by`` (set to the
upload's id on conflict only when a value a user reads differs from the stored one, compared in
the statement itself) the rows it changed from those it sent again as they were: no read before
each write.

On PostgreSQL a chunk is one ``INSERT ... SELECT FROM unnest(<one array per column>) ON CONFLICT
... RETURNING``: a short statement whatever the chunk's size, so psycopg does not rewrite a
statement of thousands of placeholders for every chunk (which took most of the upload's time).
On SQLite it is one multi-row ``INSERT ... VALUES ... RETURNING``. Both go straight to the driver
(``Bulk.bulk_upsert``), the values converted as SQLAlchemy would: SQLAlchemy's executemany builds
and processes a parameter dict per row, half the time of a 300,000-row upload. A natural key over
names conflicts on its key column, the names' digest (``catalog.name_keys``), given to each row.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from functools import cache
from itertools import chain, islice
from typing import Any, Literal, NamedTuple, overload

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Connection,
    DateTime,
    Engine,
    Float,
    Integer,
    LargeBinary,
    String,
    Table,
)
from sqlalchemy.dialects import postgresql, sqlite

from ol_dagster.catalog import name_keys
from ol_dagster.catalog.embedded.refusals import Refused, isolated

CHUNK = 500
STAMP_CHUNK = 5_000  # values of an IN list, well within SQLite's 32,766 variables
PG_CHUNK = 10_000  # rows per unnest upsert: the statement's size does not grow with it

# element types of the unnest arrays; strings go as text, so that a value too long for its
# VARCHAR(n) column fails on assignment as with INSERT ... VALUES (a cast to varchar(n)[] would
# silently cut it), and JSON goes as its text, cast per value
_PG_ARRAY_TYPES: tuple[tuple[type, str], ...] = (
    (BigInteger, "bigint"),
    (Integer, "integer"),
    (Boolean, "boolean"),
    (Float, "double precision"),
    (DateTime, "timestamp"),
    (String, "text"),
    (JSON, "text"),
    (LargeBinary, "bytea"),
)

Stamp = Any  # a last-update as the driver gives it: SQLite's text, PostgreSQL's datetime

# refreshed at every upsert without being what the object says: the times of the upload, the
# digest change detection keeps, and when a quality check last ran (a run result, new at every
# run: a check is changed when its outcome is)
_BOOKKEEPING = frozenset({"last_update", "fields_update", "content_hash", "last_checked"})


class Upserted(NamedTuple):
    """Of an upsert's rows: how many it inserted, and how many already there it changed."""

    written: int
    updated: int


def naive(dt: datetime) -> datetime:
    return dt.astimezone(UTC).replace(tzinfo=None)


def batched(items: Iterable[Any], size: int = CHUNK) -> Iterator[list[Any]]:
    """Lists of ``size`` items (the last one shorter); ``items`` may be a generator."""
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def _refuser(
    table: Table, refused: list[Refused] | None
) -> Callable[[tuple[tuple, dict[str, Any]], str], None] | None:
    """What ``isolated`` calls with a refused ``(key, row)``: it is listed in ``refused``."""
    if refused is None:
        return None
    return lambda item, reason: refused.append(Refused(table.name, item[0], item[1], reason))


class Bulk:
    """The catalog database's dialect, as raw statements need it: placeholders, quoting, the
    upsert statement, the chunk size, and the bulk upsert itself."""

    def __init__(self, engine: Engine) -> None:
        self.dialect = engine.dialect
        self.pg = self.dialect.name == "postgresql"
        self.insert = postgresql.insert if self.pg else sqlite.insert
        self.chunk = PG_CHUNK if self.pg else CHUNK  # rows per upsert statement
        self.ph = "%s" if self.pg else "?"  # the driver's placeholder

    def quote(self, name: str) -> str:
        """An identifier as the dialect quotes it (``schema`` is a keyword)."""
        return self.dialect.identifier_preparer.quote(name)

    @overload
    def upsert(
        self,
        conn: Connection,
        table: Table,
        rows: list[dict[str, Any]],
        keys: list[str],
        refresh: list[str],
        upload_id: str,
        *,
        refused: list[Refused] | None = None,
    ) -> tuple[list[int | None], Upserted]: ...

    @overload
    def upsert(
        self,
        conn: Connection,
        table: Table,
        rows: Iterable[tuple[tuple, dict[str, Any]]],
        keys: list[str],
        refresh: list[str],
        upload_id: str,
        *,
        keyed: Literal[True],
        want_ids: bool = True,
        refused: list[Refused] | None = None,
    ) -> tuple[dict[tuple, int], Upserted]: ...

    def upsert(
        self,
        conn: Connection,
        table: Table,
        rows: Any,
        keys: list[str],
        refresh: list[str],
        upload_id: str,
        *,
        keyed: bool = False,
        want_ids: bool = True,
        refused: list[Refused] | None = None,
    ) -> tuple[Any, Upserted]:
        """Upsert ``rows``; returns their ids in order, and how many this upload inserted and
        how many of those already there it changed (``Upserted``).

        Rows sharing a key (two OpenLineage names for one catalog object) are written once.
        RETURNING gives each row's key with its id, so ids are matched by key, not by position:
        ``sort_by_parameter_order`` cannot order an upsert (PostgreSQL sorts the returned rows by
        id, which puts existing rows before new ones; SQLite falls back to one row a statement).

        ``keyed``: ``rows`` are ``(key, row)`` pairs of distinct keys, possibly a generator (a
        large snapshot's fields and flows are built a chunk at a time); the ids come back by key
        (an empty dict unless ``want_ids``).

        ``refused``: rows the database refuses for their content are left out and listed there
        (``refusals``), the others written; their ids are missing (None in the list)."""
        if keyed:
            return self.upsert_unique(
                conn, table, rows, keys, refresh, upload_id, want_ids=want_ids, refused=refused
            )
        row_keys = [tuple(r[c] for c in keys) for r in rows]
        unique = dict(zip(row_keys, rows, strict=True))  # the last row of a key, at its first place
        ids, counts = self.upsert_unique(
            conn, table, unique.items(), keys, refresh, upload_id, want_ids=True, refused=refused
        )
        return [ids.get(k) for k in row_keys], counts

    def upsert_unique(
        self,
        conn: Connection,
        table: Table,
        rows: Iterable[tuple[tuple, dict[str, Any]]],
        keys: list[str],
        refresh: list[str],
        upload_id: str,
        *,
        want_ids: bool,
        refused: list[Refused] | None = None,
    ) -> tuple[dict[tuple, int], Upserted]:
        """Upsert ``(key, row)`` pairs of distinct keys, a chunk at a time (``rows`` may be a
        generator: only a chunk of rows is ever built); returns the ids by key (when wanted),
        how many rows this upload inserted (``created_by``, kept on conflict, is its id) and how
        many rows already there it changed (``changed_by`` is its id)."""
        ids: dict[tuple, int] = {}
        written = updated = 0
        id_col = table.c.id if "id" in table.c else table.c[keys[0]]
        returning = [table.c.created_by, table.c.changed_by]
        if want_ids:
            returning = [id_col, *returning, *(table.c[c] for c in keys)]
        content = [c for c in refresh if c not in _BOOKKEEPING]

        def write(part: Sequence[tuple[tuple, dict[str, Any]]]) -> list[Sequence[Any]]:
            return self.bulk_upsert(
                conn,
                table,
                [r for _, r in part],
                keys,
                refresh,
                {"created_by": upload_id},
                returning,
                changed=content,
            )

        for chunk in batched(rows, self.chunk):
            returned = isolated(conn, chunk, write, _refuser(table, refused))
            if not want_ids:
                for created_by, changed_by in returned:
                    written += created_by == upload_id
                    updated += created_by != upload_id and changed_by == upload_id
                continue
            mine = {k: k for k, _ in chunk}  # the ids dict keeps the graph's key objects
            for rid, created_by, changed_by, *key in returned:
                ids[mine[tuple(key)]] = rid
                written += created_by == upload_id
                updated += created_by != upload_id and changed_by == upload_id
        return ids, Upserted(written, updated)

    def upsert_plain(
        self,
        conn: Connection,
        table: Table,
        rows: list[dict[str, Any]],
        keys: list[str],
        refused: list[Refused] | None = None,
    ) -> None:
        """Upsert rows that carry no ``created_by`` (run results), a chunk a statement; every
        column but ``keys`` is refreshed. ``refused`` as for ``upsert``."""
        if not rows:
            return
        refresh = [c for c in rows[0] if c not in keys]

        def write(part: Sequence[dict[str, Any]]) -> list[Sequence[Any]]:
            return self.bulk_upsert(conn, table, list(part), keys, refresh, {}, [])

        on_refused = _refuser(table, refused)
        for chunk in batched(rows, self.chunk):
            isolated(
                conn,
                chunk,
                write,
                None
                if on_refused is None
                else lambda row, reason: on_refused((tuple(row[k] for k in keys), row), reason),
            )

    def bulk_upsert(
        self,
        conn: Connection,
        table: Table,
        rows: list[dict[str, Any]],
        keys: list[str],
        refresh: list[str],
        constants: dict[str, Any],
        returning: list[Column],
        *,
        changed: Sequence[str] = (),
    ) -> list[Sequence[Any]]:
        """``INSERT ... ON CONFLICT (keys) DO UPDATE SET refresh RETURNING returning`` of one
        chunk in one statement handed straight to the driver, ``constants`` the same for every
        row; the rows share their columns (as any executemany's). Names in ``keys`` stand for
        their key column, which the rows are given (unless they carry it). ``changed``: the columns
        whose new value, when it differs from the stored one, sets ``changed_by`` to the row's
        ``created_by`` constant (the upload's id)."""
        if not rows:
            return []
        name_keys.with_keys(table, rows)
        keys = name_keys.conflict_target(table, keys)
        quote = self.dialect.identifier_preparer.quote
        columns = [*constants, *rows[0]]
        if self.pg:
            source, params = self._pg_rows(table, rows, constants)
        else:
            source, params = self._sqlite_rows(table, rows, constants)
        sets = [f"{quote(c)} = EXCLUDED.{quote(c)}" for c in refresh]
        if changed:
            sets.append(f"changed_by = {self._changed_by(table, changed)}")
        sql = (
            f"INSERT INTO {quote(table.name)} ({', '.join(quote(c) for c in columns)}) {source} "
            f"ON CONFLICT ({', '.join(quote(c) for c in keys)}) DO UPDATE SET " + ", ".join(sets)
        )
        if returning:
            sql += f" RETURNING {', '.join(quote(c.name) for c in returning)}"
        result = conn.exec_driver_sql(sql, tuple(params))
        return list(result.all()) if returning else []

    def _changed_by(self, table: Table, columns: Sequence[str]) -> str:
        """The upload's id when one of ``columns`` differs from the stored row's (NULLs equal),
        else the row's ``changed_by``: the SET expressions of an upsert see the stored row by
        the table's name, the new one as EXCLUDED, on both databases."""
        quote = self.dialect.identifier_preparer.quote
        name = quote(table.name)
        differs = []
        for c in columns:
            old, new = f"{name}.{quote(c)}", f"EXCLUDED.{quote(c)}"
            if not self.pg:
                differs.append(f"{old} IS NOT {new}")
            elif isinstance(table.c[c].type, JSON):  # json has no equality: as jsonb
                differs.append(f"{old}::jsonb IS DISTINCT FROM {new}::jsonb")
            else:
                differs.append(f"{old} IS DISTINCT FROM {new}")
        return (
            f"CASE WHEN {' OR '.join(differs)} THEN EXCLUDED.created_by ELSE {name}.changed_by END"
        )

    def _pg_rows(
        self, table: Table, rows: list[dict[str, Any]], constants: dict[str, Any]
    ) -> tuple[str, list[Any]]:
        """``SELECT ... FROM unnest(...)``: the rows' values as one binary array per column."""
        serialize = self.dialect._json_serializer or json.dumps  # type: ignore[attr-defined]
        arrays: list[str] = []
        selected: list[str] = ["%s"] * len(constants)  # params in statement order: these first
        params: list[Any] = list(constants.values())
        for i, name in enumerate(rows[0]):
            column_type = table.c[name].type
            element = next(t for base, t in _PG_ARRAY_TYPES if isinstance(column_type, base))
            values = [r[name] for r in rows]
            if isinstance(column_type, JSON):
                values = [serialize(v) for v in values]
                selected.append(f"u.c{i}::json")
            else:
                if element == "double precision":
                    values = [float(v) if v is not None else None for v in values]
                selected.append(f"u.c{i}")
            arrays.append(f"%b::{element}[]")  # binary: arrays dump ~3x faster than as text
            params.append(values)
        names = ", ".join(f"c{i}" for i in range(len(rows[0])))
        source = f"SELECT {', '.join(selected)} FROM unnest({', '.join(arrays)}) AS u({names})"
        return source, params

    def _sqlite_rows(
        self, table: Table, rows: list[dict[str, Any]], constants: dict[str, Any]
    ) -> tuple[str, list[Any]]:
        """``VALUES (?, ...), ...`` (a chunk of at most ``CHUNK`` rows, within SQLite's 32,766
        variables), converted by the columns' own SQLAlchemy bind processors."""
        dialect = self.dialect
        columns = [*constants, *rows[0]]
        # column by column, then interleaved: far fewer Python steps than row by row
        values: list[list[Any]] = []
        for name in columns:
            process = table.c[name].type._cached_bind_processor(dialect)  # noqa: SLF001
            if name in constants:
                value = constants[name]
                values.append([process(value) if process else value] * len(rows))
                continue
            column = [r[name] for r in rows]
            if process is not None:
                if isinstance(table.c[name].type, DateTime):
                    process = cache(process)  # a chunk's times are mostly the upload's clock
                # every processor takes None as SQLAlchemy gives it (JSON's stores 'null')
                column = list(map(process, column))
            values.append(column)
        params = list(chain.from_iterable(zip(*values, strict=True)))
        one = f"({', '.join('?' * len(columns))})"
        return f"VALUES {', '.join([one] * len(rows))}", params

    def in_(self, column: str, values: Sequence[Any], sql_type: str) -> tuple[str, list[Any]]:
        """``column IN (values)``: one array parameter on PostgreSQL (cast, so that an index on
        a bigint column serves it; digests in binary, which psycopg would escape one by one as
        text), a placeholder per value on SQLite."""
        if self.pg:
            placeholder = "%b" if sql_type == "bytea" else "%s"
            return f"{column} = ANY({placeholder}::{sql_type}[])", [list(values)]
        return f"{column} IN ({', '.join('?' * len(values))})", list(values)

    def db_time(self, value: datetime) -> Stamp:
        """A time as the driver is given it (SQLite: text), so it compares with a ``Stamp``."""
        process = DateTime()._cached_bind_processor(self.dialect)  # noqa: SLF001
        return process(value) if process else value

    def from_db_time(self, value: Stamp) -> datetime:
        """A ``Stamp`` as the time that is written as it (``db_time``'s inverse)."""
        process = DateTime()._cached_result_processor(self.dialect, None)  # noqa: SLF001
        out = process(value) if process else value
        assert isinstance(out, datetime)
        return out
