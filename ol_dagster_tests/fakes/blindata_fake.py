"""A Blindata server for tests, written from the project's notes on Blindata's REST API (§1 what
public sources confirm, §3 the recommended minimal contract), never from ol-dagster's client.

What it models:

* conventions (§1.0): ``/api/v1``, ``X-BD-Tenant`` with an API key (``X-BD-User``/``X-BD-ApiKey``)
  or a bearer token, Spring Data pages (``page``/``size``, ``size`` capped at 1000), the error
  body ``{status, timestamp, error, message, path, errorName}``, ``additionalProperties`` as a
  list of ``{name, value}``, 201 on create, 200 on update, 409 on a duplicate natural key, 400 on
  validation errors, 204 on delete;
* auth (§3 [I]): 401 without valid credentials; a per-user permission set (``SYSTEMS_ADMIN`` >
  ``SYSTEMS_EDITOR`` > ``SYSTEMS_VIEWER``, the same for ``QUALITY_``); creating or changing a
  System and every cleanup need ``SYSTEMS_ADMIN``, other writes ``SYSTEMS_EDITOR``, else 403;
* per-tenant state: Systems, physical entities and fields, system routines, data flows (entity or
  field level, owned by a scope), quality suites and checks;
* the clock: every POST and PUT stamps ``modificationDate`` (``updateDate`` on flows) from an
  injectable clock, and every answer carries it as the ``Date`` header (serve with uvicorn's own
  ``Date`` header off);
* the cleanup actions (§3 [I]) with a dry run that changes nothing and returns the same report:
  ``POST /dataflows/*/cleanup`` and ``POST /systems/{uuid}/cleanup`` (an entity takes its fields
  and the flows touching them; a routine its statement, its ``definition``);
* the quality suite import (§1.5 [C]): ``?cleanup=true`` disables, never deletes, the suite's
  checks missing from the payload;
* OPTIONS and 405 as a Spring MVC server answers them (Blindata is one: Spring Data pages, Spring
  Boot's error body): OPTIONS on a mapped path is 200 with ``Allow`` listing the methods mapped
  there (HEAD with GET), and a 405 carries ``Allow`` too; an unmapped path is 404 (spring-projects/
  spring-framework ``spring-webmvc/.../mvc/method/RequestMappingInfoHandlerMapping.java``,
  ``HttpOptionsHandler`` and ``handleNoMatch``, commit 0005787a514743247c128bb6271aa4c2b18bed4d;
  RFC 9110 §15.5.6: a 405 must send ``Allow``). OPTIONS needs credentials like every call;
* a body in another media type than JSON is 415 with the error body and ``Accept:
  application/json``, as Spring MVC answers a ``@RequestBody`` no converter reads (no
  ``Content-Type`` is read as ``application/octet-stream``; Jackson's converter reads
  ``application/json`` and ``application/*+json``): spring-projects/spring-framework
  ``spring-webmvc/.../mvc/method/annotation/AbstractMessageConverterMethodArgumentResolver.java``
  (``readWithMessageConverters``) @ 59002f245623d758765b72d598cd78c326c6f5fa and
  ``spring-webmvc/.../mvc/support/DefaultHandlerExceptionResolver.java``
  (``handleHttpMediaTypeNotSupported``) @ 147c256c262e7c25951db037ab6b970e6abc8ba8. It comes after
  authentication and permissions (the gateway checks those first) and before the body is read;
* a proxy in front (``limit_body``): a body larger than its limit is 413 with the proxy's HTML
  page, before Blindata sees the request (nginx's ``client_max_body_size``);
* a server that does not know ``dryRun`` (``ignore_dry_run``): every cleanup call deletes for
  real and its answer has no ``dryRun`` field, which is what a client must not take for a dry
  run;
* failure injection: ``inject`` queues faults (a status with ``Retry-After``, 5xx bursts, slow
  answers, answers held after the request was carried out) for the next matching requests, each
  used once; ``refuse`` makes the server refuse objects with a 4xx (validation), as long as it is
  set;
* how ``scopePrefix`` matches: the notes do not say (§3 names the filter only). By default it is
  a literal, case-sensitive prefix; ``match_scope_prefixes_like_sql`` makes it what a server
  that filters with SQL ``ILIKE '<prefix>%'`` would do (no case, ``_`` and ``%`` wildcards), so
  a test can show the client deletes nothing more on such a server.
"""

from __future__ import annotations

import email.utils
import json
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ol_dagster_tests.fakes.faults import TOO_LARGE_PAGE

DEFAULT_START = datetime(2026, 11, 4, 10, 0, tzinfo=UTC)
MAX_PAGE = 1000

ADMIN, EDITOR, VIEWER = "ADMIN", "EDITOR", "VIEWER"
_LEVELS = {VIEWER: 1, EDITOR: 2, ADMIN: 3}


class FakeClock:
    """The server's time: frozen (tests advance it) unless ``real``."""

    def __init__(self, start: datetime | None = DEFAULT_START) -> None:
        self.start = start
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        base = self.start if self.start is not None else datetime.now(UTC)
        return base + self.offset

    def advance(self, **delta: float) -> datetime:
        self.offset += timedelta(**delta)
        return self()


@dataclass(frozen=True, slots=True)
class Fault:
    """The answer to the next request matching ``method`` and ``path`` (a regex searched in the
    path): ``status`` (None: the normal answer) after ``delay`` seconds; with ``after`` the request
    is carried out first and its answer replaced by ``status`` (an answer lost on the way back)."""

    status: int | None = None
    delay: float = 0.0
    retry_after: str | None = None
    method: str | None = None
    path: str | None = None
    after: bool = False
    # seconds the answer is held after the request was carried out: a client that gives up
    # sooner has lost the answer of a request the server did carry out
    linger: float = 0.0
    # the answer's body instead of the server's own, after the request was carried out (a
    # server that answers in another shape)
    body: bytes | None = None


@dataclass(slots=True)
class User:
    name: str
    tenant: str
    permissions: set[str]
    api_key: str | None = None
    token: str | None = None


