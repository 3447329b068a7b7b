"""The Marquez half of issue 13's contract tests: the client's requests against Marquez's own
``openapi.yml``, and the fake against what Marquez's sources and its own test fixtures say.

``contracts/marquez.py`` checks every request the fake receives against the vendored OpenAPI
file (the autouse fixture in conftest fails a test that breaks it); the first test drives the
client through every call it makes and looks at which operations it used. The rest pin the rules
the fake re-expresses from Marquez (each cites its upstream file, MarquezProject/marquez at
a89b89cad27f87c90dd964c40dae8dfb3f64031f, Java under ``api/src/main/java/marquez/``) so a fake
kinder than Marquez fails here, and prove the fake against events Marquez's own tests post.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from ol_dagster.catalog.marquez.catalog import MarquezCatalog
from ol_dagster.catalog.marquez.events import marquez_time as conformed
from ol_dagster.catalog.marquez.events import reads_time
from ol_dagster.catalog.marquez.settings import MarquezCatalogSettings
from ol_dagster.openlineage.envelope import parse_event_time
from ol_dagster.store import EventStore
from ol_dagster_tests.conftest import CORPUS
from ol_dagster_tests.contracts.marquez import (
    FORMATS,
    java_uuid,
    json_schema,
    marquez_time,
    match,
    request_errors,
    schema_errors,
    spec,
)
from ol_dagster_tests.fakes.faults import Clock, serve
from ol_dagster_tests.fakes.harness import (
    ANOMALIES,
    BUCKET,
    KPI,
    NS,
    Syncer,
    definition,
    ds,
    facet,
    job_event,
    pg,
    run,
)
from ol_dagster_tests.fakes.marquez_fake import MarquezFake

START = datetime(2026, 11, 1, 3, 0, tzinfo=UTC)
MARQUEZ_FIXTURES = CORPUS / "events"


@pytest.fixture
def fake() -> Iterator[tuple[MarquezFake, httpx.Client]]:
    f = MarquezFake(Clock(START))
    with serve(f.server) as url, httpx.Client(base_url=url) as client:
        yield f, client


def post(client: httpx.Client, event: dict[str, Any]) -> httpx.Response:
    return client.post("/api/v1/lineage", json=event)


# == the client against openapi.yml ================================================================


def test_every_request_the_client_sends_is_an_operation_of_openapi_yml(tmp_path: Path):
    """Upload, cleanup of a job (one renamed, so redirected) and of a dataset: every request
    matches an operation of the file and passes its checks (the fake's contract records none).
    Not in the file's favour: ``POST /lineage`` is documented as 200, Marquez answers 201
    (OpenLineageResource.onComplete); the client takes any 2xx."""
    f = MarquezFake(Clock(START))
    store = EventStore(f"sqlite:///{tmp_path / 'store.db'}")
    with serve(f.server) as url:
        settings = MarquezCatalogSettings(url=url, maxRetries=0)
        catalog = MarquezCatalog(
            "main", settings, store_url=f"sqlite:///{tmp_path / 'store.db'}", definition="snap"
        )
        syncer = Syncer(store, f.clock)
        try:
            kpi = run(KPI, [pg("orders")], [pg("kpi_daily")])
            anomalies = run(ANOMALIES, [pg("kpi_daily")], [ds(BUCKET, "anomalies")])
            first = syncer.sync(catalog, definition(), [kpi, anomalies])
            f.rename(NS, ANOMALIES, "features.anomalies_v2")
            second = syncer.sync(catalog, definition(), [kpi])
        finally:
            catalog.close()
    store.dispose()

    assert first.result.succeeded and second.report["removedJobs"] == [f"{NS}.{ANOMALIES}"]
    assert f.server.violations == []
    used = set()
    for r in f.server.requests:
        found = match(r.path)
        assert found is not None, r.path
        used.add((r.method, found[0]))
    assert used == {
        ("GET", "/namespaces"),
        ("POST", "/lineage"),
        ("DELETE", "/namespaces/{namespace}/jobs/{job}"),
        ("GET", "/namespaces/{namespace}/datasets/{dataset}"),  # who wrote it, its column lineage
        ("GET", "/namespaces/{namespace}/datasets/{dataset}/versions/{version}"),
        ("DELETE", "/namespaces/{namespace}/datasets/{dataset}"),
    }
    assert set(spec()["paths"]["/lineage"]["post"]["responses"]) == {"200"}


def test_a_request_the_file_does_not_describe_is_a_violation():
    assert request_errors("GET", "/api/v1/namespaces", None) == []
    assert request_errors("GET", "/api/v2/namespaces", None) != []
    assert request_errors("GET", "/api/v1/namespaces/ns/jobs/j/owners", None) != []
    assert request_errors("PATCH", "/api/v1/namespaces/ns/jobs/j", None) != []
    assert request_errors("DELETE", "/api/v1/namespaces/ns/jobs/j", {"reason": "x"}) == [
        "DELETE /namespaces/{namespace}/jobs/{job}: takes no request body"
    ]
    assert request_errors("POST", "/api/v1/lineage", b"not json") != []
    # one {parameter} is one encoded segment: a namespace holding "://" must be encoded
    assert request_errors("DELETE", "/api/v1/namespaces/s3%3A%2F%2Fb/datasets/x", None) == []
    assert request_errors("DELETE", "/api/v1/namespaces/s3://b/datasets/x", None) != []


def test_path_parameters_and_bodies_are_checked_against_their_schemas():
    long = "n" * 1025  # the file's namespace parameter: maxLength 1024
    assert request_errors("GET", f"/api/v1/namespaces/{long}/jobs", None) == [
        f"path parameter namespace: {long!r} is too long"
    ]
    assert request_errors("PUT", "/api/v1/namespaces/ns", {"ownerName": "me"}) == []
    assert request_errors("PUT", "/api/v1/namespaces/ns", {"description": "x"}) == [
        "body: 'ownerName' is a required property"
    ]
    # a $ref into components (JobType, DatasetId) and a custom format (URL)
    job = {"type": "BATCH", "inputs": [], "outputs": [], "location": "https://git/x"}
    assert request_errors("PUT", "/api/v1/namespaces/ns/jobs/j", job) == []
    bad = {**job, "type": "CRON", "location": "git/x"}
    errors = request_errors("PUT", "/api/v1/namespaces/ns/jobs/j", bad)
    assert any(e.startswith("type: 'CRON' is not one of") for e in errors)
    assert "location: 'git/x' is not a 'URL'" in errors


def test_openapi_schema_objects_are_read_as_json_schema():
    """OpenAPI 3.0: ``nullable`` adds null; a ``readOnly`` property is never required in a
    request; an ``example`` is data, not schema."""
    nullable = {"type": "string", "nullable": True, "example": {"nullable": False}}
    assert json_schema(nullable) == {"type": ["string", "null"], "example": {"nullable": False}}
    assert schema_errors(nullable, None) == []
    assert schema_errors({"type": "string"}, None) != []
    read_only = {
        "type": "object",
        "properties": {"id": {"type": "string", "readOnly": True}, "name": {"type": "string"}},
        "required": ["id", "name"],
    }
    assert schema_errors(read_only, {"name": "x"}) == []
    assert schema_errors(read_only, {}) == ["body: 'name' is a required property"]


# == how Marquez reads values ======================================================================


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # FlexibleDateTimeDeserializer: no offset -> the server's zone
        ("2020-12-28T19:51:01.641499", datetime(2020, 12, 28, 19, 51, 1, 641499, tzinfo=UTC)),
        ("2026-11-01T02:00", datetime(2026, 11, 1, 2, 0, tzinfo=UTC)),
        ("2026-11-01t02:00:00z", datetime(2026, 11, 1, 2, 0, tzinfo=UTC)),  # case-insensitive
        ("2026-11-01T02:00:00.", datetime(2026, 11, 1, 2, 0, tzinfo=UTC)),  # 0 fraction digits
        (
            "2026-11-01T02:00:00.123456789+02",  # lenient offset: hours only
            datetime(2026, 11, 1, 2, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2))),
        ),
        (
            "2026-11-01T02:00:00-05:30:15",
            datetime(
                2026, 11, 1, 2, 0, tzinfo=timezone(-timedelta(hours=5, minutes=30, seconds=15))
            ),
        ),
        (" 2026-11-01T02:00:00Z\n", datetime(2026, 11, 1, 2, 0, tzinfo=UTC)),  # trimmed
        ("2026-02-30T10:00:00Z", datetime(2026, 2, 28, 10, 0, tzinfo=UTC)),  # SMART resolver
        ("2026-11-01T24:00:00Z", datetime(2026, 11, 2, 0, 0, tzinfo=UTC)),  # 24:00 next midnight
        (1_700_000_000, datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)),  # epoch seconds
    ],
)
def test_marquez_reads_these_event_times(value: Any, expected: datetime):
    assert marquez_time(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "2026-11-01",  # ISO_LOCAL_DATE_TIME needs a time
        "2026-11-01T02:00:00+0200",  # lenient "+HH:MM:ss" needs its colons: "00" is left over
        "2026-11-01T02:00:00+02:00[Europe/Paris]",  # no zone region in the pattern
        "2026-11-01T02:00:00 UTC",
        "2026-11-01T02:00:00.1234567890Z",  # 10 fraction digits
        "2026-11-01T02:00:60Z",  # no leap second
        "2026-11-01T24:00:01Z",
        "2026-11-32T02:00:00Z",
        "2026-13-01T02:00:00Z",
        "2026-11-01T02:00:00+18:01",  # beyond ZoneOffset's 18 hours
        "2026-11-01 02:00:00Z",  # a space for the T
        "1700000000",  # a numeric string: only the default formatters take one
        "20261101T020000Z",  # basic ISO format
        "２０２６-11-01T02:00:00Z",  # non-ASCII digits
        True,
        {"epoch": 1},
    ],
)
def test_marquez_refuses_these_event_times(value: Any):
    with pytest.raises(ValueError):
        marquez_time(value)


# what the receiver takes (Python's ISO reading) and Marquez may not
RECEIVED_TIMES = [
    "2026-11-01T02:00:00.000Z",
    "2026-11-01t02:00",
    "2026-11-01T02:00:00+02",
    "2026-11-01T02:00:00-05:30:15",
    "2026-11-01T02:00:00.123456789Z",
    "2026-11-01T02:00:00.5",
    "2026-11-01",
    "2026-11-01T02:00:00+0200",
    "2026-11-01 02:00:00Z",
    "2026-11-01T02",
    "2026-11-01T02:00:00,5Z",
    "2026-W44-7T02:00",
    "20261101T020000Z",
    "2026-11-01T02:00:00+18:30",
]


@pytest.mark.parametrize("value", RECEIVED_TIMES)
def test_the_client_sends_every_received_time_as_marquez_reads_it(value: str):
    """The client's own test of Marquez's reader agrees with the fake's (``marquez_time``); what
    Marquez would refuse is sent as the instant ol-dagster read, in UTC."""
    try:
        marquez_time(value)
        readable = True
    except ValueError:
        readable = False
    assert reads_time(value) == readable
    sent = conformed(value, "eventTime")
    assert sent == value if readable else marquez_time(sent) == parse_event_time(value)


def test_a_time_without_an_offset_is_read_in_the_servers_zone():
    paris_winter = timezone(timedelta(hours=1))
    assert marquez_time("2026-11-01T02:00:00", paris_winter) == datetime(
        2026, 11, 1, 1, 0, tzinfo=UTC
    )
    assert marquez_time("2026-11-01T02:00:00Z", paris_winter) == datetime(
        2026, 11, 1, 2, 0, tzinfo=UTC
    )


def test_format_checkers_take_and_refuse_what_the_java_classes_do():
    ok, refused = FORMATS.conforms, lambda v, f: not FORMATS.conforms(v, f)
    # java.util.UUID.fromString: groups are Long.parseLong(…, 16), so short groups pass
    assert ok("ea9badc5-7cb2-49af-9a9f-155771d3a797", "uuid")
    assert java_uuid("1-2-3-4-5") == uuid.UUID("00000001-0002-0003-0004-000000000005")
    for value in ("not-a-uuid", "1-2-3-4", "1-2-3-4-5-6", "ea9badc5-7cb2-49af-9a9f-155771d3a7970"):
        assert refused(value, "uuid"), value
    # java.net.URI
    assert ok("https://openlineage.io/spec/1-0-0/OpenLineage.json#/$defs/RunEvent", "uri")
    assert ok("relative/path", "uri") and ok("", "uri")
    for value in ("has space", "http://x/%zz", "a#b#c", "http://x/{id}", ":nothing", "http:"):
        assert refused(value, "uri"), value
    # java.net.URL: a protocol the JDK has a handler for
    assert ok("https://github.com/x", "URL")
    assert refused("git@github.com:x", "URL") and refused("github.com/x", "URL")
    assert ok("2026-11-01T02:00:00", "date-time") and refused("2026-11-01", "date-time")


# == the fake against Marquez's own fixtures ======================================================

# OpenLineageIntegrationTest.data() posts these and expects 201 (the corpus copies them from
# api/src/test/resources/open_lineage/; event_simple.json is not in the corpus, event_large.json
# is left out there as failing); LineageEventTest.data() reads the nanosecond and zone-less
# variants of event_required_only.json with Marquez's mapper
ACCEPTED_BY_MARQUEZ_TESTS = [
    "marquez-api-test__event_full.json",
    "marquez-api-test__event_without_schema_url.json",
    "marquez-api-test__event_required_only.json",
    "marquez-api-test__event_unicode.json",
    "marquez-api-test__null_nominal_end_time.json",
    "marquez-api-test__event_namespace_naming.json",
    "marquez-api-test__event_required_nanoseconds.json",
    "marquez-api-test__event_required_no_timezone.json",
]


@pytest.mark.parametrize("name", ACCEPTED_BY_MARQUEZ_TESTS)
def test_the_fake_stores_the_events_marquezs_own_tests_post(fake, name: str):
    f, client = fake
    event = json.loads((MARQUEZ_FIXTURES / "marquez" / name).read_text(encoding="utf-8"))

    response = post(client, event)

    assert response.status_code == 201, response.text
    assert response.content == b""
    assert f.events == [event]


# == what Jackson and bean validation refuse =======================================================


def event(**changes: Any) -> dict[str, Any]:
    return {**run("load", [pg("a")], [pg("b")]), **changes}


@pytest.mark.parametrize(
    "bad",
    [
        event(eventTime="2026-11-01"),
        event(eventTime="2026-11-01T02:00:00+0200"),
        event(job="load"),
        event(inputs={"namespace": "x", "name": "y"}),
        event(schemaURL="https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/ RunEvent"),
        event(run={"runId": "r1", "facets": {"parent": "dag"}}),
        event(run={"runId": "r1", "facets": {"nominalTime": facet("N", nominalStartTime="x")}}),
    ],
)
def test_what_jackson_cannot_read_is_500_with_its_message_in_a_400(fake, bad: dict[str, Any]):
    """Marquez's own JsonProcessingExceptionMapper (api/exceptions/, registered in
    MarquezContext): ``Response.serverError()`` with ``ErrorMessage(400, e.getMessage())``,
    before any validation."""
    f, client = fake
    response = post(client, bad)
    assert response.status_code == 500
    body = response.json()
    assert body["code"] == 400 and body["message"].startswith("Cannot ")
    assert f.events == []


def test_an_unreadable_time_is_jacksons_zoneddatetime_message(fake):
    """OpenLineageIntegrationTest.testSendOpenLineageEventFailsJsonProcessing posts a date-only
    eventTime and reads this message."""
    _, client = fake
    response = post(client, event(eventTime="2021-11-03"))
    assert response.status_code == 500
    assert (
        'Cannot deserialize value of type `java.time.ZonedDateTime` from String "2021-11-03"'
        in response.json()["message"]
    )


@pytest.mark.contract_violations_allowed  # the test sends it on purpose
def test_not_json_is_500_with_jacksons_parse_error_and_a_violation_of_the_file(fake):
    f, client = fake
    response = client.post(
        "/api/v1/lineage", content=b"{x", headers={"content-type": "application/json"}
    )
    assert response.status_code == 500
    assert response.json()["message"].startswith("Unexpected character ('x' (code 120))")
    assert [(v.path, v.errors) for v in f.server.violations] == [
        ("/api/v1/lineage", ("POST /lineage: the body is not JSON",))
    ]


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_a_body_that_is_not_application_json_is_415(fake, content_type: str | None):
    """``@Consumes(APPLICATION_JSON)``: Jersey refuses another media type before reading the
    body (no Content-Type is application/octet-stream to it)."""
    f, client = fake
    headers = {"content-type": content_type} if content_type else {}
    body = json.dumps(event()).encode()
    response = client.post("/api/v1/lineage", content=body, headers=headers)
    assert (response.status_code, response.json()) == (
        415,
        {"code": 415, "message": "HTTP 415 Unsupported Media Type"},
    )
    assert f.events == []


def test_application_json_with_a_charset_is_taken(fake):
    f, client = fake
    body = json.dumps(event()).encode()
    headers = {"content-type": "Application/JSON; charset=UTF-8"}
    assert client.post("/api/v1/lineage", content=body, headers=headers).status_code == 201
    assert len(f.events) == 1


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (event(eventTime=None), "eventTime must not be null"),
        (event(eventTime="  "), "eventTime must not be null"),  # trimmed empty: null
        (event(producer=None), "producer must not be null"),
        (event(run={"facets": {}}), "run.runId must not be null"),
        (event(job={"namespace": NS}), "job.name must not be null"),
        (
            event(run={"runId": "r", "facets": {"parentRun": facet("P", run={"runId": "p"})}}),
            "run.facets.parent.job must not be null",
        ),
        (
            event(job={"namespace": NS, "name": "j", "facets": {"sql": facet("S")}}),
            "job.facets.sql.query must not be null",
        ),
        (
            event(job={"namespace": NS, "name": "j", "facets": {"jobType": facet("T")}}),
            "job.facets.jobType.processingType must not be null",
        ),
        (
            event(inputs=[{"namespace": NS, "name": "t", "facets": {"schema": {"fields": []}}}]),
            "inputs[0].facets.schema._producer must not be null",
        ),
        (
            event(
                outputs=[
                    {
                        "namespace": NS,
                        "name": "t",
                        "facets": {"schema": facet("S", fields=[{"type": "int"}])},
                    }
                ]
            ),
            "outputs[0].facets.schema.fields[0].name must not be null",
        ),
    ],
)
def test_bean_validation_is_422_with_every_error(fake, bad: dict[str, Any], error: str):
    """LineageEvent.java's @NotNull fields (an empty string is not null)."""
    f, client = fake
    response = post(client, bad)
    assert response.status_code == 422
    assert error in response.json()["errors"]
    assert f.events == []


