"""Blindata's JSON shapes read and written in one place: references, ``additionalProperties``,
timestamps and counts; and the natural keys the upload refers to objects by.

Every other module of the package reads a server answer through these helpers, so each tolerance
(a bare string for a reference, a repeated property name, epoch milliseconds for a date, an empty
or non-JSON body) is decided once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from ol_dagster.catalog.blindata import api
from ol_dagster.lineage.graph import (
    DATA_SCOPE,
    ORCHESTRATION_SCOPE,
    FlowOwner,
    NodeKey,
    parse_legacy_scope,
    parse_scope,
)

EntityKey = tuple[str, str, str]  # (System uuid, schema, name)
FlowKey = tuple[str, str | None, str | None, str | None, str | None, str | None, str | None]
NodeEntity = dict[tuple[str, NodeKey], EntityKey]  # ("job" | "dataset", node) -> entity key


@dataclass(frozen=True, slots=True)
class EntityRefs:
    """What the upload's entities and fields became on the server, for the objects written
    after them (flows, quality checks), which refer to them by uuid."""

    node_entity: NodeEntity
    entity_uuid: dict[EntityKey, str]
    field_uuid: dict[tuple[str, str], str]  # (entity uuid, field path) -> field uuid

    def entity(self, kind: str, key: NodeKey) -> tuple[EntityKey, str]:
        """The entity a node ("job" or "dataset") was written as, and its uuid."""
        ek = self.node_entity[(kind, key)]
        return ek, self.entity_uuid[ek]


def json_body(response: httpx.Response) -> Any:
    """The answer's JSON, or ``{}`` for an empty or unreadable body."""
    if not response.content:
        return {}
    try:
        return response.json()
    except ValueError:
        return {}


def uuid_of(value: Any) -> str | None:
    """The uuid of a reference (``{"uuid": ...}``), tolerant of a bare string or nothing."""
    if isinstance(value, dict):
        uid = value.get("uuid")
        return str(uid) if uid else None
    return str(value) if isinstance(value, str) and value else None


def props_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``additionalProperties`` (a list of ``{name, value}``, names may repeat) as a mapping;
    ``openLineageJobSystem`` keeps every value, in order."""
    out: dict[str, Any] = {}
    marks: list[str] = []
    for p in obj.get("additionalProperties") or []:
        if not isinstance(p, dict) or not p.get("name"):
            continue
        name, value = str(p["name"]), p.get("value")
        if name == api.PROP_JOB_SYSTEM:
            if value:
                marks.append(str(value))
        elif name == api.PROP_CLEANUP_DAYS:
            try:
                out[name] = int(value)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                continue
        else:
            out[name] = value
    if marks:
        out[api.PROP_JOB_SYSTEM] = marks
    return out


def prop_list(values: Mapping[str, Any]) -> list[dict[str, str]]:
    """A mapping as ``additionalProperties``: empty values left out, a list one entry each."""
    out: list[dict[str, str]] = []
    for name, value in values.items():
        if value is None or value == [] or value == "":
            continue
        for v in value if isinstance(value, list) else [value]:
            out.append({"name": name, "value": str(v)})
    return out


def iso(dt: datetime) -> str:
    return dt.astimezone(UTC).isoformat()


def to_int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def parse_when(value: Any) -> datetime | None:
    """A JSON timestamp (ISO-8601, or epoch milliseconds) as an aware datetime, if it is one."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value / 1000, UTC)
    if not isinstance(value, str) or not value:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def node_id(kind: str, key: NodeKey) -> str:
    return f"{kind}:{key[0]}:{key[1]}"


def flow_owner(flow: Mapping[str, Any]) -> FlowOwner | None:
    """Who owns a flow read from the server, from its scope: as ``FlowOwner.scope`` writes it,
    or as it was written before names were encoded (Blindata's flows are not migrated; such a
    flow keeps its string until a cleanup removes it). None: not an OpenLineage scope."""
    scope = str(flow.get("scope") or "")
    kind = (
        ORCHESTRATION_SCOPE if props_of(flow).get(api.PROP_KIND) == "orchestration" else DATA_SCOPE
    )
    return parse_scope(scope) or parse_legacy_scope(scope, kind)


def flow_key(flow: Mapping[str, Any]) -> FlowKey:
    """A flow's natural key: its scope and its ends."""
    return (
        str(flow.get("scope") or ""),
        uuid_of(flow.get("fromSystem")),
        uuid_of(flow.get("fromPhysicalEntity")),
        uuid_of(flow.get("fromPhysicalField")),
        uuid_of(flow.get("toSystem")),
        uuid_of(flow.get("toPhysicalEntity")),
        uuid_of(flow.get("toPhysicalField")),
    )
