"""The lineage state after a sync is patched for the jobs that changed, not exported again whole.

What a user notices: the asset graph shows what the catalog holds after each sync (compared
with a fresh whole export of the catalog, which does not go through the patching), and a sync
that changed nothing writes nothing to the store. Each state row's ``written_at`` says whether
a sync wrote it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, text

from ol_dagster.catalog.embedded import tables as t
from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.catalog.protocol import export_state
from ol_dagster.defs.lineage_assets import OpenLineageTranslator, build_lineage_specs
from ol_dagster.lineage.graph import NodeKey
from ol_dagster.lineage_state import LineageState, dataset_key, job_key, state_rows
from ol_dagster.receiver.intake import sort_events
from ol_dagster.settings import SyncDefinition, parse_settings
from ol_dagster.store import EventStore, schema
from ol_dagster.store.catalog_facts import UPLOAD_OUTCOME
from ol_dagster.store.lineage_state import RowsWritten
from ol_dagster.sync import fanout
from ol_dagster.sync.batch import sync_batch
from ol_dagster.sync.lineage_refresh import (
    Refreshed,
    _uploaded_nothing,
    note_catalog_change,
    refresh_lineage,
)
from ol_dagster.sync.upload import upload_graph
from ol_dagster_tests.catalogs.test_embedded_catalog import (
    LAKE,
    WH,
    build_kpi,
    ds,
    export_anomalies,
    graph_of,
    job,
    load_orders,
)
from ol_dagster_tests.catalogs.test_upload_change_detection import cleanup, definition
from ol_dagster_tests.conftest import settings_data


def _kpi_with_count() -> dict[str, Any]:
    """build_kpi writing one more column, from orders.id: its job and its output change."""
    return job(
        "etl",
        "build_kpi",
        [ds(WH, "shop.public.orders")],
        [
            ds(
                LAKE,
                "kpi/daily.parquet",
                ["total", "n"],
                {
                    "total": [(WH, "shop.public.orders", "amount")],
                    "n": [(WH, "shop.public.orders", "id")],
                },
            )
        ],
        sql="select sum(amount) as total, count(id) as n from shop.public.orders",
        minute=5,
    )


def _at(events: list[dict[str, Any]], hour: int) -> list[dict[str, Any]]:
    for e in events:
        e["eventTime"] = e["eventTime"].replace("T02:", f"T{hour:02d}:")
    return events


class Synced:
    """A catalog and a store, synced as a sync leaves them: upload, cutoff cleanup, refresh."""

    def __init__(self, tmp: Path) -> None:
        self.definition: SyncDefinition = definition(tmp)
        self.catalog = EmbeddedCatalog(f"sqlite:///{tmp / 'catalog.db'}")
        self.store = EventStore(f"sqlite:///{tmp / 'store.db'}")
        self.cutoff: datetime | None = None

    def sync(self, events: list[dict[str, Any]]) -> Refreshed:
        outcome = upload_graph(self.catalog, graph_of(events, self.definition), self.definition)
        assert outcome.result.succeeded
        self.cutoff = outcome.cutoff
        cleanup(self, self.definition)  # type: ignore[arg-type]  # a catalog and its cutoff
        refreshed = refresh_lineage(self.catalog, self.definition, self.store)
        assert refreshed is not None
        return refreshed

    def stored(self) -> LineageState:
        state = self.store.lineage_state("snap")
        assert state is not None
        return state  # type: ignore[return-value]

    def rows(self) -> dict[str, dict[bytes, tuple[bytes, datetime]]]:
        """Each state row's key with its part and the time it was written."""
        out: dict[str, dict[bytes, tuple[bytes, datetime]]] = {}
        with self.store.engine.connect() as conn:
            for name, table, key in (
                ("jobs", schema.lineage_jobs, "job_key"),
                ("datasets", schema.lineage_datasets, "dataset_key"),
            ):
                out[name] = {
                    k: (part, when)
                    for k, part, when in conn.execute(
                        select(table.c[key], table.c.part, table.c.written_at)
                    )
                }
        return out

    def close(self) -> None:
        self.catalog.close()
        self.store.dispose()


