"""``ol-dagster check`` of an OpenMetadata catalog.

``GET /api/v1/system/version`` (no token needed on the real server:
``JwtFilter.EXCLUDED_ENDPOINTS``), so the token is checked by ``GET /api/v1/users/loggedInUser``
(401: the token is wrong); the ``Date`` header and its skew; ``EditLineage`` (needed) and
``Create`` (tables it may create) on ``table`` from ``GET /api/v1/permissions/table``
(``PermissionsResource``, a ``ResourcePermission``); the OpenLineage endpoint, with one START
event without datasets, which the server authorizes (EditLineage) and then skips before resolving
anything (``OpenLineageMapper.mapRunEvent``): 503 means it is disabled; and each dataset
namespace of the definition's stored RunEvents: its ``serviceMapping`` entry and ``GET
/api/v1/services/databaseServices/name/{service}``.

Two warnings about whose edges are whose: the token's user should be ol-dagster's own (edges are
deleted only when OpenMetadata says that user wrote them last, and ``ingestion-bot`` is the user
OpenMetadata's connectors write as); and ``serviceMapping``, ``eventTypeFilter`` and
``pipelineService`` are compared with the server's OpenLineage settings
(``GET /api/v1/system/settings/openLineageSettings``: ``SystemResource.getSettingByName``, an
admin's read; a ``Settings`` is ``{config_type, config_value}``, ``settings/settings.json``).
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from ol_dagster.catalog.check.findings import Finding
from ol_dagster.catalog.check.probe import (
    PROBE_NAMESPACE,
    NoAnswer,
    Prober,
    catalog_client,
    clock,
    reachable,
)
from ol_dagster.catalog.kind import CheckContext
from ol_dagster.catalog.openmetadata.catalog import (
    BATCH,
    VERSION,
    OpenMetadataCatalog,
    service_for,
)
from ol_dagster.catalog.openmetadata.owners import INGESTION_BOT
from ol_dagster.catalog.openmetadata.settings import OpenMetadataCatalogSettings

# OpenMetadata reads of the check (the client's own paths are imported from its module)
OM_LOGGED_IN_USER = "/api/v1/users/loggedInUser"
OM_PERMISSIONS = "/api/v1/permissions/{resource}"
OM_DATABASE_SERVICE = "/api/v1/services/databaseServices/name/{name}"
OM_SETTINGS = "/api/v1/system/settings/openLineageSettings"
OM_EDIT_LINEAGE = "EditLineage"
OM_CREATE = "Create"
OM_GRANTED = frozenset({"allow", "conditionalAllow"})
PROBE_PRODUCER = "urn:ol-dagster:check"  # an absolute URI, as the schema wants; no URL to claim
PROBE_SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
MAX_NAMESPACES = 100  # listed one by one; more are summed up in one line


def check_openmetadata(cfg: OpenMetadataCatalogSettings, context: CheckContext) -> list[Finding]:
    at = context.opening
    definition, events = context.definition, context.stored_events

    def backend() -> OpenMetadataCatalog:
        return OpenMetadataCatalog(at.name, cfg, store_url=at.store_url, definition=at.definition)

    with catalog_client(backend, cfg, ledger=True) as client:
        if isinstance(client, Finding):
            return [client]
        prober = client.prober
        found, version = reachable(prober, "GET", VERSION)
        findings = [found]
        if version is None:
            return findings
        body = version.json()
        if version.status == 200 and isinstance(body, dict) and body.get("version"):
            findings[0] = Finding("reachable", True, f"OpenMetadata {body['version']}")

        try:
            me = prober.ask("GET", OM_LOGGED_IN_USER)
        except NoAnswer as exc:
            return [*findings, Finding("token", False, str(exc))]
        if me.status == 200 and isinstance(me.json(), dict):
            user = me.json()
            bot = " (bot)" if user.get("isBot") else ""
            findings.append(Finding("token", True, f"authenticates {user.get('name')!r}{bot}"))
        else:
            what = {401: "the token is wrong or expired", 403: "refused"}.get(me.status, "answered")
            findings.append(
                Finding("token", False, f"GET {OM_LOGGED_IN_USER}: {what} ({prober.said(me)})")
            )
        token_holds = findings[-1].holds
        if token_holds:
            findings.append(_own_user(str(me.json().get("name") or "")))
        # the client's clock is the Date of its authenticated read (the version needs no token)
        dated = (me, OM_LOGGED_IN_USER) if token_holds else (version, VERSION)
        findings.append(clock(dated[0], f"GET {dated[1]}"))
        if not token_holds:
            untested = "not checked: the token is refused"
            findings += [
                Finding(f"{OM_EDIT_LINEAGE} on table", False, untested),
                Finding("OpenLineage endpoint", False, untested),
            ]
            return findings

        findings += _permissions(prober)
        findings.append(_openlineage_endpoint(prober, BATCH))
        findings.append(_server_settings(prober, cfg))
        if definition is not None and events is not None:
            findings += _namespaces(prober, dataset_namespaces(events()), cfg, service_for)
        elif definition is not None:
            findings.append(
                Finding("namespaces", False, "not checked: the event store does not open", False)
            )
        return findings


def _own_user(name: str) -> Finding:
    shared = name == INGESTION_BOT
    detail = (
        f"{name!r} is the user OpenMetadata's connectors write as: their OpenLineage edges "
        "would read as ol-dagster's; give ol-dagster a bot of its own"
        if shared
        else f"edges are deleted only when OpenMetadata says {name!r} wrote them last"
    )
    return Finding("own user", not shared, detail, needed_by_sync=False)


def _server_settings(prober: Prober, cfg: OpenMetadataCatalogSettings) -> Finding:
    """This catalog's view of the server's OpenLineage settings against the server's own."""
    name = "server's OpenLineage settings"
    try:
        answer = prober.ask("GET", OM_SETTINGS)
    except NoAnswer as exc:
        return Finding(name, False, str(exc), needed_by_sync=False)
    if answer.status in (401, 403):
        return Finding(
            name,
            True,
            f"not compared: GET {OM_SETTINGS} needs an admin ({prober.said(answer)})",
            needed_by_sync=False,
        )
    body = answer.json()
    value = body.get("config_value") if isinstance(body, dict) else None
    if answer.status != 200 or not isinstance(value, dict):
        return Finding(name, False, f"GET {OM_SETTINGS}: {prober.said(answer)}", False)
    theirs = {k: v for k, v in (value.get("namespaceToServiceMapping") or {}).items() if k and v}
    ours = {k: v for k, v in cfg.serviceMapping.items() if k and v}
    differ = [
        f"serviceMapping[{ns!r}] is {ours.get(ns)!r}, the server's {theirs.get(ns)!r}"
        for ns in sorted(set(ours) | set(theirs))
        if ours.get(ns) != theirs.get(ns)
    ]
    types = sorted(value.get("eventTypeFilter") or ["COMPLETE"])
    if types != sorted(cfg.eventTypeFilter or ["COMPLETE"]):
        differ.append(f"eventTypeFilter is {sorted(cfg.eventTypeFilter)}, the server's {types}")
    service = value.get("defaultPipelineService") or "openlineage"
    if service != cfg.pipelineService:
        differ.append(f"pipelineService is {cfg.pipelineService!r}, the server's {service!r}")
    detail = "; ".join(differ) or "serviceMapping, eventTypeFilter and pipelineService match"
    return Finding(name, not differ, detail, needed_by_sync=False)


