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

A graph whose lineage digest is not known (normalized by an upload alone, made by a test) is hashed
as before. The digests taken are the ones hashing gives, so what the upload compares them with and
stamps or re-sends is the same either way; a memo that cannot be read or written costs the time of
hashing, nothing else.
"""

from __future__ import annotations

import hashlib
import logging
import zlib

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
    sizes = (graph.jobs, graph.datasets, graph.data_flows, graph.field_flows, graph.routines)
    h.update(orjson.dumps([*map(len, sizes), len(graph.orchestration_flows)]))
    h.update(
        orjson.dumps([(k, d.system, d.schema, d.object_name) for k, d in graph.datasets.items()])
    )
    h.update(orjson.dumps(list(job_systems.items())))
    return h.hexdigest()


def contents(
    engine: Engine, graph: LineageGraph, job_systems: dict[NodeKey, str], definition: str
) -> changes.Contents:
    """``changes.contents(graph, job_systems)``: the definition's kept digests when they are of
    the same inputs, else hashed now and kept for the next upload."""
    key = memo_key(graph, job_systems)
    if key is None:
        return changes.contents(graph, job_systems)
    try:
        with engine.connect() as conn:
            row = conn.execute(
                select(content_memo.c.memo_key, content_memo.c.contents).where(
                    content_memo.c.definition == definition
                )
            ).first()
        if row is not None and row.memo_key == key:
            return _decoded(row.contents)
    except (SQLAlchemyError, zlib.error, KeyError, TypeError, ValueError) as exc:
        log.warning("the kept content digests of %s are not readable: %s", definition, exc)
    made = changes.contents(graph, job_systems)
    try:
        with engine.begin() as conn:
            conn.execute(delete(content_memo).where(content_memo.c.definition == definition))
            conn.execute(
                insert(content_memo).values(
                    definition=definition, memo_key=key, contents=_encoded(made)
                )
            )
    except SQLAlchemyError as exc:
        log.warning("the content digests of %s are not kept: %s", definition, exc)
    return made


def _encoded(made: changes.Contents) -> bytes:
    jobs = [
        [*key, c.digest, c.data_flows, c.orchestration_flows, c.field_flows, c.flow_objects]
        for key, c in made.jobs.items()
    ]
    datasets = [[*key, d] for key, d in made.datasets.items()]
    return zlib.compress(orjson.dumps({"jobs": jobs, "datasets": datasets}), 1)


def _decoded(data: bytes) -> changes.Contents:
    kept = orjson.loads(zlib.decompress(data))
    jobs = {(ns, name): changes.JobContent(*rest) for ns, name, *rest in kept["jobs"]}
    datasets = {(ns, name): d for ns, name, d in kept["datasets"]}
    return changes.Contents(jobs, datasets)