@pytest.fixture
def synced(tmp_path: Path) -> Iterator[Synced]:
    s = Synced(tmp_path)
    yield s
    s.close()


def _shop(hour: int, kpi: dict[str, Any] | None = None, anomalies: bool = True) -> list[dict]:
    events = [load_orders(parent=("etl", "daily")), kpi or build_kpi()]
    if anomalies:
        events.append(export_anomalies())
    return _at(events, hour)


def _same_as_a_whole_export(s: Synced) -> None:
    whole = export_state(s.catalog, s.definition)
    assert whole is not None
    stored = s.stored()
    assert stored == whole
    translator = OpenLineageTranslator()
    assert build_lineage_specs("snap", stored, translator) == build_lineage_specs(
        "snap", whole, translator
    )


def test_an_unchanged_sync_exports_and_writes_nothing(synced: Synced) -> None:
    first = synced.sync(_shop(2))
    assert first.exported == 4 and not first.whole  # daily, load_orders, build_kpi, anomalies
    _same_as_a_whole_export(synced)
    before = synced.rows()

    again = synced.sync(_shop(3))  # the same jobs, new runs

    assert again.exported == 0 and again.written.nothing
    assert synced.rows() == before  # not one row written again (their times are the first's)
    _same_as_a_whole_export(synced)


def test_a_changed_job_rewrites_its_row_and_its_datasets_only(synced: Synced) -> None:
    synced.sync(_shop(2))
    before = synced.rows()

    changed = synced.sync(_shop(3, kpi=_kpi_with_count()))

    after = synced.rows()
    _same_as_a_whole_export(synced)
    rewritten = {k for k, v in after["jobs"].items() if before["jobs"].get(k) != v}
    names = {job_key(j["namespace"], j["name"]): j["name"] for j in synced.stored()["jobs"]}
    assert {names[k] for k in rewritten} == {"build_kpi"}
    kpi = next(d for d in synced.stored()["datasets"] if d["name"] == "kpi/daily.parquet")
    assert [f["name"] for f in kpi["fields"]] == ["total", "n"]
    datasets = {k for k, v in after["datasets"].items() if before["datasets"].get(k) != v}
    assert datasets == {dataset_key(kpi)}
    # export_anomalies reads the changed dataset: exported again, its row the same (only the
    # signature it is compared by next time is new)
    assert changed.exported == 2 and changed.written.jobs == 1


def test_a_removed_job_and_the_datasets_only_it_reached_go(synced: Synced) -> None:
    synced.sync(_shop(2))
    gone = synced.sync(_shop(3, anomalies=False))

    assert gone.written.jobs_removed == 1 and gone.written.datasets_removed == 1
    stored = synced.stored()
    assert [j["name"] for j in stored["jobs"]] == ["build_kpi", "daily", "load_orders"]
    assert "anomalies/out.csv" not in {d["name"] for d in stored["datasets"]}
    assert job_key("features", "export_anomalies") not in synced.rows()["jobs"]
    _same_as_a_whole_export(synced)


@pytest.mark.parametrize(
    ("table", "job_name", "kind"),
    [
        (t.field_flows, "build_kpi", None),  # its column lineage: only its field flows counted
        (t.data_flows, "load_orders", t.ORCHESTRATION),  # its parent, daily
        (t.data_flows, "build_kpi", t.DATA),  # its input
    ],
)
def test_a_flow_the_catalog_lost_shows_at_the_next_refresh(
    synced: Synced, table: Any, job_name: str, kind: str | None
) -> None:
    """A flow that goes while every digest stays (an operator's delete; a cleanup removing an
    older row of a job the upload only stamped): the job's part is exported again, and the
    asset graph no longer shows what the flow gave it."""
    synced.sync(_shop(2))
    c = table.c
    with synced.catalog.engine.begin() as conn:
        conn.execute(
            table.delete().where(
                c.scope_job == job_name, *([c.kind == kind] if kind is not None else [])
            )
        )
    before = synced.stored()

    refreshed = refresh_lineage(synced.catalog, synced.definition, synced.store)

    assert refreshed is not None and refreshed.exported == 1 and refreshed.written.jobs == 1
    assert synced.stored() != before
    _same_as_a_whole_export(synced)


