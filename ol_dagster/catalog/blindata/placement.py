"""Entities whose place crosses an ownership line: renamed datasets and other owners' parent jobs.

Both decide, before anything is written, whether this definition may touch an entity another
System holds. A RENAME moves the entity in place only in Systems this definition owns and may
clean; a parent job another owner describes is referenced where it exists, or created in a neutral
System (no ``openLineageOwner``, no ``openLineageJobSystem``) that no definition's cleanup visits.
Kept apart from the plain upsert path so that these ownership rules are read in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ol_dagster.catalog.blindata import api
from ol_dagster.catalog.blindata.client import BlindataClient, UploadStopped
from ol_dagster.catalog.blindata.finders import (
    ensure_systems,
    find_entity,
    find_job_entity,
    find_system,
)
from ol_dagster.catalog.blindata.shapes import EntityKey, prop_list, props_of, uuid_of
from ol_dagster.catalog.http import CatalogRefused
from ol_dagster.catalog.protocol import FailedRow, ObjectType, UploadResult
from ol_dagster.catalog.renames import may_move, renames
from ol_dagster.lineage import LineageGraph
from ol_dagster.lineage.graph import NodeKey
from ol_dagster.sync_definition import CleanupMode, SyncDefinition

# a dropped row: a foreign parent job whose neutral System (named after its namespace) is in fact
# another definition's, so neither it nor the orchestration flow to it can be written safely
PARENT_NOT_PLACED = "FOREIGN_PARENT_NOT_PLACED"


def apply_renames(
    client: BlindataClient,
    graph: LineageGraph,
    definition: SyncDefinition,
    systems: dict[str, dict[str, Any]],
    result: UploadResult,
) -> None:
    """Move each dataset a RENAME names when the rule says it moves (``catalog.renames``): its
    previous System exists, both Systems are this definition's to change, the old entity
    exists and the new name does not. Otherwise the new name is uploaded as a new entity."""
    found: dict[str, dict[str, Any] | None] = {}
    for r in renames(graph, definition):
        d, prev = r.dataset, r.previous
        if prev.system not in systems and prev.system not in found:
            system = find_system(client, prev.system)
            found[prev.system] = (
                {"uuid": uuid_of(system), "props": props_of(system)}
                if system is not None and uuid_of(system)
                else None
            )
        old_system = systems.get(prev.system) or found.get(prev.system)
        if old_system is None:
            continue
        if not may_move(definition, old_system["props"], systems[d.system]["props"]):
            continue  # another owner's (or a never-cleaned) System: not ours to change
        old = find_entity(client, (old_system["uuid"], prev.schema, prev.name))
        target = (systems[d.system]["uuid"], d.schema, d.object_name)
        if old is None or find_entity(client, target) is not None:
            continue
        client.http.request(
            "PUT",
            api.PHYSICAL_ENTITY.format(uuid=old),
            json={
                "uuid": old,
                "system": {"uuid": target[0]},
                "schema": target[1] or None,
                "name": target[2],
                "tableType": d.type.upper(),
                "additionalProperties": prop_list(
                    {api.PROP_NAMESPACE: d.namespace, api.PROP_NAME: d.name}
                ),
            },
        )
        result.renamed.append(r.label)


def foreign_parents(
    client: BlindataClient, keys: Sequence[NodeKey], result: UploadResult
) -> dict[NodeKey, tuple[EntityKey, str]]:
    """Place the parent jobs another owner describes, so the orchestration flows to them can
    be written: the job entity that exists anywhere (its owner's job System) is referenced
    and never updated; a parent that exists nowhere is created in a neutral System named
    after its namespace, without ``openLineageOwner`` or ``openLineageJobSystem``, so that
    no definition's cleanup ever visits it. A System of that name that is not neutral
    (another definition's) is left alone, and so are the flows to the parent: dropped rows.
    Returns node -> (entity key, entity uuid)."""
    out: dict[NodeKey, tuple[EntityKey, str]] = {}
    neutral: dict[str, str | None] = {}  # namespace -> neutral System uuid, None: not neutral
    created = 0
    for key in keys:
        ns, name = key
        try:
            hit = find_job_entity(client, ns, name)
            if hit is None:
                if ns not in neutral:
                    neutral[ns] = _neutral_system(client, ns)
                system_uuid = neutral[ns]
                if system_uuid is None:
                    result.dropped[PARENT_NOT_PLACED] = result.dropped.get(PARENT_NOT_PLACED, 0) + 1
                    continue
                hit = (system_uuid, _create_job_entity(client, system_uuid, ns, name))
                created += 1
        except CatalogRefused as exc:
            result.failed.append(
                FailedRow(ObjectType.PHYSICAL_ENTITIES, f"{ns}.{name}", client.reason(exc))
            )
            if exc.status in (401, 403):
                raise UploadStopped(ObjectType.PHYSICAL_ENTITIES) from None
            continue
        out[key] = ((hit[0], ns, name), hit[1])
    if created:
        written = result.written.get(ObjectType.PHYSICAL_ENTITIES, 0)
        result.written[ObjectType.PHYSICAL_ENTITIES] = written + created
    return out


def _neutral_system(client: BlindataClient, namespace: str) -> str | None:
    """The uuid of the System named after ``namespace`` that no definition owns or cleans
    (created when missing, with no properties); None when that System is someone's."""
    found = find_system(client, namespace)
    if found is None:
        return ensure_systems(client, {namespace: {"kind": "job"}})[namespace]["uuid"]
    props = props_of(found)
    mode = props.get(api.PROP_CLEANUP_MODE) or CleanupMode.NONE.value
    if props.get(api.PROP_OWNER) or props.get(api.PROP_JOB_SYSTEM):
        return None
    if mode != CleanupMode.NONE.value:
        return None
    return uuid_of(found)


def _create_job_entity(client: BlindataClient, system_uuid: str, namespace: str, name: str) -> str:
    """Create a parent job's entity (never update one: 409 means it exists; read it)."""
    body = {
        "system": {"uuid": system_uuid},
        "schema": namespace,
        "name": name,
        "description": "A parent job another owner describes (from a child's parent facet)",
        "tableType": api.JOB_TABLE_TYPE,
        "additionalProperties": prop_list({api.PROP_NAMESPACE: namespace, api.PROP_NAME: name}),
    }
    uid, _ = client.create(
        api.PHYSICAL_ENTITIES, body, lambda: find_entity(client, (system_uuid, namespace, name))
    )
    return uid