def _permissions(prober: Prober) -> list[Finding]:
    path = OM_PERMISSIONS.format(resource="table")
    try:
        answer = prober.ask("GET", path)
    except NoAnswer as exc:
        return [Finding(f"{OM_EDIT_LINEAGE} on table", False, str(exc))]
    body = answer.json()
    if answer.status != 200 or not isinstance(body, dict):
        return [Finding(f"{OM_EDIT_LINEAGE} on table", False, f"GET {path}: {prober.said(answer)}")]
    access = {
        str(p.get("operation")): str(p.get("access"))
        for p in body.get("permissions") or []
        if isinstance(p, dict)
    }
    edit = access.get(OM_EDIT_LINEAGE, "not listed")
    create = access.get(OM_CREATE, "not listed")
    return [
        Finding(
            f"{OM_EDIT_LINEAGE} on table",
            edit in OM_GRANTED,
            f"{edit}: the upload and every edge delete need it"
            + (" (conditional: each table's conditions decide)" if edit.startswith("cond") else ""),
        ),
        Finding(
            f"{OM_CREATE} on table",
            create in OM_GRANTED,
            f"{create}: "
            + (
                "OpenMetadata may create the tables it cannot find"
                if create in OM_GRANTED
                else "tables OpenMetadata cannot find are not created (their datasets are dropped)"
            ),
            needed_by_sync=False,
        ),
    ]