def test_a_dataset_the_catalog_keeps_no_digest_of_is_exported_each_time(synced: Synced) -> None:
    """Without its digest no signature can say a dataset is unchanged: the jobs reaching it
    are exported at every refresh, so each change to it shows."""
    synced.sync(_shop(2))
    e = t.entities.c
    for description in ("first edit", "second edit"):
        with synced.catalog.engine.begin() as conn:
            conn.execute(
                t.entities.update()
                .where(e.ol_name == "kpi/daily.parquet")
                .values(content_hash=None, description=description)
            )

        refreshed = refresh_lineage(synced.catalog, synced.definition, synced.store)

        assert refreshed is not None and refreshed.exported == 2  # build_kpi, export_anomalies
        kpi = next(d for d in synced.stored()["datasets"] if d["name"] == "kpi/daily.parquet")
        assert kpi["description"] == description
        _same_as_a_whole_export(synced)


def test_a_whole_export_rewrites_only_the_rows_that_differ(synced: Synced) -> None:
    """A catalog that cannot say what changed (a ledger catalog) exports whole: the store
    still writes only what differs."""
    synced.sync(_shop(2))
    whole = export_state(synced.catalog, synced.definition)
    assert whole is not None
    synced.store.replace_lineage("snap", whole)
    assert synced.stored() == whole
    before = synced.rows()

    assert synced.store.replace_lineage("snap", whole).nothing
    assert synced.rows() == before
    jobs = [j for j in whole["jobs"] if j["name"] != "export_anomalies"]
    fewer: LineageState = {**whole, "jobs": jobs}
    assert synced.store.replace_lineage("snap", fewer).jobs_removed == 1
    assert synced.stored() == fewer


def test_an_old_stores_whole_document_becomes_rows_on_open(synced: Synced) -> None:
    """A store written before the state was kept per job: its document is migrated when the
    store opens, and the asset graph reads the same state; other documents stay as they were."""
    synced.sync(_shop(2))
    whole = export_state(synced.catalog, synced.definition)
    assert whole is not None
    url = synced.store.url
    synced.store.save_lineage_state("snap/jobRuns", {"version": 1, "jobs": {"etl": {}}})
    with synced.store.engine.begin() as conn:  # the store as the version before left it
        for table in ("ol_lineage_links", "ol_lineage_datasets", "ol_lineage_jobs"):
            conn.exec_driver_sql(f"DROP TABLE {table}")
        conn.execute(
            schema.lineage_state.update()
            .where(schema.lineage_state.c.definition == "snap")
            .values(state=whole)
        )
        conn.execute(text("UPDATE ol_store_meta SET value = '13' WHERE key = 'schema_version'"))
    synced.store.dispose()

    synced.store = EventStore(url)
    assert synced.store.schema_version == schema.SCHEMA_VERSION
    assert synced.stored() == whole
    assert len(synced.rows()["jobs"]) == len(whole["jobs"])
    assert synced.store.lineage_state("snap/jobRuns") == {"version": 1, "jobs": {"etl": {}}}
    # the first sync after it signs every row; the next writes nothing
    synced.sync(_shop(3))
    _same_as_a_whole_export(synced)
    assert synced.sync(_shop(4)).written.nothing


def test_a_capped_definition_is_patched_to_its_newest_jobs(synced: Synced, tmp_path: Path) -> None:
    """``assetGraph.maxJobs``: the rows hold the newest jobs a whole export keeps, the others
    counted; a job that is no longer among them goes."""
    synced.definition = parse_settings(
        settings_data(
            tmp_path,
            datasetSystems=[{"namespace": LAKE, "system": "lake", "cleanupMode": "CUTOFF"}],
            assetGraph={"maxJobs": 2},
        )
    ).definition("snap")
    synced.sync(_shop(2))
    assert synced.stored()["jobsNotShown"] == 2
    _same_as_a_whole_export(synced)
    synced.sync(_at([load_orders(parent=("etl", "daily"))], 4))  # now the newest run
    assert "load_orders" in {j["name"] for j in synced.stored()["jobs"]}
    _same_as_a_whole_export(synced)


