"""What OpenMetadata held around an upload's edges: read before it posts, and after a timeout.

Before an upload posts anything, the pairs it is about to write for the first time are read
(``read_before``), so an edge someone else already had on a pair is known as theirs
(``owners``). Both ends found by the table API: ``GET /api/v1/lineage/getLineageEdge/{from}/{to}``
(404: no edge); one end only: that end's lineage (every edge into and out of it, with its
``lineageDetails``), which also covers the container or catalog-wide match the other end turns
out to be; an end the server has not got yet is created by the upload, so no edge can be there.
Pairs the ledger already holds were read at their first write and are not read again.

After a batch request timed out (``batches``), ``unwritten`` tells which of its events the server
already wrote in full: every edge the event makes is there, last written by ol-dagster's user
since the upload began. Only the others are sent again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from ol_dagster.catalog.http import HttpCatalogClient
from ol_dagster.catalog.openmetadata.owners import Before, Details, ours
from ol_dagster.catalog.openmetadata.tables import Sent, Table, TableReader

EDGE_PATH = "/api/v1/lineage/getLineageEdge"

Pair = tuple[Sent, Sent]


def edge_details(http: HttpCatalogClient, src_id: str, dst_id: str) -> Details | None:
    """An edge's lineageDetails (``LineageRepository.getLineageEdge``), None when there is none."""
    path = f"{EDGE_PATH}/{quote(src_id, safe='')}/{quote(dst_id, safe='')}"
    response = http.request("GET", path, ok=frozenset({404}))
    if response.status_code == 404:
        return None
    body = response.json()
    edge = body.get("edge") if isinstance(body, dict) else None
    return edge if isinstance(edge, dict) else {}


def _sent(d: Any) -> Sent | None:
    if not isinstance(d, Mapping):
        return None
    ns, name = d.get("namespace"), d.get("name")
    if not isinstance(ns, str) or not isinstance(name, str):
        return None
    facets = d.get("facets") if isinstance(d.get("facets"), Mapping) else None
    return Sent(ns, name, facets)


def event_pairs(doc: Mapping[str, Any], types: Sequence[str]) -> list[Pair]:
    """The (input, output) datasets one event makes an edge of: inputs x outputs, of the event
    types the server's ``eventTypeFilter`` takes (no type: COMPLETE; ``OpenLineageMapper``)."""
    if (doc.get("eventType") or "COMPLETE") not in (set(types) or {"COMPLETE"}):
        return []
    ins = [s for d in doc.get("inputs") or [] if (s := _sent(d)) is not None]
    outs = [s for d in doc.get("outputs") or [] if (s := _sent(d)) is not None]
    return [(i, o) for i in ins for o in outs if (i.namespace, i.name) != (o.namespace, o.name)]


def _pairs(docs: Iterable[Mapping[str, Any]], types: Sequence[str]) -> list[Pair]:
    seen: dict[tuple[str, str, str, str, str], Pair] = {}
    for doc in docs:
        for i, o in event_pairs(doc, types):
            key = (i.namespace, i.name, o.namespace, o.name, repr((i.facets, o.facets)))
            seen.setdefault(key, (i, o))
    return list(seen.values())


def _one(tables: Sequence[Table]) -> Table | None:
    return tables[0] if len(tables) == 1 else None


def read_before(
    reader: TableReader,
    docs: Iterable[Mapping[str, Any]],
    types: Sequence[str],
    held: set[tuple[str, str]],
) -> Before:
    """What OpenMetadata holds on the pairs these events will write, before they are posted
    (pairs in ``held``, by id, are the ledger's already and are not read)."""
    before = Before()

    def around(table: Table) -> None:
        if table.id not in before.down:
            before.down[table.id], before.up[table.id] = reader.edges_around(table)

    for src, dst in _pairs(docs, types):
        s, d = reader.find_all([src]), reader.find_all([dst])
        one_s, one_d = _one(s.tables), _one(d.tables)
        if one_s is not None and one_d is not None:
            ids = (one_s.id, one_d.id)
            if one_s.id != one_d.id and ids not in held and ids not in before.direct:
                before.direct[ids] = edge_details(reader.http, *ids)
            continue
        for one, found in ((one_s, s), (one_d, d)):
            if one is not None:
                around(one)
            elif not found.tables and (place := reader.mapped_place(found)) is not None:
                around(place)  # where the server would create it: the read-back's anchor
    before.absent = reader.absent()
    return before


def unwritten(
    reader: TableReader,
    docs: Sequence[Mapping[str, Any]],
    types: Sequence[str],
    me: str,
    since_ms: int,
) -> list[int]:
    """The positions in ``docs`` of the events not all of whose edges are there, last written
    by ``me`` at ``since_ms`` or later. An event that makes no edge is not waited for."""
    out: list[int] = []
    for position, doc in enumerate(docs):
        for src, dst in event_pairs(doc, types):
            pair = reader.edge(reader.find_all([src]), reader.find_all([dst]))
            details = edge_details(reader.http, pair[0].id, pair[1].id) if pair else None
            if (
                details is None
                or not ours(details, me)
                or not isinstance(details.get("updatedAt"), int)
                or details["updatedAt"] < since_ms
            ):
                out.append(position)
                break
    return out
