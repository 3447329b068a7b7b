"""The embedded catalog's cleanup calls: what a scope or a System owns and the run did not touch.

A flow's owner is matched by its parts (``scope_namespace``, ``scope_job``) with SQL equality,
which compares case and every character alike on SQLite and PostgreSQL: no pattern decides what
goes.

Each call counts first and deletes only when not a dry run, in the caller's transaction, so the dry
run and the real call see the same rows. Counts are per object type, cascades included (an entity
takes its fields and the flows that touch it; a routine its statements and their flows), so the
removal cap compares with what would really go.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypeVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    Table,
    and_,
    delete,
    func,
    or_,
    select,
    true,
    tuple_,
    update,
)

from ol_dagster.catalog.embedded.confirm import fresh, stale
from ol_dagster.catalog.embedded.tables import (
    JOB,
    data_flows,
    entities,
    field_flows,
    fields,
    quality_checks,
    quality_suites,
    routines,
    statements,
    systems,
)
from ol_dagster.catalog.name_keys import among, is_
from ol_dagster.catalog.protocol import (
    CleanupCounts,
    CleanupPermissionDenied,
    DatasetRef,
    ObjectType,
)
from ol_dagster.lineage.graph import NodeKey, flow_scope, orchestration_scope

__all__ = [
    "CleanupPermissionDenied",
    "count_held",
    "count_jobs",
    "dataset_system",
    "drop_datasets",
    "flows",
    "job_system",
]

_CHUNK = 500
T = TypeVar("T")


def _count(conn: Connection, table, condition) -> int:
    return conn.execute(select(func.count()).select_from(table).where(condition)).scalar_one()


def _ids(conn: Connection, column, condition) -> list[int]:
    return [r[0] for r in conn.execute(select(column).where(condition))]


def _delete_ids(conn: Connection, table, ids: list[int]) -> None:
    for i in range(0, len(ids), _CHUNK):
        conn.execute(delete(table).where(table.c.id.in_(ids[i : i + _CHUNK])))


def _owned_by(table: Table, namespaces: list[str], jobs: list[NodeKey]) -> list[ColumnElement]:
    """Conditions, each over a chunk of owners, matching the flows of every job of
    ``namespaces`` and of ``jobs`` (both their scopes) by the owner's parts, with equality
    (case and every character count). A job's rows are found through its scope strings (their
    digest leads the table's unique index; one string per owner), then checked by parts."""
    c = table.c
    out: list[ColumnElement] = [
        c.scope_namespace.in_(chunk) for chunk in _chunked(sorted(set(namespaces)))
    ]
    for chunk in _chunked(sorted(set(jobs))):
        scopes = [flow_scope(*job) for job in chunk]
        if "kind" in c:  # data flows hold the orchestration scopes too
            scopes += [orchestration_scope(*job) for job in chunk]
        out.append(
            and_(
                among(table, "scope_key", scopes),
                tuple_(c.scope_namespace, c.scope_job).in_(chunk),
            )
        )
    return out


def flows(
    conn: Connection,
    namespaces: list[str],
    jobs: list[NodeKey],
    before: datetime,
    dry_run: bool,
) -> CleanupCounts:
    """Data, orchestration and field flows owned by every job of ``namespaces`` and by ``jobs``,
    last updated before ``before``: the field flows counted apart."""
    counts: dict[str, int] = {ObjectType.DATA_FLOWS: 0, ObjectType.FIELD_FLOWS: 0}
    for table, kind in ((data_flows, ObjectType.DATA_FLOWS), (field_flows, ObjectType.FIELD_FLOWS)):
        owned = _owned_by(table, namespaces, jobs)
        if not owned:
            continue
        condition = and_(or_(*owned), stale(table.c.last_update, before))
        n = _count(conn, table, condition)
        if n and not dry_run:
            conn.execute(delete(table).where(condition))
        counts[kind] = n
    return CleanupCounts(counts)


def count_held(
    conn: Connection, namespaces: list[str], dataset_systems: list[str]
) -> dict[str, int]:
    """What a definition holds: the flows owned by jobs of ``namespaces`` (data and
    orchestration flows; field flows apart), the dataset entities of ``dataset_systems`` and
    their fields."""
    held_flows, held_field_flows = (
        _count(conn, table, or_(*owned)) if (owned := _owned_by(table, namespaces, [])) else 0
        for table in (data_flows, field_flows)
    )
    datasets = 0
    held_fields = 0
    for chunk in _chunked(sorted(set(dataset_systems))):
        in_systems = select(systems.c.id).where(among(systems, "name_key", chunk))
        its = and_(entities.c.system_id.in_(in_systems), entities.c.type != JOB)
        datasets += _count(conn, entities, its)
        held_fields += _count(
            conn, fields, fields.c.entity_id.in_(select(entities.c.id).where(its))
        )
    return {
        "dataFlows": held_flows,
        "fieldFlows": held_field_flows,
        "datasets": datasets,
        "fields": held_fields,
    }


