"""The event profiles ``real_path.py`` syncs, and their snapshots.

Two profiles, each a dbt project of models whose snapshots a producer posts nightly:

- ``current``: ``run_all.py``'s workload (``upload.model_event``): one COMPLETE event per model,
  ~5.9 KB, a 10-column schema on the inputs and the output, column lineage, SQL, a parent run.
- ``dbt``: shaped as dbt-ol sends a model (the ``model.jaffle_shop.orders`` events of
  ``ol_dagster_tests/corpus/expected-templates/dbt/ol-dbt-structured-logs-postgres-run__
  successful_run_ol_events.json``): a START and a COMPLETE per model with the same datasets; the
  run facets dbt-ol sets (``parent`` pointing at the dbt invocation, ``dbt_version``,
  ``processing_engine``, ``dbt_run``) and the job's ``jobType`` and ``dbt_node``; ``dataSource``
  on every dataset; the output's ``documentation`` and a description on each of its 10 to 30
  columns; the inputs' schemas; the compiled SQL as the job's ``sql`` facet and column lineage
  (what dbt-ol adds when it parses it). ≈19 KB per event. The invocation's own START and
  COMPLETE (the parent job) open and close the snapshot.

A snapshot of n events of the ``dbt`` profile holds (n - 2) // 2 models. Variants of a snapshot:
``first`` (every model), ``edited`` (a day later with new run ids, 1% of the models dropped and
1% edited: new SQL and one more input, with its column lineage; ``run_all.edit`` for the
current profile, ``_dbt_edit`` for the dbt one, each naming only columns the input has) and
``unchanged`` (the same models a day later, only the run ids and times new).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from run_all import JOB_NAMESPACE, dropped_jobs, edit, edited_jobs
from upload import SOURCES, TYPES, WAREHOUSE, model_event

PROFILES = ("current", "dbt")
VARIANTS = ("first", "edited", "unchanged")
DBT_VERSION = "1.8.2"
DBT_PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.40.0/integration/dbt"
INVOCATION_JOB = "dbt-run-analytics"
_WORDS = [
    "the",
    "customer",
    "order",
    "amount",
    "paid",
    "by",
    "card",
    "coupon",
    "bank",
    "transfer",
    "gift",
    "placed",
    "shipped",
    "completed",
    "returned",
    "pending",
    "warehouse",
    "identifier",
    "foreign",
    "key",
    "date",
    "status",
    "total",
    "derived",
    "payments",
    "first",
    "last",
    "number",
    "lifetime",
    "value",
]


def models(profile: str, n: int) -> int:
    """Models in a snapshot of ``n`` events of the profile."""
    return n if profile == "current" else max(1, (n - 2) // 2)


def generate(profile: str, n: int, day: int, variant: str, path: Path) -> tuple[int, int]:
    """Write a snapshot of the profile, ``day`` days after the first, one event a line; returns
    (events, bytes)."""
    start = datetime(2026, 11, 1, 2, 0, tzinfo=UTC) + timedelta(days=day)
    m = models(profile, n)
    skip = dropped_jobs(m) if variant == "edited" else set()
    edited = edited_jobs(m) if variant == "edited" else set()
    make = _current if profile == "current" else _dbt
    events = make(m, start, skip, edited)
    count = size = 0
    with path.open("wb") as f:
        for event in events:
            raw = orjson.dumps(event)
            f.write(raw + b"\n")
            count += 1
            size += len(raw)
    return count, size


def _current(m: int, start: datetime, skip: set[int], edited: set[int]) -> Iterator[dict[str, Any]]:
    parent = str(uuid.uuid4())
    for i in range(m):
        if i not in skip:
            event = model_event(i, start, parent)
            yield edit(event, i) if i in edited else event


# -- the dbt profile -------------------------------------------------------------------------------


def _columns(i: int) -> int:
    return 10 + (i * 7) % 21  # 10 to 30, 20 on average


def _description(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words)).capitalize() + "."


def _data_source() -> dict[str, Any]:
    return {"name": WAREHOUSE, "uri": WAREHOUSE}


def _dataset(name: str, columns: int, *, documented: bool) -> dict[str, Any]:
    rng = random.Random(name)
    fields = []
    for c in range(columns):
        field: dict[str, Any] = {"name": f"col_{c:02d}", "type": TYPES[c % len(TYPES)]}
        if documented:
            field["description"] = _description(rng, 10 + c % 12)
        fields.append(field)
    facets: dict[str, Any] = {"dataSource": _data_source(), "schema": {"fields": fields}}
    if documented:
        facets["documentation"] = {"description": _description(rng, 40)}
    return {"namespace": WAREHOUSE, "name": f"wh.{name}", "facets": facets}


def _upstream(i: int) -> list[str]:
    if i < SOURCES:
        return [f"raw.src_{i:04d}"]
    rng = random.Random(i)  # deterministic: the same project every snapshot
    up = [f"analytics.m_{rng.randrange(max(0, i - 1000), i):05d}" for _ in range(1 + i % 3)]
    return list(dict.fromkeys(up))


def _columns_of(name: str) -> int:
    return 10 if name.startswith("raw.") else _columns(int(name.rsplit("_", 1)[1]))


def _sql(out: str, upstream: list[str], columns: int) -> str:
    select = ",\n    ".join(
        f"coalesce(a.col_{c:02d}, b.col_{c:02d}, 0) as col_{c:02d}" for c in range(columns)
    )
    return (
        f"-- models/{out.split('.')[-1]}.sql\nwith a as (\n    select * from {upstream[0]}\n), "
        f"b as (\n    select * from {upstream[-1]}\n)\nselect\n    {select}\nfrom a\n"
        f"left join b on a.col_00 = b.col_00\nwhere a.col_00 is not null"
    )


def _model(i: int, parent: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], list, list]:
    """Model i's run facets, job, inputs and outputs (shared by its START and COMPLETE)."""
    upstream, columns = _upstream(i), _columns(i)
    out = f"analytics.m_{i:05d}"
    inputs = [_dataset(u, _columns_of(u), documented=True) for u in upstream]
    output = _dataset(out, columns, documented=True)
    output["facets"]["columnLineage"] = {
        "fields": {
            f"col_{c:02d}": {
                "inputFields": [
                    {
                        "namespace": WAREHOUSE,
                        "name": f"wh.{u}",
                        "field": f"col_{min(c, _columns_of(u) - 1):02d}",
                        "transformations": [
                            {
                                "type": "DIRECT",
                                "subtype": "TRANSFORMATION",
                                "description": "",
                                "masking": False,
                            }
                        ],
                    }
                    for u in upstream
                ]
            }
            for c in range(columns)
        }
    }
    run_facets = {
        "parent": parent,
        "dbt_version": {"version": DBT_VERSION},
        "processing_engine": {
            "name": "dbt",
            "version": DBT_VERSION,
            "openlineageAdapterVersion": "1.40.0",
        },
        "dbt_run": {"invocation_id": parent["run"]["runId"]},
    }
    job = {
        "namespace": JOB_NAMESPACE,
        "name": out,
        "facets": {
            "jobType": {"processingType": "BATCH", "integration": "DBT", "jobType": "MODEL"},
            "dbt_node": {
                "unique_id": f"model.{out}",
                "database": "warehouse",
                "schema": "analytics",
                "alias": out.split(".")[-1],
                "original_file_path": f"models/{out.split('.')[-1]}.sql",
            },
            "sql": {"query": _sql(out, upstream, columns), "dialect": "postgres"},
        },
    }
    return run_facets, job, inputs, [output]


