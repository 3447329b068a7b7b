"""A batch's lineage change set, recorded as the sync goes: by the upload, then by the cleanup.

The upload compares each job it wrote with the part of it synced before (only those whose digest
differs are read back), and each dataset whose schema it carries; it records the new parts and
the change set. The cleanup adds the jobs it removed (with their flows, from their last parts)
and, when it removed dataset entities, the datasets no job of the definition reads or writes any
more. Each time, the readers on the catalog that the removals leave without their input are
listed (``changes.downstream``), whichever definition syncs them.

A part is a function of its content (the catalog's content digest), so the upload records what
the parts were made of (``_source``): the next upload whose every described job and dataset has
the same content, with no write of the parts since, changed nothing and reads no part.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from functools import cache
from typing import Any

import orjson

from ol_dagster.changes.changeset import (
    ChangeSet,
    Collected,
    Edge,
    Item,
    Node,
    count,
    dataset_change,
    job_changes,
    neighbourhood,
    node_id,
    shown,
)
from ol_dagster.changes.downstream import Reader, concerned, impacted, known_fields, readers_of
from ol_dagster.changes.parts import (
    JobPart,
    dataset_parts,
    described_jobs,
    digest,
    dropped_datasets,
    job_parts,
    merged,
)
from ol_dagster.gcpause import gc_paused
from ol_dagster.lineage import LineageGraph
from ol_dagster.lineage.graph import NodeKey
from ol_dagster.ownership import admits
from ol_dagster.settings import LineageReplacement, SyncDefinition
from ol_dagster.store import EventStore
from ol_dagster.store.changes import JOB, StoredPart, part_key
from ol_dagster.store.part_refs import node_ref

DATASET = "dataset"
# per job and dataset, its content digest in the catalog and the digest of the part that content
# gives (``_known``): stored beside the parts, under kinds of their own
MEMO = {JOB: "job-content", DATASET: "dataset-content"}
PARTS_VERSION = 1  # a change of the parts' shape makes every remembered digest miss once


def replaced_jobs(
    definition: SyncDefinition, graph: LineageGraph, snapshot: bool
) -> Callable[[NodeKey], bool]:
    """Whether the batch replaces a job's lineage (a snapshot, outside shared namespaces; a
    JobEvent; a completed run with ``lineageReplacement: JOB``), as its cleanup does; any other
    run only adds to what the job had."""
    whole = set(graph.described_jobs)
    if definition.lineageReplacement is LineageReplacement.JOB:
        whole |= graph.completed_jobs
    return lambda key: (snapshot and not definition.is_shared(key[0])) or key in whole


@gc_paused()  # parts and their JSON: many small objects, no cycles
def record_upload(
    store: EventStore,
    definition: SyncDefinition,
    catalog: str,
    batch: int,
    graph: LineageGraph,
    *,
    snapshot: bool,
    content_digests: Mapping[str, Mapping[NodeKey, str]] | None = None,
) -> ChangeSet:
    """What the upload of ``graph`` changed in ``catalog``: recorded with the batch, and the new
    parts kept for the next batch. ``snapshot``: the batch speaks for every job of its
    namespaces (``ownership.is_snapshot``). ``content_digests``: the catalog's digest of each
    job's and dataset's content (``UploadResult.content_digests``), when it has them: a part
    whose digest is known from its content (``_known``) and is the stored one is not built."""
    name = definition.name
    content = content_digests or {}
    # a few namespaces for thousands of jobs: each one's verdict once
    admitted = cache(lambda ns: admits(definition, ns))
    described = described_jobs(graph, admitted)
    drops = dropped_datasets(graph)
    earlier = store.change_set(batch, catalog)
    # a retried batch keeps what its first run changed, one item per object: all held then
    found = Collected(whole=earlier is not None)
    found.add((earlier or {}).get("items") or [])
    source = None if drops else _source(graph, described, content, snapshot)
    if source is not None and store.recorded_from(name, catalog) == source:
        # the parts are those this content gave last time and nothing wrote them since: no
        # job or dataset changed, none ends (most nights)
        return _save(store, definition, catalog, batch, found, earlier=earlier)
    every = store.all_part_digests(name, catalog)
    digests = every.get(JOB, {})
    jobs = {k: part_key(*k) for k in described}
    known, fresh = _known(jobs, content.get(JOB), every.get(MEMO[JOB], {}))
    build = [k for k, pk in jobs.items() if k not in known or digests.get(pk) != known[k]]
    new_jobs = job_parts(graph, admitted, only=build if known else None)
    new_digest = {k: digest(p) for k, p in new_jobs.items()}
    changed = {k: p for k, p in new_jobs.items() if digests.get(jobs[k]) != new_digest[k]}
    old = store.parts(name, catalog, JOB, (jobs[k] for k in changed))
    replaced = replaced_jobs(definition, graph, snapshot)
    for key, part in list(changed.items()):
        before = old.get(jobs[key])
        if before is not None and not replaced(key):
            part = changed[key] = merged(before.part, part)
            if digest(part) == before.digest:
                del changed[key]
                continue
        found.add(job_changes(key, before.part if before else None, part))
    ds_digests = every.get(DATASET, {})
    datasets = {k: part_key(*k) for k, d in graph.datasets.items() if not d.dropped}
    known_ds, fresh_ds = _known(datasets, content.get(DATASET), every.get(MEMO[DATASET], {}))
    build_ds = [
        k for k, pk in datasets.items() if k not in known_ds or ds_digests.get(pk) != known_ds[k]
    ]
    ds_parts = dataset_parts(graph, only=build_ds if known_ds else None)
    ds_digest = {k: digest(p) for k, p in ds_parts.items()}
    new_ds = {
        k: p
        for k, p in ds_parts.items()
        # a dataset seen without its schema keeps the fields known of it
        if (p["fields"] is not None or datasets[k] not in ds_digests)
        and ds_digests.get(datasets[k]) != ds_digest[k]
    }
    old_ds = store.parts(name, catalog, DATASET, (datasets[k] for k in new_ds))
    for key, part in new_ds.items():
        before = old_ds.get(datasets[key])
        item = dataset_change(key, before.part if before else None, part)
        if item is not None:
            found.add([item])
    found.add({"kind": DATASET, "change": "removed", "namespace": ns, "name": n} for ns, n in drops)
    undescribed = digests.keys() - jobs.values()
    ending = _ending(store, definition, catalog, graph, undescribed) if snapshot else {}
    for key, before in ending.items():
        found.add(job_changes(key, before, None))
    store.replace_parts(name, catalog, JOB, [(*k, digest(p), p) for k, p in changed.items()])
    store.replace_parts(
        name, catalog, DATASET, [(*k, digest(p), p) for k, p in new_ds.items()], removed=drops
    )
    _remember(store, definition, catalog, JOB, fresh, new_digest)
    _remember(store, definition, catalog, DATASET, fresh_ds, ds_digest, removed=drops)
    if source is not None and not undescribed:
        # every part is now this content's, and each job of them is described
        store.record_parts_from(name, catalog, source)
    return _save(store, definition, catalog, batch, found, earlier=earlier, gone=set(ending))


def _source(
    graph: LineageGraph,
    described: set[NodeKey],
    content: Mapping[str, Mapping[NodeKey, str]],
    snapshot: bool,
) -> str | None:
    """A digest of what the parts of ``graph`` are made of: each described job's and each
    dataset's content digest (a part is a function of its content), in the graph's order; None
    when one has none (its part is built each time)."""
    jobs, datasets = content.get(JOB), content.get(DATASET)
    if jobs is None or datasets is None:
        return None
    try:
        made_of = [
            [[*k, jobs[k]] for k in graph.jobs if k in described],
            [[*k, datasets[k]] for k in graph.datasets],
        ]
    except KeyError:
        return None
    h = hashlib.blake2b(orjson.dumps([PARTS_VERSION, snapshot]), digest_size=16)
    h.update(orjson.dumps(made_of))
    return h.hexdigest()


def _memo_key(content: str) -> str:
    """What the memo holds a content digest as: with the version of the parts' shape."""
    return hashlib.blake2b(f"{PARTS_VERSION}:{content}".encode(), digest_size=16).hexdigest()


