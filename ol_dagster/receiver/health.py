"""``GET /healthz``: whether a load balancer should send posts here.

503 while the store cannot be reached (its ping fails), and while it refuses writes though it
answers reads (a full disk): a write refused while a ping succeeds makes ``/healthz`` say so until
a write succeeds again, or for ``WRITE_REFUSAL_MEMORY`` seconds without one (then it lets a post
try again).

Its ping runs on a thread of its own, not in the pool the posts' work runs in: posts waiting for
SQLite's write lock (another process's write) took every thread of that pool, and ``/healthz``
waited behind them (11 s with 45 posts waiting). The ping only reads, so it never waits for the
lock itself. Requests that come while a ping runs share its result, so a ping that hangs (a
database that does not answer) holds one thread, not one per request, and ``/healthz`` answers
503 once it has taken ``PING_TIMEOUT`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import JSONResponse

from ol_dagster.store import EventStore, StoreUnavailable

# how long a refused write keeps /healthz at 503 when no write follows to say otherwise
WRITE_REFUSAL_MEMORY = 30.0
# a ping that takes longer makes /healthz 503 (the store does not answer)
PING_TIMEOUT = 5.0


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

    __slots__ = ("_definitions", "_ping", "_store", "_writes")

    def __init__(self, store: EventStore, writes: WriteRefusals, definitions: int) -> None:
        self._store = store
        self._writes = writes
        self._definitions = definitions
        self._ping: asyncio.Future[None] | None = None

    async def healthz(self, _request: Request) -> JSONResponse:
        if self._ping is None or self._ping.done():
            self._ping = self._start_ping()
        try:
            await asyncio.wait_for(asyncio.shield(self._ping), PING_TIMEOUT)
        except StoreUnavailable:
            return JSONResponse({"status": "unavailable", "store": "unreachable"}, status_code=503)
        except TimeoutError:
            return JSONResponse(
                {"status": "unavailable", "store": f"no answer within {PING_TIMEOUT:g} s"},
                status_code=503,
            )
        if self._writes.refusing():
            return JSONResponse(
                {"status": "unavailable", "store": "refuses writes"}, status_code=503
            )
        return JSONResponse({"status": "ok", "definitions": self._definitions})

    def _start_ping(self) -> asyncio.Future[None]:
        """The store's ping on a thread of its own; its outcome is the future's."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def settle(error: BaseException | None) -> None:
            if done.done():
                return
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)

        def ping() -> None:
            error: BaseException | None = None
            try:
                self._store.ping()
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting request
                error = exc
            with contextlib.suppress(RuntimeError):  # the server stopped meanwhile
                loop.call_soon_threadsafe(settle, error)

        # read, so that an outcome no request waited for is not reported as never retrieved
        done.add_done_callback(lambda f: f.cancelled() or f.exception())
        threading.Thread(target=ping, name="ol-dagster-healthz", daemon=True).start()
        return done
