"""A parent job's children, and the removal of chosen jobs: what a producer inventory retires.

The link is the orchestration flow a child's ``parent`` facet made (``parent job -> child job``,
owned by the child). Retiring a job removes its entity and routine in its job System and every
flow it owns or that touches them, each counted once, and only what was last updated before the
run's cutoff: a job the batch described again is never retired.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, and_, or_, select, tuple_

from ol_dagster.catalog.embedded.cleanup import _chunked, _delete_ids, _ids, _owned_by, _system_id
from ol_dagster.catalog.embedded.confirm import stale
from ol_dagster.catalog.embedded.tables import (
    JOB,
    ORCHESTRATION,
    data_flows,
    entities,
    field_flows,
    routines,
    statements,
)
from ol_dagster.catalog.protocol import CleanupCounts, ObjectType
from ol_dagster.lineage.graph import NodeKey


def children(conn: Connection, parent: NodeKey) -> list[NodeKey]:
    """The jobs whose orchestration flow comes from the parent's job entity (in any System)."""
    f, e = data_flows.c, entities.c
    rows = conn.execute(
        select(f.scope_namespace, f.scope_job)
        .join(entities, e.id == f.from_entity)
        .where(
            f.kind == ORCHESTRATION,
            e.type == JOB,
            e.ol_namespace == parent[0],
            e.ol_name == parent[1],
        )
        .distinct()
    ).all()
    return sorted((str(ns), str(name)) for ns, name in rows)


def retire_jobs(
    conn: Connection, system: str, jobs: Sequence[NodeKey], before: datetime, dry_run: bool
) -> CleanupCounts:
    counts: dict[str, int] = {
        ObjectType.PHYSICAL_ENTITIES: 0,
        ObjectType.ROUTINES: 0,
        ObjectType.STATEMENTS: 0,
        ObjectType.DATA_FLOWS: 0,
        ObjectType.FIELD_FLOWS: 0,
    }
    sid = _system_id(conn, system)
    wanted = sorted(set(jobs))
    if sid is None or not wanted:
        return CleanupCounts(counts)
    found: list[tuple[int, str, str]] = []
    routine_ids: list[int] = []
    for chunk in _chunked(wanted):
        found += [
            (r[0], r[1], r[2])
            for r in conn.execute(
                select(entities.c.id, entities.c.schema, entities.c.name).where(
                    entities.c.system_id == sid,
                    entities.c.type == JOB,
                    tuple_(entities.c.schema, entities.c.name).in_(chunk),
                    stale(entities.c.last_update, before),
                )
            )
        ]
        routine_ids += _ids(
            conn,
            routines.c.id,
            and_(
                routines.c.system_id == sid,
                tuple_(routines.c.schema, routines.c.name).in_(chunk),
                stale(routines.c.last_update, before),
            ),
        )
    job_ids = [r[0] for r in found]
    statement_ids = _ids(conn, statements.c.id, statements.c.routine_id.in_(routine_ids))
    data = set(
        _ids(
            conn,
            data_flows.c.id,
            and_(or_(*_owned_by(data_flows, [], wanted)), stale(data_flows.c.last_update, before)),
        )
    )
    field = set(
        _ids(
            conn,
            field_flows.c.id,
            and_(
                or_(*_owned_by(field_flows, [], wanted)), stale(field_flows.c.last_update, before)
            ),
        )
    )
    for ids in _chunked(job_ids):
        data.update(
            _ids(
                conn,
                data_flows.c.id,
                or_(data_flows.c.from_entity.in_(ids), data_flows.c.to_entity.in_(ids)),
            )
        )
    for ids in _chunked(statement_ids):
        data.update(_ids(conn, data_flows.c.id, data_flows.c.statement_id.in_(ids)))
        field.update(_ids(conn, field_flows.c.id, field_flows.c.statement_id.in_(ids)))
    counts[ObjectType.PHYSICAL_ENTITIES] = len(job_ids)
    counts[ObjectType.ROUTINES] = len(routine_ids)
    counts[ObjectType.STATEMENTS] = len(statement_ids)
    counts[ObjectType.DATA_FLOWS] = len(data)
    counts[ObjectType.FIELD_FLOWS] = len(field)
    if not dry_run:
        _delete_ids(conn, field_flows, sorted(field))
        _delete_ids(conn, data_flows, sorted(data))
        _delete_ids(conn, routines, routine_ids)  # cascades to statements
        _delete_ids(conn, entities, job_ids)
    return CleanupCounts(counts, sorted(f"{schema}.{name}" for _, schema, name in found))
