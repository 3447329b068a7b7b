"""Egeria's analyses (run profiles, data scopes, quality summaries) on hand-made run histories.

Every expected number is worked out by hand in the test from the history it builds, never by
running the code under test: intervals, rates, percentiles and pass rates are spelled out.
"""

from __future__ import annotations

import json
import math
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ol_dagster.analysis import (
    APPEND,
    PARTITION,
    REPLACE,
    assertion_dimension,
    classify_write,
    compute_dataset_scopes,
    compute_quality_summaries,
    compute_run_profiles,
    infer_schedule,
    prepare,
)
from ol_dagster.openlineage.models import parse_event
from ol_dagster.store import StoredEvent
from ol_dagster_tests.conftest import run_event

PG = "postgres://warehouse:5432"
HOUR = 3600.0
DAY = 86400.0


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def event(
    job: str,
    event_type: str,
    when: datetime,
    run_id: str,
    *,
    namespace: str = "etl",
    inputs: list[tuple[str, str]] = (),  # type: ignore[assignment]
    outputs: list[tuple[str, str]] = (),  # type: ignore[assignment]
    input_facets: dict[int, dict[str, Any]] | None = None,
    input_io: dict[int, dict[str, Any]] | None = None,
    output_facets: dict[int, dict[str, Any]] | None = None,
    output_io: dict[int, dict[str, Any]] | None = None,
    run_facets: dict[str, Any] | None = None,
    job_facets: dict[str, Any] | None = None,
) -> dict[str, Any]:
    data = run_event(
        namespace,
        job,
        event_type=event_type,
        run_id=run_id,
        event_time=when.isoformat().replace("+00:00", "Z"),
        inputs=inputs,
        outputs=outputs,
    )
    if run_facets:
        data["run"]["facets"] = run_facets
    if job_facets:
        data["job"]["facets"] = job_facets
    for side, facets, key in (
        ("inputs", input_facets, "facets"),
        ("inputs", input_io, "inputFacets"),
        ("outputs", output_facets, "facets"),
        ("outputs", output_io, "outputFacets"),
    ):
        for i, f in (facets or {}).items():
            data[side][i][key] = f
    return data