def test_rows_round_trip_on_each_store(event_store: EventStore) -> None:
    """SQLite and PostgreSQL: a state saved as rows reads back as it was saved, a second save of
    it writes nothing, and patching one job rewrites that row alone."""
    job = {
        "namespace": "etl",
        "description": None,
        "integration": None,
        "jobType": None,
        "owners": [],
        "inputs": [[WH, "a"]],
        "outputs": [[WH, "b"]],
    }
    dataset = {"namespace": WH, "type": "TABLE", "system": "wh", "description": None, "owners": []}
    state: LineageState = {
        "version": 1,
        "jobs": [{**job, "name": "one"}, {**job, "name": "two"}],  # type: ignore[typeddict-item]
        "datasets": [
            {**dataset, "name": n, "fields": [{"name": "x", "type": None, "description": None}]}  # type: ignore[typeddict-item]
            for n in ("a", "b")
        ],
        "parents": [[["etl", "one"], ["etl", "two"]]],
        "columnLineage": [{"dataset": [WH, "b"], "field": "x", "inputs": [[WH, "a", "x"]]}],
    }
    assert not event_store.replace_lineage("d", state).nothing
    assert event_store.lineage_state("d") == state
    assert event_store.replace_lineage("d", state).nothing
    two = {**state["jobs"][1], "description": "the second"}
    patched = event_store.patch_lineage(
        "d",
        state_rows([{"job": two, "parents": [], "columnLineage": []}], []),
        {},
        [],  # type: ignore[typeddict-item]
    )
    assert (patched.jobs, patched.datasets_removed) == (1, 0)
    got = event_store.lineage_state("d")
    assert got is not None and [j["description"] for j in got["jobs"]] == [None, "the second"]


class Batched(Synced):
    """Each sync a batch of the store with its upload and cleanup recorded, as a sync records
    them, the refresh told which batch it ends."""

    def sync_batch(self, events: list[dict[str, Any]], *, refresh: bool = True) -> Refreshed:
        batch = self.store.add_posted_batch("snap", [], received=0)
        outcome = upload_graph(self.catalog, graph_of(events, self.definition), self.definition)
        assert outcome.result.succeeded and outcome.cutoff is not None
        key = fanout.target(self.definition).key
        self.store.record_upload(
            batch, cutoff=outcome.cutoff, result=outcome.result.as_dict(), catalog=key
        )
        removed: dict[str, int] = {}
        jobs: list[str] = []
        namespaces = ["etl", "features"]
        calls = [
            self.catalog.cleanup_flows(namespaces=namespaces, before=outcome.cutoff, dry_run=False),
            self.catalog.cleanup_job_system(
                "snap_jobs", schemas=namespaces, before=outcome.cutoff, dry_run=False
            ),
            *(
                self.catalog.cleanup_dataset_system(s, before=outcome.cutoff, dry_run=False)
                for s in (WH, "lake")
            ),
        ]
        for counts in calls:
            for kind, n in counts.counts.items():
                removed[kind] = removed.get(kind, 0) + n
            jobs += counts.removed_jobs
        self.store.record_cleanup(batch, {"removed": removed, "removedJobs": jobs}, catalog=key)
        refreshed = (
            refresh_lineage(self.catalog, self.definition, self.store, batch=batch)
            if refresh
            else Refreshed(False, 0, RowsWritten(), None)
        )
        assert refreshed is not None
        return refreshed


