"""Every concrete event of the public corpus, read in place, and the expected-output templates.

``ol_dagster_tests/corpus/MANIFEST.md`` records for each event file the outcome of a JSON
Schema check (core schema and standard facets). Events it marks "core OK, std facets OK" must be
accepted. For every other file this module says explicitly what ol-dagster does with it: rejected,
with the field path of the reason, or accepted on purpose (the lenient quirks: missing
``schemaURL``, zone-less times, a non-UUID ``runId``). A corpus file that is in neither list, or a
listed expectation the MANIFEST contradicts, fails the test.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ol_dagster.commands.eventfiles import UnreadableFile, read_events
from ol_dagster.commands.inspection import inspect_files
from ol_dagster.lineage import normalize
from ol_dagster.lineage.naming import normalize_namespace
from ol_dagster.openlineage.envelope import EventRejected
from ol_dagster.openlineage.lenient import parse_event_lenient
from ol_dagster.openlineage.models import RunEvent, parse_event
from ol_dagster_tests.conftest import CORPUS

EVENTS = CORPUS / "events"
TEMPLATES = CORPUS / "expected-templates"
SCHEMA_VALID = "core OK, std facets OK"

EVENT_FILES = sorted(p.relative_to(EVENTS).as_posix() for p in EVENTS.glob("*/*.json"))
TEMPLATE_FILES = sorted(p.relative_to(TEMPLATES).as_posix() for p in TEMPLATES.glob("*/*.json"))

# File -> expected substring of the rejection (the field path, as the MANIFEST's reason names it).
REJECTED = {
    "flink/datahub__flink_job_test.json": "not valid JSON",  # a stray closing brace
    # dataQualityMetrics requires columnMetrics in every published version (1-0-0 ... 1-0-3)
    "marquez/marquez-api-test__event_full.json": (
        "inputs.0.inputFacets.dataQualityMetrics.columnMetrics"
    ),
    "proxy-fixtures/ol-proxy-fluentd__event_full.json": (
        "inputs.0.inputFacets.dataQualityMetrics.columnMetrics"
    ),
    "proxy-fixtures/ol-proxy-fluentd__event_invalid_input_dataset_facet.json": (
        "inputs.0.inputFacets.dataQualityMetrics.columnMetrics"
    ),
    "proxy-fixtures/ol-proxy-fluentd__event_invalid_dataset_facet.json": (
        "outputs.0.facets.ownership.owners.0.name"
    ),
    "proxy-fixtures/ol-proxy-fluentd__event_invalid_job_facet.json": (
        "job.facets.ownership.owners.0.name"
    ),
    "proxy-fixtures/ol-proxy-fluentd__event_invalid_output_dataset_facet.json": (
        "outputs.0.outputFacets.outputStatistics.rowCount"  # "wrong" is no integer
    ),
    "proxy-fixtures/ol-proxy-fluentd__event_invalid_run_facet.json": "run.facets.parent.run.runId",
    "proxy-fixtures/ol-proxy-fluentd__event_no_run_id.json": "run.runId",
    # no producer (nor schemaURL): who sent it is unknown
    "spark/ol-spark-serde__openlineage-event.json": "producer",
}

# File -> why it is accepted although the JSON Schema check failed.
NO_SCHEMA_URL = "no schemaURL"
LENIENT_ACCEPTED = {
    "generic/ct-simple_run_event__simple_run_event.json": "runId 'run_id' is not a UUID",
    "marquez/marquez-api-test__event_required_no_timezone.json": "zone-less time, no eventType",
    "marquez/marquez-api-test__event_without_schema_url.json": NO_SCHEMA_URL,
    "marquez/marquez-listener__1.json": NO_SCHEMA_URL,
    "marquez/marquez-listener__2.json": NO_SCHEMA_URL,
    **{f"marquez/marquez-docker-metadata__metadata_{i:02d}.json": NO_SCHEMA_URL for i in range(26)},
    "python-client/ol-client-python__serde_example_dataset_event.json": "zone-less eventTime",
    "python-client/ol-client-python__serde_example_job_event.json": "zone-less eventTime",
    # zone-less eventTime, and nominalTime given as dates ("2020-01-01"): clear, and not lineage
    "python-client/ol-client-python__serde_example_run_event.json": "zone-less times",
}


def _manifest_outcomes() -> dict[str, str]:
    """``events/...`` file -> the "schema check" column of the MANIFEST's event index."""
    text = (CORPUS / "MANIFEST.md").read_text(encoding="utf-8")
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"\| `events/([^`]+\.json)` \|", line)
        if m:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            out[m.group(1)] = cells[3]
    return out


MANIFEST = _manifest_outcomes() if (CORPUS / "MANIFEST.md").is_file() else {}


def test_the_corpus_is_where_the_tests_expect_it(corpus: Path) -> None:
    assert corpus == CORPUS
    assert len(EVENT_FILES) == 124  # "124 concrete events" (MANIFEST)
    assert len(TEMPLATE_FILES) == 102  # "102 files / 222 events"


def test_every_event_file_is_in_the_manifest_index() -> None:
    assert sorted(MANIFEST) == EVENT_FILES
    assert sum(o == SCHEMA_VALID for o in MANIFEST.values()) == 80


def test_expectations_agree_with_the_manifest() -> None:
    """Only events the schema check failed may be rejected or need leniency, and each of those
    has an explicit expectation here."""
    assert not set(REJECTED) & set(LENIENT_ACCEPTED)
    listed = set(REJECTED) | set(LENIENT_ACCEPTED)
    for name in listed:
        assert MANIFEST[name] != SCHEMA_VALID, f"{name} is schema-valid per the MANIFEST"
    not_valid = {name for name, outcome in MANIFEST.items() if outcome != SCHEMA_VALID}
    assert not_valid == listed


