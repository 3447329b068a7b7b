"""A Marquez server in memory, from ``shared/design/catalog-apis-openmetadata-marquez.md`` §2.

What it keeps of Marquez's behaviour:

* ``POST /api/v1/lineage``: the event kind from the part of ``schemaURL`` after its last ``/``
  (DatasetEvent, JobEvent, anything else a RunEvent); **201 with an empty body**; bean validation
  failures are 422 ``{"errors": [...]}`` (null eventTime, producer, run.runId, job or dataset
  namespace/name, a parent facet without run.runId, a typed facet without ``_producer`` or
  ``_schemaURL``); a namespace breaking ``^[a-zA-Z:;=/0-9_\\-.@+]{1,1024}$`` is 400 with an empty
  body; an eventTime without time and offset is 400 with a JSON message.
* Every event upserts its namespace, job and datasets and sets ``is_hidden`` back to false
  (undelete). A terminal run event (COMPLETE, FAIL, ABORT) or a JobEvent makes the event's inputs
  and outputs the job's current ones; a non-streaming run event with empty or missing inputs (or
  outputs) clears the job's current inputs (or outputs).
* ``DELETE /api/v1/namespaces/{ns}/jobs/{job}`` and ``.../datasets/{name}`` soft-delete (200 with
  the object's JSON; 404 when absent or already hidden). Lists leave hidden objects out, and the
  lineage graph is built from current inputs and outputs of visible jobs and datasets only.
* ``GET /api/v1/namespaces`` (hidden namespaces included), ``GET /api/v1/namespaces/{ns}/jobs``
  and ``.../datasets`` (404 for an unknown namespace).
* No authentication.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any
from urllib.parse import unquote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ol_dagster_tests.fakes.faults import Clock, FakeServer

Key = tuple[str, str]

NAMESPACE = re.compile(r"^[a-zA-Z:;=/0-9_\-.@+]{1,1024}$")
TERMINAL = {"COMPLETE", "FAIL", "ABORT"}
# facets Marquez reads into typed classes: each needs _producer and _schemaURL
TYPED_RUN_FACETS = {"nominalTime", "parent"}
TYPED_JOB_FACETS = {"documentation", "sourceCodeLocation", "sql"}
TYPED_DATASET_FACETS = {
    "documentation",
    "schema",
    "dataSource",
    "lifecycleStateChange",
    "columnLineage",
    "symlinks",
    "ownership",
}


def _event_kind(event: dict[str, Any]) -> str:
    kind = str(event.get("schemaURL") or "").rsplit("/", 1)[-1]
    return kind if kind in ("DatasetEvent", "JobEvent") else "RunEvent"


def _facet_errors(facets: Any, typed: set[str], where: str) -> list[str]:
    errors = []
    if isinstance(facets, dict):
        for name in sorted(typed & set(facets)):
            facet = facets[name]
            for required in ("_producer", "_schemaURL"):
                if not isinstance(facet, dict) or not facet.get(required):
                    errors.append(f"{where}.facets.{name}.{required} must not be null")
    return errors


def _datasets(event: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = event.get(key)
    return [d for d in value if isinstance(d, dict)] if isinstance(value, list) else []


def _ds_errors(ds: dict[str, Any], where: str) -> list[str]:
    errors = [f"{where}.{f} must not be null" for f in ("namespace", "name") if not ds.get(f)]
    errors += _facet_errors(ds.get("facets"), TYPED_DATASET_FACETS, where)
    return errors


def validation_errors(event: dict[str, Any]) -> list[str]:
    """Bean validation of Marquez's LineageEvent classes: 422 when not empty."""
    kind = _event_kind(event)
    errors = [f"{f} must not be null" for f in ("eventTime", "producer") if not event.get(f)]
    if kind == "DatasetEvent":
        ds = event.get("dataset")
        errors += (
            _ds_errors(ds, "dataset") if isinstance(ds, dict) else ["dataset must not be null"]
        )
        return errors
    job = event.get("job")
    if not isinstance(job, dict):
        errors.append("job must not be null")
    else:
        errors += [f"job.{f} must not be null" for f in ("namespace", "name") if not job.get(f)]
        errors += _facet_errors(job.get("facets"), TYPED_JOB_FACETS, "job")
    if kind == "RunEvent":
        run = event.get("run")
        if not isinstance(run, dict) or not run.get("runId"):
            errors.append("run.runId must not be null")
        else:
            facets = run.get("facets") or {}
            errors += _facet_errors(facets, TYPED_RUN_FACETS, "run")
            parent = facets.get("parent") if isinstance(facets, dict) else None
            if isinstance(parent, dict) and not (parent.get("run") or {}).get("runId"):
                errors.append("run.facets.parent.run.runId must not be null")
    for key in ("inputs", "outputs"):
        for i, ds in enumerate(_datasets(event, key)):
            errors += _ds_errors(ds, f"{key}[{i}]")
    return errors


