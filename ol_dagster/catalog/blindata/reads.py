"""Reads for the ``systems``, ``lineage`` and job-schema views, from what the upload wrote.

Lineage is rebuilt from the flows in scopes ``ol:`` (their ``openLineageFrom``/``To`` and kind),
and a job's existence from the entities of the job Systems, so a read never needs a ledger. The
graph walk itself is every backend's (``catalog.lineage_reads``), shared so all answer alike.
"""

from __future__ import annotations

from typing import Any

from ol_dagster.catalog.blindata import api
from ol_dagster.catalog.blindata.client import BlindataClient
from ol_dagster.catalog.blindata.finders import find_system
from ol_dagster.catalog.blindata.shapes import flow_owner, props_of, uuid_of
from ol_dagster.catalog.lineage_reads import NodeNotFound, job_node, lineage_of_edges, parse_node


def systems(client: BlindataClient) -> list[dict[str, Any]]:
    return sorted(
        (
            {**props_of(s), "name": s["name"]}
            for s in client.pages(api.SYSTEMS, {})
            if s.get("name")
        ),
        key=lambda s: s["name"],
    )


def job_schemas(client: BlindataClient, system: str) -> list[str]:
    uid = uuid_of(find_system(client, system))
    if uid is None:
        return []
    found = {
        str(e.get("schema") or "")
        for e in client.pages(api.PHYSICAL_ENTITIES, {"systemUuid": uid})
        if e.get("tableType") == api.JOB_TABLE_TYPE and (uuid_of(e.get("system")) or uid) == uid
    }
    found |= {
        str(r.get("schema") or "")
        for r in client.pages(api.SYSTEM_ROUTINES, {"systemUuid": uid})
        if (uuid_of(r.get("system")) or uid) == uid
    }
    return sorted(found)


def lineage(
    client: BlindataClient, node: str, *, depth: int, upstream: bool, downstream: bool
) -> dict[str, Any]:
    """Lineage around a node from the OpenLineage flows in Blindata (scopes ``ol:``): a data
    flow ``A -> B`` of job J is ``A -> J -> B``; an orchestration flow is parent -> child."""
    kind, _ = parse_node(node)
    edges: set[tuple[str, str]] = set()
    for f in client.pages(api.DATA_FLOWS, {"scopePrefix": "ol:"}):
        props = props_of(f)
        src, dst, flow_kind = (
            props.get(api.PROP_FROM),
            props.get(api.PROP_TO),
            props.get(api.PROP_KIND),
        )
        if not src or not dst:
            continue
        if flow_kind == "orchestration":
            edges.add((str(src), str(dst)))
            continue
        owner = flow_owner(f)
        if flow_kind != "data" or owner is None:
            continue
        job = job_node(owner)
        edges.add((str(src), job))
        edges.add((job, str(dst)))
    known = {n for e in edges for n in e}
    if node not in known and not (kind == "job" and _job_exists(client, node)):
        raise NodeNotFound(f"{node} is not in the catalog")
    return lineage_of_edges(node, edges, depth=depth, upstream=upstream, downstream=downstream)


def _job_exists(client: BlindataClient, node: str) -> bool:
    _, candidates = parse_node(node)
    for system in client.pages(api.SYSTEMS, {}):
        if not props_of(system).get(api.PROP_JOB_SYSTEM) or not uuid_of(system):
            continue
        for ns, name in candidates:
            for e in client.pages(
                api.PHYSICAL_ENTITIES,
                {"systemUuid": uuid_of(system), "schema": ns, "name": name},
            ):
                props = props_of(e)
                if props.get(api.PROP_NAMESPACE) == ns and props.get(api.PROP_NAME) == name:
                    return True
    return False
