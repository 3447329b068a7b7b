"""Marquez (and any server with the OpenLineage API): events in one by one, soft deletes out.

Upload: every accepted event of the batch is first made into what Marquez reads (``events``: a
time its date reader refuses is written again in UTC; a namespace or name it refuses keeps the
event here, one failed row ``MARQUEZ_SCHEMA``), then posted to ``POST /api/v1/lineage`` as
``application/json`` (Marquez has no batch endpoint, MarquezProject/marquez#2918), several at a
time on a bounded pool (``concurrency``), but the events of one job one after the other, in batch
order: Marquez makes a job's current inputs and outputs from its events in the order it stores
them. Marquez answers 201 with an empty body (its OpenAPI file says 200: any 2xx is taken).

Marquez's refusal of one event (422 of its bean validation, its 400, the 500 of an event Jackson
cannot read) is that event's failed row (``MARQUEZ_SCHEMA``), never retried, and it blocks
nothing: the others are stored, the batch is done, and the cleanup runs (the refused event's job
and datasets are still this batch's, so none of them is stale). Another 400 or 422 (a proxy's) is
a failed row that fails the upload, and so is a 413 of a proxy in front whose body limit the event
passes (``catalog.bounded``: the event alone is too large; the others are stored). Connection
errors, timeouts, 429 and other 5xx are retried by ``HttpCatalogClient`` (storing an event twice
stores nothing more); if they persist the whole upload fails, so nothing is deleted.

The name Marquez holds a job under is not always the event's (``OpenLineageDao``): a run with a
parent facet makes the job ``<parent>.<job>`` (the parent is the facet's job name, or that name up
to its last dot when it names the child itself; a child name already starting with
``<parent>.`` is not prefixed twice). The upload computes that name for every event it stored and
records it with the job's ledger entry (``heldAs``, together with the names recorded before), so
the cleanup deletes what Marquez really holds. Each dataset's entry records which of this
definition's jobs wrote it (under those names) and when the upload was (``holders``).

Cleanup, through the sync ledger (Marquez keeps no scope ol-dagster could clean by):

* a job: ``DELETE /api/v1/namespaces/{ns}/jobs/{job}`` for each name Marquez holds it under, a soft
  delete (``is_hidden``). The job leaves the lists and the lineage graph, and its edges go with
  it. A job renamed in Marquez (an alias: ``JobRedirectFilter``) answers 301 with the current
  name in ``Location``; the client takes the name from it and sends the DELETE again there (never
  a GET, never to another host). 404 for every name is "not found", not removed, unless a
  DELETE lost its answer before (``bounded.removal``: it removed the job then);
* a dataset of a dataset System the cleanup may clean (CUTOFF owned, or DAYS), or one a DROP
  event named (the cleanup's ``drop_datasets`` call): first read (``holders``): when another job
  wrote its current version, or it changed after this definition's last upload, it is **kept**
  (the report names the writer); otherwise ``DELETE /api/v1/namespaces/{ns}/datasets/{name}``,
  also a soft delete;
* an edge: **no call**. Marquez has no edge delete: a job's edges are the inputs and outputs of its
  current version, made current by a COMPLETE, FAIL or ABORT of one of its runs (the run's
  datasets). An edge a job no longer has disappears when that job's next such event is stored,
  and every edge of a removed job disappears with it. Its column lineage does not: Marquez keeps
  it until a dataset is deleted, so a flow whose column lineage Marquez still shows is **kept**
  in the report, not removed.

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
from datetime import datetime
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx

from ol_dagster.catalog.bounded import delete, post_bounded, removal
from ol_dagster.catalog.http import CatalogRefused
from ol_dagster.catalog.ledger.catalog import LedgerCatalog, SendOutcome
from ol_dagster.catalog.ledger.entries import DATASET, JOB, LedgerItem
from ol_dagster.catalog.marquez.events import (
    MARQUEZ_SCHEMA,
    REJECTED,
    NotConformable,
    conform,
    is_jackson_error,
    refusal,
    server_message,
)
from ol_dagster.catalog.marquez.holders import (
    UPLOADED,
    WRITERS,
    Job,
    dataset_holder,
    dataset_path,
    flow_holder,
    segment,
)
from ol_dagster.catalog.marquez.settings import MarquezCatalogSettings
from ol_dagster.catalog.protocol import CleanupCounts, DatasetRef, FailedRow, Removal, Removed
from ol_dagster.lineage.graph import NodeKey

log = logging.getLogger(__name__)

LINEAGE = "/api/v1/lineage"
CLOCK = "/api/v1/namespaces"
REDIRECTS = frozenset({301, 302, 303, 307, 308})
HELD_AS = "heldAs"  # JOB payload: the names Marquez holds the job under
_MAX_HOPS = 3
# a job path of JobResource, as JobRedirectFilter builds its Location
_JOB_LOCATION = re.compile(r".*/namespaces/([^/]+)/jobs/([^/]+)/?")
# what one post came to: None (stored), or (index, why, refused for its content alone)
Posted = tuple[int, str, bool] | None


def job_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{segment(namespace)}/jobs/{segment(name)}"


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

    def _post(self, index: int, event: Any) -> Posted:
        def post(_: list[Any]) -> httpx.Response:
            return self.http.request(
                "POST", LINEAGE, json=event, ok=REJECTED, final=is_jackson_error
            )

        # one event: a 413 (a proxy's body limit) is its failed row, not the upload's failure
        sent = post_bounded([event], post, read_back=None, pause=self.http.pause, max_lost=0)
        if sent.failed:
            return index, sent.failed[0][1], False
        ((_, response),) = sent.answers
        if response.is_success:
            return None
        why = refusal(response)
        if why is None:  # a 400 or 422 that is not Marquez's (a proxy's): the upload fails
            return index, server_message(response), False
        return index, why, True

    def _post_in_order(self, events: list[tuple[int, Any]]) -> list[Posted]:
        return [self._post(index, event) for index, event in events]

    @staticmethod
    def _conformed(events: Sequence[bytes]) -> tuple[dict[int, Any], dict[int, str]]:
        """The events Marquez can read, by index, and why the others are not sent."""
        docs: dict[int, Any] = {}
        refused: dict[int, str] = {}
        for i, raw in enumerate(events):
            doc = json.loads(raw)
            try:
                docs[i] = conform(doc) if isinstance(doc, dict) else doc
            except NotConformable as exc:
                refused[i] = f"not sent, Marquez would refuse it: {exc}"
        return docs, refused

    def send(self, events: Sequence[bytes]) -> SendOutcome:
        outcome = SendOutcome()
        if not events:
            return outcome
        docs, refused = self._conformed(events)
        lanes: dict[tuple[str, ...], list[tuple[int, Any]]] = {}
        for i, doc in docs.items():
            lanes.setdefault(_job_key(doc), []).append((i, doc))
        failed: dict[int, str] = {}
        for answer in self._post_lanes(list(lanes.values())) if lanes else []:
            if answer is not None:
                index, why, content = answer
                (refused if content else failed)[index] = why
        outcome.sent = len(docs)
        outcome.failed = sorted(failed.items())
        # refused for its content: Marquez would refuse it on every run; the others sync
        outcome.refused = [
            FailedRow("events", f"event {i}", why, code=MARQUEZ_SCHEMA, blocks=False)
            for i, why in sorted(refused.items())
        ]
        for i, why in sorted((failed | refused).items()):
            log.warning("marquez did not take event %d: %s", i, why)
        named = [doc for doc in docs.values() if isinstance(doc, dict)]
        stored = [
            doc
            for i, doc in docs.items()
            if i not in failed and i not in refused and isinstance(doc, dict)
        ]
        # what an event Marquez did not take names keeps what was recorded of it before: its
        # entry is touched all the same (it is still this batch's)
        named += [json.loads(events[i]) for i in refused if i not in docs]
        outcome.job_payload = self._held_names(stored, named)
        outcome.dataset_payload = self._writers(stored, named)
        return outcome

    def _post_lanes(self, lanes: list[list[tuple[int, Any]]]) -> list[Posted]:
        pool = ThreadPoolExecutor(
            max_workers=max(1, min(self.cfg.concurrency, len(lanes))),
            thread_name_prefix="ol-dagster-marquez",
        )
        try:
            futures: list[Future[list[Posted]]] = [
                pool.submit(self._post_in_order, lane) for lane in lanes
            ]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for future in done:
                error = future.exception()
                if error is not None:
                    raise error  # unreachable or refusing: the whole upload fails
            return [p for future in futures for p in future.result()]
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _held_names(
        self, stored: list[dict[str, Any]], named: list[Any]
    ) -> dict[NodeKey, dict[str, Any]]:
        """For each job the events name, the names Marquez holds it under (from the stored
        events), with those the ledger already recorded: a name Marquez made once stays until
        the job is deleted."""
        held: dict[NodeKey, set[str]] = {}
        for doc in named:
            job = doc.get("job") if isinstance(doc, dict) else None
            if isinstance(job, dict):
                held.setdefault((str(job.get("namespace")), str(job.get("name"))), set())
        for doc in stored:
            name = held_name(doc)
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
        return {key: {HELD_AS: sorted(names)} for key, names in held.items() if names}

    def _writers(
        self, stored: list[dict[str, Any]], named: list[Any]
    ) -> dict[NodeKey, dict[str, Any]]:
        """For each dataset the events name: this definition's jobs that wrote it (as Marquez
        holds them, from the stored events), with those recorded before, and the time of this
        upload (the catalog's clock read before it): what tells its cleanup who else wrote it
        since."""
        writers: dict[NodeKey, set[Job]] = {}
        for doc, wrote in [*((d, False) for d in named), *((d, True) for d in stored)]:
            job = held_name(doc) if wrote and isinstance(doc, dict) else None
            for side in ("inputs", "outputs", "dataset"):
                value = doc.get(side) if isinstance(doc, dict) else None
                for ds in value if isinstance(value, list) else [value]:
                    if not isinstance(ds, dict):
                        continue
                    found = writers.setdefault(
                        (str(ds.get("namespace")), str(ds.get("name"))), set()
                    )
                    if side == "outputs" and job is not None:
                        found.add((str(doc["job"].get("namespace")), job))
        if not writers:
            return {}
        for item in self.ledger.all(DATASET, self.definition_name):
            key = (item.payload["namespace"], item.payload["name"])
            if key in writers:
                writers[key].update(tuple(w) for w in item.payload.get(WRITERS) or [])
        uploaded = self._last_clock.isoformat() if self._last_clock else None
        return {
            key: {WRITERS: [list(w) for w in sorted(found)], UPLOADED: uploaded}
            for key, found in writers.items()
        }

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
            sent = self.http.send("DELETE", path, ok=REDIRECTS | {404})
            response, status = sent.response, sent.response.status_code
            if status not in REDIRECTS:
                return removal(sent)
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

    _ours: set[Job] | None = None

    def _our_jobs(self) -> set[Job]:
        """The jobs this definition describes, under every name Marquez holds them: read once
        a cleanup call (a job removed before a dataset stays among them)."""
        if self._ours is None:
            self._ours = {
                (item.payload["namespace"], name)
                for item in self.ledger.all(JOB, self.definition_name)
                for name in item.payload.get(HELD_AS) or [item.payload["name"]]
            }
        return self._ours

    def cleanup_dataset_system(
        self, system: str, *, before: datetime, dry_run: bool
    ) -> CleanupCounts:
        self._ours = None
        return super().cleanup_dataset_system(system, before=before, dry_run=dry_run)

    def drop_datasets(self, datasets: Sequence[DatasetRef], *, dry_run: bool) -> CleanupCounts:
        self._ours = None
        return super().drop_datasets(datasets, dry_run=dry_run)

    def delete_dataset(self, item: LedgerItem) -> Removal | Removed | None:
        """Deleted only when no job outside this definition wrote it since its last upload
        (``holders.dataset_holder``): otherwise kept, with who wrote it."""
        ours = self._our_jobs() | {(w[0], w[1]) for w in item.payload.get(WRITERS) or []}
        held = dataset_holder(self.http, item.payload, ours)
        if held is not None:
            return held
        return delete(self.http, dataset_path(item.payload["namespace"], item.payload["name"]))

    def delete_edge(self, item: LedgerItem) -> Removed | None:
        """Nothing to delete: Marquez derives a job's edges from its current version (the last
        COMPLETE, FAIL or ABORT of one of its runs), so a stale edge either went with a newer
        event of its job or goes with the job's own delete. Its column lineage stays in Marquez:
        a flow whose column lineage Marquez still shows is kept (``holders.flow_holder``). The
        ledger entry is forgotten all the same."""
        return flow_holder(self.http, item.payload)
