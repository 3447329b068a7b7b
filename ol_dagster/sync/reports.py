"""The shapes of what a sync records: the upload record, the cleanup report, the journal's entries.

They are stored as JSON in the event store (``ol_batch.upload_result`` and ``cleanup_report``,
``ol_cleanup_journal``), shown as Dagster metadata and printed by ``ol-dagster sync``: plain
dicts, so the stored shape is the seed's report, key for key. These ``TypedDict`` s name that
shape once, so the code that builds it (``sync.cleanup``, ``sync.batch``, ``sync.journal``) and the
code that reads it (``defs.results``, ``defs.report``, ``commands.headless``) are checked against
the same keys. What the store gives back is JSON it does not check: ``stored_upload`` and
``stored_report`` say where a stored document is taken to have this shape.
"""

# no ``from __future__ import annotations``: ``NotRequired`` must be evaluated for the
# TypedDicts' required keys to be right at run time (``__required_keys__``)
from typing import Any, NotRequired, Required, TypedDict, cast, overload

from ol_dagster.catalog.protocol import UploadResultRecord


class GraphFacts(TypedDict):
    """What the cleanup needs from a batch's graph, recorded with its upload (``sync.upload``)."""

    jobNamespaces: list[str]
    datasetSystems: list[str]
    # dataset Systems another definition claimed -> the System of this definition's own its
    # datasets were placed in instead (SYSTEM_CLAIMED)
    claimedSystems: NotRequired[dict[str, str]]
    describedJobs: list[list[str]]  # [namespace, name]
    completedJobs: list[list[str]]
    jobs: list[str]  # "<namespace>.<name>"
    drops: list[list[str]]  # [system, schema, object name, namespace, name]


class UploadedRecord(UploadResultRecord):
    """A batch's upload as the store keeps it: the catalog's result with the graph's facts (a
    record from before the facts were kept has none)."""

    graph: NotRequired[GraphFacts]
    runId: str


class SupersededRecord(TypedDict):
    """The upload of a SUPERSEDED snapshot: nothing was uploaded, a newer snapshot was synced."""

    skippedReason: str  # SUPERSEDED
    supersededBy: int
    runId: str


class AlreadySyncedRecord(TypedDict):
    """The upload of a run that found its batch synced to the catalog by another run since it
    was requested (ALREADY_SYNCED): nothing uploaded, nothing recorded."""

    skippedReason: str  # ALREADY_SYNCED
    syncedInRun: str  # the run that synced it ("" when a store from before version 11 says not)
    runId: str


UploadRecord = UploadedRecord | SupersededRecord | AlreadySyncedRecord


class CleanupWarning(TypedDict, total=False):
    """One warning of a cleanup report; which other key it has depends on its ``code``."""

    code: Required[str]
    dataset: str  # DROP_NOT_OWNED: "<namespace>:<name>"
    system: str  # SHARED_SYSTEM_DOWNGRADED, SYSTEM_CLAIMED
    placedIn: str  # SYSTEM_CLAIMED: the System of this definition's own its datasets went to
    count: int  # DANGLING_FLOW
    message: str  # REMOVAL_REFUSED, CLEANUP_NOT_CONFIRMED
    parent: str  # INVENTORY_NOT_SUPPORTED: "<namespace>.<name>" of the parent job


class CallDescription(TypedDict, total=False):
    """What one cleanup call acts on, as a report and the journal show it; the keys present
    depend on the call's target (flows, jobSystem, datasetSystem, drops, retireJobs)."""

    system: str
    schemas: list[str]
    level: str
    mode: str
    deleteBefore: str
    scopePrefixes: list[str]
    scopes: list[str]
    datasets: list[str]
    reason: str  # retireJobs: NOT_IN_INVENTORY
    reader: str  # retireJobs: the inventory reader
    parent: str  # retireJobs: "<namespace>.<name>" of the parent whose list it read
    jobs: list[str]  # retireJobs: "<namespace>.<name>" of each job retired


class CallArgs(TypedDict, total=False):
    """The JSON arguments ``sync.cleanup.invoke`` makes a call from (by target)."""

    scopePrefixes: list[str]  # recorded before flows were matched by their owner's parts
    scopes: list[str]
    namespaces: list[str]
    jobs: list[list[str]]  # [namespace, name]
    before: str
    system: str
    schemas: list[str]
    routinesBefore: str | None
    datasets: list[list[str]]  # DatasetRef fields, in order


