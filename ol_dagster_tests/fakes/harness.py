"""Test support for the HTTP backends: events, definitions and one sync, as the assets run it.

``Syncer.sync`` does what the four assets of a batch do, without Dagster: the events go through
the receiver's intake into a real event store as one posted batch, then the functions the assets
call (``sync.batch.upload_batch`` and ``cleanup_batch``) upload and clean it. The fake server's
clock is moved a minute forward before each sync: the ``Date`` header counts whole seconds, and
real syncs are minutes apart.

Nothing here is imported by the fakes: they know the contracts, not this code.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ol_dagster.catalog.protocol import Catalog, UploadResult
from ol_dagster.lineage import LineageGraph
from ol_dagster.receiver.intake import sort_events
from ol_dagster.settings import SnapshotMode, SyncDefinition
from ol_dagster.store import EventStore
from ol_dagster.sync.batch import CleanupOverrides, cleanup_batch, upload_batch
from ol_dagster.sync.graph import batch_graph
from ol_dagster.sync.upload import UploadOutcome
from ol_dagster_tests.fakes.faults import Clock

NS = "repo"  # the repository's one job namespace
WH = "postgres://db:5432"
BUCKET = "s3://anomalies-bucket"
BUCKET_SYSTEM = "anomalies-bucket"
SNAP_UUID = "11111111-1111-4111-8111-111111111111"
OTHER_UUID = "33333333-3333-4333-8333-333333333333"
PRODUCER = "https://example.com/ol-dagster-tests"
SPEC = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
KPI = "etl.build_daily_kpi"
ANOMALIES = "features.export_anomalies"


def facet(name: str, **content: Any) -> dict[str, Any]:
    return {
        "_producer": PRODUCER,
        "_schemaURL": f"https://openlineage.io/spec/facets/1-0-0/{name}.json#/$defs/{name}",
        **content,
    }


def ds(namespace: str, name: str, columns: list[str] | None = None) -> dict[str, Any]:
    """A dataset of an event; ``columns`` becomes its schema facet."""
    out: dict[str, Any] = {"namespace": namespace, "name": name}
    if columns is not None:
        out["facets"] = {
            "schema": facet(
                "SchemaDatasetFacet", fields=[{"name": c, "type": "integer"} for c in columns]
            )
        }
    return out


def pg(table: str, columns: list[str] | None = ("id",)) -> dict[str, Any]:  # type: ignore[assignment]
    return ds(WH, f"shop.public.{table}", list(columns) if columns is not None else None)


def run(
    name: str,
    inputs: list[dict[str, Any]] = (),  # type: ignore[assignment]
    outputs: list[dict[str, Any]] = (),  # type: ignore[assignment]
    *,
    namespace: str = NS,
    event_type: str = "COMPLETE",
    sql: str | None = None,
) -> dict[str, Any]:
    """A spec-valid RunEvent (typed facets carry ``_producer`` and ``_schemaURL``)."""
    job: dict[str, Any] = {"namespace": namespace, "name": name}
    if sql:
        job["facets"] = {"sql": facet("SQLJobFacet", query=sql)}
    return {
        "eventType": event_type,
        "eventTime": "2026-11-01T02:00:00.000Z",
        "producer": PRODUCER,
        "schemaURL": f"{SPEC}#/$defs/RunEvent",
        "run": {"runId": str(uuid.uuid4())},
        "job": job,
        "inputs": list(inputs),
        "outputs": list(outputs),
    }


def job_event(
    name: str,
    inputs: list[dict[str, Any]] = (),  # type: ignore[assignment]
    outputs: list[dict[str, Any]] = (),  # type: ignore[assignment]
    *,
    namespace: str = NS,
) -> dict[str, Any]:
    return {
        "eventTime": "2026-11-01T02:00:00.000Z",
        "producer": PRODUCER,
        "schemaURL": f"{SPEC}#/$defs/JobEvent",
        "job": {"namespace": namespace, "name": name},
        "inputs": list(inputs),
        "outputs": list(outputs),
    }


def definition(**overrides: Any) -> SyncDefinition:
    """The repository's ``snap`` definition: BATCH_SNAPSHOT over job namespace ``repo``, with the
    anomalies bucket a CUTOFF dataset System it owns alone."""
    data: dict[str, Any] = {
        "name": "snap",
        "uuid": SNAP_UUID,
        "catalog": "main",
        "snapshotMode": "BATCH_SNAPSHOT",
        "allowedJobNamespaces": [NS],
        "datasetSystems": [{"namespace": BUCKET, "system": BUCKET_SYSTEM, "cleanupMode": "CUTOFF"}],
        "receiver": {"token": {"env": "OL_TEST_TOKEN_SNAP"}},
    }
    data.update(overrides)
    return SyncDefinition.model_validate(data)


@dataclass
class Synced:
    report: dict[str, Any]
    upload: UploadOutcome
    graph: LineageGraph

    @property
    def result(self) -> UploadResult:
        return self.upload.result


@dataclass
class Syncer:
    store: EventStore
    clock: Clock
    syncs: list[Synced] = field(default_factory=list)

    def sync(
        self,
        catalog: Catalog,
        d: SyncDefinition,
        events: list[dict[str, Any]],
        *,
        max_removals: int | None = None,
        between: Callable[[], None] | None = None,
    ) -> Synced:
        """One ``/lineage/batch`` post of ``events`` to ``d``, uploaded then cleaned;
        ``between`` runs after the upload and before the cleanup."""
        self.clock.advance(minutes=1)
        intake = sort_events(
            list(events), d.allowedJobNamespaces, max_name_length=d.limits.maxNameLength
        )
        assert not intake.rejected, intake.rejected
        batch_id = self.store.add_posted_batch(
            d.name,
            intake.accepted,
            received=intake.received,
            rejections=[],
            snapshot=d.snapshotMode is SnapshotMode.BATCH_SNAPSHOT,
        )
        # what the assets run: the graph built and stored by ``lineage_graph``, loaded by the
        # upload; the production code builds the cleanup's facts from the store
        batch_graph(self.store, d, self.store.get_batch(batch_id))
        run_id = str(uuid.uuid4())
        done = upload_batch(self.store, catalog, d, batch_id, run_id=run_id)
        assert done.graph is not None and done.cutoff is not None and done.result is not None
        outcome, graph = UploadOutcome(done.cutoff, done.result), done.graph
        if between is not None:
            between()
        report = cleanup_batch(
            self.store,
            catalog,
            d,
            batch_id,
            run_id=run_id,
            overrides=CleanupOverrides(maxRemovalsPerRun=max_removals),
        )
        synced = Synced(report, outcome, graph)
        self.syncs.append(synced)
        return synced


def calls(report: dict[str, Any], target: str) -> list[dict[str, Any]]:
    return [c for c in report["calls"] if c["target"] == target]
