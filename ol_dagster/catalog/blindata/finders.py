"""From natural keys to Blindata uuids: Systems, entities, fields, routines and flows.

Blindata is addressed by uuid, ol-dagster by natural key (a System's name; an entity's System,
schema and name; a field's entity and name; a routine's System, schema and name; a flow's scope and
ends). These finders read the server, page by page, and compare exactly (a search parameter may
match substrings), so the upload, the cleanup and the reads resolve a key the same way.
"""

from __future__ import annotations

from typing import Any

from ol_dagster.catalog.blindata import api
from ol_dagster.catalog.blindata.client import CREATED, BlindataClient
from ol_dagster.catalog.blindata.shapes import (
    EntityKey,
    FlowKey,
    flow_key,
    json_body,
    prop_list,
    props_of,
    uuid_of,
)
from ol_dagster.catalog.http import CatalogRefused


def find_system(client: BlindataClient, name: str) -> dict[str, Any] | None:
    for system in client.pages(api.SYSTEMS, {"name": name}):
        if system.get("name") == name:  # ``name=`` may match substrings: compare exactly
            return system
    return None


def ensure_systems(client: BlindataClient, wanted: dict[str, dict]) -> dict[str, dict[str, Any]]:
    """Get or create every System; a job System gets this definition's mark if missing.
    Returns name -> ``{"uuid", "props"}``."""
    out: dict[str, dict[str, Any]] = {}
    for name, want in wanted.items():
        found = find_system(client, name)
        mark = want.get("openLineageJobSystem") or []
        if found is None:
            props = {k: v for k, v in want.items() if k != "kind"}
            body: dict[str, Any] = {
                "name": name,
                "description": "Created by ol-dagster from OpenLineage events",
                "additionalProperties": prop_list(props),
            }
            if want.get("kind") == "job":
                body["subtype"] = api.SYSTEM_SUBTYPE_JOB
            uid, how = client.create(
                api.SYSTEMS, body, lambda n=name: uuid_of(find_system(client, n))
            )
            if how == CREATED:
                out[name] = {"uuid": uid, "props": props_of(body)}
                continue
            found = find_system(client, name)
            if found is None or not uuid_of(found):
                raise CatalogRefused(f"POST {api.SYSTEMS}: {name!r} cannot be found", 409)
        uid = uuid_of(found)
        assert found is not None and uid is not None
        props = props_of(found)
        marks = props.get(api.PROP_JOB_SYSTEM) or []
        if mark and mark[0] not in marks:
            extra = [{"name": api.PROP_JOB_SYSTEM, "value": mark[0]}]
            body = {
                k: found[k]
                for k in ("name", "description", "technology", "subtype")
                if found.get(k) is not None
            }
            body["additionalProperties"] = list(found.get("additionalProperties") or []) + extra
            client.http.request("PUT", api.SYSTEM.format(uuid=uid), json={**body, "uuid": uid})
            props = props_of(body)
        out[name] = {"uuid": uid, "props": props}
    return out


def entities_of(
    client: BlindataClient, system_uuid: str, schema: str
) -> dict[EntityKey, dict[str, Any]]:
    """The entities of a System in one schema, by natural key."""
    params: dict[str, Any] = {"systemUuid": system_uuid, "schema": schema}
    if schema:
        params["search"] = schema
    out: dict[EntityKey, dict[str, Any]] = {}
    for e in client.pages(api.PHYSICAL_ENTITIES, params):
        sys_uuid = uuid_of(e.get("system")) or system_uuid
        if sys_uuid == system_uuid and (e.get("schema") or "") == schema and e.get("name"):
            out[(system_uuid, schema, str(e["name"]))] = e
    return out


def find_entity(client: BlindataClient, key: EntityKey) -> str | None:
    system_uuid, schema, name = key
    params = {
        "systemUuid": system_uuid,
        "schema": schema,
        "name": name,
        "search": f"{schema}.{name}" if schema else name,
        api.SIZE_PARAM: api.PAGE_SIZE,
    }
    content = json_body(client.get(api.PHYSICAL_ENTITIES, params)).get("content") or []
    for e in content:
        if (
            isinstance(e, dict)
            and (uuid_of(e.get("system")) or system_uuid) == system_uuid
            and (e.get("schema") or "") == schema
            and e.get("name") == name
        ):
            return uuid_of(e)
    return None


def fields_of(client: BlindataClient, system_uuid: str, schema: str) -> dict[tuple[str, str], str]:
    """Fields of the entities of one schema: (entity uuid, field name) -> field uuid."""
    out: dict[tuple[str, str], str] = {}
    params = {"systemUuid": system_uuid, "physicalEntitySchema": schema}
    for f in client.pages(api.PHYSICAL_FIELDS, params):
        entity = f.get("physicalEntity") or {}
        eid, uid = uuid_of(entity), uuid_of(f)
        if eid and uid and f.get("name") is not None:
            out[(eid, str(f["name"]))] = uid
    return out


def find_field(
    client: BlindataClient, entity: EntityKey, entity_uuid: str, name: str
) -> str | None:
    params = {
        "systemUuid": entity[0],
        "physicalEntitySchema": entity[1],
        "physicalEntityName": entity[2],
        "physicalFieldName": name,
        api.SIZE_PARAM: api.PAGE_SIZE,
    }
    for f in json_body(client.get(api.PHYSICAL_FIELDS, params)).get("content") or []:
        if (
            isinstance(f, dict)
            and f.get("name") == name
            and uuid_of(f.get("physicalEntity")) in (entity_uuid, None)
        ):
            return uuid_of(f)
    return None


def routines_of(client: BlindataClient, system_uuid: str, schema: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for r in client.pages(api.SYSTEM_ROUTINES, {"systemUuid": system_uuid, "schema": schema}):
        if (
            (uuid_of(r.get("system")) or system_uuid) == system_uuid
            and (r.get("schema") or "") == schema
            and r.get("name")
            and uuid_of(r)
        ):
            out[str(r["name"])] = uuid_of(r)  # type: ignore[assignment]
    return out


def flows_with_prefix(client: BlindataClient, prefix: str) -> dict[FlowKey, str]:
    out: dict[FlowKey, str] = {}
    for f in client.pages(api.DATA_FLOWS, {"scopePrefix": prefix}):
        uid = uuid_of(f)
        if uid and str(f.get("scope") or "").startswith(prefix):
            out[flow_key(f)] = uid
    return out


def find_flow(client: BlindataClient, key: FlowKey) -> str | None:
    for f in client.pages(api.DATA_FLOWS, {"scope": key[0]}):
        if flow_key(f) == key:
            return uuid_of(f)
    return None


def find_job_entity(client: BlindataClient, namespace: str, name: str) -> tuple[str, str] | None:
    """(System uuid, entity uuid) of the job entity ``namespace.name`` in any System; its
    owner's job System rather than a neutral one when both hold it."""
    params = {"schema": namespace, "name": name, "search": f"{namespace}.{name}"}
    hits = [
        e
        for e in client.pages(api.PHYSICAL_ENTITIES, params)
        if (e.get("schema") or "") == namespace
        and e.get("name") == name
        and e.get("tableType") == api.JOB_TABLE_TYPE
        and uuid_of(e)
        and uuid_of(e.get("system"))
    ]
    if not hits:
        return None

    def system_name(e: dict[str, Any]) -> str:
        system = e.get("system")
        return str(system.get("name") or "") if isinstance(system, dict) else ""

    best = min(hits, key=lambda e: (system_name(e) == namespace, system_name(e), uuid_of(e)))
    return uuid_of(best.get("system")), uuid_of(best)  # type: ignore[return-value]
