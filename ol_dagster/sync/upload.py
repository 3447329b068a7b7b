"""Upload one batch's graph, reading the cutoff from the catalog clock first.

The cutoff must be read before anything is written, from the catalog's clock (never this
process's): every object the upload touches then carries a last-update time at or after it, and
anything in the run's scopes still older than it was not described by this run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime

from ol_dagster.catalog.protocol import Catalog, FailedRow, UploadResult
from ol_dagster.catalog.renames import renames
from ol_dagster.catalog.systems import dataset_system_rules
from ol_dagster.lineage import LineageGraph, normalize
from ol_dagster.ownership import placements, systems_by_name
from ol_dagster.settings import SyncDefinition
from ol_dagster.sync.reports import GraphFacts


@dataclass(frozen=True, slots=True)
class UploadOutcome:
    cutoff: datetime | None  # None: the catalog could not tell its time, nothing was sent
    result: UploadResult
    # as uploaded: the datasets of Systems another definition claimed moved (``place_claimed``)
    graph: LineageGraph | None = None
    claimed: dict[str, str] = field(default_factory=dict)  # claimed System -> where they went


def build_graph(raw_events: Iterable[bytes], definition: SyncDefinition) -> LineageGraph:
    """The batch's graph, with datasets placed by the definition's ``datasetSystems`` rules."""
    return normalize(raw_events, dataset_systems=dataset_system_rules(definition))


def place_claimed(
    catalog: Catalog, graph: LineageGraph, definition: SyncDefinition
) -> tuple[LineageGraph, dict[str, str]]:
    """The graph with every dataset whose System another definition claimed (a CUTOFF System it
    created) moved to a System of this definition's own, ``<System> [<definition>]``: the owner's
    snapshots delete what they do not describe there, so no other definition's dataset may live
    in it. The graph given is left as it is (other catalogs of the definition read it too)."""
    # the Systems of the datasets, and of the previous names their RENAMEs give: a previous
    # name is filed where this definition's dataset of that name is, its own place too
    wanted = {d.system for d in graph.datasets.values()}
    wanted |= {r.previous.system for r in renames(graph, definition)}
    moves = placements(definition, wanted, systems_by_name(catalog.systems())) if wanted else {}
    if not moves:
        return graph, {}
    datasets = {
        key: replace(d, system=moves[d.system]) if d.system in moves else d
        for key, d in graph.datasets.items()
    }
    return replace(graph, datasets=datasets, claimed_systems=moves), moves


def graph_facts(graph: LineageGraph, claimed: dict[str, str] | None = None) -> GraphFacts:
    """What the cleanup needs from the graph, recorded with the upload for the cleanup step."""
    return {
        "claimedSystems": dict(claimed or {}),
        "jobNamespaces": graph.job_namespaces,
        "datasetSystems": sorted({d.system for d in graph.datasets.values()}),
        "describedJobs": sorted(list(k) for k in graph.described_jobs),
        "completedJobs": sorted(list(k) for k in graph.completed_jobs),
        "jobs": sorted(f"{ns}.{name}" for ns, name in graph.jobs),
        # datasets a DROP named, as the catalog files them: the cleanup plans their removal
        "drops": sorted(
            [d.system, d.schema, d.object_name, d.namespace, d.name]
            for d in graph.datasets.values()
            if d.dropped
        ),
    }


def upload_graph(
    catalog: Catalog,
    graph: LineageGraph,
    definition: SyncDefinition,
    raw_events: Callable[[], Iterable[bytes]] | None = None,
) -> UploadOutcome:
    try:
        cutoff = catalog.clock()
    except Exception as exc:
        # a catalog that is down is this catalog's failed upload, not the whole run's: beside
        # other catalogs of the definition it must block its own cleanup only (UPLOAD_FAILED)
        failed = FailedRow("batch", "*", f"clock: {type(exc).__name__}: {exc}")
        return UploadOutcome(None, UploadResult(failed=[failed]), graph, {})
    claimed: dict[str, str] = {}
    try:
        graph, claimed = place_claimed(catalog, graph, definition)
        result = catalog.upload(graph, definition, raw_events)
    except Exception as exc:  # a failed upload must be recorded, never crash past the guard
        result = UploadResult(failed=[FailedRow("batch", "*", f"{type(exc).__name__}: {exc}")])
    if graph.dangling:
        # dropped by normalization: never touched, so the cleanup removes their earlier copies
        result.dropped["DANGLING_FLOW"] = result.dropped.get("DANGLING_FLOW", 0) + len(
            graph.dangling
        )
    return UploadOutcome(cutoff, result, graph, claimed)
