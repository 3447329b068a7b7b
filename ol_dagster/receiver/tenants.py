"""Which sync definition a post belongs to: the bearer token selects it.

Each definition's token is resolved when the app is built (``settings.receiver_tokens``, the same
check as start-up's: a blank token or two definitions sharing one stop the start), so a missing
secret is found before the first post. A presented token is compared with every known one in
constant time, without stopping at a match: how long the check takes does not tell which token
matched, or how much of one.

Tokens are compared as UTF-8 bytes, as a client sends a non-ASCII token: the header's raw bytes,
not Starlette's text of it (decoded as Latin-1, which matched only a token's Latin-1 bytes).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from starlette.requests import Request

from ol_dagster.settings import Settings, SyncDefinition, receiver_tokens


@dataclass(frozen=True)
class _Tenant:
    token: bytes
    definition: SyncDefinition


class Tenants:
    """The definitions the receiver takes posts for, by token."""

    __slots__ = ("_tenants",)

    def __init__(self, settings: Settings) -> None:
        self._tenants = [  # every token checked as start-up checks it
            _Tenant(token.encode(), settings.definition(name))
            for name, token in receiver_tokens(settings).items()
        ]

    def __len__(self) -> int:
        return len(self._tenants)

    def authenticate(self, request: Request) -> SyncDefinition | None:
        """The definition whose token the request's ``Authorization: Bearer`` header presents,
        or None (no header, another scheme, an unknown token)."""
        header = next((v for k, v in request.headers.raw if k == b"authorization"), b"")
        scheme, _, token = header.partition(b" ")
        if scheme.lower() != b"bearer" or not token.strip():
            return None
        presented = token.strip()
        found = None
        for tenant in self._tenants:  # no early exit: the time taken does not reveal the match
            if hmac.compare_digest(presented, tenant.token):
                found = tenant.definition
        return found
