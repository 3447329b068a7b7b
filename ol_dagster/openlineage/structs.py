"""The shapes of an OpenLineage event: the typed events and what msgspec decodes them from.

``RunEvent``, ``JobEvent`` and ``DatasetEvent`` (spec 2-0-2, and the 1-x events producers still
send) are what the rest of ol-dagster reads; the envelopes are what the decoder fills, one per
kind, with the fields in the spec's order and ``eventTime`` as sent. How an event is told to be
of one kind, and what a kind must not carry, is here too. ``models`` turns bytes into these.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Literal

from msgspec import UNSET, Struct, UnsetType, field

from ol_dagster.openlineage.envelope import EventKind
from ol_dagster.openlineage.facets import (
    DatasetFacets,
    InputFacets,
    JobFacets,
    Name,
    OutputFacets,
    RunFacets,
)

EventType = Literal["START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"]


class _Node(Struct, frozen=True, kw_only=True, gc=False):
    """Immutable; never in a reference cycle (decoded JSON), so the collector need not track it."""


class Run(_Node, frozen=True):
    runId: Name
    facets: RunFacets = field(default_factory=RunFacets)


class Job(_Node, frozen=True):
    namespace: Name
    name: Name
    facets: JobFacets = field(default_factory=JobFacets)


class Dataset(_Node, frozen=True):
    namespace: Name
    name: Name
    facets: DatasetFacets = field(default_factory=DatasetFacets)


class InputDataset(Dataset, frozen=True, kw_only=True):
    inputFacets: InputFacets = field(default_factory=InputFacets)


class OutputDataset(Dataset, frozen=True, kw_only=True):
    outputFacets: OutputFacets = field(default_factory=OutputFacets)


# -- the typed events (built from a decoded envelope, never decoded themselves) -------------------


class _BaseEvent(_Node, frozen=True):
    eventTime: datetime
    producer: str
    schemaURL: str | None = None


class RunEvent(_BaseEvent, frozen=True, kw_only=True):
    kind: ClassVar[Literal[EventKind.RUN]] = EventKind.RUN
    eventType: EventType | None = None
    run: Run
    job: Job
    inputs: list[InputDataset] = []
    outputs: list[OutputDataset] = []


class JobEvent(_BaseEvent, frozen=True, kw_only=True):
    kind: ClassVar[Literal[EventKind.JOB]] = EventKind.JOB
    job: Job
    inputs: list[InputDataset] = []
    outputs: list[OutputDataset] = []


class DatasetEvent(_BaseEvent, frozen=True, kw_only=True):
    kind: ClassVar[Literal[EventKind.DATASET]] = EventKind.DATASET
    dataset: Dataset


Event = RunEvent | JobEvent | DatasetEvent

# -- what msgspec decodes: the fields of each kind, in the spec's order, eventTime as sent --------


class Envelope(_Node, frozen=True):
    eventTime: str
    producer: Name
    schemaURL: str | None = None


class _RunEnvelope(Envelope, frozen=True, kw_only=True):
    eventType: EventType | None = None
    run: Run
    job: Job
    inputs: list[InputDataset] = []
    outputs: list[OutputDataset] = []


class _JobEnvelope(Envelope, frozen=True, kw_only=True):
    job: Job
    inputs: list[InputDataset] = []
    outputs: list[OutputDataset] = []


class _DatasetEnvelope(Envelope, frozen=True, kw_only=True):
    dataset: Dataset


class AnyEnvelope(Envelope, frozen=True, kw_only=True):
    """Bytes come undecoded, so the kind is not known yet: every kind's fields, none required.
    Stricter than any one kind (a DatasetEvent's ``inputs`` are validated too), never laxer."""

    eventType: EventType | None = None
    run: Run | UnsetType = UNSET
    job: Job | UnsetType = UNSET
    dataset: Dataset | UnsetType = UNSET
    inputs: list[InputDataset] = []
    outputs: list[OutputDataset] = []


RUN, JOB, DATASET = EventKind.RUN.value, EventKind.JOB.value, EventKind.DATASET.value
NOT_AN_EVENT = "not an OpenLineage event: an object with 'run', 'job' or 'dataset' is expected"


def kind_of(obj: Any) -> str | None:
    if not isinstance(obj, dict):
        return None
    schema_url = obj.get("schemaURL")
    if isinstance(schema_url, str) and "#" in schema_url:
        fragment = schema_url.rsplit("#", 1)[1].rsplit("/", 1)[-1]
        if fragment in EventKind._value2member_map_:
            return fragment
    for key, kind in (
        ("run", EventKind.RUN),
        ("job", EventKind.JOB),
        ("dataset", EventKind.DATASET),
    ):
        if key in obj:
            return kind.value
    return None


def forbidden(kind: str, has: Any) -> str | None:
    """What an event of ``kind`` carries that it must not (``has(key)``: whether it is there)."""
    if kind == JOB and has("run"):
        return "a JobEvent must not carry 'run'"
    if kind == DATASET and (has("job") or has("run")):
        return "a DatasetEvent must not carry 'job' or 'run'"
    return None


BY_KIND: dict[str, type[Envelope]] = {
    RUN: _RunEnvelope,
    JOB: _JobEnvelope,
    DATASET: _DatasetEnvelope,
}

Decoded = tuple[str, Any, datetime]  # (kind, envelope, eventTime): what either path decides


def json_type(value: object) -> str:
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
