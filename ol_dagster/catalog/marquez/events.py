"""One event made into what Marquez reads, before it is sent, and Marquez's answer to it read.

Marquez reads an event with Jackson into its own classes, and the receiver accepts, on purpose,
events it cannot read. What Jackson cannot read, Marquez answers with a **500** (its own
``JsonProcessingExceptionMapper`` calls ``serverError()``, with ``{"code": 400, "message": <what
Jackson said>}``): a client that retries 5xx would send it again and again, and lose the batch
every run. So ``conform`` changes only what Marquez would refuse:

* a time its ``FlexibleDateTimeDeserializer`` cannot parse (``eventTime``, the ``nominalTime``
  facet's ``nominalStartTime``/``nominalEndTime``): a date without a time, ``+0200`` (no colon), a
  space instead of ``T``, no minutes... is written again as the time ol-dagster read it
  (``parse_event_time``: a zone-less time is UTC), in UTC with ``Z``. A time Marquez reads is
  sent as it is (a time without an offset: Marquez reads it in its own zone);
* nothing else is changed. A namespace outside ``NamespaceName``'s pattern (letters, digits and
  ``_ @ + - : = ; / .``, 1 to 1024 characters: ``,``, spaces and non-ASCII letters are refused,
  ``kafka://a:9092,b:9092`` among them) or a blank job or dataset name (``JobName``,
  ``DatasetName``) cannot be fixed without renaming what it names: the event is not sent and is
  one failed row (``MARQUEZ_SCHEMA``) naming the field and why.

``refusal`` reads Marquez's answer to one event: 422 (bean validation, ``{"errors": [...]}``), its
400 (an ``IllegalArgumentException`` while it writes the event: no body) and the 500 of a Jackson
error (``{"code": 400, ...}``) refuse that event alone; every other answer is the server's state,
not the event's.

Upstream (MarquezProject/marquez @ a89b89cad27f87c90dd964c40dae8dfb3f64031f, under
``api/src/main/java/marquez/``): ``api/exceptions/JsonProcessingExceptionMapper.java``,
``api/OpenLineageResource.java`` (``determineStatusCode``),
``common/models/FlexibleDateTimeDeserializer.java``, ``common/models/NamespaceName.java``,
``common/models/JobName.java``, ``common/models/DatasetName.java``.
"""

from __future__ import annotations

import json
import re
from datetime import UTC
from typing import Any

import httpx

from ol_dagster.openlineage.envelope import EventRejected, parse_event_time

MARQUEZ_SCHEMA = "MARQUEZ_SCHEMA"  # an event Marquez refuses for its content, on every run

# NamespaceName.PATTERN: ^[a-zA-Z:;=/0-9_\-.@+]{1,1024}$
NAMESPACE = re.compile(r"[a-zA-Z:;=/0-9_\-.@+]{1,1024}")
_NAMESPACE_CHAR = re.compile(r"[a-zA-Z:;=/0-9_\-.@+]")
# FlexibleDateTimeDeserializer: ISO_LOCAL_DATE_TIME (case-insensitive), then an optional offset
# read leniently under "+HH:MM:ss" (each of :MM and :ss optional); Jackson trims the text first
_MARQUEZ_TIME = re.compile(
    r"[0-9]{4}-(?P<mo>[0-9]{2})-(?P<d>[0-9]{2})[Tt](?P<hh>[0-9]{2}):(?P<mm>[0-9]{2})"
    r"(?::(?P<ss>[0-9]{2})(?:\.[0-9]{0,9})?)?"
    r"(?:[Zz]|[+-](?P<h>[0-9]{2})(?::(?P<m>[0-9]{2})(?::(?P<s>[0-9]{2}))?)?)?"
)
_MAX_OFFSET = 18 * 3600  # java.time.ZoneOffset
_JAVA_TRIM = "".join(chr(c) for c in range(33))  # what String.trim() removes
REJECTED = frozenset({400, 422})
_REASON_CHARS = 300


class NotConformable(ValueError):
    """An event Marquez would refuse and that cannot be changed without changing its meaning."""


def reads_time(value: object) -> bool:
    """Whether Marquez's date reader takes this string as it is (the ranges as Python's own
    reading of the same string checks them: 24:00, which Java reads, is rewritten)."""
    if not isinstance(value, str):
        return False
    m = _MARQUEZ_TIME.fullmatch(value.strip(_JAVA_TRIM))
    if m is None:
        return False
    n = {k: int(v or 0) for k, v in m.groupdict().items()}
    offset = n["h"] * 3600 + n["m"] * 60 + n["s"]
    return (
        1 <= n["mo"] <= 12
        and 1 <= n["d"] <= 31
        and n["hh"] < 24
        and n["mm"] < 60
        and n["ss"] < 60
        and n["m"] < 60
        and n["s"] < 60
        and offset <= _MAX_OFFSET
    )