def test_an_untyped_facet_and_empty_strings_pass_validation(fake):
    """Only Marquez's typed facets are checked (the rest go to ``additional``); ``""`` is not
    null for @NotNull: a blank producer or runId is stored."""
    f, client = fake
    ok = event(producer="", run={"runId": "", "facets": {"custom": {"any": 1}}})
    ok["job"]["facets"] = {"ownership": {"owners": [{"type": "team"}]}}
    assert post(client, ok).status_code == 201


@pytest.mark.parametrize(
    "bad",
    [
        event(job={"namespace": "bad namespace", "name": "j"}),
        event(inputs=[{"namespace": NS, "name": " "}]),
        event(job={"namespace": NS, "name": ""}),
    ],
)
def test_what_the_write_refuses_is_400_with_no_body(fake, bad: dict[str, Any]):
    """An IllegalArgumentException in the async write (OpenLineageResource.determineStatusCode):
    NamespaceName's pattern, JobName/DatasetName's checkNotBlank."""
    _, client = fake
    response = post(client, bad)
    assert (response.status_code, response.content) == (400, b"")


# == the name Marquez holds a job under ===========================================================


def child(name: str, parent_ns: str, parent_name: str, parent_run: str) -> dict[str, Any]:
    e = run(name, [pg("a")], [pg("b")])
    e["run"]["facets"] = {
        "parent": facet(
            "ParentRunFacet",
            run={"runId": parent_run},
            job={"namespace": parent_ns, "name": parent_name},
        )
    }
    return e


