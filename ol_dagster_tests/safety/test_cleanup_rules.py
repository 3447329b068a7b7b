"""Removal of deprecated metadata, one test per rule of Blindata's page of that name.

Each test's docstring quotes the sentence it holds the code to. Every test runs the pure core the
Dagster assets run: events sorted by the receiver's intake, stored as a batch in a real event
store, normalized, uploaded to a real ``EmbeddedCatalog`` (SQLite, and PostgreSQL when the
binaries are there) with the cutoff read from the catalog clock, then
``sync.cleanup.run_cleanup`` (or ``run_stale_cleanup``, the daily schedule). Objects are aged by
writing ``last_update`` in the catalog tables, never by waiting. Assertions are on what a user
sees: what the catalog holds afterwards, and the report's fields.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import and_, select, update

from ol_dagster.catalog.embedded import tables as t
from ol_dagster.catalog.embedded.bulk import Bulk, naive
from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.catalog.embedded.confirm import seen
from ol_dagster.catalog.protocol import CleanupCounts
from ol_dagster.lineage.graph import flow_scope, orchestration_scope
from ol_dagster.receiver.intake import sort_events
from ol_dagster.settings import SnapshotMode, SyncDefinition
from ol_dagster.store import EventStore
from ol_dagster.sync.batch import CleanupOverrides, cleanup_batch, upload_batch
from ol_dagster.sync.cleanup import run_stale_cleanup
from ol_dagster.sync.graph import batch_graph
from ol_dagster.sync.upload import UploadOutcome

WH = "postgres://db:5432"
WH_SYSTEM = WH  # a dataset System without a rule is named after its namespace (cleanupMode NONE)
BUCKET = "s3://anomalies-bucket"
BUCKET_SYSTEM = "anomalies-bucket"
SNAP_UUID = "11111111-1111-4111-8111-111111111111"
OTHER_UUID = "33333333-3333-4333-8333-333333333333"
PRODUCER = "https://example.com/ol-dagster-tests"
SPEC = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
REJECTED = {"eventTime": "not a time"}  # an event the intake rejects


# -- definitions and events ------------------------------------------------------------------------


def definition(**overrides: Any) -> SyncDefinition:
    """The ``snap`` definition: BATCH_SNAPSHOT over job namespace ``etl``; override anything."""
    data: dict[str, Any] = {
        "name": "snap",
        "uuid": SNAP_UUID,
        "catalog": "main",
        "snapshotMode": "BATCH_SNAPSHOT",
        "allowedJobNamespaces": ["etl"],
        "receiver": {"token": {"env": "OL_TEST_TOKEN_SNAP"}},
    }
    data.update(overrides)
    return SyncDefinition.model_validate(data)


def other_definition(**overrides: Any) -> SyncDefinition:
    """Another producer's definition, feeding the same catalog."""
    return definition(
        name="other", uuid=OTHER_UUID, receiver={"token": {"env": "OL_TEST_TOKEN_ADD"}}, **overrides
    )


def ds(
    namespace: str,
    name: str,
    fields: list[str] | None = None,
    *,
    lineage: dict[str, list[tuple[str, str, str]]] | None = None,
    checks: list[tuple[str, str | None]] = (),  # type: ignore[assignment]
) -> dict[str, Any]:
    """A dataset of an event: ``fields`` is its schema facet, ``lineage`` its column lineage
    (output field -> input fields), ``checks`` dataQualityAssertions (assertion, column)."""
    facets: dict[str, Any] = {}
    if fields is not None:
        facets["schema"] = {"fields": [{"name": f, "type": "integer"} for f in fields]}
    if lineage:
        facets["columnLineage"] = {
            "fields": {
                out: {"inputFields": [{"namespace": n, "name": d, "field": f} for n, d, f in ins]}
                for out, ins in lineage.items()
            }
        }
    out: dict[str, Any] = {"namespace": namespace, "name": name, "facets": facets}
    if checks:
        out["inputFacets"] = {
            "dataQualityAssertions": {
                "assertions": [{"assertion": a, "column": c, "success": True} for a, c in checks]
            }
        }
    return out


def job(
    namespace: str,
    name: str,
    inputs: list[dict[str, Any]] = (),  # type: ignore[assignment]
    outputs: list[dict[str, Any]] = (),  # type: ignore[assignment]
    *,
    sql: str | None = None,
    parent: tuple[str, str] | None = None,
    event_type: str = "COMPLETE",
    emission: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """A RunEvent of a job; ``emission`` is the jobType's (eventTrigger, eventContentMode)."""
    job_facets: dict[str, Any] = {}
    if sql:
        job_facets["sql"] = {"query": sql, "dialect": "postgres"}
    if emission:
        job_facets["jobType"] = {
            "processingType": "STREAMING",
            "integration": "FLINK",
            "jobType": "JOB",
            "emissionPattern": {"eventTrigger": emission[0], "eventContentMode": emission[1]},
        }
    run: dict[str, Any] = {"runId": str(uuid.uuid4())}
    if parent:
        run["facets"] = {
            "parent": {
                "run": {"runId": str(uuid.uuid4())},
                "job": {"namespace": parent[0], "name": parent[1]},
            }
        }
    return {
        "eventType": event_type,
        "eventTime": "2026-11-01T02:00:00.000Z",
        "producer": PRODUCER,
        "schemaURL": f"{SPEC}#/$defs/RunEvent",
        "run": run,
        "job": {"namespace": namespace, "name": name, "facets": job_facets},
        "inputs": list(inputs),
        "outputs": list(outputs),
    }


def job_event(
    namespace: str,
    name: str,
    inputs: list[dict[str, Any]] = (),  # type: ignore[assignment]
    outputs: list[dict[str, Any]] = (),  # type: ignore[assignment]
) -> dict[str, Any]:
    """A JobEvent: the job's whole description, without a run."""
    return {
        "eventTime": "2026-11-01T02:00:00.000Z",
        "producer": PRODUCER,
        "schemaURL": f"{SPEC}#/$defs/JobEvent",
        "job": {"namespace": namespace, "name": name},
        "inputs": list(inputs),
        "outputs": list(outputs),
    }


def pg(name: str, fields: list[str] | None = None, **kw: Any) -> dict[str, Any]:
    return ds(WH, f"shop.public.{name}", fields, **kw)


def simple(namespace: str, name: str, **kw: Any) -> dict[str, Any]:
    """``<namespace>.<name>`` reads ``<name>_in`` and writes ``<name>_out``: one data flow."""
    return job(namespace, name, [pg(f"{name}_in")], [pg(f"{name}_out")], **kw)


# -- the harness: what the four assets of a batch do, without Dagster -----------------------------


@dataclass
class Harness:
    catalog: EmbeddedCatalog
    store: EventStore
    uploads: list[UploadOutcome] = field(default_factory=list)

    def receive(
        self, d: SyncDefinition, events: list[dict[str, Any]], *, stream: bool = False
    ) -> int:
        """Events in as the receiver takes them: one ``/lineage/batch`` post, or single events
        (a stream batch, sealed at once); the batch id."""
        intake = sort_events(list(events), d.allowedJobNamespaces)
        rejections = [r.as_dict() for r in intake.rejected]
        if stream:
            batch_id = self.store.add_stream_events(
                d.name, intake.accepted, received=intake.received, rejections=rejections
            )
            self.store.seal_due(d.name, window_seconds=0, max_events=1, force=True)
            return batch_id
        return self.store.add_posted_batch(
            d.name,
            intake.accepted,
            received=intake.received,
            rejections=rejections,
            snapshot=d.snapshotMode is SnapshotMode.BATCH_SNAPSHOT,
        )

    def sync(
        self,
        d: SyncDefinition,
        events: list[dict[str, Any]],
        *,
        stream: bool = False,
        max_removals: int | None = None,
        max_share: float | None = None,
    ) -> dict[str, Any]:
        """Receive ``events`` (a ``/lineage/batch`` post, or single events when ``stream``), then
        upload and clean the batch; returns the cleanup report."""
        batch_id = self.receive(d, events, stream=stream)
        time.sleep(0.005)  # SQLite's clock has millisecond steps: runs never share a millisecond
        # what the assets run: the graph built and stored by ``lineage_graph``, loaded by the
        # upload; the production code builds the cleanup's facts from the store
        batch_graph(self.store, d, self.store.get_batch(batch_id))
        run_id = str(uuid.uuid4())
        done = upload_batch(self.store, self.catalog, d, batch_id, run_id=run_id)
        assert done.cutoff is not None and done.result is not None
        self.uploads.append(UploadOutcome(done.cutoff, done.result))
        return cleanup_batch(
            self.store,
            self.catalog,
            d,
            batch_id,
            run_id=run_id,
            overrides=CleanupOverrides(max_removals, max_share),
        )

    @property
    def cutoff(self) -> datetime:
        return self.uploads[-1].cutoff


@pytest.fixture
def h(catalog: EmbeddedCatalog, tmp_path: Path) -> Iterator[Harness]:
    store = EventStore(f"sqlite:///{tmp_path / 'store.db'}")
    yield Harness(catalog, store)
    store.dispose()


# -- reading the catalog ---------------------------------------------------------------------------


def _rows(catalog: EmbeddedCatalog, query: Any) -> list[tuple]:
    with catalog.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(query)]