class CallReport(CallDescription, total=False):
    """A call in a cleanup report: its rehearsed (``dryRun``) and real counts by object type."""

    target: Required[str]
    dryRun: Required[dict[str, int] | None]
    real: Required[dict[str, int] | None]
    outcomes: dict[str, dict[str, int]]  # what the catalog did not remove, and why
    keptBy: dict[str, int]  # the kept objects by the writer the catalog records
    left: dict[str, int]  # what the catalog made and was left in it on purpose, by kind
    keptObjects: list[str]  # each object kept: what it is and who else holds it


class JournalCall(CallDescription, total=False):
    """A call as the journal keeps it before it is made: enough to make it again."""

    target: Required[str]
    args: Required[CallArgs]


class JournalCounts(TypedDict):
    """A journal entry's planned counts, and what its call removed."""

    counts: dict[str, int]
    jobs: list[str]
    outcomes: NotRequired[dict[str, dict[str, int]]]
    stillThere: NotRequired[dict[str, int]]  # a reconciled entry: what the dry run still found


class ReconciledCall(CallDescription, total=False):
    """A real call of an earlier run that died before its report (``reconciled``)."""

    journalId: Required[int]
    runId: Required[str]
    batchId: Required[int | None]
    status: Required[str]  # DONE or RECONCILED
    target: Required[str]
    planned: Required[dict[str, int]]
    removed: Required[dict[str, int]]
    removedJobs: Required[list[str]]
    at: Required[str]


class ShareLimit(TypedDict, total=False):
    """``maxRemovalShare`` of a report, there only when a share is set."""

    maxRemovalShare: float


class CleanupReport(TypedDict):
    """The seed's cleanup report, as stored, shown (``report`` metadata) and printed."""

    mode: str | None
    cutoff: str | None
    skippedReason: str | None
    maxRemovalsPerRun: int
    plannedRemovals: int
    maxRemovalShare: NotRequired[float]
    calls: list[CallReport]
    removedJobs: list[str]
    warnings: list[CleanupWarning]
    # the share guard's numbers (when a share is set)
    plannedJobRemovals: NotRequired[int]
    heldJobs: NotRequired[int]
    # per kind (jobs, datasets, fields, dataFlows, fieldFlows): what the plan removes, what the
    # definition holds, and the kinds over the share
    plannedByKind: NotRequired[dict[str, int]]
    heldByKind: NotRequired[dict[str, int]]
    shareExceeded: NotRequired[list[str]]
    # who owns what: the namespaces and Systems the cutoff covered, and what it left and why
    ownership: NotRequired[dict[str, Any]]
    # after the real calls
    movedJobs: NotRequired[list[str]]
    # jobs a producer inventory retired: job, parent, reader, reason (NOT_IN_INVENTORY)
    retired: NotRequired[list[dict[str, str]]]
    removed: NotRequired[dict[str, int]]
    notFound: NotRequired[dict[str, int]]
    kept: NotRequired[dict[str, int]]
    keptBy: NotRequired[dict[str, int]]
    left: NotRequired[dict[str, int]]
    refused: NotRequired[dict[str, int]]
    disabledQualityChecks: NotRequired[int]
    # a skipped run
    supersededBy: NotRequired[int | None]
    syncedInRun: NotRequired[str]  # ALREADY_SYNCED: the run that synced the batch
    runId: NotRequired[str]  # RUN_FAILED recorded by ``fail_run``
    override: NotRequired[dict[str, Any]]  # limits a person raised, and who asked
    reconciled: NotRequired[list[ReconciledCall]]


@overload
def stored_upload(record: dict[str, Any]) -> UploadRecord: ...
@overload
def stored_upload(record: None) -> None: ...
@overload
def stored_upload(record: dict[str, Any] | None) -> UploadRecord | None: ...
def stored_upload(record: dict[str, Any] | None) -> UploadRecord | None:
    """A batch's upload record as the store gives it back (JSON the store does not check)."""
    return cast(UploadRecord | None, record)


def stored_report(report: dict[str, Any]) -> CleanupReport:
    """A batch's cleanup report as the store gives it back."""
    return cast(CleanupReport, report)
