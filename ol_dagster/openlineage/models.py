"""RunEvent, JobEvent and DatasetEvent (spec 2-0-2, and the 1-x events producers still send).

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

- a ``Name`` must not be blank (``_names_blank``, ``_first_blank``): a regex per string costs more
  than the whole decode, so the decoder checks the type and length and Python looks for blanks;
- ``eventTime`` is read by ``parse_event_time`` (zone-less as UTC, nanoseconds), not by msgspec;
- the kind, and what a kind must not carry (``_kind_of``, ``_forbidden``);
- ``_deleted`` markers and custom facets are taken out of the facet maps before decoding
  (``_split``) and put back on the typed maps (``deleted``, ``custom``).

Compared with the pydantic models these replace (checked on the same mutated events): the same
events are accepted, with the same typed content, and a rejection names the same field with the
same reason, except that (1) with several errors inside one nested object the one named is the
first in the event's order, not the model's; (2) an event that is not valid JSON is described in
msgspec's words (the receiver parses bodies itself); (3) pydantic's ``populate_by_name`` no longer
applies: ``producer`` in a facet (not ``_producer``), ``deleted`` for ``_deleted``, ``schema_``
for ``schema`` and a top-level ``kind`` are unknown keys, as the spec has them, not fields.
"""

from __future__ import annotations

import functools
import operator
import re
import types
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from itertools import chain
from typing import Annotated, Any, ClassVar, Literal, Union, get_args, get_origin

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType, ValidationError, field
from msgspec.structs import fields as struct_fields

