"""What an upload would write for each job and dataset of a graph, as a digest, so that a
snapshot describing them as the catalog already holds them only stamps their rows.

Every snapshot re-sends every job, and most are unchanged: re-upserting their ~30 rows each cost
~1.2 ms per job (10,000 jobs: ~317,000 rows), where stamping the same rows with the upload's time,
set-based, costs a fraction of it. The seed's rule stays whole: every object a snapshot describes
gets the new last-update, changed or not, so the cutoff cleanup removes exactly what it removed.

A digest covers every value the upload writes for the object, in the catalog's identities (the
System, schema and name of each entity, not only the OpenLineage names), so that equal digests
mean equal rows:

- a dataset: its entity row and its fields;
- a job: its entity row, its routine and statement, and the flows its scopes own (data, field and
  orchestration flows), with the identity of every dataset and parent job they link.

The catalog keeps each object's digest with its entity; an upload whose digest is the stored one
stamps, instead of upserting, the rows that carry the time of the upload that stamped the object
last (``stamps.stamp``): those are the rows that upload sent, and no older row of the
same scope, which the cleanup is to judge. A row lost since (a cascade, an operator's delete)
shows as a short count, and the object is then sent again whole.

Run results (run metrics, quality checks) are not covered: a new run changes them, so they are
written every time. Objects whose rows cannot be told from their own content are never hashed,
and are sent as before: two graph objects filed as one catalog entity (the last one written wins),
a job linked to a foreign parent (whose entity the link finds in the catalog, not in the graph)
and every job linked to one of those. Two field flows of a job with the same ends are one row:
``pick_field_flow`` chooses it whatever order the graph's set gives them in, so that the digest of
them all determines it.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter, itemgetter

import orjson

from ol_dagster.gcpause import gc_paused
from ol_dagster.lineage import LineageGraph
from ol_dagster.lineage.graph import DataFlow, FieldFlow, NodeKey

# part of every digest: a change of what the upload writes, or of how it is hashed, makes every
# stored digest differ, so the first upload of a new version re-sends everything once
VERSION = 1

Identity = tuple[str, str, str]  # (System name, schema, name): an entity's natural key

# attribute getters: a snapshot has a million fields and field flows, and these run in C
_ends = attrgetter("source", "target")
_field_flow = attrgetter("source", "target", "transformation", "subtype")
_field = attrgetter("path", "type", "description", "ordinal")
_source = attrgetter("source")
_target = attrgetter("target")
_first_two = itemgetter(0, 1)  # a field flow's ends; a field's (namespace, name)


@dataclass(frozen=True, slots=True)
class JobContent:
    """A job's digest; how many rows its scopes hold when the catalog holds that content (its
    data scope: data and field flows, its orchestration scope); and how many of the graph's flow
    objects they stand for (two field flows of the same ends are one row, as are two parent
    links differing by their root only), which the upload's counts report as a re-send does."""

    digest: str
    data_flows: int
    orchestration_flows: int
    field_flows: int
    flow_objects: int


@dataclass(frozen=True, slots=True)
class Contents:
    jobs: dict[NodeKey, JobContent]  # owned jobs that can be hashed
    datasets: dict[NodeKey, str]  # datasets that can be hashed, by digest
    # the last upload's, kept for the same lineage (``memo``): the graph is the one it uploaded
    same_as_last: bool = False

    def digests(self) -> dict[str, dict[NodeKey, str]]:
        """The digests by kind, as ``UploadResult.content_digests`` gives them."""
        return {"job": {k: c.digest for k, c in self.jobs.items()}, "dataset": self.datasets}


@dataclass(frozen=True, slots=True)
class Kept:
    """What an earlier upload hashed, for the jobs of a graph told unchanged since
    (``LineageGraph.unchanged_since``): their digests, and every job's System and every
    dataset's catalog identity then. Such a job's digest is taken when its System, its
    parents' and its datasets' identities are as they were and none is shared now; any other
    job is hashed."""

    jobs: Mapping[NodeKey, JobContent]
    job_systems: Mapping[NodeKey, str]
    identities: Mapping[NodeKey, Identity]


def pick_field_flow(kept: FieldFlow, other: FieldFlow) -> FieldFlow:
    """Of two field flows of a job with the same ends (one catalog row), the one written: the
    same whatever order the graph's set gives them in, as a digest of them all requires."""
    return max(kept, other, key=lambda ff: orjson.dumps(_field_flow(ff)))


def digest(payload: object) -> str:
    """128 bits of SHA-256 (hardware-assisted, faster than BLAKE2 here) of the payload's JSON."""
    return hashlib.sha256(orjson.dumps(payload)).hexdigest()[:32]


def contents(
    graph: LineageGraph, job_systems: dict[NodeKey, str], kept: Kept | None = None
) -> Contents:
    """The digests of ``graph``'s datasets and of its jobs ``job_systems`` maps to their System
    (the jobs this definition writes); ``kept``: digests taken rather than made again."""
    with gc_paused():  # ~a million short-lived tuples, no cycles: a collection frees nothing
        return _contents(graph, job_systems, kept)


