"""Delete only what this definition wrote: what Marquez says of a dataset or a flow before the
cleanup removes it.

A dataset another producer still writes survives the cleanup (its current version's run names
the writer), and so does one that changed after this definition's last upload; the report says
who. Column lineage stays in Marquez after its job is hidden: such a flow is reported kept, not
removed, until Marquez stops showing it. Through the real client, the sync's own cleanup and the
strict Marquez fake; the other producer posts to the fake directly, as it would to Marquez.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from ol_dagster.defs.results import BATCH_CLEANUP_CHECKS, cleanup_result
from ol_dagster_tests.catalogs.test_catalog_marquez import (
    LINEAGE,
    Env,
    key,
    kpi,
    ledger_datasets,
    served_env,
    snapshot,
)
from ol_dagster_tests.fakes.harness import (
    ANOMALIES,
    BUCKET,
    BUCKET_SYSTEM,
    KPI,
    NS,
    PRODUCER,
    SPEC,
    WH,
    calls,
    definition,
    ds,
    facet,
    pg,
    run,
)

ANOMALIES_DS = (BUCKET, "anomalies")
ANOMALIES_PATH = f"/api/v1/namespaces/{quote(BUCKET, safe='')}/datasets/anomalies"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    with served_env(tmp_path) as e:
        yield e


def post_elsewhere(env: Env, event: dict[str, Any]) -> None:
    """Another producer's event, straight to Marquez (not through ol-dagster)."""
    response = httpx.post(f"{env.url}{LINEAGE}", json=event)
    assert response.status_code == 201, response.text


def dataset_event(namespace: str, name: str, when: str) -> dict[str, Any]:
    return {
        "eventTime": when,
        "producer": PRODUCER,
        "schemaURL": f"{SPEC}#/$defs/DatasetEvent",
        "dataset": {"namespace": namespace, "name": name},
    }


def dataset_call(report: dict[str, Any]) -> dict[str, Any]:
    (call,) = [c for c in calls(report, "datasetSystem") if c["system"] == BUCKET_SYSTEM]
    return call


def test_a_dataset_another_producer_writes_survives_the_cleanup(env: Env):
    """The anomalies job leaves the snapshot; its bucket is a CUTOFF System this definition owns.
    But another producer's job wrote the dataset since: Marquez's current version names that
    job, so the dataset is kept and the report says who wrote it."""
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), snapshot())
    post_elsewhere(env, run("refresh_anomalies", [], [ds(BUCKET, "anomalies")], namespace="ml"))

    synced = env.syncer.sync(catalog, definition(), snapshot(with_anomalies=False))

    report = synced.report
    assert report["removedJobs"] == [f"{NS}.{ANOMALIES}"]  # the job goes
    assert ANOMALIES_DS in env.fake.visible_datasets()  # the dataset stays
    call = dataset_call(report)
    assert call["real"] == {"physicalEntities": 0}
    assert call["outcomes"] == {"kept": {"physicalEntities": 1}}
    (why,) = call["keptObjects"]
    assert why.startswith(f"dataset {BUCKET}:anomalies: written by job ml:refresh_anomalies")
    assert report["kept"] == {"physicalEntities": 1}
    # the cleanup's summary in the Dagster UI lists it, with who wrote it
    summary = str(cleanup_result(report, BATCH_CLEANUP_CHECKS).metadata["summary"].value)
    assert f"**kept objects**:\n\n- {why}" in summary
    assert ANOMALIES_PATH not in {r.path for r in env.fake.server.seen("DELETE")}
    assert ANOMALIES_DS not in ledger_datasets(catalog)  # no longer this definition's


def test_a_dataset_only_this_definitions_job_wrote_goes_with_it(env: Env):
    """The writer Marquez names is the anomalies job, removed in the same cleanup (before the
    datasets): still this definition's, so the dataset is deleted."""
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), snapshot())

    synced = env.syncer.sync(catalog, definition(), snapshot(with_anomalies=False))

    assert ANOMALIES_DS not in env.fake.visible_datasets()
    assert dataset_call(synced.report)["real"] == {"physicalEntities": 1}
    assert ANOMALIES_PATH in {r.path for r in env.fake.server.seen("DELETE")}


