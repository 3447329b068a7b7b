"""The cleanup calls of producer inventories: a parent's children its whole list no longer names.

``ownership.decide`` keeps the lists that may retire anything (a reader the definition turned on,
a whole run, a namespace the definition alone writes); here the catalog is asked for the parent's
children, ``ownership.retired_children`` picks those to retire, and one ``retireJobs`` call is
planned per parent and job System, by the cutoff, so it is rehearsed, capped, shared, journaled
and reported like every other call (``sync.cleanup``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ol_dagster.catalog.protocol import Catalog, CleanupCounts, RetiresChildren
from ol_dagster.catalog.systems import job_system_for
from ol_dagster.lineage.graph import NodeKey
from ol_dagster.lineage.inventories import Inventory
from ol_dagster.ownership import NOT_IN_INVENTORY, retired_children
from ol_dagster.settings import SyncDefinition
from ol_dagster.sync.reports import CallArgs, CallDescription, CleanupWarning

INVENTORY_NOT_SUPPORTED = "INVENTORY_NOT_SUPPORTED"


def plan(
    catalog: Catalog, definition: SyncDefinition, inventories: Iterable[Inventory], cutoff: datetime
) -> tuple[list[tuple[CallDescription, CallArgs]], list[CleanupWarning]]:
    """The ``retireJobs`` calls (description, arguments) of the verdict's inventories."""
    calls: list[tuple[CallDescription, CallArgs]] = []
    warnings: list[CleanupWarning] = []
    for inv in inventories:
        parent = f"{inv.parent[0]}.{inv.parent[1]}"
        if not isinstance(catalog, RetiresChildren):
            warnings.append({"code": INVENTORY_NOT_SUPPORTED, "parent": parent})
            continue
        by_system: dict[str, list[NodeKey]] = {}
        for job in retired_children(definition, inv, catalog.children(inv.parent)):
            by_system.setdefault(job_system_for(definition, job[0]), []).append(job)
        for system, jobs in sorted(by_system.items()):
            description: CallDescription = {
                "system": system,
                "reason": NOT_IN_INVENTORY,
                "reader": inv.reader,
                "parent": parent,
                "jobs": [f"{ns}.{name}" for ns, name in jobs],
                "deleteBefore": cutoff.isoformat(),
            }
            args: CallArgs = {
                "system": system,
                "jobs": [list(j) for j in jobs],
                "before": cutoff.isoformat(),
            }
            calls.append((description, args))
    return calls, warnings


def invoke(catalog: Catalog, args: Mapping[str, Any], dry: bool) -> CleanupCounts:
    """Make a recorded ``retireJobs`` call (a plan's, or a journal entry replayed)."""
    if not isinstance(catalog, RetiresChildren):
        raise ValueError("this catalog cannot retire chosen jobs (INVENTORY_NOT_SUPPORTED)")
    return catalog.retire_jobs(
        args["system"],
        jobs=[(ns, name) for ns, name in args["jobs"]],
        before=datetime.fromisoformat(args["before"]),
        dry_run=dry,
    )


def retired(done: Iterable[tuple[CallDescription, Sequence[str]]]) -> list[dict[str, str]]:
    """Each job the real ``retireJobs`` calls removed, with its parent, reader and reason."""
    out = [
        {
            "job": job,
            "parent": d.get("parent", ""),
            "reader": d.get("reader", ""),
            "reason": d.get("reason", ""),
        }
        for d, jobs in done
        for job in jobs
    ]
    return sorted(out, key=lambda r: r["job"])
