"""Confirming an unchanged upload: the rows of the last upload's time taken as this one's.

An unchanged snapshot describes exactly what the last upload wrote. Stamping each of its rows with
the new time (``stamps``) writes every row again: about 317,000 at 10,000 jobs, half a second of
CPU, an eighth of the sync. So, when every row of one earlier upload's time is, table by table,
one this upload describes, as it describes it, and every row it describes is there with that
time, the upload records that time as confirmed at its own (``cat_confirmations``) and writes
none of them.

A row's last update, for every reader that compares it (the cleanup, the retiring of jobs, the
newest jobs of a capped asset graph), is then its own time or the latest time that confirmed it
(``seen``, ``stale``, ``fresh``): the time a re-send would have given it.

Why a confirmation never keeps a row the upload does not describe:

- the rows of one time are those one upload described: the one that claimed it (``clock.claim``),
  or the last edited upload that confirmed it, which sets every other row of it aside and writes
  its changed objects with it (``partial``). No other write gives a row an earlier upload's time:
  after that upload, the rows of that time can only become fewer (a later upload rewrites, stamps
  or sets them aside, a cleanup deletes them), so what the check found is all a confirmation can
  ever cover;
- the check is exact: the entities of that time are the upload's own, each with the digest it has
  now; each dataset's fields, each scope's flows, are as many as it holds (rows of a clean
  object's time are a part of its content: it has not changed since it wrote or stamped them, so
  as many is the same rows), by the names themselves; the routines and statements are its jobs'
  own;
- it is read once, in the upload's first step; each table's confirmation is then recorded by the
  step that would have stamped it, in that step's transaction (a table whose write fails is not
  confirmed, as its rows would not have been stamped), and covers no row the check did not see;
- a confirmation is per table: quality checks and run metrics, always written, are never
  confirmed;
- anything else (a changed, added or removed object; a renamed dataset; a row lost or aged since;
  a row of that time this upload does not describe) and the upload stamps and writes as before.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    DateTime,
    Select,
    Table,
    and_,
    func,
    or_,
    select,
)

from ol_dagster.catalog.embedded.bulk import Bulk, Stamp
from ol_dagster.catalog.embedded.changes import Contents
from ol_dagster.catalog.embedded.stamps import EntityKey
from ol_dagster.catalog.embedded.tables import (
    confirmations,
    data_flows,
    entities,
    field_flows,
    fields,
    routines,
    statements,
)
from ol_dagster.catalog.name_keys import name_key
from ol_dagster.lineage import LineageGraph
from ol_dagster.lineage.graph import NodeKey, flow_scope, orchestration_scope


@dataclass(frozen=True, slots=True)
class Described:
    """What an upload describes, as the catalog holds it when nothing changed: each entity with
    its digest and whether its fields' time is the upload's (a dataset with a schema); the
    fields of each entity that has some; the routines of its jobs (each with one statement);
    the rows of each flow scope, data and orchestration flows, then field flows."""

    entities: Mapping[EntityKey, tuple[str, bool]]
    fields: Mapping[EntityKey, int]
    routines: Collection[EntityKey]
    data_flows: Mapping[str, int]
    field_flows: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class Confirmed:
    """An upload's rows found whole: their time, each job's and dataset's entity id, and the
    flow tables holding rows of that time (a table with none is not written to, as no stamp
    would have been)."""

    time: Stamp
    job_ids: dict[NodeKey, int]
    ds_ids: dict[NodeKey, int]
    flow_tables: list[Table]


def of_graph(
    bulk: Bulk,
    conn: Connection,
    graph: LineageGraph,
    contents: Contents,
    job_sys: Mapping[NodeKey, str],
    sys_ids: Mapping[str, int],
    ds_digest: Mapping[NodeKey, str],
) -> Confirmed | None:
    """``whole`` for what an upload of ``graph`` writes, every object with its digest. None when
    an object has no digest (it is always sent again), two share an entity, or ``whole`` says
    so."""
    jobs = contents.jobs
    if jobs.keys() != job_sys.keys() or ds_digest.keys() != graph.datasets.keys():
        return None
    idents = identities(graph, contents, job_sys, sys_ids, ds_digest)
    if idents is None:
        return None
    job_ident, ds_ident, described = idents
    data: dict[str, int] = {}
    columns: dict[str, int] = {}
    for key, c in jobs.items():
        scope = flow_scope(*key)
        if c.data_flows:
            data[scope] = c.data_flows
        if c.orchestration_flows:
            data[orchestration_scope(*key)] = c.orchestration_flows
        if c.field_flows:
            columns[scope] = c.field_flows
    found = whole(
        bulk,
        conn,
        Described(
            described,
            {ds_ident[k]: len(d.fields) for k, d in graph.datasets.items() if d.fields},
            [job_ident[k] for k in graph.routines if k in job_sys],
            data,
            columns,
        ),
    )
    if found is None:
        return None
    prev, ids = found
    return Confirmed(
        prev,
        {k: ids[ident] for k, ident in job_ident.items()},
        {k: ids[ident] for k, ident in ds_ident.items()},
        [table for table, scopes in ((data_flows, data), (field_flows, columns)) if scopes],
    )


def identities(
    graph: LineageGraph,
    contents: Contents,
    job_sys: Mapping[NodeKey, str],
    sys_ids: Mapping[str, int],
    ds_digest: Mapping[NodeKey, str],
) -> (
    tuple[dict[NodeKey, EntityKey], dict[NodeKey, EntityKey], dict[EntityKey, tuple[str, bool]]]
    | None
):
    """The catalog identity of each job and dataset of ``graph`` with a digest, and each one's
    digest and whether its fields' time is the upload's (a dataset with a schema), by identity;
    None when two share an entity."""
    jobs = contents.jobs
    job_ident = {k: (sys_ids[s], k[0], k[1]) for k, s in job_sys.items() if k in jobs}
    ds_ident = {
        k: (sys_ids[d.system], d.schema, d.object_name)
        for k, d in graph.datasets.items()
        if k in ds_digest
    }
    described = {ident: (jobs[k].digest, False) for k, ident in job_ident.items()}
    described.update(
        (ident, (ds_digest[k], graph.datasets[k].has_schema)) for k, ident in ds_ident.items()
    )
    if len(described) != len(job_ident) + len(ds_ident):
        return None
    return job_ident, ds_ident, described


def whole(
    bulk: Bulk, conn: Connection, described: Described
) -> tuple[Stamp, dict[EntityKey, int]] | None:
    """The time of the rows ``described`` and the entities' ids, when the catalog holds them all
    with one time and holds nothing else with it; else None. Each step of the upload then
    records the confirmation of its tables (``record``): a table whose write fails is not
    confirmed, as its rows would not have been stamped."""
    if not described.entities:
        return None
    prev = time_of(bulk, conn, next(iter(described.entities)))
    if prev is None:
        return None
    held = read(bulk, conn, prev, described.entities)
    if held.other or len(held.entities) != len(described.entities):
        return None
    by_id = {eid: key for key, eid in held.entities.items()}
    if {by_id.get(eid): n for eid, n in held.fields.items()} != described.fields:
        return None
    if held.routines.keys() != set(described.routines) or held.statements != dict.fromkeys(
        held.routines.values(), 1
    ):
        return None
    for table, scopes in ((data_flows, described.data_flows), (field_flows, described.field_flows)):
        if held.scopes[table.name] != scopes:
            return None
    return prev, held.entities


def time_of(bulk: Bulk, conn: Connection, key: EntityKey) -> Stamp | None:
    """The last update the entity of ``key`` carries, if the catalog holds it."""
    q, ph = bulk.quote, bulk.ph
    sid, schema, name = key
    return conn.exec_driver_sql(
        f"SELECT last_update FROM {q(entities.name)} WHERE system_id = {ph} "
        f"AND identity_key = {ph} AND {q('schema')} = {ph} AND name = {ph}",
        (sid, name_key(schema, name), schema, name),
    ).scalar()


# the column the rows of one time of each table are counted by (``read``), and set aside by
# (``partial``)
COUNTED_BY = {
    entities.name: "id",
    fields.name: "entity_id",
    routines.name: "id",
    statements.name: "routine_id",
    data_flows.name: "scope",
    field_flows.name: "scope",
}


@dataclass(slots=True)
class Held:
    """What the catalog holds of one time: its entities as described (each one's digest, and
    its fields' time: that time for a dataset with a schema, else none) and the ids of the
    others; the entities whose fields' time it is too; and the rows of the other tables,
    counted by what finds them (routines by identity, one each)."""

    entities: dict[EntityKey, int] = field(default_factory=dict)
    other: list[int] = field(default_factory=list)
    with_fields: set[int] = field(default_factory=set)
    fields: dict[int, int] = field(default_factory=dict)  # by entity id
    routines: dict[EntityKey, int] = field(default_factory=dict)
    statements: dict[int, int] = field(default_factory=dict)  # by routine id
    scopes: dict[str, dict[str, int]] = field(default_factory=dict)  # by flow table, then scope


def read(
    bulk: Bulk, conn: Connection, prev: Stamp, described: Mapping[EntityKey, tuple[str, bool]]
) -> Held:
    """The rows of time ``prev`` (``Held``), the entities compared with ``described``."""
    q, ph = bulk.quote, bulk.ph
    held = Held()
    for eid, sid, schema, name, digest, fields_update in conn.exec_driver_sql(
        f"SELECT id, system_id, {q('schema')}, name, content_hash, fields_update "
        f"FROM {q(entities.name)} WHERE last_update = {ph}",
        (prev,),
    ):
        key = (sid, schema, name)
        if fields_update == prev:
            held.with_fields.add(eid)
        want = described.get(key)
        if want is not None and want[0] == digest and fields_update == (prev if want[1] else None):
            held.entities[key] = eid
        else:
            held.other.append(eid)
    held.fields = _grouped(bulk, conn, fields, prev)
    held.routines = {
        (sid, schema, name): rid
        for rid, sid, schema, name in conn.exec_driver_sql(
            f"SELECT id, system_id, {q('schema')}, name FROM {q(routines.name)} "
            f"WHERE last_update = {ph}",
            (prev,),
        )
    }
    held.statements = _grouped(bulk, conn, statements, prev)
    for table in (data_flows, field_flows):
        held.scopes[table.name] = _grouped(bulk, conn, table, prev)
    return held


def _grouped(bulk: Bulk, conn: Connection, table: Table, prev: Stamp) -> dict[Any, int]:
    """The rows of ``table`` of time ``prev``, counted by its ``COUNTED_BY`` column (flows: by
    the scope string itself, not its digest)."""
    q, ph = bulk.quote, bulk.ph
    column = COUNTED_BY[table.name]
    rows = conn.exec_driver_sql(
        f"SELECT {q(column)}, count(*) FROM {q(table.name)} WHERE last_update = {ph} "
        f"GROUP BY {q(column)}",
        (prev,),
    )
    return {value: n for value, n in rows}


def record(bulk: Bulk, conn: Connection, prev: Stamp, now: datetime, *tables: Table) -> None:
    """The rows of ``tables`` of time ``prev`` are confirmed at ``now``."""
    db_now = bulk.db_time(now)
    for table in tables:
        _confirm_at(bulk, conn, prev, table, db_now)


def read_as_before(
    bulk: Bulk, conn: Connection, aside: datetime, prev: Stamp, table: Table
) -> None:
    """The rows of ``table`` of time ``aside`` read as those of time ``prev`` read now: as the
    latest time that confirmed ``prev``, else as ``prev`` (``seen``). ``partial`` sets rows
    aside with it."""
    q, ph = bulk.quote, bulk.ph
    latest = conn.exec_driver_sql(
        f"SELECT max(confirmed) FROM {q(confirmations.name)} WHERE stamp = {ph} "
        f"AND of_table = {ph}",
        (prev, table.name),
    ).scalar()
    _confirm_at(bulk, conn, bulk.db_time(aside), table, prev if latest is None else latest)


def _confirm_at(bulk: Bulk, conn: Connection, stamp: Stamp, table: Table, at: Stamp) -> None:
    q, ph = bulk.quote, bulk.ph
    conn.exec_driver_sql(
        f"DELETE FROM {q(confirmations.name)} WHERE stamp = {ph} AND of_table = {ph}",
        (stamp, table.name),
    )
    conn.exec_driver_sql(
        f"INSERT INTO {q(confirmations.name)} (stamp, of_table, confirmed) "
        f"VALUES ({ph}, {ph}, {ph})",
        (stamp, table.name, at),
    )


# -- a row's last update, confirmed or not ---------------------------------------------------------


def _table_name(column: Any) -> str:
    table = column.table
    return getattr(table, "element", table).name  # an alias: its table's


def _confirmed_since(column: Any, before: datetime) -> Select:
    c = confirmations.c
    return select(c.stamp).where(c.of_table == _table_name(column), c.confirmed >= before)


def stale(column: Any, before: datetime) -> ColumnElement[bool]:
    """``column`` (a last update) is before ``before``, and no confirmation since covers it."""
    return and_(column < before, column.not_in(_confirmed_since(column, before)))


def fresh(column: Any, before: datetime) -> ColumnElement[bool]:
    """``column`` (a last update, or a fields' time) is ``before`` or later, or confirmed since."""
    return or_(column >= before, column.in_(_confirmed_since(column, before)))


def seen(column: Any) -> ColumnElement[datetime]:
    """``column`` (a last update) as a re-send would have left it: the latest time that
    confirmed it, else its own."""
    c = confirmations.c
    confirmed = (
        select(func.max(c.confirmed))
        .where(c.of_table == _table_name(column), c.stamp == column)
        .scalar_subquery()
    )
    return func.coalesce(confirmed, column, type_=DateTime)
