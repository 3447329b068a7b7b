"""Intent before deletion: every real cleanup call is in the store's journal before it is made,
and a process that dies in the call (here: ``os._exit`` in a real subprocess, on the embedded
catalog) leaves an intent the definition's next sync reconciles against the catalog, so a
cleanup report says what was removed."""

from __future__ import annotations

import multiprocessing
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.defs.report import cleanup_markdown
from ol_dagster.receiver.intake import sort_events
from ol_dagster.settings import SyncDefinition, load_settings
from ol_dagster.store import EventStore, JournalStatus
from ol_dagster.sync.batch import cleanup_batch, sync_batch, upload_batch
from ol_dagster.sync.graph import batch_graph
from ol_dagster_tests.conftest import run_event

PG = "postgres://db:5432"


def snapshot(*jobs: str) -> list[dict[str, Any]]:
    return [
        run_event("etl", j, inputs=[(PG, f"shop.in_{j}")], outputs=[(PG, f"shop.out_{j}")])
        for j in jobs
    ]


def post(store: EventStore, d: SyncDefinition, events: list[dict[str, Any]]) -> int:
    intake = sort_events(events, d.allowedJobNamespaces)
    batch_id = store.add_posted_batch(
        d.name, intake.accepted, received=intake.received, snapshot=True
    )
    batch_graph(store, d, store.get_batch(batch_id))
    return batch_id


class Watched:
    """The real embedded catalog, with a hook at each real (not rehearsed) cleanup call."""

    METHODS = ("cleanup_flows", "cleanup_job_system", "cleanup_dataset_system", "drop_datasets")

    def __init__(self, inner: EmbeddedCatalog, hook) -> None:
        self._inner = inner
        self._hook = hook  # hook(method, when) with when "before" or "after" the real call
        self._rehearsing = False

    def __getattr__(self, name: str):
        attr = getattr(self._inner, name)
        if name not in self.METHODS:
            return attr

        def call(*args, dry_run: bool, **kwargs):
            real = not dry_run and not self._rehearsing
            if real:
                self._hook(name, "before")
            out = attr(*args, dry_run=dry_run, **kwargs)
            if real:
                self._hook(name, "after")
            return out

        return call

    @contextmanager
    def rehearsal(self) -> Iterator[None]:
        with self._inner.rehearsal():
            self._rehearsing = True
            try:
                yield
            finally:
                self._rehearsing = False


@pytest.fixture
def setup(write_settings, tmp_path: Path):
    path = write_settings(allowedJobNamespaces=["etl"])
    settings = load_settings(path)
    store = EventStore(settings.store.url)
    catalog = EmbeddedCatalog(settings.catalogs["main"].url)
    d = settings.definition("snap")
    # the first snapshot: three jobs; the second drops etl.retired
    sync_batch(store, catalog, d, post(store, d, snapshot("kpi", "retired", "other")), run_id="r1")
    assert sorted(catalog.job_names()) == ["etl.kpi", "etl.other", "etl.retired"]
    yield {"path": str(path), "store": store, "catalog": catalog, "d": d}
    catalog.close()
    store.dispose()


def test_each_real_call_is_journaled_before_it_is_made_and_completed_after(setup) -> None:
    store, d = setup["store"], setup["d"]
    seen: list[tuple[str, str, list[JournalStatus]]] = []

    def hook(method: str, when: str) -> None:
        seen.append((method, when, [e.status for e in store.journal(d.name)]))

    catalog = Watched(setup["catalog"], hook)
    batch = post(store, d, snapshot("kpi", "other"))
    _, report = sync_batch(store, catalog, d, batch, run_id="r2")  # type: ignore[arg-type]

    assert report["removedJobs"] == ["etl.retired"]
    real_calls = [c for c in report["calls"] if c["real"] is not None]
    assert len(seen) == 2 * len(real_calls) >= 4
    earlier = [e for e in store.journal(d.name) if e.run_id == "r1"]
    for i in range(len(real_calls)):
        (method, when, before), (_, when_after, after) = seen[2 * i], seen[2 * i + 1]
        assert (when, when_after) == ("before", "after")
        # before the call, its intent is the newest entry; after it, still open until recorded
        mine = before[len(earlier) :]
        assert mine == [JournalStatus.DONE] * i + [JournalStatus.INTENT], method
        assert after[len(earlier) :] == mine
    entries = [e for e in store.journal(d.name) if e.run_id == "r2"]
    assert [e.status for e in entries] == [JournalStatus.DONE] * len(real_calls)
    assert [e.call["target"] for e in entries] == [c["target"] for c in real_calls]
    assert [e.removed["counts"] for e in entries] == [c["real"] for c in real_calls]  # type: ignore[index]
    assert [e.planned["counts"] for e in entries] == [c["dryRun"] for c in real_calls]
    assert {e.reported_in for e in entries} == {batch}
    assert "reconciled" not in report  # nothing was left open


