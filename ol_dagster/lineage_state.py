"""The lineage state: what a definition has synced, kept in the store for the asset graph.

Dagster loads a code location often (every process, every reload); the catalog may be remote and
large. So the external assets that show synced lineage are built from a snapshot taken after each
sync (and kept in the event store, which every Dagster process already reaches), never by querying
the catalog at load. A catalog that cannot export its state leaves the previous snapshot in place.
"""

from __future__ import annotations

from typing import Any

STATE_VERSION = 1


def empty_state() -> dict[str, Any]:
    return {
        "version": STATE_VERSION,
        "jobs": [],
        "datasets": [],
        "parents": [],
        "columnLineage": [],
    }


def export_state(catalog: Any, definition: Any) -> dict[str, Any] | None:
    """The catalog's state for ``definition``, or None when the backend cannot export one."""
    exporter = getattr(catalog, "export_state", None)
    return exporter(definition) if exporter is not None else None