def _dbt_edit(event: dict[str, Any], i: int) -> dict[str, Any]:
    """Model i edited as dbt-ol would send it (``run_all.edit``): the source it now also reads
    is described as every model describes a source (10 documented columns), and each of the
    model's columns comes from the source's column of the same position, the last one for the
    columns beyond it (as ``_model`` names an input's columns). With the current profile's
    edit, a column of every position (up to 30) named a 10-column source: those flows
    dangled, and the sync's dangling-flow check failed the edited snapshot."""

    def column_of(source: str, column: str) -> str:
        return f"col_{min(int(column.rsplit('_', 1)[1]), _columns_of(source) - 1):02d}"

    return edit(
        event,
        i,
        lambda source: _dataset(source, _columns_of(source), documented=True),
        column_of,
    )


def _event(kind: str, at: datetime, run: dict[str, Any], job: dict, inputs: list, outputs: list):  # noqa: ANN202
    return {
        "eventType": kind,
        "eventTime": at.isoformat(),
        "producer": DBT_PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": run,
        "job": job,
        "inputs": inputs,
        "outputs": outputs,
    }


def _dbt(m: int, start: datetime, skip: set[int], edited: set[int]) -> Iterator[dict[str, Any]]:
    invocation = str(uuid.uuid4())
    parent = {
        "run": {"runId": invocation},
        "job": {"namespace": JOB_NAMESPACE, "name": INVOCATION_JOB},
    }
    top_job = {
        "namespace": JOB_NAMESPACE,
        "name": INVOCATION_JOB,
        "facets": {"jobType": {"processingType": "BATCH", "integration": "DBT", "jobType": "JOB"}},
    }
    top_run = {"runId": invocation, "facets": {"dbt_version": {"version": DBT_VERSION}}}
    yield _event("START", start, top_run, top_job, [], [])
    for i in range(m):
        if i in skip:
            continue
        run_facets, job, inputs, outputs = _model(i, parent)
        run = {"runId": str(uuid.uuid4()), "facets": run_facets}
        at = start + timedelta(milliseconds=2 * i + 1)
        begin = _event("START", at, run, job, inputs, outputs)
        end = _event("COMPLETE", at + timedelta(milliseconds=1), run, job, inputs, outputs)
        if i in edited:
            # the same edit in both (``_dbt_edit`` changes the event in place: one copy each)
            begin = _dbt_edit(orjson.loads(orjson.dumps(begin)), i)
            end = _dbt_edit(orjson.loads(orjson.dumps(end)), i)
        yield begin
        yield end
    yield _event("COMPLETE", start + timedelta(milliseconds=2 * m + 1), top_run, top_job, [], [])
