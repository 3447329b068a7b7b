"""Lineage reads every catalog backend shares: node ids, the ``NodeNotFound`` answer, the walk.

A ``lineage`` read is answered the way Marquez shows it whatever the backend: datasets and jobs
are nodes (``dataset:<ns>:<name>``, ``job:<ns>:<name>``), a data flow ``A -> B`` in scope
``ol:<ns>|<job>`` is the two edges ``A -> job`` and ``job -> B``, and an orchestration flow is
``parent job -> child job``. The embedded catalog walks its tables; the others (Blindata, and the
ledger catalogs for Marquez and OpenMetadata) collect an edge set and walk it here, so every
backend parses a node, refuses an unknown one and shapes its answer alike.
"""

from __future__ import annotations

from typing import Any

from ol_dagster.lineage.graph import FlowOwner


class NodeNotFound(LookupError):
    """The node is not in the catalog (what ``Catalog.lineage`` raises for an unknown node)."""


def parse_node(node: str) -> tuple[str, list[tuple[str, str]]]:
    """``dataset:<namespace>:<name>`` or ``job:<namespace>:<name>``, split like Marquez node ids.
    Namespaces and names may hold colons (``postgres://host:5432``), so every split is a
    candidate (namespace, name); the catalog decides which one exists."""
    kind, sep, rest = node.partition(":")
    if kind not in ("dataset", "job") or not sep or ":" not in rest:
        raise ValueError(
            f"{node!r}: a node is dataset:<namespace>:<name> or job:<namespace>:<name>"
        )
    return kind, [(rest[:i], rest[i + 1 :]) for i, ch in enumerate(rest) if ch == ":"]


def job_node(owner: FlowOwner) -> str:
    """The ``job:<ns>:<name>`` node of the job that owns a flow."""
    return f"job:{owner.namespace}:{owner.job}"


def lineage_of_edges(
    node: str, edges: set[tuple[str, str]], *, depth: int, upstream: bool, downstream: bool
) -> dict[str, Any]:
    """Lineage around ``node`` within a known edge set (catalogs read whole from an HTTP API or
    from the sync ledger), in the shape the embedded catalog's ``lineage`` answers."""
    nodes, seen_edges = {node}, set()
    for up, wanted in ((True, upstream), (False, downstream)):
        frontier = {node}
        for _ in range(depth if wanted else 0):
            nxt = set()
            for a, b in edges:
                if (b if up else a) in frontier:
                    seen_edges.add((a, b))
                    nxt.add(a if up else b)
            nodes |= nxt
            frontier = nxt
    return {
        "nodes": [{"id": n, "type": n.split(":", 1)[0]} for n in sorted(nodes)],
        "edges": [{"from": a, "to": b} for a, b in sorted(seen_edges)],
    }
