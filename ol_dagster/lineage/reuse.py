"""Normalize only what changed: a job whose events say what they said last time is reused.

A nightly snapshot mostly repeats the one before under new run ids and times. Each event carries
a content digest (``openlineage.run_facts``: what it says about the lineage, without its run
facts); a job's *fingerprint* is its events' content digests in the order normalizing combines
them (runs by their last event time, each run's events by time). A job whose fingerprint is the
one it had in the definition's last kept graph keeps that graph's part of it: its description,
owners, source code location, SQL (routine) and field flows. The batch is still normalized as
one, but such a job's events go in with that content taken out (``run_facts_only``): so its
run facts (metrics, last run, quality results), its data flows and orchestration flows, and the
datasets as its events describe them are what they are in this batch, in the order the whole
batch gives them. The field flows kept are then resolved against this batch's datasets, as
normalizing resolves its own.

The result is the graph normalizing every event gives (the tests compare catalogs fed both
ways). Where that could not be told from the digests, nothing is reused: a graph naming
symlinks (an alias changes the keys the kept flows name), a graph with events it skipped, a
job whose kept part has dangling flows, an event without a content digest (stored before
content digests, or with dataset-level column lineage), and runs continued from earlier batches.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import orjson

from ol_dagster.lineage.graph import FieldFlow, LineageGraph, NodeKey
from ol_dagster.lineage.normalize import (
    Describers,
    normalize,
    normalize_run_facts,
    resolve_field_flows,
)
from ol_dagster.lineage.unread_flows import HeldFlows, KeptAndBuilt, UnreadFlows
from ol_dagster.openlineage.run_facts import run_facts_only

PARTS_FORMAT = 2


class Content(Protocol):
    """An event as the store lists it for grouping (``store.graphs.EventContent``)."""

    @property
    def run_id(self) -> str | None: ...
    @property
    def job_namespace(self) -> str | None: ...
    @property
    def job_name(self) -> str | None: ...
    @property
    def event_time(self) -> datetime: ...
    @property
    def content(self) -> bytes | None: ...
    @property
    def position(self) -> int: ...


@dataclass(slots=True)
class JobContents:
    """The batch's jobs (those its events describe) and the fingerprints of those that have
    one (every event of the job with a content digest)."""

    jobs: list[NodeKey | None]  # each event's job, in order (None: a DatasetEvent)
    positions: list[int] = field(default_factory=list)  # each event's position in its batch
    fingerprints: dict[NodeKey, bytes] = field(default_factory=dict)
    # the jobs of all runs in the order normalizing takes them: which describes a dataset last
    order: bytes = b""

    @property
    def count(self) -> int:
        return len({j for j in self.jobs if j is not None})

    @property
    def dataset_events(self) -> bool:
        return None in self.jobs


def job_contents(rows: Sequence[Content]) -> JobContents:
    """Each job's fingerprint: its runs ordered as normalizing orders them (by their last event
    time, then by first appearance), each run's content digests in time order."""
    jobs: list[NodeKey | None] = []
    runs: dict[object, list[tuple[datetime, int, bytes | None]]] = {}
    run_job: dict[object, NodeKey] = {}
    for position, row in enumerate(rows):
        if row.job_namespace is None or row.job_name is None:
            jobs.append(None)
            continue
        job = (row.job_namespace, row.job_name)
        jobs.append(job)
        key: object = (row.run_id, job) if row.run_id is not None else position
        runs.setdefault(key, []).append((row.event_time, position, row.content))
        run_job[key] = job
    unknown: set[NodeKey] = set()
    ordered: dict[NodeKey, list[tuple[datetime, int, list[bytes]]]] = {}
    for key, events in runs.items():
        job = run_job[key]
        if any(content is None for _, _, content in events):
            unknown.add(job)
            continue
        events.sort(key=lambda e: (e[0], e[1]))
        last = max(t for t, _, _ in events)
        first = min(p for _, p, _ in events)
        run_events: list[bytes] = [c for _, _, c in events]  # type: ignore[misc]
        ordered.setdefault(job, []).append((last, first, run_events))
    out = JobContents(jobs, [row.position for row in rows])
    timeline = sorted((last, first, job) for job, rs in ordered.items() for last, first, _ in rs)
    h = hashlib.blake2b(digest_size=16)
    for _, _, (ns, name) in timeline:
        h.update(orjson.dumps([ns, name]))
    out.order = h.digest()
    for job, job_runs in ordered.items():
        if job in unknown:
            continue
        job_runs.sort(key=lambda r: (r[0], r[1]))
        h = hashlib.blake2b(digest_size=16)
        for _, _, contents in job_runs:
            h.update(b"r%d" % len(contents))
            for content in contents:
                h.update(content)
        out.fingerprints[job] = h.digest()
    return out


