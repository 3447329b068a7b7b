"""The app-level limits of the receiver, checked before any token is read (issue 15).

uvicorn bounds the bytes of a request's headers (h11) but not how many fields they hold, and its
``limit_concurrency`` answers 503 without ``Retry-After`` and counts idle connections with the
requests. So this thin ASGI layer, in front of the routes, answers 431 to a request with more than
``receiver.maxHeaderCount`` header fields and 503 with ``Retry-After`` to one that would exceed
``receiver.maxConcurrentRequests`` in progress: a client that retries is told when, and nothing is
parsed, authenticated or stored for it; likewise beyond ``receiver.maxConcurrentRequestsPerClient``
from one client address (a proxy's ``X-Forwarded-For`` when uvicorn trusts the proxy), so one
client cannot take every request in progress. ``/healthz`` is outside these limits: a load
balancer asks it whether to send posts here, and must be answered while posts fill them.
Connections and time are bounded below it, in ``receiver.protocol``.
"""

from __future__ import annotations

import json
from collections import Counter

from starlette.types import ASGIApp, Receive, Scope, Send

from ol_dagster.settings import ReceiverLimits


def _refusal(status: int, message: str, retry_after: int | None) -> tuple[list, bytes]:
    body = json.dumps(
        {
            "status": "failure",
            "message": message,
            "batchId": None,
            "summary": {"received": 0, "accepted": 0, "rejected": 0},
            "failedEvents": [],
            "failedEventsNotListed": 0,
            "wholeSnapshot": False,
            "retriable": retry_after is not None,
        }
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if retry_after is not None:
        headers.append((b"retry-after", b"%d" % retry_after))
    return headers, body


# answered whatever the limits (``receiver.health``)
HEALTH_PATH = "/healthz"


class Guard:
    def __init__(self, app: ASGIApp, limits: ReceiverLimits) -> None:
        self.app = app
        self.limits = limits
        self.in_progress = 0  # one event loop: no lock needed
        self.per_client: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limits = self.limits
        if len(scope["headers"]) > limits.maxHeaderCount:
            await _send(
                send,
                431,
                f"more than receiver.maxHeaderCount ({limits.maxHeaderCount}) header fields",
                None,
            )
            return
        if scope["path"] == HEALTH_PATH:
            await self.app(scope, receive, send)
            return
        if self.in_progress >= limits.maxConcurrentRequests:
            await _send(
                send,
                503,
                f"receiver.maxConcurrentRequests ({limits.maxConcurrentRequests}) requests are in "
                "progress; retry later",
                limits.retryAfterSeconds,
            )
            return
        client = scope.get("client")
        address = client[0] if client else ""
        if self.per_client[address] >= limits.maxConcurrentRequestsPerClient:
            await _send(
                send,
                503,
                f"receiver.maxConcurrentRequestsPerClient ({limits.maxConcurrentRequestsPerClient})"
                " requests of this client are in progress; retry later",
                limits.retryAfterSeconds,
            )
            return
        self.in_progress += 1
        self.per_client[address] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_progress -= 1
            self.per_client[address] -= 1
            if not self.per_client[address]:
                del self.per_client[address]


async def _send(send: Send, status: int, message: str, retry_after: int | None) -> None:
    headers, body = _refusal(status, message, retry_after)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
