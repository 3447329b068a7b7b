"""An OpenMetadata server in memory, from ``shared/seeds/openmetadata-openlineage-events-api.txt``
and ``shared/design/catalog-apis-openmetadata-marquez.md`` §1.

What it keeps:

* **Auth**: ``Authorization: Bearer <JWT>``; an unknown or missing token is 401; a token without
  ``EditLineage`` is 403 on the lineage endpoints (checked before anything else); auto-creating a
  table also needs ``Create`` (refused: ``createNotAllowed``, not 403).
* ``POST /api/v1/openlineage/lineage/batch`` with ``{"events": [RunEvent, ...]}`` (at least one):
  request validation is 400 ``{"code":400,"message":...}`` for the whole request (required
  fields, ``run.runId`` a UUID, no unknown top-level keys); a disabled API is 503.
* Events of a type the ``eventTypeFilter`` does not allow (COMPLETE only by default; an event with
  no type counts as COMPLETE), or without inputs or outputs, are skipped. Otherwise one edge per
  resolved input x resolved output, keyed by the (from FQN, to FQN) pair, with ``lineageDetails``
  (source OpenLineage, pipeline, eventTime in ms).
* Dataset resolution (2.1): ``namespaceToServiceMapping`` (exact key, else the longest key the
  namespace starts with); the last three dotted parts of the name are database.schema.table (two
  parts take the service's only database); an existing table is found under the mapped service,
  or, unmapped, by a unique FQN suffix; otherwise a table is created under the mapped service
  when the event carries schema-facet columns. Reasons: namespaceNotMapped, notFound (storage
  namespaces), unparsableName, creationDisabled, serviceNotFound, missingDatabase,
  missingColumns, createNotAllowed, invalidEntity (a soft-deleted table). A job without a pipeline
  is reported in ``unresolvedJobs`` (pipelineNotFound), its edges are written all the same.
* The two answer generations behind ``generation``: 1 (OM 2.0: summary without ``partial``,
  unresolved datasets dropped silently, always 200, pipelines created) and 2 (OM 2.1: ``partial``,
  ``unresolvedDatasets``/``unresolvedJobs`` with ``eventIndex``, 400 only when every event failed).
  ``raise_for_jobs`` makes the events of a job raise (a ``failedEvents`` entry in both).
* ``DELETE /api/v1/lineage/table/name/{fromFQN}/table/name/{toFQN}``: 200, or 404 ``Lineage edge
  not found``. ``GET /api/v1/system/version`` (authenticated).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import unquote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ol_dagster_tests.fakes.faults import Clock, FakeServer

EDIT_LINEAGE = "EditLineage"
CREATE = "Create"
RUN_EVENT_KEYS = {
    "eventType",
    "eventTime",
    "producer",
    "schemaURL",
    "run",
    "job",
    "inputs",
    "outputs",
}
STORAGE_SCHEMES = {"s3", "s3a", "gs", "gcs", "abfss", "abfs", "wasbs", "hdfs", "file", "dbfs"}
MESSAGES = {
    "namespaceNotMapped": "No matching table exists, and namespace '{ns}' has no "
    "namespaceToServiceMapping entry to create one under",
    "notFound": "No container matches the storage path",
    "unparsableName": "The dataset name has no schema.table",
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


def _parse_time(value: Any) -> datetime | None:
    try:
        when = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when


def _request_errors(body: Any) -> list[str]:
    if not isinstance(body, dict) or set(body) - {"events"}:
        return ["Invalid request format"]
    events = body.get("events")
    if not isinstance(events, list):
        return ["events must not be null"]
    if not events:
        return ["events size must be between 1 and 2147483647"]
    errors: list[str] = []
    for i, e in enumerate(events):
        where = f"events[{i}]"
        if not isinstance(e, dict):
            errors.append(f"{where} must be an object")
            continue
        errors += [f"{where}.{k} is not a known property" for k in sorted(set(e) - RUN_EVENT_KEYS)]
        for f in ("eventTime", "producer", "schemaURL", "run", "job"):
            if not e.get(f):
                errors.append(f"{where}.{f} must not be null")
        if e.get("eventTime") and _parse_time(e["eventTime"]) is None:
            errors.append(f"{where}.eventTime must be a date-time")
        run = e.get("run")
        if isinstance(run, dict):
            try:
                uuid.UUID(str(run.get("runId")))
            except ValueError:
                errors.append(f"{where}.run.runId must be a uuid")
        job = e.get("job")
        if isinstance(job, dict):
            errors += [
                f"{where}.job.{f} must not be null" for f in ("namespace", "name") if not job.get(f)
            ]
        for key in ("inputs", "outputs"):
            for j, ds in enumerate(e.get(key) or []):
                if not isinstance(ds, dict) or not ds.get("namespace") or not ds.get("name"):
                    errors.append(f"{where}.{key}[{j}] needs namespace and name")
    return errors


class OpenMetadataFake:
    def __init__(
        self,
        *,
        generation: int = 2,
        tokens: dict[str, set[str]] | None = None,
        mapping: dict[str, str] | None = None,
        services: dict[str, list[str]] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.generation = generation
        self.clock = clock or Clock()
        self.tokens = dict(tokens or {})
        self.mapping = dict(mapping or {})  # namespaceToServiceMapping
        self.services = {k: list(v) for k, v in (services or {}).items()}  # service -> databases
        self.enabled = True
        self.auto_create = True
        self.event_type_filter: list[str] | None = None  # None or []: COMPLETE only
        self.default_pipeline_service = "openlineage"
        self.tables: dict[str, dict[str, Any]] = {}  # FQN -> {"columns", "deleted"}
        self.pipelines: set[str] = set()  # pipeline FQNs
        self.edges: dict[tuple[str, str], dict[str, Any]] = {}
        self.raise_for_jobs: dict[str, str] = {}  # job name -> exception message
        self.received: list[dict[str, Any]] = []  # every event of every accepted request
        app = Starlette(
            routes=[
                Route("/api/v1/openlineage/lineage/batch", self.post_batch, methods=["POST"]),
                Route("/api/v1/system/version", self.version, methods=["GET"]),
                Route(
                    "/api/v1/lineage/{from_type}/name/{from_fqn}/{to_type}/name/{to_fqn}",
                    self.delete_edge,
                    methods=["DELETE"],
                ),
            ]
        )
        self.server = FakeServer(app, self.clock)

    # -- setup and reads for tests -----------------------------------------------------------

    def add_table(self, fqn: str, columns: list[str] = ("id",), deleted: bool = False) -> None:  # type: ignore[assignment]
        self.tables[fqn] = {"columns": list(columns), "deleted": deleted}

    def edge_pairs(self) -> set[tuple[str, str]]:
        return set(self.edges)

    # -- auth ---------------------------------------------------------------------------------

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
        entries = {k: v for k, v in self.mapping.items() if k and v}
        if namespace in entries:
            return entries[namespace]
        keys = [k for k in entries if namespace.startswith(k)]
        return entries[max(keys, key=len)] if keys else None

    def _resolve(self, ds: dict[str, Any], can_create: bool) -> tuple[str | None, str | None]:
        """(table FQN, None) or (None, reason)."""
        ns, name = str(ds["namespace"]), str(ds["name"])
        service = self.service_for(ns)
        parts = name.split(".")
        if service is None and ns.split("://", 1)[0].lower() in STORAGE_SCHEMES:
            return None, "notFound"
        if len(parts) == 1:
            if service is not None:
                found = [
                    f
                    for f, t in self.tables.items()
                    if f.startswith(service + ".") and f.rsplit(".", 1)[-1] == name
                ]
                if len(found) == 1:
                    return self._usable(found[0])
            return None, "unparsableName"
        if service is None:
            suffix = "." + ".".join(parts[-3:])
            found = [f for f in self.tables if f.endswith(suffix)]
            if len(found) == 1:
                return self._usable(found[0])
            return None, "namespaceNotMapped"
        if len(parts) >= 3:
            database, schema, table = parts[-3:]
        else:
            schema, table = parts
            databases = self.services.get(service) or []
            if len(databases) != 1:
                return None, "missingDatabase" if service in self.services else "serviceNotFound"
            database = databases[0]
        fqn = f"{service}.{database}.{schema}.{table}"
        if fqn in self.tables:
            return self._usable(fqn)
        if not self.auto_create:
            return None, "creationDisabled"
        if service not in self.services:
            return None, "serviceNotFound"
        schema_facet = (ds.get("facets") or {}).get("schema") or {}
        columns = [f.get("name") for f in schema_facet.get("fields") or [] if isinstance(f, dict)]
        if not columns:
            return None, "missingColumns"
        if not can_create:
            return None, "createNotAllowed"
        if database not in self.services[service]:
            self.services[service].append(database)
        self.add_table(fqn, columns)
        return fqn, None

    def _usable(self, fqn: str) -> tuple[str | None, str | None]:
        return (None, "invalidEntity") if self.tables[fqn]["deleted"] else (fqn, None)

    def _allowed(self, event_type: Any) -> bool:
        allowed = self.event_type_filter or ["COMPLETE"]
        return (event_type or "COMPLETE") in allowed

    def _process(self, event: dict[str, Any], can_create: bool) -> Outcome:
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
        pjob = parent.get("job") if isinstance(parent.get("job"), dict) else job
        pipeline = f"{self.default_pipeline_service}.{pjob['namespace']}-{pjob['name']}"
        if pipeline not in self.pipelines:
            if self.generation >= 2:
                out.unresolved_jobs.append(
                    {
                        "namespace": pjob["namespace"],
                        "name": pjob["name"],
                        "reason": "pipelineNotFound",
                        "message": MESSAGES["pipelineNotFound"],
                    }
                )
                pipeline = None
            else:
                self.pipelines.add(pipeline)
        when = _parse_time(event["eventTime"]) or self.clock.now()
        millis = int(when.timestamp() * 1000)
        sql = ((job.get("facets") or {}).get("sql") or {}).get("query")
        for src in dict.fromkeys(resolved["inputs"]):
            for dst in dict.fromkeys(resolved["outputs"]):
                if src == dst:
                    continue
                previous = self.edges.get((src, dst), {})
                self.edges[(src, dst)] = {
                    "source": "OpenLineage",
                    "pipeline": pipeline,
                    "sqlQuery": sql,
                    "createdAt": previous.get("createdAt", millis),
                    "updatedAt": millis,
                    "createdBy": "openlineage",
                    "updatedBy": "openlineage",
                }
                out.edges += 1
        return out

    # -- endpoints ------------------------------------------------------------------------------

    async def version(self, request: Request) -> Response:
        _, refused = self._auth(request, None)
        if refused is not None:
            return refused
        return JSONResponse(
            {"version": f"2.{self.generation - 1}.0", "revision": "fake", "timestamp": 0}
        )

    async def post_batch(self, request: Request) -> Response:
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
        try:
            body = json.loads(await request.body())
        except ValueError:
            return JSONResponse({"code": 400, "message": "Invalid request format"}, 400)
        errors = _request_errors(body)
        if errors:
            return JSONResponse({"code": 400, "message": "[" + ", ".join(errors) + "]"}, 400)
        events = body["events"]
        self.received.extend(events)
        outcomes = [self._process(e, CREATE in perms) for e in events]
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

    async def delete_edge(self, request: Request) -> Response:
        _, refused = self._auth(request, EDIT_LINEAGE)
        if refused is not None:
            return refused
        p = request.path_params
        pair = (unquote(p["from_fqn"]), unquote(p["to_fqn"]))
        if p["from_type"] != "table" or p["to_type"] != "table" or pair not in self.edges:
            return JSONResponse({"code": 404, "message": "Lineage edge not found"}, 404)
        del self.edges[pair]
        return Response(status_code=200)
