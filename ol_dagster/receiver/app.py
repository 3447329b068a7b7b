"""The receiver's endpoints: the OpenLineage API that producers already know how to call.

``POST /api/v1/lineage`` takes one event (the openlineage-python client, Spark and Airflow HTTP
transports), ``POST /api/v1/lineage/batch`` takes ``{"events": [...]}`` (a snapshot is one such
post), ``GET /healthz`` answers load balancers. The bearer token selects the sync definition.

Every answer says, per event, what was accepted and why anything was not, so a producer can fix its
events; the store then holds exactly the accepted events. ``wholeSnapshot`` says whether the post
is stored as a whole snapshot (a BATCH_SNAPSHOT definition, every event accepted), which the next
sync cleans against; the message says it in words. A store that cannot be reached is a 503
(retriable), never a silent drop.
"""

from __future__ import annotations

import hmac
import logging
from dataclasses import dataclass

import pydantic_core
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ol_dagster.gcpause import gc_paused
from ol_dagster.receiver.body import BodyError, read_body
from ol_dagster.receiver.intake import Intake, sort_events
from ol_dagster.settings import Definition, Settings, SnapshotMode
from ol_dagster.store import EventStore, StoreUnavailable

log = logging.getLogger("ol_dagster.receiver")

_JSON_TYPES = ("application/json", "application/x-ndjson", "text/json", "application/ld+json")


@dataclass(frozen=True)
class _Tenant:
    token: bytes
    definition: Definition


def _answer(status_code: int, status: str, message: str, **extra: object) -> JSONResponse:
    return JSONResponse({"status": status, "message": message, **extra}, status_code=status_code)


def _error(status_code: int, message: str, *, retriable: bool = False) -> JSONResponse:
    return _answer(
        status_code,
        "failure",
        message,
        batchId=None,
        summary={"received": 0, "accepted": 0, "rejected": 0},
        failedEvents=[],
        wholeSnapshot=False,
        retriable=retriable,
    )


def _summary_answer(
    intake: Intake, batch_id: int | None, note: str = "", *, whole_snapshot: bool = False
) -> JSONResponse:
    received, accepted, rejected = intake.received, len(intake.accepted), len(intake.rejected)
    if not received:
        status, code = "success", 200
        message = "empty batch stored"
    elif accepted == received:
        status, code = "success", 200
        message = f"{accepted} event(s) accepted"
    elif accepted:
        status, code = "partial_success", 200
        message = f"{accepted} of {received} event(s) accepted, {rejected} rejected"
    else:
        status, code = "failure", 400
        message = f"all {received} event(s) rejected"
    return _answer(
        code,
        status,
        message + note,
        batchId=batch_id,
        summary={"received": received, "accepted": accepted, "rejected": rejected},
        failedEvents=[r.as_dict() for r in intake.rejected],
        wholeSnapshot=whole_snapshot,
    )


def _snapshot_note(definition: Definition, intake: Intake) -> tuple[bool, str]:
    """Whether a stored ``/batch`` post is a whole snapshot (as the store decides: a
    BATCH_SNAPSHOT definition, every event accepted, at least one), and the sentence that tells
    the producer what that means at the next sync."""
    if definition.snapshotMode is not SnapshotMode.BATCH_SNAPSHOT:
        return False, ""
    if intake.rejected:
        return False, (
            f"; not a whole snapshot: {len(intake.rejected)} event(s) rejected, so definition "
            f"{definition.name} does NOT treat this post as a snapshot (nothing it does not "
            "describe is removed for it; the day-based cleanup only)"
        )
    if not intake.accepted:
        return False, "; an empty post describes nothing: NOT treated as a snapshot"
    namespaces = sorted({e.job_namespace for e in intake.accepted if e.job_namespace is not None})
    sentence = f"; stored as a whole snapshot of definition {definition.name}: " + (
        f"jobs of namespaces [{', '.join(namespaces)}] that it does not describe will be removed "
        "at the next sync (within cleanup.maxRemovalsPerRun and cleanup.maxRemovalShare)"
        if namespaces
        else "it describes no job, so no job is removed at the next sync"
    )
    if not definition.cleanup.enabled:
        sentence += ", but cleanup.enabled is false: nothing is removed"
    return True, sentence