def test_a_dry_run_or_a_stopped_cleanup_journals_nothing(setup, write_settings) -> None:
    store, catalog, d = setup["store"], setup["catalog"], setup["d"]
    before = store.journal(d.name)
    batch = post(store, d, snapshot("kpi", "other"))
    from ol_dagster.sync.batch import CleanupOverrides

    _, report = sync_batch(
        store, catalog, d, batch, run_id="r2", overrides=CleanupOverrides(maxRemovalsPerRun=0)
    )
    assert report["skippedReason"] == "REMOVAL_CAP_EXCEEDED"
    assert store.journal(d.name) == before
    assert "etl.retired" in catalog.job_names()


# -- a process that dies in its cleanup ------------------------------------------------------------


def _die_in_cleanup(settings_path: str, batch_id: int, method: str, when: str) -> None:
    """A sync of ``batch_id`` whose process exits (no cleanup, no finally) at ``when`` of the real
    ``method`` call: "before" is after its intent was written, "after" once the call returned."""
    settings = load_settings(settings_path)
    store = EventStore(settings.store.url)
    inner = EmbeddedCatalog(settings.catalogs["main"].url)

    def hook(name: str, moment: str) -> None:
        if (name, moment) == (method, when):
            os._exit(17)

    d = settings.definition("snap")
    sync_batch(store, Watched(inner, hook), d, batch_id, run_id="killed")  # type: ignore[arg-type]
    os._exit(0)  # the hook was never reached: the test fails on the exit code


def _kill_in_cleanup(setup, method: str, when: str) -> int:
    store, d = setup["store"], setup["d"]
    batch = post(store, d, snapshot("kpi", "other"))
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_die_in_cleanup, args=(setup["path"], batch, method, when))
    proc.start()
    proc.join(timeout=240)
    assert proc.exitcode == 17
    # what the dead process left: an upload recorded, no report, the batch still to sync
    left = store.get_batch(batch)
    assert left.upload_result is not None and left.cleanup_report is None
    assert left.status.value == "sealed"
    assert [e.status for e in store.journal(d.name) if e.run_id == "killed"][-1] is (
        JournalStatus.INTENT
    )
    return batch


