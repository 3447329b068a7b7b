# ruff: noqa: F811  (the fixtures are imported from test_cleanup_rules)
"""Lineage safety (issue 12, step 1 of 6): one named test per class of wrong deletion found on main.

Each test goes through the production code the assets call (the receiver's intake, a real event
store, ``sync.batch.upload_batch`` / ``cleanup_batch`` on a real ``EmbeddedCatalog``, SQLite and
PostgreSQL), and asserts what a user would see: what the catalog holds afterwards and what the
report says. The random sequences against the independent reference model are in
``test_lineage_safety_model.py``; these are the seven classes by name, so a regression says which.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from ol_dagster.catalog.embedded import tables as t
from ol_dagster.settings import SyncDefinition
from ol_dagster.sync.batch import CleanupOverrides, SyncBusy, cleanup_batch, upload_batch
from ol_dagster_tests.safety.test_cleanup_rules import (  # noqa: F401 (fixtures)
    BUCKET,
    BUCKET_SYSTEM,
    WH,
    Harness,
    calls,
    count,
    datasets,
    definition,
    ds,
    flows,
    h,
    job,
    job_entities,
    job_event,
    jobs,
    pg,
    scopes,
    simple,
)

AIRFLOW_UUID = "44444444-4444-4444-8444-444444444444"


def airflow_definition(**overrides: Any) -> SyncDefinition:
    """The orchestrator's own definition: the DAGs of namespace ``airflow``."""
    return definition(
        name="dags",
        uuid=AIRFLOW_UUID,
        allowedJobNamespaces=["airflow"],
        snapshotMode="ADDITIVE",
        receiver={"token": {"env": "OL_TEST_TOKEN_DAGS"}},
        **overrides,
    )


def post(
    h: Harness, d: SyncDefinition, events: list[dict[str, Any]], *, stream: bool = False
) -> int:
    return h.receive(d, events, stream=stream)


def run_of(namespace: str, name: str, run_id: str, event_type: str, **kw: Any) -> dict[str, Any]:
    event = job(namespace, name, event_type=event_type, **kw)
    event["run"]["runId"] = run_id
    return event


# -- 1. a parent job in another namespace ----------------------------------------------------------


def test_a_parent_in_another_namespace_is_never_a_cutoff_scope_nor_a_job_of_this_definition(
    h: Harness,
):
    dags = airflow_definition()
    h.sync(dags, [simple("airflow", "nightly_dag")], stream=True)
    airflow_flows = {f for f in flows(h.catalog) if f[0].startswith("ol:airflow|")}
    assert airflow_flows
    snap = definition()  # BATCH_SNAPSHOT over [etl]
    report = h.sync(snap, [simple("etl", "load", parent=("airflow", "nightly_dag"))])

    assert report["mode"] == "CUTOFF" and report["skippedReason"] is None
    prefixes = [p for c in calls(report, "flows") for p in c.get("scopePrefixes", [])]
    assert prefixes == ["ol:etl|"]
    assert airflow_flows <= flows(h.catalog)  # the orchestrator's flows are untouched
    # the parent link is kept, and no airflow job is filed in the snapshot's job System
    assert ("ol:etl|load#orchestration", "nightly_dag", "load") in flows(h.catalog)
    assert not {e for e in job_entities(h.catalog) if e[0] == snap.job_system and e[1] != "etl"}

    # the next snapshot removes nothing of the orchestrator either
    h.sync(snap, [simple("etl", "load")])
    assert airflow_flows <= flows(h.catalog)
    assert "airflow.nightly_dag" in jobs(h.catalog)


# -- 2. periodic windows ---------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["ACCUMULATIVE", "COMPLETE_SNAPSHOT"])
@pytest.mark.parametrize("replacement", ["NONE", "JOB"])
def test_periodic_windows_remove_nothing_and_windows_of_one_run_add_up(
    h: Harness, content: str, replacement: str
):
    d = definition(snapshotMode="ADDITIVE", lineageReplacement=replacement)
    run_id = str(uuid.uuid4())
    emission = ("PERIODIC", content)
    h.sync(
        d,
        [
            run_of(
                "etl",
                "stream",
                run_id,
                "RUNNING",
                inputs=[pg("a")],
                outputs=[pg("x")],
                emission=emission,
            )
        ],
        stream=True,
    )
    h.sync(
        d,
        [
            run_of(
                "etl",
                "stream",
                run_id,
                "RUNNING",
                inputs=[pg("b")],
                outputs=[pg("x")],
                emission=emission,
            )
        ],
        stream=True,
    )
    got = {(f[1], f[2]) for f in flows(h.catalog) if f[0] == "ol:etl|stream"}
    assert got == {("shop.public.a", "shop.public.x"), ("shop.public.b", "shop.public.x")}


