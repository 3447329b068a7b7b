"""Which datasets each stored job part names: the rows that let a change set read only the jobs
around what it changed, instead of every job on the catalog.

A job's part names datasets in its inputs, outputs, data flows and column flows. For each job part
the store keeps one row per dataset it names, and one for the job itself, each under a ``ref``: a
64-bit digest of the node's text as the change picture writes it (``kind:namespace:name``). Two
names the picture cannot tell apart (``a:b`` + ``c`` and ``a`` + ``b:c``) share a ref, and so
does the rare digest collision: a lookup may give a few jobs more than asked, which readers of
the change set tolerate (they look at what each job's part says), never fewer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection

TABLE = "ol_lineage_part_refs"


def node_ref(node: str) -> int:
    """The ref of a node's text (``changes.changeset.node_id``)."""
    digest = hashlib.blake2b(node.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def ref(kind: str, namespace: str, name: str) -> int:
    """The ref of a job or dataset node (``kind``: "job" or "dataset"), as the picture writes
    it."""
    return node_ref(f"{kind}:{namespace}:{name}")


def job_refs(namespace: str, name: str, part: Mapping[str, Any]) -> set[int]:
    """The refs of a job's part: the job itself and every dataset the part names."""
    named = {(k[0], k[1]) for key in ("inputs", "outputs") for k in part.get(key) or ()}
    for key in ("dataFlows", "fieldFlows"):
        flows: Sequence[Sequence[Sequence[str]]] = part.get(key) or ()
        for source, target in flows:
            named.add((source[0], source[1]))
            named.add((target[0], target[1]))
    return {ref("job", namespace, name), *(ref("dataset", ns, n) for ns, n in named)}


def ref_rows(
    catalog: str, definition: str, parts: Iterable[tuple[str, str, str, Mapping[str, Any]]]
) -> list[tuple[str, int, str, str]]:
    """(catalog, ref, definition, key) of each (key, namespace, name, part) job part."""
    return [
        (catalog, r, definition, key)
        for key, ns, name, part in parts
        for r in job_refs(ns, name, part)
    ]


def insert_refs(conn: Connection, rows: Sequence[tuple[str, int, str, str]]) -> None:
    """Insert ``ref_rows`` (tens of thousands for a first sync): handed to the driver's
    ``executemany`` as plain tuples, not through the SQL layer's per-row processing."""
    if rows:
        mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
        conn.exec_driver_sql(
            f"INSERT INTO {TABLE} (catalog, ref, definition, key) "
            f"VALUES ({mark}, {mark}, {mark}, {mark})",
            list(rows),
        )