@dataclass(slots=True)
class Tenant:
    systems: dict[str, dict[str, Any]] = field(default_factory=dict)
    entities: dict[str, dict[str, Any]] = field(default_factory=dict)
    fields: dict[str, dict[str, Any]] = field(default_factory=dict)
    routines: dict[str, dict[str, Any]] = field(default_factory=dict)
    flows: dict[str, dict[str, Any]] = field(default_factory=dict)
    suites: dict[str, dict[str, Any]] = field(default_factory=dict)
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Seen:
    method: str
    path: str
    query: str
    status: int


class ApiError(Exception):
    def __init__(self, status: int, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.name = name or HTTPStatus(status).phrase.upper().replace(" ", "_")


def _ref(value: Any) -> str | None:
    if isinstance(value, dict) and value.get("uuid"):
        return str(value["uuid"])
    return None


def _parse_time(value: Any, what: str) -> datetime:
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        raise ApiError(400, f"{what}: not an ISO-8601 time") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _time(value: str | None) -> datetime:
    return datetime.fromisoformat(value) if value else datetime.min.replace(tzinfo=UTC)


def _props(obj: dict[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in obj.get("additionalProperties") or []:
        out.setdefault(p["name"], []).append(p.get("value"))
    return out


class BlindataFake:
    """The fake; serve ``fake.app``. Add users with ``add_user`` (a tenant is created with its
    first user)."""

    def __init__(self, clock: Callable[[], datetime] | None = None) -> None:
        self.clock = clock or FakeClock()
        self.tenants: dict[str, Tenant] = {}
        self.users: list[User] = []
        self.faults: list[Fault] = []
        self.refusals: list[tuple[str, Callable[[dict[str, Any]], bool], int, str]] = []
        self.requests: list[Seen] = []
        self.lock = threading.RLock()
        self._indexes: dict[int, dict[tuple, str]] = {}  # id(store) -> natural key -> uuid
        self.scope_prefix_like_sql = False  # see ``match_scope_prefixes_like_sql``
        self.dry_run_ignored = False  # see ``ignore_dry_run``
        self.max_body_bytes: int | None = None  # see ``limit_body``
        self.app = Starlette(
            routes=[
                Route(
                    "/{path:path}",
                    self._endpoint,
                    methods=["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
                )
            ]
        )
        r = self._routes = []
        for method, pattern, handler, permission in [
            ("GET", r"systems", self._list_systems, "SYSTEMS_VIEWER"),
            ("POST", r"systems", self._create_system, "SYSTEMS_ADMIN"),
            ("GET", r"systems/(?P<id>[^/*]+)", self._get_system, "SYSTEMS_VIEWER"),
            ("PUT", r"systems/(?P<id>[^/*]+)", self._update_system, "SYSTEMS_ADMIN"),
            ("POST", r"systems/(?P<id>[^/*]+)/cleanup", self._system_cleanup, "SYSTEMS_ADMIN"),
            ("GET", r"physical_entities", self._list_entities, "SYSTEMS_VIEWER"),
            ("POST", r"physical_entities", self._create_entity, "SYSTEMS_EDITOR"),
            ("GET", r"physical_entities/(?P<id>[^/]+)", self._get_entity, "SYSTEMS_VIEWER"),
            ("PUT", r"physical_entities/(?P<id>[^/]+)", self._update_entity, "SYSTEMS_EDITOR"),
            ("DELETE", r"physical_entities/(?P<id>[^/]+)", self._delete_entity, "SYSTEMS_EDITOR"),
            ("GET", r"physical_fields", self._list_fields, "SYSTEMS_VIEWER"),
            ("POST", r"physical_fields", self._create_field, "SYSTEMS_EDITOR"),
            ("PUT", r"physical_fields/(?P<id>[^/]+)", self._update_field, "SYSTEMS_EDITOR"),
            ("DELETE", r"physical_fields/(?P<id>[^/]+)", self._delete_field, "SYSTEMS_EDITOR"),
            ("GET", r"system_routines", self._list_routines, "SYSTEMS_VIEWER"),
            ("POST", r"system_routines", self._create_routine, "SYSTEMS_EDITOR"),
            ("PUT", r"system_routines/(?P<id>[^/]+)", self._update_routine, "SYSTEMS_EDITOR"),
            ("DELETE", r"system_routines/(?P<id>[^/]+)", self._delete_routine, "SYSTEMS_EDITOR"),
            ("POST", r"dataflows/\*/cleanup", self._flows_cleanup, "SYSTEMS_ADMIN"),
            ("GET", r"dataflows", self._list_flows, "SYSTEMS_VIEWER"),
            ("POST", r"dataflows", self._create_flow, "SYSTEMS_EDITOR"),
            ("PUT", r"dataflows/(?P<id>[^/*]+)", self._update_flow, "SYSTEMS_EDITOR"),
            ("DELETE", r"dataflows/(?P<id>[^/*]+)", self._delete_flow, "SYSTEMS_EDITOR"),
            ("GET", r"data-quality/suites", self._list_suites, "QUALITY_VIEWER"),
            ("POST", r"data-quality/suites/\*/import-objects", self._import, "QUALITY_EDITOR"),
            ("GET", r"data-quality/checks", self._list_checks, "QUALITY_VIEWER"),
            ("GET", r"data-quality/checks/(?P<id>[^/]+)", self._get_check, "QUALITY_VIEWER"),
            ("PUT", r"data-quality/checks/(?P<id>[^/]+)", self._update_check, "QUALITY_EDITOR"),
        ]:
            r.append((method, re.compile(rf"/api/v1/{pattern}"), handler, permission))

    # -- test controls -----------------------------------------------------------------------------

    def add_user(
        self,
        name: str,
        *,
        tenant: str,
        api_key: str | None = None,
        token: str | None = None,
        permissions: set[str] | None = None,
    ) -> User:
        with self.lock:
            user = User(
                name,
                tenant,
                set(permissions or {"SYSTEMS_ADMIN", "QUALITY_ADMIN"}),
                api_key,
                token,
            )
            self.users.append(user)
            self.tenants.setdefault(tenant, Tenant())
            return user

    def set_permissions(self, name: str, permissions: set[str]) -> None:
        with self.lock:
            for u in self.users:
                if u.name == name:
                    u.permissions = set(permissions)

    def inject(self, *faults: Fault) -> None:
        with self.lock:
            self.faults.extend(faults)

    def burst(self, status: int, times: int, **kw: Any) -> None:
        self.inject(*(Fault(status=status, **kw) for _ in range(times)))

    def pending_faults(self) -> int:
        with self.lock:
            return len(self.faults)

    def refuse(
        self,
        resource: str,
        when: Callable[[dict[str, Any]], bool],
        *,
        status: int = 400,
        message: str = "validation failed",
    ) -> None:
        """Refuse POST/PUT bodies of ``resource`` (``physical_entities``...) matching ``when``."""
        with self.lock:
            self.refusals.append((resource, when, status, message))

    def match_scope_prefixes_like_sql(self, on: bool = True) -> None:
        """Match ``scopePrefix`` (flow search and flow cleanup) as ``ILIKE '<prefix>%'``: without
        case, ``_`` any one character, ``%`` any characters."""
        with self.lock:
            self.scope_prefix_like_sql = on

    def ignore_dry_run(self, on: bool = True) -> None:
        """Be a server that does not know ``dryRun``: every cleanup call deletes what it matches,
        and its answer says nothing of a dry run."""
        with self.lock:
            self.dry_run_ignored = on

    def limit_body(self, max_bytes: int | None) -> None:
        """Put a proxy in front that refuses a body larger than ``max_bytes`` (413)."""
        with self.lock:
            self.max_body_bytes = max_bytes

    def _scope_has_prefix(self, scope: str, prefix: str) -> bool:
        if not self.scope_prefix_like_sql:
            return scope.startswith(prefix)
        pattern = "".join(
            ".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in prefix
        )
        return re.match(pattern, scope, re.IGNORECASE | re.DOTALL) is not None

    def tenant(self, name: str) -> Tenant:
        return self.tenants[name]

    def seen(self, method: str | None = None, path: str | None = None) -> list[Seen]:
        return [
            s
            for s in list(self.requests)
            if (method is None or s.method == method) and (path is None or re.search(path, s.path))
        ]

    # -- HTTP --------------------------------------------------------------------------------------

    def _now(self) -> datetime:
        return self.clock().astimezone(UTC)

    def _stamp(self) -> str:
        return self._now().isoformat()

    def _date(self) -> str:
        return email.utils.format_datetime(self._now(), usegmt=True)

    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self.lock:
            for i, f in enumerate(self.faults):
                if (f.method is None or f.method == method) and (
                    f.path is None or re.search(f.path, path)
                ):
                    return self.faults.pop(i)
        return None

    def _error(self, status: int, message: str, path: str, name: str | None = None) -> Response:
        body = {
            "status": status,
            "timestamp": self._stamp(),
            "error": HTTPStatus(status).phrase,
            "message": message,
            "path": path,
            "errorName": name or HTTPStatus(status).phrase.upper().replace(" ", "_"),
        }
        return Response(
            json.dumps(body),
            status_code=status,
            media_type="application/json",
            headers={"Date": self._date()},
        )

    def _fault_answer(self, fault: Fault, path: str) -> Response:
        assert fault.status is not None
        response = self._error(fault.status, "injected fault", path)
        if fault.retry_after is not None:
            response.headers["Retry-After"] = fault.retry_after
        return response

    def _authenticate(self, request: Request) -> tuple[User, Tenant]:
        h = request.headers
        user = None
        auth = h.get("authorization", "")
        with self.lock:
            if auth.startswith("Bearer "):
                token = auth[len("Bearer ") :]
                user = next((u for u in self.users if u.token and u.token == token), None)
            elif h.get("x-bd-user") and h.get("x-bd-apikey"):
                user = next(
                    (
                        u
                        for u in self.users
                        if u.name == h["x-bd-user"] and u.api_key and u.api_key == h["x-bd-apikey"]
                    ),
                    None,
                )
        if user is None:
            raise ApiError(401, "Full authentication is required to access this resource")
        tenant = h.get("x-bd-tenant") or user.tenant
        if tenant != user.tenant:
            raise ApiError(403, f"user {user.name} has no access to tenant {tenant}")
        return user, self.tenants[tenant]

    @staticmethod
    def _allowed(user: User, permission: str) -> bool:
        resource, _, level = permission.rpartition("_")
        return any(
            p.rpartition("_")[0] == resource
            and _LEVELS.get(p.rpartition("_")[2], 0) >= _LEVELS[level]
            for p in user.permissions
        )

    async def _endpoint(self, request: Request) -> Response:
        method, path = request.method, request.url.path
        query = request.url.query
        status = 500
        fault: Fault | None = None
        try:
            fault = self._take_fault(method, path)
            if fault is not None and fault.delay:
                await anyio.sleep(fault.delay)
            if fault is not None and fault.status is not None and not fault.after:
                status = fault.status
                return self._fault_answer(fault, path)
            raw = await request.body()
            limit = self.max_body_bytes
            if limit is not None and len(raw) > limit:
                status = 413
                return self._proxy_too_large()
            for m, pattern, handler, permission in self._routes:
                match = pattern.fullmatch(path)
                if match is None or m != method:
                    continue
                user, tenant = self._authenticate(request)
                if not self._allowed(user, permission):
                    raise ApiError(403, f"user {user.name} lacks {permission}", "PERMISSION_DENIED")
                body = self._read_body(request, raw)
                with self.lock:
                    status, payload = handler(
                        tenant, body, dict(request.query_params), request, **match.groupdict()
                    )
                if fault is not None and fault.linger:
                    await anyio.sleep(fault.linger)
                if fault is not None and fault.body is not None:
                    status = fault.status or status
                    return Response(
                        fault.body,
                        status_code=status,
                        media_type="application/json",
                        headers={"Date": self._date()},
                    )
                if fault is not None and fault.status is not None:
                    status = fault.status
                    return self._fault_answer(fault, path)
                content = b"" if payload is None else json.dumps(payload).encode()
                return Response(
                    content,
                    status_code=status,
                    media_type="application/json" if payload is not None else None,
                    headers={"Date": self._date()},
                )
            allowed = self._allowed_methods(path)
            if method == "OPTIONS" and allowed:
                self._authenticate(request)
                status = 200
                return Response(status_code=200, headers={"Allow": allowed, "Date": self._date()})
            if allowed:
                status = 405
                response = self._error(405, f"{method} not supported", path)
                response.headers["Allow"] = allowed
                return response
            raise ApiError(404, f"no endpoint {path}")
        except ApiError as exc:
            if fault is not None and fault.status is not None:  # ``after``: the answer is lost
                status = fault.status
                return self._fault_answer(fault, path)
            status = exc.status
            response = self._error(exc.status, exc.message, path, exc.name)
            if exc.status == 415:
                response.headers["Accept"] = "application/json, application/*+json"
            return response
        finally:
            self.requests.append(Seen(method, path, query, status))

    @staticmethod
    def _read_body(request: Request, raw: bytes) -> Any:
        """The JSON body; 415 for a body (or a ``Content-Type``) no JSON reader takes."""
        given = request.headers.get("content-type")
        if raw or given is not None:
            media = (given or "application/octet-stream").split(";", 1)[0].strip().lower()
            kind, _, subtype = media.partition("/")
            if not (kind == "application" and (subtype == "json" or subtype.endswith("+json"))):
                shown = given or "application/octet-stream"
                raise ApiError(415, f"Content-Type '{shown}' is not supported")
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            raise ApiError(400, "malformed JSON") from None

    def _proxy_too_large(self) -> Response:
        return Response(TOO_LARGE_PAGE, status_code=413, media_type="text/html")

    def _allowed_methods(self, path: str) -> str:
        """The ``Allow`` of a path: the methods mapped to it, HEAD with GET (Spring's
        ``HttpOptionsHandler``); empty for a path nothing maps."""
        methods = [m for m, pattern, _, _ in self._routes if pattern.fullmatch(path)]
        if "GET" in methods:
            methods.append("HEAD")
        return ", ".join(dict.fromkeys(methods))

    # -- shared handler pieces ---------------------------------------------------------------------

    @staticmethod
    def _page(items: list[dict[str, Any]], query: dict[str, str]) -> tuple[int, dict[str, Any]]:
        try:
            page = max(int(query.get("page", 0)), 0)
            size = min(max(int(query.get("size", 20)), 1), MAX_PAGE)
        except ValueError:
            raise ApiError(400, "page and size are numbers") from None
        content = items[page * size : (page + 1) * size]
        total_pages = (len(items) + size - 1) // size
        return 200, {
            "content": content,
            "number": page,
            "size": size,
            "totalElements": len(items),
            "totalPages": total_pages,
            "first": page == 0,
            "last": page >= total_pages - 1,
            "numberOfElements": len(content),
            "pageable": {"pageNumber": page, "pageSize": size},
            "sort": {"sorted": False},
        }

    def _check_refusals(self, resource: str, body: dict[str, Any]) -> None:
        for res, when, status, message in self.refusals:
            if res == resource and when(body):
                raise ApiError(status, message)

    @staticmethod
    def _require(body: Any, *names: str) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise ApiError(400, "a JSON object is expected")
        for n in names:
            if body.get(n) in (None, ""):
                raise ApiError(400, f"{n} is required")
        return body

    @staticmethod
    def _get(store: dict[str, dict[str, Any]], uid: str, what: str) -> dict[str, Any]:
        try:
            return store[uid]
        except KeyError:
            raise ApiError(404, f"{what} {uid} not found") from None

    @staticmethod
    def _props_of(body: dict[str, Any]) -> list[dict[str, Any]]:
        props = body.get("additionalProperties") or []
        if not isinstance(props, list) or not all(
            isinstance(p, dict) and p.get("name") for p in props
        ):
            raise ApiError(400, "additionalProperties is a list of {name, value}")
        return [{"name": p["name"], "value": p.get("value")} for p in props]

    def _upsert_unique(
        self,
        store: dict[str, dict[str, Any]],
        key_of: Callable[[dict[str, Any]], tuple],
        obj: dict[str, Any],
        what: str,
    ) -> None:
        """Store ``obj`` unless another object has its natural key (409). The index of natural
        keys is checked against the store, so deletes and renames need not maintain it."""
        key = key_of(obj)
        index = self._indexes.setdefault(id(store), {})
        other = index.get(key)
        if (
            other is not None
            and other != obj["uuid"]
            and other in store
            and key_of(store[other]) == key
        ):
            raise ApiError(409, f"a {what} with this natural key already exists", "CONFLICT")
        store[obj["uuid"]] = obj
        index[key] = obj["uuid"]

    # -- Systems -----------------------------------------------------------------------------------

    def _system_short(self, t: Tenant, uid: str) -> dict[str, Any]:
        s = t.systems[uid]
        return {"uuid": uid, "name": s["name"]}

    def _list_systems(self, t: Tenant, body, query, request, **_) -> tuple[int, Any]:
        items = list(t.systems.values())
        if query.get("name"):  # the notes do not know if it is exact: substrings here
            items = [s for s in items if query["name"] in s["name"]]
        if query.get("search"):
            items = [s for s in items if query["search"].lower() in s["name"].lower()]
        return self._page(items, query)

    def _get_system(self, t: Tenant, body, query, request, id: str) -> tuple[int, Any]:
        return 200, self._get(t.systems, id, "system")

    def _write_system(self, t: Tenant, body: Any, uid: str, created: str | None) -> dict[str, Any]:
        body = self._require(body, "name")
        self._check_refusals("systems", body)
        subtype = body.get("subtype")
        if subtype not in (None, "APPLICATION", "ARCHIVE", "SERVICE", "DATABASE", "QUEUE", "JOB"):
            raise ApiError(400, f"unknown subtype {subtype}")
        now = self._stamp()
        obj = {
            "uuid": uid,
            "name": body["name"],
            "description": body.get("description"),
            "technology": body.get("technology"),
            "subtype": subtype,
            "additionalProperties": self._props_of(body),
            "creationDate": created or now,
            "modificationDate": now,
        }
        self._upsert_unique(t.systems, lambda s: (s["name"],), obj, "system")
        return obj

    def _create_system(self, t: Tenant, body, query, request, **_) -> tuple[int, Any]:
        return 201, self._write_system(t, body, str(uuid.uuid4()), None)

    def _update_system(self, t: Tenant, body, query, request, id: str) -> tuple[int, Any]:
        old = self._get(t.systems, id, "system")
        return 200, self._write_system(t, body, id, old["creationDate"])

    # -- physical entities -------------------------------------------------------------------------

    def _entity_view(self, t: Tenant, e: dict[str, Any]) -> dict[str, Any]:
        return {**e, "system": self._system_short(t, e["system"]["uuid"])}

    def _entity_key(self, e: dict[str, Any]) -> tuple:
        return (e["system"]["uuid"], e.get("schema") or "", e["name"])

    def _list_entities(self, t: Tenant, body, query, request, **_) -> tuple[int, Any]:
        items = list(t.entities.values())
        if query.get("systemUuid"):
            items = [e for e in items if e["system"]["uuid"] == query["systemUuid"]]
        if "schema" in query:
            items = [e for e in items if (e.get("schema") or "") == query["schema"]]
        if "name" in query:
            items = [e for e in items if e["name"] == query["name"]]
        if query.get("search"):
            needle = query["search"].lower()
            items = [
                e
                for e in items
                if needle in f"{e.get('schema') or ''}.{e['name']}".lower()
                or needle in e["name"].lower()
            ]
        if query.get("modificationDateBefore"):
            before = _parse_time(query["modificationDateBefore"], "modificationDateBefore")
            items = [e for e in items if _time(e["modificationDate"]) < before]
        return self._page([self._entity_view(t, e) for e in items], query)

    def _get_entity(self, t: Tenant, body, query, request, id: str) -> tuple[int, Any]:
        return 200, self._entity_view(t, self._get(t.entities, id, "physical entity"))

    def _write_entity(self, t: Tenant, body: Any, uid: str, created: str | None) -> dict[str, Any]:
        body = self._require(body, "name")
        system = _ref(body.get("system"))
        if system is None or system not in t.systems:
            raise ApiError(400, "system.uuid does not name a system")
        self._check_refusals("physical_entities", body)
        now = self._stamp()
        obj = {
            "uuid": uid,
            "system": {"uuid": system},
            "schema": body.get("schema"),
            "name": body["name"],
            "description": body.get("description"),
            "dataSet": body.get("dataSet"),
            "tableType": body.get("tableType"),
            "additionalProperties": self._props_of(body),
            "creationDate": created or now,
            "modificationDate": now,  # always the server's clock: "last update = upload time"
        }
        self._upsert_unique(t.entities, self._entity_key, obj, "physical entity")
        return self._entity_view(t, obj)

    def _create_entity(self, t: Tenant, body, query, request, **_) -> tuple[int, Any]:
        return 201, self._write_entity(t, body, str(uuid.uuid4()), None)

    def _update_entity(self, t: Tenant, body, query, request, id: str) -> tuple[int, Any]:
        old = self._get(t.entities, id, "physical entity")
        return 200, self._write_entity(t, body, id, old["creationDate"])

    def _delete_entity(self, t: Tenant, body, query, request, id: str) -> tuple[int, Any]:
        self._get(t.entities, id, "physical entity")
        self._remove_entities(t, {id})
        return 204, None

    def _remove_entities(self, t: Tenant, ids: set[str]) -> tuple[set[str], set[str]]:
        """Delete entities with their fields and every flow touching them; returns the field
        and flow ids that went with them."""
        field_ids = {f["uuid"] for f in t.fields.values() if f["physicalEntity"]["uuid"] in ids}
        flow_ids = self._flows_touching(t, ids, field_ids)
        for i in flow_ids:
            t.flows.pop(i, None)
        for i in field_ids:
            t.fields.pop(i, None)
        for i in ids:
            t.entities.pop(i, None)
        return field_ids, flow_ids

    @staticmethod
    def _flows_touching(t: Tenant, entities: set[str], fields: set[str]) -> set[str]:
        return {
            f["uuid"]
            for f in t.flows.values()
            if _ref(f.get("fromPhysicalEntity")) in entities
            or _ref(f.get("toPhysicalEntity")) in entities
            or _ref(f.get("fromPhysicalField")) in fields
            or _ref(f.get("toPhysicalField")) in fields
        }

    # -- physical fields ---------------------------------------------------------------------------

    def _field_view(self, t: Tenant, f: dict[str, Any]) -> dict[str, Any]:
        e = t.entities[f["physicalEntity"]["uuid"]]
        return {
            **f,
            "physicalEntity": {
                "uuid": e["uuid"],
                "schema": e.get("schema"),
                "name": e["name"],
                "system": self._system_short(t, e["system"]["uuid"]),
            },
        }

    def _list_fields(self, t: Tenant, body, query, request, **_) -> tuple[int, Any]:
        items = []
        for f in t.fields.values():
            e = t.entities[f["physicalEntity"]["uuid"]]
            if query.get("systemUuid") and e["system"]["uuid"] != query["systemUuid"]:
                continue
            if (
                "physicalEntitySchema" in query
                and (e.get("schema") or "") != query["physicalEntitySchema"]
            ):
                continue
            if query.get("physicalEntityName") and e["name"] != query["physicalEntityName"]:
                continue
            if query.get("physicalFieldName") and f["name"] != query["physicalFieldName"]:
                continue
            items.append(self._field_view(t, f))
        return self._page(items, query)

    def _write_field(self, t: Tenant, body: Any, uid: str, created: str | None) -> dict[str, Any]:
        body = self._require(body, "name")
        entity = _ref(body.get("physicalEntity"))
        if entity is None or entity not in t.entities:
            raise ApiError(400, "physicalEntity.uuid does not name a physical entity")
        self._check_refusals("physical_fields", body)
        now = self._stamp()
        obj = {
            "uuid": uid,
            "physicalEntity": {"uuid": entity},
            "name": body["name"],
            "type": body.get("type"),
            "ordinalPosition": body.get("ordinalPosition"),
            "description": body.get("description"),
            "additionalProperties": self._props_of(body),
            "creationDate": created or now,
            "modificationDate": now,
        }
        self._upsert_unique(
            t.fields, lambda f: (f["physicalEntity"]["uuid"], f["name"]), obj, "physical field"
        )
        return self._field_view(t, obj)

    def _create_field(self, t: Tenant, body, query, request, **_) -> tuple[int, Any]:
        return 201, self._write_field(t, body, str(uuid.uuid4()), None)

    def _update_field(self, t: Tenant, body, query, request, id: str) -> tuple[int, Any]:
        old = self._get(t.fields, id, "physical field")
        return 200, self._write_field(t, body, id, old["creationDate"])

    def _delete_field(self, t: Tenant, body, query, request, id: str) -> tuple[int, Any]:
        self._get(t.fields, id, "physical field")
        for i in self._flows_touching(t, set(), {id}):
            t.flows.pop(i)
        t.fields.pop(id)
        return 204, None

    # -- system routines ---------------------------------------------------------------------------

    def _routine_key(self, r: dict[str, Any]) -> tuple:
        return (r["system"]["uuid"], r.get("schema") or "", r["name"])

    def _list_routines(self, t: Tenant, body, query, request, **_) -> tuple[int, Any]:
        items = list(t.routines.values())
        if query.get("systemUuid"):
            items = [r for r in items if r["system"]["uuid"] == query["systemUuid"]]
        if "schema" in query:
            items = [r for r in items if (r.get("schema") or "") == query["schema"]]
        if query.get("name"):
            items = [r for r in items if r["name"] == query["name"]]
        if query.get("modificationDateBefore"):
            before = _parse_time(query["modificationDateBefore"], "modificationDateBefore")
            items = [r for r in items if _time(r["modificationDate"]) < before]
        return self._page(
            [{**r, "system": self._system_short(t, r["system"]["uuid"])} for r in items], query
        )

    def _write_routine(self, t: Tenant, body: Any, uid: str, created: str | None) -> dict[str, Any]:
        body = self._require(body, "name")
        system = _ref(body.get("system"))
        if system is None or system not in t.systems:
            raise ApiError(400, "system.uuid does not name a system")
        if body.get("type") not in ("PROCEDURE", "FUNCTION", "JOB"):
            raise ApiError(400, "type is PROCEDURE, FUNCTION or JOB")
        self._check_refusals("system_routines", body)
        now = self._stamp()
        obj = {
            "uuid": uid,
            "system": {"uuid": system},
            "schema": body.get("schema"),
            "name": body["name"],
            "type": body["type"],
            "description": body.get("description"),
            "definition": body.get("definition"),
            "additionalProperties": self._props_of(body),
            "creationDate": created or now,
            "modificationDate": now,
        }
        self._upsert_unique(t.routines, self._routine_key, obj, "system routine")
        return obj

    def _create_routine(self, t: Tenant, body, query, request, **_) -> tuple[int, Any]:
        return 201, self._write_routine(t, body, str(uuid.uuid4()), None)

    def _update_routine(self, t: Tenant, body, query, request, id: str) -> tuple[int, Any]:
        old = self._get(t.routines, id, "system routine")
        return 200, self._write_routine(t, body, id, old["creationDate"])

    def _delete_routine(self, t: Tenant, body, query, request, id: str) -> tuple[int, Any]:
        self._get(t.routines, id, "system routine")
        t.routines.pop(id)
        return 204, None

    # -- data flows --------------------------------------------------------------------------------

    _FLOW_ENDS = (
        "fromSystem",
        "fromPhysicalEntity",
        "fromPhysicalField",
        "toSystem",
        "toPhysicalEntity",
        "toPhysicalField",
    )

    def _flow_key(self, f: dict[str, Any]) -> tuple:
        return (f["scope"], *(_ref(f.get(end)) for end in self._FLOW_ENDS))

    def _list_flows(self, t: Tenant, body, query, request, **_) -> tuple[int, Any]:
        items = list(t.flows.values())
        if query.get("scope"):
            items = [f for f in items if f["scope"] == query["scope"]]
        if query.get("scopePrefix"):
            items = [f for f in items if self._scope_has_prefix(f["scope"], query["scopePrefix"])]
        if query.get("updatedBefore"):
            before = _parse_time(query["updatedBefore"], "updatedBefore")
            items = [f for f in items if _time(f["updateDate"]) < before]
        return self._page(items, query)

    def _write_flow(self, t: Tenant, body: Any, uid: str, created: str | None) -> dict[str, Any]:
        body = self._require(body, "scope", "fromSystem", "toSystem")
        stores = {"System": t.systems, "PhysicalEntity": t.entities, "PhysicalField": t.fields}
        for end in self._FLOW_ENDS:
            ref = _ref(body.get(end))
            store = stores[end.removeprefix("from").removeprefix("to")]
            if body.get(end) is not None and (ref is None or ref not in store):
                raise ApiError(400, f"{end}.uuid does not name an object")
        self._check_refusals("dataflows", body)
        now = self._stamp()
        obj = {
            "uuid": uid,
            "name": body.get("name"),
            "scope": body["scope"],
            "description": body.get("description"),
            **{e: {"uuid": _ref(body.get(e))} if body.get(e) else None for e in self._FLOW_ENDS},
            "additionalProperties": self._props_of(body),
            "creationDate": created or now,
            "updateDate": now,  # stamped by the server on every write
        }
        self._upsert_unique(t.flows, self._flow_key, obj, "data flow")
        return obj

    def _create_flow(self, t: Tenant, body, query, request, **_) -> tuple[int, Any]:
        return 201, self._write_flow(t, body, str(uuid.uuid4()), None)

    def _update_flow(self, t: Tenant, body, query, request, id: str) -> tuple[int, Any]:
        old = self._get(t.flows, id, "data flow")
        return 200, self._write_flow(t, body, id, old["creationDate"])

    def _delete_flow(self, t: Tenant, body, query, request, id: str) -> tuple[int, Any]:
        self._get(t.flows, id, "data flow")
        t.flows.pop(id)
        return 204, None

    # -- cleanup actions ---------------------------------------------------------------------------

    def _cutoff(self, body: dict[str, Any]) -> datetime:
        has_date = body.get("updatedBefore") is not None
        has_days = body.get("olderThanDays") is not None
        if has_date == has_days:
            raise ApiError(400, "exactly one of updatedBefore and olderThanDays is required")
        if has_date:
            return _parse_time(body["updatedBefore"], "updatedBefore")
        days = body["olderThanDays"]
        if not isinstance(days, int) or days < 0:
            raise ApiError(400, "olderThanDays is a non-negative integer")
        return self._now() - timedelta(days=days)

    def _dry_run(self, body: dict[str, Any]) -> bool:
        if self.dry_run_ignored:
            return False  # a server that does not know the field carries every call out
        if not isinstance(body.get("dryRun"), bool):
            raise ApiError(400, "dryRun (true or false) is required")
        return body["dryRun"]

    def _cleanup_answer(self, dry: bool, answer: dict[str, Any]) -> dict[str, Any]:
        if self.dry_run_ignored:
            return answer
        return {"dryRun": dry, **answer}

    def _flows_cleanup(self, t: Tenant, body, query, request, **_) -> tuple[int, Any]:
        body = self._require(body)
        prefix, scopes = body.get("scopePrefix"), body.get("scopes")
        if not prefix and not scopes:
            raise ApiError(400, "scopePrefix or scopes is required")
        cutoff, dry = self._cutoff(body), self._dry_run(body)
        matched = [
            f
            for f in t.flows.values()
            if (
                (prefix and self._scope_has_prefix(f["scope"], prefix))
                or (scopes and f["scope"] in scopes)
            )
            and _time(f["updateDate"]) < cutoff
        ]
        if not dry:
            for f in matched:
                t.flows.pop(f["uuid"])
        return 200, self._cleanup_answer(
            dry,
            {
                "cutoff": cutoff.isoformat(),
                "matched": len(matched),
                "deleted": 0 if dry else len(matched),
                "items": [
                    {"uuid": f["uuid"], "scope": f["scope"], "name": f["name"]} for f in matched
                ],
            },
        )

    def _system_cleanup(self, t: Tenant, body, query, request, id: str) -> tuple[int, Any]:
        self._get(t.systems, id, "system")
        body = self._require(body, "level", "resourceTypes")
        cutoff, dry = self._cutoff(body), self._dry_run(body)
        level, types = body["level"], set(body["resourceTypes"])
        unknown = types - {"PHYSICAL_ENTITY", "PHYSICAL_FIELD", "SYSTEM_ROUTINE"}
        if unknown:
            raise ApiError(400, f"unknown resourceTypes {sorted(unknown)}")
        if level == "SCHEMA":
            if not isinstance(body.get("schemas"), list):
                raise ApiError(400, "schemas is required at level SCHEMA")
            schemas: set[str] | None = {s or "" for s in body["schemas"]}
        elif level == "SYSTEM":
            schemas = None
        else:
            raise ApiError(400, "level is SCHEMA or SYSTEM")

        def in_scope(obj: dict[str, Any]) -> bool:
            return obj["system"]["uuid"] == id and (
                schemas is None or (obj.get("schema") or "") in schemas
            )

        def stale(obj: dict[str, Any]) -> bool:
            return _time(obj["modificationDate"]) < cutoff

        entities = (
            {e["uuid"]: e for e in t.entities.values() if in_scope(e) and stale(e)}
            if "PHYSICAL_ENTITY" in types
            else {}
        )
        routines = (
            [r for r in t.routines.values() if in_scope(r) and stale(r)]
            if "SYSTEM_ROUTINE" in types
            else []
        )
        cascaded_fields = {
            f["uuid"] for f in t.fields.values() if f["physicalEntity"]["uuid"] in entities
        }
        stale_fields: set[str] = set()
        if "PHYSICAL_FIELD" in types:
            # the fields a re-sent field list no longer has: stale fields of kept entities that
            # had other fields written since the cutoff
            by_entity: dict[str, list[dict[str, Any]]] = {}
            for f in t.fields.values():
                e = t.entities[f["physicalEntity"]["uuid"]]
                if in_scope(e) and e["uuid"] not in entities:
                    by_entity.setdefault(e["uuid"], []).append(f)
            for fields in by_entity.values():
                if any(not stale(f) for f in fields):
                    stale_fields |= {f["uuid"] for f in fields if stale(f)}
        flows = self._flows_touching(t, set(entities), cascaded_fields | stale_fields)
        statements = [r for r in routines if r.get("definition")]
        results: dict[str, Any] = {}

        def part(n: int, items: list[dict[str, Any]] | None = None) -> dict[str, Any]:
            out: dict[str, Any] = {"matched": n, "deleted": 0 if dry else n}
            if items is not None:
                out["items"] = items
            return out

        if "PHYSICAL_ENTITY" in types:
            results["PHYSICAL_ENTITY"] = part(
                len(entities),
                [
                    {
                        "uuid": e["uuid"],
                        "schema": e.get("schema"),
                        "name": e["name"],
                        "tableType": e.get("tableType"),
                    }
                    for e in entities.values()
                ],
            )
        if "SYSTEM_ROUTINE" in types:
            results["SYSTEM_ROUTINE"] = part(
                len(routines),
                [
                    {"uuid": r["uuid"], "schema": r.get("schema"), "name": r["name"]}
                    for r in routines
                ],
            )
            results["STATEMENT"] = part(len(statements))
        if cascaded_fields or stale_fields or "PHYSICAL_FIELD" in types:
            results["PHYSICAL_FIELD"] = part(len(cascaded_fields | stale_fields))
        results["DATA_FLOW"] = part(len(flows))
        if not dry:
            for i in flows:
                t.flows.pop(i, None)
            for i in stale_fields:
                t.fields.pop(i, None)
            self._remove_entities(t, set(entities))
            for r in routines:
                t.routines.pop(r["uuid"], None)
        return 200, self._cleanup_answer(dry, {"cutoff": cutoff.isoformat(), "results": results})

    # -- data quality ------------------------------------------------------------------------------

    def _list_suites(self, t: Tenant, body, query, request, **_) -> tuple[int, Any]:
        return self._page(list(t.suites.values()), query)

    def _list_checks(self, t: Tenant, body, query, request, **_) -> tuple[int, Any]:
        items = list(t.checks.values())
        if query.get("code"):
            items = [c for c in items if c["code"] == query["code"]]
        if query.get("qualitySuiteUuid"):
            items = [c for c in items if c["qualitySuite"]["uuid"] == query["qualitySuiteUuid"]]
        return self._page(items, query)

    def _get_check(self, t: Tenant, body, query, request, id: str) -> tuple[int, Any]:
        return 200, self._get(t.checks, id, "quality check")

    def _update_check(self, t: Tenant, body, query, request, id: str) -> tuple[int, Any]:
        old = self._get(t.checks, id, "quality check")
        body = self._require(body, "code")
        if body["code"] != old["code"]:
            raise ApiError(400, "the code of a check cannot change")
        old.update(
            {
                k: body[k]
                for k in ("name", "description", "enabled", "physicalEntities", "physicalFields")
                if k in body
            }
        )
        old["modificationDate"] = self._stamp()
        return 200, old

    def _import(self, t: Tenant, body, query, request, **_) -> tuple[int, Any]:
        body = self._require(body, "qualitySuite")
        spec = body["qualitySuite"]
        checks = body.get("qualityChecks") or []
        if not isinstance(spec, dict) or not spec.get("code") or not isinstance(checks, list):
            raise ApiError(400, "qualitySuite.code and a qualityChecks list are required")
        now = self._stamp()
        suite = next((s for s in t.suites.values() if s["code"] == spec["code"]), None)
        if suite is None:
            suite = {
                "uuid": str(uuid.uuid4()),
                "code": spec["code"],
                "name": spec.get("name") or spec["code"],
                "published": bool(spec.get("published")),
                "createdAt": now,
                "updatedAt": now,
            }
            t.suites[suite["uuid"]] = suite
        created = updated = discarded = 0
        uuids: list[str] = []
        sent: set[str] = set()
        for c in checks:
            code = c.get("code") if isinstance(c, dict) else None
            refs = (c.get("physicalEntities") or []) if isinstance(c, dict) else []
            if (
                not code
                or any(_ref(r) is not None and _ref(r) not in t.entities for r in refs)
                or any(rule(c) for res, rule, _, _ in self.refusals if res == "quality_checks")
            ):
                discarded += 1
                continue
            sent.add(code)
            existing = next((x for x in t.checks.values() if x["code"] == code), None)
            if existing is not None and existing["qualitySuite"]["uuid"] != suite["uuid"]:
                discarded += 1  # a code belongs to one suite
                continue
            obj = {
                "uuid": existing["uuid"] if existing else str(uuid.uuid4()),
                "code": code,
                "name": c.get("name") or code,
                "description": c.get("description"),
                "enabled": c.get("enabled", True),
                "qualitySuite": {"uuid": suite["uuid"]},
                "physicalEntities": refs,
                "physicalFields": c.get("physicalFields") or [],
                "additionalProperties": self._props_of(c),
                "creationDate": existing["creationDate"] if existing else now,
                "modificationDate": now,
            }
            t.checks[obj["uuid"]] = obj
            uuids.append(obj["uuid"])
            if existing:
                updated += 1
            else:
                created += 1
        if query.get("cleanup") == "true":
            for x in t.checks.values():  # disabled, never deleted: history is kept
                mine = x["qualitySuite"]["uuid"] == suite["uuid"]
                if mine and x["code"] not in sent and x["enabled"]:
                    x["enabled"] = False
                    x["modificationDate"] = now
        suite["updatedAt"] = now
        return 200, {
            "message": f"{created} created, {updated} updated, {discarded} discarded",
            "rowCreated": created,
            "rowUpdated": updated,
            "rowDiscarded": discarded,
            "qualitySuiteUuid": suite["uuid"],
            "qualityChecksUuids": uuids,
        }

    # -- reading the state in tests ----------------------------------------------------------------

    def entities(self, tenant: str, *, system: str | None = None) -> set[tuple[str, str, str]]:
        """(System name, schema, name) of every physical entity."""
        t = self.tenants[tenant]
        with self.lock:
            return {
                (t.systems[e["system"]["uuid"]]["name"], e.get("schema") or "", e["name"])
                for e in t.entities.values()
                if system is None or t.systems[e["system"]["uuid"]]["name"] == system
            }

    def flow_scopes(self, tenant: str) -> list[str]:
        with self.lock:
            return sorted(f["scope"] for f in self.tenants[tenant].flows.values())

    def system_props(self, tenant: str, name: str) -> dict[str, list[str]]:
        with self.lock:
            for s in self.tenants[tenant].systems.values():
                if s["name"] == name:
                    return _props(s)
        raise KeyError(name)

    def checks(self, tenant: str) -> dict[str, bool]:
        """Quality check code -> enabled."""
        with self.lock:
            return {c["code"]: c["enabled"] for c in self.tenants[tenant].checks.values()}
