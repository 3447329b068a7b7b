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
import hashlib
from collections.abc import Iterable
from typing import Any, NotRequired, TypedDict, cast

import orjson

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


# -- stored per job -------------------------------------------------------------------------------
#
# The store keeps a definition's state as rows (``store.lineage_state``): one per job, one per
# dataset its jobs reach, and the links between them. A sync then rewrites only the rows of what
# changed, and the code location reads rows rather than one document of every field at once.
# Column lineage belongs to the job whose field flows it comes from (``JobPart``), or, in a state
# exported whole (a ledger catalog, a capped definition), to its dataset (``DatasetPart``); either
# way it is kept only between datasets the state holds, as the whole export keeps it.

ColumnLine = list[Any]  # [dataset namespace, name, field, input: [namespace, name, field, (kind)]]


class JobPart(TypedDict):
    """A job's row: the job, its parents (kept when the state holds them) and its column
    lineage, one line per field flow."""

    job: JobState
    parents: list[list[str]]
    columnLineage: list[ColumnLine]


class DatasetPart(TypedDict):
    dataset: DatasetState
    columnLineage: list[ColumnLineageState]


def job_key(namespace: str, name: str) -> bytes:
    """A job row's key: a digest of its names (names of any length fit an index)."""
    return hashlib.sha256(orjson.dumps([namespace, name])).digest()


def dataset_key(dataset: DatasetState) -> bytes:
    """A dataset row's key: its names and System (two Systems may hold the same names)."""
    return hashlib.sha256(
        orjson.dumps([dataset["namespace"], dataset["name"], dataset["system"]])
    ).digest()


def split_state(state: LineageState) -> tuple[list[JobPart], list[DatasetPart]]:
    """A whole state as rows: each job with the parents it has in the state, each dataset with
    the column lineage into it."""
    parents: dict[tuple[str, ...], list[list[str]]] = {}
    for parent, child in state.get("parents", []):
        parents.setdefault(tuple(child), []).append(parent)
    lineage: dict[tuple[str, ...], list[ColumnLineageState]] = {}
    for cl in state.get("columnLineage", []):
        lineage.setdefault(tuple(cl["dataset"]), []).append(cl)
    jobs: list[JobPart] = [
        {
            "job": job,
            "parents": parents.get((job["namespace"], job["name"]), []),
            "columnLineage": [],
        }
        for job in state.get("jobs", [])
    ]
    datasets: list[DatasetPart] = [
        {"dataset": ds, "columnLineage": lineage.pop((ds["namespace"], ds["name"]), [])}
        for ds in state.get("datasets", [])
    ]
    return jobs, datasets


def joined_state(
    jobs: Iterable[JobPart], datasets: Iterable[DatasetPart], *, not_shown: int = 0
) -> LineageState:
    """The state of these rows, as ``new_state`` makes it from a whole export: parents between
    jobs it holds, column lineage between datasets it holds, merged per column."""
    job_parts = list(jobs)
    dataset_parts = list(datasets)
    held_jobs = {(p["job"]["namespace"], p["job"]["name"]) for p in job_parts}
    held = {(p["dataset"]["namespace"], p["dataset"]["name"]) for p in dataset_parts}
    inputs: dict[tuple[str, str, str], set[tuple[str, ...]]] = {}

    def add(ns: str, name: str, field: str, source: list[str]) -> None:
        if (ns, name) in held and (source[0], source[1]) in held:
            inputs.setdefault((ns, name, field), set()).add(tuple(source))

    for part in job_parts:
        for ns, name, field, source in part["columnLineage"]:
            add(ns, name, field, source)
    for part in dataset_parts:
        for cl in part["columnLineage"]:
            for source in cl["inputs"]:
                add(cl["dataset"][0], cl["dataset"][1], cl["field"], source)
    return new_state(
        (p["job"] for p in job_parts),
        (p["dataset"] for p in dataset_parts),
        (
            [parent, [p["job"]["namespace"], p["job"]["name"]]]
            for p in job_parts
            for parent in p["parents"]
            if (parent[0], parent[1]) in held_jobs
        ),
        (
            {"dataset": [ns, name], "field": field, "inputs": sorted(list(i) for i in found)}
            for (ns, name, field), found in inputs.items()
        ),
        not_shown=not_shown,
    )


class StateRows(TypedDict):
    """Rows of a state as the store writes them: each part's JSON by its key, and each job's
    links to the datasets it reads and writes (their keys)."""

    jobs: dict[bytes, bytes]
    datasets: dict[bytes, bytes]
    links: dict[bytes, set[bytes]]


def state_rows(jobs: Iterable[JobPart], datasets: Iterable[DatasetPart]) -> StateRows:
    """``jobs`` and ``datasets`` (every dataset the jobs read or write) as rows."""
    by_name: dict[tuple[str, str], list[bytes]] = {}
    dataset_rows: dict[bytes, bytes] = {}
    for part in datasets:
        key = dataset_key(part["dataset"])
        dataset_rows[key] = orjson.dumps(part)
        by_name.setdefault((part["dataset"]["namespace"], part["dataset"]["name"]), []).append(key)
    job_rows: dict[bytes, bytes] = {}
    links: dict[bytes, set[bytes]] = {}
    for part in jobs:
        job = part["job"]
        key = job_key(job["namespace"], job["name"])
        job_rows[key] = orjson.dumps(part)
        links[key] = {
            k for ns, name in (*job["inputs"], *job["outputs"]) for k in by_name.get((ns, name), ())
        }
    return {"jobs": job_rows, "datasets": dataset_rows, "links": links}


def part_digest(part: bytes) -> bytes:
    """What a row is compared by: a rewrite of the same part is no rewrite."""
    return hashlib.sha256(part).digest()[:16]


ROWS_VERSION = 2  # the head of a state stored as rows
# the rows of a head that says ``"signedBy": SIGNED_BY`` were brought up to every job's catalog
# signature by this version's export (raise it when a part's shape changes: a state the older
# export wrote is then patched again before a sync may keep it as it is)
SIGNED_BY = 1


def state_head(not_shown: int, batch: int | None = None) -> dict[str, int]:
    """What the store's document of a definition holds once its state is rows; ``batch``: the
    batch whose sync brought every row up to the catalog (a complete patch), if any."""
    head = {"version": ROWS_VERSION, "jobsNotShown": not_shown}
    if batch is not None:
        head |= {"signedBy": SIGNED_BY, "batch": batch}
    return head


def signed_batch(head: object) -> int | None:
    """The batch after whose sync the stored rows were brought up to the catalog whole (by this
    version's export); None when no such head is stored."""
    if not is_state_head(head) or not isinstance(head, dict):
        return None
    if head.get("signedBy") != SIGNED_BY:
        return None
    batch = head.get("batch")
    return batch if isinstance(batch, int) else None


def is_whole_state(doc: object) -> bool:
    """Whether ``doc`` is a whole state (an exporter's, or a store's before it kept rows), not
    another document (a job-runs document has a version and jobs too, not as a list)."""
    return (
        isinstance(doc, dict)
        and doc.get("version") == STATE_VERSION
        and isinstance(doc.get("jobs"), list)
        and "datasets" in doc
    )


def is_state_head(doc: object) -> bool:
    return isinstance(doc, dict) and doc.get("version") == ROWS_VERSION and "jobs" not in doc
