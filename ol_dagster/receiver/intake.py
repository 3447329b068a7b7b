"""Sorting a post's events into accepted and rejected, with a reason per rejected event.

Each event is validated against the full OpenLineage models (``openlineage.models``), so a
standard facet of the wrong shape is refused at the door with its field path. Pure: no HTTP, no
database. The receiver stores what this accepts; ``ol-dagster inspect`` and the
tests use the same function, so what a producer is told is exactly what the store holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pydantic_core

from ol_dagster.gcpause import gc_paused
from ol_dagster.openlineage.envelope import EventRejected, namespace_allowed
from ol_dagster.openlineage.models import DatasetEvent, RunEvent, parse_event
from ol_dagster.store import NewEvent


@dataclass(frozen=True, slots=True)
class Rejection:
    index: int
    reason: str
    retriable: bool = False

    def as_dict(self) -> dict:
        return {"index": self.index, "reason": self.reason, "retriable": self.retriable}


@dataclass(slots=True)
class Intake:
    accepted: list[NewEvent] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)

    @property
    def received(self) -> int:
        return len(self.accepted) + len(self.rejected)


def sort_events(events: list[object], allowed_job_namespaces: list[str]) -> Intake:
    with gc_paused():
        return _sort_events(events, allowed_job_namespaces)


def _sort_events(events: list[object], allowed_job_namespaces: list[str]) -> Intake:
    intake = Intake()
    for index, event in enumerate(events):
        try:
            if isinstance(event, str | bytes):  # parse_event would read it as JSON text
                raise EventRejected("", "an event must be a JSON object, not a string")
            parsed = parse_event(event)
            job = None if isinstance(parsed, DatasetEvent) else parsed.job
            if job is not None and not namespace_allowed(job.namespace, allowed_job_namespaces):
                raise EventRejected(
                    "job.namespace",
                    f"{job.namespace!r} is not in this definition's allowedJobNamespaces "
                    f"({', '.join(allowed_job_namespaces)})",
                )
        except EventRejected as exc:
            intake.rejected.append(Rejection(index, f"event {index}: {exc}"))
            continue
        run = parsed if isinstance(parsed, RunEvent) else None
        intake.accepted.append(
            NewEvent(
                raw=pydantic_core.to_json(event),
                kind=parsed.kind.value,
                event_type=run.eventType if run else None,
                event_time=parsed.eventTime,
                producer=parsed.producer,
                job_namespace=job.namespace if job else None,
                job_name=job.name if job else None,
                run_id=run.run.runId if run else None,
            )
        )
    return intake