def marquez_time(value: object, path: str) -> str:
    """The time as Marquez can read it: as it is, or the time ol-dagster read, in UTC."""
    if reads_time(value):
        return value  # type: ignore[return-value]
    try:
        when = parse_event_time(value, path)
    except EventRejected as exc:
        raise NotConformable(f"{path}: {exc.reason}") from None
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def check_namespace(value: object, path: str) -> None:
    if isinstance(value, str) and NAMESPACE.fullmatch(value):
        return
    if not isinstance(value, str) or not value:
        raise NotConformable(f"{path}: a namespace is required")
    if len(value) > 1024:
        raise NotConformable(f"{path}: {len(value)} characters, Marquez takes at most 1024")
    bad = sorted({c for c in value if not _NAMESPACE_CHAR.fullmatch(c)})
    raise NotConformable(
        f"{path} {value!r}: Marquez takes only letters a-z A-Z, digits and _ @ + - : = ; / . in "
        f"a namespace, not {' '.join(repr(c) for c in bad)}"
    )


def check_name(value: object, path: str) -> None:
    if not isinstance(value, str) or not value.strip(_JAVA_TRIM):
        raise NotConformable(f"{path}: Marquez refuses a blank name")


def _datasets(event: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    if isinstance(event.get("dataset"), dict):
        out.append(("dataset", event["dataset"]))
    for side in ("inputs", "outputs"):
        value = event.get(side)
        if isinstance(value, list):
            out += [(f"{side}[{i}]", d) for i, d in enumerate(value) if isinstance(d, dict)]
    return out


def conform(event: dict[str, Any]) -> dict[str, Any]:
    """The event as Marquez reads it (changed in place and returned); ``NotConformable`` says
    which field Marquez would refuse, and why."""
    event["eventTime"] = marquez_time(event.get("eventTime"), "eventTime")
    run = event.get("run")
    facets = run.get("facets") if isinstance(run, dict) else None
    nominal = facets.get("nominalTime") if isinstance(facets, dict) else None
    if isinstance(nominal, dict):
        for key in ("nominalStartTime", "nominalEndTime"):
            if nominal.get(key) is not None:
                where = f"run.facets.nominalTime.{key}"
                nominal[key] = marquez_time(nominal[key], where)
    job = event.get("job")
    if isinstance(job, dict):
        check_namespace(job.get("namespace"), "job.namespace")
        check_name(job.get("name"), "job.name")
    for where, ds in _datasets(event):
        check_namespace(ds.get("namespace"), f"{where}.namespace")
        check_name(ds.get("name"), f"{where}.name")
    return event


# -- Marquez's answer to one event ----------------------------------------------------------------


def _body(response: httpx.Response) -> Any:
    try:
        return json.loads(response.text) if response.text.strip() else None
    except ValueError:
        return None


def is_jackson_error(response: httpx.Response) -> bool:
    """A 500 whose body is ``{"code": 400, "message": ...}``: what Marquez's
    ``JsonProcessingExceptionMapper`` answers for an event Jackson cannot read (its database
    errors say ``"code": 500``). The event is refused; sending it again changes nothing."""
    body = _body(response)
    return (
        response.status_code == 500
        and isinstance(body, dict)
        and body.get("code") == 400
        and isinstance(body.get("message"), str)
    )


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 3] + "..."


def refusal(response: httpx.Response) -> str | None:
    """Why Marquez refused this one event, or None when the answer is not Marquez's refusal of
    an event (a proxy's 400 page...)."""
    status, body = response.status_code, _body(response)
    if status == 422 and isinstance(body, dict) and isinstance(body.get("errors"), list):
        return _one_line(f"HTTP 422: {'; '.join(str(e) for e in body['errors'])}")
    if status == 400 and not response.text.strip():
        return "HTTP 400 without a message: Marquez could not write the event"
    if status == 400 and isinstance(body, dict) and body.get("code") == 400:
        return _one_line(f"HTTP 400: {body.get('message') or ''}")
    if is_jackson_error(response):
        return _one_line(f"HTTP 500, Marquez cannot read the event: {body['message']}")
    return None


def server_message(response: httpx.Response) -> str:
    """The server's reason for an answer it gave to an event, on one line."""
    body = _body(response)
    text = response.text
    if isinstance(body, dict):
        errors = body.get("errors")
        if isinstance(errors, list) and errors:
            text = "; ".join(str(e) for e in errors)
        elif body.get("message"):
            text = str(body["message"])
    message = _one_line(f"HTTP {response.status_code}: {text}" if text.strip() else "")
    return message or f"HTTP {response.status_code}"
