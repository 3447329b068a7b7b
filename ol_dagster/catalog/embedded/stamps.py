"""Stamping what an upload does not re-send: the rows of objects whose digest is unchanged.

An object whose digest (``changes``) is the one the catalog stored has its rows stamped with the
upload's time, set-based (``UPDATE ... SET last_update WHERE scope IN (...) AND last_update = <its
last upload's time>``, chunked), so every object the graph describes gets the new last-update
exactly as a re-send gives it. A row lost since shows as a short count, and its object is then
sent again whole.

Rows are found through their unique index, by the digest of their names (``catalog.name_keys``),
and matched by the names themselves.

Raw SQL on the driver: tens of thousands of keys per statement, which SQLAlchemy would coerce and
name one by one. A stored time is bound back as it was read (``Stamp``: SQLite's text,
PostgreSQL's timestamp), so it equals itself whatever its resolution.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Integer, Table, select

from ol_dagster.catalog.embedded import changes
from ol_dagster.catalog.embedded.bulk import STAMP_CHUNK, Bulk, Stamp, batched
from ol_dagster.catalog.embedded.tables import (
    data_flows,
    entities,
    field_flows,
    routines,
    statements,
)
from ol_dagster.catalog.name_keys import name_key
from ol_dagster.lineage.graph import NodeKey

EntityKey = tuple[int, str, str]  # (system id, schema, name)


def stored_entities(
    bulk: Bulk, conn: Connection, idents: Iterable[EntityKey]
) -> dict[EntityKey, tuple[int, str | None, Stamp]]:
    """The id, digest and last-update of the entities of ``idents`` the catalog holds.

    Looked up through the identity index, by System and a chunk of identity keys (checked
    against the schema and the names): SQLite scans the table for a row-value ``IN``, so each
    term names its System and schema, and terms are OR-ed a few at a time (each an index
    search)."""
    groups: defaultdict[tuple[int, str], list[str]] = defaultdict(list)
    for sid, schema, name in idents:
        groups[(sid, schema)].append(name)
    terms = [
        (sid, schema, chunk)
        for (sid, schema), names in groups.items()
        for chunk in batched(names, STAMP_CHUNK)
    ]
    q = bulk.quote
    ph = bulk.ph
    head = (
        f"SELECT id, system_id, {q('schema')}, name, content_hash, last_update "
        f"FROM {q(entities.name)} WHERE "
    )
    out: dict[EntityKey, tuple[int, str | None, Stamp]] = {}
    start = 0
    while start < len(terms):
        end, names = start, 0
        while end < len(terms) and end - start < 100 and names < STAMP_CHUNK:
            names += len(terms[end][2])
            end += 1
        clauses: list[str] = []
        params: list[Any] = []
        for sid, schema, chunk in terms[start:end]:
            keys = [name_key(schema, name) for name in chunk]
            key_sql, key_params = bulk.in_("identity_key", keys, "bytea")
            in_sql, in_params = bulk.in_("name", chunk, "text")
            clauses.append(
                f"(system_id = {ph} AND {key_sql} AND {q('schema')} = {ph} AND {in_sql})"
            )
            params += [sid, *key_params, schema, *in_params]
        for eid, sid, schema, name, digest, prev in conn.exec_driver_sql(
            head + " OR ".join(clauses), tuple(params)
        ):
            out[(sid, schema, name)] = (eid, digest, prev)
        start = end
    return out


def stamp(
    bulk: Bulk,
    conn: Connection,
    table: Table,
    now: datetime,
    prev: Stamp,
    column: str,
    expected: dict[Any, int],
    *,
    match: dict[str, Any] | None = None,
    also: dict[str, Any] | None = None,
    keyed: tuple[str, Callable[[Any], bytes]] | None = None,
) -> set[Any]:
    """``UPDATE table SET last_update = now WHERE column IN (expected) AND last_update =
    prev`` (and each column of ``match`` equal to its value; ``also`` set too), a chunk at a
    time. Returns the values of ``column`` with fewer rows stamped than ``expected`` says
    (the catalog lost some since). ``keyed``: the key column the rows are found by, and the
    key of a value of ``column`` (names: ``name_keys``).

    Only the rows stamped at ``prev`` are taken: those the upload of that time sent for the
    objects, not the older ones of the same scope that the cleanup is to judge. As no two
    uploads share a time (``clock.claim``), rows of that time are never more than expected,
    so a chunk whose count is right is right for each value; only a short chunk is counted
    value by value."""
    q = bulk.quote
    ph = bulk.ph
    sql_type = "bigint" if isinstance(table.c[column].type, Integer) else "text"
    sets = {"last_update": now, **(also or {})}
    set_values = [bulk.db_time(v) if isinstance(v, datetime) else v for v in sets.values()]
    match = match or {}
    where = f"last_update = {ph}" + "".join(f" AND {q(c)} = {ph}" for c in match)
    update = f"UPDATE {q(table.name)} SET {', '.join(f'{q(c)} = {ph}' for c in sets)} WHERE "
    count = f"SELECT {q(column)}, count(*) FROM {q(table.name)} WHERE "
    short: set[Any] = set()
    for chunk in batched(sorted(expected), STAMP_CHUNK):
        in_sql, in_params = bulk.in_(q(column), chunk, sql_type)
        if keyed is not None:
            key_sql, key_params = bulk.in_(q(keyed[0]), [keyed[1](v) for v in chunk], "bytea")
            in_sql, in_params = f"{key_sql} AND {in_sql}", [*key_params, *in_params]
        params = (*set_values, prev, *match.values(), *in_params)
        stamped = conn.exec_driver_sql(f"{update}{where} AND {in_sql}", params).rowcount
        if stamped == sum(map(expected.__getitem__, chunk)):
            continue
        got = {
            value: n
            for value, n in conn.exec_driver_sql(
                f"{count}{where} AND {in_sql} GROUP BY {q(column)}",
                (set_values[0], *match.values(), *in_params),
            )
        }
        short.update(k for k in chunk if got.get(k, 0) != expected[k])
    return short


def stamp_statements(
    bulk: Bulk,
    conn: Connection,
    now: datetime,
    prev: Stamp,
    system_id: int,
    schema: str,
    names: list[str],
) -> set[str]:
    """Stamp the statements of the routines ``names`` (one each); returns the names whose
    statement was not there with ``prev``."""
    q = bulk.quote
    ph = bulk.ph
    db_now = bulk.db_time(now)
    short: set[str] = set()
    for chunk in batched(sorted(names), STAMP_CHUNK):
        key_sql, key_params = bulk.in_(
            "r.identity_key", [name_key(schema, n) for n in chunk], "bytea"
        )
        in_sql, in_params = bulk.in_("r.name", chunk, "text")
        in_sql, in_params = f"{key_sql} AND {in_sql}", [*key_params, *in_params]
        of_chunk = f"r.system_id = {ph} AND r.{q('schema')} = {ph} AND {in_sql}"
        routine_ids = f"SELECT r.id FROM {q(routines.name)} r WHERE {of_chunk}"
        stamped = conn.exec_driver_sql(
            f"UPDATE {q(statements.name)} SET last_update = {ph} "
            f"WHERE last_update = {ph} AND routine_id IN ({routine_ids})",
            (db_now, prev, system_id, schema, *in_params),
        ).rowcount
        if stamped == len(chunk):
            continue
        found = {
            name
            for (name,) in conn.exec_driver_sql(
                f"SELECT r.name FROM {q(routines.name)} r JOIN {q(statements.name)} s "
                f"ON s.routine_id = r.id WHERE {of_chunk} AND s.last_update = {ph}",
                (system_id, schema, *in_params, db_now),
            )
        }
        short.update(set(chunk) - found)
    return short


def statement_ids(
    conn: Connection,
    sys_ids: dict[str, int],
    job_sys: dict[NodeKey, str],
    jobs: list[NodeKey],
) -> dict[NodeKey, int]:
    """The ids of the statements of ``jobs``' routines, read from the catalog."""
    r, s = routines.c, statements.c
    groups: defaultdict[tuple[int, str], list[str]] = defaultdict(list)
    for key in jobs:
        groups[(sys_ids[job_sys[key]], key[0])].append(key[1])
    out: dict[NodeKey, int] = {}
    for (sid, schema), names in groups.items():
        for chunk in batched(names, STAMP_CHUNK):
            keys = [name_key(schema, name) for name in chunk]
            for name, stmt_id in conn.execute(
                select(r.name, s.id)
                .join(statements, s.routine_id == r.id)
                .where(
                    r.system_id == sid,
                    r.identity_key.in_(keys),
                    r.schema == schema,
                    r.name.in_(chunk),
                )
            ):
                out[(schema, name)] = stmt_id
    return out