def test_an_unknown_parent_run_makes_the_parent_in_the_childs_namespace(fake):
    """OpenLineageDao.createParentJobRunRecord upserts the parent in the child event's
    namespace; the child is ``<parent>.<child>`` (rewrite_jobs_fqn_table)."""
    f, client = fake
    assert post(client, child("child", "airflow", "nightly", str(uuid.uuid4()))).status_code == 201
    assert f.visible_jobs() == {(NS, "nightly"), (NS, "nightly.child")}
    assert f.jobs[(NS, "nightly.child")].simple_name == "child"


def test_a_known_parent_run_of_the_facets_job_is_the_parent(fake):
    """findParentJobRow: the run is known and its job has the facet's namespace and name."""
    f, client = fake
    parent_run = str(uuid.uuid4())
    dag = run("nightly", namespace="airflow", event_type="START")
    dag["run"]["runId"] = parent_run
    assert post(client, dag).status_code == 201

    assert post(client, child("child", "airflow", "nightly", parent_run)).status_code == 201

    assert f.visible_jobs() == {("airflow", "nightly"), (NS, "nightly.child")}
    assert f.jobs[(NS, "nightly.child")].parent == ("airflow", "nightly")


def test_a_parent_run_id_that_is_no_uuid_names_the_same_parent_run_each_time(fake):
    """Utils.toUuid: a name-based uuid of namespace, parent name and runId, so the second child
    finds the parent the first made."""
    f, client = fake
    for name in ("extract", "load"):
        assert (
            post(client, child(name, "airflow", "nightly", "manual__2026-11-01")).status_code == 201
        )
    assert f.visible_jobs() == {(NS, "nightly"), (NS, "nightly.extract"), (NS, "nightly.load")}


