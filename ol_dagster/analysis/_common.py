"""What the three analyses share: reading the window of events once, runs, identities, numbers.

The analyses are pure: they take events (raw bytes or text, parsed events, ``StoredEvent`` rows of
the event store, plain dicts) plus ``now`` and a window, and never touch a database or Dagster.
``prepare`` parses the events of the window once and combines them per run (``combine_runs``); each
analysis accepts either an event source or a ``Prepared`` so the three can share one parse.

Window: ``analysisWindowDays`` (30 by default) ending at ``now``. A run belongs to the window when
it started inside ``[now - window, now]``; events up to ``lookback`` (one day) before the window
are read too, so a run that started just inside the window still has all its events. Events after
``now`` are ignored (they belong to a later analysis).

Identity (seed: "only processes and assets identified uniquely from the namespace and name"): a job
is its (namespace, name) exactly as sent; a dataset is (normalized namespace, name) with the same
symlink rule as the normalizer (a TABLE symlink names the object, else the first symlink). A
dataset whose events point it at two different canonical identities is ambiguous: it is left out
of the results and listed in ``ambiguous``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ol_dagster.gcpause import gc_paused
from ol_dagster.lineage.naming import normalize_namespace
from ol_dagster.lineage.runs import RunView, combine_runs, facet_items
from ol_dagster.openlineage.envelope import EventRejected, parse_event_time
from ol_dagster.openlineage.models import DatasetEvent, Event, JobEvent, RunEvent, parse_event
from ol_dagster.store.event_store import StoredEvent

DEFAULT_WINDOW_DAYS = 30
DEFAULT_LOOKBACK = timedelta(days=1)
DAY_SECONDS = 86_400.0

Key = tuple[str, str]  # (namespace, name)
EventInput = bytes | str | Mapping[str, Any] | RunEvent | JobEvent | DatasetEvent | StoredEvent
EventSource = Iterable[EventInput]


def aware(dt: datetime) -> datetime:
    """A zone-less ``now`` is read as UTC, like zone-less event times."""
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


@dataclass(slots=True)
class RunInfo:
    """One run of a job (all its events combined) with what the analyses need from it."""

    view: RunView
    start: datetime  # the earliest event of the run (its START when it sent one)
    has_start: bool  # a START event arrived: ``start`` is the real start
    nominal_start: datetime | None = None  # ``nominalTime.nominalStartTime``

    @property
    def job(self) -> Key:
        return self.view.job

    @property
    def status(self) -> str | None:
        return self.view.status

    @property
    def end(self) -> datetime:
        """When the run's effects are visible: its terminal event, else its latest event."""
        return self.view.ended or self.view.last_event or self.start

    @property
    def duration_seconds(self) -> float | None:
        if not self.has_start or self.view.ended is None:
            return None
        return max((self.view.ended - self.start).total_seconds(), 0.0)


@dataclass(slots=True)
class Identities:
    """Dataset identity as the cataloguer sees it: normalized namespace, symlinks resolved."""

    alias: dict[Key, Key] = field(default_factory=dict)
    ambiguous: set[Key] = field(default_factory=set)

    def learn(self, namespace: str, name: str, facets: Mapping[str, Any]) -> None:
        symlinks = facets.get("symlinks")
        identifiers = list(getattr(symlinks, "identifiers", None) or [])
        tables = [i for i in identifiers if (i.type or "").upper() == "TABLE"] or identifiers[:1]
        if not tables:
            return
        own = (normalize_namespace(namespace), name)
        canonical = (normalize_namespace(tables[0].namespace), tables[0].name)
        if canonical == own:
            return
        known = self.alias.get(own)
        if known is not None and known != canonical:
            self.ambiguous.add(own)
        self.alias[own] = canonical

    def key(self, namespace: str, name: str) -> Key | None:
        """The dataset's identity, or None when the events disagree on what it is."""
        own = (normalize_namespace(namespace), name)
        if own in self.ambiguous:
            return None
        return self.alias.get(own, own)


@dataclass(slots=True)
class Prepared:
    """The events of one analysis window, parsed and combined once."""

    now: datetime
    window_days: float
    window_start: datetime
    runs: list[RunInfo]  # runs that started in the window, in start order
    dataset_events: list[DatasetEvent]  # DatasetEvents in the window, in time order
    identities: Identities
    events_read: int = 0
    skipped_events: list[str] = field(default_factory=list)  # could not be parsed

    @property
    def ambiguous_datasets(self) -> list[Key]:
        return sorted(self.identities.ambiguous)

    def observed_days(self, first_seen: datetime | None) -> float:
        """Days of the window an object was seen in: from its first activity in the window to
        ``now``, at least one day (rates of a brand-new object are not blown up)."""
        start = self.window_start if first_seen is None else max(first_seen, self.window_start)
        return max((self.now - start).total_seconds() / DAY_SECONDS, 1.0)


