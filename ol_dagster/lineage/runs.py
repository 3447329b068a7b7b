"""Combining the events of one run into one description (seed ``openlineage-jobtype-job-facet``).

Unless the job says otherwise, events of a run are ACCUMULATIVE: each may hold part of the picture
(Spark's RUNNING events often have empty inputs that COMPLETE restates), so inputs and outputs are
unioned and the latest facet per key wins, ``_deleted`` facets removing it. With COMPLETE_SNAPSHOT
each event is complete for its own window and "can be processed independently": every window's
datasets reach the catalog (the latest facets win) and each window's flows are its own inputs x
outputs, as they would be if each window came in a batch of its own, so what the catalog holds
never depends on how events were batched. STREAMING and
SERVICE jobs have no natural end, so a run without a terminal event is still a run. A run id reused
by another job (seen in real fixtures) never merges the two jobs: runs are keyed by run id and job.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ol_dagster.openlineage.facets import _FacetMap
from ol_dagster.openlineage.models import Dataset, JobEvent, RunEvent

TERMINAL = frozenset({"COMPLETE", "FAIL", "ABORT"})


def facet_items(facets: _FacetMap) -> dict[str, Any]:
    """A facet map as ``{facet name: facet}``, typed facets and custom ones alike (a ``_deleted``
    facet removes nothing from an empty map, so it is simply not there)."""
    out: dict[str, Any] = {}
    merge_facets(out, facets)
    return out


def merge_facets(into: dict[str, Any], facets: _FacetMap) -> None:
    """Apply ``facets`` to ``into``: each facet replaces, each ``_deleted`` facet removes (in one
    pass: a facet name is either deleted or given in one map, never both)."""
    into.update(facets.given())
    for key in facets.deleted:
        into.pop(key, None)


@dataclass(slots=True)
class DatasetView:
    namespace: str
    name: str
    facets: dict[str, Any] = field(default_factory=dict)
    io_facets: dict[str, Any] = field(default_factory=dict)  # inputFacets / outputFacets


@dataclass(slots=True)
class IoTotals:
    """Rows and bytes a run read and wrote, from the input/output statistics facets."""

    rows_read: int = 0
    bytes_read: int = 0
    rows_written: int = 0
    bytes_written: int = 0

    def add(self, inputs: Iterable[dict[str, Any]], outputs: Iterable[dict[str, Any]]) -> None:
        """Add the statistics of datasets' input and output facet maps (``{name: facet}``)."""
        for io in inputs:
            stats = io.get("inputStatistics") or io.get("dataQualityMetrics")
            self.rows_read += getattr(stats, "rowCount", None) or 0
            self.bytes_read += getattr(stats, "size", None) or getattr(stats, "bytes", None) or 0
        for io in outputs:
            stats = io.get("outputStatistics")
            self.rows_written += getattr(stats, "rowCount", None) or 0
            self.bytes_written += getattr(stats, "size", None) or 0