@pytest.mark.parametrize(
    ("name", "parent", "held"),
    [
        ("nightly.load", "nightly", "nightly.load"),  # the prefix is not doubled
        ("dag.task", "dag.task", "dag.task"),  # parseParentJobName: the parent is "dag"
        ("solo", "solo", "solo.solo"),  # no dot to cut: the parent is the child's name
    ],
)
def test_the_childs_stored_name(fake, name: str, parent: str, held: str):
    f, client = fake
    assert post(client, child(name, NS, parent, str(uuid.uuid4()))).status_code == 201
    assert (NS, held) in f.visible_jobs()


def test_the_client_computes_the_name_the_fake_stores():
    """The client's rule (``held_name``) and the fake's state agree on every shape above."""
    from ol_dagster.catalog.marquez.catalog import held_name

    cases = {
        ("child", "nightly"): "nightly.child",
        ("nightly.load", "nightly"): "nightly.load",
        ("dag.task", "dag.task"): "dag.task",
        ("solo", "solo"): "solo.solo",
    }
    for (name, parent), held in cases.items():
        assert held_name(child(name, "airflow", parent, "r")) == held
    alias = child("c", "airflow", "p", "r")
    alias["run"]["facets"] = {"parentRun": alias["run"]["facets"]["parent"]}
    assert held_name(alias) == "p.c"
    assert held_name(job_event("c")) == "c"  # a JobEvent has no parent


