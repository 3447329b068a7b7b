"""Profile OpenLineage Runs (Egeria's Lovelace service): how each job really runs.

Per job (namespace, name), over the runs that started in the window (``_common`` for the window and
how events combine into runs):

- ``runsPerDay``: runs / observed days (from the job's first run in the window to ``now``, at least
  one day, so a job first seen yesterday is not diluted over thirty days).
- ``failureRate``: FAIL runs / finished runs (COMPLETE, FAIL or ABORT; ABORT is not a failure, a run
  still going is not counted). ``None`` with no finished run.
- Intervals between consecutive run starts (actual start times): mean, median, min, max.
- Regularity and schedule: from the intervals of the *schedule basis*: the distinct
  ``nominalTime.nominalStartTime`` of the runs when every run has one (the schedule the orchestrator
  intended, free of queueing jitter and of retries), else the run starts. With fewer than two
  intervals regularity and schedule are UNKNOWN. Otherwise the coefficient of variation
  (population standard deviation / mean) of the intervals decides: at most ``regular_cv`` (0.25)
  is REGULAR, above it IRREGULAR (schedule IRREGULAR). For a REGULAR job the median interval is
  matched to the nearest whole number of weeks (only one: WEEKLY), days (DAILY, EVERY_<n>_DAYS),
  hours (HOURLY, EVERY_<n>_HOURS), minutes (EVERY_MINUTE, EVERY_<n>_MINUTES) then seconds
  (EVERY_<n>_SECONDS), the first within 10 % of the median. STREAMING jobs (``jobType``) have no
  schedule: STREAMING.
- Durations (runs with a START and a terminal event): typical = median, worst = max, and p95
  (nearest rank).
- Mean data volume per run: rows and bytes written (``outputStatistics`` summed over a run's
  outputs), averaged over the runs that report them.
- ``stoppedOnSchedule``: the job has a schedule period P and its last run start + ``tolerance`` x P
  (1.5 x by default) is before ``now``. ``nextExpectedRun`` is last start + P.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ol_dagster.analysis._common import (
    DEFAULT_WINDOW_DAYS,
    EventSource,
    Key,
    Prepared,
    RunInfo,
    coefficient_of_variation,
    iso,
    mean,
    median,
    percentile,
    prepare,
    ratio,
    rounded,
)

REGULAR = "REGULAR"
IRREGULAR = "IRREGULAR"
UNKNOWN = "UNKNOWN"
STREAMING = "STREAMING"

DEFAULT_REGULAR_CV = 0.25
DEFAULT_OVERDUE_TOLERANCE = 1.5
SCHEDULE_MATCH = 0.10  # the median interval is within 10 % of a whole number of units
MIN_INTERVALS = 2

_WEEK, _DAY, _HOUR, _MINUTE = 7 * 86_400, 86_400, 3_600, 60


def _label(unit: int, n: int) -> str | None:
    if unit == _WEEK:
        return "WEEKLY" if n == 1 else None
    if unit == _DAY:
        return "DAILY" if n == 1 else f"EVERY_{n}_DAYS"
    if unit == _HOUR:
        return "HOURLY" if n == 1 else f"EVERY_{n}_HOURS"
    if unit == _MINUTE:
        return "EVERY_MINUTE" if n == 1 else f"EVERY_{n}_MINUTES"
    return f"EVERY_{n}_SECONDS"


def infer_schedule(median_interval_seconds: float) -> tuple[str, float | None]:
    """The schedule label and its exact period for a regular job's median interval."""
    for unit in (_WEEK, _DAY, _HOUR, _MINUTE, 1):
        n = round(median_interval_seconds / unit)
        if n < 1:
            continue
        period = float(n * unit)
        label = _label(unit, n)
        if label is not None and abs(median_interval_seconds - period) <= SCHEDULE_MATCH * period:
            return label, period
    return IRREGULAR, None