def _event_time(item: EventInput) -> datetime | None:
    if isinstance(item, StoredEvent):
        return aware(item.event_time)
    if isinstance(item, RunEvent | JobEvent | DatasetEvent):
        return aware(item.eventTime)
    return None  # known once parsed


def _parse(item: EventInput) -> Event:
    if isinstance(item, RunEvent | JobEvent | DatasetEvent):
        return item
    if isinstance(item, StoredEvent):
        return parse_event(item.raw)
    return parse_event(item)


def prepare(
    source: EventSource | Prepared,
    *,
    now: datetime,
    window_days: float = DEFAULT_WINDOW_DAYS,
    lookback: timedelta = DEFAULT_LOOKBACK,
) -> Prepared:
    """Parse the events of the window ending at ``now`` and combine them per run.

    Unparseable events are skipped and counted (the store only holds accepted events, so this only
    happens with hand-made or log-store input). A ``Prepared`` passes through unchanged when it was
    made for the same ``now`` and window.
    """
    now = aware(now)
    if isinstance(source, Prepared):
        if source.now == now and source.window_days == window_days:
            return source
        raise ValueError("a Prepared input must be made for the same now and window")
    if window_days <= 0:
        raise ValueError("the analysis window must be at least one day")
    window_start = now - timedelta(days=window_days)
    earliest = window_start - lookback
    events: list[RunEvent | JobEvent] = []
    dataset_events: list[DatasetEvent] = []
    skipped: list[str] = []
    read = 0
    with gc_paused():
        for i, item in enumerate(source):
            read += 1
            t = _event_time(item)
            if t is not None and not earliest <= t <= now:
                continue
            try:
                event = _parse(item)
            except (EventRejected, ValueError) as exc:
                skipped.append(f"event {i}: {exc}")
                continue
            t = aware(event.eventTime)
            if not earliest <= t <= now:
                continue
            if isinstance(event, DatasetEvent):
                if t >= window_start:
                    dataset_events.append(event)
            else:
                events.append(event)
        started: set[tuple[str, str, str]] = {
            (e.run.runId, e.job.namespace, e.job.name)
            for e in events
            if isinstance(e, RunEvent) and e.eventType == "START"
        }
        runs: list[RunInfo] = []
        identities = Identities()
        for view in combine_runs(events):
            if view.run_id is None:
                continue  # a JobEvent describes a job, not a run
            for d in (*view.inputs.values(), *view.outputs.values()):
                identities.learn(d.namespace, d.name, d.facets)
            # a run seen only through its terminal event is placed at that event
            first = view.started or view.last_event
            if first is None:
                continue
            start = aware(first)
            if not window_start <= start <= now:
                continue
            nominal = view.run_facets.get("nominalTime")
            runs.append(
                RunInfo(
                    view,
                    start,
                    (view.run_id, view.namespace, view.name) in started,
                    _nominal(getattr(nominal, "nominalStartTime", None)),
                )
            )
    for event in dataset_events:
        d = event.dataset
        identities.learn(d.namespace, d.name, facet_items(d.facets))
    runs.sort(key=lambda r: r.start)
    dataset_events.sort(key=lambda e: e.eventTime)
    return Prepared(now, window_days, window_start, runs, dataset_events, identities, read, skipped)


def _nominal(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return parse_event_time(value, "nominalStartTime")
    except EventRejected:
        return None


# -- numbers ---------------------------------------------------------------------------------------


def ratio(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def median(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def mean(values: Sequence[float]) -> float | None:
    return float(statistics.fmean(values)) if values else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile: the smallest value with at least ``q`` of the values at or below
    it (p95 of 20 values is the 19th smallest)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(math.ceil(q * len(ordered)), 1)
    return float(ordered[rank - 1])


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """Population standard deviation / mean; None without two values or with a zero mean."""
    if len(values) < 2:
        return None
    m = statistics.fmean(values)
    if m <= 0:
        return None
    return statistics.pstdev(values) / m


def iso(dt: datetime | None) -> str | None:
    return None if dt is None else aware(dt).isoformat().replace("+00:00", "Z")


def rounded(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)