def _openlineage_endpoint(prober: Prober, batch: str) -> Finding:
    """One START event without datasets: authorized like every upload, then skipped by the
    mapper before it resolves or writes anything."""
    probe = {
        "eventType": "START",
        "eventTime": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "producer": PROBE_PRODUCER,
        "schemaURL": PROBE_SCHEMA_URL,
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": PROBE_NAMESPACE, "name": "probe"},
    }
    name = "OpenLineage endpoint"
    try:
        answer = prober.ask("POST", batch, json_body={"events": [probe]})
    except NoAnswer as exc:
        return Finding(name, False, str(exc))
    body = answer.json()
    summary = body.get("summary") if isinstance(body, dict) else None
    if answer.status == 200 and isinstance(summary, dict):
        return Finding(
            name, True, f"POST {batch} enabled (a START probe without datasets, skipped)"
        )
    reasons = {
        503: "disabled in OpenMetadata's OpenLineage settings",
        403: f"{OM_EDIT_LINEAGE} refused on it",
        404: "not there (an OpenMetadata without the OpenLineage API)",
        405: "not there (an OpenMetadata without the OpenLineage API)",
    }
    why = reasons.get(answer.status, "answered")
    return Finding(name, False, f"POST {batch}: {why} ({prober.said(answer)})")


def _namespaces(
    prober: Prober, namespaces: Counter[str], cfg: OpenMetadataCatalogSettings, service_for: Any
) -> list[Finding]:
    if not namespaces:
        return [
            Finding(
                "namespaces",
                True,
                "no stored RunEvents with datasets yet: run check again after the first batch",
                needed_by_sync=False,
            )
        ]
    exists: dict[str, tuple[bool, str]] = {}

    def service_exists(service: str) -> tuple[bool, str]:
        if service not in exists:
            # a service's FQN is its name, quoted when it holds a dot (FullyQualifiedName)
            fqn = f'"{service}"' if "." in service and not service.startswith('"') else service
            path = OM_DATABASE_SERVICE.format(name=quote(fqn, safe=""))
            try:
                answer = prober.ask("GET", path)
            except NoAnswer as exc:
                exists[service] = (False, str(exc))
            else:
                found = answer.status == 200
                exists[service] = (
                    found,
                    "exists" if found else f"GET {path}: {prober.said(answer)}",
                )
        return exists[service]

    findings = []
    ordered = sorted(namespaces.items(), key=lambda kv: (-kv[1], kv[0]))
    for namespace, count in ordered[:MAX_NAMESPACES]:
        label = f"namespace {namespace}"
        service = service_for(namespace, cfg.serviceMapping)
        if service is None:
            findings.append(
                Finding(
                    label,
                    False,
                    f"{count} dataset(s), no serviceMapping entry: OpenMetadata can only match "
                    "tables that already exist for it (its namespaceToServiceMapping must agree)",
                    needed_by_sync=False,
                )
            )
            continue
        found, detail = service_exists(service)
        findings.append(
            Finding(
                label,
                found,
                f"-> database service {service!r}: {detail}"
                if found
                else f"-> database service {service!r}, not in OpenMetadata ({detail})",
            )
        )
    rest = ordered[MAX_NAMESPACES:]
    if rest:
        unmapped = sum(1 for ns, _ in rest if service_for(ns, cfg.serviceMapping) is None)
        findings.append(
            Finding(
                f"{len(rest)} more namespace(s)",
                unmapped == 0,
                f"{unmapped} of them without a serviceMapping entry (not listed one by one)",
                needed_by_sync=False,
            )
        )
    return findings


def dataset_namespaces(events: Iterable[bytes]) -> Counter[str]:
    """How often each dataset namespace appears in the definition's stored RunEvents (the only
    events OpenMetadata takes), as the producer wrote it."""
    counts: Counter[str] = Counter()
    for raw in events:
        try:
            doc = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("run"), dict):
            continue
        for key in ("inputs", "outputs"):
            for ds in doc.get(key) or []:
                if isinstance(ds, dict) and isinstance(ds.get("namespace"), str):
                    counts[ds["namespace"]] += 1
    return counts
