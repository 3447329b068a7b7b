"""The ``Catalog`` protocol over Blindata's REST API.

Blindata keeps what the cleanup needs itself: Systems with their properties, physical entities and
fields, system routines and data flows, each with the time the server last wrote it. So, unlike the
event-taking catalogs, nothing is kept in a sync ledger: an upload writes every object the graph
describes (changed or not, so the server stamps it), and a cleanup asks the server to delete, by
scope prefix or by System and schema, what was last updated before the cutoff, with a dry run on the
server first. The cutoff is the server's time, read from the ``Date`` header of a cheap call.

Every path is in ``blindata_api`` with its source: confirmed ``[C]`` or inferred ``[I]``.

Writes are upserts on each object's natural key (an entity's System, schema and name; a field's
entity and name; a routine's System, schema and name; a flow's scope and ends): existing objects are
read first, by page, and updated (``PUT``), new ones created (``POST``); a ``409`` on a create (a
retried request that the server had carried out) is resolved by reading the object and updating it,
so a retried chunk never duplicates. A row the server refuses (a 4xx) is a failed row and the
upload goes on; a server that stays unavailable, or refuses the credentials, stops the upload. Any
failed row blocks the cleanup.

The upload deletes nothing. A DROP is carried out by the cleanup's ``drop_datasets`` call (behind
its guards); a RENAME moves the entity in place only in a System this definition owns and may
clean. A parent job in a namespace the definition does not own (known only from a child's parent
facet) is another owner's: the orchestration flow to it is written, to its owner's job entity as
it is, or else to one created in a neutral System named after its namespace, which carries no
``openLineageOwner`` or ``openLineageJobSystem`` and so is never cleaned by any definition.

Secrets are read from the environment when the catalog opens, sent as headers, and never written
into an error, a failed row or a log line (answers from the server are scrubbed of them too).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from ol_dagster.catalog import blindata_api as api
from ol_dagster.catalog.http import (
    CatalogRefused,
    CatalogUnavailable,
    HttpCatalogClient,
    RetryPolicy,
    server_time,
)
from ol_dagster.catalog.protocol import (
    CleanupCounts,
    CleanupPermissionDenied,
    DatasetRef,
    FailedRow,
    ObjectType,
    UploadResult,
)
from ol_dagster.catalog.systems import (
    dataset_system_rules,
    foreign_job,
    job_system_for,
    may_change,
    wanted_systems,
)
from ol_dagster.lineage import LineageGraph
from ol_dagster.lineage.graph import NodeKey
from ol_dagster.lineage.naming import place_dataset
from ol_dagster.settings import CatalogSettings, CleanupMode, Definition, SettingsError

log = logging.getLogger(__name__)

QUALITY = "qualityChecks"
SYSTEMS = "systems"
# a dropped row: a foreign parent job whose neutral System (named after its namespace) is in fact
# another definition's, so neither it nor the orchestration flow to it can be written safely
PARENT_NOT_PLACED = "FOREIGN_PARENT_NOT_PLACED"
_NEVER = datetime(1970, 1, 1, tzinfo=UTC)  # a cleanup cutoff nothing is older than
EntityKey = tuple[str, str, str]  # (System uuid, schema, name)
FlowKey = tuple[str, str | None, str | None, str | None, str | None, str | None, str | None]

_RESULT_TYPES = {
    api.RESOURCE_PHYSICAL_ENTITY: ObjectType.PHYSICAL_ENTITIES,
    api.RESOURCE_PHYSICAL_FIELD: ObjectType.PHYSICAL_FIELDS,
    api.RESOURCE_SYSTEM_ROUTINE: ObjectType.ROUTINES,
    api.RESOURCE_STATEMENT: ObjectType.STATEMENTS,
    api.RESOURCE_DATA_FLOW: ObjectType.DATA_FLOWS,
}


class UploadStopped(Exception):
    """A failure that every later call would repeat (server down, credentials refused)."""


# -- small helpers on Blindata's shapes ------------------------------------------------------------


def _json(response: httpx.Response) -> Any:
    if not response.content:
        return {}
    try:
        return response.json()
    except ValueError:
        return {}


def _ref(value: Any) -> str | None:
    """The uuid of a reference (``{"uuid": ...}``), tolerant of a bare string or nothing."""
    if isinstance(value, dict):
        uid = value.get("uuid")
        return str(uid) if uid else None
    return str(value) if isinstance(value, str) and value else None


def _props(obj: Mapping[str, Any]) -> dict[str, Any]:
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


def _prop_list(values: Mapping[str, Any]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for name, value in values.items():
        if value is None or value == [] or value == "":
            continue
        for v in value if isinstance(value, list) else [value]:
            out.append({"name": name, "value": str(v)})
    return out


def _iso(dt: datetime) -> str:
    return dt.astimezone(UTC).isoformat()


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _when(value: Any) -> datetime | None:
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


def _node_id(kind: str, key: NodeKey) -> str:
    return f"{kind}:{key[0]}:{key[1]}"


def upload_systems(
    graph: LineageGraph, definition: Definition, job_sys: Mapping[NodeKey, str]
) -> dict[str, dict]:
    """The Systems an upload writes to (``wanted_systems``), with Blindata's property names."""
    wanted = wanted_systems(graph, definition)
    for system in sorted(set(job_sys.values()) - set(wanted)):
        wanted[system] = {"kind": "job", api.PROP_JOB_SYSTEM: [str(definition.uuid)]}
    return wanted


@dataclass(slots=True)
class _Rows:
    """The outcome of one step's row writes."""

    values: dict[Any, Any] = field(default_factory=dict)
    written: int = 0
    touched: int = 0