def test_a_dataset_event_after_the_last_upload_keeps_the_dataset(env: Env):
    """A DatasetEvent names no job: a version made after this definition's last upload keeps
    the dataset, one made before does not."""
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), snapshot())
    later = (env.fake.clock.now() + timedelta(seconds=30)).isoformat()  # after the upload
    post_elsewhere(env, dataset_event(BUCKET, "anomalies", later))

    synced = env.syncer.sync(catalog, definition(), snapshot(with_anomalies=False))

    assert ANOMALIES_DS in env.fake.visible_datasets()
    (why,) = dataset_call(synced.report)["keptObjects"]
    assert "after this definition's last upload" in why and "Marquez does not name" in why


def test_a_dataset_event_before_the_last_upload_does_not_keep_it(env: Env):
    catalog = env.catalog()
    post_elsewhere(env, dataset_event(BUCKET, "anomalies", "2026-10-01T00:00:00Z"))
    env.syncer.sync(catalog, definition(), snapshot())
    # the anomalies job's COMPLETE made its own version current: the old event is history
    synced = env.syncer.sync(catalog, definition(), snapshot(with_anomalies=False))

    assert ANOMALIES_DS not in env.fake.visible_datasets()
    assert dataset_call(synced.report)["real"] == {"physicalEntities": 1}


# == column lineage ===============================================================================


def with_column_lineage() -> dict[str, Any]:
    """The KPI run with a schema on both sides and column lineage ``orders.id -> kpi_daily.id``."""
    output = pg("kpi_daily")
    output["facets"]["columnLineage"] = facet(
        "ColumnLineageDatasetFacet",
        fields={
            "id": {"inputFields": [{"namespace": WH, "name": "shop.public.orders", "field": "id"}]}
        },
    )
    return run(KPI, [pg("orders")], [output])


def test_the_column_lineage_of_a_hidden_job_is_kept_in_the_report_not_removed(env: Env):
    """Marquez keeps column lineage by dataset, not by job: after the KPI job is hidden, the
    ``kpi_daily`` dataset still shows ``orders.id -> kpi_daily.id``. The flow is reported kept,
    and why; the anomalies flow, with no column lineage, is removed as before."""
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), [with_column_lineage(), snapshot()[1]])

    synced = env.syncer.sync(catalog, definition(), [snapshot()[1]])

    assert synced.report["removedJobs"] == [f"{NS}.{KPI}"]
    (flows,) = calls(synced.report, "flows")
    assert flows["real"] == {"dataFlows": 0}
    assert flows["outcomes"] == {"kept": {"dataFlows": 1}}
    (why,) = flows["keptObjects"]
    assert why.startswith(f"flow {WH}:shop.public.orders -> {WH}:shop.public.kpi_daily")
    assert "column lineage" in why
    shown = httpx.get(
        f"{env.url}/api/v1/namespaces/{quote(WH, safe='')}/datasets/shop.public.kpi_daily"
    ).json()["columnLineage"]
    assert shown == [
        {
            "name": "id",
            "inputFields": [{"namespace": WH, "dataset": "shop.public.orders", "field": "id"}],
        }
    ]


def test_a_flow_whose_column_lineage_marquez_no_longer_shows_is_removed(env: Env):
    """Once the output dataset is deleted in Marquez, its column lineage goes with it: the flow
    then counts as removed."""
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), [with_column_lineage()])
    kpi_daily = f"/api/v1/namespaces/{quote(WH, safe='')}/datasets/shop.public.kpi_daily"
    assert httpx.delete(f"{env.url}{kpi_daily}").status_code == 200

    synced = env.syncer.sync(catalog, definition(), [run("etl.other", [pg("a")], [pg("b")])])

    assert synced.report["removedJobs"] == [f"{NS}.{KPI}"]
    (flows,) = calls(synced.report, "flows")
    assert flows["real"] == {"dataFlows": 1} and "keptObjects" not in flows
    assert key("kpi_daily") not in env.fake.visible_datasets()


def test_a_job_removed_with_its_flows_keeps_no_entry_behind(env: Env):
    """Kept or removed, the cleanup forgets the entries: the next run meets none of them."""
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), [with_column_lineage(), snapshot()[1]])
    env.syncer.sync(catalog, definition(), [snapshot()[1]])

    third = env.syncer.sync(catalog, definition(), [snapshot()[1]])

    assert all(sum(c["real"].values()) == 0 for c in third.report["calls"])
    assert "keptObjects" not in str(third.report["calls"])
    assert kpi()["job"]["name"] == KPI
