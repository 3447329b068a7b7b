"""The upload's data, orchestration and field flows, each upserted on its scope and ends.

A flow refers to entities and fields by uuid, so it is written after them, from the maps the
upload built; each flow carries its ends as lineage node ids (``openLineageFrom``/``To``) and its
kind, which is what ``reads.lineage`` reads back.
"""

from __future__ import annotations

from typing import Any

from ol_dagster.catalog.blindata import api
from ol_dagster.catalog.blindata.client import BlindataClient, Write
from ol_dagster.catalog.blindata.finders import find_flow, flows_with_prefix
from ol_dagster.catalog.blindata.shapes import EntityRefs, FlowKey, node_id, prop_list
from ol_dagster.catalog.protocol import ObjectType, UploadResult
from ol_dagster.lineage import LineageGraph
from ol_dagster.lineage.graph import NodeKey, scope_prefix


def upload_flows(
    client: BlindataClient, graph: LineageGraph, refs: EntityRefs, result: UploadResult
) -> None:
    """Data flows (dataset to dataset), orchestration flows (parent job to child job) and field
    flows, each owned by its scope; upserted on (scope, ends)."""
    known: dict[FlowKey, str] = {}
    for ns in graph.job_namespaces:
        known.update(flows_with_prefix(client, scope_prefix(ns)))

    def end(kind: str, key: NodeKey) -> tuple[str, str]:
        ek, uid = refs.entity(kind, key)
        return ek[0], uid

    entries: list[tuple[FlowKey, str, Write]] = []

    def add(
        scope: str,
        src: tuple[str, str, str | None],
        dst: tuple[str, str, str | None],
        name: str,
        props: dict[str, Any],
    ) -> None:
        fk: FlowKey = (scope, src[0], src[1], src[2], dst[0], dst[1], dst[2])
        body: dict[str, Any] = {
            "name": name[:1000],
            "scope": scope,
            "fromSystem": {"uuid": src[0]},
            "fromPhysicalEntity": {"uuid": src[1]},
            "toSystem": {"uuid": dst[0]},
            "toPhysicalEntity": {"uuid": dst[1]},
            "additionalProperties": prop_list(props),
        }
        if src[2]:
            body["fromPhysicalField"] = {"uuid": src[2]}
        if dst[2]:
            body["toPhysicalField"] = {"uuid": dst[2]}
        entries.append(
            (
                fk,
                f"{scope} {name}",
                lambda: client.upsert(
                    api.DATA_FLOWS,
                    api.DATA_FLOW,
                    body,
                    known.get(fk),
                    lambda: find_flow(client, fk),
                ),
            )
        )

    for f in sorted(graph.data_flows, key=lambda f: (f.scope, f.source, f.target)):
        add(
            f.scope,
            (*end("dataset", f.source), None),
            (*end("dataset", f.target), None),
            f"{f.source[1]} -> {f.target[1]}",
            {
                api.PROP_KIND: "data",
                api.PROP_FROM: node_id("dataset", f.source),
                api.PROP_TO: node_id("dataset", f.target),
            },
        )
    for o in sorted(graph.orchestration_flows, key=lambda o: (o.scope, o.parent, o.child)):
        if ("job", o.parent) not in refs.node_entity:
            continue  # a foreign parent that could not be placed (counted as dropped)
        add(
            o.scope,
            (*end("job", o.parent), None),
            (*end("job", o.child), None),
            f"{o.parent[1]} -> {o.child[1]}",
            {
                api.PROP_KIND: "orchestration",
                api.PROP_FROM: node_id("job", o.parent),
                api.PROP_TO: node_id("job", o.child),
            },
        )
    missing = 0
    for f in sorted(graph.field_flows, key=lambda f: (f.scope, f.source, f.target)):
        src, dst = end("dataset", f.source[:2]), end("dataset", f.target[:2])
        src_field = refs.field_uuid.get((src[1], f.source[2]))
        dst_field = refs.field_uuid.get((dst[1], f.target[2]))
        if src_field is None or dst_field is None:
            missing += 1
            continue
        add(
            f.scope,
            (*src, src_field),
            (*dst, dst_field),
            f"{f.source[1]}.{f.source[2]} -> {f.target[1]}.{f.target[2]}",
            {
                api.PROP_KIND: "field",
                "transformation": f.transformation,
                "subtype": f.subtype,
            },
        )
    if missing:
        result.dropped["MISSING_FIELD"] = result.dropped.get("MISSING_FIELD", 0) + missing
    client.rows(ObjectType.DATA_FLOWS, entries, result)