def job_entities(catalog: EmbeddedCatalog) -> set[tuple[str, str, str]]:
    """(System, schema, name) of every job entity."""
    e = t.entities.c
    return set(
        _rows(
            catalog,
            select(t.systems.c.name, e.schema, e.name)
            .join(t.systems, t.systems.c.id == e.system_id)
            .where(e.type == t.JOB),
        )
    )


def jobs(catalog: EmbeddedCatalog) -> set[str]:
    return set(catalog.job_names())


def datasets(catalog: EmbeddedCatalog) -> set[tuple[str, str]]:
    """(System, OpenLineage name) of every dataset entity."""
    e = t.entities.c
    return set(
        _rows(
            catalog,
            select(t.systems.c.name, e.ol_name)
            .join(t.systems, t.systems.c.id == e.system_id)
            .where(e.type != t.JOB),
        )
    )


def flows(catalog: EmbeddedCatalog) -> set[tuple[str, str, str]]:
    """(scope, from, to) of every data and orchestration flow, ends by OpenLineage name."""
    f = t.data_flows.c
    a, b = t.entities.alias("a"), t.entities.alias("b")
    return set(
        _rows(
            catalog,
            select(f.scope, a.c.ol_name, b.c.ol_name)
            .join(a, a.c.id == f.from_entity)
            .join(b, b.c.id == f.to_entity),
        )
    )


def scopes(catalog: EmbeddedCatalog) -> set[str]:
    return {s for s, _, _ in flows(catalog)}


def field_flows(catalog: EmbeddedCatalog) -> set[tuple[str, str, str]]:
    """(scope, from field, to field) of every field flow."""
    f = t.field_flows.c
    a, b = t.fields.alias("a"), t.fields.alias("b")
    return set(
        _rows(
            catalog,
            select(f.scope, a.c.name, b.c.name)
            .join(a, a.c.id == f.from_field)
            .join(b, b.c.id == f.to_field),
        )
    )


def routines(catalog: EmbeddedCatalog) -> set[tuple[str, str, str]]:
    """(System, schema, name) of every routine that still has its statement."""
    r = t.routines.c
    return set(
        _rows(
            catalog,
            select(t.systems.c.name, r.schema, r.name)
            .join(t.systems, t.systems.c.id == r.system_id)
            .join(t.statements, t.statements.c.routine_id == r.id),
        )
    )


def count(catalog: EmbeddedCatalog, table: Any) -> int:
    return len(_rows(catalog, select(table.c.id)))


def quality(catalog: EmbeddedCatalog) -> dict[tuple[str, str], bool]:
    """(suite, assertion) -> enabled, for every quality check."""
    q = t.quality_checks.c
    return {
        (suite, assertion): bool(enabled)
        for suite, assertion, enabled in _rows(
            catalog,
            select(t.quality_suites.c.code, q.assertion, q.enabled).join(
                t.quality_suites, t.quality_suites.c.id == q.suite_id
            ),
        )
    }


def fields_of(catalog: EmbeddedCatalog, ol_name: str) -> set[str]:
    e = t.entities.c
    return {
        n
        for (n,) in _rows(
            catalog,
            select(t.fields.c.name)
            .join(t.entities, t.entities.c.id == t.fields.c.entity_id)
            .where(e.ol_name == ol_name),
        )
    }


def snapshot_of_catalog(catalog: EmbeddedCatalog) -> dict[str, Any]:
    """Everything a user could notice, to compare before and after a run that deletes nothing."""
    return {
        "jobs": job_entities(catalog),
        "datasets": datasets(catalog),
        "flows": flows(catalog),
        "fieldFlows": field_flows(catalog),
        "routines": routines(catalog),
        "quality": quality(catalog),
    }


def calls(report: dict[str, Any], target: str) -> list[dict[str, Any]]:
    return [c for c in report["calls"] if c["target"] == target]


def total(counts: dict[str, int] | None) -> int:
    return sum((counts or {}).values())


# -- ageing: last_update written directly, as if the days had passed ------------------------------


def _age(catalog: EmbeddedCatalog, table: Any, condition: Any, days: float) -> int:
    when = naive(catalog.clock() - timedelta(days=days))
    with catalog.engine.begin() as conn:
        return conn.execute(update(table).where(condition).values(last_update=when)).rowcount


def age_job(catalog: EmbeddedCatalog, namespace: str, name: str, days: float) -> None:
    """The job entity, its routine and statement and the flows of its two scopes, ``days`` old."""
    e, r = t.entities.c, t.routines.c
    assert _age(
        catalog,
        t.entities,
        and_(e.type == t.JOB, e.ol_namespace == namespace, e.ol_name == name),
        days,
    )
    mine = and_(r.schema == namespace, r.name == name)
    _age(catalog, t.routines, mine, days)
    _age(catalog, t.statements, t.statements.c.routine_id.in_(select(r.id).where(mine)), days)
    own = [flow_scope(namespace, name), orchestration_scope(namespace, name)]
    _age(catalog, t.data_flows, t.data_flows.c.scope.in_(own), days)
    _age(catalog, t.field_flows, t.field_flows.c.scope.in_(own), days)


def age_dataset(catalog: EmbeddedCatalog, ol_name: str, days: float) -> None:
    e = t.entities.c
    assert _age(catalog, t.entities, and_(e.type != t.JOB, e.ol_name == ol_name), days)


def age_everything(catalog: EmbeddedCatalog, days: float) -> None:
    for table in (
        t.entities,
        t.fields,
        t.routines,
        t.statements,
        t.data_flows,
        t.field_flows,
        t.quality_checks,
    ):
        _age(catalog, table, table.c.last_update.is_not(None), days)


# == Requirements ==================================================================================


