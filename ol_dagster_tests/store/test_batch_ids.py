"""A batch id is never given twice: SQLite reused the highest id of ``ol_batches`` once retention
had purged every batch of a definition, and the sensor, whose cursor was above it, never synced
the new batch. On SQLite and PostgreSQL, on a new store and on one migrated from version 11."""

from __future__ import annotations

import json
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest
import yaml
from sqlalchemy import MetaData, Table, func, inspect, select, text
from sqlalchemy.schema import CreateTable

from ol_dagster.db import open_engine
from ol_dagster.definitions import build_defs
from ol_dagster.receiver.intake import sort_events
from ol_dagster.settings import load_settings
from ol_dagster.store import BatchStatus, EventStore, schema
from ol_dagster_tests.conftest import run_event

LONG_AGO = datetime.now(UTC) - timedelta(days=30)


def _post(store: EventStore, definition: str = "add", name: str = "daily") -> int:
    accepted = sort_events([run_event("etl", name)], ["*"]).accepted
    return store.add_posted_batch(definition, accepted, received=1)


def test_an_id_purged_by_retention_is_not_given_again(event_store: EventStore) -> None:
    first, second = _post(event_store), _post(event_store)
    for batch_id in (first, second):
        event_store.set_status(batch_id, BatchStatus.SYNCED, now=LONG_AGO)
    assert event_store.purge_synced("add", before=datetime.now(UTC)) == [first, second]
    assert event_store.batches() == []

    assert _post(event_store) > second


