"""Where an upload puts things: its Systems, the datasets a RENAME moves, other owners' jobs.

Run before the upload's entities, in their transaction (Systems in one of their own): the
entities refer to the Systems by id, a moved dataset keeps its entity (and what hangs on it)
under its new name, and an orchestration flow to another definition's job links to that job's
entity as it is, or to a stub in a neutral reference System that no definition's cleanup visits.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import Connection, select, update

from ol_dagster.catalog.embedded import reads
from ol_dagster.catalog.embedded.bulk import Bulk
from ol_dagster.catalog.embedded.tables import (
    JOB,
    JOB_REFERENCE,
    data_flows,
    entities,
    field_flows,
    fields,
    systems,
)
from ol_dagster.catalog.name_keys import among, is_, name_key
from ol_dagster.catalog.renames import may_move, renames
from ol_dagster.lineage import LineageGraph
from ol_dagster.lineage.graph import NodeKey
from ol_dagster.sync_definition import SyncDefinition


def ensure_systems(conn: Connection, wanted: dict[str, dict]) -> dict[str, int]:
    """Get or create Systems; ``wanted`` maps a System to the properties it gets if created."""
    ids: dict[str, int] = {}
    for sid, name, props in conn.execute(
        select(systems.c.id, systems.c.name, systems.c.properties).where(
            among(systems, "name_key", list(wanted))
        )
    ):
        ids[name] = sid
        mark = wanted[name].get("openLineageJobSystem")
        marks = list((props or {}).get("openLineageJobSystem") or [])
        if mark and mark[0] not in marks:
            conn.execute(
                systems.update()
                .where(systems.c.id == sid)
                .values(properties={**(props or {}), "openLineageJobSystem": marks + mark})
            )
    for name, props in wanted.items():
        if name not in ids:
            ids[name] = conn.execute(
                systems.insert().values(name=name, properties=props)
            ).inserted_primary_key[0]  # type: ignore[index]
    return ids


def apply_renames(
    conn: Connection,
    graph: LineageGraph,
    definition: SyncDefinition,
    sys_ids: dict[str, int],
) -> list[str]:
    """Move each dataset a RENAME names when the rule says it moves (``catalog.renames``):
    its previous System exists, both Systems are this definition's to change, the old
    entity exists and the new name does not. Returns the renames applied, as
    ``"ns:name -> ns:name"``."""
    renamed: list[str] = []
    for r in renames(graph, definition):
        d, prev = r.dataset, r.previous
        found = conn.execute(
            select(systems.c.id, systems.c.properties).where(is_(systems, "name_key", prev.system))
        ).first()
        if found is None:
            continue
        old_system, props = found[0], found[1] or {}
        target = sys_ids[d.system]
        target_props = conn.execute(
            select(systems.c.properties).where(systems.c.id == target)
        ).scalar()
        if not may_move(definition, props, target_props or {}):
            continue
        exists = conn.execute(
            select(entities.c.id).where(
                entities.c.system_id == target,
                is_(entities, "identity_key", d.schema, d.object_name),
            )
        ).scalar()
        if exists is not None:
            continue
        moved = conn.execute(
            update(entities)
            .where(
                entities.c.system_id == old_system,
                is_(entities, "identity_key", prev.schema, prev.name),
                entities.c.type != JOB,
            )
            .values(
                system_id=target,
                schema=d.schema,
                name=d.object_name,
                identity_key=name_key(d.schema, d.object_name),
                ol_namespace=d.namespace,
                ol_name=d.name,
            )
        ).rowcount
        if moved:
            renamed.append(r.label)
            forget_digests_linking(conn, target, d.schema, d.object_name)
    return renamed


def forget_digests_linking(conn: Connection, system_id: int, schema: str, name: str) -> None:
    """A moved entity takes its flows (and its fields' flows) along: the digests of the jobs
    owning them, of any definition, still name its old identity, so a later upload of one of
    those jobs, unchanged, would only stamp the flows at the new name and never write them at
    the name it describes. Cleared, each of those jobs is sent again whole next time."""
    moved = select(entities.c.id).where(
        entities.c.system_id == system_id, is_(entities, "identity_key", schema, name)
    )
    its_fields = select(fields.c.id).where(fields.c.entity_id.in_(moved))
    f, ff = data_flows.c, field_flows.c
    owners = {
        *conn.execute(
            select(f.scope_namespace, f.scope_job).where(
                f.from_entity.in_(moved) | f.to_entity.in_(moved)
            )
        ).tuples(),
        *conn.execute(
            select(ff.scope_namespace, ff.scope_job).where(
                ff.from_field.in_(its_fields) | ff.to_field.in_(its_fields)
            )
        ).tuples(),
    }
    for job in sorted(o for o in owners if o[0] is not None):
        conn.execute(
            update(entities)
            .where(
                entities.c.type == JOB,
                entities.c.ol_namespace == job[0],
                entities.c.ol_name == job[1],
            )
            .values(content_hash=None)
        )


def link_foreign_jobs(
    bulk: Bulk,
    conn: Connection,
    jobs: list[NodeKey],
    taken: Collection[str],
    now: datetime,
    upload_id: str,
) -> tuple[dict[NodeKey, int], int]:
    """Entity ids for other definitions' jobs that orchestration flows need: their existing
    entity (left as it is: not this definition's to touch), else a stub in a neutral reference
    System named after the namespace, which no definition's cleanup visits. Returns the ids and
    how many stubs this upload created."""
    ids: dict[NodeKey, int] = {}
    missing: list[NodeKey] = []
    for key in jobs:
        eid = reads.job_entity_id(conn, *key)
        if eid is None:
            missing.append(key)
        else:
            ids[key] = eid
    created = 0
    ref_systems: dict[str, int] = {}
    for ns, name in missing:
        if ns not in ref_systems:
            ref_systems[ns] = reference_system(conn, ns, taken)
        identity = {"system_id": ref_systems[ns], "schema": ns, "name": name}
        eid = conn.execute(
            bulk.insert(entities)
            .values(
                **identity,
                identity_key=name_key(ns, name),
                type=JOB,
                ol_namespace=ns,
                ol_name=name,
                properties={},
                last_update=now,
                created_by=upload_id,
            )
            .on_conflict_do_nothing(index_elements=["system_id", "identity_key"])
            .returning(entities.c.id)
        ).scalar()
        if eid is None:  # already there (not as a job entity: the lookup would have found it)
            eid = conn.execute(
                select(entities.c.id).where(
                    entities.c.system_id == identity["system_id"],
                    is_(entities, "identity_key", ns, name),
                )
            ).scalar_one()
        else:
            created += 1
        ids[(ns, name)] = eid
    return ids, created


def reference_system(conn: Connection, namespace: str, taken: Collection[str]) -> int:
    """The neutral System of a namespace's job stubs: named after the namespace, unless that
    name is a System of another kind (or one this definition uses), then a suffixed name."""
    n = 0
    while True:
        name = namespace if n == 0 else f"{namespace} [job references {n}]"
        n += 1
        if name in taken:
            continue
        row = conn.execute(
            select(systems.c.id, systems.c.properties).where(is_(systems, "name_key", name))
        ).first()
        if row is None:
            return conn.execute(
                systems.insert().values(name=name, properties={"kind": JOB_REFERENCE})
            ).inserted_primary_key[0]  # type: ignore[index]
        props = row[1] or {}
        if (
            props.get("kind") == JOB_REFERENCE
            and not props.get("openLineageOwner")
            and not props.get("openLineageJobSystem")
        ):
            return row[0]