def test_a_sync_that_changed_nothing_does_not_read_the_catalog(tmp_path: Path) -> None:
    """An unchanged snapshot: its upload wrote nothing and its cleanup removed nothing, so the
    state is kept without a look at the catalog; one that changed something, or whose state
    is missing, from an older version or was never brought up to date (a sync that died before
    it), is patched again."""
    s = Batched(tmp_path)
    try:
        assert not s.sync_batch(_shop(2)).untouched
        assert s.sync_batch(_shop(3)).untouched  # the same jobs, new runs
        _same_as_a_whole_export(s)

        # a sync that changed build_kpi died before its refresh: the next unchanged one patches
        s.sync_batch(_shop(4, kpi=_kpi_with_count()), refresh=False)
        again = s.sync_batch(_shop(5, kpi=_kpi_with_count()))
        assert not again.untouched and again.written.jobs == 1
        _same_as_a_whole_export(s)
        assert s.sync_batch(_shop(6, kpi=_kpi_with_count())).untouched

        # a state an older export signed, then one lost: both repaired
        state = schema.lineage_state
        with s.store.engine.begin() as conn:
            head = conn.execute(select(state.c.state).where(state.c.definition == "snap")).scalar()
            assert head["batch"]
            conn.execute(
                state.update()
                .where(state.c.definition == "snap")
                .values(state={**head, "signedBy": 0})
            )
        assert not s.sync_batch(_shop(7, kpi=_kpi_with_count())).untouched
        assert s.sync_batch(_shop(8, kpi=_kpi_with_count())).untouched
        with s.store.engine.begin() as conn:
            for table in (schema.lineage_jobs, schema.lineage_links, schema.lineage_state):
                conn.execute(table.delete())
        repaired = s.sync_batch(_shop(9, kpi=_kpi_with_count()))
        assert not repaired.untouched and repaired.written.jobs == 4
        _same_as_a_whole_export(s)

        # the day-based cleanup may remove what no batch records: the next sync looks again
        s.store.unsign_lineage("snap")
        assert not s.sync_batch(_shop(10, kpi=_kpi_with_count())).untouched
    finally:
        s.close()


def test_another_definitions_change_to_the_catalog_is_looked_at(tmp_path: Path) -> None:
    """A dataset this definition's asset graph shows may be rewritten or removed by another
    definition's sync: an upload that wrote, or a cleanup that removed, anything takes every
    definition's mark away; one that changed nothing, or was skipped, leaves it."""
    s = Batched(tmp_path)
    try:
        s.sync_batch(_shop(2))
        assert s.sync_batch(_shop(3)).untouched
        other_unchanged = {"succeeded": True, "written": {"datasets": 0}, "updated": {}}
        note_catalog_change(s.store, upload=other_unchanged)
        note_catalog_change(s.store, upload={"skippedReason": "SUPERSEDED"})
        note_catalog_change(s.store, report={"removed": {"datasets": 0}, "removedJobs": []})
        assert s.sync_batch(_shop(4)).untouched
        note_catalog_change(s.store, upload={"succeeded": True, "updated": {"datasets": 1}})
        assert not s.sync_batch(_shop(5)).untouched
        assert s.sync_batch(_shop(6)).untouched
        note_catalog_change(s.store, report={"removed": {"datasets": 1}, "removedJobs": []})
        assert not s.sync_batch(_shop(7)).untouched
    finally:
        s.close()


class ChangedWhileRead(EmbeddedCatalog):
    """The embedded catalog, changed by another sync (``then``, once) right after a refresh read
    its signatures: the interleaving of two syncs made to happen."""

    then: Callable[[], None] | None = None

    def state_sources(self, definition: SyncDefinition) -> tuple[dict[NodeKey, str | None], int]:
        sources = super().state_sources(definition)
        if self.then is not None:
            then, self.then = self.then, None
            then()
        return sources


def test_a_change_made_while_the_state_is_read_is_shown_at_the_next_sync(tmp_path: Path) -> None:
    """Another sync rewrites build_kpi after this definition's refresh read the catalog and
    before it wrote its state: that state is not signed, so the next sync, which changes
    nothing, still reads the catalog and shows the rewrite (signed, it would keep the state
    without build_kpi's new column until something else changed)."""
    s = Batched(tmp_path)
    s.catalog.close()
    s.catalog = catalog = ChangedWhileRead(f"sqlite:///{tmp_path / 'catalog.db'}")
    try:
        s.sync_batch(_shop(2))
        assert s.store.lineage_signed_batch("snap") is not None

        def other_sync() -> None:
            rewritten = graph_of(_shop(3, kpi=_kpi_with_count(), anomalies=False), s.definition)
            outcome = upload_graph(catalog, rewritten, s.definition)
            assert outcome.result.as_dict()["updated"]
            note_catalog_change(s.store, upload=outcome.result.as_dict())

        catalog.then = other_sync
        dropped = s.sync_batch(_shop(3, anomalies=False))  # export_anomalies goes
        assert not dropped.untouched and catalog.then is None
        assert s.store.lineage_signed_batch("snap") is None

        again = s.sync_batch(_shop(4, kpi=_kpi_with_count(), anomalies=False))
        assert not again.untouched and again.exported == 1  # build_kpi, read again
        _same_as_a_whole_export(s)
        assert s.store.lineage_signed_batch("snap") is not None
        assert s.sync_batch(_shop(5, kpi=_kpi_with_count(), anomalies=False)).untouched
    finally:
        s.close()


