"""OpenMetadata: the batch's RunEvents through its OpenLineage endpoint, stale edges out by id.

Upload: the accepted events are posted to ``POST /api/v1/openlineage/lineage/batch`` as
``{"events": [...]}``, ``chunkSize`` events a request (each given ``batchTimeoutSeconds``), with
the JWT of a user or bot as a bearer token (it needs ``EditLineage`` on tables, and ``Create``
where OpenMetadata creates tables).

* OpenMetadata takes RunEvents only: a JobEvent or DatasetEvent is not sent and is counted as
  dropped (``NOT_A_RUN_EVENT``), never failed. Of the RunEvents, the server processes only the
  types its ``eventTypeFilter`` allows (COMPLETE by default) and skips events without inputs or
  outputs; skipped events are not failures either.
* Each RunEvent is first made to conform to OpenMetadata's own schema (``events.conform``): the
  server refuses the whole request, with a 400, for one event that breaks it. An event that
  cannot be made to conform is not sent: it is a dropped row (``OPENMETADATA_SCHEMA``).
* The answers of both server generations are read per event (``answers``). 401, 403, 5xx (after
  retries) fail the whole upload.
* A request is never sent again as it was once it may be running on the server (a timeout after
  it was sent, ``batchTimeoutSeconds``; a proxy's 504): OpenMetadata answers only when it has
  resolved every event, one after another, and may still be writing them. The events it already
  wrote in full are read back (``reads.unwritten``) and only the others are sent again, in two
  halves, each handled the same way; one event that still has no answer alone is a failed row
  (the batch is tried again later). A request too large for the server or a proxy in front
  (413) is halved the same way; one event too large alone is a failed row. Both rules are every
  HTTP catalog's (``catalog.bounded``); 429, 500, 502 and 503 are retried as for any request.

Whose edges are whose (``owners``): before an upload posts anything, the pairs it writes for the
first time are read (``reads.read_before``); an edge someone else had on a pair (a person, a
connector, another OpenLineage producer) is recorded as theirs, for the whole catalog, and is
never deleted, although the upload overwrites it (OpenMetadata keeps one edge per pair, the last
writer's).

Cleanup, through the sync ledger, with what OpenMetadata really holds:

* After an accepted upload the edges are read back (``tables``): which tables (or containers)
  the server joined for each flow, found the way it finds them. The ledger records their ids,
  FQNs and types, and whose the edge is. A flow whose ends cannot be told is not recorded
  (ol-dagster cannot name it, so it never deletes it), except that a flow recorded before and
  still written keeps its entry. A failed read fails the upload.
* A stale edge recorded as someone else's is kept without a call. Any other is checked first:
  ``GET /api/v1/lineage/getLineageEdge/{fromId}/{toId}``; it is deleted
  (``DELETE /api/v1/lineage/{type}/{fromId}/{type}/{toId}``) only when its last writer
  (``updatedBy``) is ol-dagster's own user and its ``source`` is ``OpenLineage``; otherwise it is
  kept, and the report says whose it is (``keptBy``). No edge (or no entity): ``notFound``.
* An edge that another job or definition still writes is kept. Tables and containers are never
  deleted (others own them). A pipeline OpenMetadata 2.0 made for a job (``<pipelineService>.
  <namespace>-<job>``) is left too: the server records no writer for it (it is created with none)
  and any producer of a job of that name shares it; the report counts it (``left``).

The clock is the ``Date`` of ``GET /api/v1/users/loggedInUser``: an authenticated read
(``/api/v1/system/version`` is among the paths OpenMetadata's JwtFilter lets through without a
token, so it would prove nothing), whose body names ol-dagster's own user.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx

from ol_dagster.catalog.bounded import delete, post_bounded
from ol_dagster.catalog.http import STILL_RUNNING, CatalogUnavailable, server_time
from ol_dagster.catalog.ledger.catalog import LedgerCatalog, SendOutcome
from ol_dagster.catalog.ledger.entries import EDGE, LedgerItem
from ol_dagster.catalog.openmetadata.answers import BATCH, answer_of, read_answer, refusal, trim
from ol_dagster.catalog.openmetadata.events import conform
from ol_dagster.catalog.openmetadata.owners import (
    CATALOG_WIDE,
    FOREIGN,
    Before,
    Owner,
    decide,
    held_pairs,
    ours,
    pair_key,
    writer,
)
from ol_dagster.catalog.openmetadata.reads import edge_details, read_before, unwritten
from ol_dagster.catalog.openmetadata.settings import OpenMetadataCatalogSettings
from ol_dagster.catalog.openmetadata.tables import (
    Table,
    TableReader,
    build_fqn,
    sent_datasets,
    service_for,  # noqa: F401  (OpenMetadata's namespace mapping rule, used by ``check``)
)
from ol_dagster.catalog.protocol import Removal, Removed
from ol_dagster.lineage import LineageGraph
from ol_dagster.lineage.graph import DataFlow, NodeKey
from ol_dagster.lineage.naming import normalize_namespace

log = logging.getLogger(__name__)

__all__ = ["BATCH", "CLOCK", "VERSION", "OPENMETADATA_SCHEMA", "OpenMetadataCatalog"]

CLOCK = "/api/v1/users/loggedInUser"
VERSION = "/api/v1/system/version"  # answers without a token (JwtFilter.EXCLUDED_ENDPOINTS)
PIPELINES = "/api/v1/pipelines/name/"
NOT_A_RUN_EVENT = "NOT_A_RUN_EVENT"
OPENMETADATA_SCHEMA = "OPENMETADATA_SCHEMA"  # a RunEvent that cannot be made to conform
LEFT_PIPELINES = "pipelines"


def is_run_event(event: Any) -> bool:
    if not isinstance(event, dict) or not isinstance(event.get("run"), dict):
        return False
    kind = str(event.get("schemaURL") or "").rsplit("/", 1)[-1]
    return kind not in ("JobEvent", "DatasetEvent")


def pipeline_name(namespace: str, name: str) -> str:
    """The name OpenMetadata 2.0 gave the pipeline it made for a job
    (``OpenLineageEntityResolver.buildPipelineName``, at
    ``2b0fe69050d547506724857ed20eacacf997f97a``)."""
    return f"{re.sub(r'[^a-zA-Z0-9_-]', '_', namespace)}-{name}" if namespace else name


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


def _end(key: NodeKey, entity: Table) -> dict[str, Any]:
    return {
        "namespace": key[0],
        "name": key[1],
        "type": entity.type,
        "id": entity.id,
        "fqn": entity.fqn,
    }


class OpenMetadataCatalog(LedgerCatalog[OpenMetadataCatalogSettings]):
    kind = "openmetadata"

    clock_call = (CLOCK, {})  # an authenticated read; its ``Date`` is the clock

    def __init__(
        self,
        name: str,
        cfg: OpenMetadataCatalogSettings,
        *,
        store_url: str,
        definition: str,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        super().__init__(
            name, cfg, store_url=store_url, definition=definition, transport=transport, sleep=sleep
        )
        self._me: str | None = None
        self._reader: TableReader | None = None  # the reads made before the upload posted
        self._before: Before | None = None
        self._last_answer: datetime | None = None  # the Date of the last batch answer

    def clock_answer(self, response: httpx.Response) -> None:
        """``loggedInUser`` names the user every write of this client is stamped with."""
        try:
            body = response.json()
        except ValueError:
            return
        if isinstance(body, dict) and isinstance(body.get("name"), str):
            self._me = body["name"]

    @property
    def me(self) -> str:
        """ol-dagster's user, as OpenMetadata writes it in ``updatedBy``."""
        if self._me is None:
            self.clock()
        return self._me or ""

    def _now(self) -> datetime:
        """The server's time of its last answer (the clock's, or a batch's)."""
        return max(
            (t for t in (self._last_clock, self._last_answer) if t is not None),
            default=datetime.now(UTC),
        )

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
                log.warning("openmetadata: event %d not sent: %s", index, trim(why or ""))
                outcome.skipped[OPENMETADATA_SCHEMA] = (
                    outcome.skipped.get(OPENMETADATA_SCHEMA, 0) + 1
                )
                continue
            runs.append((index, conformed))
        outcome.docs = [doc for _, doc in runs]
        self._reader = TableReader(self.http, self.cfg.serviceMapping)
        held = held_pairs(self.held_key(i) for i in self.ledger.all(EDGE))
        self._before = read_before(self._reader, outcome.docs, self.cfg.eventTypeFilter, held)
        size = self.cfg.chunkSize
        for start in range(0, len(runs), size):
            self._post(runs[start : start + size], outcome)
        outcome.failed.sort()
        return outcome

    def _post(self, chunk: list[tuple[int, dict[str, Any]]], outcome: SendOutcome) -> None:
        """One request of ``chunk``, bounded (``catalog.bounded``): too large, or without an
        answer in time, it is halved; what a request without an answer wrote is read back and
        not sent again. What it wrote is what was written since the server's last answer before
        it (an edge an earlier request of this upload wrote is not taken for this one's)."""
        since = [0]

        def post(part: list[tuple[int, dict[str, Any]]]) -> None:
            since[0] = int(self._now().timestamp()) * 1000
            response = self.http.request(
                "POST",
                BATCH,
                json={"events": [doc for _, doc in part]},
                ok=frozenset({400}),
                resend_after_timeout=False,
                lost=STILL_RUNNING,
                timeout=self.cfg.batchTimeoutSeconds,
            )
            self._last_answer = server_time(response) or self._last_answer
            answer = answer_of(response)
            if answer is None:
                if response.status_code == 400:
                    raise refusal(response)
                raise CatalogUnavailable(
                    f"POST {BATCH}: HTTP {response.status_code} without an OpenLineage answer"
                )
            read_answer(answer, [index for index, _ in part], outcome)

        def written(part: list[tuple[int, dict[str, Any]]]) -> list[bool]:
            reader = TableReader(self.http, self.cfg.serviceMapping)
            docs = [doc for _, doc in part]
            rest = set(unwritten(reader, docs, self.cfg.eventTypeFilter, self.me, since[0]))
            if rest:
                log.warning(
                    "openmetadata: no answer in time for %d event(s); %d not written yet",
                    len(part),
                    len(rest),
                )
            return [i not in rest for i in range(len(part))]

        sent = post_bounded(chunk, post, read_back=written, pause=self.http.pause, max_lost=None)
        outcome.sent += len(sent.read_back) + sum(len(part) for part, _ in sent.answers)
        outcome.failed += [(index, why) for (index, _), why in sent.failed]

    # -- what was written, and whose it is ------------------------------------------------------

    def edge_payloads(
        self, flows: Sequence[DataFlow], graph: LineageGraph, sent: SendOutcome
    ) -> list[dict[str, Any] | None]:
        """The tables (or containers) OpenMetadata joined for each flow, read back (``tables``):
        their ids, FQNs and types, and whose the edge is (``owners.decide``); None for a flow
        whose ends it cannot tell (not recorded)."""
        reader = (
            self._reader.carry()
            if self._reader is not None
            else TableReader(self.http, self.cfg.serviceMapping)
        )
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
        owners = _Owners(self)
        out: list[dict[str, Any] | None] = []
        for f in flows:
            if (f.source, f.target) not in written:
                out.append(None)
                continue
            pair = reader.edge(
                reader.find_all(datasets.get(f.source, [])),
                reader.find_all(datasets.get(f.target, [])),
            )
            if pair is None:
                out.append(None)
                continue
            src, dst = pair
            payload = {"from": _end(f.source, src), "to": _end(f.target, dst)}
            payload["owner"] = owners.of(src, dst).payload()
            out.append(payload)
        owners.save()
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
            return pair_key(str(ends[0]["id"]), str(ends[1]["id"]))
        return f"edge|fqn|{ends[0].get('fqn')}|{ends[1].get('fqn')}"  # recorded before ids

    def foreign(self, src_id: str, dst_id: str) -> Owner | None:
        """The catalog-wide record of someone else's edge on this pair, if there is one."""
        found = self.ledger.entries(CATALOG_WIDE, FOREIGN, [(pair_key(src_id, dst_id), None)])
        return Owner.read(found[0].item.payload) if found else None

    # -- deletes -------------------------------------------------------------------------------

    def delete_edge(self, item: LedgerItem) -> Removal | Removed:
        """Delete the edge only if OpenMetadata says ol-dagster wrote it last: ``updatedBy`` is
        its user and ``source`` OpenLineage. An edge recorded as someone else's is kept without
        a call; one another writer wrote since is kept; no edge (or no entity): not found.

        Neither of the server's other deletes fits: the FQN delete removes the edge whatever
        wrote it, the source-scoped one (``/lineage/{type}/{id}/type/OpenLineage``) every
        OpenLineage edge into the entity, whoever sent it."""
        ends = self._edge_tables(item)
        if ends is None:
            return Removal.NOT_FOUND
        if isinstance(ends, Removal):
            return ends
        src, dst = ends
        recorded = Owner.read(item.payload.get("owner"))
        if recorded is not None and not recorded.ours:
            return Removed(Removal.KEPT, owner=recorded.by)
        other = self.foreign(src.id, dst.id)
        if other is not None:
            return Removed(Removal.KEPT, owner=other.by)
        details = edge_details(self.http, src.id, dst.id)
        if details is None:
            return Removal.NOT_FOUND
        if not ours(details, self.me):
            return Removed(Removal.KEPT, owner=writer(details))
        return delete(self.http, f"/api/v1/lineage/{src.type}/{src.id}/{dst.type}/{dst.id}")

    def _edge_tables(self, item: LedgerItem) -> tuple[Table, Table] | Removal | None:
        """The two ends of a recorded edge. An entry recorded before the read-back carries
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
        key = pair_key(src.id, dst.id)
        if any(self.held_key(i) == key for i in self.ledger.all(EDGE)):
            return Removal.REMOVED  # still held by an entry with ids: only this one goes
        return src, dst

    def delete_job(self, item: LedgerItem) -> Removed | None:
        """Nothing is deleted for a job: its edges go by ``delete_edge``. OpenMetadata 2.1 makes
        no pipeline for an OpenLineage job; 2.0 made one, ``<pipelineService>.<namespace>-<job>``
        (``OpenLineageEntityResolver.createPipeline``), with no writer recorded and shared by any
        producer of a job of that name: it is left, and counted (``left``)."""
        ns, name = str(item.payload.get("namespace") or ""), str(item.payload.get("name") or "")
        fqn = build_fqn(self.cfg.pipelineService, pipeline_name(ns, name))
        response = self.http.request("GET", PIPELINES + quote(fqn, safe=""), ok=frozenset({404}))
        return (
            Removed(Removal.REMOVED, left=LEFT_PIPELINES) if response.status_code == 200 else None
        )

    def delete_dataset(self, item: LedgerItem) -> None:
        """Nothing to call: deleting a table entity would delete metadata others own (owners,
        descriptions, tests); only the edges ol-dagster wrote are removed."""
        return None


class _Owners:
    """Whose each pair of one upload is: what the ledger already says of it, the catalog-wide
    records of others' edges, and what was read before the upload (``owners.decide``)."""

    def __init__(self, catalog: OpenMetadataCatalog) -> None:
        self.catalog = catalog
        self.me = catalog.me
        self.before = catalog._before
        self.held: dict[str, Owner] = {}
        for item in catalog.ledger.all(EDGE):
            owner = Owner.read(item.payload.get("owner"))
            if owner is not None:
                self.held.setdefault(catalog.held_key(item), owner)
        self.records: dict[str, dict[str, Any]] = {
            i.identity: i.payload for i in catalog.ledger.all(FOREIGN, CATALOG_WIDE)
        }
        self.keep: dict[str, dict[str, Any]] = {}
        self.drop: set[str] = set()

    def of(self, src: Table, dst: Table) -> Owner:
        key = pair_key(src.id, dst.id)
        known, details = (
            self.before.edge(src.id, dst.id, src.fqn, dst.fqn) if self.before else (False, None)
        )
        owner, record = decide(
            self.me,
            held=self.held.get(key),
            foreign=Owner.read(self.records.get(key)),
            known=known,
            details=details,
        )
        if record and not owner.ours:
            self.keep[key] = {**owner.payload(), "from": src.fqn, "to": dst.fqn}
        elif not record and key in self.records:
            self.drop.add(key)
        return owner

    def save(self) -> None:
        ledger = self.catalog.ledger
        if self.keep:
            items = [LedgerItem(FOREIGN, key, payload) for key, payload in self.keep.items()]
            ledger.touch(CATALOG_WIDE, items, self.catalog._now())
        if self.drop:
            gone = ledger.entries(CATALOG_WIDE, FOREIGN, [(k, None) for k in self.drop])
            ledger.forget([e.id for e in gone])
