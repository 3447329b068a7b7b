"""The parts of the OpenLineage envelope shared by the models, the receiver and the store.

Event kinds, the error every rejection is reported with (a field path and a reason a person can act
on), the lenient reading of ``eventTime`` (zone-less times as UTC, nanoseconds cut to microseconds)
and the job namespace patterns (``allowedJobNamespaces``, ``sharedJobNamespaces``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from enum import StrEnum
from fnmatch import fnmatchcase


class EventKind(StrEnum):
    RUN = "RunEvent"
    JOB = "JobEvent"
    DATASET = "DatasetEvent"


# Python's fromisoformat stops at microseconds; Flink and Debezium send nanoseconds.
_EXTRA_FRACTION = re.compile(r"(\.\d{6})\d+")


class EventRejected(ValueError):
    """An event that cannot be accepted: ``path`` is the field, ``reason`` says why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}" if path else reason)
        self.path = path
        self.reason = reason


def parse_event_time(value: object, path: str = "eventTime") -> datetime:
    """An aware UTC datetime; zone-less times are read as UTC (Python clients send them)."""
    if not isinstance(value, str) or not value:
        raise EventRejected(path, "must be an ISO 8601 date-time string")
    try:
        # most times read as they are (Python 3.11 cuts a longer fraction as the regex does);
        # ``strip`` and the regex only for the rest: a third of the cost of a typical event's check
        parsed = datetime.fromisoformat(value)
    except ValueError:
        text = _EXTRA_FRACTION.sub(r"\1", value.strip())
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise EventRejected(path, f"{value!r} is not an ISO 8601 date-time") from None
    if parsed.tzinfo is UTC:
        return parsed
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:00-05:00, 0001-01-01T00:00+01:00: no year 10000 or 0
        raise EventRejected(path, f"{value!r} is out of range once converted to UTC") from None


def namespace_allowed(namespace: str, patterns: Sequence[str]) -> bool:
    """Whether shell-style patterns (``etl``, ``features*``, ``spark?``, ``*``) admit a namespace,
    case-sensitively. A definition admits ``SyncDefinition.namespace_patterns``: its
    ``allowedJobNamespaces`` and its ``sharedJobNamespaces``."""
    return any(fnmatchcase(namespace, p) for p in patterns)


def check_job_namespace(namespace: str | None, job_namespaces: Sequence[str]) -> None:
    """``EventRejected`` for a job namespace the definition does not admit (``job_namespaces``:
    its ``namespace_patterns``); an event without a job (a dataset event) passes."""
    if namespace is not None and not namespace_allowed(namespace, job_namespaces):
        raise EventRejected(
            "job.namespace",
            f"{namespace!r} is not in this definition's allowedJobNamespaces or "
            f"sharedJobNamespaces ({', '.join(job_namespaces)})",
        )
