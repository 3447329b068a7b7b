"""What Marquez accepts, checked against its own OpenAPI file (``marquez/spec/openapi.yml``).

``request_errors(method, path, body)`` is the contract of the Marquez fake
(``FakeServer(contract=...)``): a request whose method and path match no operation of the file, a
path parameter its schema refuses, a body sent to an operation that takes none, or a body its
``requestBody`` schema refuses, is a violation. Paths are matched as sent (percent-encoded, with
the ``/api/v1`` of the file's ``servers`` URL in front): one ``{parameter}`` is one encoded
segment, as Jersey matches it, and its value is decoded before it is checked.

The OpenAPI 3.0 schema objects are read as JSON Schema draft 4 (the dialect OpenAPI 3.0 extends):
``nullable: true`` adds ``null`` to the type, a ``readOnly`` property is never required in a
request, and ``$ref`` resolves inside the file (``components``). What the file does not say, it
cannot check: its ``LineageEvent`` is an example with no schema, so a ``POST /lineage`` body passes
whatever it holds; the rules Marquez applies to an event are its bean validation and Jackson's
parsing, which the fake applies (``fakes/marquez_fake.py``, from ``LineageEvent.java``).

Formats are checked as the Java classes the server reads them into (SOURCE.md lists the files):

* ``uuid``: ``java.util.UUID.fromString`` (JDK 17): five hexadecimal groups split by four dashes,
  each a ``Long.parseLong(..., 16)`` (a sign allowed, 64-bit range), 36 characters at most;
* ``date-time``: every ``ZonedDateTime`` of Marquez is read by its
  ``FlexibleDateTimeDeserializer`` (``marquez_time`` below), which takes a time without an offset;
* ``uri``: ``java.net.URI`` (RFC 2396 as the JDK reads it): no space or control character, no
  ``"<>\\^`{|}``, ``%`` followed by two hexadecimal digits, one ``#`` at most, brackets only
  around an IPv6 host; a relative reference is a URI too;
* ``URL`` (a location): ``java.net.URL``: a ``uri`` whose scheme has a JDK protocol handler.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import yaml
from jsonschema import Draft4Validator, FormatChecker
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4

SPEC = Path(__file__).with_suffix("") / "spec" / "openapi.yml"
BASE = "/api/v1"  # the path of the file's ``servers`` URL
_URI = "urn:ol-dagster:marquez-openapi"  # where the converted file is registered
_METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")

# -- how Marquez reads values ---------------------------------------------------------------------

_JAVA_WHITESPACE = "".join(chr(c) for c in range(33))  # what String.trim() removes
_HEX_GROUP = re.compile(r"[+-]?[0-9A-Fa-f]+")


def java_uuid(value: str) -> uuid.UUID:
    """``java.util.UUID.fromString`` (JDK 17): ValueError where Java throws."""
    if len(value) > 36:
        raise ValueError("UUID string too large")
    groups = value.split("-")
    if len(groups) != 5:
        raise ValueError(f"Invalid UUID string: {value}")
    parts: list[int] = []
    for group in groups:
        if not _HEX_GROUP.fullmatch(group) or group in ("+", "-"):
            raise ValueError(f"Invalid UUID string: {value}")
        number = int(group, 16)
        if not -(2**63) <= number < 2**63:  # Long.parseLong overflows
            raise ValueError(f"Invalid UUID string: {value}")
        parts.append(number)
    a, b, c, d, e = parts
    most = ((a & 0xFFFFFFFF) << 32) | ((b & 0xFFFF) << 16) | (c & 0xFFFF)
    least = ((d & 0xFFFF) << 48) | (e & 0xFFFFFFFFFFFF)
    return uuid.UUID(int=(most << 64) | least)


def java_name_uuid(data: bytes) -> uuid.UUID:
    """``java.util.UUID.nameUUIDFromBytes``: MD5, version 3."""
    return uuid.UUID(bytes=hashlib.md5(data).digest(), version=3)


_LOCAL_DATE_TIME = re.compile(
    r"(?P<y>[0-9]{4})-(?P<mo>[0-9]{2})-(?P<d>[0-9]{2})[Tt](?P<h>[0-9]{2}):(?P<mi>[0-9]{2})"
    r"(?::(?P<s>[0-9]{2})(?:\.(?P<f>[0-9]{0,9}))?)?"
    r"(?:(?P<z>[Zz])|(?P<sign>[+-])(?P<oh>[0-9]{2})(?::(?P<om>[0-9]{2})(?::(?P<os>[0-9]{2}))?)?)?"
)
_MAX_OFFSET = 18 * 3600  # java.time.ZoneOffset


def _month_length(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def marquez_time(value: Any, zone: tzinfo = UTC) -> datetime:
    """An ``eventTime`` (any ``ZonedDateTime``) as Marquez reads it; ValueError where it refuses.

    marquez ``api/.../common/models/FlexibleDateTimeDeserializer.java`` (installed for every
    ``ZonedDateTime`` by ``common/Utils.java``): the formatter ``ISO_LOCAL_DATE_TIME``, then
    ``parseLenient()``, then an optional ``appendOffsetId()``, the whole parser case-insensitive;
    a time without an offset is read in the server's zone (``zone``: ``ZoneId.systemDefault()``,
    UTC in Marquez's image). Then, as the JDK 17 ``DateTimeFormatterBuilder`` and the SMART
    resolver of a built formatter read it: two-digit month, day, hour, minute and second;
    seconds and a fraction of 0-9 digits optional (a bare ``.`` too); a day past the end of its
    month is moved back to the last day (``2026-02-30`` is the 28th), ``24:00`` is the next
    midnight, a second of 60 is refused; the offset, read leniently under the ``+HH:MM:ss``
    pattern, is ``Z`` or a sign, two hour digits, then ``:mm`` and ``:ss`` each optional (``+0200``
    leaves ``00`` unparsed: refused), at most 18 hours. Jackson's ``InstantDeserializer`` trims the
    string first and reads a JSON number as epoch seconds (``READ_DATE_TIMESTAMPS_AS_NANOSECONDS``
    is on by default). Years outside 0001-9999, which Java reads and Python cannot hold, are
    refused here."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"cannot read {value!r} as a date-time")
    if isinstance(value, int | float):
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise ValueError(f"epoch seconds {value!r} out of range") from exc
    if not isinstance(value, str):
        raise ValueError(f"cannot read {type(value).__name__} as a date-time")
    text = value.strip(_JAVA_WHITESPACE)
    m = _LOCAL_DATE_TIME.fullmatch(text)
    if m is None:
        raise ValueError(f"Text {text!r} could not be parsed")
    year, month, day = int(m["y"]), int(m["mo"]), int(m["d"])
    hour, minute = int(m["h"]), int(m["mi"])
    second = int(m["s"] or 0)
    fraction = m["f"] or ""
    nanos = int(fraction.ljust(9, "0")) if fraction else 0
    if year < 1 or not 1 <= month <= 12 or not 1 <= day <= 31:
        raise ValueError(f"Text {text!r}: date out of range")
    if minute > 59 or second > 59 or hour > 24 or (hour == 24 and (minute or second or nanos)):
        raise ValueError(f"Text {text!r}: time out of range")
    day = min(day, _month_length(year, month))  # ResolverStyle.SMART
    zone_of: tzinfo = zone
    if m["sign"]:
        oh, om, os_ = int(m["oh"]), int(m["om"] or 0), int(m["os"] or 0)
        if oh > 23 or om > 59 or os_ > 59:
            raise ValueError(f"Text {text!r}: offset out of range")
        seconds = oh * 3600 + om * 60 + os_
        if seconds > _MAX_OFFSET:
            raise ValueError(f"Text {text!r}: offset beyond 18 hours")
        zone_of = timezone(timedelta(seconds=-seconds if m["sign"] == "-" else seconds))
    elif m["z"]:
        zone_of = UTC
    extra = timedelta(days=1) if hour == 24 else timedelta(0)
    when = datetime(year, month, day, hour % 24, minute, second, nanos // 1000, tzinfo=zone_of)
    return when + extra


# -- formats ---------------------------------------------------------------------------------------

FORMATS = FormatChecker(formats=())

# java.net.URI: characters it never takes unescaped (RFC 2396 "excluded" and controls)
_URI_EXCLUDED = re.compile(r"[\x00-\x20\x7f\"<>\\^`{|}]")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):(.*)", re.DOTALL)
_URL_PROTOCOLS = frozenset({"http", "https", "ftp", "file", "jar", "mailto", "jrt"})


