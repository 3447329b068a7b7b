"""Markdown renderings for the Dagster UI: tables a person reads on an asset's page."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ol_dagster.sync.reports import CallReport, CleanupReport, ReconciledCall

# kept objects listed one by one in the summary; the report (JSON) has them all
KEPT_SHOWN = 50


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def rows_markdown(rows: Sequence[Mapping[str, Any]], columns: list[str], limit: int) -> str:
    if not rows:
        return "_none_"
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows[:limit]:
        lines.append("| " + " | ".join(_cell(row.get(c)) for c in columns) + " |")
    if len(rows) > limit:
        lines.append(f"\n_{len(rows) - limit} more not shown_")
    return "\n".join(lines)


def counts_markdown(counts: dict[str, dict[str, int]]) -> str:
    rows = [
        {"by": by, "value": value, "events": n}
        for by, values in counts.items()
        for value, n in values.items()
    ]
    return rows_markdown(rows, ["by", "value", "events"], 500)


def cleanup_markdown(report: CleanupReport) -> str:
    head = [
        f"**mode** {report.get('mode')} · **cutoff** {report.get('cutoff')} · "
        f"**skippedReason** {report.get('skippedReason') or '—'}",
        "",
    ]
    rows = []
    for call in report.get("calls", []):
        where = _where(call)
        outcomes = call.get("outcomes") or {}
        for kind in sorted(set(call.get("dryRun") or {}) | set(call.get("real") or {})):
            # planned but not removed: the catalog did not have it, it is another source's, or
            # it refused (tried again next run)
            others = ", ".join(
                f"{outcome} {counts[kind]}"
                for outcome, counts in sorted(outcomes.items())
                if counts.get(kind)
            )
            rows.append(
                {
                    "call": call["target"],
                    "on": where,
                    "objectType": kind,
                    "dryRun": (call.get("dryRun") or {}).get(kind),
                    "real": (call.get("real") or {}).get(kind, "—"),
                    "notRemoved": others or "—",
                }
            )
    table = rows_markdown(rows, ["call", "on", "objectType", "dryRun", "real", "notRemoved"], 200)
    removed = ", ".join(report.get("removedJobs") or []) or "none"
    return "\n".join(
        [
            *head,
            table,
            "",
            f"**removed jobs**: {removed}",
            *_inventories(report),
            *_kept(report),
            *_reconciled(report.get("reconciled")),
        ]
    )


def _kept(report: CleanupReport) -> list[str]:
    """What the catalog kept although this definition no longer describes it: by whom
    (``keptBy``), and each object with who else holds it (``keptObjects``, the first
    ``KEPT_SHOWN``, then how many more)."""
    calls = report.get("calls", [])
    by = report.get("keptBy") or {}
    if not by:
        for call in calls:
            for who, n in (call.get("keptBy") or {}).items():
                by[who] = by.get(who, 0) + n
    objects = [o for call in calls for o in call.get("keptObjects") or []]
    if not by and not objects:
        return []
    kept_by = ", ".join(f"{_cell(w)} {n}" for w, n in sorted(by.items()))
    lines = ["", f"**kept by**: {kept_by or '—'}"]
    if objects:
        lines += ["", "**kept objects**:", ""]
        lines += [f"- {_cell(o)}" for o in objects[:KEPT_SHOWN]]
        if len(objects) > KEPT_SHOWN:
            lines += ["", f"_{len(objects) - KEPT_SHOWN} more not shown_"]
    return lines


def _inventories(report: CleanupReport) -> list[str]:
    """Each producer inventory's call: the parent whose list no longer names these jobs, and
    whether they went (planned only under a dry run or a guard)."""
    out = []
    for call in report.get("calls", []):
        if call["target"] == "retireJobs":
            done = "retired" if call.get("real") is not None else "planned, not retired"
            jobs = ", ".join(call.get("jobs") or [])
            out.append(
                f"**{call.get('reason')}** ({call.get('reader')} list of {call.get('parent')}, "
                f"{done}): {jobs}"
            )
    return out


def _where(call: CallReport | ReconciledCall) -> str:
    return call.get("system") or ", ".join(call.get("scopePrefixes") or [])


def _reconciled(calls: list[ReconciledCall] | None) -> list[str]:
    """The ``reconciled`` part: real calls of earlier runs that died before their report (from
    the cleanup journal), with what each removed; each is listed in one report only."""
    if not calls:
        return []
    rows = [
        {
            "run": call.get("runId"),
            "batch": call.get("batchId"),
            "call": call.get("target"),
            "on": _where(call),
            "objectType": kind,
            "planned": (call.get("planned") or {}).get(kind),
            "removed": (call.get("removed") or {}).get(kind, 0),
            # DONE: the call returned before its process died; RECONCILED: counted afterwards
            "status": call.get("status"),
        }
        for call in calls
        for kind in sorted(set(call.get("planned") or {}) | set(call.get("removed") or {}))
    ]
    columns = ["run", "batch", "call", "on", "objectType", "planned", "removed", "status"]
    jobs = sorted({j for call in calls for j in call.get("removedJobs") or []})
    return [
        "",
        "**removed by earlier runs that died before their report** (reconciled from the cleanup "
        "journal):",
        "",
        rows_markdown(rows, columns, 200),
        "",
        f"**jobs they removed**: {', '.join(jobs) or 'none'}",
    ]
