"""An OpenMetadata server in memory, from OpenMetadata's "OpenLineage Events" API page and the
project's notes on the OpenMetadata and Marquez lineage API contracts (§1).

What it keeps:

* **Auth**: ``Authorization: Bearer <JWT>``; an unknown or missing token is 401, on every path
  but ``/api/v1/system/version`` (openmetadata-service ``security/JwtFilter.java``:
  ``EXCLUDED_ENDPOINTS``, checked before the resource is called). ``GET
  /api/v1/users/loggedInUser`` answers the token's user (``resources/teams/UserResource.java``),
  ``users`` names it (``ingestion-bot`` when not given).
  A token without ``EditLineage`` is 403 on the lineage endpoints, after the body is read and
  validated (``OpenLineageResource.java`` calls ``authorizer.authorize`` inside the method, which
  Jersey calls only with a valid ``@Valid`` body); auto-creating a table also needs ``Create``
  (refused: ``createNotAllowed``, not 403).
* **Media type**: ``OpenLineageResource`` and ``LineageResource`` are
  ``@Consumes(MediaType.APPLICATION_JSON)`` (``OpenLineageResource.java`` at
  ``05534c735c571b1e6a59e9083782bbd288045589``, ``LineageResource.java`` listed at
  ``01450e133c4d6f1ed18b6395a8c5c8594691c2b7``): Jersey matches the media type before any filter
  runs, so a body sent as anything but ``application/json`` is 415 ``{"code":415,"message":"HTTP
  415 Unsupported Media Type"}`` before the token is even looked at. The fake is stricter than
  Jersey on one point: a body without a ``Content-Type`` is refused too.
* ``POST /api/v1/openlineage/lineage/batch`` with ``{"events": [RunEvent, ...]}``: the body is
  checked against OpenMetadata's own schemas (``ol_dagster_tests/contracts/openmetadata.py``,
  the same check as the fake's ``contract``), and anything that breaks them is 400
  ``{"code":400,"message":"[...]"}`` for the whole request (``ConstraintViolationExceptionMapper``
  and ``JsonMappingExceptionMapper``; an unparsable body is Dropwizard's ``Unable to process
  JSON``); then a disabled API is 503.
* Events of a type the ``eventTypeFilter`` does not allow (COMPLETE only by default; an event with
  no type counts as COMPLETE), or without inputs or outputs, are skipped. Otherwise one edge per
  resolved input x resolved output, keyed by the (from FQN, to FQN) pair, with ``lineageDetails``
  (source OpenLineage, pipeline, sqlQuery; the writer and times as every write stamps them,
  below).
* Dataset resolution (2.1), as upstream open-metadata/OpenMetadata resolves it
  (``openmetadata-service/src/main/java/org/openmetadata/service/openlineage/``; the rules are
  re-expressed below, each citing its file): candidate names from the symlink identifiers first,
  then the name (``OpenLineageDatasetNameNormalizer``); for each, SQL ``LIKE`` searches over the
  stored FQNs of non-deleted tables, the first listed match taken: the mapped service
  (``OpenLineageNamespaceMapping``), then the ``datasource`` facet, then FQN suffixes across the
  whole catalog; a bare table name only in a mapped namespace and only when unique
  (``OpenLineageEntityResolver``); else the table is created under the first candidate's mapped
  service, its FQN parts quoted when they hold a dot (``OpenLineageEntityCreator``,
  ``FullyQualifiedName``). Reasons: namespaceNotMapped, notFound (a storage path),
  unparsableName, creationDisabled, serviceNotFound, missingDatabase, missingSchema,
  missingColumns, createNotAllowed, invalidEntity (a soft-deleted table). A job without a
  pipeline is reported in ``unresolvedJobs`` (pipelineNotFound), its edges are written all the
  same.
* Edges (``jdbi3/LineageRepository.java`` ``addLineage`` at
  ``015f49b4999acbf63460f55ad16c60fbea68374d``; the row is ``CollectionDAO``'s
  ``entity_relationship`` insert, ``ON DUPLICATE KEY UPDATE json`` / ``ON CONFLICT (fromId, toId,
  relation) DO UPDATE``, at ``1a0490187a2e7e6c63cc7b25541efa381e38d4e6``): one per (from, to)
  entity pair, replaced whole by whoever writes it last; every write stamps ``createdAt`` and
  ``updatedAt`` with the server's time and ``createdBy`` and ``updatedBy`` with the caller
  (``securityContext.getUserPrincipal().getName()``, which both ``OpenLineageResource`` and
  ``LineageResource`` pass). ``source`` is OpenLineage for the batch endpoint; ``PUT
  /api/v1/lineage``, as a user or another connector adds one, keeps the source it is given
  (Manual by default).
* Containers (2.1, ``OpenLineageEntityResolver.resolveContainer``, index id ``70775367420``): a
  dataset of an object-storage namespace that no table matches resolves to the first container
  whose ``fullPath`` is ``<namespace>/<name>``, else to the one of its parent path; containers are
  never created. ``GET /api/v1/containers/{id}`` answers one (``fullPath`` included).
* Pipelines (2.0, ``OpenLineageEntityResolver.resolveOrCreatePipeline`` / ``createPipeline`` at
  ``2b0fe69050d547506724857ed20eacacf997f97a``): the parent job's (else the job's) pipeline is
  looked up as ``<service>.<namespace with [^a-zA-Z0-9_-] as _>-<job>`` (unquoted) and created
  under that name when missing, with no ``updatedBy``; its stored FQN quotes a name holding a
  dot, so such a lookup never finds it again and the next creation fails (no pipeline on the
  edge). 2.1 only looks pipelines up. ``GET /api/v1/pipelines/name/{fqn}`` answers one.
* Slowness: the server answers a batch only after the last event (``postLineageBatch`` loops over
  them); ``slow_after``/``slow_seconds`` make it write that many events at once and then take
  ``slow_seconds`` before the rest and its answer.
* The two answer generations behind ``generation``: 1 (OM 2.0: summary without ``partial``,
  unresolved datasets dropped silently, always 200, pipelines created) and 2 (OM 2.1: ``partial``,
  ``unresolvedDatasets``/``unresolvedJobs`` with ``eventIndex``, 400 only when every event failed).
  ``raise_for_jobs`` makes the events of a job raise (a ``failedEvents`` entry in both).
* Lineage (``resources/lineage/LineageResource.java``, ``jdbi3/LineageRepository.java``):
  ``DELETE /api/v1/lineage/{type}/name/{fromFQN}/{type}/name/{toFQN}`` and
  ``DELETE /api/v1/lineage/{type}/{fromId}/{type}/{toId}`` remove the edge whatever its source
  (200; 404 ``Lineage edge not found``, or the entity's own 404 when an end does not exist);
  ``DELETE /api/v1/lineage/{type}/{id}/type/{source}`` removes every edge of that source into the
  entity (200); ``GET /api/v1/lineage/getLineageEdge/{fromId}/{toId}`` answers
  ``{"edge": lineageDetails}`` or 404; ``GET /api/v1/lineage/{type}/name/{fqn}`` the
  ``EntityLineage`` (entity, nodes, upstreamEdges, downstreamEdges) to the depths asked;
  ``PUT /api/v1/lineage`` adds an edge (``AddLineage``).
* Reads (``resources/databases/TableResource.java``, ``DatabaseResource.java``):
  ``GET /api/v1/tables/name/{fqn}`` (404 ``table instance for <fqn> not found``; a soft-deleted
  table only with ``include=all|deleted``), ``GET /api/v1/databases?service=`` (paged by
  ``limit``/``after``). Entity 404s are ``{"code":404,"message":"<type> instance for <id> not
  found"}`` (``CatalogExceptionMessage.entityNotFound``).
* ``GET /api/v1/system/version`` (no token needed).
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import unquote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ol_dagster_tests.contracts.openmetadata import request_errors
from ol_dagster_tests.fakes.faults import Clock, FakeServer

EDIT_LINEAGE = "EditLineage"
ADMIN = "Admin"  # the token's user is an admin (``authorizer.authorizeAdmin``)
# lineageDetails.source (openmetadata-spec type/entityLineage.json, the version after the one
# vendored in contracts/openmetadata/, which has no ``source`` yet: see SOURCE.md)
LINEAGE_SOURCES = (
    "Manual",
    "ViewLineage",
    "QueryLineage",
    "PipelineLineage",
    "DashboardLineage",
    "DbtLineage",
    "SparkLineage",
    "OpenLineage",
    "ExternalTableLineage",
    "CrossDatabaseLineage",
    "ChildAssets",
)
CREATE = "Create"
MESSAGES = {
    "namespaceNotMapped": "No matching table exists, and namespace '{ns}' has no "
    "namespaceToServiceMapping entry to create one under",
    "notFound": "No container matches this storage path, and containers are never created",
    "unparsableName": "The dataset name has no schema and table to match or create a table with",
    "bareName": "A bare table name carries no schema: it only matches an existing table through "
    "namespaceToServiceMapping and is never created",
    "missingSchema": "The dataset name has no schema to create the table under",
    "creationDisabled": "No matching table exists and autoCreateEntities is off",
    "serviceNotFound": "The mapped database service does not exist",
    "missingDatabase": "The name has no database and the service does not have exactly one",
    "missingColumns": "No schema facet fields to create the table with",
    "createNotAllowed": "Not allowed to create the table",
    "invalidEntity": "The table is soft-deleted; restore it first",
    "pipelineNotFound": "No pipeline matches the job",
}


@dataclass
class Outcome:
    edges: int = 0
    unresolved: list[dict[str, Any]] = field(default_factory=list)
    unresolved_jobs: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


# -- names and searches, as upstream writes them ------------------------------------------------

# OpenLineageDatasetNameNormalizer.STORAGE_URI_SCHEMES (and OpenLineageEntityResolver's)
STORAGE_PREFIXES = ("gs://", "s3://", "s3a://", "abfss://", "abfs://", "wasbs://", "adl://")


def quote_part(name: str) -> str:
    """util/FullyQualifiedName.quoteName: a part holding a dot is written in double quotes."""
    if len(name) > 2 and name[0] == name[-1] == '"' and '"' not in name[1:-1]:
        return name if "." in name[1:-1] else name[1:-1]
    if '"' in name:
        raise ValueError(f"Invalid name {name}")
    return f'"{name}"' if "." in name else name


def build_fqn(*parts: str) -> str:
    return ".".join(quote_part(p) for p in parts)


def split_fqn(fqn: str) -> list[str]:
    """util/FullyQualifiedName.split (the FQN grammar): dots outside double quotes separate."""
    parts, current, quoted = [], "", False
    for c in fqn:
        if c == '"':
            quoted = not quoted
        if c == "." and not quoted:
            parts.append(current)
            current = ""
        else:
            current += c
    parts.append(current)
    return [p[1:-1] if len(p) > 1 and p[0] == p[-1] == '"' else p for p in parts]


def sql_like(pattern: str, value: str, escape: str | None = None) -> bool:
    """The FQN ``LIKE`` of OpenLineageEntityResolver's ListFilterByFqnPattern/Suffix (``ESCAPE
    '!'`` for the bare-token search, util/LikeEscape.java); case-sensitive, as PostgreSQL."""
    regex, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if c == escape and i + 1 < len(pattern):
            regex += re.escape(pattern[i + 1])
            i += 2
            continue
        regex += ".*" if c == "%" else "." if c == "_" else re.escape(c)
        i += 1
    return re.fullmatch(regex, value, re.DOTALL) is not None


def like_escape(value: str) -> str:
    return value.replace("!", "!!").replace("%", "!%").replace("_", "!_")


def is_storage(namespace: str) -> bool:
    return namespace.lower().startswith(STORAGE_PREFIXES)


def glue_catalog_id(namespace: str) -> str | None:
    """OpenLineageDatasetNameNormalizer.extractGlueCatalogId: the account of a Glue ARN."""
    fields = namespace.split(":")
    glue = namespace.lower().startswith("arn:") and len(fields) > 4 and fields[2].lower() == "glue"
    return fields[4] if glue and fields[4] else None


def _dot_form(name: str, allow_short_slash: bool) -> str | None:
    """OpenLineageDatasetNameNormalizer.normalize: Glue ``table/<db>/<table>``, a Hive warehouse
    path ``.../<db>.db/<table>``, a short ``db/table`` (not under a storage namespace), or a
    dotted name of at least two non-empty parts."""
    t = name.strip()
    if not t:
        return None
    segs = t.split("/")
    if t.startswith("table/") and len(segs) == 3 and all(segs):
        return f"{segs[1]}.{segs[2]}"
    if "/" in t:
        segs = [x for x in segs if x]
        for i in range(len(segs) - 2, -1, -1):
            if segs[i].endswith(".db") and len(segs[i]) > 3:
                return f"{segs[i][:-3]}.{segs[i + 1]}"
        short = allow_short_slash and "." not in t and 2 <= len(segs) <= 3
        return ".".join(segs) if short else None
    parts = t.split(".")
    return t if len(parts) >= 2 and all(parts) else None


def dataset_candidates(namespace: str, name: str, facets: dict[str, Any]) -> list[tuple[str, str]]:
    """OpenLineageDatasetNameNormalizer.extractCandidates: (dotted name, namespace it came from),
    every symlink identifier first in event order, then the dataset name; first one kept."""
    out: dict[str, str] = {}
    for ident in ((facets.get("symlinks") or {}).get("identifiers")) or []:
        dotted = _dot_form(str(ident.get("name") or ""), True)
        if dotted is not None:
            out.setdefault(dotted, str(ident.get("namespace") or ""))
    dotted = _dot_form(name, not is_storage(namespace))
    if dotted is not None:
        out.setdefault(dotted, namespace)
    return list(out.items())


def bare_token(name: str) -> str | None:
    t = name.strip()
    return t if t and "." not in t and "/" not in t else None


def _parse_time(value: Any) -> datetime | None:
    try:
        when = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when


class OpenMetadataFake:
    def __init__(
        self,
        *,
        generation: int = 2,
        tokens: dict[str, set[str]] | None = None,
        mapping: dict[str, str] | None = None,
        services: dict[str, list[str]] | None = None,
        clock: Clock | None = None,
        users: dict[str, str] | None = None,
    ) -> None:
        self.generation = generation
        self.users = dict(users or {})  # token -> the user it authenticates
        self.clock = clock or Clock()
        self.tokens = dict(tokens or {})
        self.mapping = dict(mapping or {})  # namespaceToServiceMapping
        self.services = {k: list(v) for k, v in (services or {}).items()}  # service -> databases
        self.enabled = True
        self.auto_create = True
        self.event_type_filter: list[str] | None = None  # None or []: COMPLETE only
        self.default_pipeline_service = "openlineage"
        self.tables: dict[str, dict[str, Any]] = {}  # FQN -> {"id", "columns", "deleted"}
        self.containers: dict[str, dict[str, Any]] = {}  # FQN -> {"id", "fullPath", "deleted"}
        self.pipelines: dict[str, dict[str, Any]] = {}  # stored FQN -> {"id", "name", ...}
        self.slow_after: int | None = None
        self.slow_seconds = 0.0
        self.edges: dict[tuple[str, str], dict[str, Any]] = {}
        self.raise_for_jobs: dict[str, str] = {}  # job name -> exception message
        self.received: list[dict[str, Any]] = []  # every event of every accepted request
        self.batches: list[list[dict[str, Any]]] = []  # the events of each, request by request
        app = Starlette(
            routes=[
                Route("/api/v1/openlineage/lineage/batch", self.post_batch, methods=["POST"]),
                Route("/api/v1/system/version", self.version, methods=["GET"]),
                Route("/api/v1/users/loggedInUser", self.logged_in_user, methods=["GET"]),
                Route(
                    "/api/v1/lineage/{from_type}/name/{from_fqn}/{to_type}/name/{to_fqn}",
                    self.delete_edge,
                    methods=["DELETE"],
                ),
                # Jersey prefers literal segments: these come before the templates they overlap
                Route(
                    "/api/v1/lineage/getLineageEdge/{from_id}/{to_id}",
                    self.get_edge,
                    methods=["GET"],
                ),
                Route(
                    "/api/v1/lineage/{entity_type}/{entity_id}/type/{source}",
                    self.delete_by_source,
                    methods=["DELETE"],
                ),
                Route(
                    "/api/v1/lineage/{from_type}/{from_id}/{to_type}/{to_id}",
                    self.delete_edge_by_id,
                    methods=["DELETE"],
                ),
                Route("/api/v1/lineage/{entity}/name/{fqn}", self.get_lineage, methods=["GET"]),
                Route("/api/v1/lineage", self.put_lineage, methods=["PUT"]),
                Route("/api/v1/tables/name/{fqn}", self.get_table, methods=["GET"]),
                Route("/api/v1/containers/{id}", self.get_container, methods=["GET"]),
                Route("/api/v1/pipelines/name/{fqn}", self.get_pipeline, methods=["GET"]),
                Route("/api/v1/databases", self.list_databases, methods=["GET"]),
            ]
        )
        app.router.routes.extend(self.check_routes())
        self.server = FakeServer(app, self.clock, contract=request_errors, name="openmetadata")

    # -- setup and reads for tests -----------------------------------------------------------

    def add_table(self, fqn: str, columns: list[str] = ("id",), deleted: bool = False) -> str:  # type: ignore[assignment]
        """A table under the FQN as OpenMetadata stores it (parts holding a dot quoted); its
        service and database are added too. Returns its id."""
        service, database = split_fqn(fqn)[:2]
        if database not in self.services.setdefault(service, []):
            self.services[service].append(database)
        previous = self.tables.get(fqn)
        table_id = previous["id"] if previous else str(uuid.uuid4())
        self.tables[fqn] = {"id": table_id, "columns": list(columns), "deleted": deleted}
        return table_id

    def add_container(self, fqn: str, full_path: str, deleted: bool = False) -> str:
        """A container (an object-storage service's bucket or prefix) at ``full_path``."""
        previous = self.containers.get(fqn)
        container_id = previous["id"] if previous else str(uuid.uuid4())
        self.containers[fqn] = {"id": container_id, "fullPath": full_path, "deleted": deleted}
        return container_id

    def table_id(self, fqn: str) -> str:
        return self._entity(fqn)["id"]

    def _entity(self, fqn: str) -> dict[str, Any]:
        return self.tables[fqn] if fqn in self.tables else self.containers[fqn]

    def _type(self, fqn: str) -> str:
        return "table" if fqn in self.tables else "container"

    def _by_id(self, entity_id: str, kind: str | None = None) -> str | None:
        """The FQN of the table or container with this id (of ``kind`` when given)."""
        for entity, store in (("table", self.tables), ("container", self.containers)):
            if kind in (None, entity):
                found = next((f for f, t in store.items() if t["id"] == entity_id), None)
                if found is not None:
                    return found
        return None

    def user_of(self, token: str) -> str:
        return self.users.get(token, "ingestion-bot")

    def _write_edge(self, src: str, dst: str, by: str, **details: Any) -> None:
        """LineageRepository.addLineage: the pair's row replaced whole, stamped with the
        server's time and the caller."""
        now = int(self.clock.now().timestamp() * 1000)
        self.edges[(src, dst)] = {
            **details,
            "createdAt": now,
            "updatedAt": now,
            "createdBy": by,
            "updatedBy": by,
        }

    def add_edge(
        self, src: str, dst: str, source: str = "Manual", by: str = "admin", **details: Any
    ) -> None:
        """An edge written the way ``PUT /api/v1/lineage`` writes it (another connector, a user)."""
        self._write_edge(src, dst, by, source=source, **details)

    def edge_pairs(self) -> set[tuple[str, str]]:
        return set(self.edges)

    # -- auth ---------------------------------------------------------------------------------

    @staticmethod
    def _not_json(request: Request) -> Response | None:
        """Jersey's answer to a body of another media type than ``@Consumes`` names."""
        kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if kind == "application/json":
            return None
        return JSONResponse({"code": 415, "message": "HTTP 415 Unsupported Media Type"}, 415)

    def _caller(self, request: Request) -> str:
        header = request.headers.get("authorization", "")
        return self.user_of(header[7:] if header.startswith("Bearer ") else "")

    def _auth(self, request: Request, permission: str | None) -> tuple[set[str], Response | None]:
        header = request.headers.get("authorization", "")
        token = header[7:] if header.startswith("Bearer ") else None
        if token is None or token not in self.tokens:
            return set(), JSONResponse(
                {"code": 401, "message": "Not Authorized! Invalid Token"}, 401
            )
        perms = self.tokens[token]
        if permission and permission not in perms:
            return perms, JSONResponse(
                {
                    "code": 403,
                    "message": "Principal: CatalogPrincipal{name='ingestion-bot'} "
                    f"operations [{permission}] not allowed",
                },
                403,
            )
        return perms, None

    # -- resolution ---------------------------------------------------------------------------

    def service_for(self, namespace: str) -> str | None:
        """OpenLineageNamespaceMapping.serviceFor: the exact key, else the longest key the
        namespace starts with; empty keys and values ignored."""
        entries = {k: v for k, v in self.mapping.items() if k and v}
        if not namespace:
            return None
        if namespace in entries:
            return entries[namespace]
        keys = [k for k in entries if namespace.startswith(k)]
        return entries[max(keys, key=len)] if keys else None

    def _search(self, pattern: str, escape: str | None = None) -> list[str]:
        """OpenLineageEntityResolver.listTables: non-deleted tables whose FQN is ``LIKE`` the
        pattern, in the order stored (the resolver takes the first)."""
        return [
            f for f, t in self.tables.items() if not t["deleted"] and sql_like(pattern, f, escape)
        ]

    def _find(self, ns: str, name: str, facets: dict[str, Any]) -> str | None:
        """OpenLineageEntityResolver.resolveTableFqn: each candidate's searches in order, then a
        bare token in a mapped namespace (only a unique match)."""
        source = (facets.get("datasource") or {}).get("name") or None
        for candidate, cand_ns in dataset_candidates(ns, name, facets):
            parts = candidate.split(".")
            db = parts[-3] if len(parts) >= 3 else glue_catalog_id(cand_ns)
            schema, table = parts[-2], parts[-1]
            patterns: list[str] = []
            service = self.service_for(cand_ns)  # resolveViaNamespaceMapping
            if service is not None:
                if db is not None:
                    patterns.append(f"{service}.{db}.{schema}.{table}")
                patterns.append(f"{service}.%.%{schema}.{table}")
            if source is not None and db is not None:  # resolveViaDatasource
                patterns.append(f"{source}.{db}.{schema}.{table}")
            if db is not None:  # ListFilterByFqnSuffix adds the leading %
                patterns.append(f"%{db}.{schema}.{table}")
            if source is not None:
                patterns.append(f"{source}.%.{schema}.{table}")
            patterns.append(f"%{schema}.{table}")
            for pattern in patterns:
                found = self._search(pattern)
                if found:
                    return found[0]
        token, service = bare_token(name), self.service_for(ns)
        if token is not None and service is not None:  # resolveBareTokenInService
            found = self._search(f"{like_escape(service)}.%.{like_escape(token)}", "!")
            if len(found) == 1:
                return found[0]
        return None

    def _resolve(self, ds: dict[str, Any], can_create: bool) -> tuple[str | None, str | None]:
        """OpenLineageEntityResolver.resolveDataset: (table FQN, None) or (None, reason)."""
        ns, name = str(ds["namespace"]), str(ds["name"])
        facets = ds.get("facets") or {}
        found = self._find(ns, name, facets)
        if found is None and self.generation >= 2 and is_storage(ns):
            found = self._container(ns, name)  # resolveExisting: a container, for storage
        if found is not None:
            return found, None
        candidates = dataset_candidates(ns, name, facets)
        if not candidates:  # unresolvedWithoutTableName
            if bare_token(name) is not None:
                return None, "unparsableName"
            return None, "notFound" if is_storage(ns) else "unparsableName"
        if not self.auto_create:
            return None, "creationDisabled"
        for candidate, cand_ns in candidates:  # createInMappedService: the first mapped one
            service = self.service_for(cand_ns)
            if service is not None:
                parts = candidate.split(".")
                db = parts[-3] if len(parts) >= 3 else glue_catalog_id(cand_ns)
                return self._create(service, db, parts[-2], parts[-1], facets, can_create)
        return None, "namespaceNotMapped"

    def _container(self, ns: str, name: str) -> str | None:
        """OpenLineageEntityResolver.resolveContainer: the first non-deleted container whose
        fullPath is the dataset's path, else its parent path (``lastIndexOf('/')`` > 0)."""
        full = ns + name if ns.endswith("/") else f"{ns}/{name}"
        slash = full.rfind("/")
        for path in [full] + ([full[:slash]] if slash > 0 and full[:slash] != full else []):
            for fqn, c in self.containers.items():
                if not c["deleted"] and c["fullPath"] == path:
                    return fqn
        return None

    def _pipeline(self, namespace: str, name: str) -> str | None:
        """The pipeline of a job: looked up by ``<service>.<pipeline name>`` unquoted (its hash,
        as ``getEntityReferenceByName`` reads it), else ``<namespace>.<job>``; 2.0 creates it
        when missing (``createPipeline``: no updatedBy), and a creation whose stored FQN exists
        fails (no pipeline)."""
        pname = f"{re.sub(r'[^a-zA-Z0-9_-]', '_', namespace)}-{name}" if namespace else name
        service = self.default_pipeline_service
        for wanted in (f"{service}.{pname}", f"{namespace}.{name}" if namespace else None):
            if wanted is None:
                continue
            hashed = split_fqn(wanted)
            found = next((f for f in self.pipelines if split_fqn(f) == hashed), None)
            if found is not None:
                return found
        if self.generation >= 2:
            return None
        stored = build_fqn(service, pname)
        if stored in self.pipelines:
            return None  # a duplicate FQN: the creation throws, the edge has no pipeline
        self.pipelines[stored] = {"id": str(uuid.uuid4()), "name": pname, "service": service}
        return stored

    def _create(
        self,
        service: str,
        database: str | None,
        schema: str,
        table: str,
        facets: dict[str, Any],
        can_create: bool,
    ) -> tuple[str | None, str | None]:
        """OpenLineageEntityCreator.createTable: columns first, then the service, the database
        (a two-part name: the service's only one), the caller's right to create; an existing
        table of that name found soft-deleted is ``invalidEntity``."""
        fields = ((facets.get("schema") or {}).get("fields")) or []
        if not [f for f in fields if isinstance(f, dict) and f.get("name")]:
            return None, "missingColumns"
        if service not in self.services:
            return None, "serviceNotFound"
        if database is None:
            databases = self.services[service]
            if len(databases) != 1:
                return None, "missingDatabase"
            database = databases[0]
        if not schema:
            return None, "missingSchema"
        fqn = build_fqn(service, database, schema, table)
        existing = self.tables.get(fqn)
        if existing is not None:
            return (None, "invalidEntity") if existing["deleted"] else (fqn, None)
        if not can_create:
            return None, "createNotAllowed"
        self.add_table(
            fqn, [str(f["name"]) for f in fields if isinstance(f, dict) and f.get("name")]
        )
        return fqn, None

    def _allowed(self, event_type: Any) -> bool:
        allowed = self.event_type_filter or ["COMPLETE"]
        return (event_type or "COMPLETE") in allowed

    def _process(self, event: dict[str, Any], can_create: bool, by: str) -> Outcome:
        out = Outcome()
        job = event["job"]
        if job["name"] in self.raise_for_jobs:
            out.error = self.raise_for_jobs[job["name"]]
            return out
        inputs, outputs = event.get("inputs") or [], event.get("outputs") or []
        if not self._allowed(event.get("eventType")) or not inputs or not outputs:
            return out
        resolved: dict[str, list[str]] = {"inputs": [], "outputs": []}
        seen: dict[tuple[str, str], str | None] = {}
        for key, datasets in (("inputs", inputs), ("outputs", outputs)):
            for ds in datasets:
                ident = (str(ds["namespace"]), str(ds["name"]))
                if ident not in seen:
                    fqn, reason = self._resolve(ds, can_create)
                    seen[ident] = fqn
                    if reason is not None and self.generation >= 2:
                        out.unresolved.append(
                            {
                                "namespace": ident[0],
                                "name": ident[1],
                                "reason": reason,
                                "message": MESSAGES[reason].format(ns=ident[0]),
                            }
                        )
                if seen[ident] is not None:
                    resolved[key].append(seen[ident])  # type: ignore[arg-type]
        parent = ((event.get("run") or {}).get("facets") or {}).get("parent") or {}
        pjob: dict[str, Any] = parent["job"] if isinstance(parent.get("job"), dict) else job
        pipeline = self._pipeline(str(pjob["namespace"]), str(pjob["name"]))
        if pipeline is None and self.generation >= 2:
            out.unresolved_jobs.append(
                {
                    "namespace": pjob["namespace"],
                    "name": pjob["name"],
                    "reason": "pipelineNotFound",
                    "message": MESSAGES["pipelineNotFound"],
                }
            )
        sql = ((job.get("facets") or {}).get("sql") or {}).get("query")
        for src in dict.fromkeys(resolved["inputs"]):
            for dst in dict.fromkeys(resolved["outputs"]):
                if src == dst:
                    continue
                # the mapper's eventTime and "openlineage" stamps are replaced by addLineage's
                self._write_edge(
                    src, dst, by, source="OpenLineage", pipeline=pipeline, sqlQuery=sql
                )
                out.edges += 1
        return out

    # -- endpoints ------------------------------------------------------------------------------

    async def version(self, request: Request) -> Response:
        return JSONResponse(
            {"version": f"2.{self.generation - 1}.0", "revision": "fake", "timestamp": 0}
        )

    async def logged_in_user(self, request: Request) -> Response:
        _, refused = self._auth(request, None)
        if refused is not None:
            return refused
        name = self._caller(request)
        return JSONResponse(
            {
                "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"user:{name}")),
                "name": name,
                "fullyQualifiedName": name,
                "isBot": name.endswith("-bot"),
                "deleted": False,
            }
        )

    async def post_batch(self, request: Request) -> Response:
        refused = self._not_json(request) or self._auth(request, None)[1]
        if refused is not None:
            return refused
        try:
            body = json.loads(await request.body())
        except ValueError:  # Dropwizard's JsonProcessingExceptionMapper
            return JSONResponse({"code": 400, "message": "Unable to process JSON"}, 400)
        errors = request_errors("POST", request.url.path, body)
        if errors:  # the bean-validation (and Jackson conversion) answer, for the whole request
            return JSONResponse({"code": 400, "message": "[" + ", ".join(errors) + "]"}, 400)
        perms, refused = self._auth(request, EDIT_LINEAGE)
        if refused is not None:
            return refused
        if not self.enabled:
            return JSONResponse(
                {
                    "status": "failure",
                    "message": "OpenLineage API is disabled",
                    "lineageEdgesCreated": 0,
                },
                503,
            )
        events = body["events"]
        self.received.extend(events)
        self.batches.append(events)
        by = self._caller(request)
        outcomes: list[Outcome] = []
        for i, event in enumerate(events):
            if i == self.slow_after:  # one event after another: a big batch outlasts a timeout
                await asyncio.sleep(self.slow_seconds)
            outcomes.append(self._process(event, CREATE in perms, by))
        if self.generation >= 2:
            return self._answer_gen2(outcomes)
        return self._answer_gen1(outcomes)

    def _answer_gen1(self, outcomes: list[Outcome]) -> Response:
        failed = [
            {"index": i, "reason": o.error, "retriable": False}
            for i, o in enumerate(outcomes)
            if o.error is not None
        ]
        successful = sum(1 for o in outcomes if o.error is None and o.edges > 0)
        skipped = sum(1 for o in outcomes if o.error is None and o.edges == 0)
        received, edges = len(outcomes), sum(o.edges for o in outcomes)
        if not failed and successful > 0:
            status = "success"
        elif failed and successful > 0:
            status = "partial_success"
        elif len(failed) == received:
            status = "failure"
        else:
            status = "success"
        body: dict[str, Any] = {
            "status": status,
            "message": f"Processed {received} events: {successful} successful, {len(failed)} "
            f"failed, {skipped} skipped. Created {edges} lineage edges.",
            "lineageEdgesCreated": edges,
            "summary": {
                "received": received,
                "successful": successful,
                "failed": len(failed),
                "skipped": skipped,
            },
        }
        if failed:
            body["failedEvents"] = failed
        return JSONResponse(body, 200)

    def _answer_gen2(self, outcomes: list[Outcome]) -> Response:
        counts = {"successful": 0, "partial": 0, "failed": 0, "skipped": 0}
        failed: list[dict[str, Any]] = []
        unresolved: list[dict[str, Any]] = []
        unresolved_jobs: list[dict[str, Any]] = []
        for i, o in enumerate(outcomes):
            unresolved += [{**u, "eventIndex": i} for u in o.unresolved]
            unresolved_jobs += [{**u, "eventIndex": i} for u in o.unresolved_jobs]
            if o.error is not None:
                counts["failed"] += 1
                failed.append({"index": i, "reason": o.error, "retriable": False})
            elif o.unresolved and o.edges == 0:
                counts["failed"] += 1
                failed.append(
                    {
                        "index": i,
                        "reason": f"No lineage edges created: {len(o.unresolved)} dataset(s) "
                        "could not be resolved",
                        "retriable": False,
                    }
                )
            elif o.unresolved:
                counts["partial"] += 1
            elif o.edges > 0:
                counts["successful"] += 1
            else:
                counts["skipped"] += 1
        received, edges = len(outcomes), sum(o.edges for o in outcomes)
        if counts["failed"] == 0 and counts["partial"] == 0:
            status = "success"
        elif counts["successful"] + counts["partial"] > 0:
            status = "partial_success"
        else:
            status = "failure"
        body: dict[str, Any] = {
            "status": status,
            "message": f"Processed {received} events: {counts['successful']} successful, "
            f"{counts['partial']} partial, {counts['failed']} failed, {counts['skipped']} "
            f"skipped. Created {edges} lineage edges.",
            "lineageEdgesCreated": edges,
            "summary": {"received": received, **counts},
            "unresolvedDatasets": unresolved,
            "unresolvedJobs": unresolved_jobs,
        }
        if failed:
            body["failedEvents"] = failed
        all_failed = received > 0 and counts["failed"] == received
        return JSONResponse(body, 400 if all_failed else 200)

    # -- lineage and reads ---------------------------------------------------------------------
    # resources/lineage/LineageResource.java and jdbi3/LineageRepository.java (the edges are the
    # entity_relationship rows UPSTREAM, their json the lineageDetails); an entity looked up and
    # missing is CatalogExceptionMessage.entityNotFound's 404.

    @staticmethod
    def _not_found(entity: str, ident: str) -> Response:
        return JSONResponse(
            {"code": 404, "message": f"{entity} instance for {ident} not found"}, 404
        )

    def _lookup(self, fqn: str, *, include: str = "non-deleted", kind: str = "table") -> str | None:
        """A table (or container) by FQN as ``getEntityReferenceByName`` finds it: by the hash
        of its parts, so quoting a part without a dot changes nothing
        (FullyQualifiedName.buildHash)."""
        try:
            wanted = build_fqn(*split_fqn(fqn))
        except ValueError:
            return None
        store = {"table": self.tables, "container": self.containers}.get(kind, {})
        for f, t in store.items():
            if build_fqn(*split_fqn(f)) == wanted:
                shown = include == "all" or (include == "deleted") == bool(t["deleted"])
                return f if shown else None
        return None

    def _ref(self, fqn: str) -> dict[str, Any]:
        t = self._entity(fqn)
        return {
            "id": t["id"],
            "type": self._type(fqn),
            "name": split_fqn(fqn)[-1],
            "fullyQualifiedName": fqn,
            "deleted": bool(t["deleted"]),
        }

    def _details(self, pair: tuple[str, str]) -> dict[str, Any]:
        """An edge's lineageDetails as the server writes them out (no nulls; the pipeline as an
        EntityReference)."""
        details = {k: v for k, v in self.edges[pair].items() if v is not None}
        pipeline = details.get("pipeline")
        if isinstance(pipeline, str):
            details["pipeline"] = {
                "id": self.pipelines[pipeline]["id"] if pipeline in self.pipelines else "",
                "type": "pipeline",
                "fullyQualifiedName": pipeline,
            }
        return details

    async def delete_edge(self, request: Request) -> Response:
        """deleteLineageByName: both ends looked up (Include.ALL), then the edge removed
        whatever its source."""
        _, refused = self._auth(request, EDIT_LINEAGE)
        if refused is not None:
            return refused
        p = request.path_params
        ends: list[str] = []
        for kind, raw in ((p["from_type"], p["from_fqn"]), (p["to_type"], p["to_fqn"])):
            found = self._lookup(unquote(raw), include="all", kind=kind)
            if found is None:
                return self._not_found(kind, unquote(raw))
            ends.append(found)
        pair = (ends[0], ends[1])
        if pair not in self.edges:
            return JSONResponse({"code": 404, "message": "Lineage edge not found"}, 404)
        del self.edges[pair]
        return Response(status_code=200)

    async def delete_edge_by_id(self, request: Request) -> Response:
        """deleteLineage: the ids are parsed (``UUID.fromString``: 400), both ends looked up
        (Include.ALL), then the edge removed whatever its source."""
        _, refused = self._auth(request, EDIT_LINEAGE)
        if refused is not None:
            return refused
        p = request.path_params
        ends: list[str] = []
        for kind, raw in ((p["from_type"], p["from_id"]), (p["to_type"], p["to_id"])):
            try:
                ident = str(uuid.UUID(unquote(raw)))
            except ValueError:
                return JSONResponse(
                    {"code": 400, "message": f"Invalid UUID string: {unquote(raw)}"}, 400
                )
            found = self._by_id(ident, kind) if kind in ("table", "container") else None
            if found is None:
                return self._not_found(kind, ident)
            ends.append(found)
        pair = (ends[0], ends[1])
        if pair not in self.edges:
            return JSONResponse({"code": 404, "message": "Lineage edge not found"}, 404)
        del self.edges[pair]
        return Response(status_code=200)

    async def delete_by_source(self, request: Request) -> Response:
        """deleteLineageBySource: every edge of that source into the entity goes, 200 whatever
        there was (it removes more than one edge: not the delete of one edge)."""
        _, refused = self._auth(request, EDIT_LINEAGE)
        if refused is not None:
            return refused
        p = request.path_params
        try:
            ident = str(uuid.UUID(unquote(p["entity_id"])))
        except ValueError:  # a UUID @PathParam Jersey cannot convert: 404
            return JSONResponse({"code": 404, "message": "HTTP 404 Not Found"}, 404)
        target = self._by_id(ident)
        source = unquote(p["source"])
        for pair in [k for k, v in self.edges.items() if k[1] == target]:
            if self.edges[pair].get("source") == source:
                del self.edges[pair]
        return Response(status_code=200)

    async def get_edge(self, request: Request) -> Response:
        """getLineageEdge: ``{"edge": lineageDetails}``, or EntityNotFoundException's 404."""
        _, refused = self._auth(request, None)
        if refused is not None:
            return refused
        ids: list[str] = []
        for raw in (request.path_params["from_id"], request.path_params["to_id"]):
            try:
                ids.append(str(uuid.UUID(unquote(raw))))
            except ValueError:  # a UUID @PathParam Jersey cannot convert: 404
                return JSONResponse({"code": 404, "message": "HTTP 404 Not Found"}, 404)
        pair = (self._by_id(ids[0]), self._by_id(ids[1]))
        if pair not in self.edges:
            message = f"Lineage edge not found between {ids[0]} and  {ids[1]}"
            return JSONResponse({"code": 404, "message": message}, 404)
        return JSONResponse({"edge": self._details(pair)})  # type: ignore[arg-type]

    async def get_lineage(self, request: Request) -> Response:
        """getLineageByFQN: the entity (non-deleted), then its upstream and downstream edges to
        the depths asked (0 to 3, default 1), the nodes they reach (Include.ALL)."""
        _, refused = self._auth(request, None)
        if refused is not None:
            return refused
        entity = request.path_params["entity"]
        raw = unquote(request.path_params["fqn"])
        fqn = self._lookup(raw, kind=entity)
        if fqn is None:
            return self._not_found(entity, raw)
        depths: dict[str, int] = {}
        for name in ("upstreamDepth", "downstreamDepth"):
            try:
                depths[name] = int(request.query_params.get(name, "1"))
            except ValueError:
                return JSONResponse({"code": 404, "message": "HTTP 404 Not Found"}, 404)
            if not 0 <= depths[name] <= 3:
                bound = (
                    "greater than or equal to 0" if depths[name] < 0 else "less than or equal to 3"
                )
                return JSONResponse(
                    {"code": 400, "message": f"[query param {name} must be {bound}]"}, 400
                )
        nodes: dict[str, dict[str, Any]] = {}
        up: list[dict[str, Any]] = []
        down: list[dict[str, Any]] = []
        for upstream, depth, out in (
            (True, depths["upstreamDepth"], up),
            (False, depths["downstreamDepth"], down),
        ):
            layer = [fqn]
            for _ in range(depth):
                following: list[str] = []
                for current in layer:
                    for src, dst in list(self.edges):
                        if (dst if upstream else src) != current:
                            continue
                        other = src if upstream else dst
                        out.append(
                            {
                                "fromEntity": self._entity(src)["id"],
                                "toEntity": self._entity(dst)["id"],
                                "lineageDetails": self._details((src, dst)),
                            }
                        )
                        nodes.setdefault(other, self._ref(other))
                        following.append(other)
                layer = following
        return JSONResponse(
            {
                "entity": self._ref(fqn),
                "nodes": list(nodes.values()),
                "upstreamEdges": up,
                "downstreamEdges": down,
            }
        )

    async def put_lineage(self, request: Request) -> Response:
        """addLineage: both ends looked up by id (non-deleted), the edge written with the
        lineageDetails given (source Manual when none: the schema's default), its times and
        author set by the server; an edge already on the pair is replaced."""
        refused = self._not_json(request) or self._auth(request, EDIT_LINEAGE)[1]
        if refused is not None:
            return refused
        try:
            body = json.loads(await request.body())
        except ValueError:
            return JSONResponse({"code": 400, "message": "Unable to process JSON"}, 400)
        errors = request_errors("PUT", "/api/v1/lineage", body)
        if errors:
            return JSONResponse({"code": 400, "message": "[" + ", ".join(errors) + "]"}, 400)
        edge = body["edge"]
        ends: list[str] = []
        for ref in (edge["fromEntity"], edge["toEntity"]):
            kind = str(ref["type"])
            found = self._by_id(str(ref["id"]), kind) if kind in ("table", "container") else None
            if found is None or self._entity(found)["deleted"]:
                return self._not_found(str(ref["type"]), str(ref["id"]))
            ends.append(found)
        given = dict(edge.get("lineageDetails") or {})
        given.pop("pipeline", None)  # pipelines are not kept by this fake
        if given.get("source", "Manual") not in LINEAGE_SOURCES:  # Jackson: an unknown enum value
            message = (
                "Cannot deserialize value of type `LineageDetails$Source` from String "
                f'"{given["source"]}": not one of the values accepted for Enum class: '
                f"[{', '.join(LINEAGE_SOURCES)}]"
            )
            return JSONResponse({"code": 400, "message": message}, 400)
        given = {"source": "Manual", **given}
        self._write_edge(ends[0], ends[1], self._caller(request), **given)
        return Response(status_code=200)

    async def get_container(self, request: Request) -> Response:
        """ContainerResource.get: the entity by id (non-deleted), ``fullPath`` included."""
        _, refused = self._auth(request, None)
        if refused is not None:
            return refused
        raw = unquote(request.path_params["id"])
        fqn = self._by_id(raw, "container")
        if fqn is None or self.containers[fqn]["deleted"]:
            return self._not_found("container", raw)
        return JSONResponse({**self._ref(fqn), "fullPath": self.containers[fqn]["fullPath"]})

    async def get_pipeline(self, request: Request) -> Response:
        """PipelineResource.getByName: by the hash of the FQN's parts."""
        _, refused = self._auth(request, None)
        if refused is not None:
            return refused
        raw = unquote(request.path_params["fqn"])
        try:
            wanted = split_fqn(raw)
        except ValueError:
            wanted = []
        found = next((f for f in self.pipelines if split_fqn(f) == wanted), None)
        if found is None:
            return self._not_found("pipeline", raw)
        p = self.pipelines[found]
        return JSONResponse(
            {
                "id": p["id"],
                "name": p["name"],
                "fullyQualifiedName": found,
                "service": {"type": "pipelineService", "name": p["service"]},
                "deleted": False,
            }
        )

    async def get_table(self, request: Request) -> Response:
        """TableResource.getByName (``include`` non-deleted by default)."""
        _, refused = self._auth(request, None)
        if refused is not None:
            return refused
        raw = unquote(request.path_params["fqn"])
        fqn = self._lookup(raw, include=request.query_params.get("include", "non-deleted"))
        if fqn is None:
            return self._not_found("table", raw)
        parts = split_fqn(fqn)
        t = self.tables[fqn]
        return JSONResponse(
            {
                **self._ref(fqn),
                "columns": [{"name": c, "dataType": "INT"} for c in t["columns"]],
                "service": {"type": "databaseService", "name": parts[0]},
                "database": {"type": "database", "fullyQualifiedName": build_fqn(*parts[:2])},
                "databaseSchema": {
                    "type": "databaseSchema",
                    "fullyQualifiedName": build_fqn(*parts[:3]),
                },
            }
        )

    async def list_databases(self, request: Request) -> Response:
        """DatabaseResource.list: ``service`` (its FQN) filters, ``limit`` 0..1000000 (default
        10), an opaque ``after`` cursor; ``paging.after`` while more remain."""
        _, refused = self._auth(request, None)
        if refused is not None:
            return refused
        q = request.query_params
        try:
            limit = int(q.get("limit", "10"))
            start = int(base64.b64decode(q["after"]).decode()) if q.get("after") else 0
        except ValueError:
            return JSONResponse({"code": 400, "message": "Invalid limit or cursor"}, 400)
        if not 0 <= limit <= 1000000:
            return JSONResponse(
                {"code": 400, "message": "[query param limit is out of range]"}, 400
            )
        services = [q["service"]] if q.get("service") else list(self.services)
        rows = [
            (service, db)
            for wanted in services
            for service in self.services
            if build_fqn(service) == build_fqn(*split_fqn(wanted))
            for db in self.services[service]
        ]
        page = rows[start : start + limit]
        paging: dict[str, Any] = {"total": len(rows)}
        if start + limit < len(rows):
            paging["after"] = base64.b64encode(str(start + limit).encode()).decode()
        data = [
            {
                "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"database:{service}.{db}")),
                "name": db,
                "fullyQualifiedName": build_fqn(service, db),
                "service": {"type": "databaseService", "name": service},
            }
            for service, db in page
        ]
        return JSONResponse({"data": data, "paging": paging})

    # -- the reads of ``ol-dagster check`` (kept apart from the sync's endpoints) ------------------
    # openmetadata-service .../resources/permissions/PermissionsResource.java
    #   (getResourceTypePermission): GET /api/v1/permissions/{resource} answers the logged-in
    #   user's ResourcePermission, {"resource", "permissions": [{"operation", "access"}]}, access
    #   one of allow|deny|conditionalAllow|conditionalDeny|notAllow (openmetadata-spec
    #   .../entity/policies/accessControl/resourcePermission.json). The fake knows the operations
    #   it enforces; reads need only a valid token here, so the View operations are allowed.
    # .../resources/services/database/DatabaseServiceResource.java (getByName): GET
    #   /api/v1/services/databaseServices/name/{fqn}; an unknown one is 404 "databaseService
    #   instance for {fqn} not found" (CatalogExceptionMessage.entityNotFound). A name holding a
    #   dot is quoted in its FQN (FullyQualifiedName.quoteName).
    # Both need a valid token (security/JwtFilter.java: only EXCLUDED_ENDPOINTS go without).

    # .../resources/system/SystemResource.java (getSettingByName): GET
    #   /api/v1/system/settings/{name}, ``authorizer.authorizeAdmin`` first (403 otherwise), a
    #   ``Settings`` ``{config_type, config_value}`` (openmetadata-spec settings/settings.json at
    #   03c865295292b08eea509fb99f191b2ead3fa66e); the OpenLineage one's value holds the keys of
    #   configuration/openLineageSettings.json the fake keeps.

    CHECK_OPERATIONS = ("ViewAll", "ViewBasic", CREATE, EDIT_LINEAGE)

    def check_routes(self) -> list[Route]:
        from ol_dagster.catalog.openmetadata.check import OM_DATABASE_SERVICE, OM_PERMISSIONS

        return [
            Route(OM_PERMISSIONS, self.permissions, methods=["GET"]),
            Route(OM_DATABASE_SERVICE, self.database_service, methods=["GET"]),
            Route("/api/v1/system/settings/{name}", self.setting, methods=["GET"]),
        ]

    async def setting(self, request: Request) -> Response:
        perms, refused = self._auth(request, None)
        if refused is not None:
            return refused
        if ADMIN not in perms:
            name = self._caller(request)
            message = f"Principal: CatalogPrincipal{{name='{name}'}} is not admin"
            return JSONResponse({"code": 403, "message": message}, 403)
        if request.path_params["name"] != "openLineageSettings":
            return self._not_found("setting", request.path_params["name"])
        value = {
            "enabled": self.enabled,
            "autoCreateEntities": self.auto_create,
            "defaultPipelineService": self.default_pipeline_service,
            "namespaceToServiceMapping": dict(self.mapping),
            "eventTypeFilter": list(self.event_type_filter or []),
        }
        return JSONResponse({"config_type": "openLineageSettings", "config_value": value})

    async def permissions(self, request: Request) -> Response:
        perms, refused = self._auth(request, None)
        if refused is not None:
            return refused
        resource = unquote(request.path_params["resource"])
        return JSONResponse(
            {
                "resource": resource,
                "permissions": [
                    {
                        "operation": op,
                        "access": "allow"
                        if op.startswith("View") or (resource == "table" and op in perms)
                        else "notAllow",
                    }
                    for op in self.CHECK_OPERATIONS
                ],
            }
        )

    async def database_service(self, request: Request) -> Response:
        _, refused = self._auth(request, None)
        if refused is not None:
            return refused
        fqn = unquote(request.path_params["name"])
        name = fqn[1:-1] if len(fqn) > 1 and fqn[0] == fqn[-1] == '"' else fqn
        if name not in self.services:
            return JSONResponse(
                {"code": 404, "message": f"databaseService instance for {fqn} not found"}, 404
            )
        return JSONResponse(
            {
                "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"databaseService:{name}")),
                "name": name,
                "fullyQualifiedName": fqn,
                "serviceType": "Postgres",
                "deleted": False,
            }
        )