from ol_dagster.openlineage.envelope import EventKind, EventRejected, parse_event_time
from ol_dagster.openlineage.facets import (
    FACET_MAPS,
    NAME,
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
    _FacetMap,
    facet_keys,
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


class _Envelope(_Node, frozen=True):
    eventTime: str
    producer: Name
    schemaURL: str | None = None


class _RunEnvelope(_Envelope, frozen=True, kw_only=True):
    eventType: EventType | None = None
    run: Run
    job: Job
    inputs: list[InputDataset] = []
    outputs: list[OutputDataset] = []


class _JobEnvelope(_Envelope, frozen=True, kw_only=True):
    job: Job
    inputs: list[InputDataset] = []
    outputs: list[OutputDataset] = []


class _DatasetEnvelope(_Envelope, frozen=True, kw_only=True):
    dataset: Dataset


class _AnyEnvelope(_Envelope, frozen=True, kw_only=True):
    """Bytes come undecoded, so the kind is not known yet: every kind's fields, none required.
    Stricter than any one kind (a DatasetEvent's ``inputs`` are validated too), never laxer."""

    eventType: EventType | None = None
    run: Run | UnsetType = UNSET
    job: Job | UnsetType = UNSET
    dataset: Dataset | UnsetType = UNSET
    inputs: list[InputDataset] = []
    outputs: list[OutputDataset] = []


_RUN, _JOB, _DATASET = EventKind.RUN.value, EventKind.JOB.value, EventKind.DATASET.value
_NOT_AN_EVENT = "not an OpenLineage event: an object with 'run', 'job' or 'dataset' is expected"


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


def _forbidden(kind: str, has: Any) -> str | None:
    """What an event of ``kind`` carries that it must not (``has(key)``: whether it is there)."""
    if kind == _JOB and has("run"):
        return "a JobEvent must not carry 'run'"
    if kind == _DATASET and (has("job") or has("run")):
        return "a DatasetEvent must not carry 'job' or 'run'"
    return None


# -- families: the same envelopes with every catalog key bounded ----------------------------------
#
# The receiver bounds every namespace and name the catalogs key objects by (``_KEYED``: the job,
# each dataset, the parent and root jobs, symlinks, a previous identifier, column-lineage inputs)
# by a definition's ``limits.maxNameLength``: copies of the envelopes whose keyed ``Name`` fields
# carry a ``max_length``, checked by the decoder in the same pass (free for a valid event). An
# event over it fails the fast path; the exact path then names the field (``check_name_lengths``).

DEFAULT_MAX_NAME_LENGTH = 2048  # settings.Limits.maxNameLength's default

# Structs whose ``namespace`` and ``name`` are catalog keys (subclasses included)
_KEYED = (Job, Dataset, JobRef, InputField, SymlinkIdentifier, PreviousIdentifier)


@dataclass(frozen=True)
class _Family:
    by_kind: Mapping[str, type[_Envelope]]


def _bounded(tp: Any, bound: int, memo: dict[type, type]) -> tuple[Any, bool]:
    """``tp`` with the keyed names of every Struct in it bounded, and whether anything changed."""
    if isinstance(tp, type) and issubclass(tp, Struct):
        if tp not in memo:
            memo[tp] = tp  # while it is copied: a Struct that holds itself (SchemaField) holds
            # no keyed names (were one to, its copy would hold the original: a test catches it)
            memo[tp] = _bounded_struct(tp, bound, memo)
        return memo[tp], memo[tp] is not tp
    origin = get_origin(tp)
    if origin in (types.UnionType, Union):
        parts = [_bounded(a, bound, memo) for a in get_args(tp)]
        if not any(changed for _, changed in parts):
            return tp, False
        return functools.reduce(operator.or_, [p for p, _ in parts]), True
    if origin is list:
        (item,) = get_args(tp)
        new, changed = _bounded(item, bound, memo)
        return (list[new], True) if changed else (tp, False)
    if origin is dict:
        key, value = get_args(tp)
        new, changed = _bounded(value, bound, memo)
        return (dict[key, new], True) if changed else (tp, False)
    return tp, False


def _bounded_struct(cls: type, bound: int, memo: dict[type, type]) -> type:
    keyed = issubclass(cls, _KEYED)
    specs: list[tuple[str, Any, Any]] = []
    changed = False
    for f in struct_fields(cls):
        if keyed and f.name in ("namespace", "name"):
            tp, changed = Annotated[str, Meta(min_length=1, max_length=bound), NAME], True
        else:
            tp, was = _bounded(f.type, bound, memo)
            changed = changed or was
        spec: dict[str, Any] = {"name": f.encode_name}
        if f.default is not msgspec.NODEFAULT:
            spec["default"] = f.default
        elif f.default_factory is not msgspec.NODEFAULT:
            spec["default_factory"] = f.default_factory
        specs.append((f.name, tp, field(**spec)))
    if not changed:
        return cls
    return msgspec.defstruct(cls.__name__, specs, kw_only=True, frozen=True, gc=False)


_BY_KIND: dict[str, type[_Envelope]] = {
    _RUN: _RunEnvelope,
    _JOB: _JobEnvelope,
    _DATASET: _DatasetEnvelope,
}
_CANONICAL = _Family(_BY_KIND)


@functools.cache
def _family(max_name_length: int | None) -> _Family:
    """The envelopes for a bound (built once per distinct bound, a few ms)."""
    if max_name_length is None:
        return _CANONICAL
    memo: dict[type, type] = {}
    return _Family(
        {kind: _bounded(env, max_name_length, memo)[0] for kind, env in _BY_KIND.items()}
    )


_family(DEFAULT_MAX_NAME_LENGTH)  # the usual one, built now rather than on a first request

# -- blank names: msgspec checks their type and length, these their content ---------------------

# what the spec's schema and pydantic's ``\S`` (Rust's regex) call white space: Unicode White_Space
_WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B)))
_WHITE_SPACE += "\u2028\u2029\u202f\u205f\u3000"


def _is_blank(text: str) -> bool:
    return not text.strip(_WHITE_SPACE)


# ``str.isspace`` is true of every _WHITE_SPACE string (and of a few more: U+001C to U+001F), so a
# name it finds no blank in has none; one it flags goes to the exact path, which uses _is_blank.
_isspace = str.isspace
_name = operator.attrgetter("name")
_names_of = operator.attrgetter("namespace", "name")
_input_keys = operator.attrgetter("namespace", "name", "field")
_input_fields = operator.attrgetter("inputFields")
_sub_fields = operator.attrgetter("fields")


def _any_blank(texts: Iterable[str]) -> bool:
    return any(map(_isspace, texts))


