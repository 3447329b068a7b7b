"""RunEvent, JobEvent and DatasetEvent (spec 2-0-2, and the 1-x events producers still send).

``parse_event`` validates one event from bytes (or an already-parsed object) in a single pass and
returns a typed event, or raises ``EventRejected`` naming the field path and the reason. The kind is
told by the ``schemaURL`` fragment (the reliable signal: 1-x events say ``#/definitions/RunEvent``,
2-x ``#/$defs/RunEvent``), else by which of ``run``/``job``/``dataset`` is present.

Lenient where the meaning is clear: a missing ``schemaURL`` or ``eventType``, zone-less times (read
as UTC), nanoseconds, a ``runId`` that is not a UUID. Strict where it would be lost: no job name, no
run id, a standard facet of the wrong shape.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    StrictStr,
    Tag,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic_core import SchemaValidator

from ol_dagster.openlineage.envelope import EventKind, EventRejected, parse_event_time
from ol_dagster.openlineage.facets import (
    MODEL_NAMES,
    DatasetFacets,
    InputFacets,
    InputField,
    JobFacets,
    JobRef,
    Name,
    OutputFacets,
    PreviousIdentifier,
    RunFacets,
    SymlinkIdentifier,
)


def _event_time(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value
    try:
        return parse_event_time(value)
    except EventRejected as exc:
        raise ValueError(exc.reason) from None


EventTime = Annotated[datetime, BeforeValidator(_event_time)]
EventType = Literal["START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)


class Run(_Model):
    runId: Name
    facets: RunFacets = Field(default_factory=RunFacets)


class Job(_Model):
    namespace: Name
    name: Name
    facets: JobFacets = Field(default_factory=JobFacets)


class Dataset(_Model):
    namespace: Name
    name: Name
    facets: DatasetFacets = Field(default_factory=lambda: DatasetFacets.model_validate({}))


class InputDataset(Dataset):
    inputFacets: InputFacets = Field(default_factory=InputFacets)


class OutputDataset(Dataset):
    outputFacets: OutputFacets = Field(default_factory=OutputFacets)


class _BaseEvent(_Model):
    eventTime: EventTime
    producer: Name
    schemaURL: StrictStr | None = None


class RunEvent(_BaseEvent):
    kind: Literal[EventKind.RUN] = EventKind.RUN
    eventType: EventType | None = None
    run: Run
    job: Job
    inputs: list[InputDataset] = Field(default_factory=list)
    outputs: list[OutputDataset] = Field(default_factory=list)


class JobEvent(_BaseEvent):
    kind: Literal[EventKind.JOB] = EventKind.JOB

    @model_validator(mode="before")
    @classmethod
    def _no_run(cls, data: Any) -> Any:
        if isinstance(data, dict) and "run" in data:
            raise ValueError("a JobEvent must not carry 'run'")
        return data

    job: Job
    inputs: list[InputDataset] = Field(default_factory=list)
    outputs: list[OutputDataset] = Field(default_factory=list)


class DatasetEvent(_BaseEvent):
    kind: Literal[EventKind.DATASET] = EventKind.DATASET

    @model_validator(mode="before")
    @classmethod
    def _no_job_or_run(cls, data: Any) -> Any:
        if isinstance(data, dict) and ("job" in data or "run" in data):
            raise ValueError("a DatasetEvent must not carry 'job' or 'run'")
        return data

    dataset: Dataset


def _kind_of(obj: Any) -> str | None:
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


Event = RunEvent | JobEvent | DatasetEvent

_EVENT = TypeAdapter(
    Annotated[
        Annotated[RunEvent, Tag(EventKind.RUN.value)]
        | Annotated[JobEvent, Tag(EventKind.JOB.value)]
        | Annotated[DatasetEvent, Tag(EventKind.DATASET.value)],
        Discriminator(
            _kind_of,
            custom_error_type="not_an_event",
            custom_error_message="not an OpenLineage event: an object with 'run', 'job' or "
            "'dataset' is expected",
        ),
    ]
)


_FACET_MAPS = frozenset({"facets", "inputFacets", "outputFacets"})
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


def _drop_broken_facet(obj: Any, loc: list[Any]) -> bool:
    """Remove the facet a validation error points into; False when the error is not in a facet."""
    target = obj
    for i, part in enumerate(loc):
        if part in _FACET_MAPS and i + 1 < len(loc) and isinstance(target, dict):
            facets = target.get(part)
            if isinstance(facets, dict) and loc[i + 1] in facets:
                del facets[loc[i + 1]]
                return True
        try:
            target = target[part]
        except (KeyError, IndexError, TypeError):
            return False
    return False


def parse_event_lenient(data: Any) -> Event:
    """Extract what can be extracted from a template or a damaged event: placeholders for a
    missing envelope, broken facets dropped. For inspection and tests, never for the receiver."""
    if isinstance(data, bytes | str):
        import json

        data = json.loads(data)
    if not isinstance(data, dict):
        raise EventRejected("", f"an event must be a JSON object, not {_json_type(data)}")
    obj = _repair(data)
    for _ in range(_MAX_REPAIRS):
        try:
            return _EVENT.validate_python(obj)
        except ValidationError as exc:
            loc = _field_path(_first_error(exc)["loc"])
            if not _drop_broken_facet(obj, loc):
                raise _describe(_first_error(exc)) from None
    raise EventRejected("", "too many broken facets")


def _field_path(loc: Any) -> list[Any]:
    """An error location without the union members pydantic tried (they are not fields)."""
    return [p for p in loc if p not in EventKind._value2member_map_ and p not in MODEL_NAMES]


def _first_error(exc: ValidationError) -> Any:
    """The error that explains the failure: not the one of a facet's deletion-marker branch or of
    its ``None`` branch, which fail for every facet that is really there."""
    errors = exc.errors(include_url=False)
    for err in errors:
        if "DeletedFacet" not in err["loc"] and err["type"] != "none_required":
            return err
    return errors[0]


def _describe(err: Any) -> EventRejected:
    loc = _field_path(err["loc"])
    path = ".".join(str(p) for p in loc)
    kind = err["type"]
    if kind == "missing":
        return EventRejected(path, "is required")
    if kind == "json_invalid":
        return EventRejected("", f"not valid JSON: {err['msg']}")
    if kind in ("model_type", "not_an_event") and not path and not isinstance(err["input"], dict):
        return EventRejected("", f"an event must be a JSON object, not {_json_type(err['input'])}")
    if kind == "string_pattern_mismatch":
        return EventRejected(path, "must not be blank")
    msg = err["msg"].removeprefix("Value error, ")
    if kind == "literal_error":
        msg = f"{err['input']!r} is not allowed: {msg[0].lower()}{msg[1:]}"
    return EventRejected(path, msg)


def parse_event(data: bytes | str | object) -> Event:
    """Validate one event in one pass; ``EventRejected`` names the first invalid field and why."""
    try:
        if isinstance(data, bytes | str):
            return _EVENT.validate_json(data)
        if not isinstance(data, dict):
            raise EventRejected("", f"an event must be a JSON object, not {_json_type(data)}")
        return _EVENT.validate_python(data)
    except ValidationError as exc:
        raise _describe(_first_error(exc)) from None


# -- checking an event without building its models ----------------------------------------------
#
# The receiver needs to know whether an event is valid and what its envelope says, not the typed
# event: building the ~100 frozen model instances of a dbt event with column lineage is most of the
# cost of validating it. ``check_event`` validates against the same core schema with every model
# turned into a typed dict of the same fields (same validators, extras policy, aliases, model
# validators and discriminator), which accepts the same input and builds plain dicts, about twice as
# fast. Only plain ``dict`` input takes that way (input parsed from JSON); a failure, or any other
# input, is validated by the models themselves, so what is rejected, and the reason given, are
# exactly those of ``parse_event``. ``benchmarks/check_fast_paths.py`` compares the two on the
# corpus and tens of thousands of mutated events.
#
# With ``max_name_length`` (a definition's ``limits.maxNameLength``), the same schema also bounds
# every namespace and name the catalogs key objects by (``_KEYED``: the job, each dataset, the
# parent and root jobs, symlinks, a previous identifier, column-lineage inputs) with a
# ``max_length``: checked in Rust in the same pass, free for a valid event (a Python look at those
# places cost 2 to 20 us an event, the latter on dbt events with column lineage). An event over it
# fails the fast path and takes the models' way, then ``check_name_lengths`` names the field.

DEFAULT_MAX_NAME_LENGTH = 2048  # settings.Limits.maxNameLength's default

# models (and their subclasses) whose ``namespace`` and ``name`` are catalog keys
_KEYED = (Job, Dataset, JobRef, InputField, SymlinkIdentifier, PreviousIdentifier)


def _without_models(node: Any, max_name_length: int | None = None) -> Any:
    """A copy of a core schema in which models validate into typed dicts of their fields, the
    keyed models' ``namespace`` and ``name`` at most ``max_name_length`` characters long."""
    if isinstance(node, list):
        return [_without_models(x, max_name_length) for x in node]
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    if kind == "model":
        inner = _without_models(node["schema"], max_name_length)
        target = inner  # the typed dict, under a model validator when there is one
        while target["type"] != "typed-dict":
            target = target["schema"]
        config = dict(node.get("config", {}))
        if config.get("extra_fields_behavior") == "allow":
            # accepted unvalidated either way; not copying them into the output is faster
            config["extra_fields_behavior"] = "ignore"
        target["config"] = config
        if max_name_length is not None and issubclass(node["cls"], _KEYED):
            for key in ("namespace", "name"):
                schema = target["fields"][key]["schema"]
                assert schema["type"] == "str", (node["cls"], key)
                target["fields"][key]["schema"] = {**schema, "max_length": max_name_length}
        if "ref" in node:
            inner["ref"] = node["ref"]
        return inner
    if kind == "model-fields":
        fields = {}
        for name, f in node["fields"].items():
            schema = f["schema"]
            if schema["type"] == "default":
                # a default is never validated (no validate_default here): leaving it out of
                # the output changes nothing about what is accepted
                assert not schema.get("validate_default"), name
                schema, required = schema["schema"], False
            else:
                required = True
            field = {
                "type": "typed-dict-field",
                "schema": _without_models(schema, max_name_length),
                "required": required,
            }
            if "validation_alias" in f:
                field["validation_alias"] = f["validation_alias"]
            fields[name] = field
        return {"type": "typed-dict", "fields": fields}
    return {k: _without_models(v, max_name_length) for k, v in node.items()}


