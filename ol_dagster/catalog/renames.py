"""The RENAME decision of the catalogs that keep entities (the embedded catalog and Blindata).

A dataset a RENAME lifecycle event names (``previousIdentifier``) moves in place, keeping its
fields and flows, only when its previous identifier's System exists, this definition may change
both that System and the new one (``may_change``: a System it owns whose policy lets it clean),
the entity under the previous name exists and no entity has the new name yet. Otherwise nothing
moves: the new name is uploaded as a new entity and the old one is left to whoever owns it (and
to the cleanup, where this definition may clean). Which datasets are renamed, where their
previous name is filed and the ownership check are decided here, once; reading the Systems and
entities and moving the entity are each backend's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ol_dagster.catalog.systems import dataset_system_rules
from ol_dagster.lineage import LineageGraph
from ol_dagster.lineage.graph import DatasetNode
from ol_dagster.lineage.naming import Placement, place_dataset
from ol_dagster.ownership import may_change
from ol_dagster.sync_definition import SyncDefinition


@dataclass(frozen=True, slots=True)
class Rename:
    """One RENAME to consider: the dataset under its new name (placed by normalization), where
    its previous name is filed, and how the upload result reports it when it moves."""

    dataset: DatasetNode
    previous: Placement
    label: str  # "ns:name -> ns:name"


def renames(graph: LineageGraph, definition: SyncDefinition) -> list[Rename]:
    """The graph's datasets that carry a RENAME's previous identifier, with the System, schema
    and name that identifier is filed under by this definition's ``datasetSystems`` rules (in
    the System of its own that stands for one another definition claimed, as its datasets)."""
    rules = dataset_system_rules(definition)
    out = []
    for d in graph.datasets.values():
        if d.previous is None:
            continue
        previous = place_dataset(d.previous[0], d.previous[1], system_rules=rules)
        own = graph.claimed_systems.get(previous.system)
        if own is not None:
            previous = replace(previous, system=own)
        label = f"{d.previous[0]}:{d.previous[1]} -> {d.namespace}:{d.name}"
        out.append(Rename(d, previous, label))
    return out


def may_move(
    definition: SyncDefinition, old_system: dict[str, Any], new_system: dict[str, Any]
) -> bool:
    """Whether a rename may move an entity from the System of its previous name into that of its
    new one (their properties): only from and into Systems this definition may change."""
    return may_change(definition, old_system) and may_change(definition, new_system)