def stamp_flows(
    bulk: Bulk,
    conn: Connection,
    now: datetime,
    contents: dict[NodeKey, changes.JobContent],
    clean_jobs: dict[NodeKey, Stamp],
    scope: Callable[[NodeKey], str],
    o_scope: Callable[[NodeKey], str],
    scope_key: Callable[[str], bytes],
) -> set[NodeKey]:
    """Stamp the flows of the clean jobs' scopes (found by ``scope_key``: the upload's, which
    digests each scope once for all its flows). A job whose scopes hold fewer rows of its
    time than its content has (a flow removed since, or the cascade of a removed entity,
    field or statement) leaves ``clean_jobs``, its flows then upserted as a changed job's;
    returns those jobs."""
    by_prev: defaultdict[Stamp, list[NodeKey]] = defaultdict(list)
    for key, prev in clean_jobs.items():
        by_prev[prev].append(key)
    short: set[NodeKey] = set()
    for prev, keys in by_prev.items():
        data: dict[str, int] = {}
        field: dict[str, int] = {}
        owner: dict[str, NodeKey] = {}
        for key in keys:
            c = contents[key]
            if c.data_flows:
                data[scope(key)] = c.data_flows
                owner[scope(key)] = key
            if c.orchestration_flows:
                data[o_scope(key)] = c.orchestration_flows
                owner[o_scope(key)] = key
            if c.field_flows:
                field[scope(key)] = c.field_flows
                owner[scope(key)] = key
        for table, expected in ((data_flows, data), (field_flows, field)):
            lost = stamp(
                bulk, conn, table, now, prev, "scope", expected, keyed=("scope_key", scope_key)
            )
            short.update(owner[s] for s in lost)
    for key in short:
        del clean_jobs[key]
    return short
