"""Our own sync runs as OpenLineage events: who changed a catalog, when, from which batch.

A definition with an ``openLineage`` block (``ol_dagster/run_lineage_settings.py``) reports each
sync run as a run of the job ``ol-dagster.<definition>.sync`` in its namespace (``ol-dagster`` by
default): START when the run starts, then COMPLETE after every step succeeded or FAIL when one
failed. The batch it read is the input dataset (``<definition>/batches/<id>`` in the same
namespace, with its event counts); each catalog it writes is an output dataset (namespace: the
catalog's URL without credentials, name: the catalog's key). The run's asset checks are the
input's ``dataQualityAssertions``, the cleanups' mode, cutoff and counts a custom run facet, a
failure's reason the ``errorMessage`` facet. The OpenLineage run id is derived from the Dagster
run id, so every event of one run, whichever process sends it, names the same run.

This module builds the events from plain values with openlineage-python's own models and sends
them with its client and transport factory; the Dagster side (``defs/run_lineage.py``) only
gathers the values. It needs the ``openlineage`` extra: import it only for a definition that
reports its runs. Sending never raises: what could not be sent is returned, its reason scrubbed
of the transport's secrets, for the caller to log and count.
"""

from __future__ import annotations

import importlib.metadata
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, TypeVar

import attr
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    BaseFacet,
    InputDatasetFacet,
    RunFacet,
    data_quality_assertions_dataset,
    error_message_run,
    input_statistics_input_dataset,
    job_type_job,
)
from openlineage.client.transport import get_default_factory
from sqlalchemy.engine import make_url

from ol_dagster.sync.run_failure import scrub


def _version() -> str:
    try:
        return importlib.metadata.version("ol-dagster")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that is not installed
        return "0"


# An absolute URI, as the schema wants; ol-dagster has no public URL to claim
# (as in catalog/openmetadata/check.py).
PRODUCER = f"urn:ol-dagster:{_version()}"
# The schema of our two custom facets, shipped in ol_dagster/openlineage/schemas/.
FACETS_SCHEMA = "urn:ol-dagster:spec:facets:1-0-0:OlDagsterFacets.json"
SYNC_FACET = "olDagster_sync"  # run facet: the Dagster run and the cleanups
BATCH_FACET = "olDagster_batch"  # input facet: the batch's counts
# uuid5 namespace of the OpenLineage run ids (any fixed UUID: it only has to never change)
_RUN_IDS = uuid.UUID("8c3b7f0e-5d0c-4a57-9a51-2f0f4c6e1d17")


@attr.define
class SyncRunFacet(RunFacet):
    """``olDagster_sync``: the Dagster run, and what each catalog's cleanup did."""

    definition: str
    dagsterRunId: str  # noqa: N815 - OpenLineage's camelCase
    batchId: int | None  # noqa: N815
    cleanups: list[dict[str, Any]] = attr.field(factory=list)
    _additional_skip_redact: ClassVar[list[str]] = ["definition", "dagsterRunId", "batchId"]

    @staticmethod
    def _get_schema() -> str:
        return f"{FACETS_SCHEMA}#/$defs/SyncRunFacet"


@attr.define
class BatchInputDatasetFacet(InputDatasetFacet):
    """``olDagster_batch``: the batch's counts, as the receiver stored them."""

    batchId: int  # noqa: N815
    kind: str
    received: int
    accepted: int
    rejected: int
    wholeSnapshot: bool  # noqa: N815

    @staticmethod
    def _get_schema() -> str:
        return f"{FACETS_SCHEMA}#/$defs/BatchInputDatasetFacet"


@dataclass(frozen=True)
class BatchFacts:
    id: int
    kind: str
    received: int
    accepted: int
    rejected: int
    whole_snapshot: bool


@dataclass(frozen=True)
class CheckOutcome:
    """One asset check of the run: ``asset`` is the asset's key without the definition."""

    asset: str
    check: str
    passed: bool
    severity: str | None = None  # ERROR / WARN


@dataclass(frozen=True)
class SyncRun:
    """What the events of one sync run say, gathered by the Dagster side."""

    definition: str
    dagster_run_id: str
    started_at: datetime
    catalogs: Sequence[tuple[str, str]]  # (key, URL) of each catalog the run writes
    batch: BatchFacts | None = None
    checks: Sequence[CheckOutcome] = ()
    cleanups: Sequence[dict[str, Any]] = ()  # per catalog: ``cleanup_summary`` of its report
    error: str | None = None  # FAIL: the failing step and its error, already scrubbed


@dataclass(frozen=True)
class Sent:
    """What a send did: the event types delivered, and those that were not, with why."""

    delivered: list[str]
    failed: list[str]
    errors: list[str]


def run_id(dagster_run_id: str) -> str:
    """The OpenLineage run id of a Dagster run: the same for every event of that run."""
    return str(uuid.uuid5(_RUN_IDS, dagster_run_id))


def job_name(definition: str) -> str:
    return f"ol-dagster.{definition}.sync"


def batch_dataset(definition: str, batch_id: int) -> str:
    return f"{definition}/batches/{batch_id}"


