"""Blindata's cleanup calls: what a scope or a System holds that the runs no longer describe.

The server deletes by scope or by System and schema what was last updated before a cutoff, with a
dry run first; this module builds those calls and reads their counts. Flows are removed by exact
scopes only: a namespace's are read by its scope prefix and kept by their owner's parts
(``owned_scopes``), since how the server matches a prefix (case, wildcards) is not documented. What
the server cannot decide from its own data (a routine whose job is gone: the link is ol-dagster's
naming; the entities a DROP named) is read here and deleted one by one. Every call that is refused
with 403 raises ``CleanupPermissionDenied``, so the cleanup's guards see a missing permission before
any call of the plan deletes anything.

The cleanup calls and their ``dryRun`` are inferred, not documented: every answer is read strictly
(``answers``), and the first dry run of a run on each call is preceded by one with a cutoff nothing
is older than, so a server that ignores ``dryRun`` is found out before a dry run could delete.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx

from ol_dagster.catalog.blindata import api
from ol_dagster.catalog.blindata.answers import flows_count, system_counts
from ol_dagster.catalog.blindata.client import BlindataClient
from ol_dagster.catalog.blindata.finders import find_entity, find_system
from ol_dagster.catalog.blindata.shapes import (
    flow_owner,
    iso,
    parse_when,
    uuid_of,
)
from ol_dagster.catalog.bounded import delete, post_bounded
from ol_dagster.catalog.http import CatalogRefused, CatalogUnavailable, MayHaveLanded
from ol_dagster.catalog.protocol import (
    CleanupCounts,
    CleanupPermissionDenied,
    DatasetRef,
    ObjectType,
    Removal,
)
from ol_dagster.lineage.graph import NodeKey, flow_scope, orchestration_scope, scope_prefix

_NEVER = datetime(1970, 1, 1, tzinfo=UTC)  # a cleanup cutoff nothing is older than
_SCOPES_PER_CALL = 500  # exact scopes named in one flows cleanup call

T = TypeVar("T")
# a System call's counts by object type, and the items it lists by resource type
SystemAnswer = tuple[dict[str, int], dict[str, list[dict[str, Any]]]]


def _answer_of(response: httpx.Response) -> Any:
    """The answer's JSON; its text when it is not JSON (read strictly: ``answers``)."""
    try:
        return response.json()
    except ValueError:
        return response.text


def _post(client: BlindataClient, path: str, body: dict[str, Any]) -> Any:
    """One cleanup call. A dry run is sent again when its answer is lost (it changes nothing); a
    real call is not: the journal entry written before it lets the next sync reconcile it."""
    dry = body["dryRun"] is True
    try:
        response = client.http.request("POST", path, json=body, resend_after_timeout=dry)
    except CatalogRefused as exc:
        if exc.status == 403:
            raise CleanupPermissionDenied(client.reason(exc)) from None
        raise
    except MayHaveLanded as exc:
        raise CatalogUnavailable(
            client.scrub(f"{exc}: not sent again; the next sync reconciles this call")
        ) from None
    return _answer_of(response)


def _cleanup_call(
    client: BlindataClient,
    endpoint: str,
    path: str,
    body: dict[str, Any],
    read: Callable[[Any, bool], T],
) -> T:
    """A cleanup call whose answer ``read`` accepts (else ``CleanupNotConfirmed``).

    The first dry run on an ``endpoint`` with a real cutoff is preceded by the same call with a
    cutoff nothing is older than: a server that ignores ``dryRun`` deletes nothing with it, and
    its answer, which cannot confirm the dry run, stops the cleanup before a dry run could
    delete anything."""
    dry = body["dryRun"] is True
    harmless = body.get("updatedBefore") == iso(_NEVER)
    if dry and not harmless and endpoint not in client.dry_runs_confirmed:
        read(_post(client, path, {**body, "updatedBefore": iso(_NEVER)}), True)
        client.dry_runs_confirmed.add(endpoint)
    result = read(_post(client, path, body), dry)
    if dry:
        client.dry_runs_confirmed.add(endpoint)
    return result


