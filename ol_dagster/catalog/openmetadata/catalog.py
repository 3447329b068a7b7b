"""OpenMetadata: the batch's RunEvents through its OpenLineage endpoint, stale edges out by id.

Upload: the accepted events are posted to ``POST /api/v1/openlineage/lineage/batch`` as
``{"events": [...]}``, ``chunkSize`` events a request, with the JWT of a user or bot as a bearer
token (it needs ``EditLineage`` on tables, and ``Create`` where OpenMetadata creates tables).

* OpenMetadata takes RunEvents only: a JobEvent or DatasetEvent is not sent and is counted as
  dropped (``NOT_A_RUN_EVENT``), never failed. Of the RunEvents, the server processes only the
  types its ``eventTypeFilter`` allows (COMPLETE by default) and skips events without inputs or
  outputs; skipped events are not failures either.
* Each RunEvent is first made to conform to OpenMetadata's own schema
  (``events.conform``): the server refuses the whole request, with a 400, for one
  event that breaks it, and the receiver accepts such events on purpose (no ``schemaURL``,
  zone-less times, run ids that are not UUIDs, untyped schema fields, unknown keys, loose
  facets). Non-UUID run ids are sent as stable UUIDs (the same for every event of a run and every
  parent facet naming it). An event that cannot be made to conform is not sent: it is a dropped
  row (``OPENMETADATA_SCHEMA``) and the others go.
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

Cleanup, through the sync ledger, with what OpenMetadata really holds:

* After an accepted upload the edges are read back (``tables``): which tables the
  server joined for each flow, found the way it finds them (symlinks first, ``schema.table``
  searched across the mapped service's databases, quoted FQN parts, a catalog-wide suffix search
  read through the lineage of the edge's other end), each dataset read once per upload. The
  ledger records the two tables' ids and FQNs; an edge is OpenMetadata's (from id, to id), so
  two entries naming the same tables differently hold one edge. A flow whose tables cannot be
  told is not recorded (ol-dagster cannot name it, so it never deletes it), except that a flow
  recorded before and still written keeps its entry. A failed read fails the upload: recording
  nothing would turn this batch's edges stale.
* A stale edge is checked before it goes: ``GET /api/v1/lineage/getLineageEdge/{fromId}/{toId}``,
  then ``DELETE /api/v1/lineage/table/{fromId}/table/{toId}`` only when its
  ``lineageDetails.source`` is ``OpenLineage``. OpenMetadata keeps one edge per table pair, and
  whoever wrote it last owns it: a user's (``Manual``) or another connector's edge on the same
  tables is kept (reported ``kept``), never deleted. Neither of the server's other deletes fits:
  the FQN delete removes the edge whatever its source, the source-scoped one
  (``/lineage/table/{id}/type/OpenLineage``) every OpenLineage edge into the table. No edge (or
  no table): ``notFound``, never counted as removed. An entry recorded before the read-back
  (FQNs only) is looked up by its FQNs first.
* An edge that another job or definition still writes is kept. Jobs and datasets are never
  deleted: OpenMetadata creates no pipeline for a job, and a table entity holds metadata other
  people own.

The clock is the ``Date`` of ``GET /api/v1/users/loggedInUser``: an authenticated read
(``/api/v1/system/version`` is among the paths OpenMetadata's JwtFilter lets through without a
token, so it would prove nothing), so a wrong or expired token fails the clock, and with it the
upload, with a 401 that names the path, never the token.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from ol_dagster.catalog.http import CatalogRefused, CatalogUnavailable
from ol_dagster.catalog.ledger.catalog import LedgerCatalog, SendOutcome
from ol_dagster.catalog.ledger.entries import EDGE, LedgerItem
from ol_dagster.catalog.openmetadata.events import conform
from ol_dagster.catalog.openmetadata.settings import OpenMetadataCatalogSettings
from ol_dagster.catalog.openmetadata.tables import (
    Table,
    TableReader,
    sent_datasets,
    service_for,  # noqa: F401  (OpenMetadata's namespace mapping rule, used by ``check``)
)
from ol_dagster.catalog.protocol import Removal
from ol_dagster.lineage import LineageGraph
from ol_dagster.lineage.graph import DataFlow, NodeKey
from ol_dagster.lineage.naming import normalize_namespace

log = logging.getLogger(__name__)

BATCH = "/api/v1/openlineage/lineage/batch"
EDGE_PATH = "/api/v1/lineage/getLineageEdge"
OPENLINEAGE_SOURCE = "OpenLineage"  # LineageDetails.Source.OPEN_LINEAGE
CLOCK = "/api/v1/users/loggedInUser"
VERSION = "/api/v1/system/version"  # answers without a token (JwtFilter.EXCLUDED_ENDPOINTS)

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
OPENMETADATA_SCHEMA = "OPENMETADATA_SCHEMA"  # a RunEvent that cannot be made to conform
_STATUSES = frozenset({"success", "partial_success", "failure"})
_REASON_CHARS = 300


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


def _written_pairs(
    docs: Sequence[dict[str, Any]], key_of: Callable[[str, str], NodeKey], types: Sequence[str]
) -> set[tuple[NodeKey, NodeKey]]:
    """(input, output) pairs the server writes an edge for: one event's inputs x outputs, of
    the event types its ``eventTypeFilter`` takes (an event without a type counts as COMPLETE;
    ``OpenLineageMapper`` in open-metadata/OpenMetadata)."""
    allowed = set(types) or {"COMPLETE"}
    pairs: set[tuple[NodeKey, NodeKey]] = set()
    for doc in docs:
        if (doc.get("eventType") or "COMPLETE") not in allowed:
            continue
        ins = {key_of(d["namespace"], d["name"]) for d in doc.get("inputs") or []}
        outs = {key_of(d["namespace"], d["name"]) for d in doc.get("outputs") or []}
        pairs |= {(i, o) for i in ins for o in outs if i != o}
    return pairs


def _edge_payload(source: NodeKey, target: NodeKey, src: Table, dst: Table) -> dict[str, Any]:
    """A recorded edge: the OpenLineage names (the ledger's reads) and the tables OpenMetadata
    holds (the delete's)."""
    return {
        "from": {
            "namespace": source[0],
            "name": source[1],
            "type": src.type,
            "id": src.id,
            "fqn": src.fqn,
        },
        "to": {
            "namespace": target[0],
            "name": target[1],
            "type": dst.type,
            "id": dst.id,
            "fqn": dst.fqn,
        },
    }


class OpenMetadataCatalog(LedgerCatalog[OpenMetadataCatalogSettings]):
    kind = "openmetadata"

    clock_call = (CLOCK, {})  # an authenticated read; its ``Date`` is the clock

    # -- upload ------------------------------------------------------------------------------

    def send(self, events: Sequence[bytes]) -> SendOutcome:
        outcome = SendOutcome()
        runs: list[tuple[int, dict[str, Any]]] = []
        for index, raw in enumerate(events):
            doc = json.loads(raw)
            if not is_run_event(doc):
                outcome.skipped[NOT_A_RUN_EVENT] = outcome.skipped.get(NOT_A_RUN_EVENT, 0) + 1
                continue
            conformed, why = conform(doc)
            if conformed is None:
                # one such event would make the server refuse its whole chunk: it stays here
                log.warning("openmetadata: event %d not sent: %s", index, _trim(why or ""))
                outcome.skipped[OPENMETADATA_SCHEMA] = (
                    outcome.skipped.get(OPENMETADATA_SCHEMA, 0) + 1
                )
                continue
            runs.append((index, conformed))
        outcome.docs = [doc for _, doc in runs]
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

    def edge_payloads(
        self, flows: Sequence[DataFlow], graph: LineageGraph, sent: SendOutcome
    ) -> list[dict[str, Any] | None]:
        """The tables OpenMetadata joined for each flow, read back (``tables``):
        their ids and FQNs; None for a flow whose ends it cannot tell (not recorded)."""
        reader = TableReader(self.http, self.cfg.serviceMapping)
        node_of: dict[NodeKey, NodeKey] = {}
        for key, node in graph.datasets.items():
            node_of[key] = key
            for alias in node.aliases:
                node_of.setdefault(alias, key)

        def key_of(namespace: str, name: str) -> NodeKey:
            own = (normalize_namespace(namespace), name)
            return node_of.get(own, own)

        docs = sent.docs  # the RunEvents as ``send`` posted them: what the server resolved
        datasets = sent_datasets(docs, key_of)
        # OpenMetadata writes each event's inputs x outputs on its own, for the event types its
        # filter takes: a flow normalization joins across a run's events is not an edge there
        written = _written_pairs(docs, key_of, self.cfg.eventTypeFilter)
        out: list[dict[str, Any] | None] = []
        for f in flows:
            if (f.source, f.target) not in written:
                out.append(None)
                continue
            pair = reader.edge(
                reader.find_all(datasets.get(f.source, [])),
                reader.find_all(datasets.get(f.target, [])),
            )
            out.append(None if pair is None else _edge_payload(f.source, f.target, *pair))
        unnamed = sum(p is None for p in out)
        if unnamed:
            log.info(
                "openmetadata: %d of %d flow(s) not recorded: their tables cannot be told apart "
                "or were not resolved (never deleted)",
                unnamed,
                len(out),
            )
        return out

    def held_key(self, item: LedgerItem) -> str:
        """An edge is OpenMetadata's (from id, to id): two entries naming the same tables in
        different ways hold the same edge."""
        if item.kind != EDGE:
            return super().held_key(item)
        ends = item.payload.get("from") or {}, item.payload.get("to") or {}
        if all(e.get("id") for e in ends):
            return f"edge|{ends[0]['id']}|{ends[1]['id']}"
        return f"edge|fqn|{ends[0].get('fqn')}|{ends[1].get('fqn')}"  # recorded before ids

    def delete_edge(self, item: LedgerItem) -> Removal:
        """Check the edge, then delete it only if OpenLineage wrote it (``lineageDetails.source``).

        The source-scoped delete (``DELETE /lineage/{type}/{id}/type/OpenLineage``) removes every
        OpenLineage edge into the table, not this one, and the FQN delete removes the edge
        whatever its source: so ``GET /lineage/getLineageEdge/{fromId}/{toId}`` first, then
        ``DELETE /lineage/table/{fromId}/table/{toId}``. Another source: kept; no edge (or no
        table): not found."""
        ends = self._edge_tables(item)
        if ends is None:
            return Removal.NOT_FOUND
        if isinstance(ends, Removal):
            return ends
        src, dst = ends
        response = self.http.request("GET", f"{EDGE_PATH}/{src.id}/{dst.id}", ok=frozenset({404}))
        if response.status_code == 404:
            return Removal.NOT_FOUND
        details = response.json().get("edge") or {}
        if details.get("source") != OPENLINEAGE_SOURCE:
            return Removal.KEPT
        path = f"/api/v1/lineage/{src.type}/{src.id}/{dst.type}/{dst.id}"
        response = self.http.request("DELETE", path, ok=frozenset({404}))
        return Removal.NOT_FOUND if response.status_code == 404 else Removal.REMOVED

    def _edge_tables(self, item: LedgerItem) -> tuple[Table, Table] | Removal | None:
        """The two tables of a recorded edge. An entry recorded before the read-back carries
        FQNs only: they are looked up (None when one is gone), and an edge that a newer entry
        holds by id is left to it."""
        ends = item.payload.get("from") or {}, item.payload.get("to") or {}
        if all(e.get("id") for e in ends):
            return tuple(  # type: ignore[return-value]
                Table(str(e["id"]), str(e.get("fqn") or ""), str(e.get("type") or "table"))
                for e in ends
            )
        if not all(e.get("fqn") for e in ends):
            log.info("openmetadata: an edge recorded without its tables is left alone")
            return Removal.KEPT
        reader = TableReader(self.http, self.cfg.serviceMapping)
        src, dst = reader.table(str(ends[0]["fqn"])), reader.table(str(ends[1]["fqn"]))
        if src is None or dst is None:
            return None
        key = f"edge|{src.id}|{dst.id}"
        if any(self.held_key(i) == key for i in self.ledger.all(EDGE)):
            return Removal.REMOVED  # still held by an entry with ids: only this one goes
        return src, dst

    def delete_job(self, item: LedgerItem) -> None:
        """Nothing to call: OpenMetadata creates no pipeline for an OpenLineage job (it only
        links edges to one that exists), and the job's edges go by ``delete_edge``."""
        return None

    def delete_dataset(self, item: LedgerItem) -> None:
        """Nothing to call: deleting a table entity would delete metadata others own (owners,
        descriptions, tests); only the edges ol-dagster wrote are removed."""
        return None
