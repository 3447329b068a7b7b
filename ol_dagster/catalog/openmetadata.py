"""OpenMetadata: the batch's RunEvents through its OpenLineage endpoint, stale edges out by FQN.

Upload: the accepted events are posted to ``POST /api/v1/openlineage/lineage/batch`` as
``{"events": [...]}``, ``chunkSize`` events a request, with the JWT of a user or bot as a bearer
token (it needs ``EditLineage`` on tables, and ``Create`` where OpenMetadata creates tables).

* OpenMetadata takes RunEvents only: a JobEvent or DatasetEvent is not sent and is counted as
  dropped (``NOT_A_RUN_EVENT``), never failed. Of the RunEvents, the server processes only the
  types its ``eventTypeFilter`` allows (COMPLETE by default) and skips events without inputs or
  outputs; skipped events are not failures either.
* Top-level keys the OpenMetadata schema does not know are left out (it forbids them).
* Both answer generations are read. 2.0 answers 200 with ``summary`` and ``failedEvents``, and
  drops datasets it cannot resolve silently. 2.1 adds ``summary.partial``,
  ``unresolvedDatasets`` and ``unresolvedJobs`` (entries with ``eventIndex`` and a reason code)
  and answers 400 when every event failed: a 400 carrying such a body is a per-event answer, a 400
  without one (bean validation, unparsable request) refuses the whole upload.
* Each ``failedEvents`` entry is a failed row (it blocks the cleanup), its index counted in the
  whole batch, not the chunk, unless the event failed only because datasets with a permanent
  reason (``namespaceNotMapped``, ``missingColumns``, ``creationDisabled``, ...) could not be
  resolved: those datasets are dropped rows, counted by reason, and block nothing (no edge to
  them exists in OpenMetadata, and none is recorded). An unknown reason code blocks.
  ``unresolvedJobs`` (``pipelineNotFound``) is informational: the edges are written without a
  pipeline.
* 401, 403, 5xx (after retries) and timeouts fail the whole upload.

Cleanup, through the sync ledger: an edge is deleted with
``DELETE /api/v1/lineage/table/name/{fromFQN}/table/name/{toFQN}`` (404: already gone). The FQNs
are computed when the edge is recorded, with OpenMetadata's own mapping rule: the
``serviceMapping`` entry whose key equals the namespace, else the longest key the namespace
starts with, then ``<service>.<database>.<schema>.<table>`` from the last three dotted parts of the
name. An edge whose namespace has no mapping has no FQN and is never deleted (OpenMetadata may
have resolved it by a search ol-dagster cannot repeat). An edge that another job or definition
still writes is kept. Jobs and datasets are never deleted: OpenMetadata creates no pipeline for a
job, and a table entity holds metadata other people own.

The clock is the ``Date`` of ``GET /api/v1/system/version``, sent with the token.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx

from ol_dagster.catalog.http import CatalogRefused, CatalogUnavailable, server_time
from ol_dagster.catalog.ledger import LedgerItem
from ol_dagster.catalog.ledger_catalog import LedgerCatalog, SendOutcome
from ol_dagster.lineage.graph import NodeKey
from ol_dagster.lineage.naming import normalize_namespace

log = logging.getLogger(__name__)

BATCH = "/api/v1/openlineage/lineage/batch"
CLOCK = "/api/v1/system/version"

# unresolved-dataset reasons that a retry cannot change: the dataset is dropped, not failed
PERMANENT_REASONS = frozenset(
    {
        "namespaceNotMapped",
        "creationDisabled",
        "missingColumns",
        "notFound",
        "unparsableName",
        "serviceNotFound",
        "missingDatabase",
        "missingSchema",
        "invalidEntity",
        "createNotAllowed",
    }
)
NOT_A_RUN_EVENT = "NOT_A_RUN_EVENT"
RUN_EVENT_KEYS = frozenset(
    {"eventType", "eventTime", "producer", "schemaURL", "run", "job", "inputs", "outputs"}
)
_STATUSES = frozenset({"success", "partial_success", "failure"})
_REASON_CHARS = 300


def service_for(namespace: str, mapping: Mapping[str, str]) -> str | None:
    """OpenMetadata's rule: an exact key wins, else the longest key the namespace starts with;
    entries with an empty key or value are ignored."""
    entries = {k: v for k, v in mapping.items() if k and v}
    if namespace in entries:
        return entries[namespace]
    best = max((k for k in entries if namespace.startswith(k)), key=len, default=None)
    return entries[best] if best is not None else None


def table_fqn(namespace: str, name: str, mapping: Mapping[str, str]) -> str | None:
    """The FQN of the table OpenMetadata resolves ``(namespace, name)`` to under its mapped
    service (the last three dotted parts are database, schema, table); None when unmapped."""
    service = service_for(namespace, mapping)
    if service is None:
        return None
    return ".".join([service, *name.split(".")[-3:]])


def is_run_event(event: Any) -> bool:
    if not isinstance(event, dict) or not isinstance(event.get("run"), dict):
        return False
    kind = str(event.get("schemaURL") or "").rsplit("/", 1)[-1]
    return kind not in ("JobEvent", "DatasetEvent")


def _trim(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 3] + "..."


def _answer(response: httpx.Response) -> dict[str, Any] | None:
    """The OpenLineage batch answer in a response, or None when the body is something else."""
    try:
        body = response.json()
    except ValueError:
        return None
    if (
        isinstance(body, dict)
        and body.get("status") in _STATUSES
        and isinstance(body.get("summary"), dict)
    ):
        return body
    return None


def _refusal(response: httpx.Response) -> CatalogRefused:
    try:
        body = response.json()
        message = body.get("message") if isinstance(body, dict) else None
    except ValueError:
        message = None
    where = f"POST {BATCH}: HTTP {response.status_code}"
    return CatalogRefused(
        f"{where}: {_trim(message)}" if message else where,
        response.status_code,
        response.text[:500],
    )


class OpenMetadataCatalog(LedgerCatalog):
    kind = "openmetadata"

    _last_clock: datetime | None = None

    def clock(self) -> datetime:
        """The ``Date`` of an authenticated read; never earlier than a time this catalog already
        read, so what an upload touches is never older than the cutoff read before it."""
        response = self.http.request("GET", CLOCK)
        when = server_time(response)
        if when is None:
            raise CatalogUnavailable(f"GET {CLOCK}: the answer has no Date header")
        if self._last_clock is not None and when < self._last_clock:
            when = self._last_clock
        self._last_clock = when
        return when

    # -- upload ------------------------------------------------------------------------------

    def send(self, events: Sequence[bytes]) -> SendOutcome:
        outcome = SendOutcome()
        runs: list[tuple[int, dict[str, Any]]] = []
        for index, raw in enumerate(events):
            doc = json.loads(raw)
            if not is_run_event(doc):
                outcome.skipped[NOT_A_RUN_EVENT] = outcome.skipped.get(NOT_A_RUN_EVENT, 0) + 1
                continue
            runs.append((index, {k: v for k, v in doc.items() if k in RUN_EVENT_KEYS}))
        size = self.cfg.chunkSize
        for start in range(0, len(runs), size):
            chunk = runs[start : start + size]
            response = self.http.request(
                "POST", BATCH, json={"events": [doc for _, doc in chunk]}, ok=frozenset({400})
            )
            answer = _answer(response)
            if answer is None:
                if response.status_code == 400:
                    raise _refusal(response)
                raise CatalogUnavailable(
                    f"POST {BATCH}: HTTP {response.status_code} without an OpenLineage answer"
                )
            self._read_answer(answer, [index for index, _ in chunk], outcome)
            outcome.sent += len(chunk)
        outcome.failed.sort()
        return outcome

    def _read_answer(
        self, answer: dict[str, Any], indexes: list[int], outcome: SendOutcome
    ) -> None:
        """Fold one chunk's answer into the outcome; ``indexes[i]`` is chunk event i's index in
        the whole batch."""

        def batch_index(value: Any) -> int | None:
            return indexes[value] if isinstance(value, int) and 0 <= value < len(indexes) else None

        summary = answer["summary"]
        received = summary.get("received")
        if isinstance(received, int) and received != len(indexes):
            outcome.failed.append(
                (indexes[0], f"the server received {received} of {len(indexes)} event(s)")
            )

        # datasets it could not resolve (2.1): dropped when permanent, by event
        unresolved_by_event: dict[int, list[str]] = {}
        for entry in answer.get("unresolvedDatasets") or []:
            if not isinstance(entry, dict):
                continue
            reason = str(entry.get("reason") or "unknown")
            where = batch_index(entry.get("eventIndex"))
            key: NodeKey = (
                normalize_namespace(str(entry.get("namespace") or "")),
                str(entry.get("name") or ""),
            )
            if where is not None:
                unresolved_by_event.setdefault(where, []).append(reason)
            if reason in PERMANENT_REASONS:
                outcome.unresolved[key] = reason
            else:
                outcome.failed.append(
                    (
                        where if where is not None else indexes[0],
                        _trim(f"dataset {key[0]}/{key[1]} unresolved: {reason}"),
                    )
                )

        listed = 0
        for entry in answer.get("failedEvents") or []:
            if not isinstance(entry, dict):
                continue
            listed += 1
            where = batch_index(entry.get("index"))
            reasons = unresolved_by_event.get(where) if where is not None else None
            if reasons and all(r in PERMANENT_REASONS for r in reasons):
                continue  # failed only for lack of datasets that can never resolve: dropped
            outcome.failed.append(
                (
                    where if where is not None else indexes[0],
                    _trim(entry.get("reason") or "the event failed"),
                )
            )
        failed = summary.get("failed")
        if isinstance(failed, int) and failed > listed:
            outcome.failed.append(
                (indexes[0], f"{failed - listed} event(s) failed without a failedEvents entry")
            )

        jobs = answer.get("unresolvedJobs") or []
        if jobs:
            log.info("openmetadata: %d job(s) without a pipeline, edges written without", len(jobs))
        if summary.get("skipped"):
            log.info(
                "openmetadata skipped %s event(s) (filtered type, no edge)", summary["skipped"]
            )

    # -- deletes -------------------------------------------------------------------------------

    def edge_payload(self, source: NodeKey, target: NodeKey) -> dict[str, Any]:
        mapping = self.cfg.serviceMapping
        return {
            "from": {
                "namespace": source[0],
                "name": source[1],
                "fqn": table_fqn(source[0], source[1], mapping),
            },
            "to": {
                "namespace": target[0],
                "name": target[1],
                "fqn": table_fqn(target[0], target[1], mapping),
            },
        }

    def delete_edge(self, item: LedgerItem) -> None:
        source, target = item.payload["from"].get("fqn"), item.payload["to"].get("fqn")
        if not source or not target:
            return  # an end ol-dagster cannot name in OpenMetadata: left alone
        self.http.request(
            "DELETE",
            f"/api/v1/lineage/table/name/{quote(source, safe='')}"
            f"/table/name/{quote(target, safe='')}",
        )

    def delete_job(self, item: LedgerItem) -> None:
        """Nothing to call: OpenMetadata creates no pipeline for an OpenLineage job (it only
        links edges to one that exists), and the job's edges go by ``delete_edge``."""
        return None

    def delete_dataset(self, item: LedgerItem) -> None:
        """Nothing to call: deleting a table entity would delete metadata others own (owners,
        descriptions, tests); only the edges ol-dagster wrote are removed."""
        return None