@pytest.mark.parametrize("name", EVENT_FILES)
def test_corpus_event(corpus: Path, name: str) -> None:
    raw = (corpus / "events" / name).read_bytes()
    if name in REJECTED:
        with pytest.raises(EventRejected) as info:
            parse_event(raw)
        assert REJECTED[name] in str(info.value)
        return
    event = parse_event(raw)
    # what was accepted is what the file says
    data = json.loads(raw)
    for part in ("job", "dataset"):
        if part in data and hasattr(event, part):
            got = getattr(event, part)
            assert (got.namespace, got.name) == (data[part]["namespace"], data[part]["name"])
    if isinstance(event, RunEvent):
        assert event.run.runId == data["run"]["runId"]
        assert event.eventType == data.get("eventType")
        assert len(event.inputs) == len(data.get("inputs") or [])
        assert len(event.outputs) == len(data.get("outputs") or [])
    assert event.eventTime.tzinfo is not None
    assert event.eventTime.utcoffset().total_seconds() == 0


@pytest.mark.parametrize(
    ("name", "utc"),
    [
        (
            "marquez/marquez-api-test__event_required_no_timezone.json",
            datetime(2020, 12, 28, 19, 51, 1, 641499, tzinfo=UTC),
        ),
        (
            "python-client/ol-client-python__serde_example_job_event.json",
            datetime(2021, 11, 3, 10, 53, 52, 427343, tzinfo=UTC),
        ),
        (  # +10:00
            "marquez/marquez-listener__1.json",
            datetime(2020, 12, 28, 9, 52, 0, 1000, tzinfo=UTC),
        ),
        (
            "marquez/marquez-docker-metadata__metadata_00.json",
            datetime(2020, 2, 22, 22, 42, 42, tzinfo=UTC),
        ),
    ],
)
def test_corpus_event_times_in_utc(corpus: Path, name: str, utc: datetime) -> None:
    assert parse_event((corpus / "events" / name).read_bytes()).eventTime == utc


def test_the_invalid_json_file_is_rejected_cleanly(corpus: Path) -> None:
    path = corpus / "events" / "flink" / "datahub__flink_job_test.json"
    with pytest.raises(UnreadableFile) as info:
        read_events(path)
    assert "not valid JSON" in str(info.value)

    result = inspect_files([str(path)])
    assert result["events"] == [
        {"file": str(path), "index": 0, "accepted": False, "reason": str(info.value)}
    ]
    assert result["graph"]["jobs"] == 0


def test_inspecting_the_whole_corpus_counts_the_rejections(corpus: Path) -> None:
    paths = [str(corpus / "events" / name) for name in EVENT_FILES]
    result = inspect_files(paths)
    rejected = {
        Path(r["file"]).relative_to(corpus / "events").as_posix()
        for r in result["events"]
        if not r["accepted"]
    }
    assert rejected == set(REJECTED)
    assert len(result["events"]) == len(EVENT_FILES)
    assert result["graph"]["jobs"] > 0
    assert result["graph"]["datasets"] > 0
    assert result["graph"]["dataFlows"] > 0


# -- expected-output templates -------------------------------------------------------------------


def _named(
    raw_events: list[Any],
) -> tuple[set[tuple[str, str]], set[str], set[tuple[str, str]]]:
    """The jobs, job namespaces and datasets a template names with literal strings (several Spark
    templates leave the job name out: the test harness matches on the namespace only)."""
    jobs: set[tuple[str, str]] = set()
    job_namespaces: set[str] = set()
    datasets: set[tuple[str, str]] = set()

    def literal(obj: Any) -> tuple[str, str] | None:
        if not isinstance(obj, dict):
            return None
        ns, name = obj.get("namespace"), obj.get("name")
        if isinstance(ns, str) and ns and isinstance(name, str) and name:
            return (ns, name)
        return None

    for raw in raw_events:
        if (job := literal(raw.get("job"))) is not None:
            jobs.add(job)
        job_ns = (raw.get("job") or {}).get("namespace")
        if isinstance(job_ns, str) and job_ns:
            job_namespaces.add(job_ns)
        for side in ("inputs", "outputs"):
            for d in raw.get(side) or []:
                if (ds := literal(d)) is not None:
                    datasets.add((normalize_namespace(ds[0]), ds[1]))
    return jobs, job_namespaces, datasets


def test_templates_hold_the_events_the_manifest_counts(corpus: Path) -> None:
    total = sum(len(read_events(corpus / "expected-templates" / n)) for n in TEMPLATE_FILES)
    assert total == 222


@pytest.mark.parametrize("name", TEMPLATE_FILES)
def test_template_lenient_extraction(corpus: Path, name: str) -> None:
    path = corpus / "expected-templates" / name
    result = inspect_files([str(path)], lenient=True)
    assert all(r["accepted"] for r in result["events"]), result["events"]
    assert result["graph"]["jobs"] >= 1

    raw_events = read_events(path)
    graph = normalize([parse_event_lenient(raw) for raw in raw_events])
    jobs, job_namespaces, datasets = _named(raw_events)
    # (the Delta MERGE templates name no job at all: a placeholder job stands in)
    assert graph.jobs
    assert jobs <= set(graph.jobs)
    assert job_namespaces <= {ns for ns, _ in graph.jobs}
    known = set(graph.datasets)
    for node in graph.datasets.values():
        known |= node.aliases  # a path resolved into its table by a symlink
    assert datasets <= known
    assert result["graph"]["datasets"] == len(graph.datasets)