def _chunked(ids: list[T]) -> list[list[T]]:
    return [ids[i : i + _CHUNK] for i in range(0, len(ids), _CHUNK)]


def _flows_touching(
    conn: Connection,
    entity_ids: list[int],
    statement_ids: list[int],
    field_ids: list[int] = (),  # type: ignore[assignment]
) -> dict[str, int]:
    """Flows that go with removed entities, statements or fields (counted before the cascade),
    data and orchestration flows apart from field flows.

    Flow ids are collected, so a flow that goes for two reasons (a field flow between a removed
    field and a field of a removed entity, or ends in two chunks) is counted once, as it is
    deleted once."""
    data: set[int] = set()
    field: set[int] = set()
    ff = field_flows.c
    for e in _chunked(entity_ids):
        data.update(
            _ids(
                conn,
                data_flows.c.id,
                or_(data_flows.c.from_entity.in_(e), data_flows.c.to_entity.in_(e)),
            )
        )
        of_entities = select(fields.c.id).where(fields.c.entity_id.in_(e))
        field.update(
            _ids(conn, ff.id, or_(ff.from_field.in_(of_entities), ff.to_field.in_(of_entities)))
        )
    for s in _chunked(statement_ids):
        data.update(_ids(conn, data_flows.c.id, data_flows.c.statement_id.in_(s)))
        field.update(_ids(conn, ff.id, ff.statement_id.in_(s)))
    for f in _chunked(list(field_ids)):
        field.update(_ids(conn, ff.id, or_(ff.from_field.in_(f), ff.to_field.in_(f))))
    return {ObjectType.DATA_FLOWS: len(data), ObjectType.FIELD_FLOWS: len(field)}


def _system_id(conn: Connection, system: str) -> int | None:
    return conn.execute(select(systems.c.id).where(is_(systems, "name_key", system))).scalar()


def job_system(
    conn: Connection,
    system: str,
    schemas: list[str] | None,
    before: datetime,
    dry_run: bool,
    routines_before: datetime | None = None,
) -> CleanupCounts:
    """Job entities and routines of a job System (at schema level), not touched since ``before``.

    With ``routines_before`` (the cutoff mode), a stale routine goes now only with its job; one
    whose job is still described (the job lost its sql facet) waits until ``routines_before``, the
    day-based limit (seed: "left to the age-based cleanup of its job System")."""
    sid = _system_id(conn, system)
    counts: dict[str, int] = {
        ObjectType.PHYSICAL_ENTITIES: 0,
        ObjectType.ROUTINES: 0,
        ObjectType.STATEMENTS: 0,
        ObjectType.DATA_FLOWS: 0,
        ObjectType.FIELD_FLOWS: 0,
    }
    if sid is None:
        return CleanupCounts(counts)
    in_schemas = (lambda col: col.in_(schemas)) if schemas is not None else (lambda col: true())
    stale_jobs = conn.execute(
        select(entities.c.id, entities.c.schema, entities.c.name).where(
            entities.c.system_id == sid,
            entities.c.type == JOB,
            in_schemas(entities.c.schema),
            stale(entities.c.last_update, before),
        )
    ).all()
    stale_routine = stale(routines.c.last_update, before)
    if routines_before is not None:
        job = entities.alias()
        job_alive = (
            select(job.c.id)
            .where(
                job.c.system_id == routines.c.system_id,
                job.c.identity_key == routines.c.identity_key,  # the same digest of the names
                job.c.schema == routines.c.schema,
                job.c.name == routines.c.name,
                job.c.type == JOB,
                fresh(job.c.last_update, before),
            )
            .exists()
        )
        stale_routine = and_(
            stale_routine, or_(~job_alive, stale(routines.c.last_update, routines_before))
        )
    routine_ids = _ids(
        conn,
        routines.c.id,
        and_(routines.c.system_id == sid, in_schemas(routines.c.schema), stale_routine),
    )
    statement_ids = _ids(conn, statements.c.id, statements.c.routine_id.in_(routine_ids))
    job_ids = [r[0] for r in stale_jobs]
    counts[ObjectType.PHYSICAL_ENTITIES] = len(job_ids)
    counts[ObjectType.ROUTINES] = len(routine_ids)
    counts[ObjectType.STATEMENTS] = len(statement_ids)
    counts.update(_flows_touching(conn, job_ids, statement_ids))
    if not dry_run:
        _delete_ids(conn, routines, routine_ids)  # cascades to statements and their flows
        _delete_ids(conn, entities, job_ids)  # cascades to orchestration flows and metrics
    return CleanupCounts(counts, sorted(f"{schema}.{name}" for _, schema, name in stale_jobs))


