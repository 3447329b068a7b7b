"""Every value the receiver accepts fits every table, on SQLite and on PostgreSQL, through the
receiver and ``ol-dagster sync``: names at ``limits.maxNameLength`` (and above it when the
definition allows more), run ids of 2,048 characters, and the free texts an event carries (a
field's type, a statement's dialect, a column lineage's transformation, a quality assertion) of
5,000. PostgreSQL enforces a ``VARCHAR(n)``'s length: such a value used to fail the whole batch
("value too long") with nothing written, and the batch was retried forever. Its btree refuses an
index entry over ~2,704 bytes: names of 2,048 characters of two and three bytes (that do not
compress) failed the upload at its Systems, or were refused row by row; every unique key over
names is now over their digest, and the cleanup treats them as it treats short ones.
"""

from __future__ import annotations

import random
import string
import uuid
from typing import Any

import pytest
from sqlalchemy import create_engine, func, select

from ol_dagster.catalog.embedded import tables as t
from ol_dagster.store.schema import events
from ol_dagster_tests.conftest import run_event
from ol_dagster_tests.safety.test_ownership_cli import LAKE, SNAP_UUID, _definition
from ol_dagster_tests.safety.test_ownership_cli import instance as instance  # noqa: F401
from ol_dagster_tests.safety.test_ownership_cli import site as site  # noqa: F401

PG = "postgres://db:5432"
LONG_TEXT = 5_000


def _long(prefix: str, length: int) -> str:
    return (prefix + "x" * length)[:length]


def _loaded_event(name_length: int, run_id: str) -> dict[str, Any]:
    """A run of a job named at ``name_length`` reading a dataset named so, writing one whose
    schema, column lineage and quality assertions carry texts of 5,000 characters."""
    job = _long("load_", name_length)
    source = _long("raw.", name_length)
    target = _long("mart.", name_length)
    column = _long("c", name_length)
    event = run_event("etl", job, inputs=[(PG, source)], outputs=[(PG, target)], run_id=run_id)
    event["job"]["facets"] = {
        "sql": {"query": "select 1", "dialect": _long("dialect", LONG_TEXT)},
    }
    event["inputs"][0]["facets"] = {
        "schema": {"fields": [{"name": column, "type": _long("struct<", LONG_TEXT)}]}
    }
    event["inputs"][0]["inputFacets"] = {
        "dataQualityAssertions": {
            "assertions": [
                {"assertion": _long("expect_", LONG_TEXT), "column": column, "success": True}
            ]
        }
    }
    transformation = {"type": _long("T", LONG_TEXT), "subtype": _long("S", LONG_TEXT)}
    event["outputs"][0]["facets"] = {
        "schema": {"fields": [{"name": column, "type": _long("array<", LONG_TEXT)}]},
        "columnLineage": {
            "fields": {
                column: {
                    "inputFields": [
                        {
                            "namespace": PG,
                            "name": source,
                            "field": column,
                            "transformations": [transformation],
                        }
                    ]
                }
            }
        },
    }
    return event


def _counts(catalog_url: str) -> dict[str, int]:
    engine = create_engine(catalog_url)
    try:
        with engine.connect() as conn:
            return {
                table.name: int(conn.execute(select(func.count()).select_from(table)).scalar_one())
                for table in (t.entities, t.fields, t.statements, t.field_flows, t.quality_checks)
            }
    finally:
        engine.dispose()


@pytest.mark.parametrize("name_length", [2_048, 5_000])
def test_values_at_and_beyond_the_old_columns_are_synced(site, tokens, instance, name_length):  # noqa: F811
    limits = {"maxNameLength": name_length}
    s = site(_definition("snap", SNAP_UUID, "OL_TEST_TOKEN_SNAP", limits=limits))
    run_id = _long(str(uuid.uuid4()), 2_048)
    answer = s.post(tokens["snap"], [_loaded_event(name_length, run_id)])
    assert answer["summary"]["accepted"] == 1, answer
    (line,) = s.cli_sync("snap")
    assert line["status"] == "synced", line
    assert line["upload"]["failed"] == [], line["upload"]
    assert _counts(s.catalog_url) == {
        "cat_physical_entities": 3,
        "cat_physical_fields": 2,
        "cat_statements": 1,
        "cat_field_flows": 1,
        "cat_quality_checks": 1,
    }
    with s.store.engine.connect() as conn:
        assert conn.execute(select(events.c.run_id)).scalar_one() == run_id


def _random_name(prefix: str, length: int, seed: int) -> str:
    """A name whose characters do not compress: PostgreSQL's btree holds it in full."""
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits
    return prefix + "".join(rng.choice(alphabet) for _ in range(length - len(prefix)))


