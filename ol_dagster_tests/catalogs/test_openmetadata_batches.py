"""Batches OpenMetadata answers late are never sent again blindly.

OpenMetadata answers a batch after its last event, resolving each dataset in turn. The fake does
the same when told to (``slow_after``: it writes that many events, then takes ``slow_seconds``
before the rest and its answer) or stands behind a proxy that gives up (a 504) or refuses a body
over its limit (a 413). Through the real client: what a late batch already wrote is read back and
not sent again; the rest goes in halves, as a batch too large does; one event without an answer,
or too large alone, fails the upload, and the cleanup deletes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ol_dagster.catalog.openmetadata.catalog import BATCH
from ol_dagster.catalog.openmetadata.settings import OpenMetadataCatalogSettings
from ol_dagster_tests.catalogs.test_openmetadata_lineage_delete import (
    JWT,
    TOKEN_ENV,
    Env,
    edge_entries,
    fqn,
    running,
)
from ol_dagster_tests.fakes.faults import Fault
from ol_dagster_tests.fakes.harness import definition, pg, run


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, JWT)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    with running(tmp_path) as e:
        e.fake.add_table(fqn("orders"))
        yield e


def jobs(n: int) -> list[dict[str, Any]]:
    return [run(f"etl.j{i}", [pg("orders")], [pg(f"out{i}")]) for i in range(n)]


def test_a_late_batch_is_read_back_and_only_what_it_did_not_write_is_sent_again(env: Env):
    """Three of eight events are written when the client stops waiting; those three are never
    sent again, the other five go in two requests. The late request goes on writing them too:
    the same writer, the same edges."""
    env.fake.slow_after, env.fake.slow_seconds = 3, 4.0
    catalog = env.catalog(chunkSize=8, batchTimeoutSeconds=1.5)

    synced = env.syncer.sync(catalog, definition(), jobs(8))

    assert synced.result.succeeded, synced.result.failed
    sizes = [len(b) for b in env.fake.batches]
    assert sizes == [8, 3, 2]
    first, *again = env.fake.batches
    assert {e["job"]["name"] for b in again for e in b} == {f"etl.j{i}" for i in range(3, 8)}
    assert env.fake.edge_pairs() == {(fqn("orders"), fqn(f"out{i}")) for i in range(8)}
    assert len(edge_entries(catalog)) == 8


def test_a_proxy_that_stops_waiting_is_a_late_answer_too(env: Env):
    """A 504 may come while the server still writes: read back (nothing written here), then
    the events go in two halves, never the same request again at once."""
    env.fake.server.inject(Fault(504, method="POST", path=BATCH))
    catalog = env.catalog(chunkSize=4)

    synced = env.syncer.sync(catalog, definition(), jobs(4))

    assert synced.result.succeeded, synced.result.failed
    assert [len(b) for b in env.fake.batches] == [2, 2]  # the 504 never reached it
    assert len(env.fake.server.seen("POST", BATCH)) == 3
    assert len(edge_entries(catalog)) == 4


def test_one_event_without_an_answer_fails_the_upload_and_deletes_nothing(env: Env):
    catalog = env.catalog(chunkSize=1)
    env.syncer.sync(catalog, definition(), jobs(2))
    before = env.fake.edge_pairs()
    env.fake.server.inject(Fault(504, method="POST", path=BATCH))

    synced = env.syncer.sync(catalog, definition(), jobs(1))

    (row,) = synced.result.failed
    assert "may still be writing" in row.reason and "tried again later" in row.reason
    assert synced.report["skippedReason"] == "UPLOAD_FAILED"
    assert env.fake.edge_pairs() == before


def test_a_big_batch_goes_in_requests_of_twenty_events_by_default(env: Env):
    defaults = OpenMetadataCatalogSettings.model_validate({"url": "http://om:8585"})
    assert (defaults.chunkSize, defaults.batchTimeoutSeconds) == (20, 120.0)
    catalog = env.catalog()

    synced = env.syncer.sync(catalog, definition(), jobs(41))

    assert synced.result.succeeded, synced.result.failed
    assert [len(b) for b in env.fake.batches] == [20, 20, 1]


def test_a_413_from_a_proxy_halves_the_batch_and_every_event_lands(env: Env):
    """A proxy in front of OpenMetadata refuses a body over its limit: the batch is halved until
    each request fits, and every event is written once."""
    catalog = env.catalog(chunkSize=8)
    two = len(json.dumps({"events": jobs(2)}))
    env.fake.server.limit_body(two + two // 4)  # two events a request, not three

    synced = env.syncer.sync(catalog, definition(), jobs(8))

    assert synced.result.succeeded, synced.result.failed
    assert len(env.fake.server.too_large) == 3  # 8, then each 4
    assert sorted(len(b) for b in env.fake.batches) == [2, 2, 2, 2]
    assert env.fake.edge_pairs() == {(fqn("orders"), fqn(f"out{i}")) for i in range(8)}
    assert len(edge_entries(catalog)) == 8


def test_one_event_too_large_alone_is_its_own_failed_row(env: Env):
    catalog = env.catalog(chunkSize=4)
    events = jobs(4)
    events[2] = run("etl.j2", [pg("orders")], [pg("out2")], sql="select " + "x" * 5000)
    env.fake.server.limit_body(4000)

    synced = env.syncer.sync(catalog, definition(), events)

    (row,) = synced.result.failed
    assert row.key == "event 2" and "HTTP 413" in row.reason and "even alone" in row.reason
    assert synced.report["skippedReason"] == "UPLOAD_FAILED"  # so nothing is deleted
    assert {e["job"]["name"] for b in env.fake.batches for e in b} == {"etl.j0", "etl.j1", "etl.j3"}