def test_cleanup_user_without_systems_admin_is_refused_and_nothing_is_deleted(h: Harness):
    """Requirements: "The user of the job's BLINDATA connection, which runs the cleanup, needs
    SYSTEMS_ADMIN." Guards: "The user that runs the cleanup is refused (403,
    CLEANUP_PERMISSION_DENIED): nothing is deleted and the run ends in warning." """
    d = definition()
    h.sync(d, [simple("etl", "keep"), simple("etl", "gone")])
    h.catalog.set_permissions(h.catalog.user, [])
    before = snapshot_of_catalog(h.catalog)

    report = h.sync(d, [simple("etl", "keep")])

    assert report["skippedReason"] == "CLEANUP_PERMISSION_DENIED"
    assert report["removedJobs"] == []
    assert all(c["real"] is None for c in report["calls"])
    assert snapshot_of_catalog(h.catalog)["jobs"] == before["jobs"]
    assert snapshot_of_catalog(h.catalog)["flows"] == before["flows"]

    h.catalog.set_permissions(h.catalog.user, ["SYSTEMS_ADMIN"])
    report = h.sync(d, [simple("etl", "keep")])
    assert report["skippedReason"] is None
    assert report["removedJobs"] == ["etl.gone"]


def test_cleanup_disabled_deletes_nothing_and_enabled_is_the_default(h: Harness):
    """Requirements: "cleanup.enabled must be true (the default)." """
    assert definition().cleanup.enabled is True
    d = definition(cleanup={"enabled": False})
    h.sync(d, [simple("etl", "keep"), simple("etl", "gone")])
    before = snapshot_of_catalog(h.catalog)

    report = h.sync(d, [simple("etl", "keep")])

    assert report["skippedReason"] == "CLEANUP_DISABLED"
    assert report["calls"] == [] and report["removedJobs"] == []
    assert snapshot_of_catalog(h.catalog) == before

    age_everything(h.catalog, 400)
    stale = run_stale_cleanup(h.catalog, d)
    assert stale["skippedReason"] == "CLEANUP_DISABLED"
    assert jobs(h.catalog) == {"etl.keep", "etl.gone"}


def test_dry_run_definition_only_plans_the_calls(h: Harness):
    """Requirements: "The job must not be a dry run: a dry run only plans the calls (see
    outputOptions)." Guards: "The job is a dry run: only the planned calls are reported." """
    d = definition(outputOptions={"dryRun": True})
    h.sync(d, [simple("etl", "keep"), simple("etl", "gone", sql="select 1")])
    before = snapshot_of_catalog(h.catalog)

    report = h.sync(d, [simple("etl", "keep")])

    assert report["skippedReason"] == "DRY_RUN"
    assert report["mode"] == "CUTOFF"
    (flows_call,) = calls(report, "flows")
    (jobs_call,) = calls(report, "jobSystem")
    assert flows_call["dryRun"] == {"dataFlows": 1, "fieldFlows": 0} and flows_call["real"] is None
    assert jobs_call["dryRun"]["physicalEntities"] == 1
    assert jobs_call["dryRun"]["routines"] == 1 and jobs_call["real"] is None
    assert report["plannedRemovals"] == sum(total(c["dryRun"]) for c in report["calls"])
    assert report["removedJobs"] == []
    assert snapshot_of_catalog(h.catalog) == before


# == The idea: touched in this run =================================================================


def test_every_upload_touches_everything_it_sends_after_a_cutoff_from_the_catalog_clock(
    h: Harness, monkeypatch: pytest.MonkeyPatch
):
    """The idea: "Every object the job uploads gets its last-update time set to the time of the
    upload, whether it changed or not." (1) "At the start of the run, the agent reads the time from
    the Blindata API clock (never its own), the cutoff." (2) "The run uploads again everything its
    scopes still own [...] Unchanged objects are re-sent on purpose." """
    d = definition(datasetSystems=[{"namespace": BUCKET, "system": BUCKET_SYSTEM}])
    events = [
        job(
            "etl",
            "load",
            [pg("orders", ["id"], checks=[("not_null", "id")])],
            [ds(BUCKET, "anomalies", ["id"], lineage={"id": [(WH, "shop.public.orders", "id")]})],
            sql="select id from orders",
            parent=("etl", "dag"),
        )
    ]
    h.sync(d, events)
    # the catalog's clock is a day ahead of this process: the cutoff must still be the catalog's
    real_clock = EmbeddedCatalog.clock
    monkeypatch.setattr(EmbeddedCatalog, "clock", lambda self: real_clock(self) + timedelta(days=1))

    report = h.sync(d, events)  # the very same snapshot: nothing changed

    cutoff = h.cutoff
    assert report["cutoff"] == cutoff.isoformat()
    assert cutoff > datetime.now(UTC) + timedelta(hours=23)
    for table in (
        t.entities,
        t.fields,
        t.routines,
        t.statements,
        t.data_flows,
        t.field_flows,
        t.quality_checks,
    ):
        stamps = [r[0] for r in _rows(h.catalog, select(seen(table.c.last_update)))]
        assert stamps, table.name
        assert min(stamps) >= naive(cutoff), table.name
    assert h.uploads[-1].result.written.get("physicalEntities", 0) == 0  # touched, not rewritten
    assert report["skippedReason"] is None and report["removedJobs"] == []
    assert all(total(c["real"]) == 0 for c in report["calls"])


def test_one_dry_run_then_one_real_call_per_set_and_no_real_call_before_every_dry_run(
    h: Harness,
):
    """The calls: "A run makes one dry run, then one real call, for each set." The idea: "why one
    cleanup call per set is enough." The embedded catalog's dry run is a rehearsal: the calls made
    in order in one transaction that is rolled back, so each planned count is exact."""
    d = definition(
        allowedJobNamespaces=["etl"],
        datasetSystems=[{"namespace": BUCKET, "system": BUCKET_SYSTEM, "cleanupMode": "CUTOFF"}],
    )
    h.sync(d, [_writes("keep", "kept"), _writes("gone", "anomalies")])
    seen: list[tuple[str, bool]] = []

    def spy(name: str, fn: Callable[..., CleanupCounts]) -> Callable[..., CleanupCounts]:
        def call(*args: Any, **kwargs: Any) -> CleanupCounts:
            rehearsed = h.catalog.sessions.rehearsing is not None
            seen.append((name, kwargs["dry_run"] or rehearsed))
            return fn(*args, **kwargs)

        return call

    for name in ("cleanup_flows", "cleanup_job_system", "cleanup_dataset_system"):
        setattr(h.catalog, name, spy(name, getattr(h.catalog, name)))

    report = h.sync(d, [_writes("keep", "kept")])

    assert seen == [
        ("cleanup_flows", True),
        ("cleanup_job_system", True),
        ("cleanup_dataset_system", True),
        ("cleanup_flows", False),
        ("cleanup_job_system", False),
        ("cleanup_dataset_system", False),
    ]
    assert [c["target"] for c in report["calls"]] == ["flows", "jobSystem", "datasetSystem"]
    assert all(total(c["real"]) for c in report["calls"])  # each call really removed something


def _writes(name: str, entity: str) -> dict[str, Any]:
    """``etl.<name>`` reads a warehouse table and writes ``<entity>`` in the anomalies bucket."""
    return job("etl", name, [pg(f"{name}_in")], [ds(BUCKET, entity)])


# == What a run fully describes ====================================================================


