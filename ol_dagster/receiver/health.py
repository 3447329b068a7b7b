"""``GET /healthz``: whether a load balancer should send posts here.

503 while the store cannot be reached (its ping fails), and while it refuses writes though it
answers reads (a full disk): a write refused while a ping succeeds makes ``/healthz`` say so until
a write succeeds again, or for ``WRITE_REFUSAL_MEMORY`` seconds without one (then it lets a post
try again).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from ol_dagster.store import EventStore, StoreUnavailable

# how long a refused write keeps /healthz at 503 when no write follows to say otherwise
WRITE_REFUSAL_MEMORY = 30.0


@dataclass
class WriteRefusals:
    """Whether the store refuses writes while it answers reads (one attribute, set by the
    worker threads that store posts: assignments are atomic)."""

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
        return at is not None and time.monotonic() - at < WRITE_REFUSAL_MEMORY


class Health:
    """The ``/healthz`` endpoint (``healthz``): the store's ping, then its refused writes."""

    __slots__ = ("_definitions", "_store", "_writes")

    def __init__(self, store: EventStore, writes: WriteRefusals, definitions: int) -> None:
        self._store = store
        self._writes = writes
        self._definitions = definitions

    async def healthz(self, _request: Request) -> JSONResponse:
        try:
            await run_in_threadpool(self._store.ping)
        except StoreUnavailable:
            return JSONResponse({"status": "unavailable", "store": "unreachable"}, status_code=503)
        if self._writes.refusing():
            return JSONResponse(
                {"status": "unavailable", "store": "refuses writes"}, status_code=503
            )
        return JSONResponse({"status": "ok", "definitions": self._definitions})