def _remove(client: BlindataClient, path: str) -> Removal:
    """A delete during a cleanup: 404 is ``notFound`` (unless an attempt that lost its answer
    removed it), 403 a refused cleanup."""
    try:
        return delete(client.http, path)
    except CatalogRefused as exc:
        if exc.status == 403:
            raise CleanupPermissionDenied(client.reason(exc)) from None
        raise


def _tally(removals: list[tuple[str, Removal]]) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """Removed counts by object type, and the other outcomes (``notFound``) by object type."""
    counts: dict[str, int] = {}
    outcomes: dict[str, dict[str, int]] = {}
    for object_type, removal in removals:
        if removal is Removal.REMOVED:
            counts[object_type] = counts.get(object_type, 0) + 1
        else:
            into = outcomes.setdefault(removal.value, {})
            into[object_type] = into.get(object_type, 0) + 1
    return counts, outcomes


def owned_scopes(
    client: BlindataClient,
    *,
    namespaces: Sequence[str] = (),
    jobs: Sequence[NodeKey] = (),
    before: datetime | None = None,
) -> list[str]:
    """The scope strings of the flows owned by every job of ``namespaces`` (last updated
    before ``before``, when given) and by ``jobs`` (both their scopes).

    A namespace's flows are read by its scope prefix, then kept only if the owner their scope
    names has exactly that namespace: what a server's prefix filter matches beyond the literal
    prefix (case, wildcards: its API does not say) never reaches a delete."""
    scopes: set[str] = set()
    for ns in sorted(set(namespaces)):
        params = {"scopePrefix": scope_prefix(ns)}
        if before is not None:
            params["updatedBefore"] = iso(before)
        for f in client.pages(api.DATA_FLOWS, params):
            owner = flow_owner(f)
            if owner is not None and owner.namespace == ns and f.get("scope"):
                scopes.add(str(f["scope"]))
    for job in jobs:
        scopes |= {flow_scope(*job), orchestration_scope(*job)}
    return sorted(scopes)


def cleanup_flows(
    client: BlindataClient,
    *,
    namespaces: Sequence[str] = (),
    jobs: Sequence[NodeKey] = (),
    before: datetime,
    dry_run: bool,
) -> CleanupCounts:
    """The seed's flows call on exact scopes (``scopes``): those ``owned_scopes`` finds, in
    chunks; no call when there are none (nothing of theirs is older than ``before``)."""
    total = 0
    common = {"updatedBefore": iso(before), "dryRun": dry_run}
    path = api.DATA_FLOWS_CLEANUP

    def read(answer: Any, dry: bool) -> int:
        return flows_count(answer, where=f"POST {path}", dry_run=dry, scrub=client.scrub)

    def call(part: list[str]) -> int:
        return _cleanup_call(client, path, path, {"scopes": part, **common}, read)

    scopes = owned_scopes(client, namespaces=namespaces, jobs=jobs, before=before)
    for i in range(0, len(scopes), _SCOPES_PER_CALL):
        total += sum(_split(client, "scope", scopes[i : i + _SCOPES_PER_CALL], call))
    return CleanupCounts({ObjectType.DATA_FLOWS: total})


def _split(
    client: BlindataClient, what: str, names: list[str], call: Callable[[list[str]], T]
) -> list[T]:
    """The answers of ``call`` on ``names``, in one call or, when its body is too large for
    the server (or a proxy: 413), halved down to one name (``catalog.bounded``). A real call
    whose answer was lost is never sent again (``_post``); one name too large alone stops the
    cleanup."""
    sent = post_bounded(names, call, read_back=None, pause=client.http.pause, max_lost=0)
    if sent.failed:
        name, why = sent.failed[0]
        raise CatalogRefused(client.scrub(f"{why} ({what} {name!r})"), 413)
    return [answer for _, answer in sent.answers]


