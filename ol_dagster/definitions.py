"""The Dagster entry point: ``defs``, every definition of the settings file (``OL_DAGSTER_SETTINGS``
or ``ol_dagster.yaml``), as ``dagster dev``, ``dagster api grpc`` and ``workspace.yaml`` load it.

``build_defs`` (``ol_dagster/defs/build.py``) is importable from here too: a project of its own
writes its ``definitions.py`` with it to pass a translator.
"""

from __future__ import annotations

import dagster as dg

from ol_dagster.defs.build import build_defs, chosen_definitions
from ol_dagster.defs.dagster_private import serves_asset_graph

__all__ = ["build_defs", "chosen_definitions", "defs"]


@dg.definitions
def defs() -> dg.Definitions:
    return build_defs(synced_lineage=serves_asset_graph())
