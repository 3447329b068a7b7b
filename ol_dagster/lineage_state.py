"""The lineage state: what a definition has synced, kept in the store for the asset graph.

Dagster loads a code location often (every process, every reload); the catalog may be remote and
large. So the external assets that show synced lineage are built from a snapshot taken after each
sync (and kept in the event store, which every Dagster process already reaches), never by querying
the catalog at load. A catalog that cannot export its state leaves the previous snapshot in place.

The state is JSON in the store; the ``TypedDict`` s below are its shape, as the catalogs export it
(``catalog.embedded.export``, ``catalog.ledger_catalog``) and as ``defs.lineage_assets`` reads it.
A state stored by an older version may lack keys: its readers keep their defaults.
"""

# no ``from __future__ import annotations``: ``NotRequired`` must be evaluated for the
# TypedDicts' required keys to be right at run time (``__required_keys__``)
from collections.abc import Iterable
from typing import Any, NotRequired, TypedDict, cast

STATE_VERSION = 1


class JobLastRun(TypedDict):
    """A job's last run, from the batch that last ran it (``defs.lineage_assets``' job-runs
    document, joined to its job at load: never part of the stored state)."""

    lastRunStatus: str
    lastRunTime: str | None  # ISO 8601, UTC
    lastRunDurationSeconds: float | None
    runs: int
    failures: int
    rowsWritten: int
    bytesWritten: int
    batchId: int


class JobState(TypedDict):
    namespace: str
    name: str
    description: str | None
    integration: str | None
    jobType: str | None
    owners: list[str]
    inputs: list[list[str]]  # [namespace, name] of the datasets it reads
    outputs: list[list[str]]  # ... and writes
    lastRun: NotRequired[JobLastRun]  # added at load (``with_job_runs``)


class FieldState(TypedDict):
    name: str
    type: str | None
    description: str | None


class DatasetState(TypedDict):
    namespace: str
    name: str
    type: str
    system: str | None  # None: a ledger entry without its System
    description: str | None
    owners: list[str]
    fields: list[FieldState]


class ColumnLineageState(TypedDict):
    """One column's upstream columns: each input is ``[namespace, name, field]``, plus its
    transformation (``DIRECT/IDENTITY``) when the catalog has it."""

    dataset: list[str]  # [namespace, name]
    field: str
    inputs: list[list[str]]


class LineageState(TypedDict):
    version: int
    jobsNotShown: NotRequired[int]  # jobs left out (``assetGraph.maxJobs``)
    jobs: list[JobState]
    datasets: list[DatasetState]
    parents: list[list[list[str]]]  # [[parent namespace, name], [child namespace, name]]
    columnLineage: list[ColumnLineageState]


def empty_state() -> LineageState:
    return {
        "version": STATE_VERSION,
        "jobs": [],
        "datasets": [],
        "parents": [],
        "columnLineage": [],
    }


def new_state(
    jobs: Iterable[JobState],
    datasets: Iterable[DatasetState],
    parents: Iterable[list[list[str]]] = (),
    column_lineage: Iterable[ColumnLineageState] = (),
    *,
    not_shown: int = 0,
) -> LineageState:
    """A state as every exporter writes it: each list sorted (jobs and datasets by namespace and
    name), ``jobsNotShown`` only when jobs were left out."""
    state: LineageState = {
        "version": STATE_VERSION,
        "jobs": sorted(jobs, key=lambda j: (j["namespace"], j["name"])),
        "datasets": sorted(datasets, key=lambda d: (d["namespace"], d["name"])),
        "parents": sorted(parents),
        "columnLineage": sorted(column_lineage, key=lambda c: (c["dataset"], c["field"])),
    }
    if not_shown:
        return {"version": STATE_VERSION, "jobsNotShown": not_shown, **state}
    return state


def stored_state(doc: dict[str, Any] | None) -> LineageState:
    """A state as the store gives it back (JSON the store does not check); none yet: empty."""
    return cast(LineageState, doc) if doc else empty_state()
