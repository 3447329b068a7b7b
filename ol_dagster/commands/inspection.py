"""``ol-dagster inspect``: what ol-dagster makes of some event files, with no store and no catalog.

Per event: accepted, or the precise reason it would be rejected (the same validation the receiver
applies; with a definition, its job namespaces and name limit too). Then the counts of the graph
the accepted events normalize into, so a producer team can check its events before pointing them
at a receiver.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ol_dagster.commands.eventfiles import BrokenLine, UnreadableFile, read_events
from ol_dagster.lineage import normalize
from ol_dagster.openlineage.envelope import EventRejected, check_job_namespace
from ol_dagster.openlineage.lenient import parse_event_lenient
from ol_dagster.openlineage.models import (
    DEFAULT_MAX_NAME_LENGTH,
    Event,
    check_name_lengths,
    parse_event,
)


def inspect_files(
    paths: list[str],
    *,
    lenient: bool = False,
    max_name_length: int = DEFAULT_MAX_NAME_LENGTH,
    job_namespaces: Sequence[str] | None = None,
) -> dict[str, Any]:
    """``lenient`` reads templates and fragments: placeholders for a missing envelope, broken
    facets dropped (never what the receiver does). ``max_name_length``: the receiver's bound on
    a namespace or name (a definition's ``limits.maxNameLength``, else its default);
    ``job_namespaces``: the job namespaces a definition admits (``namespace_patterns``), judged
    as the receiver judges its posts (None: any)."""
    parse = parse_event_lenient if lenient else parse_event
    rows: list[dict[str, Any]] = []
    accepted: list[Event] = []
    for path in paths:
        try:
            events = read_events(path)
        except UnreadableFile as exc:
            rows.append({"file": path, "index": 0, "accepted": False, "reason": str(exc)})
            continue
        for index, raw in enumerate(events):
            if isinstance(raw, BrokenLine):
                rows.append({"file": path, "index": index, "accepted": False, "reason": raw.reason})
                continue
            try:
                event = parse(raw)
                check_name_lengths(raw, max_name_length)
                if job_namespaces is not None:
                    job = getattr(event, "job", None)
                    check_job_namespace(job.namespace if job else None, job_namespaces)
                accepted.append(event)
            except EventRejected as exc:
                rows.append({"file": path, "index": index, "accepted": False, "reason": str(exc)})
                continue
            rows.append({"file": path, "index": index, "accepted": True, "reason": None})
    graph = normalize(accepted)
    return {"events": rows, "graph": graph.counts()}


def render_table(result: dict[str, Any]) -> str:
    lines = []
    width = max((len(r["file"]) for r in result["events"]), default=4)
    for r in result["events"]:
        verdict = "accepted" if r["accepted"] else f"REJECTED  {r['reason']}"
        lines.append(f"{r['file']:<{width}}  #{r['index']:<3} {verdict}")
    ok = sum(r["accepted"] for r in result["events"])
    definition = result.get("definition")
    judged = (
        f"by definition {definition}"
        if definition
        else "(no definition judged their job namespaces: --definition NAME)"
    )
    lines.append(f"\n{ok} of {len(result['events'])} event(s) accepted {judged}")
    lines.append("graph: " + ", ".join(f"{k} {v}" for k, v in result["graph"].items()))
    return "\n".join(lines)
