"""A ledger catalog's cleanup killed part-way through a call is reconciled to the object.

Marquez and OpenMetadata clean through the sync ledger (``catalog.ledger_catalog``), which
forgets each object's entries as soon as the catalog answered for it. A real process (spawned,
``os._exit`` at a chosen delete: no ``finally`` runs) syncs against the Marquez fake served
here, and dies in the job call after some of its deletes; the next sync of the batch reconciles
the call from the ledger: the report says exactly which jobs the dead call removed, this run
removes the rest, and nothing is counted ``notFound``.
"""

from __future__ import annotations

import multiprocessing
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ol_dagster.catalog.ledger.entries import LedgerItem
from ol_dagster.catalog.marquez.catalog import MarquezCatalog
from ol_dagster.catalog.marquez.settings import MarquezCatalogSettings
from ol_dagster.catalog.protocol import Removal
from ol_dagster.receiver.intake import sort_events
from ol_dagster.store import EventStore, JournalStatus
from ol_dagster.sync.batch import sync_batch
from ol_dagster.sync.graph import batch_graph
from ol_dagster_tests.fakes.faults import Clock, serve
from ol_dagster_tests.fakes.harness import NS, definition, pg, run
from ol_dagster_tests.fakes.marquez_fake import MarquezFake

JOBS = 10
KEPT = 6  # 4 jobs go: within maxRemovalShare (0.5)
DIE_BEFORE = 2  # the dead call deleted this many jobs, then died before the next delete


def job(i: int) -> str:
    return f"etl.job_{i:02d}"


def snapshot(n: int) -> list[dict[str, Any]]:
    return [run(job(i), [pg("orders")], [pg(f"out_{i:02d}")]) for i in range(n)]


def catalog(url: str, store_url: str, cls: type[MarquezCatalog] = MarquezCatalog) -> MarquezCatalog:
    cfg = MarquezCatalogSettings.model_validate({"kind": "marquez", "url": url, "maxRetries": 0})
    return cls("main", cfg, store_url=store_url, definition="snap")


def post(store: EventStore, events: list[dict[str, Any]]) -> int:
    d = definition()
    intake = sort_events(events, d.allowedJobNamespaces)
    batch = store.add_posted_batch(d.name, intake.accepted, received=intake.received, snapshot=True)
    batch_graph(store, d, store.get_batch(batch))
    return batch


def _die_in_the_job_call(url: str, store_url: str, batch: int, die_before: int) -> None:
    """Sync ``batch`` and exit the process just before the job call's ``die_before``-th delete
    (after ``die_before`` deletes, each answered by the catalog)."""

    class Dying(MarquezCatalog):
        deletes = 0

        def delete_job(self, item: LedgerItem) -> Removal:
            if self.deletes == die_before:
                os._exit(17)
            self.deletes += 1
            return super().delete_job(item)

    store = EventStore(store_url)
    sync_batch(store, catalog(url, store_url, Dying), definition(), batch, run_id="killed")
    os._exit(0)  # never reached the delete: the test fails on the exit code


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, Any]]:
    fake = MarquezFake(Clock(datetime(2026, 11, 1, 3, 0, tzinfo=UTC)))
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    store = EventStore(store_url)
    with serve(fake.server) as url:
        yield {"fake": fake, "url": url, "store_url": store_url, "store": store}
    store.dispose()


def test_a_cleanup_killed_between_deletes_is_reconciled_to_the_object(env) -> None:
    fake, store = env["fake"], env["store"]
    main = catalog(env["url"], env["store_url"])
    d = definition()
    fake.clock.advance(minutes=1)
    sync_batch(store, main, d, post(store, snapshot(JOBS)), run_id="first")
    assert fake.visible_jobs() == {(NS, job(i)) for i in range(JOBS)}
    dropped = [f"{NS}.{job(i)}" for i in range(KEPT, JOBS)]

    fake.clock.advance(minutes=1)
    batch = post(store, snapshot(KEPT))
    proc = multiprocessing.get_context("spawn").Process(
        target=_die_in_the_job_call, args=(env["url"], env["store_url"], batch, DIE_BEFORE)
    )
    proc.start()
    proc.join(timeout=240)
    assert proc.exitcode == 17
    gone = {(NS, job(i)) for i in range(JOBS)} - fake.visible_jobs()
    assert len(gone) == DIE_BEFORE  # the dead call deleted these, then died
    (open_call,) = store.journal(d.name, statuses=[JournalStatus.INTENT])
    assert open_call.call["target"] == "jobSystem"

    fake.clock.advance(minutes=1)
    _, report = sync_batch(store, main, d, batch, run_id=str(uuid.uuid4()))

    assert report["skippedReason"] is None
    (dead,) = [r for r in report["reconciled"] if r["target"] == "jobSystem"]
    assert dead["status"] == "RECONCILED"
    assert dead["planned"] == {"physicalEntities": JOBS - KEPT}
    assert dead["removed"] == {"physicalEntities": DIE_BEFORE}
    assert sorted(dead["removedJobs"]) == sorted(f"{ns}.{name}" for ns, name in gone)
    # this run removed the rest, and met none of the dead call's deletes again
    assert sorted(dead["removedJobs"] + report["removedJobs"]) == dropped
    (job_call,) = [c for c in report["calls"] if c["target"] == "jobSystem"]
    assert job_call["real"] == {"physicalEntities": JOBS - KEPT - DIE_BEFORE}
    assert not job_call.get("outcomes")  # no notFound
    assert fake.visible_jobs() == {(NS, job(i)) for i in range(KEPT)}
    main.close()