def test_snapshot_cutoff_removes_every_job_of_every_namespace_in_the_batch_in_the_same_run(
    h: Harness,
):
    """Touched in this run: "Removes: What the run fully described and did not describe again;
    Speed: In the same run". What a run fully describes: "A /lineage/batch to a BATCH_SNAPSHOT
    definition, with every event accepted: Every job of every job namespace present in the batch."
    (3) "anything in those scopes that was last updated before the cutoff [...] is deleted." """
    d = definition(allowedJobNamespaces=["etl", "features", "ops"])
    h.sync(
        d,
        [
            simple("etl", "kept"),
            simple("etl", "gone", sql="insert into gone_out select * from gone_in"),
            simple("features", "kept"),
            simple("features", "gone"),
            simple("ops", "untouched"),  # its namespace is not in the next batch
        ],
    )

    report = h.sync(d, [simple("etl", "kept"), simple("features", "kept")])

    assert report["mode"] == "CUTOFF" and report["skippedReason"] is None
    assert report["cutoff"] == h.cutoff.isoformat()
    assert jobs(h.catalog) == {"etl.kept", "features.kept", "ops.untouched"}
    assert scopes(h.catalog) == {"ol:etl|kept", "ol:features|kept", "ol:ops|untouched"}
    assert routines(h.catalog) == set()
    assert report["removedJobs"] == ["etl.gone", "features.gone"]
    (flows_call,) = calls(report, "flows")
    assert flows_call["scopePrefixes"] == ["ol:etl|", "ol:features|"]
    assert flows_call["deleteBefore"] == h.cutoff.isoformat()
    assert flows_call["dryRun"] == flows_call["real"] == {"dataFlows": 2, "fieldFlows": 0}
    (jobs_call,) = calls(report, "jobSystem")
    assert jobs_call["system"] == "snap_jobs" and jobs_call["level"] == "schema"
    assert jobs_call["schemas"] == ["etl", "features"]
    assert jobs_call["real"]["physicalEntities"] == 2 and jobs_call["real"]["routines"] == 1
    for kind in ("physicalEntities", "routines", "statements"):
        assert jobs_call["dryRun"][kind] == jobs_call["real"][kind]


@pytest.mark.parametrize("how", ["rejected_event", "single_events"])
def test_a_batch_that_is_not_a_whole_snapshot_gets_the_day_based_cleanup(h: Harness, how: str):
    """What a run fully describes: "A snapshot is a batch stored whole: if any event of the batch
    is rejected, it is not a snapshot" (and single events are no /lineage/batch); "Anything else
    [...]: None: the day-based cleanup applies." """
    d = definition()
    h.sync(d, [simple("etl", "kept"), simple("etl", "missing"), simple("etl", "old")])
    age_job(h.catalog, "etl", "old", 31)

    batch = [simple("etl", "kept")] + ([REJECTED] if how == "rejected_event" else [])
    report = h.sync(d, batch, stream=how == "single_events")

    assert report["mode"] == "DAYS" and report["skippedReason"] is None
    # the job the batch no longer has is young: kept; only what is older than staleJobDays goes
    assert jobs(h.catalog) == {"etl.kept", "etl.missing"}
    assert report["removedJobs"] == ["etl.old"]
    stale = (h.cutoff - timedelta(days=30)).isoformat()
    assert {c["deleteBefore"] for c in report["calls"]} == {stale}


def test_additive_definition_removes_only_what_was_not_updated_for_stale_job_days(h: Harness):
    """Day-based: "For ADDITIVE definitions [...] job entities and routines of the job namespaces
    [...] not updated for cleanup.staleJobDays days"; "Flows: on the scope prefix of each job
    namespace seen, with the same number of days." Also "Since an additive run does not upload
    again what it did not receive, an object is removed only after it has not been described for
    the whole period." """
    d = definition(snapshotMode="ADDITIVE", cleanup={"staleJobDays": 10})
    h.sync(
        d,
        [
            simple("etl", "eleven_days", sql="select 11"),
            simple("etl", "nine_days", sql="select 9"),
            simple("etl", "today"),
        ],
    )
    age_job(h.catalog, "etl", "eleven_days", 11)
    age_job(h.catalog, "etl", "nine_days", 9)

    report = h.sync(d, [simple("etl", "new")])

    assert report["mode"] == "DAYS" and report["skippedReason"] is None
    assert jobs(h.catalog) == {"etl.nine_days", "etl.today", "etl.new"}
    assert scopes(h.catalog) == {"ol:etl|nine_days", "ol:etl|today", "ol:etl|new"}
    assert routines(h.catalog) == {("snap_jobs", "etl", "nine_days")}
    assert report["removedJobs"] == ["etl.eleven_days"]
    (flows_call,) = calls(report, "flows")
    assert flows_call["scopePrefixes"] == ["ol:etl|"]
    assert flows_call["deleteBefore"] == (h.cutoff - timedelta(days=10)).isoformat()
    assert flows_call["real"] == {"dataFlows": 1, "fieldFlows": 0}


REPLACEMENTS = {
    "job_event": ({}, lambda inputs, outputs: job_event("etl", "x", inputs, outputs)),
    "completed_run_with_lineage_replacement_job": (
        {"lineageReplacement": "JOB"},
        lambda i, o: job("etl", "x", i, o),
    ),
}


def _replacement_world(h: Harness, d: SyncDefinition) -> None:
    """etl.x reads a and b into c, under etl.dag; etl.x2 and etl.y have flows of their own."""
    h.sync(
        d,
        [
            job("etl", "x", [pg("a"), pg("b")], [pg("c")], parent=("etl", "dag")),
            job("etl", "x2", [pg("b")], [pg("d")]),  # its scope starts like x's: never a prefix
            job("etl", "y", [pg("a")], [pg("e")]),
        ],
    )


@pytest.mark.parametrize("kind", list(REPLACEMENTS))
def test_a_job_replaced_by_an_authoritative_description_loses_its_two_scopes_flows_call_only(
    h: Harness, kind: str
):
    """What a run fully describes: "A JobEvent, or a completed run when lineageReplacement is JOB,
    for a job: The two scopes of that job." (PERIODIC and COMPLETE_SNAPSHOT windows describe a
    window, not the job: ``test_any_other_run_replaces_nothing``). The calls: "Flows, [...] or on
    the scopes of each replaced job";
    "For a single job replaced by a JobEvent, only the flows call is made: its entity is uploaded
    again anyway." Owned: "Data flows: The scope ol:<job namespace>|<job name>"."""
    overrides, replacement = REPLACEMENTS[kind]
    d = definition(snapshotMode="ADDITIVE", **overrides)
    _replacement_world(h, d)
    assert flows(h.catalog) >= {
        ("ol:etl|x", "shop.public.b", "shop.public.c"),
        ("ol:etl|x#orchestration", "dag", "x"),
    }

    report = h.sync(d, [replacement([pg("a")], [pg("c")])])

    assert report["skippedReason"] is None
    assert flows(h.catalog) == {
        ("ol:etl|x", "shop.public.a", "shop.public.c"),
        ("ol:etl|x2", "shop.public.b", "shop.public.d"),
        ("ol:etl|y", "shop.public.a", "shop.public.e"),
    }
    assert jobs(h.catalog) == {"etl.x", "etl.x2", "etl.y", "etl.dag"}
    cutoff = h.cutoff.isoformat()
    replacing = [c for c in report["calls"] if c["deleteBefore"] == cutoff]
    assert replacing == [
        {
            "target": "flows",
            "deleteBefore": cutoff,
            "scopes": ["ol:etl|x", "ol:etl|x#orchestration"],
            "dryRun": {"dataFlows": 2, "fieldFlows": 0},
            "real": {"dataFlows": 2, "fieldFlows": 0},
        }
    ]
    assert report["removedJobs"] == []