def test_a_cleanup_killed_after_its_real_call_is_reported_by_the_next_sync(setup) -> None:
    store, catalog, d = setup["store"], setup["catalog"], setup["d"]
    batch = _kill_in_cleanup(setup, "cleanup_job_system", "after")
    assert "etl.retired" not in catalog.job_names()  # the call was made and committed

    # the next sync (of the same batch, still pending) takes the dead run's lock at once
    run_id = str(uuid.uuid4())
    upload_batch(store, catalog, d, batch, run_id=run_id)
    report = cleanup_batch(store, catalog, d, batch, run_id=run_id)

    assert report["skippedReason"] is None
    assert report["removedJobs"] == []  # removed by the dead run, not again
    reconciled = report["reconciled"]
    assert {r["runId"] for r in reconciled} == {"killed"}
    by_target = {r["target"]: r for r in reconciled}
    job_call = next(r for r in reconciled if r["target"] == "jobSystem")
    assert job_call["status"] == "RECONCILED"
    assert job_call["removedJobs"] == ["etl.retired"]
    assert job_call["removed"] == job_call["planned"]
    assert job_call["removed"]["physicalEntities"] == 1
    # the call before it completed and was journaled DONE; none after it was made
    assert by_target["flows"]["status"] == "DONE"
    assert by_target["flows"]["removed"] == by_target["flows"]["planned"]
    assert [r["target"] for r in reconciled] == ["flows", "jobSystem"]
    entries = [e for e in store.journal(d.name) if e.run_id == "killed"]
    assert {e.reported_in for e in entries} == {batch}
    assert store.journal(d.name, statuses=[JournalStatus.INTENT]) == []
    assert sorted(catalog.job_names()) == ["etl.kpi", "etl.other"]

    # the Markdown summary shown in the Dagster UI says it too
    summary = cleanup_markdown(report)
    assert "**removed jobs**: none" in summary
    assert "**jobs they removed**: etl.retired" in summary
    assert "| killed | " in summary and "| jobSystem |" in summary and "| RECONCILED |" in summary

    # reported once: the next report does not list them again
    again = post(store, d, snapshot("kpi", "other"))
    _, later = sync_batch(store, catalog, d, again, run_id=str(uuid.uuid4()))
    assert "reconciled" not in later
    assert "died before their report" not in cleanup_markdown(later)


def test_a_cleanup_killed_before_its_real_call_reports_nothing_removed(setup) -> None:
    store, catalog, d = setup["store"], setup["catalog"], setup["d"]
    batch = _kill_in_cleanup(setup, "cleanup_job_system", "before")
    assert "etl.retired" in catalog.job_names()  # the intent was written, the call never made

    _, report = sync_batch(store, catalog, d, batch, run_id=str(uuid.uuid4()))

    job_call = next(r for r in report["reconciled"] if r["target"] == "jobSystem")
    assert job_call["status"] == "RECONCILED"
    assert job_call["removedJobs"] == []
    assert set(job_call["removed"].values()) == {0}
    assert job_call["planned"]["physicalEntities"] == 1
    # this run's own cleanup removed it, and says so
    assert report["removedJobs"] == ["etl.retired"]
    assert sorted(catalog.job_names()) == ["etl.kpi", "etl.other"]


class Unrehearsed(Watched):
    """The same catalog seen as one that cannot roll back: each call is counted in a dry run,
    then made for real."""

    rehearsal = None  # type: ignore[assignment]  (how a protocol's method is blocked)


def test_a_rehearsal_that_found_nothing_is_the_cleanup(setup) -> None:
    """The same snapshot again leaves nothing to remove: the rehearsal made every call for real
    and found nothing, so no call is made again and nothing is journaled, and the report says
    what making each call again says (checked on the same catalog seen as one that cannot
    rehearse, whose calls are all made)."""
    store, d = setup["store"], setup["d"]
    made: list[str] = []
    catalog = Watched(setup["catalog"], lambda method, when: made.append(method))
    journal = store.journal(d.name)
    _, report = sync_batch(
        store,
        catalog,  # type: ignore[arg-type]
        d,
        post(store, d, snapshot("kpi", "retired", "other")),
        run_id="r2",
    )
    assert report["skippedReason"] is None and report["calls"]
    assert made == [] and store.journal(d.name) == journal

    made_plain: list[str] = []
    plain = Unrehearsed(setup["catalog"], lambda method, when: made_plain.append(method))
    _, again = sync_batch(
        store,
        plain,  # type: ignore[arg-type]
        d,
        post(store, d, snapshot("kpi", "retired", "other")),
        run_id="r3",
    )
    assert len(made_plain) == 2 * len(again["calls"])  # before and after each real call
    assert [c["real"] for c in report["calls"]] == [c["real"] for c in again["calls"]]
    assert [c["dryRun"] for c in report["calls"]] == [c["real"] for c in report["calls"]]
    for key in ("removed", "removedJobs", "movedJobs", "notFound", "kept", "keptBy", "left"):
        assert report[key] == again[key], key
    assert report["refused"] == again["refused"] == {}
    assert sorted(setup["catalog"].job_names()) == ["etl.kpi", "etl.other", "etl.retired"]
