"""The Blindata upload: every object the graph describes, in the order their references need.

Systems first, then renames and entities (jobs in their job System, datasets where they were
placed), other owners' parent jobs, fields, routines, flows and quality suites. Each step reads
what exists (by page), upserts its rows concurrently and stops the upload when a row failed,
since later objects refer to these by uuid. The upload deletes nothing: a DROP is the cleanup's
``drop_datasets`` call, behind the cleanup's guards.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ol_dagster.catalog.blindata import api
from ol_dagster.catalog.blindata.client import BlindataClient, UploadStopped, Write
from ol_dagster.catalog.blindata.finders import (
    ensure_systems,
    entities_of,
    fields_of,
    find_entity,
    find_field,
    routines_of,
)
from ol_dagster.catalog.blindata.flows import upload_flows
from ol_dagster.catalog.blindata.placement import apply_renames, foreign_parents
from ol_dagster.catalog.blindata.quality import QUALITY, upload_quality
from ol_dagster.catalog.blindata.shapes import (
    EntityKey,
    EntityRefs,
    NodeEntity,
    iso,
    prop_list,
    uuid_of,
)
from ol_dagster.catalog.http import CatalogRefused, CatalogUnavailable
from ol_dagster.catalog.protocol import FailedRow, ObjectType, UploadResult
from ol_dagster.catalog.systems import foreign_job, job_system_for, wanted_systems
from ol_dagster.lineage import LineageGraph
from ol_dagster.lineage.graph import NodeKey
from ol_dagster.sync_definition import SyncDefinition

SYSTEMS = "systems"


def upload_systems(
    graph: LineageGraph, definition: SyncDefinition, job_sys: Mapping[NodeKey, str]
) -> dict[str, dict]:
    """The Systems an upload writes to (``wanted_systems``), with Blindata's property names."""
    wanted = wanted_systems(graph, definition)
    for system in sorted(set(job_sys.values()) - set(wanted)):
        wanted[system] = {"kind": "job", api.PROP_JOB_SYSTEM: [str(definition.uuid)]}
    return wanted


def upload(client: BlindataClient, graph: LineageGraph, definition: SyncDefinition) -> UploadResult:
    """Write everything the graph describes; a failure outside a row is a row of its phase."""
    result = UploadResult()
    phase = [SYSTEMS]  # what was being written, for a failure outside a row
    try:
        _upload(client, graph, definition, result, phase)
    except UploadStopped:
        pass  # the failed rows say why
    except (CatalogUnavailable, CatalogRefused) as exc:
        result.failed.append(FailedRow(phase[0], "*", client.reason(exc)))
    return result


def _upload(
    client: BlindataClient,
    graph: LineageGraph,
    definition: SyncDefinition,
    result: UploadResult,
    phase: list[str],
) -> None:
    # another owner's parent jobs get no job System of this definition (see foreign_parents)
    foreign = {key for key, j in graph.jobs.items() if foreign_job(definition, j)}
    job_sys = {key: job_system_for(definition, key[0]) for key in graph.jobs if key not in foreign}
    systems = ensure_systems(client, upload_systems(graph, definition, job_sys))
    sys_uuid = {name: s["uuid"] for name, s in systems.items()}
    phase[0] = ObjectType.PHYSICAL_ENTITIES
    apply_renames(client, graph, definition, systems, result)

    rows, node_entity = _entity_rows(graph, foreign, job_sys, sys_uuid)
    existing: dict[EntityKey, dict[str, Any]] = {}
    for system_uuid, schema in sorted({(k[0], k[1]) for k in rows}):
        existing.update(entities_of(client, system_uuid, schema))
    entity_uuid = _write_entities(client, rows, existing, result)
    if result.failed:
        return  # later objects refer to these entities
    parents = {o.parent for o in graph.orchestration_flows if o.parent in foreign}
    for key, (ek, uid) in foreign_parents(client, sorted(parents), result).items():
        node_entity[("job", key)] = ek
        entity_uuid[ek] = uid
    if result.failed:
        return

    phase[0] = ObjectType.PHYSICAL_FIELDS
    field_uuid = _write_fields(client, graph, node_entity, entity_uuid, existing, result)
    if result.failed:
        return

    phase[0] = ObjectType.ROUTINES
    _upload_routines(client, graph, sys_uuid, job_sys, result)
    if result.failed:
        return
    refs = EntityRefs(node_entity, entity_uuid, field_uuid)
    phase[0] = ObjectType.DATA_FLOWS
    upload_flows(client, graph, refs, result)
    if result.failed:
        return
    phase[0] = QUALITY
    upload_quality(client, graph, refs, result)
    # a DROP is not carried out here: the cleanup's ``drop_datasets`` call does it, behind
    # the cleanup's guards (dry run, removal cap, permission)


