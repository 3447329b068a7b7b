"""Sorting a post's events into accepted and rejected, with a reason per rejected event.

Pure: no HTTP, no database. The receiver stores what this accepts; ``ol-dagster inspect`` and the
tests use the same function, so what a producer is told is exactly what the store holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pydantic_core

from ol_dagster.openlineage.envelope import EventRejected, check_envelope, namespace_allowed
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
    intake = Intake()
    for index, event in enumerate(events):
        try:
            env = check_envelope(event)
            if env.job_namespace is not None and not namespace_allowed(
                env.job_namespace, allowed_job_namespaces
            ):
                raise EventRejected(
                    "job.namespace",
                    f"{env.job_namespace!r} is not in this definition's allowedJobNamespaces "
                    f"({', '.join(allowed_job_namespaces)})",
                )
        except EventRejected as exc:
            intake.rejected.append(Rejection(index, f"event {index}: {exc}"))
            continue
        assert isinstance(event, dict)
        intake.accepted.append(
            NewEvent(
                raw=pydantic_core.to_json(event),
                kind=env.kind.value,
                event_type=env.event_type,
                event_time=env.event_time,
                producer=event.get("producer"),
                job_namespace=env.job_namespace,
                job_name=env.job_name,
                run_id=env.run_id,
            )
        )
    return intake