# -- 3. a run split over batches -------------------------------------------------------------------


def test_a_run_split_over_batches_is_judged_whole(h: Harness):
    d = definition(snapshotMode="ADDITIVE", lineageReplacement="JOB")
    first = str(uuid.uuid4())
    h.sync(
        d, [run_of("etl", "long", first, "START", inputs=[pg("a")], outputs=[pg("x")])], stream=True
    )
    report = h.sync(d, [run_of("etl", "long", first, "COMPLETE")], stream=True)
    assert report["skippedReason"] is None
    assert ("ol:etl|long", "shop.public.a", "shop.public.x") in flows(h.catalog)

    # a later run that completes describing other datasets still replaces the job's lineage
    second = str(uuid.uuid4())
    h.sync(
        d,
        [run_of("etl", "long", second, "START", inputs=[pg("b")], outputs=[pg("x")])],
        stream=True,
    )
    h.sync(d, [run_of("etl", "long", second, "COMPLETE")], stream=True)
    got = {(f[1], f[2]) for f in flows(h.catalog) if f[0] == "ol:etl|long"}
    assert got == {("shop.public.b", "shop.public.x")}


# -- 4. DROP lifecycle events go through the cleanup -----------------------------------------------


def _dropped(name: str) -> dict[str, Any]:
    d = ds(BUCKET, name)
    d["facets"]["lifecycleStateChange"] = {"lifecycleStateChange": "DROP"}
    return d


def _owner_of_bucket(**overrides: Any) -> SyncDefinition:
    return definition(
        datasetSystems=[{"namespace": BUCKET, "system": BUCKET_SYSTEM, "cleanupMode": "CUTOFF"}],
        **overrides,
    )


@pytest.mark.parametrize(
    "guard",
    ["dry_run", "cleanup_disabled", "cap_zero", "no_systems_admin", "none"],
)
def test_a_drop_is_planned_guarded_and_reported_like_any_removal(h: Harness, guard: str):
    overrides: dict[str, Any] = {
        "dry_run": {"outputOptions": {"dryRun": True}},
        "cleanup_disabled": {"cleanup": {"enabled": False}},
        "cap_zero": {"cleanup": {"maxRemovalsPerRun": 0}},
    }.get(guard, {})
    d = _owner_of_bucket(**overrides)
    h.sync(d, [job("etl", "writer", [pg("src")], [ds(BUCKET, "anomalies")])])
    assert (BUCKET_SYSTEM, "anomalies") in datasets(h.catalog)
    if guard == "no_systems_admin":
        h.catalog.set_permissions(h.catalog.user, [])
    report = h.sync(d, [job("etl", "writer", [pg("src")], [_dropped("anomalies")])])

    expected_reason = {
        "dry_run": "DRY_RUN",
        "cleanup_disabled": "CLEANUP_DISABLED",
        "cap_zero": "REMOVAL_CAP_EXCEEDED",
        "no_systems_admin": "CLEANUP_PERMISSION_DENIED",
        "none": None,
    }[guard]
    assert report["skippedReason"] == expected_reason
    if guard == "none":
        assert (BUCKET_SYSTEM, "anomalies") not in datasets(h.catalog)
        (drop,) = calls(report, "drops")
        assert drop["datasets"] == [f"{BUCKET}:anomalies"]
        assert drop["real"]["physicalEntities"] == 1
    else:
        assert (BUCKET_SYSTEM, "anomalies") in datasets(h.catalog)
    if guard in ("dry_run", "cap_zero"):
        (drop,) = calls(report, "drops")
        assert drop["dryRun"]["physicalEntities"] == 1 and drop["real"] is None


