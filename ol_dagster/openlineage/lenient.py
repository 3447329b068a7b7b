"""Lenient extraction: what can be read from a template or a damaged event, for inspection.

``ol-dagster inspect --lenient`` and tests read events that are not valid as they stand (a
template with placeholders, a fragment without its envelope, a facet of the wrong shape). Here
the envelope is filled with visible placeholders and broken facets are dropped until the event
parses; the receiver never uses it.
"""

from __future__ import annotations

from typing import Any

from ol_dagster.openlineage.envelope import EventRejected, parse_event_time
from ol_dagster.openlineage.models import decode_json, parse_object
from ol_dagster.openlineage.structs import Event, json_type

_FACET_MAP_KEYS = frozenset({"facets", "inputFacets", "outputFacets"})
_MAX_REPAIRS = 50


def _repair(obj: dict[str, Any]) -> dict[str, Any]:
    """Fill the envelope fields a template or fragment leaves out, with visible placeholders."""
    import copy
    import uuid

    obj = copy.deepcopy(obj)
    if not isinstance(obj.get("producer"), str) or not obj["producer"]:
        obj["producer"] = "urn:ol-dagster:unknown-producer"
    try:
        parse_event_time(obj.get("eventTime"))
    except EventRejected:
        obj["eventTime"] = "1970-01-01T00:00:00Z"
    if not any(k in obj for k in ("run", "job", "dataset")) and (
        "inputs" in obj or "outputs" in obj
    ):
        obj["job"] = {}
    job = obj.get("job")
    if isinstance(job, dict):
        for key in ("namespace", "name"):
            if not isinstance(job.get(key), str) or not job[key]:
                job[key] = f"(unknown job {key})"
    for side in ("inputs", "outputs"):
        if isinstance(obj.get(side), list):
            obj[side] = [
                d
                for d in obj[side]
                if isinstance(d, dict)
                and all(isinstance(d.get(k), str) and d[k] for k in ("namespace", "name"))
            ]
    run = obj.get("run")
    if isinstance(run, dict) and (not isinstance(run.get("runId"), str) or "{{" in run["runId"]):
        job = obj.get("job")
        seed = f"{job.get('namespace')}/{job.get('name')}" if isinstance(job, dict) else "run"
        run["runId"] = str(uuid.uuid5(uuid.NAMESPACE_URL, seed))
    return obj


def _drop_broken_facet(obj: Any, path: str) -> bool:
    """Remove the facet a rejection's path points into; False when it is not in a facet."""
    target = obj
    parts = path.split(".") if path else []
    for i, part in enumerate(parts):
        if part in _FACET_MAP_KEYS and i + 1 < len(parts) and isinstance(target, dict):
            facets = target.get(part)
            if isinstance(facets, dict) and parts[i + 1] in facets:
                del facets[parts[i + 1]]
                return True
        try:
            target = target[int(part)] if isinstance(target, list) else target[part]
        except (KeyError, IndexError, TypeError, ValueError):
            return False
    return False


def parse_event_lenient(data: Any) -> Event:
    """Extract what can be extracted from a template or a damaged event: placeholders for a
    missing envelope, broken facets dropped. For inspection and tests, never for the receiver."""
    if isinstance(data, bytes | str):
        data = decode_json(data)
    if not isinstance(data, dict):
        raise EventRejected("", f"an event must be a JSON object, not {json_type(data)}")
    obj = _repair(data)
    for _ in range(_MAX_REPAIRS):
        try:
            return parse_object(obj, custom_facets=True)
        except EventRejected as exc:
            if not _drop_broken_facet(obj, exc.path):
                raise
    raise EventRejected("", "too many broken facets")