def test_a_real_sync_that_changes_the_catalog_takes_the_marks_away(tmp_path: Path) -> None:
    """The sync itself, not only the rule: its upload that writes takes every stored state's
    mark away before the asset graph is refreshed; one that writes nothing leaves it."""
    s = Batched(tmp_path)
    try:
        s.sync_batch(_shop(2))
        assert s.sync_batch(_shop(3)).untouched

        def really_sync(events: list[dict[str, Any]]) -> None:
            intake = sort_events(events, s.definition.allowedJobNamespaces)
            batch = s.store.add_posted_batch(
                s.definition.name, intake.accepted, received=intake.received, snapshot=True
            )
            sync_batch(s.store, s.catalog, s.definition, batch, run_id=f"r{batch}")

        really_sync(_shop(4))  # the same lineage: nothing written
        assert s.store.lineage_signed_batch("snap") is not None
        really_sync(_shop(5, kpi=_kpi_with_count()))
        assert s.store.lineage_signed_batch("snap") is None
    finally:
        s.close()


def test_a_capped_definition_unchanged_keeps_its_newest_jobs(tmp_path: Path) -> None:
    """``assetGraph.maxJobs``: a sync that changed nothing still shows the newest jobs, read
    from the jobs' runs alone."""
    s = Batched(tmp_path)
    try:
        s.definition = parse_settings(
            settings_data(
                tmp_path,
                datasetSystems=[{"namespace": LAKE, "system": "lake", "cleanupMode": "CUTOFF"}],
                assetGraph={"maxJobs": 2},
            )
        ).definition("snap")
        s.sync_batch(_shop(2))
        assert s.sync_batch(_shop(3)).untouched
        assert s.stored()["jobsNotShown"] == 2
        _same_as_a_whole_export(s)
    finally:
        s.close()


@pytest.mark.parametrize("skipped", [False, True])
def test_the_check_of_the_batches_since_reads_each_upload_outcome_alone(
    tmp_path: Path, skipped: bool
) -> None:
    """After every sync, the refresh checks that each batch since the state was last brought
    up to the catalog changed nothing (``untouched``). It reads each upload's outcome as the
    store hands it (``UPLOAD_OUTCOME``), not the graph's facts beside it (half a megabyte a
    batch at 10,000 jobs): what it hands is the outcome as recorded, and every key the check
    judges by is among those it hands."""
    store = EventStore(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        result: dict[str, Any] = {
            "written": {"physicalEntities": 0, "runMetrics": 3},
            "updated": {"physicalEntities": 0},
            "removed": {},
            "dropped": {},
            "renamed": [],
            "failed": [],
            "succeeded": True,
            "graph": {"jobs": [["etl", f"job_{i}"] for i in range(100)]},
        }
        if skipped:
            result["skippedReason"] = "superseded"
        batch = store.add_posted_batch("snap", [], received=0)
        store.record_upload(batch, cutoff=None, result=result, catalog="primary")

        [(got, recorded, outcome, report)] = store.catalog_results("snap", "primary", 0, batch)

        assert (got, recorded, report) == (batch, True, None)
        assert outcome == {k: v for k, v in result.items() if k in UPLOAD_OUTCOME}
        assert store.catalog_results("snap", "another", 0, batch) == [(batch, False, None, None)]
    finally:
        store.dispose()

    judged: set[str] = set()

    class Recording(dict):
        def get(self, key: str, default: Any = None) -> Any:
            judged.add(key)
            return super().get(key, default)

    _uploaded_nothing(Recording(result))
    assert judged and judged <= set(UPLOAD_OUTCOME) and "skippedReason" in UPLOAD_OUTCOME
