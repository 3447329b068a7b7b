"""One way every HTTP catalog talks to its server: timeouts, retries, the server's clock.

A catalog that is briefly down must not fail a sync, and one that is down for good must fail it
cleanly (the upload then counts as failed, so nothing is deleted). So connection errors, timeouts,
429 and 5xx are retried with exponential backoff and full jitter, honouring ``Retry-After``; other
4xx answers are the server's last word and are never retried. Writes are idempotent on the
servers' side (upserts by natural key), so a retried chunk never duplicates.

Secrets (tokens, API keys) are sent as headers and never appear in an error message: errors name
the method, the path and the status, nothing else of the request.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from ol_dagster.catalog.settings import HttpCatalogSettings

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class CatalogUnavailable(RuntimeError):
    """The catalog could not be reached or kept failing after every retry."""


class CatalogRefused(RuntimeError):
    """The catalog answered with a 4xx that retrying cannot fix."""

    def __init__(self, message: str, status: int, body: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.body = body


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 4
    base_seconds: float = 0.5
    max_seconds: float = 30.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_seconds)
        return random.uniform(0, min(self.max_seconds, self.base_seconds * 2**attempt))


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """``Retry-After`` as seconds: either a number of seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


def server_time(response: httpx.Response) -> datetime | None:
    """The server's clock from the ``Date`` header of an answer, as an aware UTC datetime."""
    value = response.headers.get("date")
    if not value:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC)


class HttpCatalogClient:
    """An ``httpx.Client`` with the retry policy; one per catalog, closed with it."""

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        policy: RetryPolicy = RetryPolicy(),
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.policy = policy
        self._sleep = sleep
        self.client = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=dict(headers or {}),
            timeout=timeout,
            transport=transport,
        )

    @classmethod
    def for_catalog(
        cls,
        cfg: HttpCatalogSettings,
        headers: Mapping[str, str],
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> HttpCatalogClient:
        """The client a catalog's settings describe: its URL, timeout and retries."""
        return cls(
            cfg.url,
            headers=headers,
            timeout=cfg.timeoutSeconds,
            policy=RetryPolicy(max_retries=cfg.maxRetries),
            transport=transport,
            sleep=time.sleep if sleep is None else sleep,  # a recorder may be empty, so falsy
        )

    def close(self) -> None:
        self.client.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        ok: frozenset[int] = frozenset(),
    ) -> httpx.Response:
        """Send with retries. 2xx and the statuses in ``ok`` are returned; a retryable failure
        that outlives the retries raises ``CatalogUnavailable``; another 4xx ``CatalogRefused``."""
        where = f"{method} {path}"
        for attempt in range(self.policy.max_retries + 1):
            last = attempt == self.policy.max_retries
            try:
                response = self.client.request(method, path, json=json, params=params)
            except httpx.TransportError as exc:
                if last:
                    raise CatalogUnavailable(
                        f"{where}: {type(exc).__name__} after {attempt + 1} attempt(s)"
                    ) from None
                self._sleep(self.policy.delay(attempt, None))
                continue
            if response.is_success or response.status_code in ok:
                return response
            if response.status_code in RETRY_STATUSES and not last:
                self._sleep(
                    self.policy.delay(
                        attempt, retry_after_seconds(response.headers.get("retry-after"))
                    )
                )
                continue
            if response.status_code in RETRY_STATUSES:
                raise CatalogUnavailable(
                    f"{where}: HTTP {response.status_code} after {attempt + 1} attempt(s)"
                )
            raise CatalogRefused(
                f"{where}: HTTP {response.status_code}", response.status_code, response.text[:500]
            )
        raise AssertionError("unreachable")  # pragma: no cover