def test_a_drop_in_a_system_the_definition_does_not_own_is_reported_and_left(h: Harness):
    d = definition(snapshotMode="ADDITIVE")
    h.sync(d, [job("etl", "writer", [pg("src")], [pg("orders")])])
    dropped = pg("orders")
    dropped["facets"]["lifecycleStateChange"] = {"lifecycleStateChange": "DROP"}
    report = h.sync(d, [job("etl", "writer", [pg("src")], [dropped])])
    assert (WH, "shop.public.orders") in datasets(h.catalog)  # a crawled/unowned System
    assert {"code": "DROP_NOT_OWNED", "dataset": f"{WH}:shop.public.orders"} in report["warnings"]
    assert not calls(report, "drops")


# -- 5. a partial "snapshot" -----------------------------------------------------------------------


def test_a_partial_snapshot_is_stopped_by_the_removal_share_and_can_be_overridden(h: Harness):
    d = definition()  # maxRemovalShare 0.5 by default
    six = [simple("etl", f"job{i}") for i in range(6)]
    first = h.sync(d, six)
    assert first["skippedReason"] is None  # the first sync of an empty catalog is not affected

    report = h.sync(d, six[:1])  # one event sent by hand: 5 of 6 jobs would go
    assert report["skippedReason"] == "REMOVAL_SHARE_EXCEEDED"
    assert report["plannedJobRemovals"] == 5 and report["heldJobs"] == 6
    assert report["plannedRemovals"] <= d.cleanup.maxRemovalsPerRun  # under the absolute cap
    assert jobs(h.catalog) >= {f"etl.job{i}" for i in range(6)}

    # three of six is exactly half: allowed
    h.sync(d, six)
    assert h.sync(d, six[:3])["skippedReason"] is None
    assert {j for j in jobs(h.catalog) if j.startswith("etl.")} == {
        "etl.job0",
        "etl.job1",
        "etl.job2",
    }


def test_the_removal_share_can_be_raised_for_one_run(h: Harness):
    d = definition()
    six = [simple("etl", f"job{i}") for i in range(6)]
    h.sync(d, six)
    batch_id = post(h, d, six[:1])
    run_id = str(uuid.uuid4())
    upload_batch(h.store, h.catalog, d, batch_id, run_id=run_id)
    report = cleanup_batch(
        h.store,
        h.catalog,
        d,
        batch_id,
        run_id=run_id,
        overrides=CleanupOverrides(maxRemovalShare=1.0),
    )
    assert report["skippedReason"] is None
    assert report["override"]["maxRemovalShare"] == 1.0
    assert report["removedJobs"] == [f"etl.job{i}" for i in range(1, 6)]


# -- 6. two syncs at once --------------------------------------------------------------------------


def test_two_syncs_of_one_definition_never_interleave(h: Harness):
    d = definition()
    h.sync(d, [simple("etl", "old1"), simple("etl", "old2"), simple("etl", "keep")])
    older = post(h, d, [simple("etl", "old1"), simple("etl", "old2"), simple("etl", "keep")])
    newer = post(h, d, [simple("etl", "keep"), simple("etl", "new")])

    upload_batch(h.store, h.catalog, d, older, run_id="run-older")  # paused after its upload
    with pytest.raises(SyncBusy) as busy:
        upload_batch(h.store, h.catalog, d, newer, run_id="run-newer")
    assert busy.value.holder == "run-older"
    cleanup_batch(h.store, h.catalog, d, older, run_id="run-older")

    upload_batch(h.store, h.catalog, d, newer, run_id="run-newer")
    report = cleanup_batch(h.store, h.catalog, d, newer, run_id="run-newer")
    assert sorted(report["removedJobs"]) == ["etl.old1", "etl.old2"]
    assert {j for j in jobs(h.catalog) if j.startswith("etl.")} == {"etl.keep", "etl.new"}