@functools.cache
def _checker(max_name_length: int | None) -> SchemaValidator:
    """The fast path's validator for a bound (a few ms to build, once per distinct bound)."""
    return SchemaValidator(_without_models(_EVENT.core_schema, max_name_length))


_CHECK = _checker(None)
_checker(DEFAULT_MAX_NAME_LENGTH)  # the usual one, built now rather than on a first request


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


def check_event(data: object, *, max_name_length: int | None = None) -> EventHeader:
    """Validate one event as ``parse_event`` does (same acceptance, same ``EventRejected``) and
    return its envelope, without building the typed event when ``data`` is a plain dict. With
    ``max_name_length``, a catalog key longer than that (``check_name_lengths``) rejects it too."""
    if type(data) is dict:
        try:
            checked = _checker(max_name_length).validate_python(data)
        except ValidationError:
            pass  # the models give the reason (or, should they accept it, the event)
        else:
            kind = EventKind(_kind_of(data))
            job = checked.get("job") if kind is not EventKind.DATASET else None
            run = checked.get("run") if kind is EventKind.RUN else None
            return EventHeader(
                kind,
                checked.get("eventType") if run is not None else None,
                checked["eventTime"],
                checked["producer"],
                job["namespace"] if job is not None else None,
                job["name"] if job is not None else None,
                run["runId"] if run is not None else None,
            )
    event = parse_event(data)
    if max_name_length is not None:
        check_name_lengths(data, max_name_length)
    return header_of(event)


