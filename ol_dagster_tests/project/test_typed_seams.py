"""The typed seams hold at run time: what a sync stores has the keys its types name.

pyright checks the code that builds and reads the upload record, the cleanup report and the lineage
state against their ``TypedDict`` s; nothing checks that a key written at run time is declared.
These tests sync for real (the Marquez fake: events taken by the catalog, a ledger export, real
removals with outcomes) and compare each stored document with its type, so a key added without
its type fails here. A translator subclass reads the typed nodes, as a user's would.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.catalog.marquez.catalog import MarquezCatalog
from ol_dagster.catalog.marquez.settings import MarquezCatalogSettings
from ol_dagster.catalog.protocol import (
    Annotating,
    ExportsState,
    Rehearsing,
    TakesEvents,
    export_state,
)
from ol_dagster.defs.lineage_assets import (
    DatasetNode,
    JobNode,
    OpenLineageTranslator,
    build_lineage_specs,
)
from ol_dagster.lineage_state import DatasetState, JobState, LineageState
from ol_dagster.store import EventStore
from ol_dagster.sync.reports import (
    CallReport,
    CleanupReport,
    CleanupWarning,
    GraphFacts,
    UploadedRecord,
)
from ol_dagster_tests.fakes.faults import Clock, serve
from ol_dagster_tests.fakes.harness import ANOMALIES, KPI, Syncer, definition, pg, run
from ol_dagster_tests.fakes.marquez_fake import MarquezFake

START = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)


def _keys(typed: Any) -> set[str]:
    return set(typed.__required_keys__) | set(typed.__optional_keys__)


def _fits(doc: dict[str, Any], typed: Any) -> None:
    """Every key of ``doc`` is declared by ``typed``, and every required one is there."""
    assert set(doc) <= _keys(typed), f"undeclared: {set(doc) - _keys(typed)}"
    assert set(typed.__required_keys__) <= set(doc), (
        f"missing: {typed.__required_keys__ - set(doc)}"
    )


@pytest.fixture
def marquez(tmp_path: Path) -> Iterator[tuple[MarquezCatalog, Syncer]]:
    fake = MarquezFake(Clock(START))
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    store = EventStore(store_url)
    with serve(fake.server) as url:
        settings = MarquezCatalogSettings.model_validate(
            {"kind": "marquez", "url": url, "maxRetries": 0, "timeoutSeconds": 5}
        )
        catalog = MarquezCatalog("main", settings, store_url=store_url, definition="snap")
        yield catalog, Syncer(store, fake.clock)
        catalog.close()
    store.dispose()


def test_a_synced_batch_stores_the_shapes_its_types_name(marquez):
    catalog, syncer = marquez
    kpi = run(KPI, [pg("orders")], [pg("kpi_daily")])
    anomalies = run(ANOMALIES, [pg("kpi_daily")], [pg("anomalies")])
    syncer.sync(catalog, definition(), [kpi, anomalies])
    # the next snapshot drops a job: real removals, with their counts and outcomes
    report = syncer.sync(catalog, definition(), [kpi]).report
    assert report["removedJobs"], "the retired job must be removed for this test to mean much"

    (stored,) = [b for b in syncer.store.batches("snap") if b.cleanup_report == report]
    _fits(stored.cleanup_report or {}, CleanupReport)
    for call in report["calls"]:
        _fits(call, CallReport)
    for warning in report["warnings"]:
        _fits(warning, CleanupWarning)
    upload = stored.upload_result or {}
    _fits(upload, UploadedRecord)
    _fits(upload["graph"], GraphFacts)

    state = export_state(catalog, definition())
    assert state is not None and state["jobs"]
    _fits(dict(state), LineageState)
    for job in state["jobs"]:
        _fits(dict(job), JobState)
    for ds in state["datasets"]:
        _fits(dict(ds), DatasetState)


def test_each_backend_has_the_capabilities_the_sync_looks_for(marquez, tmp_path: Path):
    """The embedded catalog rehearses its cleanup and holds analyses; Marquez takes the events.
    Both export the lineage state."""
    http, _ = marquez
    embedded = EmbeddedCatalog(f"sqlite:///{tmp_path / 'catalog.db'}")
    try:
        found = {
            name: [
                p.__name__
                for p in (Rehearsing, TakesEvents, ExportsState, Annotating)
                if isinstance(c, p)
            ]
            for name, c in (("embedded", embedded), ("marquez", http))
        }
    finally:
        embedded.close()
    assert found == {
        "embedded": ["Rehearsing", "ExportsState", "Annotating"],
        "marquez": ["TakesEvents", "ExportsState"],
    }


def test_a_translator_subclass_reads_typed_nodes():
    class Typed(OpenLineageTranslator):
        def get_job_kinds(self, job: JobNode) -> set[str]:
            return {(job.job_type or "job").lower()}

        def get_dataset_spec(self, dataset: DatasetNode, **kwargs: Any) -> dg.AssetSpec:
            spec = super().get_dataset_spec(dataset, **kwargs)
            columns = ", ".join(f.name for f in dataset.fields)
            return spec.merge_attributes(metadata={"columns": columns})

    state: dict[str, Any] = {
        "jobs": [
            {
                "namespace": "etl",
                "name": "load",
                "jobType": "MODEL",
                "inputs": [],
                "outputs": [["pg", "t"]],
            }
        ],
        # a state stored by an older version: no type, system, owners or field types
        "datasets": [{"namespace": "pg", "name": "t", "fields": [{"name": "id"}, {"name": "x"}]}],
    }
    specs = {s.key: s for s in build_lineage_specs("d", state, Typed())}  # type: ignore[arg-type]
    assert specs[dg.AssetKey(["etl", "load"])].kinds == {"model"}
    table = specs[dg.AssetKey(["pg", "t"])]
    assert table.metadata["columns"] == "id, x"
    assert [c.type for c in table.metadata["dagster/column_schema"].columns] == ["unknown"] * 2
    assert table.deps[0].asset_key == dg.AssetKey(["etl", "load"])