def run(
    job: str,
    start: datetime,
    minutes: float,
    status: str = "COMPLETE",
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """A START at ``start`` and a terminal event ``minutes`` later carrying the datasets."""
    run_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{job}@{start.isoformat()}"))
    namespace = kwargs.get("namespace", "etl")
    first = event(job, "START", start, run_id, namespace=namespace)
    last = event(job, status, start + timedelta(minutes=minutes), run_id, **kwargs)
    return [first, last]


def raw(events: list[dict[str, Any]]) -> list[bytes]:
    return [json.dumps(e).encode() for e in events]


def stats(rows: int, size: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"rowCount": rows}
    if size is not None:
        out["size"] = size
    return {"outputStatistics": out}


# -- run profiles ----------------------------------------------------------------------------------


def hourly_history() -> list[dict[str, Any]]:
    """24 hourly runs on 2026-11-01: run 5 FAILs after 2 minutes, run 12 takes 30 minutes, run 7
    starts 6 minutes late; the others take 10 minutes. Run h writes 100 + h rows."""
    events: list[dict[str, Any]] = []
    for h in range(24):
        start = at("2026-11-01T00:00") + timedelta(hours=h, minutes=6 if h == 7 else 0)
        if h == 5:
            events += run("hourly", start, 2, "FAIL", outputs=[(PG, "db.s.hourly_t")])
            continue
        minutes = 30 if h == 12 else 10
        events += run(
            "hourly",
            start,
            minutes,
            outputs=[(PG, "db.s.hourly_t")],
            output_io={0: stats(100 + h, 2048)},
        )
    return events


def test_hourly_job_with_one_failure() -> None:
    now = at("2026-11-02T00:20")
    profiles = compute_run_profiles(raw(hourly_history()), now=now)
    p = profiles.get("etl", "hourly")
    assert p is not None and len(profiles) == 1

    assert p.runs == 24
    assert p.finished_runs == 24
    assert p.failed_runs == 1
    assert p.failure_rate == pytest.approx(1 / 24)
    # seen from 2026-11-01T00:00 to now: 24 h 20 min = 1460 minutes
    assert p.observed_days == pytest.approx(1460 / 1440)
    assert p.runs_per_day == pytest.approx(24 * 1440 / 1460)

    # 23 intervals: 22 of 60 minutes... except 06:00 -> 07:06 (66) and 07:06 -> 08:00 (54)
    assert p.interval_mean_seconds == pytest.approx(HOUR)  # 23 hours over 23 intervals
    assert p.interval_median_seconds == pytest.approx(HOUR)
    assert p.interval_min_seconds == pytest.approx(54 * 60)
    assert p.interval_max_seconds == pytest.approx(66 * 60)
    # population standard deviation: two deviations of 6 minutes among 23 intervals
    assert p.interval_cv == pytest.approx(math.sqrt(2 * 360**2 / 23) / HOUR)
    assert p.regularity == "REGULAR"
    assert p.schedule == "HOURLY"
    assert p.schedule_period_seconds == HOUR
    assert p.schedule_basis == "runStart"

    # durations: 22 x 600 s, one 120 s (the failure), one 1800 s
    assert p.typical_duration_seconds == 600  # 12th and 13th of 24 sorted values are 600
    assert p.p95_duration_seconds == 600  # nearest rank ceil(0.95 * 24) = 23rd value
    assert p.worst_duration_seconds == 1800

    # 23 runs report rows 100 + h for h != 5: (23 * 100 + 276 - 5) / 23
    assert p.mean_rows_written == pytest.approx((2300 + 271) / 23)
    assert p.mean_bytes_written == 2048

    assert p.last_run_start == at("2026-11-01T23:00")
    assert p.last_status == "COMPLETE"
    assert p.next_expected_run == at("2026-11-02T00:00")
    assert p.stopped_on_schedule is False  # overdue only after 23:00 + 1.5 h = 00:30
    assert profiles.stopped() == []

    later = compute_run_profiles(raw(hourly_history()), now=at("2026-11-02T00:31"))
    assert later.stopped() == [later.get("etl", "hourly")]


def daily_history(job: str, first: str, days: int) -> list[dict[str, Any]]:
    start = at(first)
    events: list[dict[str, Any]] = []
    for d in range(days):
        events += run(job, start + timedelta(days=d), 20)
    return events


def test_daily_job_that_stopped() -> None:
    now = at("2026-10-20T12:00")
    events = daily_history("stopped", "2026-10-01T02:00", 10)  # last run 2026-10-10T02:00
    events += daily_history("alive", "2026-10-01T02:00", 20)  # last run 2026-10-20T02:00
    profiles = compute_run_profiles(raw(events), now=now)

    stopped = profiles.get("etl", "stopped")
    assert stopped is not None
    assert stopped.runs == 10
    assert stopped.failure_rate == 0
    assert stopped.interval_median_seconds == DAY
    assert stopped.interval_cv == 0
    assert stopped.schedule == "DAILY"
    assert stopped.next_expected_run == at("2026-10-11T02:00")
    # 2026-10-10T02:00 + 1.5 days = 2026-10-11T14:00, long before now
    assert stopped.stopped_on_schedule is True
    # seen from 2026-10-01T02:00 to 2026-10-20T12:00: 19 days 10 hours
    assert stopped.runs_per_day == pytest.approx(10 / (19 + 10 / 24))
    assert stopped.typical_duration_seconds == 20 * 60

    alive = profiles.get("etl", "alive")
    assert alive is not None
    assert alive.schedule == "DAILY"
    # 2026-10-20T02:00 + 36 h = 2026-10-21T14:00, after now
    assert alive.stopped_on_schedule is False
    assert profiles.stopped() == [stopped]
    assert stopped.properties()["stoppedOnSchedule"] is True


def test_nominal_time_gives_the_schedule_of_a_backfill() -> None:
    """Five daily runs backfilled one minute apart: the actual starts are a minute apart, the
    nominal times (the schedule the orchestrator meant) a day apart."""
    events: list[dict[str, Any]] = []
    for d in range(5):
        nominal = at("2026-10-01T00:00") + timedelta(days=d)
        facet = {"nominalTime": {"nominalStartTime": nominal.isoformat()}}
        run_id = str(uuid.uuid4())
        start = at("2026-10-10T09:00") + timedelta(minutes=d)
        events.append(event("backfilled", "START", start, run_id, run_facets=facet))
        events.append(event("backfilled", "COMPLETE", start + timedelta(seconds=30), run_id))
    p = compute_run_profiles(raw(events), now=at("2026-10-10T10:00")).get("etl", "backfilled")
    assert p is not None
    assert p.schedule_basis == "nominalTime"
    assert p.schedule == "DAILY"
    assert p.interval_median_seconds == 60  # the interval statistics are of the real starts
    assert p.typical_duration_seconds == 30
    # last start 09:04 + 1.5 days is tomorrow evening
    assert p.stopped_on_schedule is False


def test_irregular_and_too_few_runs() -> None:
    events: list[dict[str, Any]] = []
    for hours in (0, 1, 5, 6, 20):  # intervals 1, 4, 1, 14 hours
        events += run("adhoc", at("2026-11-01T00:00") + timedelta(hours=hours), 5)
    events += run("twice", at("2026-11-01T00:00"), 5)
    events += run("twice", at("2026-11-01T06:00"), 5)
    profiles = compute_run_profiles(raw(events), now=at("2026-11-03T00:00"))

    adhoc = profiles.get("etl", "adhoc")
    assert adhoc is not None
    assert adhoc.interval_mean_seconds == 5 * HOUR  # 20 hours / 4
    assert adhoc.interval_median_seconds == 2.5 * HOUR  # (1 + 4) / 2
    # deviations from the 5 h mean: -4, -1, -4, +9 -> variance (16 + 1 + 16 + 81) / 4 = 28.5 h^2
    assert adhoc.interval_cv == pytest.approx(math.sqrt(28.5) / 5)
    assert adhoc.regularity == "IRREGULAR"
    assert adhoc.schedule == "IRREGULAR"
    assert adhoc.next_expected_run is None
    assert adhoc.stopped_on_schedule is False

    twice = profiles.get("etl", "twice")
    assert twice is not None
    assert twice.interval_mean_seconds == 6 * HOUR
    assert twice.regularity == "UNKNOWN"  # one interval says nothing about regularity
    assert twice.schedule == "UNKNOWN"


def test_runs_seen_only_by_their_complete_event_count_without_a_duration() -> None:
    """A producer that sends COMPLETE alone: the run is placed at that event, counted in the
    intervals, and leaves the durations to the runs that have a START."""
    events: list[dict[str, Any]] = []
    for hours in (0, 2, 4):
        when = at("2026-11-01T00:00") + timedelta(hours=hours)
        events.append(event("bare", "COMPLETE", when, str(uuid.uuid4())))
    events += run("bare", at("2026-11-01T06:00"), 7)
    p = compute_run_profiles(raw(events), now=at("2026-11-01T12:00")).get("etl", "bare")
    assert p is not None
    assert p.runs == 4
    assert p.interval_mean_seconds == 2 * HOUR
    assert p.typical_duration_seconds == p.worst_duration_seconds == 7 * 60


def test_streaming_jobs_have_no_schedule() -> None:
    job_type = {"jobType": {"processingType": "STREAMING", "integration": "FLINK"}}
    events: list[dict[str, Any]] = []
    for d in range(4):
        run_id = str(uuid.uuid4())
        t = at("2026-10-01T00:00") + timedelta(days=d)
        events.append(event("stream", "START", t, run_id, job_facets=job_type))
    p = compute_run_profiles(raw(events), now=at("2026-10-20T00:00")).get("etl", "stream")
    assert p is not None
    assert p.schedule == "STREAMING"
    assert p.integration == "FLINK"
    assert p.last_status == "RUNNING"
    assert p.failure_rate is None  # no run finished
    assert p.stopped_on_schedule is False


@pytest.mark.parametrize(
    ("seconds", "label", "period"),
    [
        (3600, "HOURLY", 3600),
        (3500, "HOURLY", 3600),  # within 10 %
        (86400, "DAILY", 86400),
        (25 * 3600, "DAILY", 86400),  # a DST change
        (7 * 86400, "WEEKLY", 7 * 86400),
        (14 * 86400, "EVERY_14_DAYS", 14 * 86400),
        (2 * 86400, "EVERY_2_DAYS", 2 * 86400),
        (7200, "EVERY_2_HOURS", 7200),
        (36 * 3600, "EVERY_36_HOURS", 36 * 3600),
        (90 * 60, "EVERY_90_MINUTES", 90 * 60),
        (15 * 60 + 20, "EVERY_15_MINUTES", 15 * 60),
        (300, "EVERY_5_MINUTES", 300),
        (60, "EVERY_MINUTE", 60),
        (30, "EVERY_30_SECONDS", 30),
    ],
)
def test_schedule_from_median_interval(seconds: float, label: str, period: float) -> None:
    assert infer_schedule(seconds) == (label, period)


def test_window_bounds_runs() -> None:
    now = at("2026-11-30T00:00")  # 30-day window from 2026-10-31T00:00
    events = run("old", at("2026-10-01T00:00"), 5)  # before the window
    events += run("edge", at("2026-10-30T23:00"), 120)  # started before, ended inside
    events += run("edge", at("2026-10-31T01:00"), 10)
    events += run("future", at("2026-11-30T01:00"), 10)  # after now
    profiles = compute_run_profiles(raw(events), now=now)
    assert [p.key for p in profiles] == [("etl", "edge")]
    edge = profiles.get("etl", "edge")
    assert edge is not None and edge.runs == 1


def test_sources_bytes_parsed_stored_and_prepared_agree() -> None:
    events = hourly_history()
    now = at("2026-11-02T00:20")
    as_bytes = raw(events)
    parsed = [parse_event(b) for b in as_bytes]
    stored = [
        StoredEvent(
            b, "RunEvent", d["eventType"], e.eventTime, "p", "etl", "hourly", None, position=i
        )
        for i, (b, e, d) in enumerate(zip(as_bytes, parsed, events, strict=True))
    ]
    expected = compute_run_profiles(as_bytes, now=now).rows()
    assert compute_run_profiles(parsed, now=now).rows() == expected
    assert compute_run_profiles(stored, now=now).rows() == expected
    prepared = prepare(as_bytes, now=now)
    assert compute_run_profiles(prepared, now=now).rows() == expected

    broken = compute_run_profiles([b"{not json", *as_bytes], now=now)
    assert broken.rows() == expected
    assert len(broken.skipped_events) == 1


def test_rows_are_flat_and_json_ready() -> None:
    rows = compute_run_profiles(raw(hourly_history()), now=at("2026-11-02T00:20")).rows()
    assert rows[0]["namespace"] == "etl" and rows[0]["name"] == "hourly"
    assert rows[0]["schedule"] == "HOURLY"
    assert rows[0]["lastRunStart"] == "2026-11-01T23:00:00Z"
    json.dumps(rows)  # serializable as is


# -- dataset scopes --------------------------------------------------------------------------------


def subset(*dates: str) -> dict[str, Any]:
    return {
        "subset": {
            "outputCondition": {
                "type": "partition",
                "partitions": [{"dimensions": {"business_date": d}} for d in dates],
            }
        }
    }


def lifecycle(state: str) -> dict[str, Any]:
    return {"lifecycleStateChange": {"lifecycleStateChange": state}}


def test_partitioned_table() -> None:
    """Five daily INSERT OVERWRITE ... PARTITION (business_date) writes: PARTITION, not REPLACE."""
    events: list[dict[str, Any]] = []
    for d in range(5):
        day = f"2026-10-0{d + 1}"
        events += run(
            "load_sales",
            at(f"{day}T01:00"),
            30,
            outputs=[(PG, "db.s.sales")],
            output_facets={0: lifecycle("OVERWRITE")},
            output_io={0: {**subset(day), **stats(1000)}},
        )
    now = at("2026-10-06T01:30")
    s = compute_dataset_scopes(raw(events), now=now).get(PG, "db.s.sales")
    assert s is not None
    assert s.scope == PARTITION
    assert s.writes == 5
    assert s.writes_by_mode == {PARTITION: 5}
    assert s.partitions_written == 5
    assert s.rebuilds == 0 and s.last_rebuild is None
    # not rebuilt: the collection window goes back to the earliest write (first run's end)
    assert s.collection_start == at("2026-10-01T01:30")
    assert s.collection_end == at("2026-10-05T01:30")
    assert s.collection_basis == "EARLIEST_WRITE"
    # seen from 2026-10-01T01:30 to now: exactly 5 days
    assert s.write_rate == pytest.approx(1.0)
    assert s.rows_written == 5000


def test_appended_table() -> None:
    events: list[dict[str, Any]] = []
    for d in range(10):
        day = at("2026-10-01T00:00") + timedelta(days=d)
        events += run(
            "load_events",
            day + timedelta(hours=1),
            30,
            outputs=[(PG, "db.s.events")],
            output_io={0: stats(10)},
        )
        events += run("report", day + timedelta(hours=3), 5, inputs=[(PG, "db.s.events")])
    now = at("2026-10-11T01:30")
    scopes = compute_dataset_scopes(raw(events), now=now)
    s = scopes.get(PG, "db.s.events")
    assert s is not None
    assert s.scope == APPEND
    assert s.writes == 10 and s.reads == 10
    assert s.writers == ["etl/load_events"] and s.readers == ["etl/report"]
    assert s.collection_start == at("2026-10-01T01:30")
    assert s.collection_end == at("2026-10-10T01:30")
    # first activity 2026-10-01T01:30, now 2026-10-11T01:30: 10 days, 10 writes, 10 reads
    assert s.observed_days == pytest.approx(10)
    assert s.write_rate == pytest.approx(1.0)
    assert s.read_rate == pytest.approx(1.0)
    assert s.rows_written == 100
    assert s.rows_in_collection == 100

    # a start the catalog already knew extends the window further back
    extended = compute_dataset_scopes(
        raw(events), now=now, previous_starts={(PG, "db.s.events"): at("2026-09-01T00:00")}
    ).get(PG, "db.s.events")
    assert extended is not None
    assert extended.collection_start == at("2026-09-01T00:00")
    assert extended.collection_basis == "PREVIOUS_START"


def test_replaced_table() -> None:
    """Rebuilt daily (OVERWRITE) by one job, topped up once by another: the collection window
    restarts at the latest rebuild."""
    events: list[dict[str, Any]] = []
    for d in range(10):
        events += run(
            "rebuild_customers",
            at("2026-10-01T02:00") + timedelta(days=d),
            30,
            outputs=[(PG, "db.s.customers")],
            output_facets={0: lifecycle("OVERWRITE")},
            output_io={0: stats(1000)},
        )
    events += run(
        "top_up",
        at("2026-10-10T11:00"),
        60,
        outputs=[(PG, "db.s.customers")],
        output_io={0: stats(5)},
    )
    events += run(
        "rebuild_customers",
        at("2026-10-11T02:00"),
        10,
        "FAIL",
        outputs=[(PG, "db.s.customers")],
        output_facets={0: lifecycle("OVERWRITE")},
    )
    s = compute_dataset_scopes(raw(events), now=at("2026-10-12T00:00")).get(PG, "db.s.customers")
    assert s is not None
    assert s.scope == REPLACE  # 10 REPLACE writes against 1 APPEND
    assert s.writes == 11
    assert s.failed_writes == 1  # the failed rebuild is not a rebuild
    assert s.writes_by_mode == {REPLACE: 10, APPEND: 1}
    assert s.rebuilds == 10
    assert s.last_rebuild == at("2026-10-10T02:30")
    assert s.collection_start == at("2026-10-10T02:30")
    assert s.collection_basis == "REBUILD"
    assert s.collection_end == at("2026-10-10T12:00")
    assert s.rows_written == 10 * 1000 + 5
    assert s.rows_in_collection == 1000 + 5  # the latest rebuild and the top-up after it
    assert s.last_lifecycle_change == "OVERWRITE"
    assert s.dropped is False


def test_dataset_event_truncate_restarts_the_window() -> None:
    events = run("append", at("2026-10-01T00:00"), 10, outputs=[(PG, "db.s.log")])
    events += run("append", at("2026-10-03T00:00"), 10, outputs=[(PG, "db.s.log")])
    events.append(
        {
            "eventTime": "2026-10-02T00:00:00Z",
            "producer": "https://example.com/tests",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
            "dataset": {"namespace": PG, "name": "db.s.log", "facets": lifecycle("TRUNCATE")},
        }
    )
    s = compute_dataset_scopes(raw(events), now=at("2026-10-05T00:00")).get(PG, "db.s.log")
    assert s is not None
    assert s.scope == APPEND  # the writers append; the truncation is not a write
    assert s.writes == 2
    assert s.collection_start == at("2026-10-02T00:00")
    assert s.collection_basis == "REBUILD"
    assert s.last_lifecycle_change == "TRUNCATE"


@pytest.mark.parametrize(
    ("facets", "io_facets", "mode"),
    [
        (lifecycle("CREATE"), {}, REPLACE),
        (lifecycle("TRUNCATE"), {}, REPLACE),
        (lifecycle("DROP"), {}, REPLACE),
        (lifecycle("OVERWRITE"), {}, REPLACE),
        (lifecycle("CREATE"), subset("2026-10-01"), REPLACE),  # a whole new object
        (lifecycle("OVERWRITE"), subset("2026-10-01"), PARTITION),  # one partition replaced
        ({}, subset("2026-10-01"), PARTITION),
        (subset("2026-10-01"), {}, PARTITION),  # subset among the dataset facets
        (lifecycle("ALTER"), {}, APPEND),
        (lifecycle("RENAME"), {}, APPEND),
        ({}, stats(10), APPEND),
        ({}, {}, APPEND),
    ],
)
def test_classify_write(facets: dict[str, Any], io_facets: dict[str, Any], mode: str) -> None:
    data = event(
        "j",
        "COMPLETE",
        at("2026-10-01T00:00"),
        str(uuid.uuid4()),
        outputs=[(PG, "t")],
        output_facets={0: facets},
        output_io={0: io_facets},
    )
    parsed = prepare([data], now=at("2026-10-02T00:00")).runs[0].view.outputs[(PG, "t")]
    assert classify_write(parsed.facets, parsed.io_facets).mode == mode


def test_partition_keys_of_nested_conditions() -> None:
    condition = {
        "type": "binary",
        "operator": "AND",
        "left": {"type": "partition", "partitions": [{"identifier": "2026-10-01-PL"}]},
        "right": {"type": "location", "locations": ["s3://b/p=1"]},
    }
    mode = classify_write({}, {"subset": {"outputCondition": condition}})
    assert mode.mode == PARTITION
    assert mode.partitions == ("2026-10-01-PL", "s3://b/p=1")


def test_symlinks_identify_datasets_and_ambiguous_ones_are_left_out() -> None:
    def symlinked(*tables: str) -> dict[str, Any]:
        ids = [{"namespace": "hive://meta", "name": t, "type": "TABLE"} for t in tables]
        return {"symlinks": {"identifiers": ids}}

    events = run(
        "spark",
        at("2026-10-01T00:00"),
        5,
        outputs=[("s3://lake", "/sales")],
        output_facets={0: symlinked("db.sales")},
    )
    events += run(
        "spark",
        at("2026-10-01T01:00"),
        5,
        outputs=[("s3://lake", "/mixed")],
        output_facets={0: symlinked("db.a")},
    )
    events += run(
        "spark",
        at("2026-10-01T02:00"),
        5,
        outputs=[("s3://lake", "/mixed")],
        output_facets={0: symlinked("db.b")},
    )
    scopes = compute_dataset_scopes(raw(events), now=at("2026-10-02T00:00"))
    assert [s.key for s in scopes] == [("hive://meta", "db.sales")]
    assert scopes.ambiguous == [("s3://lake", "/mixed")]


# -- quality summaries -----------------------------------------------------------------------------


def assertions(**outcomes: bool) -> dict[str, Any]:
    return {
        "dataQualityAssertions": {
            "assertions": [{"assertion": a, "success": ok} for a, ok in outcomes.items()]
        }
    }


ORDERS_RUNS = [
    # not_null, unique, accepted_values, relationships
    (True, True, True, True),
    (True, False, True, False),
    (True, True, False, True),
]


def quality_history() -> list[dict[str, Any]]:
    """Three dbt test runs over ``orders`` (dbt sends the assertions twice: as dataset facet and
    input facet) and over the source ``raw_orders``."""
    events: list[dict[str, Any]] = []
    for i, (nn, uq, av, rel) in enumerate(ORDERS_RUNS):
        facet = assertions(
            not_null_orders_order_id=nn,
            unique_orders_order_id=uq,
            accepted_values_orders_status__placed__shipped=av,
            relationships_orders_customer_id__customer_id__ref_customers_=rel,
        )
        source = assertions(
            source_not_null_raw_orders_order_id=True,
            assert_positive_order_amounts=i != 2,
        )
        events += run(
            "dbt_test",
            at("2026-10-01T06:00") + timedelta(days=i),
            3,
            namespace="dbt",
            inputs=[(PG, "db.s.orders"), (PG, "db.raw.raw_orders")],
            input_facets={0: facet, 1: source},
            input_io={0: facet, 1: source},
        )
    return events


def test_quality_pass_rates_per_dimension() -> None:
    summaries = compute_quality_summaries(raw(quality_history()), now=at("2026-10-10T00:00"))
    orders = summaries.dataset(PG, "db.s.orders")
    assert orders is not None
    assert orders.runs == 3
    assert orders.pass_rate("COMPLETENESS") == 1.0  # 3 of 3
    assert orders.pass_rate("UNIQUENESS") == pytest.approx(2 / 3)
    assert orders.pass_rate("VALIDITY") == pytest.approx(2 / 3)
    assert orders.pass_rate("CONSISTENCY") == pytest.approx(2 / 3)
    assert orders.pass_rate("TIMELINESS") is None  # not measured
    # 12 outcomes (not 24: the dataset and input facets carry the same assertions), 9 passed
    assert (orders.overall.passed, orders.overall.total) == (9, 12)
    assert orders.overall.pass_rate == 0.75
    # latest outcome per assertion: unique failed on day 2 but passed again on day 3
    assert orders.failing == ["accepted_values_orders_status__placed__shipped"]
    assert orders.last_evaluated == at("2026-10-03T06:03")

    raw_orders = summaries.dataset(PG, "db.raw.raw_orders")
    assert raw_orders is not None
    assert raw_orders.pass_rate("COMPLETENESS") == 1.0  # source_ tests classified too
    assert raw_orders.pass_rate("OTHER") == pytest.approx(2 / 3)  # a singular dbt test
    assert raw_orders.overall.pass_rate == pytest.approx(5 / 6)

    job = summaries.job("dbt", "dbt_test")
    assert job is not None
    # both datasets: 9 + 5 passed of 12 + 6
    assert (job.overall.passed, job.overall.total) == (14, 18)
    assert job.pass_rate("COMPLETENESS") == 1.0  # 3 + 3 of 6
    assert job.pass_rate("OTHER") == pytest.approx(2 / 3)

    row = {r["name"]: r for r in summaries.rows()}["db.s.orders"]
    assert row["overallPassRate"] == 0.75
    assert row["uniquenessPassRate"] == round(2 / 3, 4)
    assert row["timelinessPassRate"] is None
    props = orders.properties()
    assert props["dimensions"]["CONSISTENCY"] == {"passRate": 0.6667, "passed": 2, "failed": 1}


def test_quality_window_and_job_tests() -> None:
    tests = {
        "test": {
            "tests": [
                {"name": "orders_not_null", "status": "pass", "type": "not_null"},
                {"name": "orders_fresh", "status": "fail", "type": "freshness"},
                {"name": "orders_slow_check", "status": "skip", "type": "custom_sql"},
                # already counted as an assertion of the run: not counted twice
                {"name": "unique_orders_order_id", "status": "pass"},
            ]
        }
    }
    events = run(
        "checks",
        at("2026-10-05T00:00"),
        1,
        run_facets=tests,
        inputs=[(PG, "db.s.orders")],
        input_io={0: assertions(unique_orders_order_id=True)},
    )
    events += run(  # outside the 30-day window ending 2026-11-01
        "checks",
        at("2026-09-01T00:00"),
        1,
        inputs=[(PG, "db.s.orders")],
        input_io={0: assertions(unique_orders_order_id=False)},
    )
    summaries = compute_quality_summaries(raw(events), now=at("2026-11-01T00:00"))
    job = summaries.job("etl", "checks")
    assert job is not None
    assert job.runs == 1
    assert job.pass_rate("UNIQUENESS") == 1.0
    assert job.pass_rate("COMPLETENESS") == 1.0
    assert job.pass_rate("TIMELINESS") == 0.0
    assert (job.overall.passed, job.overall.total) == (2, 3)
    orders = summaries.dataset(PG, "db.s.orders")
    assert orders is not None
    assert (orders.overall.passed, orders.overall.total) == (1, 1)


@pytest.mark.parametrize(
    ("name", "dimension"),
    [
        ("not_null", "COMPLETENESS"),
        ("not_null_orders_order_id", "COMPLETENESS"),
        ("source_not_null_raw_data_raw_orders_order_id", "COMPLETENESS"),
        ("no_null_values", "COMPLETENESS"),
        ("row_count_equal_to", "COMPLETENESS"),
        ("expect_column_values_to_not_be_null", "COMPLETENESS"),
        ("unique", "UNIQUENESS"),
        ("unique_stg_orders_order_id", "UNIQUENESS"),
        ("dbt_utils.unique_combination_of_columns", "UNIQUENESS"),
        ("accepted_values", "VALIDITY"),
        ("is_string", "VALIDITY"),
        ("dbt_expectations.expect_column_values_to_be_between", "VALIDITY"),
        ("relationships", "CONSISTENCY"),
        ("relationships_orders_customer_id__id__ref_customers_", "CONSISTENCY"),
        ("dbt_utils_equal_rowcount_a_b", "CONSISTENCY"),
        ("freshness", "TIMELINESS"),
        ("assert_positive_order_amounts", "OTHER"),
        ("custom_sql", "OTHER"),
        ("Not Null", "COMPLETENESS"),
    ],
)
def test_assertion_dimension(name: str, dimension: str) -> None:
    assert assertion_dimension(name) == dimension
