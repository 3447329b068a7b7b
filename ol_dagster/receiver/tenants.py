"""Which sync definition a post belongs to: the bearer token selects it.

Each definition's token is resolved when the app is built (``settings.receiver_tokens``, the same
check as start-up's: a blank token or two definitions sharing one stop the start), so a missing
secret is found before the first post. A presented token is compared with every known one in
constant time, without stopping at a match: how long the check takes does not tell which token
matched, or how much of one.
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
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        presented = token.strip().encode()
        found = None
        for tenant in self._tenants:  # no early exit: the time taken does not reveal the match
            if hmac.compare_digest(presented, tenant.token):
                found = tenant.definition
        return found