@FORMATS.checks("uuid", raises=ValueError)
def is_uuid(value: object) -> bool:
    if isinstance(value, str):
        java_uuid(value)
    return True


@FORMATS.checks("date-time", raises=ValueError)
def is_date_time(value: object) -> bool:
    if isinstance(value, str):
        marquez_time(value)
    return True


@FORMATS.checks("uri")
def is_uri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if _URI_EXCLUDED.search(value) or value.count("#") > 1:
        return False
    if any(c.isspace() or unicodedata.category(c) == "Cc" for c in value):
        return False
    if re.search(r"%(?![0-9A-Fa-f]{2})", value):
        return False
    head = re.split(r"[/?#]", value, maxsplit=1)[0]
    if ":" in head:  # java.net.URI reads what is before it as a scheme
        m = _SCHEME.fullmatch(value)
        if m is None or not m.group(2) or m.group(2).startswith("#"):
            return False  # "Expected scheme name" / "Expected scheme-specific part"
    if "[" in value or "]" in value:
        return re.search(r"//([^/?#@]*@)?\[[0-9A-Fa-f:.]+\](:[0-9]*)?([/?#]|$)", value) is not None
    return True


@FORMATS.checks("URL")
def is_url(value: object) -> bool:
    if not isinstance(value, str):
        return True
    m = _SCHEME.fullmatch(value)
    return m is not None and m.group(1).lower() in _URL_PROTOCOLS and is_uri(value)


