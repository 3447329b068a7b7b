"""Marquez (and any server with the OpenLineage API): events in one by one, soft deletes out.

Upload: every accepted event of the batch is posted to ``POST /api/v1/lineage`` as sent by its
producer (Marquez has no batch endpoint, MarquezProject/marquez#2918), several at a time on a
bounded pool (``concurrency``). Marquez answers 201 with an empty body (its OpenAPI file says 200:
any 2xx is taken). 422 (bean validation) and 400 (a namespace outside
``^[a-zA-Z:;=/0-9_\\-.@+]{1,1024}$``) reject one event: a failed row with the server's message.
Connection errors, timeouts, 429 and 5xx are retried by ``HttpCatalogClient``; if they persist the
whole upload fails, so nothing is deleted.

Cleanup, through the sync ledger (Marquez keeps no scope ol-dagster could clean by):

* a job: ``DELETE /api/v1/namespaces/{ns}/jobs/{job}``, a soft delete (``is_hidden``). The job
  leaves the lists and the lineage graph, and its edges go with it;
* a dataset of a dataset System the cleanup may clean (CUTOFF owned, or DAYS), or one a DROP
  event named (the cleanup's ``drop_datasets`` call):
  ``DELETE /api/v1/namespaces/{ns}/datasets/{name}``, also a soft delete;
* an edge: **no call**. Marquez has no edge delete: a job's edges are the inputs and outputs of its
  current version, written by its last terminal event. An edge a job no longer has disappears when
  that job's next terminal event is stored, and every edge of a removed job disappears with it.

Two Marquez rules to know when reading the result: a later event naming a deleted job or dataset
undeletes it (``is_hidden`` is set back to false), and a non-streaming run event with empty or
missing ``inputs`` (or ``outputs``) clears the job's current inputs (or outputs), so its edges go.

Marquez has no authentication of its own; a token, when configured, is sent as a bearer token for
a proxy in front of it. Path segments are percent-encoded whole (namespaces hold ``://``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from datetime import datetime
from typing import Any
from urllib.parse import quote

from ol_dagster.catalog.http import CatalogUnavailable, server_time
from ol_dagster.catalog.ledger import LedgerItem
from ol_dagster.catalog.ledger_catalog import LedgerCatalog, SendOutcome

log = logging.getLogger(__name__)

LINEAGE = "/api/v1/lineage"
CLOCK = "/api/v1/namespaces"
REJECTED = frozenset({400, 422})  # one event refused; other 4xx refuse the client itself
_REASON_CHARS = 300


def segment(value: str) -> str:
    """One path segment, percent-encoded whole (``/``, ``:`` and spaces included)."""
    return quote(value, safe="")


def _server_message(text: str) -> str:
    """The server's reason for a rejected event, on one line."""
    try:
        body = json.loads(text) if text.strip() else None
    except ValueError:
        body = None
    if isinstance(body, dict):
        errors = body.get("errors")
        if isinstance(errors, list) and errors:
            text = "; ".join(str(e) for e in errors)
        elif body.get("message"):
            text = str(body["message"])
    return " ".join(text.split())


def _trim(text: str) -> str:
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 3] + "..."


class MarquezCatalog(LedgerCatalog):
    kind = "marquez"

    _last_clock: datetime | None = None

    def clock(self) -> datetime:
        """The ``Date`` of a cheap read; never earlier than a time this catalog already read,
        so what an upload touches is never older than the cutoff read before it."""
        response = self.http.request("GET", CLOCK, params={"limit": 1})
        when = server_time(response)
        if when is None:
            raise CatalogUnavailable(f"GET {CLOCK}: the answer has no Date header")
        if self._last_clock is not None and when < self._last_clock:
            when = self._last_clock
        self._last_clock = when
        return when

    # -- upload ------------------------------------------------------------------------------

    def _post(self, index: int, event: Any) -> tuple[int, str] | None:
        response = self.http.request("POST", LINEAGE, json=event, ok=REJECTED)
        if response.status_code in REJECTED:
            message = _server_message(response.text)
            reason = f"HTTP {response.status_code}" + (f": {message}" if message else "")
            return index, _trim(reason)
        return None

    def send(self, events: Sequence[bytes]) -> SendOutcome:
        outcome = SendOutcome()
        if not events:
            return outcome
        docs = [json.loads(raw) for raw in events]
        pool = ThreadPoolExecutor(
            max_workers=max(1, min(self.cfg.concurrency, len(docs))),
            thread_name_prefix="ol-dagster-marquez",
        )
        try:
            futures: list[Future[tuple[int, str] | None]] = [
                pool.submit(self._post, i, doc) for i, doc in enumerate(docs)
            ]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for future in done:
                error = future.exception()
                if error is not None:
                    raise error  # unreachable or refusing: the whole upload fails
            for future in futures:
                rejected = future.result()
                if rejected is not None:
                    outcome.failed.append(rejected)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        outcome.failed.sort()
        outcome.sent = len(docs)
        if outcome.failed:
            log.warning("marquez rejected %d of %d event(s)", len(outcome.failed), len(docs))
        return outcome

    # -- deletes -------------------------------------------------------------------------------

    def delete_job(self, item: LedgerItem) -> None:
        ns, name = item.payload["namespace"], item.payload["name"]
        self.http.request("DELETE", f"/api/v1/namespaces/{segment(ns)}/jobs/{segment(name)}")

    def delete_dataset(self, item: LedgerItem) -> None:
        ns, name = item.payload["namespace"], item.payload["name"]
        self.http.request("DELETE", f"/api/v1/namespaces/{segment(ns)}/datasets/{segment(name)}")

    def delete_edge(self, item: LedgerItem) -> None:
        """Nothing to call: Marquez derives a job's edges from its current version (the last
        terminal event), so a stale edge either went with a newer event of its job or goes with
        the job's own delete. The ledger entry is forgotten all the same."""
        return None