def _system_cleanup(
    client: BlindataClient,
    system_uuid: str,
    schemas: list[str] | None,
    resources: list[str],
    before: datetime,
    dry_run: bool,
    counts: dict[str, int],
) -> dict[str, list[dict[str, Any]]]:
    """One System cleanup call; adds its counts to ``counts``; returns the items it lists,
    by resource type (``[I]``: a server may list none; the counts it must give). A call on
    schemas too large for the server is split by schemas (``_split``), as the flows call is by
    scopes; a call on the whole System names none, and its body is small and fixed."""
    body: dict[str, Any] = {
        "level": api.CLEANUP_LEVEL_SCHEMA if schemas is not None else api.CLEANUP_LEVEL_SYSTEM,
        "resourceTypes": resources,
        "updatedBefore": iso(before),
        "dryRun": dry_run,
    }
    path = api.SYSTEM_CLEANUP.format(uuid=system_uuid)

    def read(answer: Any, dry: bool) -> SystemAnswer:
        return system_counts(answer, where=f"POST {path}", dry_run=dry, scrub=client.scrub)

    def call(part: list[str]) -> SystemAnswer:
        return _cleanup_call(client, api.SYSTEM_CLEANUP, path, {**body, "schemas": part}, read)

    if schemas is None:
        answers = [_cleanup_call(client, api.SYSTEM_CLEANUP, path, body, read)]
    else:
        answers = _split(client, "schema", list(schemas), call)
    items: dict[str, list[dict[str, Any]]] = {}
    for found, listed in answers:
        for object_type, n in found.items():
            counts[object_type] = counts.get(object_type, 0) + n
        for resource, entries in listed.items():
            items.setdefault(resource, []).extend(entries)
    return items


def _orphan_routines(
    client: BlindataClient, system_uuid: str, schemas: list[str] | None, before: datetime
) -> list[dict[str, Any]]:
    """Routines last updated before ``before`` whose job entity (same schema and name) was
    not updated since: their job is gone, so they go now. Read, not asked of the server: the
    link between a routine and its job is ol-dagster's naming. A missing date keeps the
    routine (and counts a job as alive)."""
    alive: set[tuple[str, str]] = set()
    stale: list[dict[str, Any]] = []
    for schema in schemas if schemas is not None else [None]:
        params: dict[str, Any] = {"systemUuid": system_uuid}
        if schema is not None:
            params["schema"] = schema
        for e in client.pages(api.PHYSICAL_ENTITIES, params):
            if e.get("tableType") != api.JOB_TABLE_TYPE or not e.get("name"):
                continue
            updated = parse_when(e.get("modificationDate"))
            if updated is None or updated >= before:
                alive.add((str(e.get("schema") or ""), str(e["name"])))
        for r in client.pages(api.SYSTEM_ROUTINES, params):
            updated = parse_when(r.get("modificationDate"))
            if (
                uuid_of(r)
                and r.get("name")
                and (schema is None or (r.get("schema") or "") == schema)
                and (uuid_of(r.get("system")) or system_uuid) == system_uuid
                and updated is not None
                and updated < before
            ):
                stale.append(r)
    return [r for r in stale if (str(r.get("schema") or ""), str(r["name"])) not in alive]


