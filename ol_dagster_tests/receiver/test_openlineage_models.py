"""Parsing OpenLineage events: kinds, the lenient envelope, strict facets, precise rejections.

Every event here is small and hand-written; the corpus of real events is in ``test_corpus.py``.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from ol_dagster.lineage.runs import facet_items
from ol_dagster.openlineage.envelope import EventKind, EventRejected
from ol_dagster.openlineage.lenient import parse_event_lenient
from ol_dagster.openlineage.models import (
    DatasetEvent,
    JobEvent,
    RunEvent,
    check_event,
    parse_event,
)
from ol_dagster_tests.conftest import run_event

CORE = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
OLD_CORE = "https://openlineage.io/spec/1-0-5/OpenLineage.json"
PRODUCER = "https://example.com/ol-dagster-tests"


def as_bytes(event: dict[str, Any]) -> bytes:
    return json.dumps(event).encode()


def parse_both(event: dict[str, Any]) -> list[Any]:
    """The event parsed from a dict and from its bytes: both readings must agree."""
    return [parse_event(copy.deepcopy(event)), parse_event(as_bytes(event))]


def rejection(event: dict[str, Any] | bytes) -> EventRejected:
    """The rejection of an event, checked to be the same from a dict and from bytes."""
    if isinstance(event, bytes):
        with pytest.raises(EventRejected) as info:
            parse_event(event)
        return info.value
    with pytest.raises(EventRejected) as from_dict:
        parse_event(copy.deepcopy(event))
    with pytest.raises(EventRejected) as from_bytes:
        parse_event(as_bytes(event))
    assert str(from_dict.value) == str(from_bytes.value)
    return from_bytes.value


def job_event(**extra: Any) -> dict[str, Any]:
    return {
        "eventTime": "2026-11-01T02:00:00Z",
        "producer": PRODUCER,
        "schemaURL": f"{CORE}#/$defs/JobEvent",
        "job": {"namespace": "etl", "name": "static_job"},
        **extra,
    }


def dataset_event(**extra: Any) -> dict[str, Any]:
    return {
        "eventTime": "2026-11-01T02:00:00Z",
        "producer": PRODUCER,
        "schemaURL": f"{CORE}#/$defs/DatasetEvent",
        "dataset": {"namespace": "postgres://db:5432", "name": "shop.public.orders"},
        **extra,
    }


# -- event kinds ---------------------------------------------------------------------------------


def test_kind_from_the_2x_schema_url_fragment() -> None:
    for event in parse_both(run_event()):
        assert isinstance(event, RunEvent)
        assert event.kind == EventKind.RUN
        assert event.job.name == "build_daily_kpi"


def test_kind_from_the_old_definitions_fragment() -> None:
    data = job_event(schemaURL=f"{OLD_CORE}#/definitions/JobEvent")
    for event in parse_both(data):
        assert isinstance(event, JobEvent)
        assert event.kind == EventKind.JOB
        assert event.schemaURL == f"{OLD_CORE}#/definitions/JobEvent"


def test_kind_from_the_dataset_event_fragment() -> None:
    for event in parse_both(dataset_event()):
        assert isinstance(event, DatasetEvent)
        assert event.dataset.name == "shop.public.orders"


@pytest.mark.parametrize(
    ("schema_url", "present", "expected"),
    [
        (None, {"run": {"runId": "r-1"}, "job": {"namespace": "etl", "name": "j"}}, RunEvent),
        (None, {"job": {"namespace": "etl", "name": "j"}}, JobEvent),
        (None, {"dataset": {"namespace": "kafka://k:9092", "name": "orders"}}, DatasetEvent),
        # a URL without a fragment (seen: http://test.schema.url) says nothing about the kind
        ("http://test.schema.url", {"job": {"namespace": "etl", "name": "j"}}, JobEvent),
    ],
)
def test_kind_from_the_fields_when_the_schema_url_does_not_tell(
    schema_url: str | None, present: dict[str, Any], expected: type
) -> None:
    data: dict[str, Any] = {"eventTime": "2026-11-01T02:00:00Z", "producer": PRODUCER, **present}
    if schema_url is not None:
        data["schemaURL"] = schema_url
    for event in parse_both(data):
        assert type(event) is expected


def test_the_fragment_wins_over_the_fields_present() -> None:
    """A RunEvent URL on an object without ``run``: a broken RunEvent, not a JobEvent."""
    data = job_event(schemaURL=f"{CORE}#/$defs/RunEvent")
    err = rejection(data)
    assert err.path == "run"
    assert "required" in err.reason


def test_an_object_that_is_no_event_is_rejected() -> None:
    err = rejection({"eventTime": "2026-11-01T02:00:00Z", "producer": PRODUCER})
    assert "'run', 'job' or 'dataset'" in str(err)


@pytest.mark.parametrize(("raw", "what"), [(b"[1, 2]", "array"), (b'"text"', "string")])
def test_json_that_is_not_an_object_is_rejected(raw: bytes, what: str) -> None:
    assert what in str(rejection(raw))


def test_invalid_json_is_rejected_not_raised_as_something_else() -> None:
    err = rejection(b'{"eventType": "START", ')
    assert "not valid JSON" in str(err)


# -- lenient envelope -----------------------------------------------------------------------------


def test_missing_schema_url_is_accepted() -> None:
    data = run_event()
    del data["schemaURL"]
    for event in parse_both(data):
        assert isinstance(event, RunEvent)
        assert event.schemaURL is None


def test_missing_event_type_is_accepted_as_unknown_state() -> None:
    data = run_event()
    del data["eventType"]
    for event in parse_both(data):
        assert isinstance(event, RunEvent)
        assert event.eventType is None


@pytest.mark.parametrize(
    ("wire", "utc"),
    [
        # zone-less (Python-client fixtures, Marquez): read as UTC
        ("2021-11-03T10:53:52.427343", datetime(2021, 11, 3, 10, 53, 52, 427343, tzinfo=UTC)),
        # nanoseconds (Flink, Debezium): cut to microseconds
        ("2024-03-01T12:00:00.123456789Z", datetime(2024, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)),
        # +10:00 offset (Marquez): the same instant in UTC
        ("2020-12-28T19:52:00.001+10:00", datetime(2020, 12, 28, 9, 52, 0, 1000, tzinfo=UTC)),
        (
            "2020-12-28T19:52:00.123456789+10:00",
            datetime(2020, 12, 28, 9, 52, 0, 123456, tzinfo=UTC),
        ),
        ("2024-03-01T12:00:00Z", datetime(2024, 3, 1, 12, 0, tzinfo=UTC)),
        ("2024-03-01T12:00:00.5+00:00", datetime(2024, 3, 1, 12, 0, 0, 500000, tzinfo=UTC)),
    ],
)
def test_event_times_become_aware_utc(wire: str, utc: datetime) -> None:
    for event in parse_both(run_event(event_time=wire)):
        assert event.eventTime == utc
        assert event.eventTime.utcoffset() is not None
        assert event.eventTime.utcoffset().total_seconds() == 0


def test_a_run_id_that_is_not_a_uuid_is_accepted() -> None:
    for event in parse_both(run_event(run_id="run_id")):
        assert event.run.runId == "run_id"


# -- strict envelope -------------------------------------------------------------------------------


def _without(path: str) -> dict[str, Any]:
    data = run_event()
    *parents, leaf = path.split(".")
    target = data
    for p in parents:
        target = target[p]
    del target[leaf]
    return data


@pytest.mark.parametrize(
    "path", ["run.runId", "job.name", "job.namespace", "producer", "eventTime"]
)
def test_a_missing_required_field_is_rejected_by_its_path(path: str) -> None:
    err = rejection(_without(path))
    assert err.path == path
    assert str(err).startswith(f"{path}: ")
    assert "required" in err.reason


def test_an_empty_job_name_is_rejected() -> None:
    data = run_event()
    data["job"]["name"] = ""
    assert rejection(data).path == "job.name"


def test_an_unknown_event_type_is_rejected() -> None:
    data = run_event(event_type="FINISHED")
    err = rejection(data)
    assert err.path == "eventType"
    assert "COMPLETE" in err.reason  # says what would have been valid


def test_an_event_time_that_is_no_date_is_rejected() -> None:
    err = rejection(run_event(event_time="yesterday"))
    assert err.path == "eventTime"
    assert "yesterday" in err.reason


def test_a_dataset_of_an_input_without_name_is_rejected() -> None:
    data = run_event()
    data["inputs"] = [{"namespace": "s3://bucket"}]
    assert rejection(data).path == "inputs.0.name"


def test_a_dataset_event_must_not_carry_a_job() -> None:
    data = dataset_event(job={"namespace": "etl", "name": "j"})
    err = rejection(data)
    assert "DatasetEvent" in str(err)
    assert "'job'" in str(err)


def test_a_job_event_must_not_carry_a_run() -> None:
    data = job_event(run={"runId": "3f1f6f0e-8f43-4a52-9d1c-0a0b7c1e0d01"})
    err = rejection(data)
    assert "JobEvent" in str(err)
    assert "'run'" in str(err)


# -- standard facets of the wrong shape ----------------------------------------------------------


def _with_output_facets(facets: dict[str, Any], key: str = "facets") -> dict[str, Any]:
    data = run_event(outputs=[("postgres://db:5432", "shop.public.orders")])
    data["outputs"][0][key] = facets
    return data


def _with_input_facets(facets: dict[str, Any], key: str = "inputFacets") -> dict[str, Any]:
    data = run_event(inputs=[("postgres://db:5432", "shop.public.items")])
    data["inputs"][0][key] = facets
    return data


def _with_job_facets(facets: dict[str, Any]) -> dict[str, Any]:
    data = run_event()
    data["job"]["facets"] = facets
    return data


def _with_run_facets(facets: dict[str, Any]) -> dict[str, Any]:
    data = run_event()
    data["run"]["facets"] = facets
    return data


BROKEN_FACETS = {
    "schema field without name": (
        _with_output_facets({"schema": {"fields": [{"name": "id"}, {"type": "int"}]}}),
        "outputs.0.facets.schema.fields.1.name",
    ),
    "nested schema field without name": (
        _with_output_facets({"schema": {"fields": [{"name": "a", "fields": [{"type": "int"}]}]}}),
        "outputs.0.facets.schema.fields.0.fields.0.name",
    ),
    "job ownership owner without name": (
        _with_job_facets({"ownership": {"owners": [{"type": "MAINTAINER"}]}}),
        "job.facets.ownership.owners.0.name",
    ),
    "dataset ownership owner without name": (
        _with_output_facets({"ownership": {"owners": [{"type": "MAINTAINER"}]}}),
        "outputs.0.facets.ownership.owners.0.name",
    ),
    "rowCount as a string": (
        _with_output_facets({"outputStatistics": {"rowCount": "12"}}, "outputFacets"),
        "outputs.0.outputFacets.outputStatistics.rowCount",
    ),
    "assertion success as a string": (
        _with_input_facets(
            {"dataQualityAssertions": {"assertions": [{"assertion": "nn", "success": "true"}]}}
        ),
        "inputs.0.inputFacets.dataQualityAssertions.assertions.0.success",
    ),
    "parent without run.runId": (
        _with_run_facets({"parent": {"run": {}, "job": {"namespace": "etl", "name": "dag"}}}),
        "run.facets.parent.run.runId",
    ),
    "jobType without integration": (
        _with_job_facets({"jobType": {"processingType": "BATCH"}}),
        "job.facets.jobType.integration",
    ),
    "sql without query": (
        _with_job_facets({"sql": {"dialect": "postgres"}}),
        "job.facets.sql.query",
    ),
    "columnLineage input field without field": (
        _with_output_facets(
            {
                "columnLineage": {
                    "fields": {"id": {"inputFields": [{"namespace": "n", "name": "t"}]}}
                }
            }
        ),
        "outputs.0.facets.columnLineage.fields.id.inputFields.0.field",
    ),
    "unknown lifecycle state": (
        _with_output_facets({"lifecycleStateChange": {"lifecycleStateChange": "EXPLODE"}}),
        "outputs.0.facets.lifecycleStateChange.lifecycleStateChange",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN_FACETS))
def test_a_standard_facet_of_the_wrong_shape_is_rejected_with_its_path(case: str) -> None:
    data, path = BROKEN_FACETS[case]
    err = rejection(data)
    assert err.path == path
    assert str(err).startswith(f"{path}: ")


def test_integers_are_strict_not_even_a_float() -> None:
    data = _with_output_facets({"outputStatistics": {"rowCount": 12.5}}, "outputFacets")
    assert rejection(data).path == "outputs.0.outputFacets.outputStatistics.rowCount"


def test_well_formed_standard_facets_are_typed() -> None:
    data = _with_job_facets(
        {
            "jobType": {
                "processingType": "STREAMING",
                "integration": "FLINK",
                "jobType": "JOB",
                "emissionPattern": {
                    "eventTrigger": "PERIODIC",
                    "eventContentMode": "COMPLETE_SNAPSHOT",
                    "windowDuration": 300,
                },
            },
            "sql": {"query": "INSERT INTO t SELECT 1", "dialect": "flink"},
        }
    )
    for event in parse_both(data):
        job_type = event.job.facets.jobType
        assert (job_type.processingType, job_type.integration, job_type.jobType) == (
            "STREAMING",
            "FLINK",
            "JOB",
        )
        assert job_type.emissionPattern.windowDuration == 300
        assert event.job.facets.sql.query == "INSERT INTO t SELECT 1"


def test_facets_without_producer_and_schema_url_are_accepted() -> None:
    data = _with_job_facets({"documentation": {"description": "Daily KPIs"}})
    for event in parse_both(data):
        assert event.job.facets.documentation.description == "Daily KPIs"


# -- custom facets, _deleted ---------------------------------------------------------------------


def test_custom_and_unknown_facets_are_kept_as_they_came() -> None:
    airflow = {"_producer": PRODUCER, "dag": {"dag_id": "daily", "owner": "***"}}
    data = _with_job_facets(
        {
            "airflow": airflow,
            "jobType": {
                "processingType": "BATCH",
                "integration": "AIRFLOW",
                "jobType": "TASK",
                "vendorExtra": {"x": 1},
            },
        }
    )
    data["outputs"] = [
        {
            "namespace": "s3://bucket",
            "name": "out/file.csv",
            "facets": {"my_custom": {"values": [1, 2, 3]}},
        }
    ]
    for event in parse_both(data):
        assert event.job.facets.custom == {"airflow": airflow}
        # a standard facet's properties beyond the spec's are accepted (the store keeps them)
        assert event.job.facets.jobType.integration == "AIRFLOW"
        assert event.outputs[0].facets.custom == {"my_custom": {"values": [1, 2, 3]}}
        assert facet_items(event.outputs[0].facets) == {"my_custom": {"values": [1, 2, 3]}}
    # normalization reads typed facets only: it parses without the custom ones
    lean = parse_event(as_bytes(data), custom_facets=False)
    assert lean.job.facets.custom == {} and lean.outputs[0].facets.custom == {}
    assert lean.job.facets.jobType == parse_event(as_bytes(data)).job.facets.jobType


def test_deleted_facets_are_collected_and_not_validated() -> None:
    data = _with_job_facets(
        {
            # would be rejected (no processingType/integration) if it were validated
            "jobType": {"_deleted": True},
            "documentation": {"description": "kept"},
        }
    )
    data["outputs"] = [
        {
            "namespace": "s3://bucket",
            "name": "out",
            "facets": {"schema": {"_deleted": True, "fields": "not a list"}},
        }
    ]
    for event in [*parse_both(data), parse_event(as_bytes(data), custom_facets=False)]:
        assert event.job.facets.deleted == frozenset({"jobType"})
        # a marker, not a facet: nothing downstream reads it as a jobType
        assert event.job.facets.jobType is None
        assert "jobType" not in facet_items(event.job.facets)
        assert event.job.facets.documentation.description == "kept"
        assert event.outputs[0].facets.deleted == frozenset({"schema"})
        assert "schema" not in facet_items(event.outputs[0].facets)


def test_deleted_false_is_an_ordinary_facet() -> None:
    data = _with_job_facets({"jobType": {"_deleted": False, "processingType": "BATCH"}})
    assert rejection(data).path == "job.facets.jobType.integration"


# -- one pass from bytes -------------------------------------------------------------------------


def test_bytes_are_validated_without_a_separate_json_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """The receiver hands over request bytes: no json.loads / orjson.loads before validation."""
    import orjson

    def forbidden(*_: Any, **__: Any) -> Any:
        raise AssertionError("bytes were parsed twice")

    monkeypatch.setattr(json, "loads", forbidden)
    monkeypatch.setattr(orjson, "loads", forbidden)
    data = _with_output_facets({"schema": {"fields": [{"name": "id", "type": "bigint"}]}})
    raw = json.dumps(data).encode()
    event = parse_event(raw)
    assert event.outputs[0].facets.schema_.fields[0].name == "id"
    with pytest.raises(EventRejected) as info:
        parse_event(raw.replace(b'"name": "id"', b'"nam": "id"'))
    assert info.value.path == "outputs.0.facets.schema.fields.0.name"


def test_str_input_is_read_like_bytes() -> None:
    event = parse_event(json.dumps(run_event(run_id="abc")))
    assert event.run.runId == "abc"


# -- lenient extraction (templates, damaged events) ----------------------------------------------


def test_lenient_parse_fills_a_missing_envelope() -> None:
    template = {
        "eventType": "COMPLETE",
        "run": {"runId": "{{ is_uuid(result) }}"},
        "job": {"namespace": "spark_ns", "name": "app.execute_insert"},
        "inputs": [{"namespace": "hdfs://nn:8020", "name": "/warehouse/in"}],
        "outputs": [],
    }
    with pytest.raises(EventRejected):
        parse_event(template)  # strict: no producer, no eventTime
    for raw in (copy.deepcopy(template), as_bytes(template)):
        event = parse_event_lenient(raw)
        assert isinstance(event, RunEvent)
        assert event.producer  # a visible placeholder
        assert event.eventTime.tzinfo is not None
        assert "{{" not in event.run.runId  # a matcher is no run id
        assert event.job.name == "app.execute_insert"
        assert [(d.namespace, d.name) for d in event.inputs] == [
            ("hdfs://nn:8020", "/warehouse/in")
        ]
    # the template itself is left as it was
    assert "producer" not in template


def test_lenient_parse_drops_broken_facets_and_keeps_the_rest() -> None:
    data = _with_job_facets(
        {
            "ownership": {"owners": [{"type": "MAINTAINER"}]},
            "sql": {"query": "select 1"},
        }
    )
    data["outputs"] = [
        {
            "namespace": "s3://bucket",
            "name": "out",
            "facets": {
                "schema": {"fields": [{"type": "int"}]},
                "documentation": {"description": "d"},
            },
            "outputFacets": {"outputStatistics": {"rowCount": "12"}},
        }
    ]
    event = parse_event_lenient(data)
    assert event.job.facets.ownership is None
    assert event.job.facets.sql.query == "select 1"
    assert event.outputs[0].facets.schema_ is None
    assert event.outputs[0].facets.documentation.description == "d"
    assert event.outputs[0].outputFacets.outputStatistics is None


def test_lenient_parse_still_rejects_what_is_no_event() -> None:
    with pytest.raises(EventRejected):
        parse_event_lenient([1, 2])
    with pytest.raises(EventRejected):
        parse_event_lenient({"eventType": "START"})


def test_deleted_as_one_is_a_marker_as_it_always_was() -> None:
    """Events stored under the earlier models read the same: ``1`` and ``1.0`` mark a deletion,
    ``"true"`` does not (that facet is then validated, and a jobType needs its fields)."""
    for flag in (1, 1.0):
        event = parse_event(as_bytes(_with_job_facets({"jobType": {"_deleted": flag}})))
        assert event.job.facets.deleted == frozenset({"jobType"})
    assert rejection(_with_job_facets({"jobType": {"_deleted": "true"}})).path == (
        "job.facets.jobType.processingType"
    )


def test_a_facet_named_like_the_maps_attributes_is_a_custom_facet() -> None:
    """``custom`` and ``deleted`` of a facet map are not fields: no facet can fill them."""
    data = _with_job_facets({"custom": {"x": 1}, "deleted": ["sql"], "sql": {"query": "q"}})
    for event in parse_both(data):
        facets = event.job.facets
        assert facets.custom == {"custom": {"x": 1}, "deleted": ["sql"]}
        assert facets.deleted == frozenset()
        assert facet_items(facets)["sql"].query == "q"


# -- blank names: msgspec checks type and length, a Python post-check the content -----------------


def _every_name_event() -> dict[str, Any]:
    """A RunEvent with each place the models type as a name at least once."""
    ref = {"namespace": "postgres://db:5432", "name": "shop.public.items"}
    owners = {"owners": [{"name": "team-a", "type": "TEAM"}]}
    data = run_event(
        inputs=[("postgres://db:5432", "shop.public.items")],
        outputs=[("postgres://db:5432", "shop.public.orders")],
    )
    data["run"]["facets"] = {
        "parent": {
            "run": {"runId": "p-1"},
            "job": {"namespace": "etl", "name": "dag"},
            "root": {"run": {"runId": "r-1"}, "job": {"namespace": "etl", "name": "root"}},
        }
    }
    data["job"]["facets"] = {"ownership": copy.deepcopy(owners)}
    data["inputs"][0]["facets"] = {
        "symlinks": {"identifiers": [{**ref, "type": "TABLE"}]},
        "schema": {"fields": [{"name": "id", "fields": [{"name": "inner"}]}]},
    }
    data["outputs"][0]["facets"] = {
        "ownership": owners,
        "lifecycleStateChange": {
            "lifecycleStateChange": "RENAME",
            "previousIdentifier": {**ref, "name": "old"},
        },
        "columnLineage": {
            "fields": {"id": {"inputFields": [{**ref, "field": "id"}]}},
            "dataset": [{**ref, "field": "status"}],
        },
    }
    return data


def _name_paths(value: Any, path: str = "") -> list[str]:
    """The path of every ``Name`` in a typed event, found from the Structs' annotations."""
    import msgspec

    from ol_dagster.openlineage.names import name_fields

    out: list[str] = []
    if isinstance(value, msgspec.Struct):
        for attr, key, is_name in name_fields(type(value)):
            where = f"{path}.{key}" if path else key
            out += [where] if is_name else _name_paths(getattr(value, attr), where)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += _name_paths(item, f"{path}.{i}")
    elif isinstance(value, dict):
        for key, item in value.items():
            out += _name_paths(item, f"{path}.{key}")
    return out