@dataclass(slots=True)
class RunView:
    """Everything the events of one run (or one JobEvent) say, combined."""

    namespace: str
    name: str
    run_id: str | None
    job_facets: dict[str, Any] = field(default_factory=dict)
    run_facets: dict[str, Any] = field(default_factory=dict)
    inputs: dict[tuple[str, str], DatasetView] = field(default_factory=dict)
    outputs: dict[tuple[str, str], DatasetView] = field(default_factory=dict)
    started: datetime | None = None
    ended: datetime | None = None
    last_event: datetime | None = None
    status: str | None = None  # the terminal eventType, when one arrived
    windows: int = 0  # events of a PERIODIC job, each one a window
    # a PERIODIC job's statistics summed over its windows (each event counts its own window)
    window_io: IoTotals | None = None
    # COMPLETE_SNAPSHOT: each window's own (input, output) pairs, as sent (namespace, name); a
    # window is complete for itself, so no flow joins an input of one to an output of another.
    # None: the run's events are ACCUMULATIVE parts of one picture (every input x every output).
    window_flows: set[tuple[tuple[str, str], tuple[str, str]]] | None = None

    @property
    def job(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def emission(self) -> tuple[str, str]:
        job_type = self.job_facets.get("jobType")
        pattern = getattr(job_type, "emissionPattern", None)
        if pattern is None:
            return ("EVENT_BASED", "ACCUMULATIVE")
        return (pattern.eventTrigger, pattern.eventContentMode)

    @property
    def processing_type(self) -> str:
        job_type = self.job_facets.get("jobType")
        return getattr(job_type, "processingType", None) or "BATCH"

    @property
    def describes_job(self) -> bool:
        """Whether the run, once complete, describes its job whole (what ``lineageReplacement:
        JOB`` replaces the job's lineage with): only a BATCH job whose events are EVENT_BASED
        and ACCUMULATIVE. A PERIODIC or COMPLETE_SNAPSHOT event is the state of a window, and a
        STREAMING or SERVICE job's COMPLETE "should not be relied upon" (jobType seed): it marks
        a restart, not what the job reads and writes."""
        return self.emission == ("EVENT_BASED", "ACCUMULATIVE") and self.processing_type == "BATCH"


def _add_datasets(
    target: dict[tuple[str, str], DatasetView], datasets: Sequence[Dataset], io_attr: str
) -> None:
    for d in datasets:
        view = target.get((d.namespace, d.name))
        if view is None:
            view = target[(d.namespace, d.name)] = DatasetView(d.namespace, d.name)
        merge_facets(view.facets, d.facets)
        io = getattr(d, io_attr, None)
        if io is not None:
            merge_facets(view.io_facets, io)


def _apply(view: RunView, event: RunEvent | JobEvent, job_facets: bool = True) -> None:
    if job_facets:
        merge_facets(view.job_facets, event.job.facets)
    if isinstance(event, RunEvent):
        merge_facets(view.run_facets, event.run.facets)
    _add_datasets(view.inputs, event.inputs, "inputFacets")
    _add_datasets(view.outputs, event.outputs, "outputFacets")


def combine_runs(events: list[RunEvent | JobEvent]) -> list[RunView]:
    """One view per (run id, job) and one per JobEvent, in order of first appearance."""
    views: dict[tuple[str, str, str], RunView] = {}
    ordered: list[RunView] = []
    groups: dict[tuple[str, str, str], list[RunEvent]] = {}
    for event in events:
        if isinstance(event, JobEvent):
            view = RunView(event.job.namespace, event.job.name, None)
            _apply(view, event)
            view.last_event = event.eventTime
            ordered.append(view)
            continue
        key = (event.run.runId, event.job.namespace, event.job.name)
        if key not in groups:
            groups[key] = []
            views[key] = RunView(event.job.namespace, event.job.name, event.run.runId)
            ordered.append(views[key])
        groups[key].append(event)

    for key, run_events in groups.items():
        view = views[key]
        # stable: events with the same time keep their arrival order
        run_events.sort(key=lambda e: e.eventTime)
        for event in run_events:
            merge_facets(view.job_facets, event.job.facets)  # the pattern may come with any event
        trigger, content = view.emission
        if content == "COMPLETE_SNAPSHOT":
            view.window_flows = set()
        for event in run_events:
            # the job's facets are merged already (above): merging the same events again in
            # the same order ends with the same map, and nothing in between reads it
            _apply(view, event, job_facets=False)
            if view.window_flows is not None:
                view.window_flows.update(
                    ((i.namespace, i.name), (o.namespace, o.name))
                    for i in event.inputs
                    for o in event.outputs
                )
            if trigger == "PERIODIC":
                view.windows += 1
                if view.window_io is None:
                    view.window_io = IoTotals()
                view.window_io.add(
                    (facet_items(d.inputFacets) for d in event.inputs),
                    (facet_items(d.outputFacets) for d in event.outputs),
                )
            t = event.eventTime
            # a run seen only through its terminal event has no known start (nor duration)
            if event.eventType == "START" or (
                view.started is None and event.eventType not in TERMINAL
            ):
                view.started = t if view.started is None else min(view.started, t)
            view.last_event = t if view.last_event is None else max(view.last_event, t)
            if event.eventType in TERMINAL:
                view.status = event.eventType
                view.ended = t
    return ordered
