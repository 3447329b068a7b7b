"""One RunEvent made into what OpenMetadata's OpenLineage API accepts, before it is sent.

OpenMetadata validates a batch against its own schema (openmetadata-spec
``api/lineage/openlineage/openLineageRunEvent.json``, ``openLineageFacets.json``,
``openLineageDataset.json``) and refuses the whole request, with a 400, for one event that
breaks it. The receiver accepts, on purpose, events that would: no ``schemaURL``, a zone-less
``eventTime``, a ``runId`` that is not a UUID, schema fields without a type, keys the schema does
not know, standard facets of an older or looser shape. ``conform`` turns one accepted RunEvent
into one that schema accepts, changing only what breaks it:

* top-level keys the schema does not list are left out (it forbids them);
* no ``schemaURL`` (or one that is not a URI): the OpenLineage 2-0-2 RunEvent URL;
* ``eventTime`` that is not RFC 3339 with an offset is written again from the time the receiver
  reads (``parse_event_time``: a zone-less time is UTC, as it is for the normalizer and as Jackson
  reads it on the server), in UTC;
* a ``producer`` that is not an absolute URI becomes ``urn:ol-dagster:producer:<it,
  percent-encoded>`` (nothing lost);
* a ``runId`` that is not a UUID becomes the UUID ``uuid5(RUN_ID_NAMESPACE, runId)``: a pure
  function of the id, so every event of a run, and every parent (and root) facet naming that run,
  map to the same UUID;
* a schema field without a type gets ``UNKNOWN``, the name of OpenMetadata's own
  ``ColumnDataType.UNKNOWN`` (the type OpenLineageColumnMapper gives a type it does not know); a
  field without a name is left out;
* a standard facet OpenMetadata types is kept only in that type's shape: a parent without a job, a
  sql facet without a query, an error message without a message, a column lineage without fields
  are left out; a column-lineage field without input fields, an input field, owner or symlink
  identifier without its names are left out; a symlink without a type gets ``TABLE`` (the server
  reads only its name, OpenLineageDatasetNameNormalizer); an optional property of the wrong type
  (``null`` included), and a facet's ``_producer``/``_schemaURL`` that is not a URI, are left out;
* an ``eventType`` of ``null`` is left out (the server reads a missing type as COMPLETE, as the
  receiver does).

Facets OpenMetadata does not type are sent as they are (its schema allows any). An event that
still cannot be made to conform (no job name, an unknown ``eventType``...) answers ``None`` and
the reason: the catalog counts it as a dropped row and sends the others. Nothing here needs
jsonschema: the tests check every result against the vendored schemas
(``ol_dagster_tests/contracts/openmetadata``).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, date
from typing import Any
from urllib.parse import quote

from ol_dagster.openlineage.envelope import EventRejected, parse_event_time

RUN_EVENT_SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
# fixed forever: changing it changes the UUID every mapped run id is sent under
RUN_ID_NAMESPACE = uuid.UUID("6f1d3c2a-94b8-5e0b-a7c1-0d5e3b9f8a21")
PRODUCER_URN = "urn:ol-dagster:producer:"
UNKNOWN_TYPE = "UNKNOWN"
SYMLINK_TYPE = "TABLE"

RUN_EVENT_KEYS = (
    "eventTime",
    "producer",
    "schemaURL",
    "eventType",
    "run",
    "job",
    "inputs",
    "outputs",
)
EVENT_TYPES = frozenset({"START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"})

_HEX = frozenset("0123456789abcdefABCDEF")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
# RFC 3986 characters without the brackets (only legal around an IP literal; never needed here)
_URI_REST = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/?#]|%[0-9A-Fa-f]{2}")
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T([01]\d|2[0-3]):([0-5]\d):([0-5]\d)(\.\d{1,9})?"
    r"(Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)"
)


class NotConformable(ValueError):
    """The event cannot be sent in OpenMetadata's shape; the message says why."""


# -- values ---------------------------------------------------------------------------------------


def is_uuid(value: object) -> bool:
    """The 36-character 8-4-4-4-12 form, the only one both the schema's ``uuid`` and the
    server's UUID reader (Jackson) take."""
    return (
        isinstance(value, str)
        and len(value) == 36
        and all((c == "-") if i in (8, 13, 18, 23) else (c in _HEX) for i, c in enumerate(value))
    )


def run_uuid(run_id: str) -> str:
    """``run_id`` itself when it is a UUID, else the UUID it is always sent under."""
    return run_id if is_uuid(run_id) else str(uuid.uuid5(RUN_ID_NAMESPACE, run_id))


def is_uri(value: object) -> bool:
    """An absolute URI both the schema (RFC 3986) and the server (``java.net.URI``) take: a
    scheme, something after it that is not only a fragment, RFC 3986 characters and escapes, one
    ``#`` at most, and a non-empty authority after ``//``."""
    if not isinstance(value, str):
        return False
    m = _SCHEME.match(value)
    if m is None:
        return False
    rest = value[m.end() :]
    if not rest or rest.startswith("#") or rest.count("#") > 1:
        return False
    if rest.startswith("//") and not re.match(r"//[^/?#]", rest):
        return False
    return _URI_REST.sub("", rest) == ""