def test_a_crashed_holder_does_not_block_and_its_older_snapshot_is_superseded(h: Harness):
    d = definition()
    h.sync(d, [simple("etl", "a"), simple("etl", "b")])
    older = post(h, d, [simple("etl", "a")])
    newer = post(h, d, [simple("etl", "a"), simple("etl", "b"), simple("etl", "c")])
    upload_batch(h.store, h.catalog, d, older, run_id="crashed")  # the run dies here

    def alive(holder: str) -> bool:
        return holder != "crashed"

    upload_batch(h.store, h.catalog, d, newer, run_id="next", is_alive=alive)
    cleanup_batch(h.store, h.catalog, d, newer, run_id="next", is_alive=alive)
    # the crashed run's batch is retried: it is older than a synced snapshot
    done = upload_batch(h.store, h.catalog, d, older, run_id="retry")
    report = cleanup_batch(h.store, h.catalog, d, older, run_id="retry")
    assert done.graph is None and report["skippedReason"] == "SUPERSEDED"
    assert {"etl.a", "etl.b", "etl.c"} <= jobs(h.catalog)


# -- 7. a rename across owners ---------------------------------------------------------------------


def _renamed(namespace: str, name: str, previous: tuple[str, str]) -> dict[str, Any]:
    d = ds(namespace, name)
    d["facets"]["lifecycleStateChange"] = {
        "lifecycleStateChange": "RENAME",
        "previousIdentifier": {"namespace": previous[0], "name": previous[1]},
    }
    return d


def test_a_definition_never_renames_an_object_in_a_system_it_does_not_own(h: Harness):
    owner = _owner_of_bucket()
    h.sync(owner, [job("etl", "writer", [pg("src")], [ds(BUCKET, "scores")])])
    intruder = definition(
        name="other",
        uuid="33333333-3333-4333-8333-333333333333",
        snapshotMode="ADDITIVE",
        allowedJobNamespaces=["other"],
        receiver={"token": {"env": "OL_TEST_TOKEN_OTHER"}},
    )
    h.sync(
        intruder,
        [job("other", "mover", [pg("src")], [_renamed(BUCKET, "moved", (BUCKET, "scores"))])],
        stream=True,
    )
    assert (BUCKET_SYSTEM, "scores") in datasets(h.catalog)
    assert ("ol:etl|writer", "shop.public.src", "scores") in flows(h.catalog)

    # the owner may rename in its own System
    h.sync(
        owner,
        [job("etl", "writer", [pg("src")], [_renamed(BUCKET, "scores_v2", (BUCKET, "scores"))])],
    )
    assert (BUCKET_SYSTEM, "scores_v2") in datasets(h.catalog)


# -- exact counts ----------------------------------------------------------------------------------


def _rows(h: Harness) -> dict[str, int]:
    return {
        "flows": count(h.catalog, t.data_flows) + count(h.catalog, t.field_flows),
        "entities": count(h.catalog, t.entities),
        "fields": count(h.catalog, t.fields),
        "routines": count(h.catalog, t.routines),
        "statements": count(h.catalog, t.statements),
    }


def test_planned_counts_equal_real_counts_and_what_disappeared(h: Harness):
    d = _owner_of_bucket()
    world = [
        job(
            "etl",
            "a",
            [pg("src", ["id"])],
            [ds(BUCKET, "out_a", ["id"])],
            sql="select 1",
            parent=("etl", "dag"),
        ),
        job(
            "etl",
            "b",
            [pg("src", ["id"])],
            [ds(BUCKET, "out_b", ["id"])],
            sql="select 2",
            parent=("etl", "dag"),
        ),
        simple("etl", "keep"),
    ]
    h.sync(d, world)
    before = _rows(h)
    batch_id = post(h, d, [simple("etl", "keep")])
    upload_batch(h.store, h.catalog, d, batch_id, run_id="r")
    report = cleanup_batch(
        h.store, h.catalog, d, batch_id, run_id="r", overrides=CleanupOverrides(maxRemovalShare=1)
    )
    after = _rows(h)
    assert report["skippedReason"] is None
    assert report["removedJobs"] == ["etl.a", "etl.b", "etl.dag"]
    for c in report["calls"]:
        assert c["dryRun"] == c["real"], c
    removed = sum(before.values()) - sum(after.values())
    assert report["plannedRemovals"] == removed
    assert sum(report["removed"].values()) == removed


