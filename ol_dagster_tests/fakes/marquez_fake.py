"""A Marquez server in memory, so the Marquez client is tested against Marquez's rules, not ours.

Each rule is re-expressed from MarquezProject/marquez at a89b89cad27f87c90dd964c40dae8dfb3f64031f
(Java paths below are under ``api/src/main/java/marquez/``; ``contracts/marquez/SOURCE.md``
lists them all). Every request is checked against Marquez's own ``spec/openapi.yml`` (the
``contract`` of the ``FakeServer``: ``contracts/marquez.py``), so a request the file does not
describe fails the test that sent it.

* ``POST /api/v1/lineage`` (``api/OpenLineageResource.java``): ``@Consumes(APPLICATION_JSON)``, so a
  body whose Content-Type is not ``application/json`` (``text/plain``, none) is **415**
  ``{"code":415,"message":"HTTP 415 Unsupported Media Type"}`` before it is read. The event kind is
  the end of ``schemaURL`` from its last ``/`` (``/DatasetEvent``, ``/JobEvent``; anything else, or
  no ``/``, a RunEvent: ``service/models/EventTypeResolver.java``). Jackson reads the body first:
  what it cannot read is **500** ``{"code":400,"message":<Jackson's message>}`` (Marquez's own
  ``api/exceptions/JsonProcessingExceptionMapper.java`` answers ``Response.serverError()`` with an
  ``ErrorMessage`` of 400, registered in ``MarquezContext.java``; its test
  ``OpenLineageIntegrationTest .testSendOpenLineageEventFailsJsonProcessing`` reads the message):
  not JSON, no body; ``run``, ``job``, ``dataset`` or a typed facet not an object;
  ``inputs``/``outputs`` not a list of objects; ``eventTime`` or a nominal time its date parser
  refuses; a ``schemaURL``, ``_producer`` or ``_schemaURL`` ``java.net.URI`` refuses. Then bean
  validation (``service/models/LineageEvent.java``), 422 ``{"errors": [...]}`` for each ``@NotNull``
  value missing or null (an empty string is not null): eventTime (an empty one reads as null),
  producer, run, run.runId, job and dataset namespace and name, a typed facet's
  ``_producer``/``_schemaURL`` and its own required fields (``parentRun`` is read as ``parent``:
  ``@JsonAlias``). Then, while the event is written, an ``IllegalArgumentException`` is 400 with an
  empty body (``determineStatusCode``): a namespace breaking ``^[a-zA-Z:;=/0-9_\\-.@+]{1,1024}$``
  (``common/models/NamespaceName.java``), a blank job or dataset name (``JobName``,
  ``DatasetName``). A stored event is **201 with an empty body** (the OpenAPI file says 200).
* ``eventTime`` (``common/models/FlexibleDateTimeDeserializer.java``): ``marquez_time`` of the
  contract module; a time **without an offset is accepted**, in the server's zone (``zone``, UTC
  by default, as in Marquez's image).
* A job with a parent (``db/OpenLineageDao.java``: ``buildJobFromEvent``, ``findParentJobRow``,
  ``createParentJobRunRecord``; ``api/src/main/resources/marquez/db/migration/
  R__Jobs_view_and_rewrite_function.sql``: ``rewrite_jobs_fqn_table``). The parent's name is the
  facet's job name, or that name up to its last dot when it names the child itself
  (``common/Utils.java`` ``parseParentJobName``). The parent is the job of the parent run when
  Marquez knows that run (its uuid: the runId, else a name-based uuid of namespace, name and
  runId: ``Utils.toUuid``) and that job has the facet's namespace and the parent's name;
  otherwise Marquez makes the parent job **in the child's namespace**. The child is stored as
  ``<parent name>.<child name>``, the child name first stripped of a leading ``<parent name>.``.
* Current inputs and outputs (what the lineage graph shows: ``db/LineageDao.java`` reads
  ``is_current_job_version``, written by ``db/JobVersionDao.java``). A run event with empty or
  missing inputs (or outputs) marks the job's current ones previous, unless it is a COMPLETE or
  FAIL (``LineageEvent.isTerminalEvent``) of a streaming job with no datasets at all. A run
  event whose state is done, **COMPLETE, FAIL or ABORT** (``OpenLineageDao.getRunState``, then
  ``common/models/RunState.java`` ``isDone``), makes the datasets of its whole run (every event
  of that runId) the job's current ones, each side only when the run has some; START, RUNNING,
  OTHER and no type never do. A streaming job instead takes its run's datasets at any event that
  brings a set it never had (``updateMarquezOnStreamingJob``). A JobEvent makes its inputs
  (outputs) current when it has some (``JobVersionDao.upsertRunlessJobVersion``).
* Every event upserts its namespace, job and datasets and sets ``is_hidden`` back to false
  (undelete).
* Aliases (``api/filter/JobRedirectFilter.java``; ``db/JobDao.java`` ``findJobByName``): a job
  renamed by Marquez's migration (``db/migrations/V44_3_BackfillJobsWithParents.java``) or an
  operator points at its new row (``rename``, the test's way to do it); its old name leaves the
  lists and becomes an alias, and a request on a ``/namespaces/{namespace}/jobs/{job}...`` path
  of ``JobResource`` (any of its methods) naming it is **301** with an absolute ``Location``
  naming the current job (segments encoded as Jersey's ``PATH_SEGMENT``). An event naming the
  old name writes to the new job (the trigger answers the symlink target).
* ``GET`` and ``DELETE /api/v1/namespaces/{ns}/jobs/{job}``, ``DELETE .../datasets/{name}``
  (``api/JobResource.java``, ``api/DatasetResource.java``, ``api/BaseResource.java``): 404
  ``Namespace '...' not found.`` for an unknown namespace, 404 ``Job '...' not found.``
  (``Dataset ...``) when absent or hidden; a delete is a soft delete answering 200 with the
  object. Lists and the lineage graph leave hidden and renamed jobs out (``jobs_view``).
* ``GET /api/v1/namespaces`` (hidden namespaces included), ``GET /api/v1/namespaces/{ns}/jobs``
  and ``.../datasets`` (404 for an unknown namespace: ``DatasetResource``).
* ``GET /api/v1/namespaces/{ns}/datasets/{name}`` (``currentVersion``, ``lastModifiedAt``,
  ``columnLineage``) and ``GET .../versions/{version}`` (``createdByRun`` and its
  ``jobVersion``): ``api/DatasetResource.java``, with the versions and column lineage of
  ``marquez_versions``.
* No authentication.

Not modelled: an event naming the alias of a hidden job (the trigger then answers no row); the
rewrite of a job's namespace (``OpenLineageDao.formatNamespaceName``: here a job namespace
outside the pattern is refused like a dataset's); job versions and runs beyond what decides
current inputs and outputs; text after the JSON value of the body.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any
from urllib.parse import quote, unquote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ol_dagster_tests.contracts.marquez import (
    is_uri,
    java_name_uuid,
    java_uuid,
    marquez_time,
    request_errors,
)
from ol_dagster_tests.fakes.faults import Clock, FakeServer
from ol_dagster_tests.fakes.marquez_versions import DatasetVersion, Versions

Key = tuple[str, str]
Version = tuple[frozenset[Key], frozenset[Key]]

NAMESPACE = re.compile(r"^[a-zA-Z:;=/0-9_\-.@+]{1,1024}$")
DONE = frozenset({"complete", "abort", "fail"})  # RunState.isDone, via getRunState (lower-cased)
TERMINAL = frozenset({"COMPLETE", "FAIL"})  # LineageEvent.isTerminalEvent (ignoring case)
# facets Marquez reads into typed classes (LineageEvent.java): each needs _producer and _schemaURL
# (BaseFacet) and the fields listed; ``parent``'s own are checked with the parent
TYPED_RUN_FACETS: dict[str, tuple[str, ...]] = {"nominalTime": ("nominalStartTime",), "parent": ()}
TYPED_JOB_FACETS: dict[str, tuple[str, ...]] = {
    "documentation": ("description",),
    "sourceCodeLocation": (),
    "sql": ("query",),
    "jobType": ("processingType", "integration", "jobType"),
}
TYPED_DATASET_FACETS: dict[str, tuple[str, ...]] = {
    "documentation": ("description",),
    "schema": (),
    "dataSource": (),
    "lifecycleStateChange": (),
    "columnLineage": (),
    "symlinks": (),
}
# Jersey's answer to a body whose Content-Type is not what ``@Consumes(APPLICATION_JSON)`` takes
# (Dropwizard's LoggingExceptionMapper of the NotSupportedException)
UNSUPPORTED = {"code": 415, "message": "HTTP 415 Unsupported Media Type"}
_JAVA_WHITESPACE = "".join(chr(c) for c in range(33))
# JobRedirectFilter acts on every JobResource path with {namespace} and {job}, and their methods
_JOB_PATHS = re.compile(r"/api/v1/namespaces/(?P<ns>[^/]+)/jobs/(?P<job>[^/]+)(?P<rest>/.*)?")
_JOB_METHODS: dict[str, re.Pattern[str]] = {
    "GET": re.compile(r"|/versions|/versions/[^/]+|/runs"),
    "PUT": re.compile(r""),
    "DELETE": re.compile(r"|/tags/[^/]+"),
    "POST": re.compile(r"/runs|/tags/[^/]+"),
}
_JERSEY_PATH_SEGMENT = "!$&'()*+,;=:@"  # sub-delims, ':' and '@' stay as they are


def _json_media_type(value: str | None) -> bool:
    """``application/json`` (any case, any parameters): what ``@Consumes(APPLICATION_JSON)``
    matches; no Content-Type is ``application/octet-stream`` to Jersey."""
    return value is not None and value.split(";")[0].strip().lower() == "application/json"


def event_kind(event: dict[str, Any]) -> str:
    url = str(event.get("schemaURL") or "")
    end = url[url.rindex("/") :] if "/" in url else ""
    return {"/DatasetEvent": "DatasetEvent", "/JobEvent": "JobEvent"}.get(end, "RunEvent")


def parent_facet(event: dict[str, Any]) -> Any:
    """The run's parent facet; ``parentRun`` is an alias of ``parent``, the later key wins."""
    facets = (event.get("run") or {}).get("facets")
    if not isinstance(facets, dict):
        return None
    found = None
    for key, value in facets.items():
        if key in ("parent", "parentRun"):
            found = value
    return found


