"""OpenMetadata's own schemas against what the client sends, and against the fake that stands in.

The schemas are OpenMetadata's (``contracts/openmetadata/``, vendored with SOURCE.md), checked by
``contracts/openmetadata.py``, whose format checkers follow the server's Java readers. Every
RunEvent of the public corpus the receiver accepts is made to conform
(``openmetadata_events.conform``) and must then pass that check; as received, 33 of the 110
would not (the issue counts 32: the 33rd breaks it only by a top-level key, which the client
already left out). Through the real client and the fake, all 110 go in without a 400 or a
failed row, and the fake refuses, whole, a request that breaks the schema, as the server does.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ol_dagster.catalog.http import CatalogRefused
from ol_dagster.catalog.openmetadata.catalog import (
    BATCH,
    CLOCK,
    OPENMETADATA_SCHEMA,
    VERSION,
    OpenMetadataCatalog,
)
from ol_dagster.catalog.openmetadata.events import (
    RUN_EVENT_SCHEMA_URL,
    UNKNOWN_TYPE,
    conform,
    run_uuid,
)
from ol_dagster.catalog.openmetadata.events import is_date_time as conform_date_time
from ol_dagster.catalog.openmetadata.events import is_uri as conform_uri
from ol_dagster.catalog.openmetadata.events import is_uuid as conform_uuid
from ol_dagster.catalog.openmetadata.settings import OpenMetadataCatalogSettings
from ol_dagster.openlineage.envelope import EventRejected
from ol_dagster.openlineage.models import RunEvent, parse_event
from ol_dagster_tests.contracts import openmetadata as contract
from ol_dagster_tests.fakes.faults import Clock, serve
from ol_dagster_tests.fakes.harness import WH, facet, pg, run
from ol_dagster_tests.fakes.openmetadata_fake import CREATE, EDIT_LINEAGE, OpenMetadataFake

JWT = "om-bot-jwt-secret-0123"
READER_JWT = "om-reader-jwt-secret-4567"
TOKEN_ENV = "OL_TEST_OM_CONTRACT_JWT"
SERVICE = "corpus-db"


def corpus_run_events(corpus: Path) -> dict[str, bytes]:
    """file -> raw bytes of every corpus RunEvent the receiver accepts (``parse_event``, as
    test_corpus reads them), read in place."""
    out: dict[str, bytes] = {}
    for path in sorted((corpus / "events").glob("*/*.json")):
        raw = path.read_bytes()
        try:
            event = parse_event(raw)
        except EventRejected:
            continue
        if isinstance(event, RunEvent):
            out[path.relative_to(corpus / "events").as_posix()] = raw
    return out


@pytest.fixture(scope="module")
def accepted(corpus: Path) -> dict[str, bytes]:
    return corpus_run_events(corpus)


# == the validator can fail, and the corpus as received fails it ==================================


def test_the_vendored_schemas_accept_a_spec_valid_event_and_refuse_a_broken_one():
    good = run("etl.kpi", [pg("orders")], [pg("kpi")], sql="select 1")
    assert contract.run_event_errors(good) == []
    assert contract.request_errors("POST", BATCH, {"events": [good]}) == []

    broken = {**good, "run": {"runId": "run-1"}, "x-team": "data"}
    del broken["schemaURL"]
    assert contract.run_event_errors(broken) == [
        "body: 'schemaURL' is a required property",
        "body: Additional properties are not allowed ('x-team' was unexpected)",
        "run.runId: 'run-1' is not a 'uuid'",
    ]
    assert contract.request_errors("POST", BATCH, {"events": []}) == [
        "events: [] should be non-empty"
    ]
    assert contract.request_errors("POST", BATCH, b"{not json") == ["Unable to process JSON"]


def test_110_corpus_run_events_are_accepted_and_33_would_be_refused_as_received(
    accepted: dict[str, bytes],
):
    assert len(accepted) == 110
    refused = {
        name: contract.run_event_errors(json.loads(raw))
        for name, raw in accepted.items()
        if contract.run_event_errors(json.loads(raw))
    }
    assert len(refused) == 33
    faults = [e.split(": ", 1)[1] for errors in refused.values() for e in errors]
    assert sum("'schemaURL' is a required property" in f for f in faults) == 29
    assert sum("is not a 'date-time'" in f for f in faults) == 2  # zone-less
    assert sum("is not a 'uuid'" in f for f in faults) == 1
    assert sum("is not a 'uri'" in f for f in faults) == 1  # producer "producer"
    assert sum("Additional properties" in f for f in faults) == 1


def test_every_accepted_corpus_run_event_conforms_to_openmetadatas_schema(
    accepted: dict[str, bytes],
):
    changed = 0
    for name, raw in accepted.items():
        event = json.loads(raw)
        before = copy.deepcopy(event)
        out, why = conform(event)
        assert why is None and out is not None, name
        assert contract.run_event_errors(out) == [], name
        assert event == before, f"{name}: conform changed its input"
        assert conform(out) == (out, None), f"{name}: a conformed event is changed again"
        again = parse_event(json.dumps(out))  # the receiver still takes it, as a RunEvent
        assert isinstance(again, RunEvent) and again.run.runId == out["run"]["runId"]
        changed += out != {k: v for k, v in event.items() if k in out}
    assert changed == 32  # the 33rd only loses its top-level key


def test_conforming_keeps_the_instant_the_receiver_reads(accepted: dict[str, bytes]):
    for raw in accepted.values():
        out, _ = conform(json.loads(raw))
        assert out is not None
        assert parse_event(json.dumps(out)).eventTime == parse_event(raw).eventTime


# == through the client, against the fake ========================================================


@dataclass
class Env:
    fake: OpenMetadataFake
    url: str
    store_url: str
    made: list[OpenMetadataCatalog]

    def catalog(self, **cfg: Any) -> OpenMetadataCatalog:
        settings = OpenMetadataCatalogSettings.model_validate(
            {
                "kind": "openmetadata",
                "url": self.url,
                "token": {"env": TOKEN_ENV},
                "maxRetries": 0,
                "timeoutSeconds": 10,
                **cfg,
            }
        )
        c = OpenMetadataCatalog("main", settings, store_url=self.store_url, definition="snap")
        self.made.append(c)
        return c


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, corpus: Path) -> Iterator[Env]:
    """An OpenMetadata 2.1 fake mapping every dataset namespace of the corpus to one service, so
    the corpus writes tables and edges, not only unresolved datasets."""
    monkeypatch.setenv(TOKEN_ENV, JWT)
    namespaces = {WH}
    for raw in corpus_run_events(corpus).values():
        event = json.loads(raw)
        namespaces |= {d["namespace"] for d in event.get("inputs", []) + event.get("outputs", [])}
    fake = OpenMetadataFake(
        generation=2,
        tokens={JWT: {EDIT_LINEAGE, CREATE}, READER_JWT: set()},
        mapping=dict.fromkeys(namespaces, SERVICE),
        services={SERVICE: ["db"]},
        clock=Clock(),
    )
    with serve(fake.server) as url:
        e = Env(fake, url, f"sqlite:///{tmp_path / 'store.db'}", [])
        yield e
        for c in e.made:
            c.close()


def test_the_client_sends_all_110_accepted_corpus_run_events_and_openmetadata_takes_them(
    env: Env, accepted: dict[str, bytes]
):
    catalog = env.catalog(chunkSize=10)

    outcome = catalog.send(list(accepted.values()))

    assert outcome.failed == []
    assert OPENMETADATA_SCHEMA not in outcome.skipped
    assert outcome.sent == 110
    posts = env.fake.server.seen("POST", BATCH)
    assert len(posts) == 11
    assert env.fake.server.violations == []
    assert len(env.fake.received) == 110  # every request passed validation
    assert all(contract.run_event_errors(e) == [] for e in env.fake.received)
    # what the server could not resolve (no schema facet to create a table from...) is read
    # from its per-event answers as dropped datasets, never as a refusal
    assert set(outcome.unresolved.values()) <= {
        "missingColumns",
        "unparsableName",
        "namespaceNotMapped",
        "notFound",
        "missingDatabase",
    }


def test_one_event_that_cannot_conform_is_dropped_and_the_rest_are_sent(env: Env):
    catalog = env.catalog()
    unknown_type = run("etl.odd", [pg("a")], [pg("b")], event_type="PAUSED")
    no_job_name = run("etl.nameless", [pg("a")], [pg("c")])
    no_job_name["job"]["name"] = 42
    events = [run("etl.kpi", [pg("orders")], [pg("kpi")]), unknown_type, no_job_name]

    outcome = catalog.send([json.dumps(e).encode() for e in events])

    assert outcome.failed == []
    assert outcome.skipped == {OPENMETADATA_SCHEMA: 2}
    assert [e["job"]["name"] for e in env.fake.received] == ["etl.kpi"]
    assert env.fake.edge_pairs() == {
        (f"{SERVICE}.shop.public.orders", f"{SERVICE}.shop.public.kpi")
    }


def test_a_runs_events_and_its_childs_parent_facet_are_sent_under_one_uuid(env: Env):
    catalog = env.catalog()
    start = run("etl.parent", event_type="START")
    complete = run("etl.parent", [pg("orders")], [pg("kpi")])
    other = run("etl.other", [pg("kpi")], [pg("report")])
    child = run("etl.child", [pg("kpi")], [pg("kpi_weekly")])
    for event, run_id in ((start, "dagster-run-42"), (complete, "dagster-run-42"), (other, "x")):
        event["run"]["runId"] = run_id
    child["run"]["facets"] = {
        "parent": facet(
            "ParentRunFacet",
            run={"runId": "dagster-run-42"},
            job={"namespace": "repo", "name": "etl.parent"},
            root={
                "run": {"runId": "dagster-run-42"},
                "job": {"namespace": "repo", "name": "etl.parent"},
            },
        )
    }

    outcome = catalog.send([json.dumps(e).encode() for e in (start, complete, other, child)])

    assert outcome.failed == []
    sent = {e["job"]["name"]: e for e in env.fake.received if e.get("eventType") != "START"}
    (first,) = [e for e in env.fake.received if e.get("eventType") == "START"]
    mapped = first["run"]["runId"]
    assert str(uuid.UUID(mapped)) == mapped
    assert sent["etl.parent"]["run"]["runId"] == mapped
    parent = sent["etl.child"]["run"]["facets"]["parent"]
    assert parent["run"]["runId"] == mapped and parent["root"]["run"]["runId"] == mapped
    assert sent["etl.other"]["run"]["runId"] not in (mapped, "x")
    assert run_uuid("dagster-run-42") == mapped  # a pure function of the id: every sync agrees
    assert sent["etl.child"]["run"]["runId"] == child["run"]["runId"]  # a UUID is kept


def test_broken_facets_are_dropped_or_repaired_instead_of_refusing_the_event(env: Env):
    event = run("etl.facets", [pg("orders")], [pg("kpi", columns=None)], sql="select 1")
    event["eventType"] = None
    event["eventTime"] = "2026-11-01T02:00:00.123456789"  # zone-less, nanoseconds
    event["producer"] = "dagster 1.9"
    event["x-team"] = "data"
    event["run"]["facets"] = {
        "parent": facet(
            "ParentRunFacet", run={"runId": "p-1"}, job={"namespace": "repo", "name": "etl.p"}
        )
    }
    event["job"]["facets"]["sql"] = {"_deleted": True}
    out_ds = event["outputs"][0]
    out_ds["facets"] = {
        "schema": facet("SchemaDatasetFacet", fields=[{"name": "id"}, {"name": "n", "type": None}]),
        "symlinks": facet(
            "SymlinksDatasetFacet", identifiers=[{"namespace": WH, "name": "shop.public.kpi"}]
        ),
        "documentation": {"_producer": "not a uri", "description": "KPIs"},
        "custom": {"anything": [1, None]},
    }
    out_ds["outputFacets"] = {
        "columnLineage": facet(
            "ColumnLineageDatasetFacet",
            fields={
                "id": {
                    "inputFields": [{"namespace": WH, "name": "shop.public.orders", "field": "id"}]
                },
                "n": {"transformationDescription": "count"},
            },
        )
    }
    raw = json.dumps(event).encode()
    parse_event(raw)  # the receiver takes it
    assert contract.run_event_errors(event)  # OpenMetadata would not

    out, why = conform(event)

    assert why is None and out is not None
    assert contract.run_event_errors(out) == []
    assert "eventType" not in out and "x-team" not in out
    assert out["eventTime"] == "2026-11-01T02:00:00.123456Z"
    assert out["producer"] == "urn:ol-dagster:producer:dagster%201.9"
    assert out["schemaURL"] == event["schemaURL"]
    assert out["run"]["facets"]["parent"]["run"]["runId"] == run_uuid("p-1")
    assert "sql" not in out["job"]["facets"]  # a deletion marker has no query
    facets = out["outputs"][0]["facets"]
    assert [f["type"] for f in facets["schema"]["fields"]] == [UNKNOWN_TYPE, UNKNOWN_TYPE]
    assert facets["symlinks"]["identifiers"][0]["type"] == "TABLE"
    assert facets["documentation"] == {"description": "KPIs"}
    assert facets["custom"] == {"anything": [1, None]}
    assert list(out["outputs"][0]["outputFacets"]["columnLineage"]["fields"]) == ["id"]

    catalog = env.catalog()
    outcome = catalog.send([raw])
    assert outcome.failed == [] and len(env.fake.received) == 1
    assert env.fake.tables[f"{SERVICE}.shop.public.kpi"]["columns"] == ["id", "n"]


def test_typed_facets_the_receiver_would_refuse_are_dropped_too():
    """Events from older stores or other paths: conform does not rely on the receiver."""
    event = run("etl.kpi", [pg("orders")], sql="select 1")
    event["outputs"] = None
    event["run"]["facets"] = {
        "parent": facet("ParentRunFacet", run={"runId": "p-1"}),
        "errorMessage": facet("ErrorMessageRunFacet", programmingLanguage="python"),
        "processing_engine": facet("ProcessingEngineRunFacet", version=3),
    }
    event["job"]["facets"] = {
        "sql": facet("SQLJobFacet", dialect="postgres"),
        "ownership": facet("OwnershipJobFacet", owners=[{"type": "team"}, {"name": "ops"}]),
    }
    event["inputs"][0]["facets"] = {
        "columnLineage": facet("ColumnLineageDatasetFacet"),
        "datasource": {**facet("DatasourceDatasetFacet"), "name": "db", "uri": "pg://db :5432"},
        "schema": None,
    }
    assert contract.run_event_errors(event)

    out, why = conform(event)

    assert why is None and out is not None
    assert contract.run_event_errors(out) == []
    assert out["run"]["facets"] == {
        "processing_engine": {k: v for k, v in facet("ProcessingEngineRunFacet").items()}
    }
    assert out["job"]["facets"] == {
        "ownership": facet("OwnershipJobFacet", owners=[{"name": "ops"}])
    }
    assert out["inputs"][0]["facets"] == {
        "datasource": {**facet("DatasourceDatasetFacet"), "name": "db"}
    }
    assert "outputs" not in out


def test_a_run_event_without_schema_url_is_sent_with_the_run_event_url():
    event = run("etl.kpi")
    del event["schemaURL"]
    out, _ = conform(event)
    assert out is not None and out["schemaURL"] == RUN_EVENT_SCHEMA_URL


# == the fake refuses what OpenMetadata refuses, the way it refuses it =============================


@pytest.mark.contract_violations_allowed
def test_the_fake_refuses_a_whole_batch_for_one_event_its_schema_forbids(env: Env):
    good = run("etl.kpi", [pg("orders")], [pg("kpi")])
    bad = {**run("etl.bad", [pg("a")], [pg("b")]), "run": {"runId": "run_id"}}
    with httpx.Client(base_url=env.url, headers={"Authorization": f"Bearer {JWT}"}) as http:
        answer = http.post(BATCH, json={"events": [good, bad]})
        unparsable = http.post(BATCH, content=b"{", headers={"content-type": "application/json"})

    assert answer.status_code == 400
    assert answer.json() == {
        "code": 400,
        "message": "[events[1].run.runId: 'run_id' is not a 'uuid']",
    }
    assert unparsable.status_code == 400
    assert unparsable.json() == {"code": 400, "message": "Unable to process JSON"}
    assert env.fake.received == [] and env.fake.edges == {}
    assert [v.errors for v in env.fake.server.violations] == [
        ("events[1].run.runId: 'run_id' is not a 'uuid'",),
        ("Unable to process JSON",),
    ]


@pytest.mark.contract_violations_allowed
def test_the_fake_validates_the_body_before_it_checks_edit_lineage(env: Env):
    """Jersey validates the ``@Valid`` body before calling the resource method, which is where
    OpenLineageResource authorizes: a bad body is 400 even for a token without EditLineage."""
    good = run("etl.kpi", [pg("orders")], [pg("kpi")])
    with httpx.Client(base_url=env.url, headers={"Authorization": f"Bearer {READER_JWT}"}) as h:
        bad = h.post(BATCH, json={"events": [{**good, "producer": "not a uri"}]})
        refused = h.post(BATCH, json={"events": [good]})

    assert bad.status_code == 400
    assert refused.status_code == 403


def test_the_version_answers_without_a_token_and_the_logged_in_user_needs_one(env: Env):
    with httpx.Client(base_url=env.url) as http:
        version = http.get(VERSION)
        anonymous = http.get(CLOCK)
        wrong = http.get(CLOCK, headers={"Authorization": f"Bearer not-{JWT}"})
        me = http.get(CLOCK, headers={"Authorization": f"Bearer {JWT}"})

    assert version.status_code == 200 and version.json()["version"]
    assert anonymous.status_code == 401 and wrong.status_code == 401
    assert me.status_code == 200 and me.json()["name"] == "ingestion-bot"


def test_a_wrong_token_fails_the_clock_and_so_the_upload_with_a_401_naming_no_secret(
    env: Env, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv(TOKEN_ENV, "not-the-" + JWT)
    catalog = env.catalog()

    with pytest.raises(CatalogRefused) as raised:
        catalog.clock()

    assert raised.value.status == 401
    assert str(raised.value) == f"GET {CLOCK}: HTTP 401"
    assert JWT not in str(raised.value) and JWT not in raised.value.body
    assert env.fake.server.seen("POST", BATCH) == []
    assert env.fake.server.requests[-1].headers["authorization"] == f"Bearer not-the-{JWT}"


def test_the_right_token_reads_the_clock_from_the_authenticated_answer(env: Env):
    catalog = env.catalog()

    when = catalog.clock()

    (seen,) = env.fake.server.seen("GET", CLOCK)
    assert seen.headers["authorization"] == f"Bearer {JWT}"
    assert when.tzinfo is not None


# == the format checkers follow the server's readers ==============================================


@pytest.mark.parametrize(
    "value",
    [
        "run_id",
        "6f1d3c2a94b85e0ba7c10d5e3b9f8a21",  # no dashes
        "{6f1d3c2a-94b8-5e0b-a7c1-0d5e3b9f8a21}",
        "6f1d3c2a-94b8-5e0b-a7c1-0d5e3b9f8a2g",
        "6f1d3c2a-94b85-e0b-a7c1-0d5e3b9f8a21",
        "bx0cKpS4Xgunwd0bn4qCEQ==",  # Jackson's base64 form: not a schema uuid
    ],
)
def test_the_uuid_checker_refuses(value: str):
    assert not contract.is_uuid(value)
    assert not conform_uuid(value)
    event = run("etl.kpi")
    event["run"]["runId"] = value
    assert contract.run_event_errors(event) == [f"run.runId: {value!r} is not a 'uuid'"]


@pytest.mark.parametrize(
    "value",
    [
        "dagster",  # relative: java.net.URI takes it, the schema's uri does not
        "http:",
        "http://",
        "https://example.com/a b",
        "https://example.com/%zz",
        "https://example.com/#a#b",
        "http://[::1/x",
        "https://example.com/ünïcode",
        "#fragment",
    ],
)
def test_the_uri_checker_refuses(value: str):
    assert not contract.is_uri(value)
    assert not conform_uri(value)
    assert contract.run_event_errors({**run("etl.kpi"), "producer": value}) == [
        f"producer: {value!r} is not a 'uri'"
    ]


@pytest.mark.parametrize(
    "value",
    [
        "2020-12-28T19:51:01.641499",  # zone-less: Jackson reads UTC, RFC 3339 refuses
        "2020-12-28 19:51:01Z",
        "2020-12-28t19:51:01z",
        "2020-02-30T00:00:00Z",
        "2020-12-28T24:00:00Z",
        "2020-12-28T19:51:01.1234567891Z",  # Jackson takes 9 fraction digits at most
        "2020-12-28T19:51:01+0100",
        "2020-12-28",
    ],
)
def test_the_date_time_checker_refuses(value: str):
    assert not contract.is_date_time(value)
    assert not conform_date_time(value)
    assert contract.run_event_errors({**run("etl.kpi"), "eventTime": value}) == [
        f"eventTime: {value!r} is not a 'date-time'"
    ]


@pytest.mark.parametrize(
    ("checker", "value"),
    [
        (contract.is_uuid, "6F1D3C2A-94B8-5E0B-A7C1-0D5E3B9F8A21"),
        (contract.is_uri, "https://github.com/OpenLineage/OpenLineage/tree/1.0.0/client"),
        (contract.is_uri, "urn:ol-dagster:producer:dagster%201.9"),
        (contract.is_uri, "file:///tmp/x"),
        (contract.is_uri, "http://[::1]:8080/x"),
        (contract.is_date_time, "2020-12-28T19:51:01.123456789+10:00"),
        (contract.is_date_time, "2016-12-31T23:59:60Z"),  # RFC 3339's leap second
    ],
)
def test_the_checkers_accept_what_both_readers_take(checker: Any, value: str):
    assert checker(value)


_URI_TAIL = st.text(st.sampled_from(list("aZ09-._~:/?#[]@!$&'()*+,;=% ü\"<>{}|\\^`")), max_size=20)


@given(st.tuples(st.sampled_from(["", "h", "https:", "https://", "urn:x:", "1a:"]), _URI_TAIL))
def test_what_conform_keeps_as_a_uri_the_validator_accepts(parts: tuple[str, str]):
    value = "".join(parts)
    if conform_uri(value):
        assert contract.is_uri(value)


@given(
    st.tuples(
        st.integers(0, 9999),
        st.integers(1, 13),
        st.integers(1, 31),
        st.sampled_from(["T", "T", "T", "t", " "]),
        st.integers(0, 24),
        st.integers(0, 59),
        st.integers(0, 60),
        st.sampled_from(["", ".1", ".123456", ".123456789", ".1234567891"]),
        st.sampled_from(["Z", "+00:00", "-23:59", "", "z", "+24:00", "+05:60", "+0100"]),
    )
)
def test_what_conform_keeps_as_a_date_time_the_validator_accepts(parts: tuple[Any, ...]):
    y, mo, d, sep, h, mi, sec, fraction, zone = parts
    value = f"{y:04d}-{mo:02d}-{d:02d}{sep}{h:02d}:{mi:02d}:{sec:02d}{fraction}{zone}"
    if conform_date_time(value):
        assert contract.is_date_time(value)
