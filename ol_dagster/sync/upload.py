"""Upload one batch's graph, reading the cutoff from the catalog clock first.

The cutoff must be read before anything is written, from the catalog's clock (never this
process's): every object the upload touches then carries a last-update time at or after it, and
anything in the run's scopes still older than it was not described by this run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ol_dagster.catalog.protocol import Catalog, FailedRow, UploadResult
from ol_dagster.lineage import LineageGraph
from ol_dagster.settings import Definition


@dataclass(frozen=True, slots=True)
class UploadOutcome:
    cutoff: datetime
    result: UploadResult


def upload_graph(catalog: Catalog, graph: LineageGraph, definition: Definition) -> UploadOutcome:
    cutoff = catalog.clock()
    try:
        result = catalog.upload(graph, definition)
    except Exception as exc:  # a failed upload must be recorded, never crash past the guard
        result = UploadResult(failed=[FailedRow("batch", "*", f"{type(exc).__name__}: {exc}")])
    return UploadOutcome(cutoff, result)