def test_a_row_the_catalog_refuses_fails_alone_and_is_not_retried(site, tokens, instance):  # noqa: F811
    """A row count beyond 64 bits (SQLite and PostgreSQL refuse it): that row is the upload's
    failed row (DATABASE_REFUSED), blocking nothing; every other object of the batch is written,
    the dataset of 5,000 characters that do not compress included (keyed by their digest: a
    PostgreSQL btree refused it before), its cleanup runs and the batch is not retried, so the
    next sync has nothing to do. (Before, the object type's transaction failed whole, and every
    retry the same way.)"""
    limits = {"maxNameLength": 5_000}
    s = site(_definition("snap", SNAP_UUID, "OL_TEST_TOKEN_SNAP", limits=limits))
    huge_name = _random_name("lake.", 5_000, seed=3)
    counted = run_event("etl", "counted", inputs=[(PG, "raw.b")], outputs=[(PG, huge_name)])
    counted["outputs"][0]["outputFacets"] = {"outputStatistics": {"rowCount": 2**63}}
    kept = run_event("etl", "kept", inputs=[(PG, "raw.a")], outputs=[(PG, "mart.a")])
    assert s.post(tokens["snap"], [kept, counted])["summary"]["accepted"] == 2

    (line,) = s.cli_sync("snap")
    assert line["status"] == "synced", line
    failed = {(f["objectType"], f["key"][:40]): f for f in line["upload"]["failed"]}
    assert all(f["code"] == "DATABASE_REFUSED" for f in failed.values()), failed
    assert all(f["blocks"] is False for f in failed.values()), failed
    assert list(failed) == [("runMetrics", "etl:counted")]
    assert line["cleanup"]["skippedReason"] is None
    assert line["checks"]["upload_succeeded"] is True
    assert {n for _, n in s.datasets()} == {"raw.a", "mart.a", "raw.b", huge_name}
    assert _counts(s.catalog_url)["cat_physical_entities"] == 6

    (again,) = s.cli_sync("snap")
    assert again["status"] == "nothing_pending", again


def _multibyte_name(length: int, seed: int) -> str:
    """``length`` random characters of two and three bytes in UTF-8 (Cyrillic, CJK): ~5 KB
    that do not compress, beyond any btree entry PostgreSQL takes."""
    rng = random.Random(seed)
    return "".join(
        chr(rng.choice((rng.randrange(0x0400, 0x0500), rng.randrange(0x4E00, 0x9FA0))))
        for _ in range(length)
    )


_PARTS = ("ns", "job", "kept", "source_ns", "source", "target", "column")


def _names(kind: str) -> dict[str, str]:
    if kind == "short":
        return {part: f"{part}_1" for part in _PARTS}
    return {part: _multibyte_name(2_048, seed) for seed, part in enumerate(_PARTS)}


def _owned_job(n: dict[str, str]) -> dict[str, Any]:
    """A job (with its SQL: a routine) reading a dataset of a namespace of its own (a System
    named so) and writing one of the definition's CUTOFF System, a field and its column lineage
    on each, and a quality assertion on the field."""
    event = run_event(
        n["ns"], n["job"], inputs=[(n["source_ns"], n["source"])], outputs=[(LAKE, n["target"])]
    )
    event["job"]["facets"] = {"sql": {"query": "insert into t select * from s"}}
    field = {"schema": {"fields": [{"name": n["column"], "type": "string"}]}}
    event["inputs"][0]["facets"] = field
    event["inputs"][0]["inputFacets"] = {
        "dataQualityAssertions": {
            "assertions": [{"assertion": "not_null", "column": n["column"], "success": True}]
        }
    }
    lineage = {
        n["column"]: {
            "inputFields": [
                {"namespace": n["source_ns"], "name": n["source"], "field": n["column"]}
            ]
        }
    }
    event["outputs"][0]["facets"] = {**field, "columnLineage": {"fields": lineage}}
    return event


@pytest.mark.parametrize("kind", ["short", "long"])
def test_names_of_any_size_in_bytes_are_synced_and_cleaned_alike(site, tokens, instance, kind):  # noqa: F811
    """Namespace, job, dataset and field names of 2,048 characters of two and three bytes each:
    the batch syncs whole (no failed row) and the next snapshot, without that job, removes its
    flows, its job, its CUTOFF dataset and disables its check, exactly as with short names."""
    n = _names(kind)
    s = site(_definition("snap", SNAP_UUID, "OL_TEST_TOKEN_SNAP", allowedJobNamespaces=[n["ns"]]))
    kept = run_event(n["ns"], n["kept"], inputs=[(PG, "raw.a")], outputs=[(LAKE, "a")])
    kept["job"]["facets"] = {"sql": {"query": "insert into a select * from raw.a"}}
    assert s.post(tokens["snap"], [kept, _owned_job(n)])["summary"]["accepted"] == 2
    (first,) = s.sync("snap", instance)
    assert first["status"] == "synced", first["upload"]["failed"]
    assert first["upload"]["failed"] == []
    assert _counts(s.catalog_url) == {
        "cat_physical_entities": 6,
        "cat_physical_fields": 2,
        "cat_statements": 2,
        "cat_field_flows": 1,
        "cat_quality_checks": 1,
    }
    # the kept job unchanged: its rows are found by their keys and stamped, not sent again
    assert s.post(tokens["snap"], [kept])["summary"]["accepted"] == 1
    (second,) = s.sync("snap", instance)
    assert second["status"] == "synced", second
    assert second["upload"]["failed"] == []
    cleanup = second["cleanup"]
    assert cleanup["ownership"]["cutoffNamespaces"] == [n["ns"]]
    assert cleanup["removedJobs"] == [f"{n['ns']}.{n['job']}"]
    assert cleanup["removed"] == {
        "dataFlows": 1,
        "fieldFlows": 1,
        "physicalEntities": 2,  # the job and its CUTOFF dataset
        "routines": 1,
        "statements": 1,
        "physicalFields": 1,
    }
    assert not any(second["upload"]["written"].values()), second["upload"]
    assert cleanup["disabledQualityChecks"] == 1
    assert {(sys, name) for sys, name in s.datasets()} == {
        ("lake", "a"),
        (PG, "raw.a"),
        (n["source_ns"], n["source"]),
    }