def _known(
    keys: Mapping[NodeKey, str], contents: Mapping[NodeKey, str] | None, memo: Mapping[str, str]
) -> tuple[dict[NodeKey, str], dict[NodeKey, str]]:
    """Of ``keys`` (each with its part key): the digest of the part of each one whose content
    digest (``contents``) is the one the memo holds for it, as a part is a function of its
    content; and the memo key (``_memo_key``) of each other one that has a content digest."""
    known: dict[NodeKey, str] = {}
    fresh: dict[NodeKey, str] = {}
    for key, digest_now in (contents or {}).items():
        pk = keys.get(key)
        if pk is None:
            continue
        memo_key = _memo_key(digest_now)
        held = memo.get(pk)
        if held is not None and held[: len(memo_key)] == memo_key:
            known[key] = held[len(memo_key) :]
        else:
            fresh[key] = memo_key
    return known, fresh


def _remember(
    store: EventStore,
    definition: SyncDefinition,
    catalog: str,
    kind: str,
    fresh: Mapping[NodeKey, str],
    digests: Mapping[NodeKey, str],
    removed: Iterable[NodeKey] = (),
) -> None:
    """Keep the part digests built for contents the memo did not hold (``_known``)."""
    rows = [(*k, m + digests[k], {}) for k, m in fresh.items() if k in digests]
    store.replace_parts(definition.name, catalog, MEMO[kind], rows, removed=removed)