def _namespaces(event: dict[str, Any]) -> list[str]:
    out = [str((event.get("job") or {}).get("namespace") or "")] if "job" in event else []
    if isinstance(event.get("dataset"), dict):
        out.append(str(event["dataset"].get("namespace") or ""))
    out += [
        str(d.get("namespace") or "") for k in ("inputs", "outputs") for d in _datasets(event, k)
    ]
    return [n for n in out if n]


def _parse_time(value: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else None


class MarquezFake:
    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or Clock()
        self.events: list[dict[str, Any]] = []
        self.namespaces: dict[str, dict[str, Any]] = {}
        self.jobs: dict[Key, dict[str, Any]] = {}
        self.datasets: dict[Key, dict[str, Any]] = {}
        app = Starlette(
            routes=[
                Route("/api/v1/lineage", self.post_lineage, methods=["POST"]),
                Route("/api/v1/namespaces", self.list_namespaces, methods=["GET"]),
                Route("/api/v1/namespaces/{ns}/jobs", self.list_jobs, methods=["GET"]),
                Route("/api/v1/namespaces/{ns}/jobs/{name}", self.delete_job, methods=["DELETE"]),
                Route("/api/v1/namespaces/{ns}/datasets", self.list_datasets, methods=["GET"]),
                Route(
                    "/api/v1/namespaces/{ns}/datasets/{name}",
                    self.delete_dataset,
                    methods=["DELETE"],
                ),
            ]
        )
        self.server = FakeServer(app, self.clock)

    # -- what a test reads -----------------------------------------------------------------------

    def visible_jobs(self) -> set[Key]:
        return {k for k, j in self.jobs.items() if not j["hidden"]}

    def visible_datasets(self) -> set[Key]:
        return {k for k, d in self.datasets.items() if not d["hidden"]}

    def hidden_jobs(self) -> set[Key]:
        return {k for k, j in self.jobs.items() if j["hidden"]}

    def edges(self) -> set[tuple[Key, Key, Key]]:
        """(input dataset, job, output dataset) of the lineage graph: current versions of visible
        jobs, between visible datasets."""
        visible = self.visible_datasets()
        return {
            (i, key, o)
            for key, job in self.jobs.items()
            if not job["hidden"]
            for i in job["inputs"] & visible
            for o in job["outputs"] & visible
        }

    # -- writes ------------------------------------------------------------------------------------

    def _touch_namespace(self, name: str) -> None:
        ns = self.namespaces.setdefault(name, {"createdAt": self.clock.now()})
        ns.update(hidden=False, updatedAt=self.clock.now())

    def _touch_dataset(self, ds: dict[str, Any], when: datetime) -> Key:
        key = (str(ds["namespace"]), str(ds["name"]))
        self._touch_namespace(key[0])
        row = self.datasets.setdefault(key, {"createdAt": when, "fields": []})
        schema = (ds.get("facets") or {}).get("schema")
        if isinstance(schema, dict):
            row["fields"] = [f.get("name") for f in schema.get("fields") or []]
        row.update(hidden=False, updatedAt=when)
        return key

    def _touch_job(self, job: dict[str, Any]) -> dict[str, Any]:
        key = (str(job["namespace"]), str(job["name"]))
        self._touch_namespace(key[0])
        row = self.jobs.setdefault(
            key, {"createdAt": self.clock.now(), "inputs": set(), "outputs": set()}
        )
        row.update(hidden=False, updatedAt=self.clock.now(), facets=job.get("facets") or {})
        return row

    def _store(self, event: dict[str, Any], when: datetime) -> None:
        self.events.append(event)
        kind = _event_kind(event)
        if kind == "DatasetEvent":
            self._touch_dataset(event["dataset"], when)
            return
        inputs = {self._touch_dataset(d, when) for d in _datasets(event, "inputs")}
        outputs = {self._touch_dataset(d, when) for d in _datasets(event, "outputs")}
        job = self._touch_job(event["job"])
        if kind == "JobEvent":
            job["inputs"], job["outputs"] = inputs, outputs
            return
        job_type = (event["job"].get("facets") or {}).get("jobType") or {}
        streaming = str(job_type.get("processingType") or "").upper() == "STREAMING"
        if not streaming:  # empty or missing inputs/outputs mark the current ones as previous
            if not inputs:
                job["inputs"] = set()
            if not outputs:
                job["outputs"] = set()
        if str(event.get("eventType") or "").upper() in TERMINAL:
            if inputs:
                job["inputs"] = inputs
            if outputs:
                job["outputs"] = outputs

    async def post_lineage(self, request: Request) -> Response:
        try:
            event = json.loads(await request.body())
        except ValueError as exc:
            return JSONResponse({"code": 400, "message": f"Unable to process JSON: {exc}"}, 400)
        if not isinstance(event, dict):
            return JSONResponse({"code": 400, "message": "Unable to process JSON"}, 400)
        errors = validation_errors(event)
        if errors:
            return JSONResponse({"errors": errors}, 422)
        if any(not NAMESPACE.match(ns) for ns in _namespaces(event)):
            return Response(status_code=400)
        when = _parse_time(str(event["eventTime"]))
        if when is None:
            return JSONResponse(
                {"code": 400, "message": f"Cannot deserialize eventTime {event['eventTime']!r}"},
                400,
            )
        self._store(event, when)
        return Response(status_code=201)

    # -- reads and deletes -----------------------------------------------------------------------

    def _job_json(self, key: Key) -> dict[str, Any]:
        job = self.jobs[key]
        return {
            "id": {"namespace": key[0], "name": key[1]},
            "type": "BATCH",
            "name": key[1],
            "namespace": key[0],
            "createdAt": job["createdAt"].isoformat(),
            "updatedAt": job["updatedAt"].isoformat(),
            "inputs": [{"namespace": n, "name": d} for n, d in sorted(job["inputs"])],
            "outputs": [{"namespace": n, "name": d} for n, d in sorted(job["outputs"])],
        }

    def _dataset_json(self, key: Key) -> dict[str, Any]:
        ds = self.datasets[key]
        return {
            "id": {"namespace": key[0], "name": key[1]},
            "type": "DB_TABLE",
            "name": key[1],
            "physicalName": key[1],
            "namespace": key[0],
            "createdAt": ds["createdAt"].isoformat(),
            "updatedAt": ds["updatedAt"].isoformat(),
            "fields": [{"name": f} for f in ds["fields"]],
        }

    async def list_namespaces(self, request: Request) -> Response:
        limit = int(request.query_params.get("limit", 100))
        offset = int(request.query_params.get("offset", 0))
        names = sorted(self.namespaces)[offset : offset + limit]
        return JSONResponse(
            {
                "namespaces": [
                    {
                        "name": n,
                        "createdAt": self.namespaces[n]["createdAt"].isoformat(),
                        "updatedAt": self.namespaces[n]["updatedAt"].isoformat(),
                        "ownerName": "anonymous",
                        "description": None,
                        "isHidden": self.namespaces[n]["hidden"],
                    }
                    for n in names
                ]
            }
        )

    async def list_jobs(self, request: Request) -> Response:
        ns = unquote(request.path_params["ns"])
        keys = sorted(
            (k for k in self.visible_jobs() if k[0] == ns),
            key=lambda k: self.jobs[k]["updatedAt"],
            reverse=True,
        )
        return JSONResponse({"jobs": [self._job_json(k) for k in keys], "totalCount": len(keys)})

    async def list_datasets(self, request: Request) -> Response:
        ns = unquote(request.path_params["ns"])
        if ns not in self.namespaces:
            return JSONResponse({"code": 404, "message": f"Namespace '{ns}' not found."}, 404)
        keys = sorted(k for k in self.visible_datasets() if k[0] == ns)
        return JSONResponse(
            {"datasets": [self._dataset_json(k) for k in keys], "totalCount": len(keys)}
        )

    async def delete_job(self, request: Request) -> Response:
        key = (unquote(request.path_params["ns"]), unquote(request.path_params["name"]))
        if key not in self.visible_jobs():
            return JSONResponse({"code": 404, "message": f"Job '{key[1]}' not found."}, 404)
        before = self._job_json(key)
        self.jobs[key]["hidden"] = True
        return JSONResponse(before)

    async def delete_dataset(self, request: Request) -> Response:
        key = (unquote(request.path_params["ns"]), unquote(request.path_params["name"]))
        if key not in self.visible_datasets():
            return JSONResponse({"code": 404, "message": f"Dataset '{key[1]}' not found."}, 404)
        before = self._dataset_json(key)
        self.datasets[key]["hidden"] = True
        return JSONResponse(before)
