"""What every fake server shares: its clock, failure injection and a log of the requests.

``FakeServer`` wraps a fake's Starlette app as ASGI middleware:

* every answer carries a ``Date`` header from the fake's ``Clock`` (frozen and advanced by tests,
  or the real time shifted by an offset), since clients read the catalog's time from it;
* ``inject`` queues faults: the next requests matching a method and a path prefix are answered
  with a status (a 429 with ``Retry-After``, 5xx bursts...) or held for a delay first (a slow
  answer, for client timeouts), each fault used once; with ``after`` the request is carried out
  first and its answer replaced (a gateway that lost the answer of a request that landed);
* ``limit_body`` puts a proxy in front that refuses a body larger than its limit with 413 and its
  own HTML page, before the server sees the request (nginx's ``client_max_body_size``);
* routing sees the path as sent, still percent-encoded (as Jersey matches it), so a path segment
  may hold ``%2F``: fakes decode their path parameters themselves;
* ``requests`` records (method, path, headers) of what arrived, and ``max_in_flight`` the most
  requests that were being answered at once;
* ``contract``, when given, checks every request against the server's own published definition
  (its JSON schemas, its OpenAPI file: ``ol_dagster_tests/contracts``) before the fake sees it.
  What breaks it is recorded in ``violations`` and in the process-wide ``CONTRACT_VIOLATIONS``,
  which an autouse fixture (conftest) turns into a test failure: a client request the real server
  would refuse fails the test that made it, even where the fake's answer is not looked at. The
  fake still answers as the real server does (a 400 of its bean validation...).

``serve`` runs a fake with uvicorn on a free loopback port in a background thread (uvicorn's own
``Date`` header is turned off: the fake's clock gives it).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ol_dagster.receiver.server import serve_in_background


class Clock:
    """The fake server's time: frozen at ``start`` (advanced by tests), or the real time."""

    def __init__(self, start: datetime | None = None) -> None:
        self._frozen = start
        self._offset = timedelta(0)

    def now(self) -> datetime:
        base = self._frozen if self._frozen is not None else datetime.now(UTC)
        return base + self._offset

    def advance(self, **delta: float) -> datetime:
        self._offset += timedelta(**delta)
        return self.now()


@dataclass(frozen=True, slots=True)
class Fault:
    status: int | None = None  # None: answer normally (after ``delay``)
    delay: float = 0.0  # seconds to hold the request before answering
    retry_after: str | None = None
    body: bytes = b""
    method: str | None = None  # only requests with this method
    path: str | None = None  # only requests whose (encoded) path starts with this
    after: bool = False  # carry the request out, then answer ``status`` instead of its answer


# (method, path as sent, body or None) -> what in the request breaks the server's definition
Contract = Callable[[str, str, Any], list[str]]


@dataclass(frozen=True, slots=True)
class Violation:
    server: str
    method: str
    path: str
    errors: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.server} {self.method} {self.path}: " + "; ".join(self.errors)


CONTRACT_VIOLATIONS: list[Violation] = []
# what nginx answers for a body over ``client_max_body_size``
TOO_LARGE_PAGE = (
    "<html>\r\n<head><title>413 Request Entity Too Large</title></head>\r\n<body>\r\n"
    "<center><h1>413 Request Entity Too Large</h1></center>\r\n"
    "<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)
_violations_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Seen:
    method: str
    path: str  # as sent, percent-encoded
    query: str
    headers: dict[str, str] = field(default_factory=dict)


class FakeServer:
    def __init__(
        self, app: ASGIApp, clock: Clock, contract: Contract | None = None, name: str = "fake"
    ) -> None:
        self.app = app
        self.clock = clock
        self.contract = contract
        self.name = name
        self.violations: list[Violation] = []
        self.faults: list[Fault] = []
        self.requests: list[Seen] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.max_body_bytes: int | None = None
        self.too_large: list[Seen] = []  # the requests the proxy refused (413)
        self._lock = threading.Lock()

    def limit_body(self, max_bytes: int | None) -> None:
        """Put a proxy in front that refuses a body larger than ``max_bytes`` (413)."""
        self.max_body_bytes = max_bytes

    def inject(self, *faults: Fault) -> None:
        with self._lock:
            self.faults.extend(faults)

    def burst(self, status: int, times: int, **kw: Any) -> None:
        """``times`` answers with ``status`` to the requests matching ``kw``'s method/path."""
        self.inject(*(Fault(status=status, **kw) for _ in range(times)))

    def pending_faults(self) -> int:
        with self._lock:
            return len(self.faults)

    def seen(self, method: str | None = None, path: str | None = None) -> list[Seen]:
        return [
            r
            for r in list(self.requests)
            if (method is None or r.method == method) and (path is None or r.path.startswith(path))
        ]

    def _take(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for i, f in enumerate(self.faults):
                if (f.method is None or f.method == method) and (
                    f.path is None or path.startswith(f.path)
                ):
                    return self.faults.pop(i)
        return None

    async def _read(self, method: str, path: str, receive: Receive) -> tuple[bytes, Receive]:
        """Read the whole body, check it against the contract (if any), hand the app a replay."""
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        raw = b"".join(chunks)
        try:
            body = json.loads(raw) if raw.strip() else None
        except ValueError:
            body = raw  # not JSON: the contract says whether that is allowed
        errors = self.contract(method, path, body) if self.contract is not None else []
        if errors:
            found = Violation(self.name, method, path, tuple(errors))
            self.violations.append(found)
            with _violations_lock:
                CONTRACT_VIOLATIONS.append(found)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": raw, "more_body": False}

        return raw, replay

    async def _answer(self, send: Send, status: int, body: bytes, headers: list) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"date", self._date()),
                    (b"content-length", str(len(body)).encode()),
                    *headers,
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def _date(self) -> bytes:
        return email.utils.format_datetime(self.clock.now().astimezone(UTC), usegmt=True).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = scope.get("raw_path") or scope["path"].encode()
        path = raw.split(b"?", 1)[0].decode("latin-1")
        method = scope["method"]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        seen = Seen(method, path, scope.get("query_string", b"").decode(), headers)
        self.requests.append(seen)
        if self.contract is not None or self.max_body_bytes is not None:
            raw_body, receive = await self._read(method, path, receive)
            if self.max_body_bytes is not None and len(raw_body) > self.max_body_bytes:
                self.too_large.append(seen)
                page = TOO_LARGE_PAGE.encode()
                await self._answer(send, 413, page, [(b"content-type", b"text/html")])
                return
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            fault = self._take(method, path)
            if fault is not None and fault.delay:
                await asyncio.sleep(fault.delay)
            if fault is not None and fault.status is not None:
                if fault.after:  # carried out; the answer is lost on its way back

                    async def dropped(message: Message) -> None:
                        return None

                    await self.app({**scope, "path": path}, receive, dropped)
                extra = [(b"retry-after", fault.retry_after.encode())] if fault.retry_after else []
                json_type = (b"content-type", b"application/json")
                await self._answer(send, fault.status, fault.body, [json_type, *extra])
                return

            async def dated(message: Message) -> None:
                if message["type"] == "http.response.start":
                    kept = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"date"]
                    message = {**message, "headers": [*kept, (b"date", self._date())]}
                await send(message)

            await self.app({**scope, "path": path}, receive, dated)
        finally:
            self.in_flight -= 1


def serve(app: ASGIApp) -> AbstractContextManager[str]:
    """Serve ``app`` on a free port of 127.0.0.1 (the receiver's own way); yields the base URL.
    The ``Date`` header is the fake's own: its clock is the one the tests set."""
    return serve_in_background(app, date_header=False)