def cleanup_job_system(
    client: BlindataClient,
    system: str,
    *,
    schemas: list[str] | None,
    before: datetime,
    dry_run: bool,
    routines_before: datetime | None = None,
) -> CleanupCounts:
    """Job entities and routines last updated before ``before``, on the server. With
    ``routines_before`` (the cutoff mode), a routine whose job is still described waits for
    that time: the server removes the routines older than it, and the routines of jobs that
    are gone are removed one by one (``DELETE system_routines/{uuid}``)."""
    counts = {
        ObjectType.PHYSICAL_ENTITIES.value: 0,
        ObjectType.ROUTINES.value: 0,
        ObjectType.STATEMENTS.value: 0,
        ObjectType.DATA_FLOWS.value: 0,
    }
    outcomes: dict[str, dict[str, int]] = {}
    uid = uuid_of(find_system(client, system))
    if uid is None or schemas == []:
        return CleanupCounts(counts)
    if routines_before is None:
        items = _system_cleanup(
            client, uid, schemas, api.JOB_SYSTEM_RESOURCES, before, dry_run, counts
        )
    else:
        items = _system_cleanup(
            client, uid, schemas, [api.RESOURCE_PHYSICAL_ENTITY], before, dry_run, counts
        )
        aged = _system_cleanup(
            client, uid, schemas, [api.RESOURCE_SYSTEM_ROUTINE], routines_before, dry_run, counts
        )
        counted = {uuid_of(i) for i in aged.get(api.RESOURCE_SYSTEM_ROUTINE, [])}
        orphans = [
            r for r in _orphan_routines(client, uid, schemas, before) if uuid_of(r) not in counted
        ]
        if not dry_run:
            done = [
                (r, _remove(client, api.SYSTEM_ROUTINE.format(uuid=uuid_of(r)))) for r in orphans
            ]
            orphans = [r for r, how in done if how is Removal.REMOVED]
            outcomes = _tally([(ObjectType.ROUTINES.value, how) for _, how in done])[1]
        counts[ObjectType.ROUTINES.value] += len(orphans)
        counts[ObjectType.STATEMENTS.value] += sum(1 for r in orphans if r.get("definition"))
    names = sorted(
        {
            f"{i.get('schema') or ''}.{i['name']}"
            for i in items.get(api.RESOURCE_PHYSICAL_ENTITY, [])
            if i.get("name") and i.get("tableType") in (None, api.JOB_TABLE_TYPE)
        }
    )
    return CleanupCounts(counts, names, outcomes)


def cleanup_dataset_system(
    client: BlindataClient, system: str, *, before: datetime, dry_run: bool
) -> CleanupCounts:
    counts = {
        ObjectType.PHYSICAL_ENTITIES.value: 0,
        ObjectType.PHYSICAL_FIELDS.value: 0,
        ObjectType.DATA_FLOWS.value: 0,
    }
    uid = uuid_of(find_system(client, system))
    if uid is not None:
        _system_cleanup(client, uid, None, api.DATASET_SYSTEM_RESOURCES, before, dry_run, counts)
    return CleanupCounts(counts)


def drop_datasets(
    client: BlindataClient, datasets: Sequence[DatasetRef], *, dry_run: bool
) -> CleanupCounts:
    """Remove the entities DROP events named, each with its fields and every flow touching
    it (each object counted once), found by System, schema and name. Read first, so a dry
    run counts exactly what the real call removes; the real call deletes the flows, then
    the entity (``DELETE physical_entities/{uuid}`` takes its fields). A dry run also asks
    each System for an empty cleanup (a cutoff nothing is older than), so that a user
    without SYSTEMS_ADMIN is refused (403, ``CleanupPermissionDenied``) before any call
    of the plan deletes anything, as with every other cleanup call."""
    counts = {
        ObjectType.PHYSICAL_ENTITIES.value: 0,
        ObjectType.PHYSICAL_FIELDS.value: 0,
        ObjectType.DATA_FLOWS.value: 0,
    }
    system_uuids: dict[str, str | None] = {}
    targets: dict[str, tuple[str, str, str]] = {}  # entity uuid -> (System uuid, schema, name)
    for ref in datasets:
        if ref.system not in system_uuids:
            system_uuids[ref.system] = uuid_of(find_system(client, ref.system))
        system_uuid = system_uuids[ref.system]
        if system_uuid is None:
            continue
        uid = find_entity(client, (system_uuid, ref.schema, ref.name))
        if uid is not None:
            targets.setdefault(uid, (system_uuid, ref.schema, ref.name))
    if not targets:
        return CleanupCounts(counts)
    if dry_run:
        for system_uuid in sorted({t[0] for t in targets.values()}):
            schemas = sorted({t[1] for t in targets.values() if t[0] == system_uuid})
            _system_cleanup(
                client, system_uuid, schemas, [api.RESOURCE_PHYSICAL_ENTITY], _NEVER, True, {}
            )
    fields_of: dict[str, set[str]] = {}  # entity uuid -> its fields
    for uid, (system_uuid, schema, name) in targets.items():
        params = {
            "systemUuid": system_uuid,
            "physicalEntitySchema": schema,
            "physicalEntityName": name,
        }
        fields_of[uid] = {
            str(uuid_of(f))
            for f in client.pages(api.PHYSICAL_FIELDS, params)
            if uuid_of(f) and uuid_of(f.get("physicalEntity")) == uid
        }
    fields = set().union(*fields_of.values())
    flows = {
        str(uuid_of(f))
        for f in client.pages(api.DATA_FLOWS, {})
        if uuid_of(f)
        and (
            uuid_of(f.get("fromPhysicalEntity")) in targets
            or uuid_of(f.get("toPhysicalEntity")) in targets
            or uuid_of(f.get("fromPhysicalField")) in fields
            or uuid_of(f.get("toPhysicalField")) in fields
        )
    }
    counts[ObjectType.PHYSICAL_ENTITIES.value] = len(targets)
    counts[ObjectType.PHYSICAL_FIELDS.value] = len(fields)
    counts[ObjectType.DATA_FLOWS.value] = len(flows)
    if dry_run:
        return CleanupCounts(counts)
    removals = [
        (ObjectType.DATA_FLOWS.value, _remove(client, api.DATA_FLOW.format(uuid=flow)))
        for flow in sorted(flows)
    ]
    for uid in sorted(targets):
        removal = _remove(client, api.PHYSICAL_ENTITY.format(uuid=uid))
        removals.append((ObjectType.PHYSICAL_ENTITIES.value, removal))
        # its fields went with it, or were gone with it already
        removals += [(ObjectType.PHYSICAL_FIELDS.value, removal)] * len(fields_of[uid])
    removed, outcomes = _tally(removals)
    return CleanupCounts({**dict.fromkeys(counts, 0), **removed}, outcomes=outcomes)


