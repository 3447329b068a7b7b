"""A batch's graph, normalized once per sync: built by ``lineage_graph``, loaded by the upload.

What a batch is judged by (``graph_inputs``) is its own events and the earlier parts of its runs
kept in earlier batches. The ``lineage_graph`` step normalizes exactly those events and stores the
graph, packed, in the event store with the name of what it was built from (``GraphInputs.key``:
the events' digests in order, the definition's dataset System rules, the normalizer's code); the
upload step names its inputs again under the sync lock and loads the stored graph only when the
names agree. Otherwise (a store synced by an older ol-dagster, an upgrade in between, an earlier
batch purged meanwhile, a person re-materializing the upload alone) it normalizes, as before.
Naming the inputs reads only the events' digests (``ol_events.digest``), never the events; when
both steps run in one process (every sync job does), the upload step takes the names the graph
step read, once a row per earlier batch shows that none of the events they name changed
(``EventStore.earlier_batches_mark``): a sync reads its inputs' names once.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

from ol_dagster.catalog.systems import dataset_system_rules
from ol_dagster.lineage import LineageGraph, normalize
from ol_dagster.lineage.graph import NodeKey
from ol_dagster.lineage.normalize import Describers
from ol_dagster.lineage.packed import (
    FORMAT,
    PackedGraphError,
    lineage_part,
    pack,
    unpack,
    with_run_facts,
)
from ol_dagster.lineage.reuse import (
    JobContents,
    Reuse,
    build_reusing,
    build_whole,
    counts_of,
    job_contents,
    kept_parts,
    parts_of,
    reusable,
    unchanged_jobs,
)
from ol_dagster.settings import SnapshotMode, SyncDefinition
from ol_dagster.store import BatchRecord, EventStore
from ol_dagster.sync.upload import build_graph

log = logging.getLogger(__name__)

# the code a graph depends on besides its events and rules: any change to it builds anew
_NORMALIZER_PACKAGES = ("lineage", "openlineage")


@functools.cache
def normalizer_digest() -> bytes:
    """A digest of normalization's source (``ol_dagster/lineage``, ``ol_dagster/openlineage``):
    a graph stored by another version of it is never taken for this one's."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.blake2b(digest_size=16)
    for package in _NORMALIZER_PACKAGES:
        for path in sorted((root / package).glob("*.py")):
            h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.digest()


@dataclass(frozen=True, slots=True)
class GraphInputs:
    """The events a batch is judged by, named without being read: the ids of the earlier parts
    of its runs (in arrival order, each distinct event once) and the batch's own events."""

    store: EventStore
    batch_id: int
    earlier: list[int]
    count: int  # events in all, earlier ones included
    key: bytes  # what a graph of these events, these rules and this normalizer is stored under
    # what these names were read against: the earlier batches' mark and the rules' digest
    read_against: tuple[tuple[int, int, int], bytes] = ((0, 0, 0), b"")

    def events(self) -> Iterator[bytes]:
        yield from self.store.events_by_id(self.earlier)
        yield from self.store.raw_events(self.batch_id)


def graph_inputs(store: EventStore, definition: SyncDefinition, batch: BatchRecord) -> GraphInputs:
    """What the batch is judged by: its own events and the earlier parts of its runs that the
    store keeps in earlier batches. An ACCUMULATIVE run's events each hold part of it ("consumers
    need to combine all events for a specific run"), so a run is judged whole, or a split run
    would lose (in a batch that decides removals) or never get (an input in one batch, an output
    in the next) what its parts describe together: every run of a whole snapshot, and every run
    that ends in the batch. A run still going in a stream batch is combined when it ends, so a
    long streaming run is not read again at every batch."""
    # read first: a change after it shows in the next read of it (``current_inputs``)
    mark = store.earlier_batches_mark(definition.name, batch.id)
    if batch.whole_snapshot and definition.snapshotMode is SnapshotMode.BATCH_SNAPSHOT:
        runs = store.runs_of(batch.id)
    else:
        runs = store.runs_of(batch.id, ended=True)
    own = store.event_digests(batch.id)
    earlier: list[int] = []
    rules = _rules_digest(definition)
    h = hashlib.blake2b(digest_size=32)
    h.update(rules)
    if runs:
        # an event sent again (a snapshot re-posted with its run ids) adds nothing: kept once,
        # so re-sending the same runs does not grow what every later batch reads back
        seen = set(own)
        for event_id, digest in store.earlier_run_digests(
            definition.name, runs, before_batch=batch.id
        ):
            if digest not in seen:
                seen.add(digest)
                earlier.append(event_id)
                h.update(b"e" + digest)
    for digest in own:
        h.update(b"b" + digest)
    count = len(earlier) + len(own)
    return GraphInputs(store, batch.id, earlier, count, h.digest(), (mark, rules))


