"""The one place ol-dagster reaches into Dagster's private modules (``dagster._...``).

Dagster keeps these names out of its public API, so any release may move or change them. Each is
used here once, with why nothing public does the same, so that a Dagster upgrade that moves one
breaks this module only; ``ol_dagster_tests/project/test_layers.py`` refuses a private Dagster
import anywhere else in the package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

import dagster as dg

if TYPE_CHECKING:
    # what ``dg.define_asset_job`` returns (resolved against the assets when the Definitions are
    # built); Dagster does not export the class, so it is named for the type checker only
    from dagster._core.definitions.unresolved_asset_job_definition import (
        UnresolvedAssetJobDefinition,
    )

# a definition's sync job, as the sensors are given it
SyncJob: TypeAlias = "dg.JobDefinition | UnresolvedAssetJobDefinition"

# Set by the first load of a process that serves the asset graph (see ``serves_asset_graph``).
_serves_asset_graph = False


def serves_asset_graph() -> bool:
    """Whether this load serves the asset graph. Run and step workers reconstruct the definitions
    only to execute a sync or analysis job, which depends on no synced-lineage asset: they skip
    building them (at 100,000 synced jobs about two minutes and 3.7 GB per process).

    The load type alone does not tell them apart: a code server (``dagster dev``, ``dagster api
    grpc``) loads the definitions for ``INITIALIZATION``, then serves a ``RECONSTRUCTION`` of them
    made in the same process; a run or step worker is a new process that only reconstructs (and
    reconstruction metadata cannot mark the difference: Dagster hands the code server's on to
    every run). So a process that initialized the definitions serves the graph, one that only
    reconstructs them does not."""
    global _serves_asset_graph
    # not re-exported by ``dagster``: the load context is how Dagster says why it loads
    from dagster._core.definitions.definitions_load_context import (
        DefinitionsLoadContext,
        DefinitionsLoadType,
    )

    if DefinitionsLoadContext.get().load_type == DefinitionsLoadType.INITIALIZATION:
        _serves_asset_graph = True
    return _serves_asset_graph
