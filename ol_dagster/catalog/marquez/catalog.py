"""Marquez (and any server with the OpenLineage API): events in one by one, soft deletes out.

Upload: every accepted event of the batch is posted to ``POST /api/v1/lineage`` as sent by its
producer (Marquez has no batch endpoint, MarquezProject/marquez#2918), several at a time on a
bounded pool (``concurrency``), but the events of one job one after the other, in batch order:
Marquez makes a job's current inputs and outputs from its events in the order it stores them.
Marquez answers 201 with an empty body (its OpenAPI file says 200: any 2xx is taken). 422 (bean
validation) and 400 (what Jackson cannot read, a namespace outside
``^[a-zA-Z:;=/0-9_\\-.@+]{1,1024}$``) reject one event: a failed row with the server's message.
A time without an offset is sent as it is: Marquez reads it in its own zone. Connection errors,
timeouts, 429 and 5xx are retried by ``HttpCatalogClient``; if they persist the whole upload fails,
so nothing is deleted.

The name Marquez holds a job under is not always the event's (``OpenLineageDao``): a run with a
parent facet makes the job ``<parent>.<job>`` (the parent is the facet's job name, or that name up
to its last dot when it names the child itself; a child name already starting with
``<parent>.`` is not prefixed twice). The upload computes that name for every event it sent and
records it with the job's ledger entry (``heldAs``, together with the names recorded before), so
the cleanup deletes what Marquez really holds.

Cleanup, through the sync ledger (Marquez keeps no scope ol-dagster could clean by):

* a job: ``DELETE /api/v1/namespaces/{ns}/jobs/{job}`` for each name Marquez holds it under, a soft
  delete (``is_hidden``). The job leaves the lists and the lineage graph, and its edges go with
  it. A job renamed in Marquez (an alias: ``JobRedirectFilter``) answers 301 with the current
  name in ``Location``; the client takes the name from it and sends the DELETE again there (never
  a GET, never to another host). 404 for every name is "not found", not removed;
* a dataset of a dataset System the cleanup may clean (CUTOFF owned, or DAYS), or one a DROP
  event named (the cleanup's ``drop_datasets`` call):
  ``DELETE /api/v1/namespaces/{ns}/datasets/{name}``, also a soft delete;
* an edge: **no call**. Marquez has no edge delete: a job's edges are the inputs and outputs of its
  current version, made current by a COMPLETE, FAIL or ABORT of one of its runs (the run's
  datasets). An edge a job no longer has disappears when that job's next such event is stored,
  and every edge of a removed job disappears with it.

Two Marquez rules to know when reading the result: a later event naming a deleted job or dataset
undeletes it (``is_hidden`` is set back to false), and a run event with empty or missing ``inputs``
(or ``outputs``), START and RUNNING included, clears the job's current inputs (or outputs), so its
edges go (not a streaming job's COMPLETE or FAIL without datasets).

Marquez has no authentication of its own; a token, when configured, is sent as a bearer token for
a proxy in front of it. Path segments are percent-encoded whole (namespaces hold ``://``).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from ol_dagster.catalog.http import CatalogRefused
from ol_dagster.catalog.ledger.catalog import LedgerCatalog, SendOutcome
from ol_dagster.catalog.ledger.entries import JOB, LedgerItem
from ol_dagster.catalog.marquez.settings import MarquezCatalogSettings
from ol_dagster.catalog.protocol import Removal
from ol_dagster.lineage.graph import NodeKey

log = logging.getLogger(__name__)

LINEAGE = "/api/v1/lineage"
CLOCK = "/api/v1/namespaces"
REJECTED = frozenset({400, 422})  # one event refused; other 4xx refuse the client itself
REDIRECTS = frozenset({301, 302, 303, 307, 308})
HELD_AS = "heldAs"  # JOB payload: the names Marquez holds the job under
_MAX_HOPS = 3
_REASON_CHARS = 300
# a job path of JobResource, as JobRedirectFilter builds its Location
_JOB_LOCATION = re.compile(r".*/namespaces/([^/]+)/jobs/([^/]+)/?")


def segment(value: str) -> str:
    """One path segment, percent-encoded whole (``/``, ``:`` and spaces included)."""
    return quote(value, safe="")


def job_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{segment(namespace)}/jobs/{segment(name)}"


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


def event_kind(event: dict[str, Any]) -> str:
    """What Marquez reads an event as: the end of ``schemaURL`` from its last ``/``
    (``EventTypeResolver``); anything but a DatasetEvent or a JobEvent is a RunEvent."""
    url = str(event.get("schemaURL") or "")
    end = url[url.rindex("/") :] if "/" in url else ""
    return {"/DatasetEvent": "DatasetEvent", "/JobEvent": "JobEvent"}.get(end, "RunEvent")


def held_name(event: dict[str, Any]) -> str | None:
    """The name Marquez stores the event's job under (``OpenLineageDao.buildJobFromEvent`` and
    the ``rewrite_jobs_fqn_table`` trigger): a RunEvent with a parent facet (``parent``, or its
    alias ``parentRun``, the later key winning) makes ``<parent>.<job>``. Whether Marquez finds
    the parent from its run or makes it, the parent's name is the facet's job name, or that name
    up to its last dot when it names the child itself (``Utils.parseParentJobName``); a child name
    already starting with ``<parent>.`` keeps its own prefix. None: no job."""
    job = event.get("job")
    if not isinstance(job, dict) or not isinstance(job.get("name"), str):
        return None
    name: str = job["name"]
    if event_kind(event) != "RunEvent":
        return name
    facets = (event.get("run") or {}).get("facets")
    parent: Any = None
    if isinstance(facets, dict):
        for key, value in facets.items():
            if key in ("parent", "parentRun"):
                parent = value
    facet_name = ((parent or {}).get("job") or {}).get("name") if isinstance(parent, dict) else None
    if not isinstance(facet_name, str):
        return name
    if facet_name == name and "." in facet_name:
        facet_name = facet_name.rsplit(".", 1)[0]
    simple = name[len(facet_name) + 1 :] if name.startswith(facet_name + ".") else name
    return f"{facet_name}.{simple}"


def _job_key(event: dict[str, Any]) -> tuple[str, ...]:
    """What orders events: one job's events are stored one after the other."""
    if event_kind(event) == "DatasetEvent":
        ds = event.get("dataset") or {}
        return ("dataset", str(ds.get("namespace")), str(ds.get("name")))
    job = event.get("job") or {}
    return ("job", str(job.get("namespace")), str(job.get("name")))


