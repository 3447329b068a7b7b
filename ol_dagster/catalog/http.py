"""One way every HTTP catalog talks to its server: timeouts, retries, the server's clock.

A catalog that is briefly down must not fail a sync, and one that is down for good must fail it
cleanly (the upload then counts as failed, so nothing is deleted). So connection errors, timeouts,
429 and 5xx are retried with exponential backoff and full jitter, honouring ``Retry-After`` up to
the catalog's ``maxRetryAfterSeconds``; other 4xx answers are the server's last word and are never
retried.

A request whose answer did not come back after it was sent (a read timeout, a dropped connection,
a gateway's 502 or 504) may have been carried out, or may still be running. A caller that cannot
send it twice says so (``resend_after_timeout=False``): it then gets ``MayHaveLanded`` instead of a
second attempt, and reads back what landed before it sends anything again (``catalog.bounded``).
Which gateway answers count as lost is the caller's (``lost``: ``LOST_STATUSES``, or
``STILL_RUNNING`` for a request that may land twice but not run twice at once); a request may have
a timeout of its own (a batch the server answers only when it has written all of it). Connection
failures before anything was sent are always retried.

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
# failures before the request left this process: nothing can have landed, a retry is always safe
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)
# a proxy's answers about an upstream that did not answer it: the request may have been carried out
LOST_STATUSES = frozenset({502, 504})
# of those, the answer of a proxy that stopped waiting while the upstream may still be carrying the
# request out (after a 502 the upstream closed or broke its connection: it is done). A caller whose
# request may be carried out twice, but must not run twice at once, loses only these (OpenMetadata)
STILL_RUNNING = frozenset({504})
DEFAULT_MAX_RETRY_AFTER = 30.0


class CatalogUnavailable(RuntimeError):
    """The catalog could not be reached or kept failing after every retry."""


class MayHaveLanded(CatalogUnavailable):
    """A request was sent and its answer never came (timeout, dropped connection): the server may
    have carried it out, or may still be carrying it out."""


class CatalogRefused(RuntimeError):
    """The catalog answered with a 4xx that retrying cannot fix."""

    def __init__(self, message: str, status: int, body: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.body = body


@dataclass(frozen=True, slots=True)
class Sent:
    """An answer, and whether an earlier attempt of the same request was sent and lost its
    answer (so it may have been carried out before this one)."""

    response: httpx.Response
    lost_earlier: bool


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 4
    base_seconds: float = 0.5
    max_seconds: float = 30.0  # the longest backoff of its own
    max_retry_after: float = DEFAULT_MAX_RETRY_AFTER  # the longest wait a ``Retry-After`` gets

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """The wait before retry ``attempt + 1``: the server's ``Retry-After`` (capped: a server
        asking for an hour must not hold a sync for an hour), else backoff with full jitter."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
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
            policy=RetryPolicy(
                max_retries=cfg.maxRetries, max_retry_after=cfg.maxRetryAfterSeconds
            ),
            transport=transport,
            sleep=time.sleep if sleep is None else sleep,  # a recorder may be empty, so falsy
        )

    def close(self) -> None:
        self.client.close()

    def pause(self, attempt: int, retry_after: float | None = None) -> None:
        """Wait before retry ``attempt + 1`` (backoff, or the server's capped ``Retry-After``)."""
        self._sleep(self.policy.delay(attempt, retry_after))

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        ok: frozenset[int] = frozenset(),
        resend_after_timeout: bool = True,
        final: Callable[[httpx.Response], bool] | None = None,
        lost: frozenset[int] = LOST_STATUSES,
        timeout: float | None = None,
    ) -> httpx.Response:
        """Send with retries. 2xx, the statuses in ``ok`` and the answers ``final`` recognises
        (a server's own refusal under a retryable status) are returned; a retryable failure
        that outlives the retries raises ``CatalogUnavailable``; another 4xx ``CatalogRefused``;
        a lost answer (a transport error after sending, a status in ``lost``), without
        ``resend_after_timeout``, ``MayHaveLanded``. ``timeout``: this request's own, in seconds
        (else the client's)."""
        return self.send(
            method,
            path,
            json=json,
            params=params,
            ok=ok,
            resend_after_timeout=resend_after_timeout,
            final=final,
            lost=lost,
            timeout=timeout,
        ).response

    def send(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        ok: frozenset[int] = frozenset(),
        resend_after_timeout: bool = True,
        final: Callable[[httpx.Response], bool] | None = None,
        lost: frozenset[int] = LOST_STATUSES,
        timeout: float | None = None,
    ) -> Sent:
        """``request``, also saying whether an earlier attempt lost its answer."""
        where = f"{method} {path}"
        own = httpx.USE_CLIENT_DEFAULT if timeout is None else timeout
        lost_earlier = False
        for attempt in range(self.policy.max_retries + 1):
            last = attempt == self.policy.max_retries
            try:
                response = self.client.request(method, path, json=json, params=params, timeout=own)
            except httpx.TransportError as exc:
                sent = not isinstance(exc, NOT_SENT)
                if sent and not resend_after_timeout:
                    raise MayHaveLanded(
                        f"{where}: {type(exc).__name__}: no answer; it may have been carried out"
                    ) from None
                lost_earlier = lost_earlier or sent
                if last:
                    raise CatalogUnavailable(
                        f"{where}: {type(exc).__name__} after {attempt + 1} attempt(s)"
                    ) from None
                self.pause(attempt)
                continue
            if response.is_success or response.status_code in ok:
                return Sent(response, lost_earlier)
            if final is not None and final(response):
                return Sent(response, lost_earlier)
            if response.status_code in lost:
                if not resend_after_timeout:
                    raise MayHaveLanded(
                        f"{where}: HTTP {response.status_code} from a gateway; it may have been "
                        "carried out"
                    )
                lost_earlier = True
            if response.status_code in RETRY_STATUSES and not last:
                self.pause(attempt, retry_after_seconds(response.headers.get("retry-after")))
                continue
            if response.status_code in RETRY_STATUSES:
                raise CatalogUnavailable(
                    f"{where}: HTTP {response.status_code} after {attempt + 1} attempt(s)"
                )
            raise CatalogRefused(
                f"{where}: HTTP {response.status_code}", response.status_code, response.text[:500]
            )
        raise AssertionError("unreachable")  # pragma: no cover