def test_a_rename_never_moves_an_object_into_a_system_another_definition_owns(h: Harness):
    other_bucket, other_system = "s3://other-bucket", "other-bucket"
    neighbour = definition(
        name="other",
        uuid="33333333-3333-4333-8333-333333333333",
        snapshotMode="ADDITIVE",
        allowedJobNamespaces=["other"],
        datasetSystems=[
            {"namespace": other_bucket, "system": other_system, "cleanupMode": "CUTOFF"}
        ],
        receiver={"token": {"env": "OL_TEST_TOKEN_OTHER"}},
    )
    h.sync(neighbour, [job("other", "w", [pg("src")], [ds(other_bucket, "theirs")])], stream=True)
    # the owner of the first bucket maps the neighbour's bucket to the neighbour's System too
    owner = definition(
        datasetSystems=[
            {"namespace": BUCKET, "system": BUCKET_SYSTEM, "cleanupMode": "CUTOFF"},
            {"namespace": other_bucket, "system": other_system, "cleanupMode": "CUTOFF"},
        ]
    )
    h.sync(owner, [job("etl", "writer", [pg("src")], [ds(BUCKET, "scores")])])
    moved = _renamed(other_bucket, "scores", (BUCKET, "scores"))
    report = h.sync(owner, [job("etl", "writer", [pg("src")], [moved])], stream=True)
    # the neighbour claimed its System (CUTOFF): the new name is never put there, but in a
    # System of the owner's own, into which the owner may move its entity (both are its own)
    own = f"{other_system} [{owner.name}]"
    assert {"code": "SYSTEM_CLAIMED", "system": other_system, "placedIn": own} in report["warnings"]
    assert (BUCKET_SYSTEM, "scores") not in datasets(h.catalog)  # moved, with its flow
    assert {(own, "scores"), (other_system, "theirs")} <= datasets(h.catalog)
    assert (other_system, "scores") not in datasets(h.catalog)
    assert ("ol:etl|writer", "shop.public.src", "scores") in {
        (f[0], f[1], f[2]) for f in flows(h.catalog)
    }


# -- found by the reference model (beyond the seven classes) ---------------------------------------


def test_a_run_split_over_two_snapshots_is_judged_whole(h: Harness):
    d = definition()  # BATCH_SNAPSHOT, lineageReplacement NONE
    run_id = str(uuid.uuid4())
    h.sync(d, [run_of("etl", "load", run_id, "START", inputs=[pg("a")], outputs=[pg("b")])])
    report = h.sync(d, [run_of("etl", "load", run_id, "RUNNING")])  # the run's next part only
    assert report["mode"] == "CUTOFF" and report["skippedReason"] is None
    assert ("ol:etl|load", "shop.public.a", "shop.public.b") in flows(h.catalog)


def test_a_failed_upload_stays_pending_even_when_cleanup_is_disabled(h: Harness):
    d = definition(cleanup={"enabled": False})
    batch_id = post(h, d, [simple("etl", "load")])
    with h.catalog.engine.begin() as conn:  # the catalog refuses the upload: a real fault
        conn.exec_driver_sql("DROP TABLE cat_run_metrics")
    upload_batch(h.store, h.catalog, d, batch_id, run_id="r1")
    report = cleanup_batch(h.store, h.catalog, d, batch_id, run_id="r1")
    assert report["skippedReason"] == "UPLOAD_FAILED"
    assert h.store.get_batch(batch_id).status.value == "failed"  # kept for a retry


def test_a_run_split_over_stream_batches_gets_its_flows_when_it_ends(h: Harness):
    d = definition(snapshotMode="ADDITIVE")
    run_id = str(uuid.uuid4())
    h.sync(d, [run_of("etl", "load", run_id, "START", inputs=[pg("a")])], stream=True)
    assert not [f for f in flows(h.catalog) if f[0] == "ol:etl|load"]
    h.sync(d, [run_of("etl", "load", run_id, "COMPLETE", outputs=[pg("b")])], stream=True)
    assert ("ol:etl|load", "shop.public.a", "shop.public.b") in flows(h.catalog)


def test_a_snapshot_sent_again_with_its_run_ids_is_read_back_once(h: Harness):
    from ol_dagster.sync.graph import batch_events

    d = definition()
    events = [
        run_of("etl", "load", "11111111-1111-4111-8111-000000000001", "COMPLETE", outputs=[pg("b")])
    ]
    for _ in range(3):
        batch_id = post(h, d, events)
    judged = list(batch_events(h.store, d, h.store.get_batch(batch_id))())
    assert len(judged) == 1  # not one copy per earlier post