def _ending(
    store: EventStore,
    definition: SyncDefinition,
    catalog: str,
    graph: LineageGraph,
    undescribed: Iterable[str],
) -> dict[NodeKey, JobPart]:
    """The jobs of a snapshot's namespaces (outside shared ones) that it no longer describes
    (of the part keys ``undescribed``): its cleanup removes them. Listed as removed from the
    upload on, so the check sees what their removal breaks; the cleanup then keeps only those it
    did remove (``record_cleanup``)."""
    spoken = {ns for ns in graph.job_namespaces if not definition.is_shared(ns)}
    found = store.parts(definition.name, catalog, JOB, undescribed)
    return {(p.namespace, p.name): p.part for p in found.values() if p.namespace in spoken}


def record_cleanup(
    store: EventStore,
    definition: SyncDefinition,
    catalog: str,
    batch: int,
    removed_jobs: Sequence[str],
    removed_datasets: bool,
) -> ChangeSet | None:
    """What the cleanup did, in the batch's change set: the jobs it removed (named
    ``<namespace>.<name>``; those the upload listed as ending and the cleanup kept, stopped by a
    guard, are no longer listed), and, when it removed dataset entities (``removed_datasets``),
    the datasets no job of the definition reads or writes any more. None when nothing changed."""
    name = definition.name
    gone = set(removed_jobs)
    earlier = store.change_set(batch, catalog)
    listed = list((earlier or {}).get("items") or [])
    ending = {(i["namespace"], i["name"]) for i in listed if _job_removal(i)}
    if not gone and not removed_datasets and not ending:
        return None  # most cleanups: nothing removed, nothing the upload expected removed
    kept = {k for k in ending if f"{k[0]}.{k[1]}" not in gone}
    items = [i for i in listed if _job_of(i) not in kept]
    left: list[NodeKey] = []
    for p in _named(store, name, catalog, gone):
        if (p.namespace, p.name) not in ending:
            items.extend(job_changes((p.namespace, p.name), p.part, None))
        left.append((p.namespace, p.name))
    store.replace_parts(name, catalog, JOB, [], removed=left)
    store.replace_parts(name, catalog, MEMO[JOB], [], removed=left)
    dropped: list[NodeKey] = []
    if removed_datasets:
        touched = store.parts(name, catalog, DATASET, (part_key(*k) for k in _touched(items)))
        known = {(p.namespace, p.name) for p in touched.values()}
        # the definition's jobs left (those removed went with their refs) that name them
        naming = store.jobs_naming(catalog, map(_dataset_ref, known), definition=name)
        still = {
            tuple(k)
            for p in naming
            for k in [*p.part.get("inputs", []), *p.part.get("outputs", [])]
        }
        dropped = sorted(k for k in known if k not in still)
        items.extend(
            {"kind": DATASET, "change": "removed", "namespace": ns, "name": n} for ns, n in dropped
        )
        store.replace_parts(name, catalog, DATASET, [], removed=dropped)
        store.replace_parts(name, catalog, MEMO[DATASET], [], removed=dropped)
    if not kept and len(items) == len(listed):
        return None
    found = Collected(whole=True)
    found.add(items)
    return _save(store, definition, catalog, batch, found, earlier=earlier)


def _named(store: EventStore, definition: str, catalog: str, names: set[str]) -> list[StoredPart]:
    """The definition's job parts named ``<namespace>.<name>`` in ``names``, by namespace and
    name: a name with dots in it may be split at any of them, each split looked up by its key."""
    keys = {part_key(n[:i], n[i + 1 :]) for n in names for i, c in enumerate(n) if c == "."}
    found = store.parts(definition, catalog, JOB, keys).values()
    return sorted(
        (p for p in found if f"{p.namespace}.{p.name}" in names),
        key=lambda p: (p.namespace, p.name),
    )


def _dataset_ref(key: NodeKey) -> int:
    """A dataset's ref in the store's index of job parts, as the picture names it."""
    return node_ref(node_id(DATASET, key))


def _job_removal(item: Item) -> bool:
    return item["kind"] == JOB and item["change"] == "removed"