def _schema_blank(fields: list[Any]) -> bool:
    return _any_blank(map(_name, fields)) or any(
        map(_schema_blank, filter(None, map(_sub_fields, fields)))
    )


def _dataset_blank(d: Any) -> bool:
    if _isspace(d.namespace) or _isspace(d.name):
        return True
    f = d.facets
    schema = f.schema_
    if schema is not None and schema.fields and _schema_blank(schema.fields):
        return True
    lineage = f.columnLineage
    if lineage is not None:
        inputs = chain(
            chain.from_iterable(map(_input_fields, lineage.fields.values())), lineage.dataset
        )
        if _any_blank(chain.from_iterable(map(_input_keys, inputs))):
            return True
    symlinks = f.symlinks
    if symlinks is not None and _any_blank(
        chain.from_iterable(map(_names_of, symlinks.identifiers))
    ):
        return True
    change = f.lifecycleStateChange
    previous = change.previousIdentifier if change is not None else None
    if previous is not None and _any_blank(_names_of(previous)):
        return True
    owners = f.ownership
    return owners is not None and _any_blank(map(_name, owners.owners))


def _names_blank(env: Any) -> bool:
    """Whether a ``Name`` of a decoded envelope may be blank: every place facets.py and this
    module type as ``Name`` (``test_openlineage_models`` puts a blank in each and checks)."""
    if _isspace(env.producer):
        return True
    run = getattr(env, "run", UNSET)
    if run is not UNSET:
        if _isspace(run.runId):
            return True
        parent = run.facets.parent
        if parent is not None:
            if _isspace(parent.run.runId) or _any_blank(_names_of(parent.job)):
                return True
            root = parent.root
            if root is not None and (_isspace(root.run.runId) or _any_blank(_names_of(root.job))):
                return True
    job = getattr(env, "job", UNSET)
    if job is not UNSET:
        if _isspace(job.namespace) or _isspace(job.name):
            return True
        owners = job.facets.ownership
        if owners is not None and _any_blank(map(_name, owners.owners)):
            return True
    dataset = getattr(env, "dataset", UNSET)
    if dataset is not UNSET and _dataset_blank(dataset):
        return True
    return any(map(_dataset_blank, getattr(env, "inputs", ()))) or any(
        map(_dataset_blank, getattr(env, "outputs", ()))
    )


@functools.cache
def _name_fields(cls: type) -> tuple[tuple[str, str, bool], ...]:
    """(attribute, JSON key, whether it is a ``Name``) of a Struct's fields."""
    return tuple(
        (f.name, f.encode_name, get_origin(f.type) is Annotated and NAME in get_args(f.type))
        for f in struct_fields(cls)
    )


def _first_blank(value: Any, path: str = "") -> str | None:
    """The path of the first blank ``Name`` in a decoded value, by walking all of it: slow, for
    the exact path, and the reference ``_names_blank`` is tested against."""
    if isinstance(value, Struct):
        for attr, key, is_name in _name_fields(type(value)):
            item = getattr(value, attr)
            where = f"{path}.{key}" if path else key
            if is_name and _is_blank(item):
                return where
            found = _first_blank(item, where)
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _first_blank(item, f"{path}.{i}")
            if found is not None:
                return found
    elif isinstance(value, dict) and path.endswith(".fields"):  # columnLineage.fields
        for key, item in value.items():
            found = _first_blank(item, f"{path}.{key}")
            if found is not None:
                return found
    return None


# -- the fast path ---------------------------------------------------------------------------------

_ANY = msgspec.json.Decoder(_AnyEnvelope)
_JSON = msgspec.json.Decoder()

_Decoded = tuple[str, Any, datetime]  # (kind, envelope, eventTime)


def _fast_bytes(raw: bytes | str) -> _Decoded | None:
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
        kind = _RUN if has_run else _JOB if has_job else _DATASET
    if kind == _RUN:
        ok = has_run and has_job
    elif kind == _JOB:
        ok = has_job and not has_run
    else:
        ok = env.dataset is not UNSET and not has_job and not has_run
    if not ok or _names_blank(env):
        return None
    try:
        return kind, env, parse_event_time(env.eventTime)
    except EventRejected:
        return None


