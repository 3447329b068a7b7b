"""Analysis results recorded on the embedded catalog's entities (``analysis``, by key).

The analyses (``ol_dagster/analysis/``) describe jobs and datasets; their results are kept on
the entities under a key of their own, in a column uploads never write, so a later upload does
not erase them.
"""

from __future__ import annotations

from sqlalchemy import Connection, select, update

from ol_dagster.catalog.embedded.tables import JOB, entities
from ol_dagster.catalog.protocol import AnalysisItem


def annotate(conn: Connection, key: str, items: list[AnalysisItem]) -> int:
    """Record ``(kind, namespace, name, properties)`` items (kind ``job`` or ``dataset``) under
    ``analysis[key]``; returns how many entities got one. Entities the catalog does not hold
    are skipped."""
    e = entities.c
    found = 0
    for kind, namespace, name, props in items:
        type_match = (e.type == JOB) if kind == "job" else (e.type != JOB)
        for eid, current in conn.execute(
            select(e.id, e.analysis).where(
                e.ol_namespace == namespace, e.ol_name == name, type_match
            )
        ).all():
            conn.execute(
                update(entities).where(e.id == eid).values(analysis={**(current or {}), key: props})
            )
            found += 1
    return found