class BlindataCatalog:
    """A Blindata tenant, reached over HTTP; ``store_url`` and ``definition`` are accepted for the
    factory's common signature (this catalog keeps no ledger)."""

    kind = "blindata"

    def __init__(
        self,
        name: str,
        cfg: CatalogSettings,
        *,
        store_url: str = "",
        definition: str = "",
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.definition_name = definition
        self._secrets: list[str] = []
        headers = self.headers(cfg)
        kwargs: dict[str, Any] = {"sleep": sleep} if sleep is not None else {}
        self.http = HttpCatalogClient(
            cfg.url,
            headers=headers,
            timeout=cfg.timeoutSeconds,
            policy=RetryPolicy(max_retries=cfg.maxRetries),
            transport=transport,
            **kwargs,
        )
        self.workers = max(1, cfg.concurrency)

    def close(self) -> None:
        self.http.close()

    def __repr__(self) -> str:
        return f"BlindataCatalog(name={self.name!r}, url={self.cfg.url!r})"

    # -- transport ---------------------------------------------------------------------------------

    def headers(self, cfg: CatalogSettings) -> dict[str, str]:
        """Tenant and credentials; secrets come from the environment, here, when it opens."""
        headers = {"Accept": "application/json", api.HEADER_TENANT: cfg.tenant or ""}
        if cfg.token is not None:
            token = cfg.token.resolve()
            self._secrets.append(token)
            headers[api.HEADER_AUTHORIZATION] = f"Bearer {token}"
        elif cfg.apiKey is not None:
            key = cfg.apiKey.resolve()
            self._secrets.append(key)
            headers[api.HEADER_USER] = cfg.user
            headers[api.HEADER_API_KEY] = key
        else:
            raise SettingsError(
                f"catalog {self.name!r}: a blindata catalog needs 'token' (a bearer token) or "
                "'apiKey' (with 'user'), each as {env: NAME}"
            )
        return headers

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

    def _reason(self, exc: Exception) -> str:
        """What went wrong, for a failed row: the call and status, and the server's message."""
        text = str(exc)
        if isinstance(exc, CatalogRefused) and exc.body:
            try:
                body = json.loads(exc.body)
            except ValueError:
                body = None
            if isinstance(body, dict):
                detail = " ".join(
                    str(body[k]) for k in ("errorName", "message") if body.get(k) is not None
                )
                if detail:
                    text = f"{text}: {detail}"
        return self._scrub(text)[:500]

    def _get(self, path: str, params: Mapping[str, Any] | None = None) -> httpx.Response:
        return self.http.request("GET", path, params=params)

    def _pages(self, path: str, params: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        """Every item of a paged search (Spring Data pages: ``content``, ``last``, ...)."""
        page = 0
        previous_first: Any = None
        while True:
            body = _json(
                self._get(path, {**params, api.PAGE_PARAM: page, api.SIZE_PARAM: api.PAGE_SIZE})
            )
            content = body.get("content") if isinstance(body, dict) else body
            if not isinstance(content, list) or not content:
                return
            first = content[0].get("uuid") if isinstance(content[0], dict) else None
            if page and first is not None and first == previous_first:
                return  # the server ignores paging: this page was already read
            previous_first = first
            yield from (c for c in content if isinstance(c, dict))
            if not isinstance(body, dict):
                return
            if body.get("last") is True:
                return
            total_pages = body.get("totalPages")
            if isinstance(total_pages, int) and page + 1 >= total_pages:
                return
            if "last" not in body and total_pages is None and len(content) < api.PAGE_SIZE:
                return
            page += 1

    def _upsert(
        self,
        collection: str,
        item: str,
        body: dict[str, Any],
        existing: str | None,
        find: Callable[[], str | None],
    ) -> tuple[str, bool]:
        """Create or update one object; returns its uuid and whether this call created it."""
        for _ in range(3):
            if existing is None:
                response = self.http.request("POST", collection, json=body, ok=frozenset({409}))
                if response.status_code != 409:
                    uid = _ref(_json(response)) or find()
                    if uid is None:
                        raise CatalogRefused(
                            f"POST {collection}: created, but the object cannot be found",
                            response.status_code,
                        )
                    return uid, True
                existing = find()  # a retried create the server had carried out
                if existing is None:
                    raise CatalogRefused(
                        f"POST {collection}: HTTP 409 for an object that cannot be found", 409
                    )
            response = self.http.request(
                "PUT",
                item.format(uuid=existing),
                json={**body, "uuid": existing},
                ok=frozenset({404}),
            )
            if response.status_code != 404:
                return existing, False
            existing = None  # deleted in the meantime: create it again
        raise CatalogRefused(f"POST {collection}: the object keeps disappearing", 404)

    def _rows(
        self,
        object_type: str,
        items: Sequence[tuple[Any, str, Callable[[], tuple[str, bool]]]],
        result: UploadResult,
    ) -> _Rows:
        """Write rows concurrently: ``(key, label, write)``; a refused row is a failed row, a
        failure every later row would repeat stops the upload (``UploadStopped``)."""
        out = _Rows()
        stop = threading.Event()
        lock = threading.Lock()
        fatal: list[str] = []

        def one(entry: tuple[Any, str, Callable[[], tuple[str, bool]]]) -> None:
            key, label, write = entry
            if stop.is_set():
                return
            try:
                uid, created = write()
            except CatalogUnavailable as exc:
                stop.set()
                with lock:
                    fatal.append(label)
                    result.failed.append(FailedRow(object_type, label, self._reason(exc)))
                return
            except CatalogRefused as exc:
                if exc.status in (401, 403):
                    stop.set()
                    with lock:
                        fatal.append(label)
                with lock:
                    result.failed.append(FailedRow(object_type, label, self._reason(exc)))
                return
            with lock:
                out.values[key] = uid
                if created:
                    out.written += 1
                else:
                    out.touched += 1

        if self.workers == 1 or len(items) <= 1:
            for entry in items:
                one(entry)
        else:
            with ThreadPoolExecutor(self.workers, thread_name_prefix="blindata") as pool:
                list(pool.map(one, items))
        result.written[object_type] = result.written.get(object_type, 0) + out.written
        result.touched[object_type] = result.touched.get(object_type, 0) + out.touched
        if fatal:
            raise UploadStopped(object_type)
        return out

    # -- clock -------------------------------------------------------------------------------------

    def clock(self) -> datetime:
        """The server's time: the ``Date`` header of an authenticated cheap call (whole seconds,
        rounded down, so everything the server stamps after the call is at or after it)."""
        response = self._get(api.CLOCK_PATH, api.CLOCK_PARAMS)
        now = server_time(response)
        if now is None:
            raise CatalogUnavailable(f"GET {api.CLOCK_PATH}: the answer has no Date header")
        return now

    # -- Systems -----------------------------------------------------------------------------------

    def _find_system(self, name: str) -> dict[str, Any] | None:
        for system in self._pages(api.SYSTEMS, {"name": name}):
            if system.get("name") == name:  # ``name=`` may match substrings: compare exactly
                return system
        return None

    def _ensure_systems(self, wanted: dict[str, dict]) -> dict[str, dict[str, Any]]:
        """Get or create every System; a job System gets this definition's mark if missing.
        Returns name -> ``{"uuid", "props"}``."""
        out: dict[str, dict[str, Any]] = {}
        for name, want in wanted.items():
            found = self._find_system(name)
            mark = want.get("openLineageJobSystem") or []
            if found is None:
                props = {k: v for k, v in want.items() if k != "kind"}
                body: dict[str, Any] = {
                    "name": name,
                    "description": "Created by ol-dagster from OpenLineage events",
                    "additionalProperties": _prop_list(props),
                }
                if want.get("kind") == "job":
                    body["subtype"] = api.SYSTEM_SUBTYPE_JOB
                response = self.http.request("POST", api.SYSTEMS, json=body, ok=frozenset({409}))
                uid = _ref(_json(response)) if response.status_code != 409 else None
                if uid is None:
                    found = self._find_system(name)
                    if found is None or not _ref(found):
                        raise CatalogRefused(f"POST {api.SYSTEMS}: {name!r} cannot be found", 409)
                else:
                    out[name] = {"uuid": uid, "props": _props(body)}
                    continue
            uid = _ref(found)
            assert found is not None and uid is not None
            props = _props(found)
            marks = props.get(api.PROP_JOB_SYSTEM) or []
            if mark and mark[0] not in marks:
                extra = [{"name": api.PROP_JOB_SYSTEM, "value": mark[0]}]
                body = {
                    k: found[k]
                    for k in ("name", "description", "technology", "subtype")
                    if found.get(k) is not None
                }
                body["additionalProperties"] = list(found.get("additionalProperties") or []) + extra
                self.http.request("PUT", api.SYSTEM.format(uuid=uid), json={**body, "uuid": uid})
                props = _props(body)
            out[name] = {"uuid": uid, "props": props}
        return out

    def systems(self) -> list[dict[str, Any]]:
        return sorted(
            (
                {**_props(s), "name": s["name"]}
                for s in self._pages(api.SYSTEMS, {})
                if s.get("name")
            ),
            key=lambda s: s["name"],
        )

    # -- reads used by the upload ------------------------------------------------------------------

    def _entities_of(self, system_uuid: str, schema: str) -> dict[EntityKey, dict[str, Any]]:
        """The entities of a System in one schema, by natural key."""
        params: dict[str, Any] = {"systemUuid": system_uuid, "schema": schema}
        if schema:
            params["search"] = schema
        out: dict[EntityKey, dict[str, Any]] = {}
        for e in self._pages(api.PHYSICAL_ENTITIES, params):
            sys_uuid = _ref(e.get("system")) or system_uuid
            if sys_uuid == system_uuid and (e.get("schema") or "") == schema and e.get("name"):
                out[(system_uuid, schema, str(e["name"]))] = e
        return out

    def _find_entity(self, key: EntityKey) -> str | None:
        system_uuid, schema, name = key
        params = {
            "systemUuid": system_uuid,
            "schema": schema,
            "name": name,
            "search": f"{schema}.{name}" if schema else name,
            api.SIZE_PARAM: api.PAGE_SIZE,
        }
        content = _json(self._get(api.PHYSICAL_ENTITIES, params)).get("content") or []
        for e in content:
            if (
                isinstance(e, dict)
                and (_ref(e.get("system")) or system_uuid) == system_uuid
                and (e.get("schema") or "") == schema
                and e.get("name") == name
            ):
                return _ref(e)
        return None

    def _fields_of(self, system_uuid: str, schema: str) -> dict[tuple[str, str], str]:
        """Fields of the entities of one schema: (entity uuid, field name) -> field uuid."""
        out: dict[tuple[str, str], str] = {}
        params = {"systemUuid": system_uuid, "physicalEntitySchema": schema}
        for f in self._pages(api.PHYSICAL_FIELDS, params):
            entity = f.get("physicalEntity") or {}
            eid, uid = _ref(entity), _ref(f)
            if eid and uid and f.get("name") is not None:
                out[(eid, str(f["name"]))] = uid
        return out

    def _find_field(self, entity: EntityKey, entity_uuid: str, name: str) -> str | None:
        params = {
            "systemUuid": entity[0],
            "physicalEntitySchema": entity[1],
            "physicalEntityName": entity[2],
            "physicalFieldName": name,
            api.SIZE_PARAM: api.PAGE_SIZE,
        }
        for f in _json(self._get(api.PHYSICAL_FIELDS, params)).get("content") or []:
            if (
                isinstance(f, dict)
                and f.get("name") == name
                and _ref(f.get("physicalEntity")) in (entity_uuid, None)
            ):
                return _ref(f)
        return None

    def _routines_of(self, system_uuid: str, schema: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for r in self._pages(api.SYSTEM_ROUTINES, {"systemUuid": system_uuid, "schema": schema}):
            if (
                (_ref(r.get("system")) or system_uuid) == system_uuid
                and (r.get("schema") or "") == schema
                and r.get("name")
                and _ref(r)
            ):
                out[str(r["name"])] = _ref(r)  # type: ignore[assignment]
        return out

    @staticmethod
    def _flow_key(flow: Mapping[str, Any]) -> FlowKey:
        return (
            str(flow.get("scope") or ""),
            _ref(flow.get("fromSystem")),
            _ref(flow.get("fromPhysicalEntity")),
            _ref(flow.get("fromPhysicalField")),
            _ref(flow.get("toSystem")),
            _ref(flow.get("toPhysicalEntity")),
            _ref(flow.get("toPhysicalField")),
        )

    def _flows_with_prefix(self, prefix: str) -> dict[FlowKey, str]:
        out: dict[FlowKey, str] = {}
        for f in self._pages(api.DATA_FLOWS, {"scopePrefix": prefix}):
            uid = _ref(f)
            if uid and str(f.get("scope") or "").startswith(prefix):
                out[self._flow_key(f)] = uid
        return out

    def _find_flow(self, key: FlowKey) -> str | None:
        for f in self._pages(api.DATA_FLOWS, {"scope": key[0]}):
            if self._flow_key(f) == key:
                return _ref(f)
        return None

    # -- upload ------------------------------------------------------------------------------------

    def upload(
        self,
        graph: LineageGraph,
        definition: Definition,
        raw_events: Callable[[], Iterable[bytes]] | None = None,
    ) -> UploadResult:
        """Write everything the graph describes (``raw_events`` is for event-taking catalogs)."""
        result = UploadResult()
        phase = [SYSTEMS]  # what was being written, for a failure outside a row
        try:
            self._upload(graph, definition, result, phase)
        except UploadStopped:
            pass  # the failed rows say why
        except (CatalogUnavailable, CatalogRefused) as exc:
            result.failed.append(FailedRow(phase[0], "*", self._reason(exc)))
        return result

    def _upload(
        self, graph: LineageGraph, definition: Definition, result: UploadResult, phase: list[str]
    ) -> None:
        # another owner's parent jobs get no job System of this definition (see _foreign_parents)
        foreign = {key for key, j in graph.jobs.items() if foreign_job(definition, j)}
        job_sys = {
            key: job_system_for(definition, key[0]) for key in graph.jobs if key not in foreign
        }
        systems = self._ensure_systems(upload_systems(graph, definition, job_sys))
        sys_uuid = {name: s["uuid"] for name, s in systems.items()}
        phase[0] = ObjectType.PHYSICAL_ENTITIES
        self._apply_renames(graph, definition, systems, result)

        # entities: jobs in their job System at schema = namespace, datasets where they were placed
        rows: dict[EntityKey, dict[str, Any]] = {}
        node_entity: dict[tuple[str, NodeKey], EntityKey] = {}
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
                "additionalProperties": _prop_list(
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
                        "lastRun": _iso(m.last_run) if m.last_run else None,
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
                "additionalProperties": _prop_list(
                    {api.PROP_NAMESPACE: d.namespace, api.PROP_NAME: d.name, "owner": d.owners}
                ),
            }
        existing: dict[EntityKey, dict[str, Any]] = {}
        for system_uuid, schema in sorted({(k[0], k[1]) for k in rows}):
            existing.update(self._entities_of(system_uuid, schema))

        def entity_write(ek: EntityKey, body: dict[str, Any]) -> Callable[[], tuple[str, bool]]:
            found = _ref(existing.get(ek))
            return lambda: self._upsert(
                api.PHYSICAL_ENTITIES,
                api.PHYSICAL_ENTITY,
                body,
                found,
                lambda: self._find_entity(ek),
            )

        entity_uuid = self._rows(
            ObjectType.PHYSICAL_ENTITIES,
            [
                (ek, f"{ek[1]}.{ek[2]}" if ek[1] else ek[2], entity_write(ek, b))
                for ek, b in rows.items()
            ],
            result,
        ).values
        if result.failed:
            return  # later objects refer to these entities
        parents = {o.parent for o in graph.orchestration_flows if o.parent in foreign}
        for key, (ek, uid) in self._foreign_parents(sorted(parents), result).items():
            node_entity[("job", key)] = ek
            entity_uuid[ek] = uid
        if result.failed:
            return

        # fields: (entity, name); existing ones read per schema of the entities that existed
        phase[0] = ObjectType.PHYSICAL_FIELDS
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
            known_fields.update(self._fields_of(system_uuid, schema))

        def field_write(
            fk: tuple[str, str], ek: EntityKey, body: dict[str, Any]
        ) -> Callable[[], tuple[str, bool]]:
            return lambda: self._upsert(
                api.PHYSICAL_FIELDS,
                api.PHYSICAL_FIELD,
                body,
                known_fields.get(fk),
                lambda: self._find_field(ek, fk[0], fk[1]),
            )

        field_uuid = self._rows(
            ObjectType.PHYSICAL_FIELDS,
            [
                (fk, f"{ek[1]}.{ek[2]}.{fk[1]}", field_write(fk, ek, body))
                for fk, (ek, body) in field_rows.items()
            ],
            result,
        ).values
        if result.failed:
            return

        phase[0] = ObjectType.ROUTINES
        self._upload_routines(graph, sys_uuid, job_sys, result)
        if result.failed:
            return
        phase[0] = ObjectType.DATA_FLOWS
        self._upload_flows(graph, node_entity, entity_uuid, field_uuid, result)
        if result.failed:
            return
        phase[0] = QUALITY
        self._upload_quality(graph, node_entity, entity_uuid, field_uuid, result)
        # a DROP is not carried out here: the cleanup's ``drop_datasets`` call does it, behind
        # the cleanup's guards (dry run, removal cap, permission)

    def _upload_routines(
        self,
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
                    for n, u in self._routines_of(system_uuid, schema).items()
                }
            )

        def write(rk: tuple[str, str, str], body: dict[str, Any]) -> Callable[[], tuple[str, bool]]:
            def find() -> str | None:
                return self._routines_of(rk[0], rk[1]).get(rk[2])

            return lambda: self._upsert(
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
                "additionalProperties": _prop_list(
                    {api.PROP_NAMESPACE: key[0], api.PROP_NAME: key[1], api.PROP_DIALECT: r.dialect}
                ),
            }
            entries.append((rk, f"{key[0]}.{key[1]}", write(rk, body)))
        done = self._rows(ObjectType.ROUTINES, entries, result)
        # each routine carries its one statement (its ``definition``)
        result.written[ObjectType.STATEMENTS] = done.written
        result.touched[ObjectType.STATEMENTS] = done.touched

    def _upload_flows(
        self,
        graph: LineageGraph,
        node_entity: dict[tuple[str, NodeKey], EntityKey],
        entity_uuid: dict[EntityKey, str],
        field_uuid: dict[tuple[str, str], str],
        result: UploadResult,
    ) -> None:
        """Data flows (dataset to dataset), orchestration flows (parent job to child job) and field
        flows, each owned by its scope; upserted on (scope, ends)."""
        known: dict[FlowKey, str] = {}
        for ns in graph.job_namespaces:
            known.update(self._flows_with_prefix(f"ol:{ns}|"))

        def end(kind: str, key: NodeKey) -> tuple[str, str]:
            ek = node_entity[(kind, key)]
            return ek[0], entity_uuid[ek]

        entries: list[tuple[FlowKey, str, Callable[[], tuple[str, bool]]]] = []

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
                "additionalProperties": _prop_list(props),
            }
            if src[2]:
                body["fromPhysicalField"] = {"uuid": src[2]}
            if dst[2]:
                body["toPhysicalField"] = {"uuid": dst[2]}
            entries.append(
                (
                    fk,
                    f"{scope} {name}",
                    lambda: self._upsert(
                        api.DATA_FLOWS,
                        api.DATA_FLOW,
                        body,
                        known.get(fk),
                        lambda: self._find_flow(fk),
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
                    api.PROP_FROM: _node_id("dataset", f.source),
                    api.PROP_TO: _node_id("dataset", f.target),
                },
            )
        for o in sorted(graph.orchestration_flows, key=lambda o: (o.scope, o.parent, o.child)):
            if ("job", o.parent) not in node_entity:
                continue  # a foreign parent that could not be placed (counted as dropped)
            add(
                o.scope,
                (*end("job", o.parent), None),
                (*end("job", o.child), None),
                f"{o.parent[1]} -> {o.child[1]}",
                {
                    api.PROP_KIND: "orchestration",
                    api.PROP_FROM: _node_id("job", o.parent),
                    api.PROP_TO: _node_id("job", o.child),
                },
            )
        missing = 0
        for f in sorted(graph.field_flows, key=lambda f: (f.scope, f.source, f.target)):
            src, dst = end("dataset", f.source[:2]), end("dataset", f.target[:2])
            src_field = field_uuid.get((src[1], f.source[2]))
            dst_field = field_uuid.get((dst[1], f.target[2]))
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
        self._rows(ObjectType.DATA_FLOWS, entries, result)

    def _upload_quality(
        self,
        graph: LineageGraph,
        node_entity: dict[tuple[str, NodeKey], EntityKey],
        entity_uuid: dict[EntityKey, str],
        field_uuid: dict[tuple[str, str], str],
        result: UploadResult,
    ) -> None:
        """One suite per job (code ``<namespace>.<name>``), imported with its checks (enabled:
        a job that comes back gets its checks back)."""
        suites: dict[str, list[dict[str, Any]]] = {}
        for q in graph.quality_checks.values():
            suite = f"{q.job[0]}.{q.job[1]}"
            ek = node_entity[("dataset", q.dataset)]
            eid = entity_uuid[ek]
            check: dict[str, Any] = {
                "code": f"{suite}|{q.dataset[0]}:{q.dataset[1]}|{q.name}|{q.column or ''}",
                "name": f"{q.name} {q.column}" if q.column else q.name,
                "enabled": True,
                "physicalEntities": [{"uuid": eid, "schema": ek[1], "name": ek[2]}],
                "additionalProperties": _prop_list(
                    {
                        "assertion": q.name,
                        "column": q.column,
                        "lastSuccess": str(q.success).lower(),
                        "severity": q.severity,
                        "lastChecked": _iso(q.checked_at) if q.checked_at else None,
                    }
                ),
            }
            fid = field_uuid.get((eid, q.column)) if q.column else None
            if fid:
                check["physicalFields"] = [{"uuid": fid}]
            suites.setdefault(suite, []).append(check)

        def write(suite: str, checks: list[dict[str, Any]]) -> Callable[[], tuple[str, bool]]:
            def run() -> tuple[str, bool]:
                body = {
                    "qualitySuite": {"code": suite, "name": suite, "published": True},
                    "qualityChecks": checks,
                    "issuePoliciesByCheckCodes": {},
                }
                answer = _json(self.http.request("POST", api.QUALITY_IMPORT, json=body))
                created = _int(answer.get("rowCreated"))
                discarded = _int(answer.get("rowDiscarded"))
                if discarded:
                    message = self._scrub(str(answer.get("message") or ""))[:300]
                    raise CatalogRefused(
                        f"POST {api.QUALITY_IMPORT}: {discarded} check(s) discarded {message}",
                        422,
                    )
                with counts_lock:
                    counts["written"] += created
                    counts["touched"] += max(len(checks) - created, 0)
                return str(answer.get("qualitySuiteUuid") or suite), False

            return run

        counts = {"written": 0, "touched": 0}
        counts_lock = threading.Lock()
        self._rows(
            "qualitySuites",
            [(s, s, write(s, c)) for s, c in sorted(suites.items())],
            result,
        )
        result.written.pop("qualitySuites", None)
        result.touched.pop("qualitySuites", None)
        result.written[QUALITY] = counts["written"]
        result.touched[QUALITY] = counts["touched"]

    def _apply_renames(
        self,
        graph: LineageGraph,
        definition: Definition,
        systems: dict[str, dict[str, Any]],
        result: UploadResult,
    ) -> None:
        """A RENAME moves the entity in place (keeping its fields and flows) when the previous
        identifier's System is this definition's (``owned_by``) and its policy lets it clean
        there (cleanupMode not NONE), and the new name does not exist yet. Otherwise nothing
        moves: the new name is uploaded as a new entity and the old one is left to whoever owns
        it (and to the cleanup, where this definition may clean)."""
        rules = dataset_system_rules(definition)
        found: dict[str, dict[str, Any] | None] = {}
        for d in graph.datasets.values():
            if d.previous is None:
                continue
            prev = place_dataset(d.previous[0], d.previous[1], system_rules=rules)
            if prev.system not in systems and prev.system not in found:
                system = self._find_system(prev.system)
                found[prev.system] = (
                    {"uuid": _ref(system), "props": _props(system)}
                    if system is not None and _ref(system)
                    else None
                )
            old_system = systems.get(prev.system) or found.get(prev.system)
            if old_system is None:
                continue
            if not may_change(definition, old_system["props"]) or not may_change(
                definition, systems[d.system]["props"]
            ):
                continue  # another owner's (or a never-cleaned) System: not ours to change
            old = self._find_entity((old_system["uuid"], prev.schema, prev.name))
            target = (systems[d.system]["uuid"], d.schema, d.object_name)
            if old is None or self._find_entity(target) is not None:
                continue
            self.http.request(
                "PUT",
                api.PHYSICAL_ENTITY.format(uuid=old),
                json={
                    "uuid": old,
                    "system": {"uuid": target[0]},
                    "schema": target[1] or None,
                    "name": target[2],
                    "tableType": d.type.upper(),
                    "additionalProperties": _prop_list(
                        {api.PROP_NAMESPACE: d.namespace, api.PROP_NAME: d.name}
                    ),
                },
            )
            result.renamed.append(f"{d.previous[0]}:{d.previous[1]} -> {d.namespace}:{d.name}")

    def _foreign_parents(
        self, keys: Sequence[NodeKey], result: UploadResult
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
                hit = self._find_job_entity(ns, name)
                if hit is None:
                    if ns not in neutral:
                        neutral[ns] = self._neutral_system(ns)
                    system_uuid = neutral[ns]
                    if system_uuid is None:
                        result.dropped[PARENT_NOT_PLACED] = (
                            result.dropped.get(PARENT_NOT_PLACED, 0) + 1
                        )
                        continue
                    hit = (system_uuid, self._create_job_entity(system_uuid, ns, name))
                    created += 1
            except CatalogRefused as exc:
                result.failed.append(
                    FailedRow(ObjectType.PHYSICAL_ENTITIES, f"{ns}.{name}", self._reason(exc))
                )
                if exc.status in (401, 403):
                    raise UploadStopped(ObjectType.PHYSICAL_ENTITIES) from None
                continue
            out[key] = ((hit[0], ns, name), hit[1])
        if created:
            written = result.written.get(ObjectType.PHYSICAL_ENTITIES, 0)
            result.written[ObjectType.PHYSICAL_ENTITIES] = written + created
        return out

    def _find_job_entity(self, namespace: str, name: str) -> tuple[str, str] | None:
        """(System uuid, entity uuid) of the job entity ``namespace.name`` in any System; its
        owner's job System rather than a neutral one when both hold it."""
        params = {"schema": namespace, "name": name, "search": f"{namespace}.{name}"}
        hits = [
            e
            for e in self._pages(api.PHYSICAL_ENTITIES, params)
            if (e.get("schema") or "") == namespace
            and e.get("name") == name
            and e.get("tableType") == api.JOB_TABLE_TYPE
            and _ref(e)
            and _ref(e.get("system"))
        ]
        if not hits:
            return None

        def system_name(e: dict[str, Any]) -> str:
            system = e.get("system")
            return str(system.get("name") or "") if isinstance(system, dict) else ""

        best = min(hits, key=lambda e: (system_name(e) == namespace, system_name(e), _ref(e)))
        return _ref(best.get("system")), _ref(best)  # type: ignore[return-value]

    def _neutral_system(self, namespace: str) -> str | None:
        """The uuid of the System named after ``namespace`` that no definition owns or cleans
        (created when missing, with no properties); None when that System is someone's."""
        found = self._find_system(namespace)
        if found is None:
            return self._ensure_systems({namespace: {"kind": "job"}})[namespace]["uuid"]
        props = _props(found)
        mode = props.get(api.PROP_CLEANUP_MODE) or CleanupMode.NONE.value
        if props.get(api.PROP_OWNER) or props.get(api.PROP_JOB_SYSTEM):
            return None
        if mode != CleanupMode.NONE.value:
            return None
        return _ref(found)

    def _create_job_entity(self, system_uuid: str, namespace: str, name: str) -> str:
        """Create a parent job's entity (never update one: 409 means it exists; read it)."""
        body = {
            "system": {"uuid": system_uuid},
            "schema": namespace,
            "name": name,
            "description": "A parent job another owner describes (from a child's parent facet)",
            "tableType": api.JOB_TABLE_TYPE,
            "additionalProperties": _prop_list(
                {api.PROP_NAMESPACE: namespace, api.PROP_NAME: name}
            ),
        }
        response = self.http.request("POST", api.PHYSICAL_ENTITIES, json=body, ok=frozenset({409}))
        uid = _ref(_json(response)) if response.status_code != 409 else None
        uid = uid or self._find_entity((system_uuid, namespace, name))
        if uid is None:
            raise CatalogRefused(
                f"POST {api.PHYSICAL_ENTITIES}: {namespace}.{name} cannot be found", 409
            )
        return uid

    # -- cleanup -----------------------------------------------------------------------------------

    def _cleanup_call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self.http.request("POST", path, json=body)
        except CatalogRefused as exc:
            if exc.status == 403:
                raise CleanupPermissionDenied(self._reason(exc)) from None
            raise
        answer = _json(response)
        return answer if isinstance(answer, dict) else {}

    @staticmethod
    def _count(part: Any, dry_run: bool) -> int:
        """``matched`` for a dry run, ``deleted`` (else ``matched``) for a real call."""
        if not isinstance(part, dict):
            return _int(part)
        if not dry_run and part.get("deleted") is not None:
            return _int(part["deleted"])
        if part.get("matched") is not None:
            return _int(part["matched"])
        items = part.get("items")
        return len(items) if isinstance(items, list) else 0

    def cleanup_flows(
        self,
        *,
        scope_prefixes: Sequence[str] = (),
        scopes: Sequence[str] = (),
        before: datetime,
        dry_run: bool,
    ) -> CleanupCounts:
        total = 0
        common = {"updatedBefore": _iso(before), "dryRun": dry_run}
        for prefix in scope_prefixes:
            answer = self._cleanup_call(api.DATA_FLOWS_CLEANUP, {"scopePrefix": prefix, **common})
            total += self._count(answer, dry_run)
        if scopes:
            answer = self._cleanup_call(api.DATA_FLOWS_CLEANUP, {"scopes": list(scopes), **common})
            total += self._count(answer, dry_run)
        return CleanupCounts({ObjectType.DATA_FLOWS: total})

    def _system_cleanup(
        self,
        system_uuid: str,
        schemas: list[str] | None,
        resources: list[str],
        before: datetime,
        dry_run: bool,
        counts: dict[str, int],
    ) -> dict[str, list[dict[str, Any]]]:
        """One System cleanup call; adds its counts to ``counts``; returns the items it lists,
        by resource type (``[I]``: a server may list none)."""
        body: dict[str, Any] = {
            "level": api.CLEANUP_LEVEL_SCHEMA if schemas is not None else api.CLEANUP_LEVEL_SYSTEM,
            "resourceTypes": resources,
            "updatedBefore": _iso(before),
            "dryRun": dry_run,
        }
        if schemas is not None:
            body["schemas"] = list(schemas)
        answer = self._cleanup_call(api.SYSTEM_CLEANUP.format(uuid=system_uuid), body)
        results = answer.get("results")
        if not isinstance(results, dict):
            return {}
        items: dict[str, list[dict[str, Any]]] = {}
        for resource, part in results.items():
            object_type = _RESULT_TYPES.get(str(resource))
            if object_type is not None:
                counts[object_type] = counts.get(object_type, 0) + self._count(part, dry_run)
            listed = part.get("items") if isinstance(part, dict) else None
            items[str(resource)] = [i for i in listed or [] if isinstance(i, dict)]
        return items

    def _orphan_routines(
        self, system_uuid: str, schemas: list[str] | None, before: datetime
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
            for e in self._pages(api.PHYSICAL_ENTITIES, params):
                if e.get("tableType") != api.JOB_TABLE_TYPE or not e.get("name"):
                    continue
                updated = _when(e.get("modificationDate"))
                if updated is None or updated >= before:
                    alive.add((str(e.get("schema") or ""), str(e["name"])))
            for r in self._pages(api.SYSTEM_ROUTINES, params):
                updated = _when(r.get("modificationDate"))
                if (
                    _ref(r)
                    and r.get("name")
                    and (schema is None or (r.get("schema") or "") == schema)
                    and (_ref(r.get("system")) or system_uuid) == system_uuid
                    and updated is not None
                    and updated < before
                ):
                    stale.append(r)
        return [r for r in stale if (str(r.get("schema") or ""), str(r["name"])) not in alive]

    def cleanup_job_system(
        self,
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
        uid = _ref(self._find_system(system))
        if uid is None or schemas == []:
            return CleanupCounts(counts)
        if routines_before is None:
            items = self._system_cleanup(
                uid, schemas, api.JOB_SYSTEM_RESOURCES, before, dry_run, counts
            )
        else:
            items = self._system_cleanup(
                uid, schemas, [api.RESOURCE_PHYSICAL_ENTITY], before, dry_run, counts
            )
            aged = self._system_cleanup(
                uid, schemas, [api.RESOURCE_SYSTEM_ROUTINE], routines_before, dry_run, counts
            )
            counted = {_ref(i) for i in aged.get(api.RESOURCE_SYSTEM_ROUTINE, [])}
            orphans = [
                r for r in self._orphan_routines(uid, schemas, before) if _ref(r) not in counted
            ]
            for r in orphans:
                if not dry_run:
                    self._delete(api.SYSTEM_ROUTINE.format(uuid=_ref(r)))
            counts[ObjectType.ROUTINES.value] += len(orphans)
            counts[ObjectType.STATEMENTS.value] += sum(1 for r in orphans if r.get("definition"))
        names = sorted(
            {
                f"{i.get('schema') or ''}.{i['name']}"
                for i in items.get(api.RESOURCE_PHYSICAL_ENTITY, [])
                if i.get("name") and i.get("tableType") in (None, api.JOB_TABLE_TYPE)
            }
        )
        return CleanupCounts(counts, names)

    def _delete(self, path: str) -> None:
        """A delete during a cleanup: 404 is what was wanted, 403 a refused cleanup."""
        try:
            self.http.request("DELETE", path, ok=frozenset({404}))
        except CatalogRefused as exc:
            if exc.status == 403:
                raise CleanupPermissionDenied(self._reason(exc)) from None
            raise

    def cleanup_dataset_system(
        self, system: str, *, before: datetime, dry_run: bool
    ) -> CleanupCounts:
        counts = {
            ObjectType.PHYSICAL_ENTITIES.value: 0,
            ObjectType.PHYSICAL_FIELDS.value: 0,
            ObjectType.DATA_FLOWS.value: 0,
        }
        uid = _ref(self._find_system(system))
        if uid is not None:
            self._system_cleanup(uid, None, api.DATASET_SYSTEM_RESOURCES, before, dry_run, counts)
        return CleanupCounts(counts)

    def drop_datasets(self, datasets: Sequence[DatasetRef], *, dry_run: bool) -> CleanupCounts:
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
                system_uuids[ref.system] = _ref(self._find_system(ref.system))
            system_uuid = system_uuids[ref.system]
            if system_uuid is None:
                continue
            uid = self._find_entity((system_uuid, ref.schema, ref.name))
            if uid is not None:
                targets.setdefault(uid, (system_uuid, ref.schema, ref.name))
        if not targets:
            return CleanupCounts(counts)
        if dry_run:
            for system_uuid in sorted({t[0] for t in targets.values()}):
                schemas = sorted({t[1] for t in targets.values() if t[0] == system_uuid})
                self._system_cleanup(
                    system_uuid, schemas, [api.RESOURCE_PHYSICAL_ENTITY], _NEVER, True, {}
                )
        fields: set[str] = set()
        for uid, (system_uuid, schema, name) in targets.items():
            params = {
                "systemUuid": system_uuid,
                "physicalEntitySchema": schema,
                "physicalEntityName": name,
            }
            fields |= {
                str(_ref(f))
                for f in self._pages(api.PHYSICAL_FIELDS, params)
                if _ref(f) and _ref(f.get("physicalEntity")) == uid
            }
        flows = {
            str(_ref(f))
            for f in self._pages(api.DATA_FLOWS, {})
            if _ref(f)
            and (
                _ref(f.get("fromPhysicalEntity")) in targets
                or _ref(f.get("toPhysicalEntity")) in targets
                or _ref(f.get("fromPhysicalField")) in fields
                or _ref(f.get("toPhysicalField")) in fields
            )
        }
        counts[ObjectType.PHYSICAL_ENTITIES.value] = len(targets)
        counts[ObjectType.PHYSICAL_FIELDS.value] = len(fields)
        counts[ObjectType.DATA_FLOWS.value] = len(flows)
        if not dry_run:
            for flow in sorted(flows):
                self._delete(api.DATA_FLOW.format(uuid=flow))
            for uid in sorted(targets):
                self._delete(api.PHYSICAL_ENTITY.format(uuid=uid))
        return CleanupCounts(counts)

    def count_jobs(self, system: str, *, schemas: list[str] | None) -> int:
        """Job entities of a job System (in these schemas; ``None``: all), read page by page."""
        uid = _ref(self._find_system(system))
        if uid is None or schemas == []:
            return 0
        found: set[str] = set()
        for schema in sorted(set(schemas)) if schemas is not None else [None]:
            params: dict[str, Any] = {"systemUuid": uid}
            if schema is not None:
                params["schema"] = schema
            found |= {
                str(_ref(e))
                for e in self._pages(api.PHYSICAL_ENTITIES, params)
                if _ref(e)
                and e.get("tableType") == api.JOB_TABLE_TYPE
                and (_ref(e.get("system")) or uid) == uid
                and (schema is None or (e.get("schema") or "") == schema)
            }
        return len(found)

    def disable_quality_checks(self, jobs: list[str]) -> int:
        """The suites of removed jobs are imported again with ``cleanup=true`` and no checks: the
        server disables (never deletes) every check missing from the payload, so all of them. A
        server that refuses an import without checks gets ``PUT checks/{uuid}`` enabled=false.
        A failure here (after the deletions) is logged and the other suites are still done."""
        if not jobs:
            return 0
        wanted = set(jobs)
        suites = {
            s["code"]: s
            for s in self._pages(api.QUALITY_SUITES, {})
            if s.get("code") in wanted and _ref(s)
        }
        disabled = 0
        for job in sorted(wanted & set(suites)):
            suite = suites[job]
            suite_uuid = _ref(suite)
            try:
                enabled = [
                    c
                    for c in self._pages(api.QUALITY_CHECKS, {api.QUALITY_SUITE_FILTER: suite_uuid})
                    if _ref(c.get("qualitySuite")) in (suite_uuid, None)
                    and c.get("enabled", True) is not False
                ]
                if not enabled:
                    continue
                try:
                    self.http.request(
                        "POST",
                        api.QUALITY_IMPORT,
                        params={"cleanup": "true"},
                        json={
                            "qualitySuite": {"code": job, "name": suite.get("name") or job},
                            "qualityChecks": [],
                            "issuePoliciesByCheckCodes": {},
                        },
                    )
                except CatalogRefused as exc:
                    if exc.status in (401, 403):
                        raise
                    # an import without checks refused: disable them one by one instead
                    for check in enabled:
                        uid = _ref(check)
                        self.http.request(
                            "PUT",
                            api.QUALITY_CHECK.format(uuid=uid),
                            json={**check, "uuid": uid, "enabled": False},
                        )
            except (CatalogRefused, CatalogUnavailable) as exc:
                log.warning(
                    "could not disable the quality checks of %s: %s", job, self._reason(exc)
                )
                continue
            disabled += len(enabled)
        return disabled

    # -- reads -------------------------------------------------------------------------------------

    def job_schemas(self, system: str) -> list[str]:
        uid = _ref(self._find_system(system))
        if uid is None:
            return []
        found = {
            str(e.get("schema") or "")
            for e in self._pages(api.PHYSICAL_ENTITIES, {"systemUuid": uid})
            if e.get("tableType") == api.JOB_TABLE_TYPE and (_ref(e.get("system")) or uid) == uid
        }
        found |= {
            str(r.get("schema") or "")
            for r in self._pages(api.SYSTEM_ROUTINES, {"systemUuid": uid})
            if (_ref(r.get("system")) or uid) == uid
        }
        return sorted(found)

    def lineage(self, node: str, *, depth: int, upstream: bool, downstream: bool) -> dict[str, Any]:
        """Lineage around a node from the OpenLineage flows in Blindata (scopes ``ol:``): a data
        flow ``A -> B`` of job J is ``A -> J -> B``; an orchestration flow is parent -> child."""
        from ol_dagster.catalog.embedded.reads import (
            NodeNotFound,
            job_node,
            lineage_of_edges,
            parse_node,
        )

        kind, _ = parse_node(node)
        edges: set[tuple[str, str]] = set()
        for f in self._pages(api.DATA_FLOWS, {"scopePrefix": "ol:"}):
            props = _props(f)
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
            job = job_node(str(f.get("scope") or ""))
            if flow_kind != "data" or job is None:
                continue
            edges.add((str(src), job))
            edges.add((job, str(dst)))
        known = {n for e in edges for n in e}
        if node not in known and not (kind == "job" and self._job_exists(node)):
            raise NodeNotFound(f"{node} is not in the catalog")
        return lineage_of_edges(node, edges, depth=depth, upstream=upstream, downstream=downstream)

    def _job_exists(self, node: str) -> bool:
        from ol_dagster.catalog.embedded.reads import parse_node

        _, candidates = parse_node(node)
        for system in self._pages(api.SYSTEMS, {}):
            if not _props(system).get(api.PROP_JOB_SYSTEM) or not _ref(system):
                continue
            for ns, name in candidates:
                for e in self._pages(
                    api.PHYSICAL_ENTITIES,
                    {"systemUuid": _ref(system), "schema": ns, "name": name},
                ):
                    props = _props(e)
                    if props.get(api.PROP_NAMESPACE) == ns and props.get(api.PROP_NAME) == name:
                        return True
        return False
