"""Reading the embedded catalog: Systems, counts, and lineage around a node.

Lineage is read the way Marquez shows it: datasets and jobs are nodes (``dataset:<ns>:<name>``,
``job:<ns>:<name>``), a data flow ``A -> B`` in scope ``ol:<ns>|<job>`` is the two edges
``A -> job`` and ``job -> B``, and an orchestration flow is ``parent job -> child job``. Node
parsing and ``NodeNotFound`` are every backend's (``catalog.lineage_reads``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, func, select

from ol_dagster.catalog.embedded import tables as t
from ol_dagster.catalog.lineage_reads import NodeNotFound, parse_node
from ol_dagster.catalog.name_keys import is_
from ol_dagster.lineage.graph import flow_scope


def list_systems(conn: Connection) -> list[dict[str, Any]]:
    return [
        {"name": name, **(props or {})}
        for name, props in conn.execute(
            select(t.systems.c.name, t.systems.c.properties).order_by(t.systems.c.name)
        )
    ]


def counts(conn: Connection) -> dict[str, int]:
    def n(table, *where) -> int:
        return conn.execute(select(func.count()).select_from(table).where(*where)).scalar_one()

    e = t.entities.c
    return {
        "systems": n(t.systems),
        "jobs": n(t.entities, e.type == t.JOB),
        "datasets": n(t.entities, e.type != t.JOB),
        "fields": n(t.fields),
        "routines": n(t.routines),
        "dataFlows": n(t.data_flows, t.data_flows.c.kind == t.DATA),
        "orchestrationFlows": n(t.data_flows, t.data_flows.c.kind == t.ORCHESTRATION),
        "fieldFlows": n(t.field_flows),
        "qualityChecks": n(t.quality_checks),
        "disabledQualityChecks": n(t.quality_checks, t.quality_checks.c.enabled.is_(False)),
    }


def job_schemas(conn: Connection, system: str) -> list[str]:
    sid = select(t.systems.c.id).where(is_(t.systems, "name_key", system)).scalar_subquery()
    e, r = t.entities.c, t.routines.c
    found = {
        s for (s,) in conn.execute(select(e.schema).where(e.system_id == sid, e.type == t.JOB))
    }
    found |= {s for (s,) in conn.execute(select(r.schema).where(r.system_id == sid))}
    return sorted(found)


def job_names(conn: Connection) -> list[str]:
    e = t.entities.c
    rows = conn.execute(select(e.schema, e.name).where(e.type == t.JOB).order_by(e.schema, e.name))
    return [f"{s}.{n}" for s, n in rows]


def job_entity_id(conn: Connection, namespace: str, name: str) -> int | None:
    """The job entity of an OpenLineage job, wherever it is filed: a job another definition
    uploaded (or one moved between job Systems) may exist in several Systems; an entity in a
    real job System wins over a reference stub, then the oldest."""
    e, s = t.entities.c, t.systems.c
    found = conn.execute(
        select(e.id, s.properties)
        .join(t.systems, s.id == e.system_id)
        .where(e.type == t.JOB, e.ol_namespace == namespace, e.ol_name == name)
    ).all()
    if not found:
        return None
    return min(found, key=lambda r: ((r[1] or {}).get("kind") == t.JOB_REFERENCE, r[0]))[0]


def _find_entity(conn: Connection, node: str) -> int:
    kind, candidates = parse_node(node)
    e = t.entities.c
    type_match = (e.type == t.JOB) if kind == "job" else (e.type != t.JOB)
    for ns, name in candidates:
        if kind == "job":
            if (jid := job_entity_id(conn, ns, name)) is not None:
                return jid
            continue
        row = conn.execute(
            select(e.id).where(e.ol_namespace == ns, e.ol_name == name, type_match)
        ).first()
        if row is not None:
            return row[0]
    raise NodeNotFound(f"{node} is not in the catalog")


def lineage(
    conn: Connection, node: str, *, depth: int, upstream: bool, downstream: bool
) -> dict[str, Any]:
    start_id = _find_entity(conn, node)
    e = t.entities.c
    f = t.data_flows.c

    ident: dict[int, str] = {}

    def entity_node(eid: int) -> str:
        if eid not in ident:
            row = conn.execute(select(e.type, e.ol_namespace, e.ol_name).where(e.id == eid)).one()
            prefix = "job" if row[0] == t.JOB else "dataset"
            ident[eid] = f"{prefix}:{row[1]}:{row[2]}"
        return ident[eid]

    def job_entity(job: tuple[str, str]) -> int | None:
        return job_entity_id(conn, *job)

    nodes: dict[str, str] = {}
    edges: set[tuple[str, str]] = set()

    def add(node_id: str) -> None:
        nodes[node_id] = node_id.split(":", 1)[0]

    def neighbours(eid: int, up: bool) -> list[int]:
        """Entity ids one hop away, recording the edges on the way."""
        out: list[int] = []
        me = entity_node(eid)
        is_job = me.startswith("job:")
        if is_job:
            ns_, name_ = conn.execute(select(e.ol_namespace, e.ol_name).where(e.id == eid)).one()
            scope = flow_scope(ns_, name_)
            col = f.from_entity if up else f.to_entity
            of_job = is_(t.data_flows, "scope_key", scope)
            for (other,) in conn.execute(select(col).where(of_job, f.kind == t.DATA).distinct()):
                out.append(other)
                o = entity_node(other)
                edges.add((o, me) if up else (me, o))
            # orchestration: parent above, children below
            mine, theirs = (f.to_entity, f.from_entity) if up else (f.from_entity, f.to_entity)
            for (other,) in conn.execute(
                select(theirs).where(mine == eid, f.kind == t.ORCHESTRATION).distinct()
            ):
                out.append(other)
                o = entity_node(other)
                edges.add((o, me) if up else (me, o))
            return out
        col_self = f.to_entity if up else f.from_entity
        for job in conn.execute(
            select(f.scope_namespace, f.scope_job)
            .where(col_self == eid, f.kind == t.DATA)
            .distinct()
        ):
            jid = job_entity((job[0], job[1])) if job[0] is not None else None
            if jid is None:
                continue
            j = entity_node(jid)
            edges.add((j, me) if up else (me, j))
            out.append(jid)
        return out

    add(entity_node(start_id))
    for up, wanted in ((True, upstream), (False, downstream)):
        if not wanted:
            continue
        frontier, seen = [start_id], {start_id}
        for _ in range(depth):
            nxt = []
            for eid in frontier:
                for other in neighbours(eid, up):
                    add(entity_node(other))
                    if other not in seen:
                        seen.add(other)
                        nxt.append(other)
            frontier = nxt
            if not frontier:
                break
    return {
        "nodes": [{"id": n, "type": k} for n, k in sorted(nodes.items())],
        "edges": [{"from": a, "to": b} for a, b in sorted(edges)],
    }