def parent_job_name(facet_name: str, child_name: str) -> str:
    """OpenLineageDao: the facet's job name, or up to its last dot when it names the child."""
    if facet_name != child_name:
        return facet_name
    return facet_name.rsplit(".", 1)[0] if "." in facet_name else facet_name


def run_uuid(run_id: str) -> uuid.UUID:
    """OpenLineageDao.runToUuid: the runId as a UUID, else a name-based one of its bytes."""
    try:
        return java_uuid(run_id)
    except ValueError:
        return java_name_uuid(run_id.encode())


def name_based_uuid(*parts: str) -> uuid.UUID:
    """Utils.toNameBasedUuid: version 3 in the URL namespace of the parts joined by dots."""
    return uuid.uuid3(uuid.NAMESPACE_URL, ".".join(parts))


def _facet_errors(facets: Any, typed: dict[str, tuple[str, ...]], where: str) -> list[str]:
    errors = []
    if isinstance(facets, dict):
        for name in sorted(set(typed) & set(facets)):
            facet = facets[name]
            if not isinstance(facet, dict):
                continue  # null: no facet; anything else Jackson cannot read (400, before this)
            for required in ("_producer", "_schemaURL", *typed[name]):
                if facet.get(required) is None:
                    errors.append(f"{where}.facets.{name}.{required} must not be null")
    return errors