# -- the OpenAPI file ------------------------------------------------------------------------------

_SUBSCHEMA_MAPS = ("properties", "patternProperties", "definitions")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf")
_SUBSCHEMA_ONE = ("items", "additionalProperties", "not")


def json_schema(node: Any) -> Any:
    """An OpenAPI 3.0 schema object as draft-4 JSON Schema, for a request: ``nullable``, read-only
    properties, ``$ref`` into the registered file. Only schema keywords are walked: an
    ``example`` is kept as it is."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str) and value.startswith("#"):
            out[key] = _URI + value
        elif key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: json_schema(sub) for name, sub in value.items()}
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            out[key] = [json_schema(sub) for sub in value]
        elif key in _SUBSCHEMA_ONE and isinstance(value, dict):
            out[key] = json_schema(value)
        elif key in ("nullable", "readOnly", "writeOnly", "discriminator", "xml", "deprecated"):
            continue
        else:
            out[key] = value
    if node.get("nullable") is True:
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        if isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    properties = node.get("properties")
    if isinstance(properties, dict) and isinstance(out.get("required"), list):
        read_only = {n for n, p in properties.items() if isinstance(p, dict) and p.get("readOnly")}
        required = [n for n in out["required"] if n not in read_only]
        if required:
            out["required"] = required
        else:
            del out["required"]  # draft 4: ``required`` must not be empty
    return out


@cache
def spec() -> dict[str, Any]:
    return yaml.safe_load(SPEC.read_text(encoding="utf-8"))


@cache
def _registry() -> Registry:
    doc = spec()
    converted = {
        "components": {
            "schemas": {k: json_schema(v) for k, v in doc["components"]["schemas"].items()},
            "parameters": doc["components"].get("parameters", {}),
        }
    }
    return Registry().with_resource(_URI, Resource.from_contents(converted, DRAFT4))


def _resolve(node: Any) -> Any:
    """A ``$ref`` to ``#/components/...`` (parameters, request bodies) replaced by its target."""
    while isinstance(node, dict) and isinstance(node.get("$ref"), str):
        target: Any = spec()
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = target
    return node


