"""The exact path: every rule, in the spec's field order, naming the first field at fault.

What the fast path (``models``) cannot decide comes here: each field of the event's kind is
converted on its own, in the spec's order, so the first one at fault is named with its path and
a reason in the receiver's words (``EventRejected``), or the event is accepted with exactly the
content the fast path would have given it.
"""

from __future__ import annotations

import re
import types
from datetime import datetime
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import msgspec
from msgspec import Struct, UnsetType, ValidationError
from msgspec.structs import fields as struct_fields

from ol_dagster.openlineage.envelope import EventRejected, parse_event_time
from ol_dagster.openlineage.facet_maps import Extras, split_facets
from ol_dagster.openlineage.facets import Name
from ol_dagster.openlineage.names import first_blank, is_blank
from ol_dagster.openlineage.structs import (
    BY_KIND,
    NOT_AN_EVENT,
    Decoded,
    forbidden,
    json_type,
    kind_of,
)


def exact_path(obj: Any) -> tuple[Decoded, list[Extras]]:
    if not isinstance(obj, dict):
        raise EventRejected("", f"an event must be a JSON object, not {json_type(obj)}")
    kind = kind_of(obj)
    if kind is None:
        raise EventRejected("", NOT_AN_EVENT)
    carried = forbidden(kind, obj.__contains__)
    if carried:
        raise EventRejected("", carried)
    clean, extras = split_facets(obj, kind)
    envelope = BY_KIND[kind]
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
        blank = (key if is_blank(value) else None) if f.type is Name else first_blank(value, key)
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