def _fast_object(obj: dict[str, Any], family: _Family, kind: str | None = None) -> _Decoded | None:
    """Validate a parsed event against its kind's envelope; None when the exact path must
    decide. ``kind``: told already, and what it must not carry checked."""
    if kind is None:
        kind = _kind_of(obj)
        if kind is None or _forbidden(kind, obj.__contains__):
            return None
    try:
        env = msgspec.convert(obj, family.by_kind[kind])
    except ValidationError:
        return None
    if _names_blank(env):
        return None
    try:
        return kind, env, parse_event_time(env.eventTime)
    except EventRejected:
        return None


def _build(kind: str, env: Any, time: datetime) -> Event:
    if kind == _RUN:
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
    if kind == _JOB:
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


# -- facet maps: deletion markers and custom facets out before decoding, back on after ----------

_KNOWN: dict[type, frozenset[str]] = {
    cls: frozenset(key for _, key in facet_keys(cls)) for cls in FACET_MAPS
}
# facet map keys of a node of each kind of place in an event
_RUN_MAPS = (("facets", _KNOWN[RunFacets]),)
_JOB_MAPS = (("facets", _KNOWN[JobFacets]),)
_DATASET_MAPS = (("facets", _KNOWN[DatasetFacets]),)
_INPUT_MAPS = (*_DATASET_MAPS, ("inputFacets", _KNOWN[InputFacets]))
_OUTPUT_MAPS = (*_DATASET_MAPS, ("outputFacets", _KNOWN[OutputFacets]))
_FIELDS = {kind: tuple(f.encode_name for f in struct_fields(env)) for kind, env in _BY_KIND.items()}

_Extras = tuple[tuple[str | int, ...], frozenset[str], dict[str, Any]]  # (path, deleted, custom)


def _is_marker(facet: Any) -> bool:
    """A standard facet that deletes itself: ``_deleted`` true (``1`` and ``1.0`` too, as the
    earlier pydantic models read it: what was stored under them reads the same)."""
    if type(facet) is not dict or "_deleted" not in facet:
        return False
    flag = facet["_deleted"]
    return type(flag) in (bool, int, float) and flag == 1


def _split(obj: dict[str, Any], kind: str) -> tuple[dict[str, Any], list[_Extras]]:
    """The event with its kind's fields only and, in each facet map, no deletion marker and no
    other ``_deleted`` but ``false`` (they mark nothing); the deleted and custom facets by map.
    Custom facets stay where they are (the decoder passes over unknown keys); a node is copied
    only when a map of it changes, so the caller's object is never modified."""
    clean = {key: obj[key] for key in _FIELDS[kind] if key in obj}
    extras: list[_Extras] = []

    def maps(path: tuple[str | int, ...], node: Any, keys: tuple[tuple[str, frozenset[str]], ...]):
        if type(node) is not dict:
            return node
        copied = False
        for key, known in keys:
            facets = node.get(key)
            if type(facets) is not dict:
                continue
            custom: dict[str, Any] = {}
            deleted: set[str] = set()
            rewrite = False
            for name, facet in facets.items():
                if name not in known:
                    custom[name] = facet
                    if type(facet) is dict and facet.get("_deleted") is True:
                        deleted.add(name)
                elif type(facet) is dict and facet.get("_deleted", False) is not False:
                    rewrite = True
            if rewrite:
                typed: dict[str, Any] = {}
                for name, facet in facets.items():
                    if name not in known:
                        continue
                    if _is_marker(facet):
                        deleted.add(name)
                    elif type(facet) is dict and facet.get("_deleted", False) is not False:
                        typed[name] = {k: v for k, v in facet.items() if k != "_deleted"}
                    else:
                        typed[name] = facet
                if not copied:
                    node, copied = dict(node), True
                node[key] = typed
            if custom or deleted:
                extras.append(((*path, key), frozenset(deleted), custom))
        return node

    for key, keys in (("run", _RUN_MAPS), ("job", _JOB_MAPS), ("dataset", _DATASET_MAPS)):
        if key in clean:
            clean[key] = maps((key,), clean[key], keys)
    for key, keys in (("inputs", _INPUT_MAPS), ("outputs", _OUTPUT_MAPS)):
        nodes = clean.get(key)
        if type(nodes) is list:
            new = [maps((key, i), d, keys) for i, d in enumerate(nodes)]
            if any(a is not b for a, b in zip(new, nodes, strict=True)):
                clean[key] = new
    return clean, extras


