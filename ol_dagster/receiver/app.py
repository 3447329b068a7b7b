"""The receiver's endpoints: the OpenLineage API that producers already know how to call.

``POST /api/v1/lineage`` takes one event (the openlineage-python client, Spark and Airflow HTTP
transports), ``POST /api/v1/lineage/batch`` takes ``{"events": [...]}`` (a snapshot is one such
post), ``GET /healthz`` answers load balancers. The bearer token selects the sync definition.

Every answer says, per event, what was accepted and why anything was not, so a producer can fix its
events; the store then holds exactly the accepted events. ``wholeSnapshot`` says whether the post
is stored as a whole snapshot (a BATCH_SNAPSHOT definition, every event accepted), which the next
sync cleans against; the message says it in words. A store that cannot be reached is a 503
(retriable), never a silent drop.

Under load (issue 15): everything after a post's body is read (decoding, validation, storage) runs
in a worker thread, so the event loop keeps answering other requests. A body of
``receiver.largePostBytes`` or more is a large post: at most ``receiver.maxConcurrentLargePosts``
are read and processed at once (others get 503 with ``Retry-After`` as soon as their body grows
that large), their events are decoded one at a time (``receiver.decode``) with the collector
paused, the body is dropped once they are sorted, and the memory is handed back to the system
after the answer (``receiver.trim``): a post peaks at about 3x its body, and its memory is
returned. Small posts are processed with the collector running as usual. ``/healthz`` answers
503 while the store refuses writes though it answers reads (a full disk): a write refused while
a ping succeeds makes it say so until a write succeeds again, or for ``_WRITE_REFUSAL_MEMORY``
seconds without one (then it lets a post try again); an unreachable store fails its ping.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ol_dagster.gcpause import gc_paused
from ol_dagster.receiver.body import BodyError, read_body
from ol_dagster.receiver.decode import NotABatch, NotJson, decode_event, decoded, split_batch
from ol_dagster.receiver.guard import Guard
from ol_dagster.receiver.intake import Intake, sort_events
from ol_dagster.receiver.trim import release_free_memory
from ol_dagster.settings import (
    ReceiverLimits,
    Settings,
    SnapshotMode,
    SyncDefinition,
    receiver_tokens,
)
from ol_dagster.store import EventStore, StoreUnavailable

log = logging.getLogger("ol_dagster.receiver")

_JSON_TYPES = ("application/json", "application/x-ndjson", "text/json", "application/ld+json")


@dataclass(frozen=True)
class _Tenant:
    token: bytes
    definition: SyncDefinition


def _answer(status_code: int, status: str, message: str, **extra: object) -> JSONResponse:
    return JSONResponse({"status": status, "message": message, **extra}, status_code=status_code)


# how long a refused write keeps /healthz at 503 when no write follows to say otherwise
_WRITE_REFUSAL_MEMORY = 30.0


def _error(
    status_code: int, message: str, *, retriable: bool = False, retry_after: int | None = None
) -> JSONResponse:
    response = _answer(
        status_code,
        "failure",
        message,
        batchId=None,
        summary={"received": 0, "accepted": 0, "rejected": 0},
        failedEvents=[],
        wholeSnapshot=False,
        retriable=retriable,
    )
    if retry_after is not None:
        response.headers["Retry-After"] = str(retry_after)
    return response


@dataclass
class _Writes:
    """Whether the store refuses writes while it answers reads, for /healthz (one attribute,
    set by the worker threads: assignments are atomic)."""

    refused_at: float | None = None

    def refused(self, store: EventStore) -> None:
        try:
            store.ping()
        except StoreUnavailable:
            return  # unreachable: /healthz's own ping says so, and says when it is back
        self.refused_at = time.monotonic()

    def succeeded(self) -> None:
        self.refused_at = None

    def refusing(self) -> bool:
        at = self.refused_at
        return at is not None and time.monotonic() - at < _WRITE_REFUSAL_MEMORY


class _Body:
    """A post's body on its way to the worker thread, which takes it: the event loop's frame and
    the thread call's arguments would otherwise keep a large body alive until the answer, on
    top of its accepted events (``process_batch`` drops it once they are sorted)."""

    __slots__ = ("_data", "size")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self.size = len(data)

    def take(self) -> bytes:
        data, self._data = self._data, b""
        return data


class _LargePosts:
    """The large posts being read or processed (one event loop: no lock)."""

    def __init__(self, limits: ReceiverLimits) -> None:
        self.limits = limits
        self.in_progress = 0


class _LargeSlot:
    """``read_body``'s ``on_size`` for one post: takes a slot when the body becomes large, or
    refuses the post with 503 (``Retry-After``) when every slot is taken. ``release`` frees it."""

    def __init__(self, posts: _LargePosts) -> None:
        self.posts = posts
        self.taken = False

    def __call__(self, size: int) -> None:
        limits = self.posts.limits
        if self.taken or size < limits.largePostBytes:
            return
        if self.posts.in_progress >= limits.maxConcurrentLargePosts:
            raise BodyError(
                503,
                f"receiver.maxConcurrentLargePosts ({limits.maxConcurrentLargePosts}) posts of "
                f"receiver.largePostBytes ({limits.largePostBytes}) bytes or more are in "
                "progress; retry later",
            )
        self.posts.in_progress += 1
        self.taken = True

    def release(self) -> None:
        if self.taken:
            self.taken = False
            self.posts.in_progress -= 1


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


def _snapshot_note(definition: SyncDefinition, intake: Intake) -> tuple[bool, str]:
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
    """Build the app; resolves every definition's token now, so a missing secret stops the start.

    The app carries ``settings.receiver`` (``app.state.receiver_limits``) for the server that
    runs it (``receiver.server``): the connection, header and time limits are the server's."""
    tenants = [  # every token checked as start-up checks it (blanks, two definitions, one token)
        _Tenant(token.encode(), settings.definition(name))
        for name, token in receiver_tokens(settings).items()
    ]
    limits = settings.receiver
    for batch_id in store.remove_abandoned():  # a receiver killed mid-post left them unsealed
        log.warning("removed batch %s: its receiver stopped before it was stored whole", batch_id)
    large = _LargePosts(limits)
    writes = _Writes()

    def authenticate(request: Request) -> SyncDefinition | None:
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

    async def receive(
        request: Request, process: Callable[[SyncDefinition, _Body], JSONResponse]
    ) -> JSONResponse:
        """Authenticate, read the body within the limits, then ``process`` it in a worker
        thread: the event loop only reads bytes."""
        definition = authenticate(request)
        if definition is None:
            return _error(401, "missing or unknown bearer token")
        ctype = request.headers.get("content-type", "application/json").split(";")[0].strip()
        if ctype and ctype.lower() not in _JSON_TYPES:
            return _error(415, f"Content-Type {ctype!r} is not supported: send application/json")
        slot = _LargeSlot(large)
        try:
            try:
                body = await read_body(
                    request.stream(),
                    request.headers.get("content-encoding", ""),
                    definition.limits.maxBodyBytes,
                    on_size=slot,
                )
            except BodyError as exc:
                retry = limits.retryAfterSeconds if exc.status == 503 else None
                return _error(
                    exc.status, exc.message, retriable=retry is not None, retry_after=retry
                )
            except ClientDisconnect:
                return _error(400, "the client went away before its body was read")
            if not body.strip():
                return _error(400, "request body is empty: send a JSON object")
            held = _Body(body)
            del body  # the worker takes it: see ``_Body``
            return await run_in_threadpool(in_worker, process, definition, held)
        finally:
            slot.release()

    def in_worker(
        process: Callable[[SyncDefinition, _Body], JSONResponse],
        definition: SyncDefinition,
        held: _Body,
    ) -> JSONResponse:
        """A small post is processed with the collector running as usual, so its cycles are
        collected as they come. A large one with the collector paused (``gcpause``) from its
        decoding to its stored answer; what it allocated is all dropped when ``process``
        returns, before the pause ends (nothing left to age), then handed back to the system."""
        if held.size < limits.largePostBytes:
            return process(definition, held)
        with gc_paused():
            response = process(definition, held)
        release_free_memory()
        return response

    def process_event(definition: SyncDefinition, held: _Body) -> JSONResponse:
        body = held.take()
        try:
            parsed = decode_event(body)
        except NotJson as exc:
            return _error(400, f"request body is not valid JSON: {exc}")
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
            batch_id = store.add_stream_events(
                definition.name, intake.accepted, received=intake.received
            )
        except StoreUnavailable:
            log.exception("store unavailable; event refused with 503")
            return _unavailable()
        writes.succeeded()
        return _summary_answer(intake, batch_id)

    def process_batch(definition: SyncDefinition, held: _Body) -> JSONResponse:
        body = held.take()
        try:
            raw_events = split_batch(body, precise_below=limits.largePostBytes)
        except NotJson as exc:
            return _error(400, f"request body is not valid JSON: {exc}")
        except NotABatch as exc:
            return _error(400, str(exc))
        limit = definition.limits.maxEventsPerBatch
        if len(raw_events) > limit:
            return _error(
                413,
                f"{len(raw_events)} events exceed limits.maxEventsPerBatch ({limit}); "
                "split the batch",
            )
        try:
            intake = sort_events(
                decoded(raw_events),
                definition.allowedJobNamespaces,
                max_name_length=definition.limits.maxNameLength,
            )
        except NotJson as exc:
            return _error(400, f"request body is not valid JSON: {exc}")
        del raw_events, body  # the accepted events are copies: the body can go now
        if intake.received and not intake.accepted:
            return _summary_answer(intake, None)
        snapshot = definition.snapshotMode is SnapshotMode.BATCH_SNAPSHOT
        try:
            batch_id = store.add_posted_batch(
                definition.name,
                intake.accepted,
                received=intake.received,
                rejections=[r.as_dict() for r in intake.rejected],
                snapshot=snapshot,
            )
        except StoreUnavailable:
            log.exception("store unavailable; batch refused with 503")
            return _unavailable()
        writes.succeeded()
        whole, note = _snapshot_note(definition, intake)
        log.info(
            "batch %s for %s: %d received, %d accepted",
            batch_id,
            definition.name,
            intake.received,
            len(intake.accepted),
        )
        return _summary_answer(intake, batch_id, note, whole_snapshot=whole)

    def _unavailable() -> JSONResponse:
        writes.refused(store)
        return _error(
            503,
            "the event store is unavailable; retry later",
            retriable=True,
            retry_after=limits.retryAfterSeconds,
        )

    async def lineage(request: Request) -> JSONResponse:
        return await receive(request, process_event)

    async def lineage_batch(request: Request) -> JSONResponse:
        return await receive(request, process_batch)

    async def healthz(_request: Request) -> JSONResponse:
        try:
            await run_in_threadpool(store.ping)
        except StoreUnavailable:
            return JSONResponse({"status": "unavailable", "store": "unreachable"}, status_code=503)
        if writes.refusing():
            return JSONResponse(
                {"status": "unavailable", "store": "refuses writes"}, status_code=503
            )
        return JSONResponse({"status": "ok", "definitions": len(tenants)})

    app = Starlette(
        routes=[
            Route("/api/v1/lineage", lineage, methods=["POST"]),
            Route("/api/v1/lineage/batch", lineage_batch, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
        ],
        middleware=[Middleware(Guard, limits=limits)],
    )
    app.state.receiver_limits = limits
    return app
