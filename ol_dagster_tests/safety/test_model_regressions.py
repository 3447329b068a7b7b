"""Disagreements the lineage-safety model test found, shrunk and written out as plain tests.

Each sequence is replayed by the model test's own driver (``test_lineage_safety_model.Driver``):
the same steps go through the receiver's intake, the event store, ``upload_batch`` and
``cleanup_batch`` on a real embedded catalog (SQLite and PostgreSQL, change detection on, as in
production) and through the reference model (``ol_dagster_tests.model.reference``, written from
the seeds); after every sync the catalog's objects, the batches' statuses and the cleanup report
must be the model's. A random sequence may find a disagreement only once in thousands of runs;
these replay it every time.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ol_dagster_tests.model.generate import BUCKET, CUTOFF, WAREHOUSE, definition_spec
from ol_dagster_tests.model.reference import Dataset, Event, data_flow
from ol_dagster_tests.safety.test_lineage_safety_model import Driver, Env

PG_A = Dataset(WAREHOUSE, "shop.public.a")
BUCKET_B = Dataset(BUCKET, "b")
RENAMED_B = Dataset(BUCKET, "b.v2", lifecycle="RENAME", previous="b")
# the catalog's keys of the two ends: (System, namespace, name); the warehouse has no rule
PG_A_KEY = (WAREHOUSE, WAREHOUSE, "shop.public.a")
B_KEY, RENAMED_KEY = ("bucket", BUCKET, "b"), ("bucket", BUCKET, "b.v2")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    if request.param == "sqlite":
        env = Env(f"sqlite:///{tmp_path / 'store.db'}", f"sqlite:///{tmp_path / 'catalog.db'}")
    else:
        pg = request.getfixturevalue("pg_server")
        env = Env(pg.fresh_database("s"), pg.fresh_database("c"))
    env.reset()
    yield env
    env.close()


def _sync(d: Driver, name: str, events: list[Event]) -> None:
    d.post(name, events)
    d.sync(name)  # the report against the model's cleanup
    d.check()  # the catalog's objects and the batches' statuses against the model's


def test_a_dataset_renamed_by_another_definition_leaves_no_flow_at_its_new_name(env: Env):
    """Found by Hypothesis (the rename by another definition, then a whole snapshot continuing
    a STREAMING/PERIODIC ACCUMULATIVE run): ``snap`` renames the bucket's entity ``b`` while
    ``multi``'s run writes ``b`` too. ``snap`` created the CUTOFF System ``bucket``, so
    ``multi``'s datasets that its rule maps there are placed in ``bucket [multi]``, a System of
    its own: ``snap``'s rename moves only its own ``b``, and ``multi``'s flow, described again
    unchanged, stays on its own ``b`` (before Systems were claimed, the rename took ``multi``'s
    flow to ``b.v2`` and the unchanged upload never wrote the flow to ``b`` again)."""
    snap = definition_spec("snap")  # BATCH_SNAPSHOT over etl, owns the bucket System (CUTOFF)
    multi = definition_spec("multi", dataset_rules=((BUCKET, "bucket", CUTOFF),))
    d = Driver(env, (snap, multi))
    run = str(uuid.uuid5(uuid.NAMESPACE_URL, "features.f1 stream"))

    def window(*, time: int, inputs=(), outputs=()) -> Event:
        return Event(
            "run",
            "features",
            "f1",
            run_id=run,
            event_type="RUNNING",
            inputs=inputs,
            outputs=outputs,
            processing="STREAMING",
            trigger="PERIODIC",
            content="ACCUMULATIVE",
            time=time,
        )

    _sync(d, "snap", [Event("job", "etl", "load", outputs=(BUCKET_B,), time=1)])
    _sync(d, "multi", [window(time=2, inputs=(PG_A,), outputs=(BUCKET_B,))])
    _sync(d, "snap", [Event("job", "etl", "load", outputs=(RENAMED_B,), time=3)])
    assert RENAMED_KEY in d.model.datasets and B_KEY not in d.model.datasets  # it moved
    _sync(d, "multi", [window(time=4)])  # the run goes on: it still reads a, writes b
    own_b = ("bucket [multi]", BUCKET_B.namespace, BUCKET_B.name)
    assert set(d.model.flows) == {data_flow(("features", "f1"), PG_A_KEY, own_b)}


def test_a_job_described_again_after_a_rename_in_an_earlier_upload_is_written_again(env: Env):
    """The same flaw within one definition: ``etl.kpi`` writes ``b``; a later upload (an
    ADDITIVE one) renames ``b`` to ``b.v2``, the flow going along; a JobEvent then describes
    ``etl.kpi`` again as before. A JobEvent replaces its job's flows: the flow to ``b`` is
    written and the one to ``b.v2`` removed, as a re-send of the unchanged job leaves them."""
    d = Driver(env, (definition_spec("snap", snapshot=False),))
    _sync(d, "snap", [Event("job", "etl", "kpi", inputs=(PG_A,), outputs=(BUCKET_B,), time=1)])
    _sync(d, "snap", [Event("job", "etl", "load", outputs=(RENAMED_B,), time=2)])
    assert set(d.model.flows) == {data_flow(("etl", "kpi"), PG_A_KEY, RENAMED_KEY)}  # it went
    _sync(d, "snap", [Event("job", "etl", "kpi", inputs=(PG_A,), outputs=(BUCKET_B,), time=3)])
    assert set(d.model.flows) == {data_flow(("etl", "kpi"), PG_A_KEY, B_KEY)}


def test_a_snapshot_older_than_one_synced_stays_superseded_after_retention(env: Env):
    """Snapshot order and retention together: the newer snapshot ``2`` (``OL-Snapshot-Sequence``
    2) is synced and removes ``etl.old``; retention then purges its batch; the older snapshot
    ``1``, still pending, is synced afterwards. It is older than one already synced, so it is
    SUPERSEDED and never brings ``etl.old`` back."""
    d = Driver(env, (definition_spec("snap"),))
    d.post("snap", [Event("job", "etl", "old", inputs=(PG_A,), outputs=(BUCKET_B,), time=1)], 1)
    d.sync("snap")
    d.check()
    older = d.post("snap", [Event("job", "etl", "old", outputs=(BUCKET_B,), time=2)], 5)
    newer = d.post("snap", [Event("job", "etl", "new", outputs=(BUCKET_B,), time=3)], 9)
    d.sync("snap", [newer])  # a person syncs the newer one first
    d.check()
    d.purge("snap", None)  # retention.keepDays passed for every synced batch
    d.check()
    d.sync("snap", [older])
    d.check()
    assert ("snap_jobs", "etl", "old") not in d.model.jobs