class MarquezCatalog(LedgerCatalog[MarquezCatalogSettings]):
    kind = "marquez"

    clock_call = (CLOCK, {"limit": 1})  # a cheap read (Marquez has no authentication)

    # -- upload ------------------------------------------------------------------------------

    def _post(self, index: int, event: Any) -> tuple[int, str] | None:
        response = self.http.request("POST", LINEAGE, json=event, ok=REJECTED)
        if response.status_code in REJECTED:
            message = _server_message(response.text)
            reason = f"HTTP {response.status_code}" + (f": {message}" if message else "")
            return index, _trim(reason)
        return None

    def _post_in_order(self, events: list[tuple[int, Any]]) -> list[tuple[int, str]]:
        rejected = [self._post(index, event) for index, event in events]
        return [r for r in rejected if r is not None]

    def send(self, events: Sequence[bytes]) -> SendOutcome:
        outcome = SendOutcome()
        if not events:
            return outcome
        docs = [json.loads(raw) for raw in events]
        lanes: dict[tuple[str, ...], list[tuple[int, Any]]] = {}
        for i, doc in enumerate(docs):
            lanes.setdefault(_job_key(doc), []).append((i, doc))
        pool = ThreadPoolExecutor(
            max_workers=max(1, min(self.cfg.concurrency, len(lanes))),
            thread_name_prefix="ol-dagster-marquez",
        )
        try:
            futures: list[Future[list[tuple[int, str]]]] = [
                pool.submit(self._post_in_order, lane) for lane in lanes.values()
            ]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for future in done:
                error = future.exception()
                if error is not None:
                    raise error  # unreachable or refusing: the whole upload fails
            for future in futures:
                outcome.failed.extend(future.result())
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        outcome.failed.sort()
        outcome.sent = len(docs)
        if outcome.failed:
            log.warning("marquez rejected %d of %d event(s)", len(outcome.failed), len(docs))
        outcome.job_payload = self._held_names(docs, {i for i, _ in outcome.failed})
        return outcome

    def _held_names(self, docs: list[Any], failed: set[int]) -> dict[NodeKey, dict[str, Any]]:
        """For each job the stored events name, the names Marquez holds it under, with those the
        ledger already recorded: a name Marquez made once stays until the job is deleted."""
        held: dict[NodeKey, set[str]] = {}
        for i, doc in enumerate(docs):
            name = held_name(doc) if i not in failed and isinstance(doc, dict) else None
            if name is None:
                continue
            key = (str(doc["job"].get("namespace")), str(doc["job"].get("name")))
            held.setdefault(key, set()).add(name)
        if not held:
            return {}
        for item in self.ledger.all(JOB, self.definition_name):
            key = (item.payload["namespace"], item.payload["name"])
            if key in held:
                held[key].update(item.payload.get(HELD_AS) or [])
        return {key: {HELD_AS: sorted(names)} for key, names in held.items()}

    # -- deletes -------------------------------------------------------------------------------

    def delete_job(self, item: LedgerItem) -> Removal:
        """Every name Marquez holds the job under (an entry recorded before ``heldAs`` existed:
        its OpenLineage name). Removed when one of them was there; not found when none was."""
        ns = item.payload["namespace"]
        names = item.payload.get(HELD_AS) or [item.payload["name"]]
        outcomes = [self._delete_job_named(ns, name) for name in names]
        return Removal.REMOVED if Removal.REMOVED in outcomes else Removal.NOT_FOUND

    def _delete_job_named(self, namespace: str, name: str) -> Removal:
        """One job by name. A 3xx (Marquez: 301 for a renamed job) names the current job in
        ``Location``: the DELETE is sent again for that job, on this server, never turned into
        a GET; httpx follows no redirect here (``follow_redirects`` is off)."""
        seen = {(namespace, name)}
        path = job_path(namespace, name)
        for _ in range(_MAX_HOPS):
            response = self.http.request("DELETE", path, ok=REDIRECTS | {404})
            status = response.status_code
            if status == 404:
                return Removal.NOT_FOUND
            if status not in REDIRECTS:
                return Removal.REMOVED
            target = self._redirected_job(response.headers.get("location"))
            if target is None or target in seen:
                raise CatalogRefused(f"DELETE {path}: HTTP {status} to no other job", status)
            seen.add(target)
            log.info("marquez job %s.%s is now %s.%s", namespace, name, *target)
            path = job_path(*target)
        raise CatalogRefused(f"DELETE {path}: still redirected after {_MAX_HOPS} hops", 301)

    @staticmethod
    def _redirected_job(location: str | None) -> tuple[str, str] | None:
        """(namespace, name) of the job a ``Location`` names (absolute or relative: only its
        path is read, so the DELETE stays on the configured server and its token with it)."""
        if not location:
            return None
        m = _JOB_LOCATION.fullmatch(urlsplit(location).path)
        if m is None:
            return None
        return unquote(m.group(1)), unquote(m.group(2))

    def delete_dataset(self, item: LedgerItem) -> None:
        ns, name = item.payload["namespace"], item.payload["name"]
        self.http.request("DELETE", f"/api/v1/namespaces/{segment(ns)}/datasets/{segment(name)}")

    def delete_edge(self, item: LedgerItem) -> None:
        """Nothing to call: Marquez derives a job's edges from its current version (the last
        COMPLETE, FAIL or ABORT of one of its runs), so a stale edge either went with a newer
        event of its job or goes with the job's own delete. The ledger entry is forgotten all
        the same."""
        return None