# == which events set a job's current inputs and outputs ==========================================


def test_start_and_running_with_datasets_leave_the_current_inputs_and_outputs(fake):
    """Only a run whose state is done links its job version (OpenLineageDao.updateMarquezModel:
    ``runState.isDone()``)."""
    f, client = fake
    assert post(client, run("load", [pg("a")], [pg("b")])).status_code == 201
    for kind in ("START", "RUNNING", "OTHER"):
        assert post(client, run("load", [pg("x")], [pg("y")], event_type=kind)).status_code == 201
        assert f.current((NS, "load")) == (
            {("postgres://db:5432", "shop.public.a")},
            {("postgres://db:5432", "shop.public.b")},
        )


def test_a_run_event_without_datasets_clears_the_current_ones_start_included(fake):
    """updateBaseMarquezModel marks the job's inputs/outputs previous for any non-streaming run
    event with none (markInputOrOutputDatasetAsPreviousFor)."""
    f, client = fake
    post(client, run("load", [pg("a")], [pg("b")]))
    post(client, run("load", event_type="START"))
    assert f.current((NS, "load")) == (set(), set())
    assert f.edges() == set()


@pytest.mark.parametrize("done", ["COMPLETE", "FAIL", "ABORT", "abort"])
def test_a_done_run_makes_its_whole_runs_datasets_current(fake, done: str):
    """COMPLETE, FAIL and ABORT are done (RunState.isDone, getRunState lower-cases the type); the
    job version takes the datasets of every event of the run (loadJobRowRunDetails)."""
    f, client = fake
    start = run("load", [pg("a")], [pg("b")], event_type="START")
    end = run("load", [], [pg("c")], event_type=done)
    end["run"]["runId"] = start["run"]["runId"]
    post(client, start)
    post(client, end)
    assert f.current((NS, "load")) == (
        {("postgres://db:5432", "shop.public.a")},
        {("postgres://db:5432", "shop.public.b"), ("postgres://db:5432", "shop.public.c")},
    )