def lineage_digest(packed: bytes) -> bytes:
    """What names a packed graph's lineage (``LineageGraph.lineage_digest``): its lineage part,
    which a whole reuse keeps as it is, read by this normalizer."""
    h = hashlib.blake2b(digest_size=32)
    h.update(normalizer_digest())
    h.update(lineage_part(packed))
    return h.digest()


def _rules_digest(definition: SyncDefinition) -> bytes:
    """The graph's format, the normalizer's code and the definition's dataset System rules."""
    h = hashlib.blake2b(digest_size=16)
    h.update(b"ol-dagster graph %d\0" % FORMAT)
    h.update(normalizer_digest())
    h.update(orjson.dumps(dataset_system_rules(definition)))
    return h.digest()


def current_inputs(
    store: EventStore, definition: SyncDefinition, batch: BatchRecord
) -> GraphInputs:
    """The batch's inputs as ``graph_inputs`` names them now: those this process's graph step
    named (``batch_graph(hand_over=True)``) when nothing they were read against changed since,
    else read again."""
    here = _built_here
    if here is not None and here[:2] == (store.url, batch.id):
        inputs = here[2]
        mark = store.earlier_batches_mark(definition.name, batch.id)
        if inputs.read_against == (mark, _rules_digest(definition)):
            return dataclasses.replace(inputs, store=store)  # read through the caller's store
    return graph_inputs(store, definition, batch)


def batch_events(
    store: EventStore, definition: SyncDefinition, batch: BatchRecord
) -> Callable[[], Iterator[bytes]]:
    """The raw events the batch is judged by (``graph_inputs``), read when called."""
    return graph_inputs(store, definition, batch).events


# The graph this process's ``lineage_graph`` step built last, with what it was built from (store,
# batch, inputs): when the upload step of the run runs in the same process (``execute_in_process``,
# ``ol-dagster sync``), it takes it from here, once, instead of unpacking the stored copy.
_built_here: tuple[str, int, GraphInputs, LineageGraph, tuple[int, int] | None] | None = None


@dataclass(slots=True)
class BatchGraph:
    graph: LineageGraph
    inputs: GraphInputs
    built: bool  # normalized now (else loaded as the ``lineage_graph`` step stored it)
    # jobs (normalized, reused from the last kept graph) when it was built; None: not known
    counts: tuple[int, int] | None = None


def batch_graph(
    store: EventStore,
    definition: SyncDefinition,
    batch: BatchRecord,
    *,
    inputs: GraphInputs | None = None,
    events: list[bytes] | None = None,
    hand_over: bool = False,
) -> BatchGraph:
    """The graph of the batch's inputs: the one stored for exactly these inputs, else normalized
    now (from ``events`` when the caller already read them) and stored for the next step.
    ``hand_over`` (the ``lineage_graph`` step): the next call for the same inputs in this process
    takes this very graph instead of loading the stored copy."""
    global _built_here
    inputs = inputs or graph_inputs(store, definition, batch)
    here, _built_here = _built_here, None
    if here is not None and (here[0], here[1], here[2].key) == (store.url, batch.id, inputs.key):
        return _handed(BatchGraph(here[3], inputs, built=False, counts=here[4]), hand_over)
    packed = store.load_graph(batch.id, inputs.key)
    if packed is not None:
        try:
            graph = unpack(packed)
            graph.lineage_digest = lineage_digest(packed)
            counts = counts_of(store.graph_parts(batch.id))
            return _handed(BatchGraph(graph, inputs, built=False, counts=counts), hand_over)
        except PackedGraphError as exc:  # damaged: the events are still there
            log.warning(
                "batch %s: the stored graph is not readable (%s): normalizing", batch.id, exc
            )
    built = _build(store, definition, batch, inputs, events)
    graph, parts, counts = built.graph, built.parts, built.counts
    packed = built.packed or pack(graph)
    store.save_graph(batch.id, inputs.key, packed, parts=parts)
    graph.lineage_digest = lineage_digest(packed)
    return _handed(BatchGraph(graph, inputs, built=True, counts=counts), hand_over)