@dataclass(frozen=True, slots=True)
class RunProfile:
    namespace: str
    name: str
    runs: int
    finished_runs: int
    failed_runs: int
    aborted_runs: int
    observed_days: float
    runs_per_day: float
    failure_rate: float | None
    interval_mean_seconds: float | None
    interval_median_seconds: float | None
    interval_min_seconds: float | None
    interval_max_seconds: float | None
    interval_cv: float | None
    regularity: str  # REGULAR / IRREGULAR / UNKNOWN
    schedule: str  # HOURLY, DAILY, WEEKLY, EVERY_<n>_MINUTES..., IRREGULAR, UNKNOWN, STREAMING
    schedule_period_seconds: float | None
    schedule_basis: str  # "nominalTime" or "runStart"
    typical_duration_seconds: float | None  # median
    p95_duration_seconds: float | None
    worst_duration_seconds: float | None  # max
    mean_rows_written: float | None
    mean_bytes_written: float | None
    first_run_start: datetime
    last_run_start: datetime
    last_status: str  # COMPLETE / FAIL / ABORT, or RUNNING without a terminal event
    next_expected_run: datetime | None
    stopped_on_schedule: bool
    processing_type: str
    integration: str | None
    job_type: str | None

    @property
    def key(self) -> Key:
        return (self.namespace, self.name)

    def properties(self) -> dict[str, Any]:
        """The run profile as recorded on the job's RunMetrics (camelCase, JSON-ready)."""
        return {
            "runs": self.runs,
            "finishedRuns": self.finished_runs,
            "failedRuns": self.failed_runs,
            "abortedRuns": self.aborted_runs,
            "observedDays": rounded(self.observed_days),
            "runsPerDay": rounded(self.runs_per_day),
            "failureRate": rounded(self.failure_rate),
            "intervalMeanSeconds": rounded(self.interval_mean_seconds, 1),
            "intervalMedianSeconds": rounded(self.interval_median_seconds, 1),
            "intervalMinSeconds": rounded(self.interval_min_seconds, 1),
            "intervalMaxSeconds": rounded(self.interval_max_seconds, 1),
            "intervalCoefficientOfVariation": rounded(self.interval_cv),
            "regularity": self.regularity,
            "schedule": self.schedule,
            "schedulePeriodSeconds": self.schedule_period_seconds,
            "scheduleBasis": self.schedule_basis,
            "typicalDurationSeconds": rounded(self.typical_duration_seconds, 3),
            "p95DurationSeconds": rounded(self.p95_duration_seconds, 3),
            "worstDurationSeconds": rounded(self.worst_duration_seconds, 3),
            "meanRowsWritten": rounded(self.mean_rows_written, 2),
            "meanBytesWritten": rounded(self.mean_bytes_written, 2),
            "firstRunStart": iso(self.first_run_start),
            "lastRunStart": iso(self.last_run_start),
            "lastStatus": self.last_status,
            "nextExpectedRun": iso(self.next_expected_run),
            "stoppedOnSchedule": self.stopped_on_schedule,
            "processingType": self.processing_type,
            "integration": self.integration,
            "jobType": self.job_type,
        }