def _contents(graph: LineageGraph, job_systems: dict[NodeKey, str], kept: Kept | None) -> Contents:
    ds_ident: dict[NodeKey, Identity] = {
        k: (d.system, d.schema, d.object_name) for k, d in graph.datasets.items()
    }
    job_ident: dict[NodeKey, Identity] = {k: (s, k[0], k[1]) for k, s in job_systems.items()}
    uses = Counter(ds_ident.values())
    uses.update(job_ident.values())
    shared_ds = {k for k, i in ds_ident.items() if uses[i] > 1}
    shared_jobs = {k for k, i in job_ident.items() if uses[i] > 1}

    datasets = _dataset_digests(graph, ds_ident, shared_ds)
    data: defaultdict[NodeKey, list[DataFlow]] = defaultdict(list)
    for f in graph.data_flows:
        data[f.job].append(f)
    parents: defaultdict[NodeKey, set[NodeKey]] = defaultdict(set)
    links: Counter[NodeKey] = Counter()
    for o in graph.orchestration_flows:
        parents[o.child].add(o.parent)  # the root is not written: flows differing by it are one
        links[o.child] += 1

    taken: Mapping[NodeKey, JobContent] = kept.jobs if kept is not None else {}
    moved_ds, moved_jobs = (
        _moved(kept, ds_ident, job_systems, shared_ds, shared_jobs)
        if kept is not None
        else (set(), set())
    )
    # the field flows of the jobs that may be hashed (all of them once an identity moved)
    field: defaultdict[NodeKey, list[FieldFlow]] = defaultdict(list)
    hashed = (
        None
        if moved_ds or not taken
        else {
            k
            for k in job_systems
            if k not in taken or k in moved_jobs or not moved_jobs.isdisjoint(parents.get(k, ()))
        }
    )
    for ff in graph.field_flows if hashed is None else graph.field_flows_of(hashed):
        field[ff.job].append(ff)

    jobs: dict[NodeKey, JobContent] = {}
    for key, system in job_systems.items():
        if key in shared_jobs:
            continue
        linked = sorted(parents.get(key, ()))
        if any(p not in job_systems or p in shared_jobs for p in linked):
            continue
        held = taken.get(key)
        if (
            held is not None
            and key not in moved_jobs
            and moved_jobs.isdisjoint(linked)
            and (not moved_ds or _links_none(key, data, field, moved_ds))
        ):
            jobs[key] = held
            continue
        pairs = sorted(map(_ends, data.get(key, ())))  # a job's data flows differ by their ends
        ffs = field.get(key, ())
        # every field flow, those that share their ends too (one row: ``pick_field_flow``)
        field_flows = list(map(_field_flow, ffs))
        try:
            field_flows.sort()
        except TypeError:  # two flows of the same ends, one without a transformation
            field_flows.sort(key=orjson.dumps)
        used = set(chain.from_iterable(pairs))
        used.update(map(_first_two, map(_source, ffs)))
        used.update(map(_first_two, map(_target, ffs)))
        if not used.isdisjoint(shared_ds):
            continue
        j = graph.jobs[key]
        r = graph.routines.get(key)
        jobs[key] = JobContent(
            digest(
                (
                    VERSION,
                    system,
                    key,
                    j.description,
                    j.integration,
                    j.job_type,
                    j.processing_type,
                    j.owners,
                    j.source_code_location,
                    (r.statement, r.dialect) if r is not None else None,
                    pairs,  # each flow's statement is the routine's: covered above
                    [(job_systems[p], p) for p in linked],
                    field_flows,
                    sorted((k, ds_ident[k]) for k in used),
                )
            ),
            len(pairs),
            len(linked),
            len(set(map(_first_two, field_flows))),
            len(pairs) + links[key] + len(field_flows),
        )
    return Contents(jobs, datasets)


def _dataset_digests(
    graph: LineageGraph, ds_ident: Mapping[NodeKey, Identity], shared: set[NodeKey]
) -> dict[NodeKey, str]:
    """The digest of each dataset but those ``shared`` (filed as one entity with another)."""
    return {
        k: digest(
            (
                VERSION,
                ds_ident[k],
                d.type,
                d.namespace,
                d.name,
                d.description,
                d.owners,
                d.has_schema,
                list(map(_field, d.fields.values())),
            )
        )
        for k, d in graph.datasets.items()
        if k not in shared
    }


def _moved(
    kept: Kept,
    ds_ident: Mapping[NodeKey, Identity],
    job_systems: Mapping[NodeKey, str],
    shared_ds: set[NodeKey],
    shared_jobs: set[NodeKey],
) -> tuple[set[NodeKey], set[NodeKey]]:
    """The datasets and jobs whose catalog identity makes a kept digest not the one hashing
    gives: shared now, or moved since (not a dataset new since: a job taken unchanged links only
    datasets it linked then)."""
    then, systems_then = kept.identities, kept.job_systems
    moved_ds = shared_ds | {
        k for k, i in ds_ident.items() if (was := then.get(k)) is not None and was != i
    }
    moved_jobs = shared_jobs | {k for k, s in job_systems.items() if systems_then.get(k) != s}
    return moved_ds, moved_jobs


def _links_none(
    key: NodeKey,
    data: Mapping[NodeKey, list[DataFlow]],
    field: Mapping[NodeKey, list[FieldFlow]],
    datasets: set[NodeKey],
) -> bool:
    """Whether no flow of the job ``key`` links one of ``datasets``."""
    flows = data.get(key, ())
    if not datasets.isdisjoint(map(_source, flows)) or not datasets.isdisjoint(map(_target, flows)):
        return False
    ffs = field.get(key, ())
    return datasets.isdisjoint(map(_first_two, map(_source, ffs))) and datasets.isdisjoint(
        map(_first_two, map(_target, ffs))
    )