def parts_of(
    contents: JobContents, rules: bytes, describers: Describers, normalized: int, reused: int
) -> bytes:
    """What a graph is kept with for the next batch (``ol_batch_graphs.parts``)."""
    datasets = describer_digests(describers)
    return orjson.dumps(
        {
            "format": PARTS_FORMAT,
            "rules": rules.hex(),
            "jobs": [[ns, name, fp.hex()] for (ns, name), fp in contents.fingerprints.items()],
            "datasets": [[ns, name, d.hex()] for (ns, name), d in datasets.items()],
            "order": contents.order.hex(),
            "datasetEvents": contents.dataset_events,
            "normalized": normalized,
            "reused": reused,
        }
    )


def counts_of(parts: bytes | None) -> tuple[int, int] | None:
    """(normalized, reused) jobs as ``parts_of`` recorded them."""
    if parts is None:
        return None
    try:
        kept = orjson.loads(parts)
        return int(kept["normalized"]), int(kept["reused"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class Reuse:
    jobs: set[NodeKey]
    # every job and dataset as the earlier graph has them: the same jobs, no DatasetEvent on
    # either side, and the jobs' runs in the same order (so each dataset is described last by
    # the same job)
    whole: bool


def kept_parts(parts: bytes) -> dict[str, Any] | None:
    """The parts an earlier graph was kept with (``parts_of``), for ``reusable``; None when they
    are not of this format."""
    try:
        kept = orjson.loads(parts)
    except orjson.JSONDecodeError:
        return None
    return kept if type(kept) is dict and kept.get("format") == PARTS_FORMAT else None


def reusable(
    contents: JobContents, kept: dict[str, Any] | None, earlier: LineageGraph, rules: bytes
) -> Reuse:
    """The jobs whose part of the earlier graph (kept with ``kept``) this batch may take as it
    is."""
    nothing = Reuse(set(), whole=False)
    if kept is None:
        return nothing
    if kept.get("rules") != rules.hex() or earlier.skipped_events or _aliased(earlier):
        return nothing
    before = _fingerprints(kept)
    dangling = {d.job for d in earlier.dangling}
    reuse: set[NodeKey] = set()
    for job, fp in contents.fingerprints.items():
        node = earlier.jobs.get(job)
        if (
            before.get(job) == fp.hex()
            and node is not None
            and not node.referenced_only
            and job not in dangling
        ):
            reuse.add(job)
    described = {k for k, j in earlier.jobs.items() if not j.referenced_only}
    whole = reuse == described and len(reuse) == contents.count and _same_runs(contents, kept)
    return Reuse(reuse, whole)


def _fingerprints(kept: dict[str, Any]) -> dict[NodeKey, str]:
    return {(ns, name): fp for ns, name, fp in kept.get("jobs", [])}


def _same_runs(contents: JobContents, kept: dict[str, Any]) -> bool:
    """What a whole reuse needs besides the same jobs: no DatasetEvent on either side, and the
    jobs' runs in the same order (so each dataset is described last by the same job)."""
    return (
        not contents.dataset_events
        and kept.get("datasetEvents") is False
        and kept.get("order") == contents.order.hex()
    )


def _aliased(graph: LineageGraph) -> bool:
    # every alias normalizing learns lands on a dataset named under it (``_Builder.dataset``)
    return any(d.aliases for d in graph.datasets.values())


def describer_digests(describers: Describers) -> dict[NodeKey, bytes]:
    """Each dataset's describers (the job of each run naming it, in the order normalizing takes
    the runs) as a digest: with every describer reused, the same digest is the same dataset."""
    out: dict[NodeKey, bytes] = {}
    for key, jobs in describers.items():
        h = hashlib.blake2b(digest_size=12)
        for ns, name in jobs:
            h.update(orjson.dumps([ns, name]))
        out[key] = h.digest()
    return out


def build_reusing(
    source: Callable[[], Iterable[bytes]],
    contents: JobContents,
    reuse: set[NodeKey],
    earlier: LineageGraph,
    earlier_parts: bytes,
    dataset_systems: list[tuple[str, str]],
    source_at: Callable[[list[int]], Iterable[bytes]],
) -> tuple[LineageGraph, Describers, set[NodeKey]] | None:
    """The batch's graph with the jobs of ``reuse`` taken from ``earlier`` (and their describers
    of datasets), and the jobs whose field flows are ``earlier``'s as they were (what packing
    it over ``earlier`` leaves to the earlier bytes); None when it cannot be told equal to
    normalizing every event (the caller then does). Every event is read for its run facts
    (``normalize_run_facts``); only the events of the other jobs, and of reused jobs naming a
    dataset that is not as it was, are normalized, read again by their index in the listing
    (``source_at``: a tenth of the batch when a hundredth of its jobs changed)."""
    if contents.dataset_events:
        return None
    describers: Describers = {}
    read = [0]
    runs = normalize_run_facts(_counted(source(), read), describers=describers)
    if runs.skipped_events:
        return None
    if read[0] != len(contents.jobs):
        raise ValueError(f"{read[0]} events read, {len(contents.jobs)} listed")
    before = _kept_digests(earlier_parts)
    digests = describer_digests(describers)
    # a dataset some other job names, or named by other runs or in another order than last time
    fresh = {
        key
        for key, jobs in describers.items()
        if before.get(key) != digests[key] or any(j not in reuse for j in jobs)
    }
    normalized = {j for j in contents.jobs if j is not None and j not in reuse}
    described = normalized | {j for key in fresh for j in describers[key]}
    pending: list[FieldFlow] = []
    wanted = [i for i, job in enumerate(contents.jobs) if job in described]
    part = normalize(
        _events(source_at(wanted), [contents.jobs[i] for i in wanted], reuse),
        dataset_systems=dataset_systems,
        pending=pending,
    )
    if part.skipped_events or _aliased(part):
        return None
    graph = LineageGraph(
        data_flows=runs.data_flows,
        orchestration_flows=runs.orchestration_flows,
        quality_checks=runs.quality_checks,
        described_jobs=runs.described_jobs,
        completed_jobs=runs.completed_jobs,
    )
    for key, ran in runs.jobs.items():
        if key in reuse:
            node = graph.jobs[key] = earlier.jobs[key]
            node.metrics = ran.metrics
            routine = earlier.routines.get(key)
            if routine is not None:
                graph.routines[key] = routine
        else:
            graph.jobs[key] = part.jobs.get(key, ran)
            routine = part.routines.get(key)
            if routine is not None:
                graph.routines[key] = routine
    for key in describers:
        dataset = part.datasets.get(key) if key in fresh else earlier.datasets.get(key)
        if dataset is None:
            return None
        graph.datasets[key] = dataset
    if not _lineage_fields_in_order(
        graph, fresh, lambda: [*pending, *earlier.field_flows_of(reuse)], earlier
    ):
        return None
    # a kept flow between datasets described as they were, with a schema, resolves as it did:
    # the reused jobs with every flow so are kept as they are, without building their flows
    # (150,000 at 10,000 jobs); the others' are resolved again, with the new jobs' flows
    settled = {k for k, d in graph.datasets.items() if d.has_schema and k not in fresh}
    settled = {k for k in earlier.datasets if k in settled}
    reused = {k for k in earlier.jobs if k in reuse}
    flows = _flows_held(earlier)
    checked = flows.jobs_with_end_outside(settled) & reused
    graph.field_flows = set()
    dangling = len(graph.dangling)
    resolve_field_flows(graph, [*pending, *flows.read(checked)])
    # a kept flow checked again is added as it was unless it dangles now
    changed = {f.job for f in pending} | {d.job for d in graph.dangling[dangling:]}
    graph.read_later(KeptAndBuilt(flows.restricted(reused - checked), graph.field_flows))
    return graph, describers, {k for k in reused if k not in changed}


def _flows_held(earlier: LineageGraph) -> UnreadFlows | HeldFlows:
    """The earlier graph's field flows, held unread as ``unpack`` left them, or as built."""
    unread = earlier.held_field_flows()
    return unread if isinstance(unread, UnreadFlows) else HeldFlows(earlier.field_flows)


def unchanged_jobs(
    graph: LineageGraph, earlier: LineageGraph, same: Collection[NodeKey]
) -> frozenset[NodeKey]:
    """Of the jobs ``same`` (whose field flows ``graph`` took from ``earlier`` as they were:
    ``build_reusing``), those whose every other part is ``earlier``'s too: the same job and
    routine (the very objects reused), the same data flows and the same parents (roots
    included). What an upload hashes of such a job is then what it hashed for ``earlier``, but
    for the catalog identities around it, which the upload compares itself."""
    moved = {f.job for f in graph.data_flows ^ earlier.data_flows}
    moved.update(o.child for o in graph.orchestration_flows ^ earlier.orchestration_flows)
    jobs, routines = graph.jobs, graph.routines
    then, routines_then = earlier.jobs, earlier.routines
    return frozenset(
        k
        for k in same
        if k not in moved
        and (job := jobs.get(k)) is not None
        and job is then.get(k)
        and routines.get(k) is routines_then.get(k)
    )


def _lineage_fields_in_order(
    graph: LineageGraph,
    fresh: set[NodeKey],
    flows_now: Callable[[], list[FieldFlow]],
    earlier: LineageGraph,
) -> bool:
    """A dataset without a schema has the fields field flows name, in the order normalizing
    resolves them (the runs' order), which flows kept from the earlier graph do not tell. Such
    a dataset keeps its earlier fields when one job names them with the same flows as then;
    else it has them again from the flows, and False when their order may then differ (more
    than one): the caller normalizes every job."""
    schemaless = {k for k, d in graph.datasets.items() if not d.has_schema}
    if not schemaless:
        return True
    flows = flows_now()  # every kept flow: listed only when a dataset has no schema
    now, before = _naming(flows, schemaless), _naming(earlier.field_flows, schemaless)
    again: list[NodeKey] = []
    for key in schemaless:
        named = now.get(key, set())
        if key in fresh or named != before.get(key, set()) or len({f.job for f in named}) > 1:
            graph.datasets[key].fields = {}
            again.append(key)
    names: dict[NodeKey, set[str]] = {}
    for f in flows:
        for end in (f.source, f.target):
            if end[:2] in again:
                names.setdefault(end[:2], set()).add(end[2])
    return all(len(fields) < 2 for fields in names.values())


def _naming(flows: Iterable[FieldFlow], datasets: set[NodeKey]) -> dict[NodeKey, set[FieldFlow]]:
    out: dict[NodeKey, set[FieldFlow]] = {}
    for f in flows:
        for end in (f.source[:2], f.target[:2]):
            if end in datasets:
                out.setdefault(end, set()).add(f)
    return out


def build_whole(
    raw_events: Iterable[bytes], earlier: LineageGraph
) -> tuple[LineageGraph, Describers] | None:
    """The earlier graph with this batch's run facts (``Reuse.whole``): its events normalized
    down to their runs (``normalize_run_facts``), every description taken from ``earlier``."""
    describers: Describers = {}
    runs = normalize_run_facts(raw_events, describers=describers)
    if runs.skipped_events or runs.data_flows != earlier.data_flows:
        return None
    if runs.orchestration_flows != earlier.orchestration_flows:
        return None
    for key, node in earlier.jobs.items():
        if not node.referenced_only:
            ran = runs.jobs.get(key)
            if ran is None:
                return None
            node.metrics = ran.metrics
    earlier.quality_checks = runs.quality_checks
    earlier.described_jobs = runs.described_jobs
    earlier.completed_jobs = runs.completed_jobs
    return earlier, describers


def _counted(raw_events: Iterable[bytes], read: list[int]) -> Iterator[bytes]:
    for raw in raw_events:
        read[0] += 1
        yield raw


def _events(
    raw_events: Iterable[bytes], jobs: list[NodeKey | None], reuse: set[NodeKey]
) -> Iterator[bytes]:
    """The events read of ``jobs`` (one each), those of reused jobs without their content."""
    # strict: events read that are not the ones listed raise ``ValueError`` (the caller then
    # normalizes every event)
    for job, raw in zip(jobs, raw_events, strict=True):
        yield run_facts_only(raw) if job in reuse else raw


def _kept_digests(parts: bytes) -> dict[NodeKey, bytes]:
    try:
        rows = orjson.loads(parts).get("datasets") or []
        return {(ns, name): bytes.fromhex(digest) for ns, name, digest in rows}
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
        return {}