def _attach(event: Event, extras: list[_Extras], custom_facets: bool) -> None:
    """Put the deleted and custom facets on the typed maps the decoder built for them (fresh
    instances, not yet seen by anyone: ``custom`` and ``deleted`` are not fields by design)."""
    for path, deleted, custom in extras:
        target: Any = event
        for part in path:
            target = target[part] if isinstance(part, int) else getattr(target, part)
        assert isinstance(target, _FacetMap)
        if deleted:
            vars(target)["deleted"] = deleted
        if custom and custom_facets:
            vars(target)["custom"] = custom


# -- the exact path: every rule, in the spec's field order, naming the first field at fault --------


def _exact(obj: Any) -> tuple[_Decoded, list[_Extras]]:
    if not isinstance(obj, dict):
        raise EventRejected("", f"an event must be a JSON object, not {_json_type(obj)}")
    kind = _kind_of(obj)
    if kind is None:
        raise EventRejected("", _NOT_AN_EVENT)
    carried = _forbidden(kind, obj.__contains__)
    if carried:
        raise EventRejected("", carried)
    clean, extras = _split(obj, kind)
    envelope = _BY_KIND[kind]
    time: datetime | None = None
    for f in struct_fields(envelope):
        key = f.encode_name
        if key not in clean:
            if f.required:
                raise EventRejected(key, "is required")
            continue
        if key == "eventTime":
            time = parse_event_time(clean[key])
            continue
        try:
            value = msgspec.convert(clean[key], f.type)
        except ValidationError as exc:
            raise _rejection(exc, key, clean[key], f.type) from None
        blank = (key if _is_blank(value) else None) if f.type is Name else _first_blank(value, key)
        if blank is not None:
            raise EventRejected(blank, "must not be blank")
    env = msgspec.convert(clean, envelope)
    assert time is not None
    return (kind, env, time), extras


def _unwrap(tp: Any) -> Any:
    """The container or Struct type inside an optional or annotated type."""
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp = get_args(tp)[0]
        elif origin in (types.UnionType, Union):
            members = [a for a in get_args(tp) if a not in (type(None), UnsetType)]
            if len(members) != 1:
                return tp
            tp = members[0]
        else:
            return tp


# msgspec's path after ``$``: ``.field``, ``[3]``, and ``[...]`` for a dict key (our keys are
# plain names: no dots, no brackets)
_PATH_TOKEN = re.compile(r"\.([^.\[`]+)|(\[(?:\d+|\.\.\.)\])")


def _rejection(exc: ValidationError, key: str, value: Any, tp: Any) -> EventRejected:
    """msgspec's error for ``value`` (the event's field ``key``, of type ``tp``) as a rejection:
    the path as the event names it (a dict key msgspec leaves out, ``[...]``, found again), and
    the reason as the receiver has always given it."""
    message = str(exc)
    reason, _, where = message.rpartition(" - at `$")
    if not _:
        reason, where = message, "`"
    parts: list[str | int] = []
    for name, index in _PATH_TOKEN.findall(where):
        parts.append(name or (index if index == "[...]" else int(index[1:-1])))
    path = [key]
    for part in parts:  # walk the value and its type along msgspec's path
        tp = _unwrap(tp)
        if part == "[...]":
            item_type = get_args(tp)[1]
            for part, item in value.items():  # noqa: B007  # the first that fails is the one
                try:
                    msgspec.convert(item, item_type)
                except ValidationError:
                    break
            value, tp = value[part], item_type
        elif isinstance(part, int):
            value, tp = value[part], get_args(tp)[0]
        else:
            info = {f.encode_name: f for f in struct_fields(tp)}[part]
            value, tp = value.get(part) if isinstance(value, dict) else None, info.type
        path.append(str(part))
    where_ = ".".join(path)
    if reason.startswith("Object missing required field `"):
        return EventRejected(f"{where_}.{reason.split('`')[1]}", "is required")
    return EventRejected(where_, _reason(reason, value, _unwrap(tp)))