def _put(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(data)
    *parents, leaf = path.split(".")
    target: Any = data
    for p in parents:
        target = target[int(p)] if isinstance(target, list) else target[p]
    target[leaf] = value
    return data


def test_every_name_is_somewhere_in_the_blank_names_fixture() -> None:
    """Each Struct field typed as a name is in ``_every_name_event`` (so the next test covers
    every place a blank name can hide), found from the annotations, not from a list here."""
    import msgspec

    from ol_dagster.openlineage import facets, structs
    from ol_dagster.openlineage.names import name_fields

    declared = {
        (cls.__name__, key)
        for module in (facets, structs)
        for cls in vars(module).values()
        if isinstance(cls, type)
        and issubclass(cls, msgspec.Struct)
        and cls.__module__
        in (
            facets.__name__,
            structs.__name__,
        )
        and not cls.__name__.startswith("_")
        and not issubclass(cls, structs.Envelope)  # what is decoded, not the typed event
        for _, key, is_name in name_fields(cls)
        if is_name
    }
    # the fixture is a RunEvent: a DatasetEvent's dataset is the Dataset class its datasets share
    seen = set()
    event = parse_event(_every_name_event())

    def walk(value: Any) -> None:
        if isinstance(value, msgspec.Struct):
            for attr, key, is_name in name_fields(type(value)):
                if is_name:
                    for cls in type(value).__mro__:
                        seen.add((cls.__name__, key))
                walk(getattr(value, attr))
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)

    walk(event)
    assert declared <= seen, declared - seen