def producer_uri(value: str) -> str:
    return value if is_uri(value) else PRODUCER_URN + quote(value, safe="")


def is_date_time(value: object) -> bool:
    """RFC 3339 with an offset, an upper-case ``T``/``Z`` and at most 9 fraction digits: what
    the schema's ``date-time`` and the server's date reader (Jackson) both take."""
    if not isinstance(value, str):
        return False
    m = _RFC3339.fullmatch(value)
    if m is None:
        return False
    try:
        date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return False
    return True


def event_time(value: object) -> str:
    """``value`` when it is already RFC 3339 with an offset, else the same instant the receiver
    reads in it, written in UTC."""
    if isinstance(value, str) and is_date_time(value):
        return value
    try:
        when = parse_event_time(value)
    except EventRejected as exc:
        raise NotConformable(f"eventTime {exc.reason}") from None
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


# -- facets ---------------------------------------------------------------------------------------

Shape = Callable[[dict[str, Any]], dict[str, Any] | None]


def _strings(obj: dict[str, Any], *keys: str) -> None:
    """Optional string properties: left out unless they are strings."""
    for key in keys:
        if key in obj and not isinstance(obj[key], str):
            del obj[key]


def _named(obj: Any, *keys: str) -> bool:
    return isinstance(obj, dict) and all(isinstance(obj.get(k), str) for k in keys)


def _facet(facet: dict[str, Any]) -> dict[str, Any]:
    """A typed facet's copy with its base properties (``_producer``, ``_schemaURL``) kept only
    when they are URIs."""
    out = dict(facet)
    for key in ("_producer", "_schemaURL"):
        if key in out and not is_uri(out[key]):
            del out[key]
    return out


def _objects(
    out: dict[str, Any], key: str, keep: Callable[[dict[str, Any]], dict[str, Any] | None]
) -> dict[str, Any]:
    """``out[key]``, a list of objects, with each object shaped by ``keep`` (None: left out);
    anything else under ``key`` is left out whole."""
    value = out.get(key)
    if isinstance(value, list):
        out[key] = [
            shaped
            for item in value
            if isinstance(item, dict) and (shaped := keep(item)) is not None
        ]
    else:
        out.pop(key, None)
    return out


def _schema_field(field: dict[str, Any]) -> dict[str, Any] | None:
    if not isinstance(field.get("name"), str):
        return None
    out = dict(field)
    if not isinstance(out.get("type"), str):
        out["type"] = UNKNOWN_TYPE
    _strings(out, "description")
    return out


def _schema(facet: dict[str, Any]) -> dict[str, Any] | None:
    return _objects(_facet(facet), "fields", _schema_field)


def _symlink(identifier: dict[str, Any]) -> dict[str, Any] | None:
    if not _named(identifier, "namespace", "name"):
        return None
    out = dict(identifier)
    if not isinstance(out.get("type"), str):
        out["type"] = SYMLINK_TYPE
    return out


def _symlinks(facet: dict[str, Any]) -> dict[str, Any] | None:
    return _objects(_facet(facet), "identifiers", _symlink)


def _input_field(field: dict[str, Any]) -> dict[str, Any] | None:
    return dict(field) if _named(field, "namespace", "name", "field") else None


def _column_lineage_field(field: dict[str, Any]) -> dict[str, Any] | None:
    if not isinstance(field.get("inputFields"), list):
        return None  # no lineage to tell; the server skips such a field anyway
    out = _objects(dict(field), "inputFields", _input_field)
    _strings(out, "transformationDescription", "transformationType")
    return out


def _column_lineage(facet: dict[str, Any]) -> dict[str, Any] | None:
    fields = facet.get("fields")
    if not isinstance(fields, dict):
        return None
    out = _facet(facet)
    out["fields"] = {
        name: shaped
        for name, field in fields.items()
        if isinstance(field, dict) and (shaped := _column_lineage_field(field)) is not None
    }
    return out


def _owner(owner: dict[str, Any]) -> dict[str, Any] | None:
    if not isinstance(owner.get("name"), str):
        return None
    out = dict(owner)
    _strings(out, "type")
    return out


def _ownership(facet: dict[str, Any]) -> dict[str, Any] | None:
    return _objects(_facet(facet), "owners", _owner)


def _datasource(facet: dict[str, Any]) -> dict[str, Any] | None:
    out = _facet(facet)
    _strings(out, "name")
    if "uri" in out and not is_uri(out["uri"]):
        del out["uri"]
    return out


def _documentation(facet: dict[str, Any]) -> dict[str, Any] | None:
    out = _facet(facet)
    _strings(out, "description")
    return out