def _items(value: Any) -> list[tuple[int, dict[str, Any]]]:
    return (
        [(i, v) for i, v in enumerate(value) if isinstance(v, dict)]
        if isinstance(value, list)
        else []
    )


def _dataset_facet_errors(facets: Any, where: str) -> list[str]:
    """The @NotNull fields inside the typed dataset facets' lists and maps."""
    if not isinstance(facets, dict):
        return []
    errors = []
    schema = facets.get("schema")
    if isinstance(schema, dict):
        for i, f in _items(schema.get("fields")):
            if f.get("name") is None:
                errors.append(f"{where}.facets.schema.fields[{i}].name must not be null")
    symlinks = facets.get("symlinks")
    if isinstance(symlinks, dict):
        for i, ident in _items(symlinks.get("identifiers")):
            for f in ("namespace", "name"):
                if ident.get(f) is None:
                    errors.append(f"{where}.facets.symlinks.identifiers[{i}].{f} must not be null")
    lineage = facets.get("columnLineage")
    columns = lineage.get("fields") if isinstance(lineage, dict) else None
    if isinstance(columns, dict):
        for column, spec in columns.items():
            if not isinstance(spec, dict):
                continue
            at = f"{where}.facets.columnLineage.fields.{column}.inputFields"
            if spec.get("inputFields") is None:
                errors.append(f"{at} must not be null")
            for i, field_ in _items(spec.get("inputFields")):
                for f in ("namespace", "name", "field"):
                    if field_.get(f) is None:
                        errors.append(f"{at}[{i}].{f} must not be null")
    return errors