def create_app(settings: Settings, store: EventStore) -> Starlette:
    """Build the app; resolves every definition's token now, so a missing secret stops the start."""
    tenants = [_Tenant(d.receiver.token.resolve().encode(), d) for d in settings.definitions]

    def authenticate(request: Request) -> Definition | None:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        presented = token.strip().encode()
        found = None
        for tenant in tenants:  # no early exit: the time taken does not reveal which token matched
            if hmac.compare_digest(presented, tenant.token):
                found = tenant.definition
        return found

    async def parse(request: Request, definition: Definition) -> object | JSONResponse:
        ctype = request.headers.get("content-type", "application/json").split(";")[0].strip()
        if ctype and ctype.lower() not in _JSON_TYPES:
            return _error(415, f"Content-Type {ctype!r} is not supported: send application/json")
        try:
            body = await read_body(
                request.stream(),
                request.headers.get("content-encoding", ""),
                definition.limits.maxBodyBytes,
            )
        except BodyError as exc:
            return _error(exc.status, exc.message)
        if not body.strip():
            return _error(400, "request body is empty: send a JSON object")
        try:
            with gc_paused():
                # NaN and Infinity are not JSON (RFC 8259): stored, they would break every reader
                return pydantic_core.from_json(body, allow_inf_nan=False)
        except ValueError as exc:
            return _error(400, f"request body is not valid JSON: {exc}")

    async def lineage(request: Request) -> JSONResponse:
        definition = authenticate(request)
        if definition is None:
            return _error(401, "missing or unknown bearer token")
        parsed = await parse(request, definition)
        if isinstance(parsed, JSONResponse):
            return parsed
        if isinstance(parsed, dict) and isinstance(parsed.get("events"), list):
            return _error(400, "this endpoint takes one event; post {'events': [...]} to /batch")
        intake = sort_events(
            [parsed],
            definition.allowedJobNamespaces,
            max_name_length=definition.limits.maxNameLength,
        )
        if not intake.accepted:
            return _summary_answer(intake, None)
        try:
            batch_id = await run_in_threadpool(
                store.add_stream_events,
                definition.name,
                intake.accepted,
                received=intake.received,
            )
        except StoreUnavailable:
            log.exception("store unavailable; event refused with 503")
            return _error(503, "the event store is unavailable; retry later", retriable=True)
        return _summary_answer(intake, batch_id)

    async def lineage_batch(request: Request) -> JSONResponse:
        definition = authenticate(request)
        if definition is None:
            return _error(401, "missing or unknown bearer token")
        parsed = await parse(request, definition)
        if isinstance(parsed, JSONResponse):
            return parsed
        if not isinstance(parsed, dict) or not isinstance(parsed.get("events"), list):
            return _error(400, "body must be a JSON object with an 'events' array")
        events = parsed["events"]
        limit = definition.limits.maxEventsPerBatch
        if len(events) > limit:
            return _error(
                413,
                f"{len(events)} events exceed limits.maxEventsPerBatch ({limit}); split the batch",
            )
        intake = sort_events(
            events,
            definition.allowedJobNamespaces,
            max_name_length=definition.limits.maxNameLength,
        )
        if events and not intake.accepted:
            return _summary_answer(intake, None)
        snapshot = definition.snapshotMode is SnapshotMode.BATCH_SNAPSHOT
        try:
            batch_id = await run_in_threadpool(
                lambda: store.add_posted_batch(
                    definition.name,
                    intake.accepted,
                    received=intake.received,
                    rejections=[r.as_dict() for r in intake.rejected],
                    snapshot=snapshot,
                )
            )
        except StoreUnavailable:
            log.exception("store unavailable; batch refused with 503")
            return _error(503, "the event store is unavailable; retry later", retriable=True)
        whole, note = _snapshot_note(definition, intake)
        log.info(
            "batch %s for %s: %d received, %d accepted",
            batch_id,
            definition.name,
            intake.received,
            len(intake.accepted),
        )
        return _summary_answer(intake, batch_id, note, whole_snapshot=whole)

    async def healthz(_request: Request) -> JSONResponse:
        try:
            await run_in_threadpool(store.ping)
        except StoreUnavailable:
            return JSONResponse({"status": "unavailable", "store": "unreachable"}, status_code=503)
        return JSONResponse({"status": "ok", "definitions": len(tenants)})

    return Starlette(
        routes=[
            Route("/api/v1/lineage", lineage, methods=["POST"]),
            Route("/api/v1/lineage/batch", lineage_batch, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
        ]
    )