_VALIDATORS: dict[int, Draft4Validator] = {}


def _validator(schema: dict[str, Any]) -> Draft4Validator:
    """One validator per schema object of the (cached, never changed) file."""
    found = _VALIDATORS.get(id(schema))
    if found is None:
        found = Draft4Validator(json_schema(schema), registry=_registry(), format_checker=FORMATS)
        _VALIDATORS[id(schema)] = found
    return found


@cache
def _templates() -> list[tuple[str, list[str]]]:
    """The file's paths, literal segments before templated ones (Jersey prefers literals)."""
    paths = [(p, p.strip("/").split("/")) for p in spec()["paths"]]
    return sorted(paths, key=lambda p: [s.startswith("{") for s in p[1]])


def match(path: str) -> tuple[str, dict[str, str]] | None:
    """The path template a request path (as sent) falls under, and its decoded parameters."""
    if not path.startswith(BASE + "/"):
        return None
    segments = path[len(BASE) :].strip("/").split("/")
    for template, parts in _templates():
        if len(parts) != len(segments):
            continue
        params: dict[str, str] = {}
        for part, segment in zip(parts, segments, strict=True):
            if part.startswith("{") and part.endswith("}") and segment:
                params[part[1:-1]] = unquote(segment)
            elif part != segment:
                break
        else:
            return template, params
    return None


def _where(error: ValidationError) -> str:
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "body"


def _leaves(error: ValidationError) -> list[ValidationError]:
    if error.context:
        return [leaf for sub in error.context for leaf in _leaves(sub)]
    return [error]


def schema_errors(schema: dict[str, Any], value: Any, where: str = "") -> list[str]:
    """What in ``value`` breaks an OpenAPI schema object, one line each."""
    found = {
        f"{where or _where(leaf)}: {leaf.message}"
        for error in _validator(schema).iter_errors(value)
        for leaf in _leaves(error)
    }
    return sorted(found)


def request_errors(method: str, path: str, body: Any) -> list[str]:
    """What in one request (path as sent, JSON body or None) breaks Marquez's OpenAPI file."""
    found = match(path)
    if found is None:
        return [f"{method} {path}: no path of openapi.yml matches"]
    template, params = found
    item = spec()["paths"][template]
    operation = item.get(method.lower())
    if method.lower() not in _METHODS or not isinstance(operation, dict):
        return [f"{method} {template}: openapi.yml has no {method.lower()} operation here"]
    errors: list[str] = []
    declared = [
        _resolve(p) for p in [*item.get("parameters", []), *operation.get("parameters", [])]
    ]
    for parameter in declared:
        name = parameter.get("name")
        if parameter.get("in") == "path" and name in params and "schema" in parameter:
            errors += schema_errors(parameter["schema"], params[name], f"path parameter {name}")
    request_body = _resolve(operation.get("requestBody"))
    if body is None:
        if isinstance(request_body, dict) and request_body.get("required"):
            errors.append(f"{method} {template}: a request body is required")
        return errors
    if not isinstance(request_body, dict):
        return [*errors, f"{method} {template}: takes no request body"]
    media = (request_body.get("content") or {}).get("application/json")
    if not isinstance(media, dict):
        return [*errors, f"{method} {template}: takes no application/json body"]
    if isinstance(body, bytes | str):
        return [*errors, f"{method} {template}: the body is not JSON"]
    return errors + schema_errors(media.get("schema") or {}, body)