def count_held(
    client: BlindataClient, *, namespaces: Sequence[str], dataset_systems: Sequence[str]
) -> dict[str, int]:
    """What a definition holds, read page by page (the API counts nothing by owner): the flows
    owned by jobs of ``namespaces`` (``owned_scopes``' reading), the dataset entities of the
    ``dataset_systems`` and the fields of those entities."""
    flows = 0
    for ns in sorted(set(namespaces)):
        flows += sum(
            1
            for f in client.pages(api.DATA_FLOWS, {"scopePrefix": scope_prefix(ns)})
            if (owner := flow_owner(f)) is not None and owner.namespace == ns
        )
    datasets: set[str] = set()
    fields: set[str] = set()
    for name in sorted(set(dataset_systems)):
        uid = uuid_of(find_system(client, name))
        if uid is None:
            continue
        entities = {
            str(uuid_of(e))
            for e in client.pages(api.PHYSICAL_ENTITIES, {"systemUuid": uid})
            if uuid_of(e)
            and e.get("tableType") != api.JOB_TABLE_TYPE
            and (uuid_of(e.get("system")) or uid) == uid
        }
        datasets |= entities
        fields |= {
            str(uuid_of(f))
            for f in client.pages(api.PHYSICAL_FIELDS, {"systemUuid": uid})
            if uuid_of(f) and uuid_of(f.get("physicalEntity")) in entities
        }
    return {"dataFlows": flows, "datasets": len(datasets), "fields": len(fields)}


def count_jobs(client: BlindataClient, system: str, *, schemas: list[str] | None) -> int:
    """Job entities of a job System (in these schemas; ``None``: all), read page by page."""
    uid = uuid_of(find_system(client, system))
    if uid is None or schemas == []:
        return 0
    found: set[str] = set()
    for schema in sorted(set(schemas)) if schemas is not None else [None]:
        params: dict[str, Any] = {"systemUuid": uid}
        if schema is not None:
            params["schema"] = schema
        found |= {
            str(uuid_of(e))
            for e in client.pages(api.PHYSICAL_ENTITIES, params)
            if uuid_of(e)
            and e.get("tableType") == api.JOB_TABLE_TYPE
            and (uuid_of(e.get("system")) or uid) == uid
            and (schema is None or (e.get("schema") or "") == schema)
        }
    return len(found)