@pytest.mark.parametrize(
    ("overrides", "event_type", "emission"),
    [
        ({}, "COMPLETE", None),
        ({"lineageReplacement": "JOB"}, "RUNNING", None),
        ({"lineageReplacement": "JOB"}, "FAIL", None),
        ({}, "RUNNING", ("PERIODIC", "ACCUMULATIVE")),
        ({}, "RUNNING", ("PERIODIC", "COMPLETE_SNAPSHOT")),
        ({}, "RUNNING", ("EVENT_BASED", "COMPLETE_SNAPSHOT")),
        ({"lineageReplacement": "JOB"}, "RUNNING", ("PERIODIC", "COMPLETE_SNAPSHOT")),
        ({"lineageReplacement": "JOB"}, "COMPLETE", ("PERIODIC", "ACCUMULATIVE")),
        ({"lineageReplacement": "JOB"}, "COMPLETE", ("EVENT_BASED", "ACCUMULATIVE")),
    ],
    ids=[
        "completed_without_lineage_replacement",
        "running_run",
        "failed_run",
        "periodic_window",
        "periodic_snapshot_window",
        "complete_snapshot_event",
        "periodic_snapshot_window_with_lineage_replacement",
        "completed_periodic_run_with_lineage_replacement",
        "completed_streaming_run_with_lineage_replacement",
    ],
)
def test_any_other_run_replaces_nothing(
    h: Harness, overrides: dict, event_type: str, emission: tuple[str, str] | None
):
    """What a run fully describes: "Anything else (everything an ADDITIVE definition receives):
    None: the day-based cleanup applies." A PERIODIC or COMPLETE_SNAPSHOT event is "complete
    state for a specific time window" (jobType seed): it describes a window, not the job, so the
    Blindata seed's table (JobEvent, completed run) decides: it replaces nothing. A STREAMING
    job's COMPLETE "should not be relied upon" (``emission`` makes the job STREAMING here): a
    restart, not the job's whole description."""
    d = definition(snapshotMode="ADDITIVE", **overrides)
    _replacement_world(h, d)
    before = flows(h.catalog)

    report = h.sync(
        d, [job("etl", "x", [pg("a")], [pg("c")], event_type=event_type, emission=emission)]
    )

    assert report["mode"] == "DAYS"
    assert flows(h.catalog) == before  # b -> c and the orchestration flow stay
    assert all("scopes" not in c for c in report["calls"])


# == What is owned and what is removed =============================================================


def test_orchestration_flows_go_in_the_same_flows_call_by_the_namespace_prefix(h: Harness):
    """What is owned: "Orchestration flows: The scope ol:<job namespace>|<job name>#orchestration:
    The same call: the scope prefix of the namespace covers both." The calls: "Data and
    orchestration flows across all Systems." """
    d = definition()
    h.sync(
        d,
        [
            simple("etl", "task1", parent=("etl", "dag")),
            simple("etl", "task2", parent=("etl", "dag")),
        ],
    )
    assert "ol:etl|task2#orchestration" in scopes(h.catalog)

    report = h.sync(d, [simple("etl", "task1", parent=("etl", "dag"))])

    assert scopes(h.catalog) == {"ol:etl|task1", "ol:etl|task1#orchestration"}
    assert jobs(h.catalog) == {"etl.dag", "etl.task1"}
    (flows_call,) = calls(report, "flows")  # one call for data and orchestration flows
    assert flows_call["scopePrefixes"] == ["ol:etl|"]
    # task2's data flow and its orchestration flow
    assert flows_call["real"] == {"dataFlows": 2, "fieldFlows": 0}


def test_a_removed_routine_goes_with_its_statements_and_their_flows(h: Harness):
    """What is owned: "Job entities and routines: The job System of the namespace, in the schema
    of the job namespace: The job Systems calls (snapshots only). A routine is deleted together
    with its statements and their flows." """
    d = definition()
    h.sync(
        d,
        [
            simple("etl", "kept", sql="select 1"),
            job(
                "etl",
                "gone",
                [pg("src", ["id"])],
                [pg("dst", ["id"], lineage={"id": [(WH, "shop.public.src", "id")]})],
                sql="insert into dst select id from src",
            ),
        ],
    )
    assert routines(h.catalog) == {("snap_jobs", "etl", "kept"), ("snap_jobs", "etl", "gone")}
    assert ("ol:etl|gone", "id", "id") in field_flows(h.catalog)

    report = h.sync(d, [simple("etl", "kept", sql="select 1")])

    assert routines(h.catalog) == {("snap_jobs", "etl", "kept")}
    assert count(h.catalog, t.statements) == 1
    assert count(h.catalog, t.routines) == 1
    assert field_flows(h.catalog) == set()
    assert scopes(h.catalog) == {"ol:etl|kept"}
    (jobs_call,) = calls(report, "jobSystem")
    assert jobs_call["real"]["routines"] == 1 and jobs_call["real"]["statements"] == 1


def test_a_routine_the_job_no_longer_has_is_left_to_the_day_based_cleanup(h: Harness):
    """The calls: "A routine that the job no longer has (the sql facet was removed) is left to the
    age-based cleanup of its job System." """
    d = definition(cleanup={"staleJobDays": 30})
    h.sync(d, [simple("etl", "x", sql="select 1")])

    report = h.sync(d, [simple("etl", "x")])  # the same job, its sql facet removed

    assert report["skippedReason"] is None and report["removedJobs"] == []
    assert routines(h.catalog) == {("snap_jobs", "etl", "x")}

    age_job(h.catalog, "etl", "x", 29)
    h.sync(d, [simple("etl", "x")])
    assert routines(h.catalog) == {("snap_jobs", "etl", "x")}

    stale = run_stale_cleanup(h.catalog, d)
    assert stale["skippedReason"] is None
    assert routines(h.catalog) == {("snap_jobs", "etl", "x")}  # 29 days: not yet

    _age(h.catalog, t.routines, t.routines.c.name == "x", 31)
    stale = run_stale_cleanup(h.catalog, d)
    assert routines(h.catalog) == set()
    assert count(h.catalog, t.statements) == 0
    assert jobs(h.catalog) == {"etl.x"}  # the job itself was described yesterday: kept


def test_quality_checks_of_removed_jobs_are_disabled_never_deleted(h: Harness):
    """What is owned: "Quality checks: The job's suite: Disabled by the agent, never deleted.
    History is kept." """
    d = definition()
    h.sync(
        d,
        [
            job("etl", "kept", [pg("a", checks=[("row_count", None)])], [pg("b")]),
            job(
                "etl",
                "gone",
                [pg("b", checks=[("not_null", "id"), ("unique", "id")])],
                [pg("c")],
            ),
        ],
    )
    assert set(quality(h.catalog).values()) == {True}

    report = h.sync(d, [job("etl", "kept", [pg("a", checks=[("row_count", None)])], [pg("b")])])

    assert report["removedJobs"] == ["etl.gone"]
    assert quality(h.catalog) == {
        ("etl.kept", "row_count"): True,
        ("etl.gone", "not_null"): False,
        ("etl.gone", "unique"): False,
    }
    assert report["disabledQualityChecks"] == 2