def test_a_streaming_jobs_complete_without_datasets_keeps_them(fake):
    """LineageEvent.isTerminalEventForStreamingJobWithNoDatasets: COMPLETE and FAIL only."""
    f, client = fake
    streaming = {
        "jobType": facet(
            "JobTypeJobFacet", processingType="STREAMING", integration="FLINK", jobType="JOB"
        )
    }

    def stream(event_type: str, inputs: list[Any], outputs: list[Any]) -> dict[str, Any]:
        e = run("stream", inputs, outputs, event_type=event_type)
        e["job"]["facets"] = streaming
        return e

    post(client, stream("RUNNING", [pg("a")], [pg("b")]))  # a new set: current at once
    assert f.current((NS, "stream")) == (
        {("postgres://db:5432", "shop.public.a")},
        {("postgres://db:5432", "shop.public.b")},
    )
    post(client, stream("COMPLETE", [], []))
    assert f.current((NS, "stream"))[1] == {("postgres://db:5432", "shop.public.b")}
    post(client, stream("ABORT", [], []))  # not "terminal" for this rule: cleared
    assert f.current((NS, "stream")) == (set(), set())


def test_a_job_event_without_inputs_keeps_the_current_inputs(fake):
    """upsertRunlessJobVersion links only the datasets the JobEvent names."""
    f, client = fake
    post(client, job_event("load", [pg("a")], [pg("b")]))
    post(client, job_event("load", [], [pg("c")]))
    assert f.current((NS, "load")) == (
        {("postgres://db:5432", "shop.public.a")},
        {("postgres://db:5432", "shop.public.c")},
    )