@dataclass(slots=True)
class _Built:
    graph: LineageGraph
    parts: bytes | None  # what the next batch may reuse of it
    counts: tuple[int, int]  # jobs (normalized, reused)
    packed: bytes | None = None  # packed already (its lineage kept as the earlier graph's)


def _build(
    store: EventStore,
    definition: SyncDefinition,
    batch: BatchRecord,
    inputs: GraphInputs,
    events: list[bytes] | None,
) -> _Built:
    """The graph normalized, reusing the unchanged jobs of the definition's last kept graph
    (``lineage.reuse``), with what the next batch may reuse of it and (normalized, reused)
    job counts. Runs continued from earlier batches: every job normalized."""

    def source() -> Iterable[bytes]:
        return events if events is not None else inputs.events()

    def source_at(indexes: list[int]) -> Iterable[bytes]:
        """The events at these indexes of ``source()``: no earlier events come first here."""
        if events is not None:
            return [events[i] for i in indexes]
        return store.raw_events_at(batch.id, [contents.positions[i] for i in indexes])

    if inputs.earlier:
        graph = build_graph(source(), definition)
        return _Built(graph, None, (_described(graph), 0))
    rules = _rules_digest(definition)
    contents = job_contents(store.event_contents(batch.id))
    systems = dataset_system_rules(definition)
    built: tuple[LineageGraph, Describers, set[NodeKey]] | None = None
    reuse = _reusable(store, definition, batch, contents, rules)
    if reuse:
        earlier, plan, earlier_packed, earlier_parts = reuse
        try:
            if plan.whole:
                whole = build_whole(source(), earlier)
                built = None if whole is None else (*whole, plan.jobs)
            else:
                built = build_reusing(
                    source, contents, plan.jobs, earlier, earlier_parts, systems, source_at
                )
        except ValueError as exc:  # the events changed under the listing
            log.warning("batch %s: nothing reused (%s): normalizing every job", batch.id, exc)
        if built is not None:
            graph, describers, same = built
            counts = (contents.count - len(plan.jobs), len(plan.jobs))
            # a whole reuse has the earlier graph's lineage: its packed part is kept as it is;
            # a partial one packs what changed over it
            if plan.whole:
                packed = with_run_facts(earlier_packed, graph)
            else:
                unchanged = unchanged_jobs(graph, earlier, same)
                graph.unchanged_since = (lineage_digest(earlier_packed), unchanged)
                packed = pack(graph, over=earlier_packed, same=same)
            return _Built(graph, parts_of(contents, rules, describers, *counts), counts, packed)
    describers: Describers = {}
    graph = normalize(source(), dataset_systems=systems, describers=describers)
    counts = (contents.count, 0)
    return _Built(graph, parts_of(contents, rules, describers, *counts), counts)


def _described(graph: LineageGraph) -> int:
    return sum(not j.referenced_only for j in graph.jobs.values())


def _reusable(
    store: EventStore,
    definition: SyncDefinition,
    batch: BatchRecord,
    contents: JobContents,
    rules: bytes,
) -> tuple[LineageGraph, Reuse, bytes, bytes] | None:
    """The definition's last kept graph and the jobs this batch may take from it, if any, with
    the graph and its parts as they are kept."""
    if not contents.fingerprints:
        return None
    earlier = store.earlier_graph(definition.name, batch.id)
    if earlier is None:
        return None
    kept = kept_parts(earlier.parts)
    try:
        # its field flows are read when used: a graph reused whole has them stamped, one reused
        # in part keeps most of them as they are (``build_reusing``)
        graph = unpack(earlier.graph, field_flows_later=True)
    except PackedGraphError:
        return None
    plan = reusable(contents, kept, graph, rules)
    return (graph, plan, earlier.graph, earlier.parts) if plan.jobs else None


def _handed(built: BatchGraph, hand_over: bool) -> BatchGraph:
    global _built_here
    if hand_over:
        _built_here = (
            built.inputs.store.url,
            built.inputs.batch_id,
            built.inputs,
            built.graph,
            built.counts,
        )
    return built