def test_objects_of_crawler_and_other_definition_systems_are_never_touched(h: Harness):
    """What is owned: "The job never acts on objects owned by crawlers or by other jobs." Ownership:
    "NONE: The default. Mapped and crawled Systems are never cleaned by this job." """
    crawled = "warehouse"
    long_ago = naive(h.catalog.clock() - timedelta(days=900))
    with h.catalog.engine.begin() as conn:  # a crawler's System and table, before any producer
        sid = conn.execute(
            t.systems.insert().values(name=crawled, properties={})
        ).inserted_primary_key[0]
        conn.execute(
            t.entities.insert().values(
                system_id=sid,
                schema="shop.public",
                name="crawled_only",
                type="table",
                ol_namespace=WH,
                ol_name="shop.public.crawled_only",
                properties={},
                last_update=long_ago,
            )
        )
    other = other_definition(
        datasetSystems=[{"namespace": BUCKET, "system": BUCKET_SYSTEM, "cleanupMode": "CUTOFF"}],
        allowedJobNamespaces=["features"],
    )
    h.sync(other, [job("features", "export", [pg("kpi")], [ds(BUCKET, "other_export")])])
    # this definition maps the crawled warehouse and the other definition's bucket with cleanup
    d = definition(
        datasetSystems=[
            {"namespace": WH, "system": crawled, "cleanupMode": "DAYS", "cleanupDays": 1},
            {"namespace": BUCKET, "system": BUCKET_SYSTEM, "cleanupMode": "CUTOFF"},
        ]
    )
    h.sync(d, [_writes("kept", "kept"), _writes("gone", "mine")])
    age_everything(h.catalog, 900)

    report = h.sync(d, [_writes("kept", "kept")])
    stale = run_stale_cleanup(h.catalog, d)

    assert report["removedJobs"] == ["etl.gone"]  # its own job goes...
    own = f"{BUCKET_SYSTEM} [{d.name}]"  # where its datasets of the claimed bucket were placed
    for r in (report, stale):
        # ...but no System it did not create is visited
        assert {c["system"] for c in calls(r, "datasetSystem")} <= {own}
    assert {
        "code": "SYSTEM_CLAIMED",
        "system": BUCKET_SYSTEM,
        "placedIn": own,
    } in report["warnings"]
    assert {
        (crawled, "shop.public.crawled_only"),
        (BUCKET_SYSTEM, "other_export"),
        (own, "kept"),
    } <= datasets(h.catalog)
    # its own dataset, in its own System, that its snapshot no longer describes
    assert (own, "mine") not in datasets(h.catalog)
    assert jobs(h.catalog) == {"features.export", "etl.kept"}


# == Job Systems ==================================================================================


def _moved_namespace(former: str) -> tuple[SyncDefinition, SyncDefinition, str]:
    """A definition before and after its ``etl`` namespace moved to the job System ``new_jobs``,
    and the former job System: its ``openLineageSystem``, or a System it created by a rule."""
    if former == "openLineageSystem":
        before = definition(openLineageSystem="repo_jobs")
        after = definition(
            openLineageSystem="repo_jobs",
            jobSystems=[{"namespaces": "etl", "system": "new_jobs"}],
        )
        return before, after, "repo_jobs"
    before = definition(jobSystems=[{"namespaces": "etl", "system": "old_jobs"}])
    after = definition(jobSystems=[{"namespaces": "etl", "system": "new_jobs"}])
    return before, after, "old_jobs"


MOVED_BATCH = [
    job("etl", "a", [pg("a_in", checks=[("not_null", "id")])], [pg("a_out")], sql="select 1"),
    simple("etl", "b"),
]


@pytest.mark.parametrize("former", ["openLineageSystem", "openLineageJobSystem"])
def test_a_namespace_moved_to_another_job_system_is_removed_from_the_former_in_the_same_run(
    h: Harness, former: str
):
    """Job Systems: "When a jobSystems rule changes, a namespace can move to another System. Each
    run therefore also visits the former job Systems of the definition: the openLineageSystem,
    when it exists, and the Systems whose openLineageJobSystem property holds the uuid of the
    definition. There, the job entities and routines of the namespace were not uploaded by the
    run, so they are removed like any other stale object: in the same run for a snapshot". The
    calls: "each former job System for all of them (snapshot only)"."""
    before, after, old = _moved_namespace(former)
    h.sync(before, MOVED_BATCH)
    assert job_entities(h.catalog) == {(old, "etl", "a"), (old, "etl", "b")}
    if former == "openLineageJobSystem":
        (props,) = [s for s in h.catalog.systems() if s["name"] == old]
        assert props["openLineageJobSystem"] == [SNAP_UUID]

    report = h.sync(after, MOVED_BATCH)

    assert report["mode"] == "CUTOFF" and report["skippedReason"] is None
    assert job_entities(h.catalog) == {("new_jobs", "etl", "a"), ("new_jobs", "etl", "b")}
    assert routines(h.catalog) == {("new_jobs", "etl", "a")}
    (old_call,) = [c for c in calls(report, "jobSystem") if c["system"] == old]
    assert old_call["schemas"] == ["etl"]
    assert old_call["real"]["physicalEntities"] == 2 and old_call["real"]["routines"] == 1


def test_moving_a_namespace_does_not_remove_its_jobs_nor_disable_their_quality_checks(
    h: Harness,
):
    """Owned: "Quality checks: [...] Disabled by the agent" for removed jobs only (issue: "Quality
    checks of removed jobs are disabled"); a job that moved System is not removed, and the report's
    removedJobs names removed jobs."""
    before, after, _ = _moved_namespace("openLineageJobSystem")
    h.sync(before, MOVED_BATCH)

    report = h.sync(after, MOVED_BATCH)

    assert jobs(h.catalog) == {"etl.a", "etl.b"}  # both still in the catalog (in new_jobs)
    assert quality(h.catalog) == {("etl.a", "not_null"): True}
    assert report["removedJobs"] == []


def test_a_former_job_system_of_an_additive_definition_is_cleaned_after_stale_job_days(
    h: Harness,
):
    """Job Systems: "they are removed like any other stale object: [...] after staleJobDays for an
    additive producer." Day-based: "The job Systems, current and former"."""
    before = definition(
        snapshotMode="ADDITIVE", jobSystems=[{"namespaces": "etl", "system": "old_jobs"}]
    )
    after = definition(
        snapshotMode="ADDITIVE", jobSystems=[{"namespaces": "etl", "system": "new_jobs"}]
    )
    h.sync(before, [simple("etl", "a")])

    h.sync(after, [simple("etl", "a")])
    assert job_entities(h.catalog) == {("old_jobs", "etl", "a"), ("new_jobs", "etl", "a")}

    _age(
        h.catalog,
        t.entities,
        t.entities.c.system_id.in_(select(t.systems.c.id).where(t.systems.c.name == "old_jobs")),
        31,
    )
    report = run_stale_cleanup(h.catalog, after)

    assert job_entities(h.catalog) == {("new_jobs", "etl", "a")}
    (old_call,) = [c for c in calls(report, "jobSystem") if c["system"] == "old_jobs"]
    assert old_call["real"]["physicalEntities"] == 1


def test_a_job_system_another_definition_created_is_never_visited(h: Harness):
    """Job Systems: "A System that another definition created, and that this definition left after
    a rule change, is not visited: remove its job entities by hand." """
    other = other_definition(
        allowedJobNamespaces=["features"],
        jobSystems=[{"namespaces": "features", "system": "shared_jobs"}],
    )
    h.sync(other, [simple("features", "theirs")])  # the other definition creates shared_jobs
    before = definition(jobSystems=[{"namespaces": "etl", "system": "shared_jobs"}])
    h.sync(before, [simple("etl", "mine")])
    (props,) = [s for s in h.catalog.systems() if s["name"] == "shared_jobs"]
    assert props["openLineageJobSystem"] == [OTHER_UUID, SNAP_UUID]
    after = definition(jobSystems=[{"namespaces": "etl", "system": "mine_jobs"}])

    report = h.sync(after, [simple("etl", "mine")])
    age_everything(h.catalog, 400)
    stale = run_stale_cleanup(h.catalog, after)

    assert report["mode"] == "CUTOFF" and report["skippedReason"] is None
    for r in (report, stale):
        assert [c["system"] for c in calls(r, "jobSystem")] == ["mine_jobs"]
    assert job_entities(h.catalog) >= {
        ("shared_jobs", "features", "theirs"),
        ("shared_jobs", "etl", "mine"),  # left behind: to be removed by hand
    }


# == Ownership of dataset Systems =================================================================