# == renamed jobs ==================================================================================


def test_a_renamed_job_answers_301_on_every_job_path(fake):
    """JobRedirectFilter: the Location names the current job, segments encoded as a path
    segment (``/`` as %2F, ``:`` kept), on every JobResource method of the path."""
    f, client = fake
    post(client, run("old", namespace="s3://bucket"))
    f.rename("s3://bucket", "old", "new job")
    base = "/api/v1/namespaces/s3%3A%2F%2Fbucket/jobs"

    for method, suffix in (("GET", ""), ("DELETE", ""), ("GET", "/runs"), ("GET", "/versions")):
        response = client.request(method, f"{base}/old{suffix}")
        assert response.status_code == 301, (method, suffix)
        assert response.headers["location"] == (
            f"{client.base_url}/api/v1/namespaces/s3:%2F%2Fbucket/jobs/new%20job{suffix}"
        )
    assert f.visible_jobs() == {("s3://bucket", "new job")}
    assert client.get(f"{base}/new%20job").json()["name"] == "new job"
    assert client.delete(f"{base}/unknown").json() == {
        "code": 404,
        "message": "Job 'unknown' not found.",
    }


def test_an_event_for_the_old_name_writes_to_the_renamed_job(fake):
    f, client = fake
    post(client, run("old", [pg("a")], [pg("b")]))
    f.rename(NS, "old", "new")
    post(client, run("old", [pg("x")], [pg("y")]))
    assert f.visible_jobs() == {(NS, "new")}
    assert f.current((NS, "new")) == (
        {("postgres://db:5432", "shop.public.x")},
        {("postgres://db:5432", "shop.public.y")},
    )


def test_deletes_answer_404_for_an_unknown_namespace(fake):
    _, client = fake
    assert client.delete("/api/v1/namespaces/nowhere/jobs/j").json() == {
        "code": 404,
        "message": "Namespace 'nowhere' not found.",
    }
    assert client.delete("/api/v1/namespaces/nowhere/datasets/d").status_code == 404
