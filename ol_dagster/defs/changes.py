"""A batch's lineage change set on its ``catalog_upload`` page, and the ``downstream_intact`` check.

The change set itself is recorded by the sync (``ol_dagster.sync.changes``); here it becomes a
Markdown table (the first ``CHANGES_SHOWN`` items, with the counts per kind and change) and a
check result whose severity the definition sets (``changes.downstreamIntact``).
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from ol_dagster.changes.changeset import CHANGES, KINDS, ChangeSet, Edge, Node, describe
from ol_dagster.changes.picture import picture_markdown
from ol_dagster.defs import constants as C
from ol_dagster.defs.report import rows_markdown
from ol_dagster.sync_definition import Severity

CHANGES_SHOWN = 50  # items listed on the page; ``ol-dagster changes`` gives them all
IMPACTS_SHOWN = 50


def changes_markdown(change_set: ChangeSet) -> str:
    """The counts per kind and change, then the first items, one a row."""
    if change_set.empty:
        return "_no change: every job and dataset is as it was synced before_"
    counts = [
        {"kind": kind, **{c: change_set.counts[kind][c] for c in CHANGES}}
        for kind in KINDS
        if any(change_set.counts[kind].values())
    ]
    rows = []
    for item in change_set.items:
        what, detail = describe(item)
        rows.append(
            {"kind": item["kind"], "change": item["change"], "object": what, "detail": detail}
        )
    return (
        rows_markdown(counts, ["kind", *CHANGES], len(KINDS))
        + "\n\n"
        + rows_markdown(rows, ["kind", "change", "object", "detail"], CHANGES_SHOWN)
    )


def changes_metadata(
    change_set: ChangeSet | None,
    neighbourhood: tuple[list[Node], list[Edge]] | None = None,
) -> dict[str, Any]:
    """The change set's metadata on ``catalog_upload`` (none when it was not recorded), with the
    picture of the changed neighbourhood when there is one."""
    if change_set is None:
        return {}
    totals = {c: sum(change_set.counts[k][c] for k in KINDS) for c in CHANGES}
    picture = (
        {"changePicture": dg.MetadataValue.md(picture_markdown(*neighbourhood))}
        if neighbourhood and neighbourhood[0]
        else {}
    )
    return {
        "changes": dg.MetadataValue.md(changes_markdown(change_set)),
        **picture,
        "changeCounts": dg.MetadataValue.json({k: dict(v) for k, v in change_set.counts.items()}),
        **{f"changes{c.capitalize()}": n for c, n in totals.items()},
    }


def _impact_row(hit: dict[str, Any]) -> dict[str, Any]:
    reads = hit["reads"]
    field = f".{reads['field']}" if "field" in reads else ""
    return {
        "definition": hit["definition"],
        "job": f"{hit['job']['namespace']}:{hit['job']['name']}",
        "dataset": f"{hit['dataset']['namespace']}:{hit['dataset']['name']}",
        "column": hit["column"] or "",
        "reads": f"{reads['namespace']}:{reads['name']}{field}",
    }


def downstream_check(change_set: ChangeSet | None, severity: Severity) -> dg.AssetCheckResult:
    """``downstream_intact``: fails (at ``severity``) when the batch took away what another job
    still reads, naming each downstream job, dataset and column."""
    if change_set is None:
        return dg.AssetCheckResult(
            check_name=C.DOWNSTREAM_INTACT,
            passed=True,
            description="no change set recorded: nothing was uploaded",
        )
    hits = list(change_set.impacted)
    if not hits:
        return dg.AssetCheckResult(
            check_name=C.DOWNSTREAM_INTACT,
            passed=True,
            description="nothing the batch took away is read by another job",
            metadata={"impacted": 0},
        )
    rows = [_impact_row(h) for h in hits]
    first = ", ".join(
        f"{r['job']} → {r['dataset']}" + (f".{r['column']}" if r["column"] else "")
        for r in rows[:3]
    )
    return dg.AssetCheckResult(
        check_name=C.DOWNSTREAM_INTACT,
        passed=False,
        severity=dg.AssetCheckSeverity(severity.value),
        description=f"{len(rows)} downstream reader(s) lost their input: {first}"
        + (" ..." if len(rows) > 3 else ""),
        metadata={
            "impacted": len(rows),
            "readers": dg.MetadataValue.md(
                rows_markdown(
                    rows, ["definition", "job", "dataset", "column", "reads"], IMPACTS_SHOWN
                )
            ),
        },
    )


def skipped_check(why: str) -> dg.AssetCheckResult:
    """``downstream_intact`` of an upload that did not happen (superseded, kept)."""
    return dg.AssetCheckResult(check_name=C.DOWNSTREAM_INTACT, passed=True, description=why)