def test_a_cutoff_dataset_system_owned_by_the_definition_is_cleaned_in_the_same_run(h: Harness):
    """Ownership: "CUTOFF: The System is owned by this definition (a bucket only this repository
    writes). Snapshot runs clean it with the cutoff." "CUTOFF is kept only when the System is owned
    by this definition [...] and the allowedJobNamespaces of the definition is exactly one pattern
    without *". The calls: "Each dataset System with cleanupMode CUTOFF that the batch refers to:
    Entities no longer referenced, and fields of the entities whose schema the run carried." """
    d = definition(
        datasetSystems=[{"namespace": BUCKET, "system": BUCKET_SYSTEM, "cleanupMode": "CUTOFF"}]
    )
    h.sync(
        d,
        [
            job("etl", "kept", [pg("in")], [ds(BUCKET, "report", ["day", "total", "old_col"])]),
            job("etl", "also_kept", [pg("in")], [ds(BUCKET, "no_schema_now", ["x", "y"])]),
            _writes("gone", "anomalies"),
        ],
    )
    (props,) = [s for s in h.catalog.systems() if s["name"] == BUCKET_SYSTEM]
    assert props["openLineageOwner"] == SNAP_UUID

    report = h.sync(
        d,
        [
            job("etl", "kept", [pg("in")], [ds(BUCKET, "report", ["day", "total"])]),
            job("etl", "also_kept", [pg("in")], [ds(BUCKET, "no_schema_now")]),
        ],
    )

    assert report["warnings"] == []
    bucket = {n for s, n in datasets(h.catalog) if s == BUCKET_SYSTEM}
    assert bucket == {"report", "no_schema_now"}  # anomalies is no longer referenced: gone
    assert fields_of(h.catalog, "report") == {"day", "total"}  # the carried schema dropped old_col
    assert fields_of(h.catalog, "no_schema_now") == {"x", "y"}  # no schema carried: fields kept
    (ds_call,) = calls(report, "datasetSystem")
    assert ds_call["system"] == BUCKET_SYSTEM and ds_call["mode"] == "CUTOFF"
    assert ds_call["deleteBefore"] == h.cutoff.isoformat()
    assert ds_call["real"]["physicalEntities"] == 1
    assert ds_call["real"]["physicalFields"] == 1
    assert {n for s, n in datasets(h.catalog) if s == WH_SYSTEM} >= {"shop.public.gone_in"}


@pytest.mark.parametrize(
    "case", ["two_namespace_patterns", "wildcard_pattern", "system_without_owner"]
)
def test_a_cutoff_dataset_system_not_owned_alone_is_cleaned_with_days_and_reported(
    h: Harness, case: str
):
    """Ownership: "The cutoff is safe on a dataset System only if this definition is the only
    producer that refers to it"; "(a System without an owner is not owned) [...] Otherwise the
    System is cleaned with DAYS and the run reports SHARED_SYSTEM_DOWNGRADED." """
    patterns = {
        "two_namespace_patterns": ["etl", "features"],
        "wildcard_pattern": ["etl*"],
        "system_without_owner": ["etl"],
    }[case]
    if case == "system_without_owner":
        with h.catalog.engine.begin() as conn:
            conn.execute(
                t.systems.insert().values(
                    name=BUCKET_SYSTEM, properties={"kind": "dataset", "cleanupMode": "CUTOFF"}
                )
            )
    d = definition(
        allowedJobNamespaces=patterns,
        datasetSystems=[
            {
                "namespace": BUCKET,
                "system": BUCKET_SYSTEM,
                "cleanupMode": "CUTOFF",
                "cleanupDays": 30,
            }
        ],
    )
    h.sync(d, [_writes("kept", "kept"), _writes("gone", "anomalies")])

    report = h.sync(d, [_writes("kept", "kept")])

    assert report["removedJobs"] == ["etl.gone"]
    assert report["warnings"] == [{"code": "SHARED_SYSTEM_DOWNGRADED", "system": BUCKET_SYSTEM}]
    assert (BUCKET_SYSTEM, "anomalies") in datasets(h.catalog)  # not in the same run
    (ds_call,) = calls(report, "datasetSystem")
    assert ds_call["mode"] == "DAYS"
    assert ds_call["deleteBefore"] == (h.cutoff - timedelta(days=30)).isoformat()

    age_dataset(h.catalog, "anomalies", 31)
    report = h.sync(d, [_writes("kept", "kept")])
    assert {n for s, n in datasets(h.catalog) if s == BUCKET_SYSTEM} == {"kept"}


@pytest.mark.parametrize("mode", ["BATCH_SNAPSHOT", "ADDITIVE"])
def test_a_days_dataset_system_is_cleaned_after_its_cleanup_days(h: Harness, mode: str):
    """Ownership: "DAYS: Shared or unknown ownership. Age-based cleanup only, after cleanupDays
    days." Day-based: "Dataset Systems with cleanupMode DAYS: after cleanupDays days." (issue:
    "snapshot definitions get [stale_cleanup] too for their DAYS Systems")."""
    d = definition(
        snapshotMode=mode,
        datasetSystems=[
            {"namespace": BUCKET, "system": BUCKET_SYSTEM, "cleanupMode": "DAYS", "cleanupDays": 10}
        ],
    )
    h.sync(
        d,
        [_writes("a", "eleven_days"), _writes("b", "nine_days"), _writes("c", "gone_today")],
    )
    age_dataset(h.catalog, "eleven_days", 11)
    age_dataset(h.catalog, "nine_days", 9)

    # refers to none of them (and, as a snapshot, retires 3 of 4 jobs: beyond maxRemovalShare)
    report = h.sync(d, [_writes("d", "fresh")], max_share=1)

    bucket = {n for s, n in datasets(h.catalog) if s == BUCKET_SYSTEM}
    assert bucket == {"nine_days", "gone_today", "fresh"}
    (ds_call,) = calls(report, "datasetSystem")
    assert ds_call["mode"] == "DAYS" and ds_call["real"]["physicalEntities"] == 1
    assert ds_call["deleteBefore"] == (h.cutoff - timedelta(days=10)).isoformat()

    age_dataset(h.catalog, "nine_days", 12)
    stale = run_stale_cleanup(h.catalog, d)  # the daily schedule, for either snapshotMode
    assert stale["skippedReason"] is None
    assert {n for s, n in datasets(h.catalog) if s == BUCKET_SYSTEM} == {"gone_today", "fresh"}


def test_a_none_dataset_system_is_never_cleaned(h: Harness):
    """Ownership: "NONE: The default. Mapped and crawled Systems are never cleaned by this job." """
    d = definition(
        datasetSystems=[{"namespace": BUCKET, "system": BUCKET_SYSTEM}],  # cleanupMode NONE
    )
    h.sync(d, [_writes("kept", "kept"), _writes("gone", "anomalies")])
    age_everything(h.catalog, 1000)

    report = h.sync(d, [_writes("kept", "kept")])
    stale = run_stale_cleanup(h.catalog, d)

    assert report["removedJobs"] == ["etl.gone"]
    assert calls(report, "datasetSystem") == calls(stale, "datasetSystem") == []
    assert {n for s, n in datasets(h.catalog) if s == BUCKET_SYSTEM} == {"kept", "anomalies"}
    assert (WH_SYSTEM, "shop.public.gone_in") in datasets(h.catalog)


# == Day-based cleanup: the daily schedule =========================================================