# -- naming the identifier that is too long -----------------------------------------------------


def _get(obj: object, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else None


def _facet(facets: object, key: str) -> Any:
    """A standard facet, unless absent or a deletion marker (whose content nothing reads):
    ``_deleted`` equal to true, as the models read it (``true``, ``1`` and ``1.0`` are)."""
    facet = _get(facets, key)
    return None if _get(facet, "_deleted") in (True,) else facet


def _listed(prefix: str, refs: object) -> Iterator[tuple[str, object]]:
    if isinstance(refs, list):
        for m, ref in enumerate(refs):
            yield f"{prefix}.{m}", ref


def _dataset_refs(path: str, dataset: object) -> Iterator[tuple[str, object]]:
    yield path, dataset
    facets = _get(dataset, "facets")
    symlinks = _facet(facets, "symlinks")
    yield from _listed(f"{path}.facets.symlinks.identifiers", _get(symlinks, "identifiers"))
    lifecycle = _facet(facets, "lifecycleStateChange")
    previous = _get(lifecycle, "previousIdentifier")
    yield f"{path}.facets.lifecycleStateChange.previousIdentifier", previous
    lineage = _facet(facets, "columnLineage")
    fields = _get(lineage, "fields")
    if isinstance(fields, dict):
        for name, column in fields.items():
            inputs = _get(column, "inputFields")
            yield from _listed(f"{path}.facets.columnLineage.fields.{name}.inputFields", inputs)
    yield from _listed(f"{path}.facets.columnLineage.dataset", _get(lineage, "dataset"))


def _keyed_refs(event: object) -> Iterator[tuple[str, object]]:
    """(path, the object holding a ``namespace`` and a ``name``) for every catalog key of an
    event: the places of ``_KEYED`` in the models."""
    kind = _kind_of(event)  # what is not a field of the event's kind is an extra, not a key
    if kind == EventKind.DATASET.value:
        yield from _dataset_refs("dataset", _get(event, "dataset"))
        return
    yield "job", _get(event, "job")
    if kind == EventKind.RUN.value:
        parent = _facet(_get(_get(event, "run"), "facets"), "parent")
        yield "run.facets.parent.job", _get(parent, "job")
        yield "run.facets.parent.root.job", _get(_get(parent, "root"), "job")
    for side in ("inputs", "outputs"):
        for path, dataset in _listed(side, _get(event, side)):
            yield from _dataset_refs(path, dataset)


def check_name_lengths(event: object, limit: int = DEFAULT_MAX_NAME_LENGTH) -> None:
    """Refuse an event any of whose catalog keys (the namespace or name of its job, a dataset,
    the parent or root job, a symlink, a previous identifier, a column-lineage input) is longer
    than ``limit`` characters, naming the first such field's path. Looks at those places only:
    the rest of the event (schemas, SQL, custom facets) may hold strings of any length. In the
    receiver this runs only for an event the bounded fast path refused (``check_event``)."""
    for path, ref in _keyed_refs(event):
        for key in ("namespace", "name"):
            value = _get(ref, key)
            if isinstance(value, str) and len(value) > limit:
                raise EventRejected(
                    f"{path}.{key}",
                    f"is {len(value)} characters long; at most {limit} are accepted "
                    "(limits.maxNameLength)",
                )


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