def _sensor_tick(defs: dg.Definitions, instance: dg.DagsterInstance, cursor: str | None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        sensor = defs.get_sensor_def("add__new_batches")
    context = dg.build_sensor_context(
        instance=instance,
        instance_ref=instance.get_ref(),
        definitions=defs,
        resources=defs.resources,
        sensor_name="add__new_batches",
        cursor=cursor,
    )
    with context:
        return sensor.evaluate_tick(context)


def test_the_sensor_requests_a_batch_posted_after_retention_purged_them_all(write_settings):
    """The sensor's cursor is the last batch id it requested: a batch posted after retention
    removed every batch must get a higher id, or it is never synced."""
    path = write_settings()
    data = yaml.safe_load(path.read_text())
    data["retention"] = {"keepDays": 7}
    path.write_text(yaml.safe_dump(data))
    store = EventStore(load_settings(path).store.url)
    defs = build_defs(str(path))
    try:
        with dg.instance_for_test() as instance:
            old = _post(store)
            first = _sensor_tick(defs, instance, None)
            assert [r.partition_key for r in first.run_requests or []] == [str(old)]
            store.set_status(old, BatchStatus.SYNCED, now=LONG_AGO)  # synced long ago

            purging = _sensor_tick(defs, instance, first.cursor)
            assert store.batches("add") == []
            assert not purging.run_requests

            new = _post(store, name="after_the_purge")
            tick = _sensor_tick(defs, instance, purging.cursor)
            assert new != old
            assert [r.partition_key for r in tick.run_requests or []] == [str(new)]
    finally:
        store.dispose()


# -- a store of version 11 ----------------------------------------------------------------------


def _v11_batches() -> Table:
    """``ol_batches`` as version 11 made it: no snapshot order, ids SQLite may give again."""
    columns = [c._copy() for c in schema.batches.columns if c.name not in _V12_COLUMNS]
    return Table("ol_batches", MetaData(), *columns)


_V12_COLUMNS = ("snapshot_sequence", "ordered_at")


def _make_v11_sqlite_store(path: Path) -> str:
    """A new SQLite store as version 11 wrote it."""
    url = f"sqlite:///{path}"
    store = EventStore(url)
    engine = store.engine
    with engine.begin() as conn:
        for table in reversed(schema.metadata.sorted_tables):
            conn.execute(text(f"DROP TABLE {table.name}"))
        conn.execute(CreateTable(_v11_batches()))
        for table in schema.metadata.sorted_tables:
            if table.name != "ol_batches":
                table.create(conn)
        for index in schema.batches.indexes:
            index.create(conn)
        conn.execute(schema.meta.insert().values(key="schema_version", value="11"))
    store.dispose()
    return url


def test_a_version_11_sqlite_store_keeps_its_batches_and_never_reuses_an_id(tmp_path: Path):
    url = _make_v11_sqlite_store(tmp_path / "store.db")
    raw = open_engine(url)
    now = datetime(2026, 11, 1, 2, 0, 0)
    with raw.begin() as conn:
        sql = conn.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE name = 'ol_batches'"
        ).scalar_one()
        assert "AUTOINCREMENT" not in sql.upper()
        rows = [
            {
                "id": i,
                "definition": "add",
                "kind": "posted",
                "status": "synced",
                "received_at": now,
                "received_count": 1,
                "accepted_count": 1,
                "rejected_count": 0,
                "whole_snapshot": False,
            }
            for i in (3, 4)
        ]
        conn.execute(_v11_batches().insert(), rows)
        conn.execute(
            schema.events.insert(),
            [
                {
                    "batch_id": 4,
                    "position": 0,
                    "raw": json.dumps(run_event("etl", "kept")).encode(),
                    "kind": "run",
                    "event_type": "COMPLETE",
                    "event_time": now,
                    "job_namespace": "etl",
                    "job_name": "kept",
                    "run_id": "r",
                }
            ],
        )
        conn.execute(
            schema.batch_catalogs.insert().values(batch_id=4, catalog="other", status="synced")
        )
        # batch 9 was synced, cleaned and purged: only the cleanup journal still names it
        conn.execute(
            schema.cleanup_journal.insert().values(
                definition="add",
                run_id="r9",
                batch_id=9,
                position=0,
                call={},
                planned={},
                status="DONE",
                created_at=now,
            )
        )
    raw.dispose()

    store = EventStore(url)  # migrated to version 12 on open
    try:
        assert store.schema_version == schema.SCHEMA_VERSION >= 12
        # nothing was lost on the way: the rebuilt table's children kept their rows
        assert [b.id for b in store.batches("add")] == [3, 4]
        assert [e.job_name for e in store.iter_events(4)] == ["kept"]
        assert set(store.catalog_records(4)) == {"other"}
        # batches stored before are ordered by their arrival
        assert store.get_batch(4).ordered_at == store.get_batch(4).received_at
        assert store.get_batch(4).snapshot_sequence is None
        with store.engine.connect() as conn:
            sql = conn.exec_driver_sql(
                "SELECT sql FROM sqlite_master WHERE name = 'ol_batches'"
            ).scalar_one()
            assert "AUTOINCREMENT" in sql.upper()
            assert {i["name"] for i in inspect(conn).get_indexes("ol_batches")} == {
                i.name for i in schema.batches.indexes
            }
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar_one() == 1
        # above every id the store still names, the purged batch 9 included
        new = _post(store)
        assert new == 10
        # the foreign keys still hold: a removed batch takes its events with it
        store.set_status(4, BatchStatus.SYNCED, now=LONG_AGO)
        store.set_status(3, BatchStatus.SYNCED, now=LONG_AGO)
        assert store.purge_synced("add", before=datetime.now(UTC)) == [3, 4]
        with store.engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(schema.events)).scalar() == 1
    finally:
        store.dispose()


def test_a_version_11_store_gains_the_snapshot_order(store_url: str):
    """On SQLite and PostgreSQL: the columns are added, the batches stored before ordered by
    their arrival, and a store turned back to 11 (its table already rebuilt) migrates again."""
    store = EventStore(store_url)
    batch_id = _post(store)
    with store.engine.begin() as conn:
        for column in _V12_COLUMNS:
            conn.execute(text(f"ALTER TABLE ol_batches DROP COLUMN {column}"))
        conn.execute(
            schema.meta.update().where(schema.meta.c.key == "schema_version").values(value="11")
        )
    store.dispose()

    upgraded = EventStore(store_url)
    try:
        assert upgraded.schema_version == schema.SCHEMA_VERSION
        batch = upgraded.get_batch(batch_id)
        assert batch.ordered_at == batch.received_at and batch.snapshot_sequence is None
        assert _post(upgraded) > batch_id
    finally:
        upgraded.dispose()


@pytest.mark.parametrize("table", ["ol_events", "ol_batch_graphs", "ol_batch_catalogs"])
def test_the_tables_that_name_a_batch_still_refer_to_ol_batches(tmp_path: Path, table: str):
    url = _make_v11_sqlite_store(tmp_path / "store.db")
    store = EventStore(url)
    try:
        with store.engine.connect() as conn:
            (fk,) = inspect(conn).get_foreign_keys(table)
        assert fk["referred_table"] == "ol_batches"
    finally:
        store.dispose()