@pytest.mark.parametrize("blank", [" ", "\t\n", "\u3000", "\u00a0 \u2028"])
def test_a_blank_name_is_rejected_wherever_it_is(blank: str) -> None:
    """Every path of a name, blanked: the receiver's check, the full parse and normalization's
    one-pass parse all refuse it, naming that path."""
    data = _every_name_event()
    paths = _name_paths(parse_event(data))
    assert len(paths) >= 25
    for path in paths:
        bad = _put(data, path, blank)
        err = rejection(bad)
        assert (err.path, err.reason) == (path, "must not be blank")
        with pytest.raises(EventRejected) as lean:
            parse_event(as_bytes(bad), custom_facets=False)
        assert lean.value.path == path
        with pytest.raises(EventRejected) as checked:
            check_event(bad, max_name_length=2048)
        assert checked.value.path == path


def test_separator_controls_are_not_blank() -> None:
    """U+001C..U+001F are white space to Python's ``str.isspace`` but not to Unicode (nor to the
    ``\\S`` the earlier models used): a name of them is accepted, by every path."""
    data = _every_name_event()
    data["job"]["name"] = "\x1c\x1f"
    assert {e.job.name for e in parse_both(data)} == {"\x1c\x1f"}
    assert parse_event(as_bytes(data), custom_facets=False).job.name == "\x1c\x1f"
    assert check_event(data).job_name == "\x1c\x1f"
