"""``ol-dagster inspect FILE... [--json]``, run as a person runs it: a subprocess in the project."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from ol_dagster_tests.conftest import PROJECT_ROOT, run_event

GRAPH_KEYS = [
    "jobs",
    "datasets",
    "fields",
    "dataFlows",
    "fieldFlows",
    "orchestrationFlows",
    "routines",
    "qualityChecks",
    "danglingFlows",
]
PG = "postgres://warehouse.internal:5432"
AIRFLOW_DAG_START = "events/airflow/ct-airflow__line_09.json"
NO_RUN_ID = "events/proxy-fixtures/ol-proxy-fluentd__event_no_run_id.json"
NOT_JSON = "events/flink/datahub__flink_job_test.json"


def inspect(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ol_dagster.commands.cli", "inspect", *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def inspect_json(*files: str) -> tuple[int, dict[str, Any]]:
    proc = inspect(*files, "--json")
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)  # one JSON object, nothing else


def relative(path: Path) -> str:
    """The path as a person in the project directory would type it."""
    return os.path.relpath(path, PROJECT_ROOT)


def lineage_event() -> dict[str, Any]:
    """One Spark-like run: a -> b with column lineage, SQL, a parent DAG and a quality check."""
    data = run_event(
        "etl",
        "load_b",
        inputs=[(PG, "shop.public.a")],
        outputs=[(PG, "shop.public.b")],
    )
    data["job"]["facets"] = {"sql": {"query": "INSERT INTO b SELECT x FROM a"}}
    data["run"]["facets"] = {
        "parent": {"run": {"runId": str(uuid.uuid4())}, "job": {"namespace": "etl", "name": "dag"}}
    }
    data["inputs"][0]["facets"] = {"schema": {"fields": [{"name": "x"}]}}
    data["inputs"][0]["inputFacets"] = {
        "dataQualityAssertions": {"assertions": [{"assertion": "not_null", "success": True}]}
    }
    data["outputs"][0]["facets"] = {
        "schema": {"fields": [{"name": "x"}, {"name": "y"}]},
        "columnLineage": {
            "fields": {
                "x": {
                    "inputFields": [
                        {"namespace": PG, "name": "shop.public.a", "field": "x"},
                        {"namespace": PG, "name": "shop.public.gone", "field": "x"},
                    ]
                }
            }
        },
    }
    return data


def test_json_output_for_accepted_events(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(lineage_event()))
    code, out = inspect_json(str(path))
    assert code == 0
    # the checkout's settings hold two definitions: none is chosen to judge the namespaces
    assert list(out) == ["events", "graph", "definition"] and out["definition"] is None
    assert out["events"] == [{"file": str(path), "index": 0, "accepted": True, "reason": None}]
    assert out["graph"] == {
        "jobs": 2,  # load_b and its parent dag
        "datasets": 2,
        "fields": 3,  # a.x, b.x, b.y
        "dataFlows": 1,
        "fieldFlows": 1,
        "orchestrationFlows": 1,
        "routines": 1,
        "qualityChecks": 1,
        "danglingFlows": 1,  # shop.public.gone is cited but never described
    }


def test_a_relative_path_is_reported_as_given(corpus: Path) -> None:
    given = relative(corpus / AIRFLOW_DAG_START)
    assert not os.path.isabs(given)
    code, out = inspect_json(given)
    assert code == 0
    assert [r["file"] for r in out["events"]] == [given]
    assert list(out["graph"]) == GRAPH_KEYS
    assert out["graph"]["jobs"] >= 1


def test_any_rejected_event_exits_1_and_says_why(corpus: Path) -> None:
    good = relative(corpus / AIRFLOW_DAG_START)
    no_run_id = relative(corpus / NO_RUN_ID)
    not_json = relative(corpus / NOT_JSON)
    code, out = inspect_json(good, no_run_id, not_json)
    assert code == 1
    rows = {r["file"]: r for r in out["events"]}
    assert list(rows) == [good, no_run_id, not_json]
    assert rows[good]["accepted"] is True
    assert rows[no_run_id]["accepted"] is False
    assert rows[no_run_id]["reason"].startswith("run.runId")
    assert rows[not_json]["accepted"] is False
    assert "not valid JSON" in rows[not_json]["reason"]
    # the accepted event still makes its graph
    assert out["graph"]["jobs"] >= 1


def test_ndjson_with_a_broken_line(tmp_path: Path) -> None:
    events = [
        run_event("etl", "j1", inputs=[(PG, "db.s.a")], outputs=[(PG, "db.s.b")]),
        None,  # broken line
        run_event("etl", "j2", inputs=[(PG, "db.s.b")], outputs=[(PG, "db.s.c")]),
    ]
    lines = [json.dumps(e) if e else '{"eventType": "START", "run": ' for e in events]
    path = tmp_path / "events.ndjson"
    path.write_text("\n".join(lines) + "\n")
    code, out = inspect_json(str(path))
    assert code == 1
    assert [(r["index"], r["accepted"]) for r in out["events"]] == [
        (0, True),
        (1, False),
        (2, True),
    ]
    assert "not valid JSON" in out["events"][1]["reason"]
    assert out["graph"]["jobs"] == 2
    assert out["graph"]["dataFlows"] == 2
    assert out["graph"]["datasets"] == 3


def test_array_and_events_wrapper_files(tmp_path: Path) -> None:
    bad = run_event("etl", "j2")
    bad["job"]["facets"] = {"ownership": {"owners": [{"type": "MAINTAINER"}]}}
    array = tmp_path / "array.json"
    array.write_text(json.dumps([run_event("etl", "j1"), bad]))
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({"events": [run_event("etl", "j3"), run_event("etl", "j4")]}))
    code, out = inspect_json(str(array), str(wrapped))
    assert code == 1
    assert [(Path(r["file"]).name, r["index"], r["accepted"]) for r in out["events"]] == [
        ("array.json", 0, True),
        ("array.json", 1, False),
        ("wrapped.json", 0, True),
        ("wrapped.json", 1, True),
    ]
    assert out["events"][1]["reason"].startswith("job.facets.ownership.owners.0.name")
    assert out["graph"]["jobs"] == 3


def test_a_missing_file_is_rejected_not_a_traceback(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.json")
    proc = inspect(missing, "--json")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    (row,) = json.loads(proc.stdout)["events"]
    assert (row["file"], row["accepted"]) == (missing, False)


def test_the_plain_form_is_a_table_a_person_reads(corpus: Path, tmp_path: Path) -> None:
    good = relative(corpus / AIRFLOW_DAG_START)
    no_run_id = relative(corpus / NO_RUN_ID)
    proc = inspect(good, no_run_id)
    assert proc.returncode == 1
    with pytest.raises(json.JSONDecodeError):
        json.loads(proc.stdout)
    lines = proc.stdout.splitlines()
    good_line = next(line for line in lines if line.startswith(good))
    bad_line = next(line for line in lines if line.startswith(no_run_id))
    assert "accepted" in good_line and "REJECTED" not in good_line
    assert "REJECTED" in bad_line and "run.runId" in bad_line
    assert "1 of 2 event(s) accepted" in proc.stdout
    graph_line = next(line for line in lines if line.startswith("graph:"))
    for key in GRAPH_KEYS:
        assert key in graph_line

    path = tmp_path / "ok.json"
    path.write_text(json.dumps(run_event()))
    proc = inspect(str(path))
    assert proc.returncode == 0
    assert "1 of 1 event(s) accepted" in proc.stdout
    assert "REJECTED" not in proc.stdout
