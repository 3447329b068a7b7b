"""A log line for refused requests, so an operator sees a misconfigured producer.

Every answer of 400 or more is logged, whoever made it (the guard's 431 and 503, a missing or
unknown token, a Content-Type that is not JSON, a body over the limits or not JSON, every event
of a post rejected, an unknown path):
``refused POST /api/v1/lineage/batch from 10.1.2.3:51220: 401 missing or unknown bearer token``,
with the first event's reason when every event was rejected. The answers never quote the token;
what a rejected event's reason quotes of the body is scrubbed of the settings' secret values and
of any URL's password, as a failed run's reason is. A client refused again and again is not logged
each time: the first refusal of a kind from an address is, then a count of the next ones every
``receiver.refusalLogSeconds`` (``receiver.refusal_lines``).
"""

from __future__ import annotations

import json
import logging
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ol_dagster.receiver.refusal_lines import RefusalLines
from ol_dagster.sync.run_failure import scrub

log = logging.getLogger("ol_dagster.receiver")

# the start of a refusal's answer read for its reason: ``message`` and the first failed event
# come first in the JSON (``receiver.answers``)
_READ = 8192
_MESSAGE = re.compile(r'"message":\s*"((?:[^"\\]|\\.)*)"')
_FIRST_REASON = re.compile(r'"failedEvents":\s*\[\s*\{[^{}]*?"reason":\s*"((?:[^"\\]|\\.)*)"')
_ALL_REJECTED = re.compile(r'"accepted":\s*0\b')


def _string(literal: str) -> str:
    try:
        return json.loads(f'"{literal}"')
    except ValueError:
        return literal


def reason_of(body: bytes) -> str:
    """What a refusal's answer says: its message (and first rejected event's reason), or the
    start of a plain-text answer."""
    text = body[:_READ].decode("utf-8", "replace")
    message = _MESSAGE.search(text)
    if message is None:
        return text.strip() or "no reason given"
    reason = _string(message.group(1))
    first = _FIRST_REASON.search(text)
    if first and _ALL_REJECTED.search(text):
        reason += f"; first: {_string(first.group(1))}"
    return reason


class RefusalLog:
    """ASGI middleware in front of everything: logs each answer of 400 or more in one line."""

    def __init__(self, app: ASGIApp, secrets: list[str], seconds: float) -> None:
        self.app = app
        self.secrets = secrets
        self.lines = RefusalLines(log, seconds)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 0
        body = bytearray()

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and status >= 400:
                if len(body) < _READ:
                    body.extend(message.get("body", b"")[: _READ - len(body)])
                if not message.get("more_body", False):
                    self._log(scope, status, bytes(body))
            await send(message)

        await self.app(scope, receive, watched)

    def _log(self, scope: Scope, status: int, body: bytes) -> None:
        client = scope.get("client")
        where = f"{client[0]}:{client[1]}" if client else "an unknown client"
        reason = scrub(reason_of(body), self.secrets)
        self.lines.refused(
            f"{status} {reason}",
            client[0] if client else None,
            str(status),
            "refused %s %s from %s: %d %s",
            scope.get("method", "?"),
            scope.get("path", "?"),
            where,
            status,
            reason,
        )