def _entity_rows(
    graph: LineageGraph,
    foreign: set[NodeKey],
    job_sys: dict[NodeKey, str],
    sys_uuid: dict[str, str],
) -> tuple[dict[EntityKey, dict[str, Any]], NodeEntity]:
    """Entity bodies by natural key: jobs in their job System at schema = namespace, datasets
    where they were placed; and which entity each node is."""
    rows: dict[EntityKey, dict[str, Any]] = {}
    node_entity: NodeEntity = {}
    for key, j in graph.jobs.items():
        if key in foreign:
            continue
        ek = (sys_uuid[job_sys[key]], j.namespace, j.name)
        node_entity[("job", key)] = ek
        m = j.metrics
        rows[ek] = {
            "system": {"uuid": ek[0]},
            "schema": j.namespace,
            "name": j.name,
            "description": j.description,
            "tableType": api.JOB_TABLE_TYPE,
            "additionalProperties": prop_list(
                {
                    api.PROP_NAMESPACE: j.namespace,
                    api.PROP_NAME: j.name,
                    "integration": j.integration,
                    "jobType": j.job_type,
                    "processingType": j.processing_type,
                    "sourceCodeLocation": j.source_code_location,
                    "owner": list(j.owners),
                    "runs": m.runs or None,
                    "failures": m.failures or None,
                    "lastRun": iso(m.last_run) if m.last_run else None,
                    "lastRunStatus": m.last_status,
                }
            ),
        }
    for key, d in graph.datasets.items():
        ek = (sys_uuid[d.system], d.schema, d.object_name)
        node_entity[("dataset", key)] = ek
        rows[ek] = {
            "system": {"uuid": ek[0]},
            "schema": d.schema or None,
            "name": d.object_name,
            "description": d.description,
            "tableType": d.type.upper(),
            "additionalProperties": prop_list(
                {api.PROP_NAMESPACE: d.namespace, api.PROP_NAME: d.name, "owner": d.owners}
            ),
        }
    return rows, node_entity


def _write_entities(
    client: BlindataClient,
    rows: dict[EntityKey, dict[str, Any]],
    existing: dict[EntityKey, dict[str, Any]],
    result: UploadResult,
) -> dict[EntityKey, str]:
    def entity_write(ek: EntityKey, body: dict[str, Any]) -> Write:
        found = uuid_of(existing.get(ek))
        return lambda: client.upsert(
            api.PHYSICAL_ENTITIES,
            api.PHYSICAL_ENTITY,
            body,
            found,
            lambda: find_entity(client, ek),
        )

    return client.rows(
        ObjectType.PHYSICAL_ENTITIES,
        [
            (ek, f"{ek[1]}.{ek[2]}" if ek[1] else ek[2], entity_write(ek, b))
            for ek, b in rows.items()
        ],
        result,
    ).values


def _write_fields(
    client: BlindataClient,
    graph: LineageGraph,
    node_entity: NodeEntity,
    entity_uuid: dict[EntityKey, str],
    existing: dict[EntityKey, dict[str, Any]],
    result: UploadResult,
) -> dict[tuple[str, str], str]:
    """Fields on (entity, name); existing ones read per schema of the entities that existed."""
    field_rows: dict[tuple[str, str], tuple[EntityKey, dict[str, Any]]] = {}
    for key, d in graph.datasets.items():
        ek = node_entity[("dataset", key)]
        eid = entity_uuid[ek]
        for f in d.fields.values():
            field_rows[(eid, f.path)] = (
                ek,
                {
                    "physicalEntity": {"uuid": eid},
                    "name": f.path,
                    "type": f.type,
                    "ordinalPosition": f.ordinal,
                    "description": f.description,
                },
            )
    known_fields: dict[tuple[str, str], str] = {}
    for system_uuid, schema in sorted(
        {(ek[0], ek[1]) for ek, _ in field_rows.values() if ek in existing}
    ):
        known_fields.update(fields_of(client, system_uuid, schema))

    def field_write(fk: tuple[str, str], ek: EntityKey, body: dict[str, Any]) -> Write:
        return lambda: client.upsert(
            api.PHYSICAL_FIELDS,
            api.PHYSICAL_FIELD,
            body,
            known_fields.get(fk),
            lambda: find_field(client, ek, fk[0], fk[1]),
        )

    return client.rows(
        ObjectType.PHYSICAL_FIELDS,
        [
            (fk, f"{ek[1]}.{ek[2]}.{fk[1]}", field_write(fk, ek, body))
            for fk, (ek, body) in field_rows.items()
        ],
        result,
    ).values


def _upload_routines(
    client: BlindataClient,
    graph: LineageGraph,
    sys_uuid: dict[str, str],
    job_sys: dict[NodeKey, str],
    result: UploadResult,
) -> None:
    """A job's SQL is a routine of its job System (schema = namespace), the statement its
    ``definition``."""
    items = list(graph.routines.items())
    known: dict[tuple[str, str, str], str] = {}
    for system_uuid, schema in sorted({(sys_uuid[job_sys[k]], k[0]) for k, _ in items}):
        known.update(
            {
                (system_uuid, schema, n): u
                for n, u in routines_of(client, system_uuid, schema).items()
            }
        )

    def write(rk: tuple[str, str, str], body: dict[str, Any]) -> Write:
        def find() -> str | None:
            return routines_of(client, rk[0], rk[1]).get(rk[2])

        return lambda: client.upsert(
            api.SYSTEM_ROUTINES, api.SYSTEM_ROUTINE, body, known.get(rk), find
        )

    entries = []
    for key, r in items:
        rk = (sys_uuid[job_sys[key]], key[0], key[1])
        body = {
            "system": {"uuid": rk[0]},
            "schema": key[0],
            "name": key[1],
            "type": api.ROUTINE_TYPE,
            "definition": r.statement,
            "description": f"SQL of the OpenLineage job {key[0]}.{key[1]}",
            "additionalProperties": prop_list(
                {api.PROP_NAMESPACE: key[0], api.PROP_NAME: key[1], api.PROP_DIALECT: r.dialect}
            ),
        }
        entries.append((rk, f"{key[0]}.{key[1]}", write(rk, body)))
    done = client.rows(ObjectType.ROUTINES, entries, result)
    # each routine carries its one statement (its ``definition``)
    result.written[ObjectType.STATEMENTS] = done.written
    result.touched[ObjectType.STATEMENTS] = done.touched