def test_stale_cleanup_removes_what_an_additive_definition_stopped_describing(h: Harness):
    """Day-based: "The job Systems, current and former: job entities and routines of the job
    namespaces seen in Blindata that match allowedJobNamespaces, not updated for
    cleanup.staleJobDays days (30 by default)." "Flows: on the scope prefix of each job namespace
    seen, with the same number of days." (issue: "<definition>/stale_cleanup runs this daily")."""
    first = definition(snapshotMode="ADDITIVE", allowedJobNamespaces=["etl", "legacy"])
    h.sync(
        first,
        [
            simple("etl", "old", sql="select 1"),
            simple("etl", "recent"),
            simple("legacy", "old"),
        ],
    )
    age_job(h.catalog, "etl", "old", 31)
    age_job(h.catalog, "etl", "recent", 29)
    age_job(h.catalog, "legacy", "old", 31)
    d = definition(snapshotMode="ADDITIVE", allowedJobNamespaces=["etl"])  # legacy not allowed
    assert d.cleanup.staleJobDays == 30

    report = run_stale_cleanup(h.catalog, d)

    assert report["mode"] == "DAYS" and report["skippedReason"] is None
    assert jobs(h.catalog) == {"etl.recent", "legacy.old"}
    assert scopes(h.catalog) == {"ol:etl|recent", "ol:legacy|old"}
    assert routines(h.catalog) == set()
    assert report["removedJobs"] == ["etl.old"]
    cutoff = datetime.fromisoformat(report["cutoff"])
    assert abs(cutoff - h.catalog.clock()) < timedelta(minutes=1)
    (flows_call,) = calls(report, "flows")
    assert flows_call["scopePrefixes"] == ["ol:etl|"]
    assert flows_call["deleteBefore"] == (cutoff - timedelta(days=30)).isoformat()
    assert flows_call["real"] == {"dataFlows": 1, "fieldFlows": 0}


# == Guards =======================================================================================


def test_an_empty_batch_deletes_nothing(h: Harness):
    """Guards: "The job makes no cleanup when: The run failed, the batch is empty, [...]". Example:
    "If the batch had been empty [...] nothing would be deleted." """
    d = definition()
    h.sync(d, [simple("etl", "a"), simple("etl", "b")])
    age_everything(h.catalog, 400)
    before = snapshot_of_catalog(h.catalog)

    report = h.sync(d, [])

    assert report["skippedReason"] == "EMPTY_BATCH"
    assert report["calls"] == [] and report["removedJobs"] == []
    assert snapshot_of_catalog(h.catalog) == before


def test_a_failed_upload_deletes_nothing(h: Harness, monkeypatch: pytest.MonkeyPatch):
    """Guards: "any upload of the run failed. A row whose upload failed is “not touched” and would
    be deleted, so the cleanup is skipped for the whole run, and the events stay for the next
    run." """
    d = definition()
    batch = [simple("etl", "a", sql="select 1"), simple("etl", "b")]
    h.sync(d, batch)
    before = snapshot_of_catalog(h.catalog)
    from sqlalchemy.exc import OperationalError

    real_upsert = Bulk.upsert

    def failing_upsert(self, conn, table, *args, **kwargs):
        if table is t.data_flows:  # entities and routines are written, the flows are not
            raise OperationalError("INSERT INTO cat_data_flows", {}, Exception("disk I/O error"))
        return real_upsert(self, conn, table, *args, **kwargs)

    monkeypatch.setattr(Bulk, "upsert", failing_upsert)

    report = h.sync(d, batch)  # the same snapshot: its flows were not re-touched

    assert h.uploads[-1].result.succeeded is False
    assert report["skippedReason"] == "UPLOAD_FAILED"
    assert report["calls"] == [] and report["removedJobs"] == []
    assert snapshot_of_catalog(h.catalog) == before


def test_over_the_removal_cap_no_real_call_is_made_and_the_counts_are_reported(h: Harness):
    """Guards: "The dry-run counts exceed cleanup.maxRemovalsPerRun (500 by default), summed over
    the calls: no real call is made, the run ends in warning, and the counts are in the report.
    Lower the cap on small repositories, so that an empty or truncated batch cannot remove much."
    Example: "or the number of objects to delete were above maxRemovalsPerRun, nothing would be
    deleted." """
    assert definition().cleanup.maxRemovalsPerRun == 500
    d = definition(cleanup={"maxRemovalsPerRun": 1})
    h.sync(d, [simple("etl", "kept"), simple("etl", "gone", sql="select 1")])
    before = snapshot_of_catalog(h.catalog)

    report = h.sync(d, [simple("etl", "kept")])

    assert report["skippedReason"] == "REMOVAL_CAP_EXCEEDED"
    assert report["maxRemovalsPerRun"] == 1
    assert report["calls"] and all(c["real"] is None for c in report["calls"])
    (flows_call,) = calls(report, "flows")
    (jobs_call,) = calls(report, "jobSystem")
    assert flows_call["dryRun"] == {"dataFlows": 1, "fieldFlows": 0}
    assert jobs_call["dryRun"]["physicalEntities"] == 1 and jobs_call["dryRun"]["routines"] == 1
    assert report["plannedRemovals"] == sum(total(c["dryRun"]) for c in report["calls"])
    assert report["removedJobs"] == []
    assert snapshot_of_catalog(h.catalog) == before


def test_removal_counts_of_every_call_former_job_systems_included_sum_towards_the_cap(
    h: Harness,
):
    """Guards: "summed over the calls". Job Systems: "The removals count towards
    maxRemovalsPerRun." """

    def d(job_system: str, **extra: Any) -> SyncDefinition:
        return definition(
            jobSystems=[{"namespaces": "etl", "system": job_system}],
            datasetSystems=[
                {"namespace": BUCKET, "system": BUCKET_SYSTEM, "cleanupMode": "CUTOFF"}
            ],
            **extra,
        )

    after = d("new_jobs")
    batch = [_writes("kept", "kept"), _writes("gone", "anomalies")]
    h.sync(d("old_jobs"), batch)
    dry = h.sync(d("new_jobs", outputOptions={"dryRun": True}), batch[:1])
    planned = dry["plannedRemovals"]
    per_call = [total(c["dryRun"]) for c in dry["calls"]]
    assert len([n for n in per_call if n]) >= 3  # flows, the former job System, the bucket
    assert planned == sum(per_call) and max(per_call) < planned

    report = h.sync(after, batch[:1], max_removals=planned - 1)
    assert report["skippedReason"] == "REMOVAL_CAP_EXCEEDED"
    assert report["plannedRemovals"] == planned
    assert "etl.gone" in jobs(h.catalog)

    report = h.sync(after, batch[:1], max_removals=planned)
    assert report["skippedReason"] is None
    assert jobs(h.catalog) == {"etl.kept"}


def test_dangling_flows_are_not_touched_so_their_old_copies_go_and_are_counted(h: Harness):
    """Guards: "Rows that the upload drops because a flow end is missing are not touched either,
    and are deleted: they were invalid. The report counts them as DANGLING_FLOW." """
    d = definition()

    def batch(input_fields: list[str]) -> list[dict[str, Any]]:
        lineage = {c: [(WH, "shop.public.src", c)] for c in ("id", "name")}
        return [
            job(
                "etl",
                "x",
                [pg("src", input_fields)],
                [pg("dst", ["id", "name"], lineage=lineage)],
            )
        ]

    h.sync(d, batch(["id", "name"]))
    assert field_flows(h.catalog) == {("ol:etl|x", "id", "id"), ("ol:etl|x", "name", "name")}

    # src no longer has id: that field flow has no source (half the column lineage: within the
    # removal share, which judges field flows on their own)
    report = h.sync(d, batch(["key", "name"]))

    assert report["skippedReason"] is None
    assert {"code": "DANGLING_FLOW", "count": 1} in report["warnings"]
    assert field_flows(h.catalog) == {("ol:etl|x", "name", "name")}
    (flows_call,) = calls(report, "flows")
    assert flows_call["real"] == {"dataFlows": 0, "fieldFlows": 1}  # a column flow, apart
    assert scopes(h.catalog) == {"ol:etl|x"}  # the data flow src -> dst was re-sent: kept