@dataclass(frozen=True, slots=True)
class RunProfiles:
    now: datetime
    window_days: float
    window_start: datetime
    profiles: list[RunProfile]  # sorted by (namespace, name)
    skipped_events: list[str]

    def __iter__(self) -> Iterator[RunProfile]:
        return iter(self.profiles)

    def __len__(self) -> int:
        return len(self.profiles)

    def get(self, namespace: str, name: str) -> RunProfile | None:
        return next((p for p in self.profiles if p.key == (namespace, name)), None)

    def stopped(self) -> list[RunProfile]:
        """Jobs that stopped running on their inferred schedule (for the asset check)."""
        return [p for p in self.profiles if p.stopped_on_schedule]

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per job: ``namespace``, ``name`` then the properties."""
        return [{"namespace": p.namespace, "name": p.name, **p.properties()} for p in self]


def _intervals(times: list[datetime]) -> list[float]:
    ordered = sorted(times)
    return [(b - a).total_seconds() for a, b in zip(ordered, ordered[1:], strict=False)]


def _volume(run: RunInfo, attr: str) -> float | None:
    total, seen = 0, False
    for d in run.view.outputs.values():
        value = getattr(d.io_facets.get("outputStatistics"), attr, None)
        if isinstance(value, int):
            total, seen = total + value, True
    return float(total) if seen else None


def _profile(
    key: Key,
    runs: list[RunInfo],
    prepared: Prepared,
    *,
    regular_cv: float,
    tolerance: float,
) -> RunProfile:
    runs = sorted(runs, key=lambda r: r.start)
    statuses = [r.status for r in runs]
    finished = sum(s in ("COMPLETE", "FAIL", "ABORT") for s in statuses)
    failed = statuses.count("FAIL")
    starts = [r.start for r in runs]
    intervals = _intervals(starts)

    nominal = [r.nominal_start for r in runs]
    if all(n is not None for n in nominal) and len({*nominal}) > 1:
        basis = "nominalTime"
        basis_intervals = _intervals([n for n in {*nominal} if n is not None])
    else:
        basis, basis_intervals = "runStart", intervals

    last = runs[-1]
    processing_type = last.view.processing_type
    cv = coefficient_of_variation(basis_intervals)
    period: float | None = None
    if processing_type.upper() == STREAMING:
        regularity, schedule = UNKNOWN, STREAMING
    elif len(basis_intervals) < MIN_INTERVALS:
        regularity, schedule = UNKNOWN, UNKNOWN
    elif cv is not None and cv <= regular_cv:
        regularity = REGULAR
        schedule, period = infer_schedule(median(basis_intervals) or 0.0)
    else:
        regularity, schedule = IRREGULAR, IRREGULAR

    next_run = stopped = None
    if period is not None:
        next_run = last.start + timedelta(seconds=period)
        stopped = last.start + timedelta(seconds=tolerance * period) < prepared.now

    durations = [d for r in runs if (d := r.duration_seconds) is not None]
    rows = [v for r in runs if (v := _volume(r, "rowCount")) is not None]
    sizes = [v for r in runs if (v := _volume(r, "size")) is not None]
    job_type = last.view.job_facets.get("jobType")
    observed = prepared.observed_days(runs[0].start)
    return RunProfile(
        namespace=key[0],
        name=key[1],
        runs=len(runs),
        finished_runs=finished,
        failed_runs=failed,
        aborted_runs=statuses.count("ABORT"),
        observed_days=observed,
        runs_per_day=len(runs) / observed,
        failure_rate=ratio(failed, finished),
        interval_mean_seconds=mean(intervals),
        interval_median_seconds=median(intervals),
        interval_min_seconds=min(intervals) if intervals else None,
        interval_max_seconds=max(intervals) if intervals else None,
        interval_cv=cv,
        regularity=regularity,
        schedule=schedule,
        schedule_period_seconds=period,
        schedule_basis=basis,
        typical_duration_seconds=median(durations),
        p95_duration_seconds=percentile(durations, 0.95),
        worst_duration_seconds=max(durations) if durations else None,
        mean_rows_written=mean(rows),
        mean_bytes_written=mean(sizes),
        first_run_start=runs[0].start,
        last_run_start=last.start,
        last_status=last.status or "RUNNING",
        next_expected_run=next_run,
        stopped_on_schedule=bool(stopped),
        processing_type=processing_type,
        integration=getattr(job_type, "integration", None),
        job_type=getattr(job_type, "jobType", None),
    )


def compute_run_profiles(
    source: EventSource | Prepared,
    *,
    now: datetime,
    window_days: float = DEFAULT_WINDOW_DAYS,
    regular_cv: float = DEFAULT_REGULAR_CV,
    overdue_tolerance: float = DEFAULT_OVERDUE_TOLERANCE,
) -> RunProfiles:
    """Profile every job that ran in the ``window_days`` ending at ``now``."""
    prepared = prepare(source, now=now, window_days=window_days)
    by_job: dict[Key, list[RunInfo]] = defaultdict(list)
    for run in prepared.runs:
        by_job[run.job].append(run)
    profiles = [
        _profile(key, runs, prepared, regular_cv=regular_cv, tolerance=overdue_tolerance)
        for key, runs in sorted(by_job.items())
    ]
    return RunProfiles(
        prepared.now,
        prepared.window_days,
        prepared.window_start,
        profiles,
        list(prepared.skipped_events),
    )
