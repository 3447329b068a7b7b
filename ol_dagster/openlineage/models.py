"""Parsing RunEvent, JobEvent and DatasetEvent (spec 2-0-2, and the 1-x events producers still
send).

``parse_event`` validates one event from bytes (or an already-parsed object) and returns a typed
event, or raises ``EventRejected`` naming the field path and the reason. The kind is told by the
``schemaURL`` fragment (the reliable signal: 1-x events say ``#/definitions/RunEvent``, 2-x
``#/$defs/RunEvent``), else by which of ``run``/``job``/``dataset`` is present.

Lenient where the meaning is clear: a missing ``schemaURL`` or ``eventType``, zone-less times (read
as UTC), nanoseconds, a ``runId`` that is not a UUID. Strict where it would be lost: no job name, no
run id, a standard facet of the wrong shape.

How: msgspec decodes an event into Structs while it validates it, in C, about as fast as
``orjson.loads`` reads it (``benchmarks/parse.py``). That is the fast path, and it is deliberately
narrower than the rules: whatever it cannot decide (a ``_deleted`` marker, a name that may be blank,
a field of the wrong type, an unparseable ``eventTime``) falls to the exact path, which applies
every rule in Python around msgspec, field by field in the spec's order, and either accepts the
event or names the first field at fault. So the fast path never accepts what the exact path
refuses, and a rejection always comes from the exact path with its field path and reason.
``benchmarks/check_fast_paths.py`` compares the two on the corpus and tens of thousands of mutated
events. The Python post-checks, where msgspec cannot express a rule:

- a ``Name`` must not be blank (``names_blank``, ``first_blank``): a regex per string costs more
  than the whole decode, so the decoder checks the type and length and Python looks for blanks;
- ``eventTime`` is read by ``parse_event_time`` (zone-less as UTC, nanoseconds), not by msgspec;
- the kind, and what a kind must not carry (``kind_of``, ``forbidden``);
- ``_deleted`` markers and custom facets are taken out of the facet maps before decoding
  (``split_facets``) and put back on the typed maps (``deleted``, ``custom``).

Compared with the pydantic models these replace (checked on the same mutated events): the same
events are accepted, with the same typed content, and a rejection names the same field with the
same reason, except that (1) with several errors inside one nested object the one named is the
first in the event's order, not the model's; (2) an event that is not valid JSON is described in
msgspec's words (the receiver parses bodies itself); (3) pydantic's ``populate_by_name`` no longer
applies: ``producer`` in a facet (not ``_producer``), ``deleted`` for ``_deleted``, ``schema_``
for ``schema`` and a top-level ``kind`` are unknown keys, as the spec has them, not fields.

The parts: the typed events and their envelopes (``structs``), catalog keys never blank nor too
long (``names``), facet maps split and put back (``facet_maps``), the exact path and its reasons
(``exact``), the fast path and the API here; templates and damaged events for inspection
(``lenient``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
from msgspec import UNSET, ValidationError

from ol_dagster.openlineage.envelope import EventKind, EventRejected, parse_event_time
from ol_dagster.openlineage.exact import exact_path
from ol_dagster.openlineage.facet_maps import attach_facets, split_facets
from ol_dagster.openlineage.names import (
    CANONICAL,
    DEFAULT_MAX_NAME_LENGTH,
    Family,
    check_name_lengths,
    family,
    names_blank,
)
from ol_dagster.openlineage.structs import (
    DATASET,
    JOB,
    RUN,
    AnyEnvelope,
    Dataset,
    DatasetEvent,
    Decoded,
    Event,
    EventType,
    InputDataset,
    Job,
    JobEvent,
    OutputDataset,
    Run,
    RunEvent,
    forbidden,
    kind_of,
)

# the typed events and the name-length rule, read by the rest of ol-dagster from here
__all__ = [
    "DEFAULT_MAX_NAME_LENGTH",
    "Dataset",
    "DatasetEvent",
    "Event",
    "EventHeader",
    "EventType",
    "InputDataset",
    "Job",
    "JobEvent",
    "OutputDataset",
    "Run",
    "RunEvent",
    "check_event",
    "check_name_lengths",
    "header_of",
    "parse_event",
]

# -- the fast path ---------------------------------------------------------------------------------

_ANY = msgspec.json.Decoder(AnyEnvelope)
_JSON = msgspec.json.Decoder()


def _fast_bytes(raw: bytes | str) -> Decoded | None:
    """Decode and validate bytes in one pass; None when the exact path must decide."""
    try:
        env = _ANY.decode(raw)
    except msgspec.DecodeError:  # ValidationError included
        return None
    schema_url = env.schemaURL
    kind = None
    if schema_url is not None and "#" in schema_url:
        fragment = schema_url.rsplit("#", 1)[1].rsplit("/", 1)[-1]
        if fragment in EventKind._value2member_map_:
            kind = fragment
    has_run, has_job = env.run is not UNSET, env.job is not UNSET
    if kind is None:
        kind = RUN if has_run else JOB if has_job else DATASET
    if kind == RUN:
        ok = has_run and has_job
    elif kind == JOB:
        ok = has_job and not has_run
    else:
        ok = env.dataset is not UNSET and not has_job and not has_run
    if not ok or names_blank(env):
        return None
    try:
        return kind, env, parse_event_time(env.eventTime)
    except EventRejected:
        return None


def _fast_object(obj: dict[str, Any], family: Family, kind: str | None = None) -> Decoded | None:
    """Validate a parsed event against its kind's envelope; None when the exact path must
    decide. ``kind``: told already, and what it must not carry checked."""
    if kind is None:
        kind = kind_of(obj)
        if kind is None or forbidden(kind, obj.__contains__):
            return None
    try:
        env = msgspec.convert(obj, family.by_kind[kind])
    except ValidationError:
        return None
    if names_blank(env):
        return None
    try:
        return kind, env, parse_event_time(env.eventTime)
    except EventRejected:
        return None


def _build(kind: str, env: Any, time: datetime) -> Event:
    if kind == RUN:
        return RunEvent(
            eventTime=time,
            producer=env.producer,
            schemaURL=env.schemaURL,
            eventType=env.eventType,
            run=env.run,
            job=env.job,
            inputs=env.inputs,
            outputs=env.outputs,
        )
    if kind == JOB:
        return JobEvent(
            eventTime=time,
            producer=env.producer,
            schemaURL=env.schemaURL,
            job=env.job,
            inputs=env.inputs,
            outputs=env.outputs,
        )
    return DatasetEvent(
        eventTime=time, producer=env.producer, schemaURL=env.schemaURL, dataset=env.dataset
    )


# -- the API ---------------------------------------------------------------------------------------


def decode_json(data: bytes | str) -> Any:
    try:
        return _JSON.decode(data)
    except msgspec.DecodeError as exc:
        raise EventRejected("", f"not valid JSON: {exc}") from None


def parse_object(obj: Any, custom_facets: bool) -> Event:
    if type(obj) is dict:
        kind = kind_of(obj)
        if kind is not None and not forbidden(kind, obj.__contains__):
            clean, extras = split_facets(obj, kind)
            decoded = _fast_object(clean, CANONICAL, kind)
            if decoded is not None:
                event = _build(*decoded)
                attach_facets(event, extras, custom_facets)
                return event
    decoded, extras = exact_path(obj)
    event = _build(*decoded)
    attach_facets(event, extras, custom_facets)
    return event


def parse_event(data: bytes | str | object, *, custom_facets: bool = True) -> Event:
    """Validate one event; ``EventRejected`` names the first invalid field and why.

    ``custom_facets=False`` leaves the facets it does not type out of the typed event (``custom``
    is empty) and takes bytes in one pass: for normalization, which reads typed facets only."""
    if isinstance(data, bytes | str):
        if not custom_facets:
            decoded = _fast_bytes(data)
            if decoded is not None:
                return _build(*decoded)
        data = decode_json(data)
    return parse_object(data, custom_facets)


@dataclass(frozen=True, slots=True)
class EventHeader:
    """The envelope of a valid event: what the event store keeps beside the raw event."""

    kind: EventKind
    event_type: str | None
    event_time: datetime
    producer: str
    job_namespace: str | None
    job_name: str | None
    run_id: str | None


def _header(kind: str, env: Any, time: datetime) -> EventHeader:
    run = env.run if kind == RUN else None
    job = env.job if kind != DATASET else None
    return EventHeader(
        EventKind(kind),
        env.eventType if run is not None else None,
        time,
        env.producer,
        job.namespace if job is not None else None,
        job.name if job is not None else None,
        run.runId if run is not None else None,
    )


def check_event(data: object, *, max_name_length: int | None = None) -> EventHeader:
    """Validate one event as ``parse_event`` does (same acceptance, same ``EventRejected``) and
    return its envelope, without building the typed event. With ``max_name_length``, a catalog
    key longer than that (``check_name_lengths``) rejects it too."""
    if isinstance(data, bytes | str):
        data = decode_json(data)
    if type(data) is dict:
        decoded = _fast_object(data, family(max_name_length))  # type: ignore[arg-type]
        if decoded is not None:
            return _header(*decoded)
    decoded, _ = exact_path(data)
    if max_name_length is not None:
        check_name_lengths(data, max_name_length)
    return _header(*decoded)


def header_of(event: Event) -> EventHeader:
    run = event if isinstance(event, RunEvent) else None
    job = None if isinstance(event, DatasetEvent) else event.job
    return EventHeader(
        event.kind,
        run.eventType if run else None,
        event.eventTime,
        event.producer,
        job.namespace if job else None,
        job.name if job else None,
        run.run.runId if run else None,
    )
