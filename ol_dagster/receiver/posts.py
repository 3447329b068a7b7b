"""The two posting endpoints: ``POST /api/v1/lineage`` (one event) and ``/api/v1/lineage/batch``.

A post goes through the same steps at both (``Posts._receive``): the bearer token selects the
definition (``receiver.tenants``), the Content-Type must be JSON, the body is read within the
definition's ``limits.maxBodyBytes`` and the large-post slots (``receiver.large_posts``), then
everything else (inflating a gzip body, decoding, validation, storage) runs in a worker thread, so
the event loop keeps answering other requests. Only what is stored differs: one event as a stream
batch, or the batch's accepted events (a whole snapshot when the definition says so). A store that
cannot be reached is a 503 (retriable), never a silent drop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import nullcontext
from functools import partial

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse

from ol_dagster.gcpause import gc_paused
from ol_dagster.receiver.answers import error, snapshot_note, summary_answer
from ol_dagster.receiver.body import BodyError, check_length, inflate, is_gzip, read_body
from ol_dagster.receiver.decode import NotABatch, NotJson, decode_event, decoded, split_batch
from ol_dagster.receiver.health import WriteRefusals
from ol_dagster.receiver.intake import sort_events
from ol_dagster.receiver.large_posts import (
    HeldBody,
    LargePosts,
    LargeSlot,
    Process,
    process_held,
)
from ol_dagster.receiver.tenants import Tenants
from ol_dagster.settings import ReceiverLimits, SnapshotMode, SyncDefinition
from ol_dagster.snapshot_order import HTTP_HEADER as SEQUENCE_HEADER
from ol_dagster.snapshot_order import BadSequence, parse_sequence
from ol_dagster.store import EventStore, StoreUnavailable

log = logging.getLogger("ol_dagster.receiver")

_EMPTY = "request body is empty: send a JSON object"
_JSON_TYPES = ("application/json", "application/x-ndjson", "text/json", "application/ld+json")


class Posts:
    """The endpoints ``lineage`` and ``lineage_batch``, and the steps they share."""

    def __init__(
        self,
        store: EventStore,
        limits: ReceiverLimits,
        tenants: Tenants,
        writes: WriteRefusals,
    ) -> None:
        self.store = store
        self.limits = limits
        self.tenants = tenants
        self.writes = writes
        self.large = LargePosts(limits)

    async def lineage(self, request: Request) -> JSONResponse:
        return await self._receive(request, lambda _sequence: self._process_event)

    async def lineage_batch(self, request: Request) -> JSONResponse:
        return await self._receive(
            request, lambda sequence: partial(self._process_batch, sequence=sequence), batch=True
        )

    async def _receive(
        self, request: Request, process: Callable[[int | None], Process], *, batch: bool = False
    ) -> JSONResponse:
        """Authenticate, read the body within the limits, then ``process`` it in a worker
        thread: the event loop only reads bytes. ``process`` is given the post's snapshot
        sequence (``OL-Snapshot-Sequence``, a batch post's only)."""
        definition = self.tenants.authenticate(request)
        if definition is None:
            return error(401, "missing or unknown bearer token")
        ctype = request.headers.get("content-type", "application/json").split(";")[0].strip()
        if ctype and ctype.lower() not in _JSON_TYPES:
            return error(415, f"Content-Type {ctype!r} is not supported: send application/json")
        try:
            sequence = parse_sequence(request.headers.get(SEQUENCE_HEADER), header=SEQUENCE_HEADER)
        except BadSequence as exc:
            return error(400, f"{exc}; nothing of the post was stored")
        if sequence is not None and not batch:
            return error(
                400,
                f"{SEQUENCE_HEADER} orders whole snapshots: send it with a post of "
                "{'events': [...]} to /api/v1/lineage/batch; nothing of the post was stored",
            )
        max_bytes = definition.limits.maxBodyBytes
        try:
            gzip = is_gzip(request.headers.get("content-encoding", ""))
            check_length(request.headers.get("content-length"), max_bytes)
        except BodyError as exc:
            return self._refused(exc)
        slot = LargeSlot(self.large)
        try:
            try:
                # a gzip body's size is known once inflated, in the worker thread
                body = await read_body(request.stream(), max_bytes, None if gzip else slot)
            except BodyError as exc:
                return self._refused(exc)
            except ClientDisconnect:
                return error(400, "the client went away before its body was read")
            if not gzip and not body.strip():
                return error(400, _EMPTY)
            held = HeldBody(body, slot)
            del body  # the worker takes it: see ``HeldBody``
            return await run_in_threadpool(
                self._in_worker, process(sequence), definition, held, slot if gzip else None
            )
        finally:
            slot.release()

    def _in_worker(
        self,
        process: Process,
        definition: SyncDefinition,
        held: HeldBody,
        gzip_slot: LargeSlot | None,
    ) -> JSONResponse:
        """In the worker thread: a gzip body inflated (off the event loop; it takes a large
        post's slot once it inflates that large), then processed."""
        if gzip_slot is not None:
            try:
                body = inflate(held.take(), definition.limits.maxBodyBytes, gzip_slot.from_worker())
            except BodyError as exc:
                return self._refused(exc)
            if not body.strip():
                return error(400, _EMPTY)
            held = HeldBody(body, gzip_slot)
            del body
        return process_held(process, definition, held, self.limits.largePostBytes)

    def _refused(self, exc: BodyError) -> JSONResponse:
        retry = self.limits.retryAfterSeconds if exc.status == 503 else None
        return error(exc.status, exc.message, retriable=retry is not None, retry_after=retry)

    def _process_event(self, definition: SyncDefinition, held: HeldBody) -> JSONResponse:
        body = held.take()
        try:
            parsed = decode_event(body)
        except NotJson as exc:
            return error(400, f"request body is not valid JSON: {exc}")
        if isinstance(parsed, dict) and isinstance(parsed.get("events"), list):
            return error(400, "this endpoint takes one event; post {'events': [...]} to /batch")
        intake = sort_events(
            [parsed],
            definition.namespace_patterns,
            max_name_length=definition.limits.maxNameLength,
        )
        if not intake.accepted:
            return summary_answer(intake, None, listed=self.limits.maxFailedEventsListed)
        try:
            batch_id = self.store.add_stream_events(
                definition.name, intake.accepted, received=intake.received
            )
        except StoreUnavailable:
            log.exception("store unavailable; event refused with 503")
            return self._unavailable()
        self.writes.succeeded()
        return summary_answer(intake, batch_id, listed=self.limits.maxFailedEventsListed)

    def _process_batch(
        self, definition: SyncDefinition, held: HeldBody, *, sequence: int | None = None
    ) -> JSONResponse:
        body = held.take()
        try:
            raw_events = split_batch(body, precise_below=self.limits.largePostBytes)
        except NotJson as exc:
            return error(400, f"request body is not valid JSON: {exc}")
        except NotABatch as exc:
            return error(400, str(exc))
        limit = definition.limits.maxEventsPerBatch
        if len(raw_events) > limit:
            return error(
                413,
                f"{len(raw_events)} events exceed limits.maxEventsPerBatch ({limit}); "
                "split the batch",
            )
        try:
            held.count_events(len(raw_events))
        except BodyError as exc:
            return self._refused(exc)
        try:
            # a batch large by its events is sorted as a large body is (``process_held``)
            with gc_paused() if held.large_by_events else nullcontext():
                intake = sort_events(
                    decoded(raw_events),
                    definition.namespace_patterns,
                    max_name_length=definition.limits.maxNameLength,
                )
        except NotJson as exc:
            return error(400, f"request body is not valid JSON: {exc}")
        del raw_events, body  # the accepted events are copies: the body can go now
        if intake.received and not intake.accepted:
            return summary_answer(intake, None, listed=self.limits.maxFailedEventsListed)
        snapshot = definition.snapshotMode is SnapshotMode.BATCH_SNAPSHOT
        try:
            batch_id = self.store.add_posted_batch(
                definition.name,
                intake.accepted,
                received=intake.received,
                rejections=[r.as_dict() for r in intake.rejected],
                snapshot=snapshot,
                sequence=sequence,
            )
        except StoreUnavailable:
            log.exception("store unavailable; batch refused with 503")
            return self._unavailable()
        self.writes.succeeded()
        whole, note = snapshot_note(definition, intake, sequence)
        log.info(
            "batch %s for %s: %d received, %d accepted",
            batch_id,
            definition.name,
            intake.received,
            len(intake.accepted),
        )
        return summary_answer(
            intake, batch_id, note, whole_snapshot=whole, listed=self.limits.maxFailedEventsListed
        )

    def _unavailable(self) -> JSONResponse:
        self.writes.refused(self.store)
        return error(
            503,
            "the event store is unavailable; retry later",
            retriable=True,
            retry_after=self.limits.retryAfterSeconds,
        )
