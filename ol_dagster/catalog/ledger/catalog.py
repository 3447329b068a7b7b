"""The ``Catalog`` protocol for catalogs that take OpenLineage events and cannot clean by scope.

OpenMetadata and Marquez receive the batch's accepted events through their own OpenLineage
endpoints. What a definition sent is then recorded in the sync ledger (edges with their owner,
jobs, datasets) with the catalog's time, so the cleanup works unchanged: its calls select the
ledger entries last touched before the cutoff, and the backend deletes them through its API.

A parent job known only from a child's parent facet, in a namespace the definition does not own,
is never recorded as the definition's job: the server makes it from the events, and its owner
decides when it goes. A DROP leaves the ledger (and the catalog) through the cleanup's
``drop_datasets`` call, never during the upload.

A backend implements five things: ``send`` (the events, answering per event), ``clock`` (the
server's time), and the three deletes. Everything else (Systems and their properties, dry runs,
counts, removed job names, lineage reads) is here, once.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

import httpx

from ol_dagster.catalog.http import (
    CatalogRefused,
    CatalogUnavailable,
    HttpCatalogClient,
    server_time,
)
from ol_dagster.catalog.ledger.entries import DATASET, EDGE, JOB, Entry, Ledger, LedgerItem
from ol_dagster.catalog.lineage_reads import NodeNotFound, job_node, lineage_of_edges
from ol_dagster.catalog.protocol import (
    CleanupCounts,
    CleanupPermissionDenied,
    DatasetRef,
    FailedRow,
    ObjectType,
    Removal,
    Removed,
    UploadResult,
)
from ol_dagster.catalog.settings import HttpCatalogSettings
from ol_dagster.catalog.systems import owned_jobs, wanted_systems
from ol_dagster.db import open_engine
from ol_dagster.lineage import LineageGraph
from ol_dagster.lineage.graph import DataFlow, NodeKey
from ol_dagster.lineage_state import DatasetState, JobState, LineageState, new_state
from ol_dagster.sync_definition import SyncDefinition

# the settings model of the backend's kind (``OpenMetadataCatalogSettings``...)
CfgT = TypeVar("CfgT", bound=HttpCatalogSettings)


@dataclass(slots=True)
class SendOutcome:
    """What the server said about the events: which failed (index, reason), which datasets it
    could not resolve (dropped rows, by reason: they do not block the cleanup)."""

    failed: list[tuple[int, str]] = field(default_factory=list)
    unresolved: dict[NodeKey, str] = field(default_factory=dict)
    sent: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # events not sent, by reason
    # what the catalog needs beyond a job's OpenLineage name to find it again, merged into its
    # JOB entry (Marquez: the names it holds the job under, ``<parent>.<job>`` for a child)
    job_payload: dict[NodeKey, dict[str, Any]] = field(default_factory=dict)
    # the documents sent, as sent (OpenMetadata: the RunEvents, conformed), for the read-back:
    # each event is parsed and conformed once per upload
    docs: list[dict[str, Any]] = field(default_factory=list)
    # events refused for their content alone (the catalog would refuse them on every run): failed
    # rows that block nothing, the others sync and the cleanup runs
    refused: list[FailedRow] = field(default_factory=list)
    # what the catalog needs to know of a dataset at its cleanup, merged into its DATASET entry
    # (Marquez: which of this definition's jobs wrote it, and when)
    dataset_payload: dict[NodeKey, dict[str, Any]] = field(default_factory=dict)


def node_identity(key: NodeKey) -> str:
    return f"{key[0]}|{key[1]}"


def edge_identity(flow: DataFlow) -> str:
    return f"{flow.scope}|{node_identity(flow.source)}|{node_identity(flow.target)}"


class LedgerCatalog(ABC, Generic[CfgT]):
    """Base of the event-taking HTTP catalogs; ``definition`` scopes the ledger."""

    kind = "ledger"
    # the sync hands it the batch's events (read once, ``sync.batch``), not only the graph
    takes_events = True

    def __init__(
        self,
        name: str,
        cfg: CfgT,
        *,
        store_url: str,
        definition: str,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.definition_name = definition
        self.http = HttpCatalogClient.for_catalog(
            cfg, self.headers(cfg), transport=transport, sleep=sleep
        )
        self._engine = open_engine(store_url)
        self.ledger = Ledger(self._engine, name)

    def close(self) -> None:
        self.http.close()
        self._engine.dispose()

    # -- what a backend provides ----------------------------------------------------------------

    def headers(self, cfg: HttpCatalogSettings) -> dict[str, str]:
        """Auth headers; the secret is read from the environment here, when the catalog opens."""
        return {"Authorization": f"Bearer {cfg.token.resolve()}"} if cfg.token else {}

    # the request whose ``Date`` is the catalog's clock: (path, query parameters)
    clock_call: tuple[str, dict[str, Any]] = ("", {})
    _last_clock: datetime | None = None

    def clock(self) -> datetime:
        """The ``Date`` of ``clock_call``; never earlier than a time this catalog already read,
        so what an upload touches is never older than the cutoff read before it."""
        path, params = self.clock_call
        response = self.http.request("GET", path, params=params or None)
        self.clock_answer(response)
        when = server_time(response)
        if when is None:
            raise CatalogUnavailable(f"GET {path}: the answer has no Date header")
        if self._last_clock is not None and when < self._last_clock:
            when = self._last_clock
        self._last_clock = when
        return when

    def clock_answer(self, response: httpx.Response) -> None:
        """What a backend reads beside the time from its clock's answer (who it is)."""

    @abstractmethod
    def send(self, events: Sequence[bytes]) -> SendOutcome: ...

    # a delete answers what it did (None: removed; ``Removed``: with who owns what it kept, or
    # what it left on purpose); a ``CatalogRefused`` 404 is ``NOT_FOUND``

    @abstractmethod
    def delete_edge(self, item: LedgerItem) -> Removal | Removed | None: ...

    @abstractmethod
    def delete_job(self, item: LedgerItem) -> Removal | Removed | None: ...

    @abstractmethod
    def delete_dataset(self, item: LedgerItem) -> Removal | Removed | None: ...

    def edge_payload(self, source: NodeKey, target: NodeKey) -> dict[str, Any]:
        """The catalog identity of an edge, kept in the ledger for its delete."""
        return {
            "from": {"namespace": source[0], "name": source[1]},
            "to": {"namespace": target[0], "name": target[1]},
        }

    def edge_payloads(
        self, flows: Sequence[DataFlow], graph: LineageGraph, sent: SendOutcome
    ) -> list[dict[str, Any] | None]:
        """The ledger payloads of the flows an accepted upload wrote, in their order; None for a
        flow the catalog cannot name (not recorded). A backend that must read back what the
        server made of the events does it here, in bulk; its read failures fail the upload."""
        return [self.edge_payload(f.source, f.target) for f in flows]

    # -- upload ----------------------------------------------------------------------------------

    def upload(
        self,
        graph: LineageGraph,
        definition: SyncDefinition,
        raw_events: Callable[[], Iterable[bytes]] | None = None,
    ) -> UploadResult:
        result = UploadResult()
        events = list(raw_events()) if raw_events else []
        now = self.clock()
        try:
            outcome = self.send(events)
        except (CatalogUnavailable, CatalogRefused) as exc:
            result.failed.append(FailedRow("events", "*", str(exc)))
            return result
        for index, reason in outcome.failed:
            result.failed.append(FailedRow("events", f"event {index}", reason))
        result.failed.extend(outcome.refused)
        for reason in outcome.unresolved.values():
            result.dropped[reason] = result.dropped.get(reason, 0) + 1
        for reason, count in outcome.skipped.items():
            result.dropped[reason] = result.dropped.get(reason, 0) + count
        if not result.succeeded:
            return result  # nothing is recorded as touched: the cleanup is blocked anyway

        resolved = {k for k in graph.datasets if k not in outcome.unresolved}
        edges = sorted(
            (f for f in graph.data_flows if f.source in resolved and f.target in resolved),
            key=lambda f: (f.scope, f.source, f.target),
        )
        try:
            payloads = self.edge_payloads(edges, graph, outcome)
        except (CatalogUnavailable, CatalogRefused) as exc:
            # the edges just written cannot be named: recording none would leave the entries of
            # the last run stale, and the cleanup would delete edges this batch still writes
            result.failed.append(FailedRow(ObjectType.DATA_FLOWS, "*", f"read back: {exc}"))
            return result

        # a parent job known only from a child's parent facet, in a namespace this definition
        # does not own, is another owner's: the server creates it from the events, and it is
        # never this definition's JOB entry (its cleanup would delete it)
        jobs = owned_jobs(graph, definition)
        self.ledger.ensure_systems(wanted_systems(graph, definition))
        entries: list[LedgerItem] = [
            LedgerItem(
                JOB,
                node_identity(key),
                {"namespace": key[0], "name": key[1], **outcome.job_payload.get(key, {})},
                system=system,
                schema=key[0],
            )
            for key, system in jobs.items()
        ]
        entries += [
            LedgerItem(
                DATASET,
                node_identity(key),
                {"namespace": key[0], "name": key[1], **outcome.dataset_payload.get(key, {})},
                system=graph.datasets[key].system,
            )
            for key in resolved
        ]
        named = [(f, p) for f, p in zip(edges, payloads, strict=True) if p is not None]
        entries += [
            LedgerItem(EDGE, edge_identity(f), p, scope=f.scope, owner=f.owner) for f, p in named
        ]
        # a flow still written whose ends cannot be named this time keeps the entry it had: it is
        # still this definition's, and going stale would delete it
        kept = self.ledger.entries(
            self.definition_name,
            EDGE,
            [(edge_identity(f), None) for f, p in zip(edges, payloads, strict=True) if p is None],
        )
        entries += [e.item for e in kept]
        self.ledger.touch(self.definition_name, entries, now)
        result.touched[ObjectType.PHYSICAL_ENTITIES] = len(jobs) + len(resolved)
        result.touched[ObjectType.DATA_FLOWS] = len(named) + len(kept)
        return result

    # -- cleanup through the ledger ---------------------------------------------------------

    def held_key(self, item: LedgerItem) -> str:
        """What names the catalog object behind a ledger entry: the same object can be held by
        several entries (an edge two jobs write, a dataset two definitions refer to)."""
        if item.kind == EDGE:
            return json.dumps(item.payload, sort_keys=True)
        return f"{item.kind}|{item.identity}"

    def _held_elsewhere(self, entries: list[Entry]) -> set[str]:
        """Objects that a ledger entry other than ``entries`` still holds (another scope, another
        definition): removing the stale entry must not delete what someone still describes."""
        kinds = {e.item.kind for e in entries}
        held = Counter(self.held_key(i) for kind in kinds for i in self.ledger.all(kind))
        held.subtract(self.held_key(e.item) for e in entries)
        return {key for key, count in held.items() if count > 0}

    def _remove(
        self,
        entries: list[Entry],
        delete: Callable[[LedgerItem], Removal | Removed | None],
        dry_run: bool,
        object_type: str,
    ) -> CleanupCounts:
        """Delete the objects behind stale entries; a dry run only counts them.

        An object another entry still holds is not deleted (its entry is forgotten: this one no
        longer holds it) and counts as removed from this definition. A 404 is ``notFound``, never
        removed: the catalog did not have what the ledger named. 403 stops the cleanup; another
        4xx is ``refused`` and the entry stays for the next run.

        The ledger forgets each object's entries right after the catalog answered for it, not
        at the end of the call: a process killed in the call leaves exactly the entries of what
        it did not delete (give or take the one object in flight), so the journal's
        reconciliation (a dry run of the call) counts what the dead call removed, and the next
        cleanup does not meet those objects again as ``notFound``."""
        if dry_run or not entries:
            return CleanupCounts({object_type: len(entries)})
        held = self._held_elsewhere(entries)
        # several stale entries can name one catalog object (two jobs' flows on one pair of
        # tables are one OpenMetadata edge): it is deleted once, and every entry shares the
        # answer; objects in the order of their first entry, as the entries come
        objects: dict[str, list[Entry]] = {}
        for entry in entries:
            objects.setdefault(self.held_key(entry.item), []).append(entry)
        tally: Counter[Removal] = Counter()
        kept_by: Counter[str] = Counter()
        left: Counter[str] = Counter()
        removed: list[Entry] = []
        kept: list[str] = []
        # what another entry still holds is removed from this definition by forgetting alone
        released = [e for key, group in objects.items() if key in held for e in group]
        if released:
            self.ledger.forget([e.id for e in released])
        tally[Removal.REMOVED] += len(released)
        removed += released
        for key, group in objects.items():
            if key in held:
                continue
            try:
                answer = delete(group[0].item) or Removal.REMOVED
            except CatalogRefused as exc:
                if exc.status == 403:
                    raise CleanupPermissionDenied(str(exc)) from None
                answer = Removal.NOT_FOUND if exc.status == 404 else Removal.REFUSED
            said = answer if isinstance(answer, Removed) else Removed(Removal(answer))
            outcome = said.outcome
            tally[outcome] += len(group)
            if outcome is Removal.KEPT:
                kept_by[said.owner or "unknown"] += len(group)
            if said.left:
                left[said.left] += 1
            if said.why:
                kept.append(said.why)
            if outcome is not Removal.REFUSED:
                self.ledger.forget([e.id for e in group])
            if outcome is Removal.REMOVED:
                removed += group
        counts = CleanupCounts({object_type: tally[Removal.REMOVED]})
        counts.outcomes = {
            str(o): {object_type: n} for o, n in tally.items() if o is not Removal.REMOVED and n
        }
        counts.kept_by, counts.left = dict(kept_by), dict(left)
        counts.removed_jobs = sorted(
            f"{e.item.payload['namespace']}.{e.item.payload['name']}"
            for e in removed
            if e.item.kind == JOB
        )
        counts.kept = kept
        return counts

    def cleanup_flows(
        self,
        *,
        namespaces: Sequence[str] = (),
        jobs: Sequence[NodeKey] = (),
        before: datetime,
        dry_run: bool,
    ) -> CleanupCounts:
        stale = self.ledger.stale(
            self.definition_name,
            EDGE,
            before=before,
            namespaces=list(namespaces),
            jobs=[(ns, name) for ns, name in jobs],
        )
        return self._remove(stale, self.delete_edge, dry_run, ObjectType.DATA_FLOWS)

    def cleanup_job_system(
        self,
        system: str,
        *,
        schemas: list[str] | None,
        before: datetime,
        dry_run: bool,
        routines_before: datetime | None = None,  # no routines in these catalogs
    ) -> CleanupCounts:
        stale = self.ledger.stale(
            self.definition_name, JOB, before=before, system=system, schemas=schemas
        )
        counts = self._remove(stale, self.delete_job, dry_run, ObjectType.PHYSICAL_ENTITIES)
        if dry_run:
            counts.removed_jobs = sorted(
                f"{e.item.payload['namespace']}.{e.item.payload['name']}" for e in stale
            )
        return counts

    def cleanup_dataset_system(
        self, system: str, *, before: datetime, dry_run: bool
    ) -> CleanupCounts:
        stale = self.ledger.stale(self.definition_name, DATASET, before=before, system=system)
        return self._remove(stale, self.delete_dataset, dry_run, ObjectType.PHYSICAL_ENTITIES)

    def drop_datasets(self, datasets: Sequence[DatasetRef], *, dry_run: bool) -> CleanupCounts:
        """This definition's DATASET entries of the datasets DROP events named (in the System
        named), removed through ``delete_dataset`` unless another entry still holds the same
        object; a dry run only counts."""
        found = self.ledger.entries(
            self.definition_name,
            DATASET,
            [(node_identity((d.ol_namespace, d.ol_name)), d.system) for d in datasets],
        )
        return self._remove(found, self.delete_dataset, dry_run, ObjectType.PHYSICAL_ENTITIES)

    def count_jobs(self, system: str, *, schemas: list[str] | None) -> int:
        """This definition's JOB entries in a job System (in these schemas; None: all)."""
        return self.ledger.count(self.definition_name, JOB, system=system, schemas=schemas)

    def count_held(
        self, *, namespaces: Sequence[str], dataset_systems: Sequence[str]
    ) -> dict[str, int]:
        """From the ledger: this definition's edges owned by jobs of ``namespaces``, its
        DATASET entries in ``dataset_systems``; no fields (these catalogs' cleanups remove
        none)."""
        name = self.definition_name
        return {
            "dataFlows": self.ledger.count(name, EDGE, namespaces=list(namespaces)),
            "datasets": self.ledger.count(name, DATASET, system_names=list(dataset_systems)),
            "fields": 0,
        }

    def disable_quality_checks(self, jobs: list[str]) -> int:
        return 0  # neither catalog keeps quality checks ol-dagster could disable

    # -- reads ---------------------------------------------------------------------------

    def systems(self) -> list[dict[str, Any]]:
        return self.ledger.systems()

    def job_schemas(self, system: str) -> list[str]:
        return self.ledger.job_schemas(system)

    def lineage(self, node: str, *, depth: int, upstream: bool, downstream: bool) -> dict[str, Any]:
        """What this definition uploaded, read back from the ledger (the catalog's own lineage
        API is the place to see what everyone else uploaded too)."""
        edges: set[tuple[str, str]] = set()
        for item in self.ledger.all(EDGE, self.definition_name):
            src, dst = item.payload["from"], item.payload["to"]
            owner = item.flow_owner
            if owner is None:
                continue
            job = job_node(owner)
            edges.add((f"dataset:{src['namespace']}:{src['name']}", job))
            edges.add((job, f"dataset:{dst['namespace']}:{dst['name']}"))
        known = {n for e in edges for n in e} | {
            f"job:{i.payload['namespace']}:{i.payload['name']}"
            for i in self.ledger.all(JOB, self.definition_name)
        }
        if node not in known:
            raise NodeNotFound(f"{node} is not in what this definition uploaded")
        return lineage_of_edges(node, edges, depth=depth, upstream=upstream, downstream=downstream)

    def export_state(self, definition: SyncDefinition) -> LineageState:
        """What this definition uploaded (jobs, their datasets), for the asset graph."""
        jobs: dict[str, JobState] = {
            f"{i.payload['namespace']}|{i.payload['name']}": {
                "namespace": i.payload["namespace"],
                "name": i.payload["name"],
                "description": None,
                "integration": None,
                "jobType": None,
                "owners": [],
                "inputs": [],
                "outputs": [],
            }
            for i in self.ledger.all(JOB, self.definition_name)
        }
        datasets: dict[str, DatasetState] = {}
        for i in self.ledger.all(DATASET, self.definition_name):
            datasets[i.identity] = {
                "namespace": i.payload["namespace"],
                "name": i.payload["name"],
                "type": "other",
                "system": i.system,
                "description": None,
                "owners": [],
                "fields": [],
            }
        for i in self.ledger.all(EDGE, self.definition_name):
            owner = i.flow_owner
            job = jobs.get(f"{owner.namespace}|{owner.job}") if owner else None
            if job is None:
                continue
            src, dst = i.payload["from"], i.payload["to"]
            for side, end in ((job["inputs"], src), (job["outputs"], dst)):
                pair = [end["namespace"], end["name"]]
                if pair not in side:
                    side.append(pair)
        return new_state(jobs.values(), datasets.values())
