"""What the receiver answers to a post: one JSON shape whatever happened.

Every answer carries ``status``, ``message``, ``batchId``, ``summary`` (received, accepted,
rejected), ``failedEvents`` (why each rejected event was refused, the first
``receiver.maxFailedEventsListed`` of them), ``failedEventsNotListed`` (how many more were
rejected: a post of 100,000 empty events was answered 13 MB) and ``wholeSnapshot``; a refusal
of the whole post adds ``retriable`` (and ``Retry-After`` when a retry can succeed). So a producer
reads the same fields whether its post was stored, partly stored or refused, and can fix its
events. ``receiver.guard`` writes the same shape for the refusals it makes before the routes.
"""

from __future__ import annotations

from starlette.responses import JSONResponse

from ol_dagster.ownership import exclusive
from ol_dagster.receiver.intake import Intake
from ol_dagster.settings import SnapshotMode, SyncDefinition
from ol_dagster.snapshot_order import HTTP_HEADER


def _answer(status_code: int, status: str, message: str, **extra: object) -> JSONResponse:
    return JSONResponse({"status": status, "message": message, **extra}, status_code=status_code)


def error(
    status_code: int, message: str, *, retriable: bool = False, retry_after: int | None = None
) -> JSONResponse:
    """The whole post refused: nothing of it is stored."""
    response = _answer(
        status_code,
        "failure",
        message,
        batchId=None,
        summary={"received": 0, "accepted": 0, "rejected": 0},
        failedEvents=[],
        failedEventsNotListed=0,
        wholeSnapshot=False,
        retriable=retriable,
    )
    if retry_after is not None:
        response.headers["Retry-After"] = str(retry_after)
    return response


def summary_answer(
    intake: Intake,
    batch_id: int | None,
    note: str = "",
    *,
    whole_snapshot: bool = False,
    listed: int = 100,
) -> JSONResponse:
    """A post's events sorted (and the accepted ones stored as ``batch_id``): what was accepted,
    and why each rejected event was not (the first ``listed``; the others are counted). 400 only
    when every event was rejected."""
    received, accepted, rejected = intake.received, len(intake.accepted), len(intake.rejected)
    if not received:
        status, code = "success", 200
        message = "empty batch stored"
    elif accepted == received:
        status, code = "success", 200
        message = f"{accepted} event(s) accepted"
    elif accepted:
        status, code = "partial_success", 200
        message = f"{accepted} of {received} event(s) accepted, {rejected} rejected"
    else:
        status, code = "failure", 400
        message = f"all {received} event(s) rejected"
    more = max(0, rejected - listed)
    if more:
        message += (
            f" (failedEvents lists the first {listed} rejected events; {more} more are not listed)"
        )
    return _answer(
        code,
        status,
        message + note,
        batchId=batch_id,
        summary={"received": received, "accepted": accepted, "rejected": rejected},
        failedEvents=[r.as_dict() for r in intake.rejected[:listed]],
        failedEventsNotListed=more,
        wholeSnapshot=whole_snapshot,
    )


def snapshot_note(
    definition: SyncDefinition, intake: Intake, sequence: int | None = None
) -> tuple[bool, str]:
    """Whether a stored ``/batch`` post is a whole snapshot (as the store decides: a
    BATCH_SNAPSHOT definition, every event accepted, at least one), and the sentence that tells
    the producer what that means at the next sync (and the sequence it is ordered by, when it
    gave one)."""
    if definition.snapshotMode is not SnapshotMode.BATCH_SNAPSHOT:
        return False, ""
    if intake.rejected:
        return False, (
            f"; not a whole snapshot: {len(intake.rejected)} event(s) rejected, so definition "
            f"{definition.name} does NOT treat this post as a snapshot (nothing it does not "
            "describe is removed for it; the day-based cleanup only)"
        )
    if not intake.accepted:
        return False, "; an empty post describes nothing: NOT treated as a snapshot"
    named = {e.job_namespace for e in intake.accepted if e.job_namespace is not None}
    # a shared namespace gets the day-based cleanup only (ol_dagster.ownership)
    namespaces = sorted(ns for ns in named if exclusive(definition, ns))
    numbered = f" ({HTTP_HEADER} {sequence})" if sequence is not None else ""
    sentence = f"; stored as a whole snapshot of definition {definition.name}{numbered}: " + (
        f"jobs of namespaces [{', '.join(namespaces)}] that it does not describe will be removed "
        "at the next sync (within cleanup.maxRemovalsPerRun and cleanup.maxRemovalShare)"
        if namespaces
        else "it describes no job of a namespace it alone writes, so nothing is removed by its "
        "cutoff at the next sync"
    )
    if not definition.cleanup.enabled:
        sentence += ", but cleanup.enabled is false: nothing is removed"
    return True, sentence
