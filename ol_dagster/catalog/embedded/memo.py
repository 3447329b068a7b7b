"""An upload's content digests (``changes.contents``), kept for the next upload of the same lineage.

Most nightly snapshots describe what the one before described: the sync then keeps the earlier
graph's lineage as it is and only takes the new run facts (``lineage.reuse``). Hashing every job
and dataset of that lineage again would cost about a fifth of such an upload and give the
digests the last upload computed; so each definition's last digests are kept in the catalog,
with what names every input of them, and taken when the name is the same:

- the graph's lineage (``LineageGraph.lineage_digest``: its lineage as the sync stored it, read by
  this normalizer), with the number of its jobs, datasets, flows and routines;
- each dataset's catalog identity (its System may be another one from one upload to the next:
  ``sync.upload.place_claimed``) and the System of each job this definition writes;
- how the digests are made (``changes.VERSION``).

An edited snapshot's graph has another lineage, but took most jobs unchanged from the last graph
(``LineageGraph.unchanged_since``: the jobs, and the lineage digest of the graph they were taken
from). When that graph is the one the kept digests were made of, a job taken unchanged keeps its
digest unless a catalog identity around it moved: ``changes.Kept`` compares its System, its
parents' and its datasets' with those the digests were made with, kept beside them (a stream of
their own, read only then); every other job is hashed.

A graph whose lineage digest is not known (normalized by an upload alone, made by a test) is hashed
as before. The digests taken are the ones hashing gives, so what the upload compares them with and
stamps or re-sends is the same either way; a memo that cannot be read or written costs the time of
hashing, nothing else.
"""

from __future__ import annotations

import hashlib
import logging
import zlib
from dataclasses import dataclass, replace

import orjson
from sqlalchemy import Engine, delete, insert, select
from sqlalchemy.exc import SQLAlchemyError

from ol_dagster.catalog.embedded import changes
from ol_dagster.catalog.embedded.tables import content_memo
from ol_dagster.lineage import LineageGraph
from ol_dagster.lineage.graph import NodeKey

log = logging.getLogger(__name__)


def memo_key(graph: LineageGraph, job_systems: dict[NodeKey, str]) -> str | None:
    """What names the digests of ``graph`` for these job Systems; None: its lineage is not known."""
    if graph.lineage_digest is None:
        return None
    h = hashlib.sha256(b"contents %d\0" % changes.VERSION)
    h.update(graph.lineage_digest)
    sizes = [len(graph.jobs), len(graph.datasets), len(graph.data_flows)]
    sizes += [graph.field_flow_count(), len(graph.routines), len(graph.orchestration_flows)]
    h.update(orjson.dumps(sizes))
    h.update(
        orjson.dumps([(k, d.system, d.schema, d.object_name) for k, d in graph.datasets.items()])
    )
    h.update(orjson.dumps(list(job_systems.items())))
    return h.hexdigest()


def contents(
    engine: Engine, graph: LineageGraph, job_systems: dict[NodeKey, str], definition: str
) -> changes.Contents:
    """``changes.contents(graph, job_systems)``: the definition's kept digests when they are of
    the same inputs; else hashed now, but for the jobs the graph took unchanged from the one
    the kept digests were made of (``LineageGraph.unchanged_since``), whose kept digests are
    taken where their catalog identities are as they were (``changes.Kept``); and kept for
    the next upload."""
    key = memo_key(graph, job_systems)
    if key is None:
        return changes.contents(graph, job_systems)
    kept: changes.Kept | None = None
    try:
        with engine.connect() as conn:
            row = conn.execute(
                select(content_memo.c.memo_key, content_memo.c.contents).where(
                    content_memo.c.definition == definition
                )
            ).first()
        if row is not None and row.memo_key == key:
            return replace(_decoded(row.contents).contents, same_as_last=True)
        if row is not None and graph.unchanged_since is not None:
            kept = _kept_for(graph, _decoded(row.contents))
    except (SQLAlchemyError, zlib.error, KeyError, TypeError, ValueError) as exc:
        log.warning("the kept content digests of %s are not readable: %s", definition, exc)
    made = changes.contents(graph, job_systems, kept)
    if kept is not None:
        taken = sum(made.jobs.get(k) is c for k, c in kept.jobs.items())
        log.info(
            "%s: %d job digest(s) taken as kept, %d hashed",
            definition,
            taken,
            len(made.jobs) - taken,
        )
    try:
        with engine.begin() as conn:
            conn.execute(delete(content_memo).where(content_memo.c.definition == definition))
            conn.execute(
                insert(content_memo).values(
                    definition=definition,
                    memo_key=key,
                    contents=_encoded(made, graph, job_systems),
                )
            )
    except SQLAlchemyError as exc:
        log.warning("the content digests of %s are not kept: %s", definition, exc)
    return made


@dataclass(frozen=True, slots=True)
class _Held:
    """A definition's kept digests, and what they were made of: the graph's lineage digest
    (None: kept by an earlier version), its job Systems and dataset identities (undecoded)."""

    contents: changes.Contents
    lineage: bytes | None = None
    made_of: bytes = b""


def _kept_for(graph: LineageGraph, held: _Held) -> changes.Kept | None:
    """The kept digests of the jobs ``graph`` took unchanged from the graph they were made
    of, with what they were made of; None when it took none from that graph."""
    if graph.unchanged_since is None or held.lineage is None:
        return None
    since, unchanged = graph.unchanged_since
    if since != held.lineage:
        return None
    jobs = held.contents.jobs
    systems, identities = orjson.loads(zlib.decompress(held.made_of))
    return changes.Kept(
        {k: jobs[k] for k in unchanged if k in jobs},
        {(ns, name): system for ns, name, system in systems},
        {(ns, name): (system, schema, obj) for ns, name, system, schema, obj in identities},
    )


def _encoded(made: changes.Contents, graph: LineageGraph, job_systems: dict[NodeKey, str]) -> bytes:
    """The digests, then what they were made of: the graph's lineage digest (known, as the
    memo's key names it), the job Systems and the datasets' identities, in a stream of its own
    read only when a graph took jobs unchanged from this one."""
    assert graph.lineage_digest is not None
    jobs = [
        [*key, c.digest, c.data_flows, c.orchestration_flows, c.field_flows, c.flow_objects]
        for key, c in made.jobs.items()
    ]
    datasets = [[*key, d] for key, d in made.datasets.items()]
    kept = {"jobs": jobs, "datasets": datasets, "lineage": graph.lineage_digest.hex()}
    made_of = [
        [[*k, s] for k, s in job_systems.items()],
        [[*k, d.system, d.schema, d.object_name] for k, d in graph.datasets.items()],
    ]
    return zlib.compress(orjson.dumps(kept), 1) + zlib.compress(orjson.dumps(made_of), 1)


def _decoded(data: bytes) -> _Held:
    z = zlib.decompressobj()
    kept = orjson.loads(z.decompress(data) + z.flush())
    jobs = {(ns, name): changes.JobContent(*rest) for ns, name, *rest in kept["jobs"]}
    datasets = {(ns, name): d for ns, name, d in kept["datasets"]}
    contents = changes.Contents(jobs, datasets)
    lineage = kept.get("lineage")
    if lineage is None:
        return _Held(contents)
    if not z.eof or not z.unused_data:
        raise ValueError("kept digests without what they were made of")
    return _Held(contents, bytes.fromhex(lineage), z.unused_data)