def _datasets(event: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = event.get(key)
    return [d for d in value if isinstance(d, dict)] if isinstance(value, list) else []


def _ds_errors(ds: dict[str, Any], where: str) -> list[str]:
    errors = [f"{where}.{f} must not be null" for f in ("namespace", "name") if ds.get(f) is None]
    errors += _facet_errors(ds.get("facets"), TYPED_DATASET_FACETS, where)
    errors += _dataset_facet_errors(ds.get("facets"), where)
    return errors


def _blank(value: Any) -> bool:
    """A ``ZonedDateTime`` Jackson reads as null: missing, null, or empty once trimmed."""
    return value is None or (isinstance(value, str) and not value.strip(_JAVA_WHITESPACE))


def _not_null(value: dict[str, Any], fields: tuple[str, ...], where: str) -> list[str]:
    """@NotNull: only a missing or null value breaks it (an empty string does not)."""
    return [f"{where}{f} must not be null" for f in fields if value.get(f) is None]


def validation_errors(event: dict[str, Any]) -> list[str]:
    """Bean validation of Marquez's LineageEvent classes (LineageEvent.java, DatasetEvent.java,
    JobEvent.java): 422 when not empty."""
    kind = event_kind(event)
    errors = ["eventTime must not be null"] if _blank(event.get("eventTime")) else []
    errors += _not_null(event, ("producer",), "")
    if kind == "DatasetEvent":
        ds = event.get("dataset")
        errors += (
            _ds_errors(ds, "dataset") if isinstance(ds, dict) else ["dataset must not be null"]
        )
        return errors
    job = event.get("job")
    if not isinstance(job, dict):
        errors.append("job must not be null")
    else:
        errors += _not_null(job, ("namespace", "name"), "job.")
        errors += _facet_errors(job.get("facets"), TYPED_JOB_FACETS, "job")
    if kind == "RunEvent":
        run = event.get("run")
        if not isinstance(run, dict):
            errors.append("run must not be null")
        else:
            errors += _not_null(run, ("runId",), "run.")
            facets = dict(run.get("facets") or {})
            parent = parent_facet(event)
            if parent is not None:
                facets["parent"] = parent
            errors += _facet_errors(facets, TYPED_RUN_FACETS, "run")
            if isinstance(parent, dict):
                for link, fields in (("run", ("runId",)), ("job", ("namespace", "name"))):
                    value = parent.get(link)
                    if not isinstance(value, dict):
                        errors.append(f"run.facets.parent.{link} must not be null")
                    else:
                        errors += _not_null(value, fields, f"run.facets.parent.{link}.")
    for key in ("inputs", "outputs"):
        for i, ds in enumerate(_datasets(event, key)):
            errors += _ds_errors(ds, f"{key}[{i}]")
    return errors


def _uri_fields(event: dict[str, Any]) -> list[Any]:
    """Values Jackson reads as ``java.net.URI``: the event's schemaURL, typed facets' ``_producer``
    and ``_schemaURL``."""
    out = [event.get("schemaURL")]
    groups: list[tuple[Any, dict[str, tuple[str, ...]]]] = [
        ((event.get("job") or {}).get("facets"), TYPED_JOB_FACETS),
        ((event.get("run") or {}).get("facets"), {**TYPED_RUN_FACETS, "parentRun": ()}),
    ]
    datasets = [event.get("dataset")] + _datasets(event, "inputs") + _datasets(event, "outputs")
    groups += [(d.get("facets"), TYPED_DATASET_FACETS) for d in datasets if isinstance(d, dict)]
    for facets, typed in groups:
        if isinstance(facets, dict):
            for name in set(typed) & set(facets):
                if isinstance(facets[name], dict):
                    out += [facets[name].get("_producer"), facets[name].get("_schemaURL")]
    return [v for v in out if v is not None]


_STREAM = "(org.glassfish.jersey.message.internal.ReaderInterceptorExecutor$UnCloseableInputStream)"
_CLASSES = {
    "run": "marquez.service.models.LineageEvent$Run",
    "job": "marquez.service.models.LineageEvent$Job",
    "dataset": "marquez.service.models.LineageEvent$Dataset",
}


def _json_type(value: Any) -> str:
    if isinstance(value, str):
        return f"String value ('{value}')"
    if isinstance(value, list):
        return "Array value (token `JsonToken.START_ARRAY`)"
    return f"{type(value).__name__} value"


def _chain(path: str) -> str:
    """Jackson's "through reference chain" of a field path (``run.facets.nominalTime...``)."""
    parts = "".join(f'["{p}"]' for p in path.split("."))
    return f" (through reference chain: marquez.service.models.LineageEvent{parts})"


def _time_message(value: Any, path: str) -> str:
    shown = json.dumps(value) if isinstance(value, str) else repr(value)
    return (
        f"Cannot deserialize value of type `java.time.ZonedDateTime` from String {shown}: Failed "
        f"to deserialize java.time.ZonedDateTime: (java.time.format.DateTimeParseException) Text "
        f"'{value}' could not be parsed{_chain(path)}"
    )


def unreadable(event: dict[str, Any], zone: tzinfo = UTC) -> str | None:
    """What Jackson says when it cannot read the event into Marquez's classes (the message of
    the ``JsonProcessingException`` Marquez's mapper answers with a 500, before validation);
    None when it can. Messages follow Jackson 2's wording, not byte for byte."""
    for key in ("run", "job", "dataset"):
        if event.get(key) is not None and not isinstance(event[key], dict):
            return (
                f"Cannot construct instance of `{_CLASSES[key]}`: no delegate- or "
                f"property-based Creator to deserialize from {_json_type(event[key])}{_chain(key)}"
            )
    for key in ("inputs", "outputs"):
        value = event.get(key)
        if value is not None and (
            not isinstance(value, list) or any(not isinstance(d, dict | None) for d in value)
        ):
            return (
                "Cannot deserialize value of type `java.util.ArrayList<marquez.service.models."
                f"LineageEvent$Dataset>` from {_json_type(value)}{_chain(key)}"
            )
    times: list[tuple[Any, str]] = [(event.get("eventTime"), "eventTime")]
    run_facets = (event.get("run") or {}).get("facets")
    if run_facets is not None and not isinstance(run_facets, dict):
        return (
            "Cannot construct instance of `marquez.service.models.LineageEvent$RunFacet` from "
            f"{_json_type(run_facets)}{_chain('run.facets')}"
        )
    facet_groups = [
        (run_facets, {**TYPED_RUN_FACETS, "parentRun": ()}),
        ((event.get("job") or {}).get("facets"), TYPED_JOB_FACETS),
    ]
    datasets = [event.get("dataset")] + _datasets(event, "inputs") + _datasets(event, "outputs")
    facet_groups += [
        (d.get("facets"), TYPED_DATASET_FACETS) for d in datasets if isinstance(d, dict)
    ]
    for facets, typed in facet_groups:
        if facets is None:
            continue
        if not isinstance(facets, dict):
            return f"Cannot construct instance of facets from {_json_type(facets)}"
        for name in sorted(set(typed) & set(facets)):
            if facets[name] is not None and not isinstance(facets[name], dict):
                return (
                    f"Cannot construct instance of facet `{name}` from {_json_type(facets[name])}"
                )
    nominal = (run_facets or {}).get("nominalTime")
    if isinstance(nominal, dict):
        for key in ("nominalStartTime", "nominalEndTime"):
            times.append((nominal.get(key), f"run.facets.nominalTime.{key}"))
    for value, path in times:
        if not _blank(value):
            try:
                marquez_time(value, zone)
            except ValueError:
                return _time_message(value, path)
    for value in _uri_fields(event):
        if isinstance(value, dict | list) or (isinstance(value, str) and not is_uri(value)):
            return (
                f"Cannot deserialize value of type `java.net.URI` from {_json_type(value)}: not a "
                "valid textual representation"
            )
    return None


def not_json(raw: bytes) -> str:
    """Jackson's message for a body that is no JSON value (``JsonParseException``, or a
    ``MismatchedInputException`` for no content at all)."""
    text = raw.decode("utf-8", "replace").strip()
    if not text:
        return f"No content to map due to end-of-input\n at [Source: {_STREAM}; line: 1, column: 0]"
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        c = text[exc.pos] if exc.pos < len(text) else ""
        if not c:
            return (
                "Unexpected end-of-input: expected close marker for Object\n at [Source: "
                f"{_STREAM}; line: {exc.lineno}, column: {exc.colno}]"
            )
        return (
            f"Unexpected character ('{c}' (code {ord(c)})): expected a valid value (JSON String, "
            "Number, Array, Object or token 'null', 'true' or 'false')\n at [Source: "
            f"{_STREAM}; line: {exc.lineno}, column: {exc.colno}]"
        )
    return "Cannot construct instance of `marquez.service.models.BaseEvent` from a non-object"


def _names(event: dict[str, Any]) -> list[tuple[str, Any]]:
    """(namespace, name) of the event's job and datasets."""
    out = []
    if isinstance(event.get("job"), dict):
        out.append((event["job"].get("namespace"), event["job"].get("name")))
    datasets = [event.get("dataset")] + _datasets(event, "inputs") + _datasets(event, "outputs")
    out += [(d.get("namespace"), d.get("name")) for d in datasets if isinstance(d, dict)]
    return out


def refused_in_write(event: dict[str, Any]) -> bool:
    """An ``IllegalArgumentException`` while the event is written, 400 with no body
    (``OpenLineageResource.determineStatusCode``): a namespace breaking ``NamespaceName``'s
    pattern (``common/models/NamespaceName.java``), a blank job or dataset name
    (``JobName``/``DatasetName``: ``checkNotBlank``)."""
    for namespace, name in _names(event):
        if not isinstance(namespace, str) or not NAMESPACE.match(namespace):
            return True
        if not isinstance(name, str) or not name.strip():
            return True
    return False


def _fields(ds: dict[str, Any]) -> tuple[str, ...]:
    """The field names of a dataset's schema facet in this event."""
    schema = (ds.get("facets") or {}).get("schema")
    fields = schema.get("fields") if isinstance(schema, dict) else None
    if not isinstance(fields, list):
        return ()
    return tuple(str(f.get("name")) for f in fields if isinstance(f, dict))


def _streaming(job: dict[str, Any]) -> bool:
    job_type = (job.get("facets") or {}).get("jobType") or {}
    return str(job_type.get("processingType") or "").upper() == "STREAMING"


@dataclass
class JobRow:
    namespace: str
    name: str  # the name Marquez holds: ``<parent>.<job>`` for a child
    simple_name: str
    created_at: datetime
    updated_at: datetime
    parent: Key | None = None
    type: str = "BATCH"
    hidden: bool = False
    symlink: Key | None = None  # the job this name was renamed to
    aliases: set[str] = field(default_factory=set)
    inputs: set[Key] = field(default_factory=set)
    outputs: set[Key] = field(default_factory=set)
    versions: set[Version] = field(default_factory=set)
    facets: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> Key:
        return (self.namespace, self.name)

    @property
    def in_view(self) -> bool:
        """In ``jobs_view``: neither hidden nor renamed."""
        return not self.hidden and self.symlink is None


@dataclass
class RunRow:
    job: Key
    inputs: set[Key] = field(default_factory=set)
    outputs: set[Key] = field(default_factory=set)
    job_version: uuid.UUID | None = None  # set once a version of its job links it


class MarquezFake:
    def __init__(self, clock: Clock | None = None, *, zone: tzinfo = UTC) -> None:
        self.clock = clock or Clock()
        self.zone = zone  # the server's ZoneId.systemDefault(), for times without an offset
        self.events: list[dict[str, Any]] = []
        self.namespaces: dict[str, dict[str, Any]] = {}
        self.jobs: dict[Key, JobRow] = {}
        self.runs: dict[uuid.UUID, RunRow] = {}
        self.datasets: dict[Key, dict[str, Any]] = {}
        self.versions = Versions()
        self.event_times: list[datetime] = []  # each stored event's eventTime as Marquez read it
        routes = Starlette(
            routes=[
                Route("/api/v1/lineage", self.post_lineage, methods=["POST"]),
                Route("/api/v1/namespaces", self.list_namespaces, methods=["GET"]),
                Route("/api/v1/namespaces/{ns}/jobs", self.list_jobs, methods=["GET"]),
                Route(
                    "/api/v1/namespaces/{ns}/jobs/{name}",
                    self.job,
                    methods=["GET", "DELETE"],
                ),
                Route("/api/v1/namespaces/{ns}/datasets", self.list_datasets, methods=["GET"]),
                Route(
                    "/api/v1/namespaces/{ns}/datasets/{name}",
                    self.dataset,
                    methods=["GET", "DELETE"],
                ),
                Route(
                    "/api/v1/namespaces/{ns}/datasets/{name}/versions/{version}",
                    self.dataset_version,
                    methods=["GET"],
                ),
            ]
        )
        routes.router.routes.extend(self.check_routes())

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            redirect = self._redirect(scope) if scope["type"] == "http" else None
            if redirect is not None:
                await redirect(scope, receive, send)
                return
            await routes(scope, receive, send)

        self.server = FakeServer(app, self.clock, contract=request_errors, name="marquez")

    # -- what a test reads or does -----------------------------------------------------------------

    def visible_jobs(self) -> set[Key]:
        return {k for k, j in self.jobs.items() if j.in_view}

    def visible_datasets(self) -> set[Key]:
        return {k for k, d in self.datasets.items() if not d["hidden"]}

    def hidden_jobs(self) -> set[Key]:
        return {k for k, j in self.jobs.items() if j.hidden}

    def current(self, key: Key) -> tuple[set[Key], set[Key]]:
        """A job's current (inputs, outputs)."""
        job = self.jobs[key]
        return set(job.inputs), set(job.outputs)

    def edges(self) -> set[tuple[Key, Key, Key]]:
        """(input dataset, job, output dataset) of the lineage graph: current versions of visible
        jobs, between visible datasets."""
        visible = self.visible_datasets()
        return {
            (i, key, o)
            for key, job in self.jobs.items()
            if job.in_view
            for i in job.inputs & visible
            for o in job.outputs & visible
        }

    def rename(self, namespace: str, old: str, new: str) -> None:
        """Rename job ``old`` to ``new`` (both in ``namespace``) the way Marquez's migration V44_3
        does (``java/marquez/db/migrations/V44_3_BackfillJobsWithParents.java``): a new row
        copied from the old one (``INSERT ... SELECT``), then the old row pointed at it
        (``symlink``). Marquez has no API for it."""
        row = self.jobs[(namespace, old)]
        now = self.clock.now()
        self.jobs[(namespace, new)] = JobRow(
            namespace,
            new,
            new,
            created_at=row.created_at,
            updated_at=now,
            parent=row.parent,
            type=row.type,
            inputs=set(row.inputs),
            outputs=set(row.outputs),
            facets=dict(row.facets),
        )
        self.symlink(namespace, old, new)

    def symlink(self, namespace: str, old: str, new: str) -> None:
        """Point job ``old`` at job ``new``, as ``rewrite_jobs_fqn_table`` then flattens it: every
        name that led to either is an alias of the new one, which alone stays in the lists."""
        target = self.jobs[(namespace, new)]
        now = self.clock.now()
        old_row = self.jobs.setdefault(
            (namespace, old), JobRow(namespace, old, old, created_at=now, updated_at=now)
        )
        for row in self.jobs.values():
            if row.symlink == old_row.key:
                row.symlink = target.key
        old_row.symlink = target.key
        target.aliases |= {old} | old_row.aliases
        old_row.aliases = set()

    # -- writes ------------------------------------------------------------------------------------

    def _touch_namespace(self, name: str) -> None:
        ns = self.namespaces.setdefault(name, {"createdAt": self.clock.now()})
        ns.update(hidden=False, updatedAt=self.clock.now())

    def _touch_dataset(self, ds: dict[str, Any], when: datetime) -> Key:
        key = (str(ds["namespace"]), str(ds["name"]))
        self._touch_namespace(key[0])
        row = self.datasets.setdefault(key, {"createdAt": when, "fields": []})
        if isinstance((ds.get("facets") or {}).get("schema"), dict):
            row["fields"] = list(_fields(ds))
        row.update(hidden=False, updatedAt=when)
        return key

    def _version_datasets(
        self, event: dict[str, Any], run: uuid.UUID | None, when: datetime
    ) -> None:
        """The dataset versions an event writes, and the column lineage of its outputs
        (``marquez_versions``)."""
        for ds in _datasets(event, "inputs"):
            self.versions.read((str(ds["namespace"]), str(ds["name"])), _fields(ds), run, when)
        read = (
            {k: self.datasets[k]["fields"] for k in self.runs[run].inputs}
            if run is not None
            else {}
        )
        for ds in _datasets(event, "outputs"):
            key = (str(ds["namespace"]), str(ds["name"]))
            self.versions.write(key, _fields(ds), run, when)
            if run is not None:
                self.versions.add_column_lineage(key, ds.get("facets"), _fields(ds), read)

    def _upsert_job(
        self, namespace: str, name: str, parent: Key | None, job_type: str, facets: Any
    ) -> JobRow:
        """``rewrite_jobs_fqn_table``: the row is keyed by the full name (the parent's name, a
        dot, the name); an update undeletes it, keeps a parent it had, and answers the job it
        was renamed to, if it was."""
        self._touch_namespace(namespace)
        full = f"{parent[1]}.{name}" if parent is not None else name
        now = self.clock.now()
        row = self.jobs.get((namespace, full))
        if row is None:
            row = JobRow(namespace, full, name, created_at=now, updated_at=now, parent=parent)
            self.jobs[row.key] = row
        else:
            row.parent = row.parent or parent
            row.simple_name = name if parent is not None else row.name
        row.updated_at, row.hidden, row.type = now, False, job_type
        if isinstance(facets, dict):
            row.facets = facets
        return self.jobs[row.symlink] if row.symlink is not None else row

    def _find_job(self, namespace: str, name: str) -> JobRow | None:
        """``JobDao.findJobByName``: in ``jobs_view``, by its name or one of its aliases."""
        for row in self.jobs.values():
            if (
                row.namespace == namespace
                and row.in_view
                and (name == row.name or name in row.aliases)
            ):
                return row
        return None

    def _parent(self, event: dict[str, Any], facet: dict[str, Any], job_type: str) -> JobRow:
        """``findParentJobRow``: the parent run's job when it is the facet's, else a parent job
        made (or undeleted) in the child's namespace."""
        child = event["job"]
        fjob, frun = facet["job"], facet["run"]
        facet_ns, facet_name = str(fjob["namespace"]), str(fjob["name"])
        name = parent_job_name(facet_name, str(child["name"]))
        dag = facet_name.rsplit(".", 1)[0] if "." in facet_name else facet_name
        try:
            parent_run = java_uuid(str(frun["runId"]))
        except ValueError:
            parent_run = name_based_uuid(facet_ns, dag, str(frun["runId"]))
        known = self.runs.get(parent_run)
        known_job = self.jobs.get(known.job) if known is not None else None
        if known_job is not None and known_job.in_view:
            if known_job.namespace == facet_ns and known_job.name == name:
                return known_job
            # another job's run under that uuid (an old Airflow bug): a run of its own
            parent_run = name_based_uuid(facet_ns, name, str(parent_run))
        row = self._upsert_job(str(child["namespace"]), name, None, job_type, None)
        self.runs[parent_run] = RunRow(row.key)
        return row

    def _store(self, event: dict[str, Any], when: datetime) -> None:
        self.events.append(event)
        self.event_times.append(when)
        kind = event_kind(event)
        if kind == "DatasetEvent":
            key = self._touch_dataset(event["dataset"], when)
            self.versions.dataset_event(key, _fields(event["dataset"]), when)
            return
        job = event["job"]
        streaming = _streaming(job)
        job_type = "STREAM" if streaming else "BATCH"
        inputs = [self._touch_dataset(d, when) for d in _datasets(event, "inputs")]
        outputs = [self._touch_dataset(d, when) for d in _datasets(event, "outputs")]
        if kind == "JobEvent":
            row = self._upsert_job(str(job["namespace"]), str(job["name"]), None, job_type, None)
            row.facets = job.get("facets") or {}
            if inputs:
                row.inputs = set(inputs)
            if outputs:
                row.outputs = set(outputs)
            row.versions.add((frozenset(inputs), frozenset(outputs)))
            self._version_datasets(event, None, when)
            return
        facet = parent_facet(event)
        parent = self._parent(event, facet, job_type) if isinstance(facet, dict) else None
        name = str(job["name"])
        if parent is not None and name.startswith(parent.name + "."):
            name = name[len(parent.name) + 1 :]
        row = self._upsert_job(
            str(job["namespace"]),
            name,
            parent.key if parent is not None else None,
            job_type,
            job.get("facets"),
        )
        run_id = run_uuid(str(event["run"]["runId"]))
        run = self.runs.setdefault(run_id, RunRow(row.key))
        run.job = row.key
        run.inputs.update(inputs)
        run.outputs.update(outputs)
        self._version_datasets(event, run_id, when)
        event_type = event.get("eventType")
        terminal = str(event_type or "").upper() in TERMINAL
        streaming_idle = terminal and streaming and not inputs and not outputs
        if not streaming_idle:  # empty inputs (outputs) mark the current ones previous
            if not inputs:
                row.inputs = set()
            if not outputs:
                row.outputs = set()
        version: Version = (frozenset(run.inputs), frozenset(run.outputs))
        if streaming:
            link = not streaming_idle and version not in row.versions
        else:
            link = event_type is not None and str(event_type).lower() in DONE
        if link:
            row.versions.add(version)
            run.job_version = run.job_version or uuid.uuid4()
            if run.inputs:
                row.inputs = set(run.inputs)
            if run.outputs:
                row.outputs = set(run.outputs)
        if event_type is not None and (str(event_type).upper() == "COMPLETE" or streaming):
            self.versions.complete(run_id)  # OpenLineageService.buildJobOutput

    async def post_lineage(self, request: Request) -> Response:
        if not _json_media_type(request.headers.get("content-type")):
            return JSONResponse(UNSUPPORTED, 415)
        raw = await request.body()
        try:
            event = json.loads(raw)
        except ValueError:
            return JSONResponse({"code": 400, "message": not_json(raw)}, 500)
        jackson = not_json(raw) if not isinstance(event, dict) else unreadable(event, self.zone)
        if jackson is not None:
            # Marquez's JsonProcessingExceptionMapper: serverError(), with a 400 inside
            return JSONResponse({"code": 400, "message": jackson}, 500)
        errors = validation_errors(event)
        if errors:
            return JSONResponse({"errors": errors}, 422)
        if refused_in_write(event):
            return Response(status_code=400)
        self._store(event, marquez_time(event["eventTime"], self.zone))
        return Response(status_code=201)

    # -- reads and deletes -----------------------------------------------------------------------

    def _redirect(self, scope: Scope) -> Response | None:
        """JobRedirectFilter: a job path naming an alias answers 301 to the current name."""
        m = _JOB_PATHS.fullmatch(scope["path"])
        methods = _JOB_METHODS.get(scope["method"])
        if m is None or methods is None or not methods.fullmatch(m["rest"] or ""):
            return None
        asked = unquote(m["job"])
        row = self._find_job(unquote(m["ns"]), asked)
        if row is None or row.name == asked:
            return None
        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        location = (
            f"{scope.get('scheme', 'http')}://{host}/api/v1/namespaces/"
            f"{quote(row.namespace, safe=_JERSEY_PATH_SEGMENT)}/jobs/"
            f"{quote(row.name, safe=_JERSEY_PATH_SEGMENT)}{m['rest'] or ''}"
        )
        return Response(status_code=301, headers={"location": location})

    def _job_json(self, row: JobRow) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": {"namespace": row.namespace, "name": row.name},
            "type": row.type,
            "name": row.name,
            "simpleName": row.simple_name,
            "namespace": row.namespace,
            "createdAt": row.created_at.isoformat(),
            "updatedAt": row.updated_at.isoformat(),
            "inputs": [{"namespace": n, "name": d} for n, d in sorted(row.inputs)],
            "outputs": [{"namespace": n, "name": d} for n, d in sorted(row.outputs)],
            "facets": row.facets,
        }
        if row.parent is not None:
            out["parentJobName"] = row.parent[1]
        return out

    def _dataset_json(self, key: Key) -> dict[str, Any]:
        ds = self.datasets[key]
        return {
            "id": {"namespace": key[0], "name": key[1]},
            "type": "DB_TABLE",
            "name": key[1],
            "physicalName": key[1],
            "namespace": key[0],
            "createdAt": ds["createdAt"].isoformat(),
            "updatedAt": ds["updatedAt"].isoformat(),
            "fields": [{"name": f} for f in ds["fields"]],
            "lastModifiedAt": None,  # written by the legacy runs API only
            "currentVersion": str(current) if (current := self.versions.current.get(key)) else None,
            "columnLineage": self.versions.column_lineage_json(key),
        }

    async def list_namespaces(self, request: Request) -> Response:
        limit = int(request.query_params.get("limit", 100))
        offset = int(request.query_params.get("offset", 0))
        names = sorted(self.namespaces)[offset : offset + limit]
        return JSONResponse(
            {
                "namespaces": [
                    {
                        "name": n,
                        "createdAt": self.namespaces[n]["createdAt"].isoformat(),
                        "updatedAt": self.namespaces[n]["updatedAt"].isoformat(),
                        "ownerName": "anonymous",
                        "description": None,
                        "isHidden": self.namespaces[n]["hidden"],
                    }
                    for n in names
                ]
            }
        )

    async def list_jobs(self, request: Request) -> Response:
        ns = unquote(request.path_params["ns"])
        rows = sorted(
            (j for j in self.jobs.values() if j.in_view and j.namespace == ns),
            key=lambda j: j.updated_at,
            reverse=True,
        )
        return JSONResponse({"jobs": [self._job_json(j) for j in rows], "totalCount": len(rows)})

    async def list_datasets(self, request: Request) -> Response:
        ns = unquote(request.path_params["ns"])
        if ns not in self.namespaces:
            return JSONResponse({"code": 404, "message": f"Namespace '{ns}' not found."}, 404)
        keys = sorted(k for k in self.visible_datasets() if k[0] == ns)
        return JSONResponse(
            {"datasets": [self._dataset_json(k) for k in keys], "totalCount": len(keys)}
        )

    async def job(self, request: Request) -> Response:
        """``getJob`` and ``delete`` of JobResource (after JobRedirectFilter)."""
        ns, name = unquote(request.path_params["ns"]), unquote(request.path_params["name"])
        if ns not in self.namespaces:
            return JSONResponse({"code": 404, "message": f"Namespace '{ns}' not found."}, 404)
        row = self._find_job(ns, name)
        if row is None:
            return JSONResponse({"code": 404, "message": f"Job '{name}' not found."}, 404)
        found = self._job_json(row)
        if request.method == "DELETE":
            row.hidden = True
        return JSONResponse(found)

    def _visible_dataset(self, request: Request) -> Key | Response:
        """``BaseResource.throwIfNotExists`` of the namespace, then of the (visible) dataset."""
        key = (unquote(request.path_params["ns"]), unquote(request.path_params["name"]))
        if key[0] not in self.namespaces:
            return JSONResponse({"code": 404, "message": f"Namespace '{key[0]}' not found."}, 404)
        if key not in self.visible_datasets():
            return JSONResponse({"code": 404, "message": f"Dataset '{key[1]}' not found."}, 404)
        return key

    async def dataset(self, request: Request) -> Response:
        """``getDataset`` and ``delete`` of DatasetResource: the dataset (a delete hides it)."""
        key = self._visible_dataset(request)
        if isinstance(key, Response):
            return key
        found = self._dataset_json(key)
        if request.method == "DELETE":
            self.datasets[key]["hidden"] = True
        return JSONResponse(found)

    async def dataset_version(self, request: Request) -> Response:
        """``getVersion`` of DatasetResource: a version by its uuid, with the run that made it."""
        key = self._visible_dataset(request)
        if isinstance(key, Response):
            return key
        asked = request.path_params["version"]
        try:
            version = self.versions.by_uuid.get(uuid.UUID(asked))
        except ValueError:
            version = None
        if version is None:
            message = f"Dataset version '{asked}' not found."
            return JSONResponse({"code": 404, "message": message}, 404)
        return JSONResponse(self._version_json(version))

    def _version_json(self, version: DatasetVersion) -> dict[str, Any]:
        ns, name = version.key
        run = self.runs.get(version.run) if version.run is not None else None
        created_by: dict[str, Any] | None = None
        if run is not None and version.run is not None:
            created_by = {"id": str(version.run), "facets": {}}
            if run.job_version is not None:  # Run.getJobVersion: null until a version links it
                created_by["jobVersion"] = {
                    "namespace": run.job[0],
                    "name": run.job[1],
                    "version": str(run.job_version),
                }
        return {
            "id": {"namespace": ns, "name": name},
            "type": "DB_TABLE",
            "name": name,
            "physicalName": name,
            "namespace": ns,
            "createdAt": version.created_at.isoformat(),
            "version": str(version.uuid),
            "fields": [{"name": f} for f in version.fields],
            "createdByRun": created_by,
            "facets": {},
        }

    # -- the read of ``ol-dagster check`` (kept apart from the sync's endpoints) ---------------
    # MarquezProject/marquez api/src/main/java/marquez/api/OpenLineageResource.java (getLineage):
    #   GET /api/v1/lineage?nodeId=<job|dataset>:<namespace>:<name>; nodeId is @NotNull (400
    #   without it); a node that does not exist is 404 from BaseResource.throwIfNotExists
    #   ("Job '<name>' not found." / "Dataset '<name>' not found.", api/exceptions/); else 200
    #   {"graph": [nodes]}, each node {id, type, data, inEdges, outEdges}. The fake answers the
    #   node itself with its current edges (what a probe needs).

    def check_routes(self) -> list[Route]:
        from ol_dagster.catalog.marquez.catalog import LINEAGE

        return [Route(LINEAGE, self.get_lineage, methods=["GET"])]

    async def get_lineage(self, request: Request) -> Response:
        node = request.query_params.get("nodeId")
        if not node:
            return JSONResponse(
                {"code": 400, "message": "query param nodeId must not be null"}, 400
            )
        kind, _, rest = node.partition(":")
        keys = {"job": self.visible_jobs(), "dataset": self.visible_datasets()}.get(kind)
        if keys is None:
            return JSONResponse({"code": 400, "message": f"Invalid nodeId: {node}"}, 400)
        key = next((k for k in keys if f"{k[0]}:{k[1]}" == rest), None)
        if key is None:
            what = "Job" if kind == "job" else "Dataset"
            name = rest.rpartition(":")[2]
            return JSONResponse({"code": 404, "message": f"{what} '{name}' not found."}, 404)
        if kind == "job":
            row = self.jobs[key]
            data = self._job_json(row)
            in_edges = [{"origin": f"dataset:{n}:{d}", "destination": node} for n, d in row.inputs]
            out_edges = [
                {"origin": node, "destination": f"dataset:{n}:{d}"} for n, d in row.outputs
            ]
        else:
            data, in_edges, out_edges = self._dataset_json(key), [], []
        graph = [
            {
                "id": node,
                "type": kind.upper(),
                "data": data,
                "inEdges": in_edges,
                "outEdges": out_edges,
            }
        ]
        return JSONResponse({"graph": graph})
