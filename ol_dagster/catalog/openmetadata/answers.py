"""What OpenMetadata's OpenLineage batch answer says, per event, in both of its generations.

2.0 answers 200 with ``summary`` and ``failedEvents``, and drops datasets it cannot resolve
silently. 2.1 adds ``summary.partial``, ``unresolvedDatasets`` and ``unresolvedJobs`` (entries
with ``eventIndex`` and a reason code) and answers 400 when every event failed: a 400 carrying
such a body is a per-event answer, a 400 without one (bean validation, unparsable request)
refuses the whole upload (``OpenLineageResource.java``, ``OpenLineageResponses.java``).
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from ol_dagster.catalog.http import CatalogRefused
from ol_dagster.catalog.ledger.catalog import SendOutcome
from ol_dagster.lineage.graph import NodeKey
from ol_dagster.lineage.naming import normalize_namespace

log = logging.getLogger(__name__)

BATCH = "/api/v1/openlineage/lineage/batch"

# unresolved-dataset reasons that a retry cannot change: the dataset is dropped, not failed
PERMANENT_REASONS = frozenset(
    {
        "namespaceNotMapped",
        "creationDisabled",
        "missingColumns",
        "notFound",
        "unparsableName",
        "serviceNotFound",
        "missingDatabase",
        "missingSchema",
        "invalidEntity",
        "createNotAllowed",
    }
)
_STATUSES = frozenset({"success", "partial_success", "failure"})
_REASON_CHARS = 300


def trim(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 3] + "..."


def answer_of(response: httpx.Response) -> dict[str, Any] | None:
    """The OpenLineage batch answer in a response, or None when the body is something else."""
    try:
        body = response.json()
    except ValueError:
        return None
    if (
        isinstance(body, dict)
        and body.get("status") in _STATUSES
        and isinstance(body.get("summary"), dict)
    ):
        return body
    return None


def refusal(response: httpx.Response) -> CatalogRefused:
    try:
        body = response.json()
        message = body.get("message") if isinstance(body, dict) else None
    except ValueError:
        message = None
    where = f"POST {BATCH}: HTTP {response.status_code}"
    return CatalogRefused(
        f"{where}: {trim(message)}" if message else where,
        response.status_code,
        response.text[:500],
    )


def read_answer(answer: dict[str, Any], indexes: list[int], outcome: SendOutcome) -> None:
    """Fold one chunk's answer into the outcome; ``indexes[i]`` is chunk event i's index in
    the whole batch."""

    def batch_index(value: Any) -> int | None:
        return indexes[value] if isinstance(value, int) and 0 <= value < len(indexes) else None

    summary = answer["summary"]
    received = summary.get("received")
    if isinstance(received, int) and received != len(indexes):
        outcome.failed.append(
            (indexes[0], f"the server received {received} of {len(indexes)} event(s)")
        )

    # datasets it could not resolve (2.1): dropped when permanent, by event
    unresolved_by_event: dict[int, list[str]] = {}
    for entry in answer.get("unresolvedDatasets") or []:
        if not isinstance(entry, dict):
            continue
        reason = str(entry.get("reason") or "unknown")
        where = batch_index(entry.get("eventIndex"))
        key: NodeKey = (
            normalize_namespace(str(entry.get("namespace") or "")),
            str(entry.get("name") or ""),
        )
        if where is not None:
            unresolved_by_event.setdefault(where, []).append(reason)
        if reason in PERMANENT_REASONS:
            outcome.unresolved[key] = reason
        else:
            outcome.failed.append(
                (
                    where if where is not None else indexes[0],
                    trim(f"dataset {key[0]}/{key[1]} unresolved: {reason}"),
                )
            )

    listed = 0
    for entry in answer.get("failedEvents") or []:
        if not isinstance(entry, dict):
            continue
        listed += 1
        where = batch_index(entry.get("index"))
        reasons = unresolved_by_event.get(where) if where is not None else None
        if reasons and all(r in PERMANENT_REASONS for r in reasons):
            continue  # failed only for lack of datasets that can never resolve: dropped
        outcome.failed.append(
            (
                where if where is not None else indexes[0],
                trim(entry.get("reason") or "the event failed"),
            )
        )
    failed = summary.get("failed")
    if isinstance(failed, int) and failed > listed:
        outcome.failed.append(
            (indexes[0], f"{failed - listed} event(s) failed without a failedEvents entry")
        )

    jobs = answer.get("unresolvedJobs") or []
    if jobs:
        log.info("openmetadata: %d job(s) without a pipeline, edges written without", len(jobs))
    if summary.get("skipped"):
        log.info("openmetadata skipped %s event(s) (filtered type, no edge)", summary["skipped"])