def _parent(facet: dict[str, Any]) -> dict[str, Any] | None:
    if not _named(facet.get("job"), "namespace", "name"):
        return None  # the server reads the parent's job for the pipeline; no job, no parent
    out = _facet(facet)
    run = out.get("run")
    if "run" in out:
        if isinstance(run, dict) and isinstance(run.get("runId"), str):
            out["run"] = {**run, "runId": run_uuid(run["runId"])}
        else:
            del out["run"]
    root = out.get("root")
    if isinstance(root, dict) and isinstance(root.get("run"), dict):
        root_run = root["run"]
        if isinstance(root_run.get("runId"), str):
            out["root"] = {**root, "run": {**root_run, "runId": run_uuid(root_run["runId"])}}
    return out


def _sql(facet: dict[str, Any]) -> dict[str, Any] | None:
    return _facet(facet) if isinstance(facet.get("query"), str) else None


def _error_message(facet: dict[str, Any]) -> dict[str, Any] | None:
    if not isinstance(facet.get("message"), str):
        return None
    out = _facet(facet)
    _strings(out, "programmingLanguage", "stackTrace")
    return out


def _processing_engine(facet: dict[str, Any]) -> dict[str, Any] | None:
    out = _facet(facet)
    _strings(out, "name", "version", "openlineageAdapterVersion")
    return out


# facet map -> the facets OpenMetadata types in it (openLineageFacets.json)
RUN_FACETS: dict[str, Shape] = {
    "parent": _parent,
    "errorMessage": _error_message,
    "processing_engine": _processing_engine,
}
JOB_FACETS: dict[str, Shape] = {"sql": _sql, "ownership": _ownership}
DATASET_FACETS: dict[str, Shape] = {
    "schema": _schema,
    "symlinks": _symlinks,
    "datasource": _datasource,
    "documentation": _documentation,
    "ownership": _ownership,
    "columnLineage": _column_lineage,
}
INPUT_FACETS: dict[str, Shape] = {}
OUTPUT_FACETS: dict[str, Shape] = {"columnLineage": _column_lineage}


def _facets(value: Any, typed: Mapping[str, Shape]) -> dict[str, Any] | None:
    """A facet map with each typed facet in its type's shape (left out when it cannot be);
    None when the map itself is not an object."""
    if not isinstance(value, dict):
        return None
    out: dict[str, Any] = {}
    for name, facet in value.items():
        shape = typed.get(name)
        if shape is None:
            out[name] = facet
        elif isinstance(facet, dict) and (shaped := shape(facet)) is not None:
            out[name] = shaped
    return out


def _with_facets(obj: dict[str, Any], key: str, typed: Mapping[str, Shape]) -> None:
    if key in obj:
        facets = _facets(obj[key], typed)
        if facets is None:
            del obj[key]
        else:
            obj[key] = facets


# -- the event ------------------------------------------------------------------------------------


def _dataset(value: Any, where: str, extra: tuple[str, Mapping[str, Shape]]) -> dict[str, Any]:
    if not _named(value, "namespace", "name"):
        raise NotConformable(f"{where} needs a namespace and a name")
    out = dict(value)
    _with_facets(out, "facets", DATASET_FACETS)
    _with_facets(out, *extra)
    return out


def _datasets(event: dict[str, Any], key: str, extra: tuple[str, Mapping[str, Shape]]) -> None:
    if key not in event:
        return
    value = event[key]
    if not isinstance(value, list):
        if value is None:
            del event[key]
            return
        raise NotConformable(f"{key} is not a list")
    event[key] = [_dataset(d, f"{key}[{i}]", extra) for i, d in enumerate(value)]


def _conform(event: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: event[k] for k in RUN_EVENT_KEYS if k in event}

    if not is_uri(out.get("schemaURL")):
        out["schemaURL"] = RUN_EVENT_SCHEMA_URL
    out["eventTime"] = event_time(out.get("eventTime"))
    producer = out.get("producer")
    if not isinstance(producer, str):
        raise NotConformable("producer is not a string")
    out["producer"] = producer_uri(producer)
    if out.get("eventType", "COMPLETE") is None:
        del out["eventType"]
    elif out.get("eventType", "COMPLETE") not in EVENT_TYPES:
        raise NotConformable(f"eventType {out['eventType']!r} is not one OpenMetadata knows")

    run = out.get("run")
    if not isinstance(run, dict) or not isinstance(run.get("runId"), str):
        raise NotConformable("run.runId is not a string")
    run = {**run, "runId": run_uuid(run["runId"])}
    _with_facets(run, "facets", RUN_FACETS)
    out["run"] = run

    job = out.get("job")
    if not isinstance(job, dict) or not _named(job, "namespace", "name"):
        raise NotConformable("job needs a namespace and a name")
    job = dict(job)
    _with_facets(job, "facets", JOB_FACETS)
    out["job"] = job

    _datasets(out, "inputs", ("inputFacets", INPUT_FACETS))
    _datasets(out, "outputs", ("outputFacets", OUTPUT_FACETS))
    return out


def conform(event: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """(the event as OpenMetadata's schema accepts it, None), or (None, why it cannot be); the
    event given is not changed."""
    try:
        return _conform(event), None
    except NotConformable as exc:
        return None, str(exc)