def catalog_namespace(url: str) -> str:
    """A catalog's URL as a dataset namespace: no user, password, query or fragment (a database
    URL may carry its password in either). Read as SQLAlchemy reads it, which is how the catalog
    connects: its password may hold '/', '?', '#' and '@', which a split on them would leave in."""
    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy reads: the plain split below
        parsed = None
    if parsed is not None:
        # an '@' left in the host: a password that held one unencoded (no server has that name)
        host = (parsed.host or "").rpartition("@")[2]
        host = f"[{host}]" if ":" in host else host  # an IPv6 address
        port = f":{parsed.port}" if parsed.port is not None else ""
        path = f"/{parsed.database}" if parsed.database is not None else ""
        return f"{parsed.drivername}://{host}{port}{path}"
    base = url.split("?", 1)[0].split("#", 1)[0]
    scheme, sep, rest = base.partition("://")
    if not sep:
        return base
    authority, slash, path = rest.partition("/")
    return f"{scheme}://{authority.rpartition('@')[2]}{slash}{path}"


def cleanup_summary(catalog: str, report: dict[str, Any]) -> dict[str, Any]:
    """The part of a cleanup report (``sync.cleanup``) the run facet carries: mode, cutoff, the
    guard that stopped it, and the counts (the full report stays in Dagster's metadata)."""
    removed = report.get("removed") or {}
    return {
        "catalog": str(report.get("catalog") or catalog),
        "mode": report.get("mode"),
        "cutoff": report.get("cutoff"),
        "skippedReason": report.get("skippedReason"),
        "plannedRemovals": int(report.get("plannedRemovals") or 0),
        "removed": {str(k): int(v) for k, v in removed.items()},
        "removedJobs": len(report.get("removedJobs") or []),
    }


_F = TypeVar("_F", bound=BaseFacet)


def _ours(facet: _F) -> _F:
    """``facet`` as produced by ol-dagster (the client's models default to its own producer;
    attrs takes ``_producer`` as ``producer=``, which type checkers do not see)."""
    facet._producer = PRODUCER
    return facet


def build_event(state: RunState, run: SyncRun, namespace: str, event_time: datetime) -> RunEvent:
    """One event of ``run``; COMPLETE and FAIL carry the checks and the cleanups."""
    final = state is not RunState.START
    input_facets: dict[str, Any] = {}
    inputs = []
    if run.batch is not None:
        b = run.batch
        input_facets[BATCH_FACET] = _ours(
            BatchInputDatasetFacet(
                batchId=b.id,
                kind=b.kind,
                received=b.received,
                accepted=b.accepted,
                rejected=b.rejected,
                wholeSnapshot=b.whole_snapshot,
            )
        )
        input_facets["inputStatistics"] = _ours(
            input_statistics_input_dataset.InputStatisticsInputDatasetFacet(rowCount=b.accepted)
        )
        if final and run.checks:
            input_facets["dataQualityAssertions"] = _assertions(run.checks)
        inputs.append(
            InputDataset(
                namespace=namespace,
                name=batch_dataset(run.definition, b.id),
                inputFacets=input_facets,
            )
        )
    run_facets: dict[str, Any] = {
        SYNC_FACET: _ours(
            SyncRunFacet(
                definition=run.definition,
                dagsterRunId=run.dagster_run_id,
                batchId=run.batch.id if run.batch else None,
                cleanups=list(run.cleanups) if final else [],
            )
        )
    }
    if state is RunState.FAIL:
        run_facets["errorMessage"] = _ours(
            error_message_run.ErrorMessageRunFacet(
                message=run.error or "the sync run failed", programmingLanguage="python"
            )
        )
    return RunEvent(
        eventType=state,
        eventTime=event_time.isoformat(),
        run=Run(runId=run_id(run.dagster_run_id), facets=run_facets),
        job=Job(
            namespace=namespace,
            name=job_name(run.definition),
            facets={
                "jobType": _ours(
                    job_type_job.JobTypeJobFacet(
                        processingType="BATCH", integration="DAGSTER", jobType="JOB"
                    )
                )
            },
        ),
        inputs=inputs,
        outputs=[
            OutputDataset(namespace=catalog_namespace(url), name=key) for key, url in run.catalogs
        ],
        producer=PRODUCER,
    )


def _assertions(checks: Iterable[CheckOutcome]) -> Any:
    return _ours(
        data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet(
            assertions=[
                data_quality_assertions_dataset.Assertion(
                    assertion=c.check,
                    success=c.passed,
                    name=f"{c.asset}.{c.check}",
                    severity=c.severity.lower() if c.severity else None,
                )
                for c in checks
            ]
        )
    )


def send(
    transport: dict[str, Any], events: Sequence[RunEvent], secrets: Iterable[str] = ()
) -> Sent:
    """Send ``events`` in order with a client on the transport the settings describe (secrets
    already resolved). Never raises: a transport that cannot be built fails every event, a
    refused or unreachable target the events it refuses."""
    secrets = list(secrets)
    delivered: list[str] = []
    failed: list[str] = []
    errors: list[str] = []

    def refused(names: Iterable[str], exc: BaseException) -> None:
        failed.extend(names)
        errors.append(scrub(f"{type(exc).__name__}: {exc}", secrets))

    try:
        # the factory pops ``name``/``priority`` off the mapping it is given: a copy
        client = OpenLineageClient(transport=get_default_factory().create(dict(transport)))
    except Exception as exc:  # noqa: BLE001 - whatever stops it, the sync goes on
        refused([e.eventType.value for e in events if e.eventType], exc)
        return Sent(delivered, failed, errors)
    try:
        for event in events:
            name = event.eventType.value if event.eventType else "OTHER"
            try:
                client.emit(event)
            except Exception as exc:  # noqa: BLE001
                refused([name], exc)
            else:
                delivered.append(name)
    finally:
        try:
            client.close(timeout=10)  # Kafka: waits for its deliveries
        except Exception as exc:  # noqa: BLE001
            errors.append(scrub(f"closing the transport: {type(exc).__name__}: {exc}", secrets))
    return Sent(delivered, failed, errors)