def dataset_system(conn: Connection, system: str, before: datetime, dry_run: bool) -> CleanupCounts:
    """Dataset entities no longer referenced, and fields of entities whose schema the run carried
    that the schema no longer has."""
    sid = _system_id(conn, system)
    counts: dict[str, int] = {
        ObjectType.PHYSICAL_ENTITIES: 0,
        ObjectType.PHYSICAL_FIELDS: 0,
        ObjectType.DATA_FLOWS: 0,
        ObjectType.FIELD_FLOWS: 0,
    }
    if sid is None:
        return CleanupCounts(counts)
    entity_ids = _ids(
        conn,
        entities.c.id,
        and_(
            entities.c.system_id == sid,
            entities.c.type != JOB,
            stale(entities.c.last_update, before),
        ),
    )
    carried = select(entities.c.id).where(
        entities.c.system_id == sid, fresh(entities.c.fields_update, before)
    )
    field_ids = _ids(
        conn,
        fields.c.id,
        and_(fields.c.entity_id.in_(carried), stale(fields.c.last_update, before)),
    )
    cascaded_fields = 0
    for i in range(0, len(entity_ids), _CHUNK):
        cascaded_fields += _count(conn, fields, fields.c.entity_id.in_(entity_ids[i : i + _CHUNK]))
    counts[ObjectType.PHYSICAL_ENTITIES] = len(entity_ids)
    # disjoint: a field is judged stale only on an entity the run carried, hence touched
    counts[ObjectType.PHYSICAL_FIELDS] = len(field_ids) + cascaded_fields
    counts.update(_flows_touching(conn, entity_ids, [], field_ids))
    if not dry_run:
        _delete_ids(conn, fields, field_ids)
        _delete_ids(conn, entities, entity_ids)
    return CleanupCounts(counts)


def drop_datasets(conn: Connection, datasets: list[DatasetRef], dry_run: bool) -> CleanupCounts:
    """Dataset entities a DROP named, with their fields and every flow that touches them (the
    cascade of the delete). A name the catalog does not hold, or that names a job, is skipped;
    an entity named twice is counted and removed once. Whether this definition may drop there is
    the caller's decision (the cleanup's planner)."""
    counts: dict[str, int] = {
        ObjectType.PHYSICAL_ENTITIES: 0,
        ObjectType.PHYSICAL_FIELDS: 0,
        ObjectType.DATA_FLOWS: 0,
        ObjectType.FIELD_FLOWS: 0,
    }
    system_ids: dict[str, int | None] = {}
    entity_ids: set[int] = set()
    for ref in datasets:
        if ref.system not in system_ids:
            system_ids[ref.system] = _system_id(conn, ref.system)
        sid = system_ids[ref.system]
        if sid is None:
            continue
        eid = conn.execute(
            select(entities.c.id).where(
                entities.c.system_id == sid,
                is_(entities, "identity_key", ref.schema, ref.name),
                entities.c.type != JOB,
            )
        ).scalar()
        if eid is not None:
            entity_ids.add(eid)
    ids = sorted(entity_ids)
    counts[ObjectType.PHYSICAL_ENTITIES] = len(ids)
    counts[ObjectType.PHYSICAL_FIELDS] = sum(
        _count(conn, fields, fields.c.entity_id.in_(chunk)) for chunk in _chunked(ids)
    )
    counts.update(_flows_touching(conn, ids, []))
    if not dry_run:
        _delete_ids(conn, entities, ids)  # cascades to fields, flows, field flows, metrics
    return CleanupCounts(counts)


def count_jobs(conn: Connection, system: str, schemas: list[str] | None) -> int:
    """Job entities of a System (in ``schemas``; ``None``: all of them)."""
    sid = _system_id(conn, system)
    if sid is None:
        return 0
    condition = and_(entities.c.system_id == sid, entities.c.type == JOB)
    if schemas is not None:
        condition = and_(condition, entities.c.schema.in_(schemas))
    return _count(conn, entities, condition)


def disable_quality_checks(conn: Connection, jobs: list[str]) -> int:
    """Quality checks of removed jobs are disabled, never deleted: their history is kept."""
    if not jobs:
        return 0
    suite_ids = select(quality_suites.c.id).where(among(quality_suites, "code_key", jobs))
    return conn.execute(
        update(quality_checks)
        .where(quality_checks.c.suite_id.in_(suite_ids), quality_checks.c.enabled.is_(True))
        .values(enabled=False)
    ).rowcount
