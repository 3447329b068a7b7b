"""What every OpenLineage event must carry before ol-dagster stores it.

The receiver only keeps events it can account for later: it must know the event's kind (RunEvent,
JobEvent or DatasetEvent), its time, and the job (or dataset) it is about, because batches are
synced, cleaned and audited per job. Producers are messy (see the corpus MANIFEST): a missing
``schemaURL`` or ``eventType``, zone-less or nanosecond timestamps are accepted since the meaning is
clear; a missing ``run.runId`` or ``job.name`` is rejected because the event could not be placed.

Errors name the field path and the reason, so the answer to a producer is something a person can
act on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from fnmatch import fnmatchcase


class EventKind(StrEnum):
    RUN = "RunEvent"
    JOB = "JobEvent"
    DATASET = "DatasetEvent"


EVENT_TYPES = frozenset({"START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"})

# Python's fromisoformat stops at microseconds; Flink and Debezium send nanoseconds.
_EXTRA_FRACTION = re.compile(r"(\.\d{6})\d+")


class EventRejected(ValueError):
    """An event that cannot be accepted: ``path`` is the field, ``reason`` says why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}" if path else reason)
        self.path = path
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Envelope:
    """The identity of an accepted event, as the event store indexes it."""

    kind: EventKind
    event_type: str | None
    event_time: datetime
    job_namespace: str | None
    job_name: str | None
    run_id: str | None


def parse_event_time(value: object, path: str = "eventTime") -> datetime:
    """An aware UTC datetime; zone-less times are read as UTC (Python clients send them)."""
    if not isinstance(value, str) or not value:
        raise EventRejected(path, "must be an ISO 8601 date-time string")
    text = _EXTRA_FRACTION.sub(r"\1", value.strip())
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise EventRejected(path, f"{value!r} is not an ISO 8601 date-time") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def _kind(event: dict) -> EventKind:
    schema_url = event.get("schemaURL")
    if isinstance(schema_url, str) and "#" in schema_url:
        fragment = schema_url.rsplit("#", 1)[1].rsplit("/", 1)[-1]
        if fragment in EventKind._value2member_map_:
            return EventKind(fragment)
    if "run" in event:
        return EventKind.RUN
    if "job" in event:
        return EventKind.JOB
    if "dataset" in event:
        return EventKind.DATASET
    raise EventRejected("", "not an OpenLineage event: it has none of 'run', 'job' or 'dataset'")


def _name_pair(event: dict, key: str) -> tuple[str, str]:
    obj = event.get(key)
    if obj is None:
        raise EventRejected(key, "is required")
    if not isinstance(obj, dict):
        raise EventRejected(key, "must be an object")
    pair = []
    for field in ("namespace", "name"):
        value = obj.get(field)
        if not isinstance(value, str) or not value.strip():
            raise EventRejected(f"{key}.{field}", "is required and must be a non-empty string")
        pair.append(value)
    return pair[0], pair[1]


def check_envelope(event: object) -> Envelope:
    """Check what the spec requires of every event; raise ``EventRejected`` naming the field."""
    if not isinstance(event, dict):
        raise EventRejected("", f"an event must be a JSON object, not {_json_type(event)}")
    kind = _kind(event)
    event_time = parse_event_time(event.get("eventTime"))
    producer = event.get("producer")
    if not isinstance(producer, str) or not producer:
        raise EventRejected("producer", "is required and must be a non-empty string (a URI)")
    schema_url = event.get("schemaURL")
    if schema_url is not None and not isinstance(schema_url, str):
        raise EventRejected("schemaURL", "must be a string")

    if kind is EventKind.DATASET:
        if "job" in event or "run" in event:
            raise EventRejected("", "a DatasetEvent must not carry 'job' or 'run'")
        _name_pair(event, "dataset")
        return Envelope(kind, None, event_time, None, None, None)

    namespace, name = _name_pair(event, "job")
    if kind is EventKind.JOB:
        if "run" in event:
            raise EventRejected("run", "a JobEvent must not carry 'run'")
        return Envelope(kind, None, event_time, namespace, name, None)

    run = event.get("run")
    if not isinstance(run, dict):
        raise EventRejected("run", "is required and must be an object")
    run_id = run.get("runId")
    if not isinstance(run_id, str) or not run_id.strip():
        raise EventRejected("run.runId", "is required and must be a non-empty string")
    event_type = event.get("eventType")
    if event_type is not None and event_type not in EVENT_TYPES:
        allowed = ", ".join(sorted(EVENT_TYPES))
        raise EventRejected("eventType", f"{event_type!r} is not one of {allowed}")
    return Envelope(kind, event_type, event_time, namespace, name, run_id)


def namespace_allowed(namespace: str, patterns: list[str]) -> bool:
    """``allowedJobNamespaces`` are shell-style patterns (``etl``, ``features*``, ``*``)."""
    return any(fnmatchcase(namespace, p) for p in patterns)


def _json_type(value: object) -> str:
    match value:
        case None:
            return "null"
        case bool():
            return "a boolean"
        case int() | float():
            return "a number"
        case str():
            return "a string"
        case list():
            return "an array"
    return type(value).__name__