_EXPECTED = {
    "str": "Input should be a valid string",
    "int": "Input should be a valid integer",
    "bool": "Input should be a valid boolean",
    "object": "Input should be a valid dictionary",
    "array": "Input should be a valid list",
}


def _reason(reason: str, value: Any, tp: Any) -> str:
    if get_origin(tp) is Literal or (
        get_origin(tp) in (types.UnionType, Union)
        and any(get_origin(a) is Literal for a in get_args(tp))
    ):
        allowed = [
            v
            for a in (get_args(tp) if get_origin(tp) is not Literal else (tp,))
            if get_origin(a) is Literal
            for v in get_args(a)
        ]
        listed = ", ".join(repr(v) for v in allowed[:-1]) + f" or {allowed[-1]!r}"
        return f"{value!r} is not allowed: input should be {listed}"
    if reason.startswith("Expected `str` of length >= 1"):
        return "String should have at least 1 character"
    if reason.startswith("Expected `int` >= "):
        return f"Input should be greater than or equal to {reason.rsplit(' ', 1)[1]}"
    if reason.startswith("Expected `"):
        expected = reason.split("`")[1].removesuffix(" | null")
        if expected == "object" and isinstance(tp, type) and issubclass(tp, Struct):
            return f"{_EXPECTED['object']} or instance of {tp.__name__}"
        if expected in _EXPECTED:
            return _EXPECTED[expected]
    return reason


# -- the API ---------------------------------------------------------------------------------------


def _decode_json(data: bytes | str) -> Any:
    try:
        return _JSON.decode(data)
    except msgspec.DecodeError as exc:
        raise EventRejected("", f"not valid JSON: {exc}") from None


def _parse_object(obj: Any, custom_facets: bool) -> Event:
    if type(obj) is dict:
        kind = _kind_of(obj)
        if kind is not None and not _forbidden(kind, obj.__contains__):
            clean, extras = _split(obj, kind)
            decoded = _fast_object(clean, _CANONICAL, kind)
            if decoded is not None:
                event = _build(*decoded)
                _attach(event, extras, custom_facets)
                return event
    decoded, extras = _exact(obj)
    event = _build(*decoded)
    _attach(event, extras, custom_facets)
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
        data = _decode_json(data)
    return _parse_object(data, custom_facets)


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
    run = env.run if kind == _RUN else None
    job = env.job if kind != _DATASET else None
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
        data = _decode_json(data)
    if type(data) is dict:
        decoded = _fast_object(data, _family(max_name_length))  # type: ignore[arg-type]
        if decoded is not None:
            return _header(*decoded)
    decoded, _ = _exact(data)
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


# -- lenient extraction: templates and damaged events, for inspection ------------------------------

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
        data = _decode_json(data)
    if not isinstance(data, dict):
        raise EventRejected("", f"an event must be a JSON object, not {_json_type(data)}")
    obj = _repair(data)
    for _ in range(_MAX_REPAIRS):
        try:
            return _parse_object(obj, custom_facets=True)
        except EventRejected as exc:
            if not _drop_broken_facet(obj, exc.path):
                raise
    raise EventRejected("", "too many broken facets")


# -- naming the identifier that is too long -----------------------------------------------------


def _get(obj: object, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else None


def _facet(facets: object, key: str) -> Any:
    """A standard facet, unless absent or a deletion marker (whose content nothing reads)."""
    facet = _get(facets, key)
    return None if _is_marker(facet) else facet


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
    event: the places of ``_KEYED`` in the Structs."""
    kind = _kind_of(event)  # what is not a field of the event's kind is an extra, not a key
    if kind == _DATASET:
        yield from _dataset_refs("dataset", _get(event, "dataset"))
        return
    yield "job", _get(event, "job")
    if kind == _RUN:
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
