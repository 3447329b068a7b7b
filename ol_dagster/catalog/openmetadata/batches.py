"""One batch request to OpenMetadata's OpenLineage endpoint, never sent twice blindly.

OpenMetadata answers a batch only after it has resolved every dataset of every event, one search
after another (``OpenLineageResource.postLineageBatch``, a loop over the events), so a big batch
can outlast the client's timeout while the server goes on writing it. Sending the same request
again at once (what the shared client does on a timeout) would have two requests write the same
events side by side. So here:

* a connection that fails before the request reached the server, 429, 500, 502 and 503 are
  retried as everywhere (nothing is being written, or the server is done);
* a read or write timeout, a connection cut mid-answer and a 504 (a proxy gave up waiting) raise
  ``BatchTimedOut``: the server may still be writing. The catalog then reads back what the events
  wrote (``reads.unwritten``) and sends only the rest again, in halves.

Implemented here rather than in the shared HTTP client: only this endpoint needs the distinction,
and the retry policy (``RetryPolicy``, ``Retry-After``) is the shared one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from ol_dagster.catalog.http import (
    RETRY_STATUSES,
    CatalogUnavailable,
    HttpCatalogClient,
    retry_after_seconds,
)

BATCH = "/api/v1/openlineage/lineage/batch"
# statuses after which the server wrote nothing more: tried again (504: see ``BatchTimedOut``)
RETRIED = RETRY_STATUSES - {504}


class BatchTimedOut(Exception):
    """No answer in time: the server may still be writing the batch."""


def post_batch(
    http: HttpCatalogClient,
    body: dict[str, Any],
    *,
    timeout: float,
    sleep: Callable[[float], None],
    ok: frozenset[int] = frozenset(),
) -> httpx.Response:
    """``POST`` the batch; 2xx and ``ok`` answers are returned, the rest as the module says."""
    policy = http.policy
    for attempt in range(policy.max_retries + 1):
        last = attempt == policy.max_retries
        try:
            response = http.client.request("POST", BATCH, json=body, timeout=timeout)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            if last:
                raise CatalogUnavailable(
                    f"POST {BATCH}: {type(exc).__name__} after {attempt + 1} attempt(s)"
                ) from None
            sleep(policy.delay(attempt, None))
            continue
        except httpx.TransportError as exc:  # sent, and then no whole answer
            raise BatchTimedOut(f"POST {BATCH}: {type(exc).__name__} after {timeout:g} s") from None
        status = response.status_code
        if response.is_success or status in ok:
            return response
        if status == 504:
            raise BatchTimedOut(f"POST {BATCH}: HTTP 504 (a proxy stopped waiting)")
        if status in RETRIED and not last:
            sleep(policy.delay(attempt, retry_after_seconds(response.headers.get("retry-after"))))
            continue
        if status in RETRIED:
            raise CatalogUnavailable(f"POST {BATCH}: HTTP {status} after {attempt + 1} attempt(s)")
        return response  # another 4xx: the caller reads it
    raise AssertionError("unreachable")  # pragma: no cover