def _job_of(item: Item) -> NodeKey | None:
    """The job an item is of: a job's own item, or a flow's owner."""
    if item["kind"] == JOB:
        return (item["namespace"], item["name"])
    job = item.get("job")
    return (job["namespace"], job["name"]) if job else None


def forget_jobs(
    store: EventStore, definition: SyncDefinition, catalog: str, removed_jobs: Sequence[str]
) -> int:
    """The day-based cleanup removed these jobs (``<namespace>.<name>``): their parts go, so a
    job removed is no reader any more, and one that comes back is added again."""
    gone = set(removed_jobs)
    if not gone:
        return 0
    left = [(p.namespace, p.name) for p in _named(store, definition.name, catalog, gone)]
    store.replace_parts(definition.name, catalog, JOB, [], removed=left)
    store.replace_parts(definition.name, catalog, MEMO[JOB], [], removed=left)
    return len(left)


def _touched(items: Iterable[Item]) -> set[NodeKey]:
    """The datasets the items' flows and changed jobs name."""
    out: set[NodeKey] = set()
    for item in items:
        for end in ("source", "target"):
            if end in item:
                out.add((item[end]["namespace"], item[end]["name"]))
        for k in ("inputsRemoved", "outputsRemoved"):
            out |= {(r["namespace"], r["name"]) for r in item.get(k) or []}
    return out


def _save(
    store: EventStore,
    definition: SyncDefinition,
    catalog: str,
    batch: int,
    found: Collected,
    *,
    earlier: Mapping[str, Any] | None,
    gone: set[NodeKey] | None = None,
) -> ChangeSet:
    """Record the batch's change set of the items ``found`` (``earlier``: the one recorded
    before, whose kept items they include), its impact judged on the catalog now, the
    definition's jobs ``gone`` no longer reading or writing anything."""
    readers, fields = _catalog_now(store, catalog, found.removals)
    mine = gone or set()
    readers = [r for r in readers if not (r[0] == definition.name and r[1] in mine)]
    hit = impacted(found.removals, readers, fields)
    name = definition.name
    if found.whole:
        change_set = ChangeSet.of(name, batch, catalog, found.items, hit, dedupe=bool(earlier))
    else:
        change_set = ChangeSet.kept(name, batch, catalog, found, hit)
    if earlier is not None and earlier.get("itemsNotListed"):
        # what was counted before and not kept is counted still
        counts = ChangeSet.from_dict(earlier).counts
        listed = count(earlier.get("items") or [])
        summed = {
            k: {c: n + counts[k][c] - listed[k][c] for c, n in v.items()}
            for k, v in change_set.counts.items()
        }
        change_set = replace(
            change_set,
            counts=summed,
            not_listed=change_set.not_listed + int(earlier["itemsNotListed"]),
        )
    store.save_change_set(batch, catalog, change_set.as_dict())
    return change_set


def _catalog_now(
    store: EventStore, catalog: str, removals: Sequence[Item]
) -> tuple[list[Reader], Mapping[NodeKey, list[str] | None]]:
    """The current part of each job on the catalog (of any definition) that names a dataset
    the items' removals concern (``downstream.concerned``: those jobs judge the impact as every
    job would), and the fields known of the datasets whose column flows went. Nothing is read
    when nothing was removed (most batches)."""
    datasets, columns_of = concerned(removals)
    if not datasets:
        return [], {}
    found = store.jobs_naming(catalog, map(_dataset_ref, datasets))
    readers = readers_of((p.definition, p.namespace, p.name, p.part) for p in found)
    known = store.parts_of_any(catalog, DATASET, (part_key(*k) for k in columns_of))
    return readers, known_fields(((p.namespace, p.name), p.part) for p in known)


def picture_graph(
    store: EventStore, change_set: ChangeSet, *, limit: int = 50
) -> tuple[list[Node], list[Edge]]:
    """The nodes and edges of the change set's neighbourhood (``changeset.neighbourhood``): the
    changed objects and one hop around them, through the jobs on the catalog now that are
    among them or read or write one of them (the only jobs that add to the picture)."""
    if change_set.empty:
        return [], []
    refs = map(node_ref, shown(change_set, limit=limit))
    found = store.jobs_naming(change_set.catalog, refs)
    return neighbourhood(change_set, [((p.namespace, p.name), p.part) for p in found], limit=limit)


def stored(store: EventStore, batch: int, catalog: str) -> ChangeSet | None:
    """The change set recorded for a batch in a catalog, if any."""
    doc = store.change_set(batch, catalog)
    return ChangeSet.from_dict(doc) if doc is not None else None
