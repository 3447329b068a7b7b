"""Retention of synced batches, and the one-switch PostgreSQL setting."""

from __future__ import annotations

import warnings
from datetime import UTC, datetime, timedelta

import dagster as dg
import yaml

from ol_dagster.definitions import build_defs
from ol_dagster.receiver.intake import sort_events
from ol_dagster.settings import load_settings, parse_settings
from ol_dagster.store import BatchStatus, EventStore
from ol_dagster_tests.conftest import run_event


def test_old_synced_batches_and_their_partitions_are_removed(write_settings):
    path = write_settings()
    data = yaml.safe_load(path.read_text())
    data["retention"] = {"keepDays": 7}
    path.write_text(yaml.safe_dump(data))
    store = EventStore(load_settings(path).store.url)
    # a run each: batches sharing a run go together (``store.retention``)
    old, recent, failed = (
        store.add_posted_batch(
            "add", sort_events([run_event("etl", "daily")], ["*"]).accepted, received=1
        )
        for _ in range(3)
    )
    long_ago = datetime.now(UTC) - timedelta(days=30)
    store.set_status(old, BatchStatus.SYNCED, now=long_ago)
    store.set_status(recent, BatchStatus.SYNCED)
    store.set_status(failed, BatchStatus.FAILED, now=long_ago)  # pending work is never purged

    defs = build_defs(str(path))
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("add__batches", [str(old), str(recent), str(failed)])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            sensor = defs.get_sensor_def("add__new_batches")
        context = dg.build_sensor_context(
            instance=instance,
            instance_ref=instance.get_ref(),
            definitions=defs,
            resources=defs.resources,
            sensor_name="add__new_batches",
        )
        with context:
            data = sensor.evaluate_tick(context)
        deletes = [
            r
            for r in data.dynamic_partitions_requests or []
            if isinstance(r, dg.DeleteDynamicPartitionsRequest)
        ]
        assert [list(r.partition_keys) for r in deletes] == [[str(old)]]

    remaining = {b.id for b in store.batches("add")}
    assert remaining == {recent, failed}
    assert list(store.iter_events(old)) == []
    assert len(list(store.iter_events(recent))) == 1
    store.dispose()


def test_no_retention_keeps_everything(write_settings):
    path = write_settings()
    store = EventStore(load_settings(path).store.url)
    accepted = sort_events([run_event("etl", "daily")], ["*"]).accepted
    batch = store.add_posted_batch("add", accepted, received=1)
    store.set_status(batch, BatchStatus.SYNCED, now=datetime.now(UTC) - timedelta(days=3650))
    assert store.purge_synced("add", before=datetime.now(UTC) - timedelta(days=1)) == [batch]
    store.dispose()


def test_one_database_url_moves_the_store_and_embedded_catalogs(pg_url):
    settings = parse_settings(
        {
            "databaseUrl": pg_url,
            "catalogs": {
                "main": {"kind": "embedded"},
                "mine": {"kind": "embedded", "url": "sqlite:///x.db"},
            },
        }
    )
    assert settings.store.url == pg_url
    assert settings.catalogs["main"].url == pg_url
    assert settings.catalogs["mine"].url == "sqlite:///x.db"  # an explicit URL wins
    # both live in the one database without clashing
    from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog

    store = EventStore(settings.store.url)
    catalog = EmbeddedCatalog(settings.catalogs["main"].url)
    try:
        assert catalog.clock().tzinfo is not None
        assert store.batches() == []
    finally:
        catalog.close()
        store.dispose()
