"""The ownership verdict on its own (``ol_dagster.ownership``), without a catalog or Dagster: which
namespaces a batch's cutoff covers, which dataset Systems it may clean and how, where another
definition's datasets go, and the removal share per kind."""

from __future__ import annotations

from typing import Any

import pytest

from ol_dagster.ownership import (
    CUTOFF,
    DAYS,
    NO_JOB_DESCRIBED,
    OTHER_OWNER,
    SHARED_NAMESPACE,
    BatchShape,
    SystemInfo,
    decide,
    keeps_cutoff,
    placements,
    share_exceeded,
)
from ol_dagster.settings import SyncDefinition

ME = "11111111-1111-4111-8111-111111111111"
OTHER = "22222222-2222-4222-8222-222222222222"


def definition(**overrides: Any) -> SyncDefinition:
    data: dict[str, Any] = {
        "name": "snap",
        "uuid": ME,
        "catalog": "main",
        "snapshotMode": "BATCH_SNAPSHOT",
        "allowedJobNamespaces": ["etl"],
        "receiver": {"token": {"env": "OL_TEST_TOKEN_SNAP"}},
    }
    data.update(overrides)
    return SyncDefinition.model_validate(data)


def system(name: str, owner: str | None, mode: str = "CUTOFF") -> SystemInfo:
    props: dict[str, Any] = {"name": name, "cleanupMode": mode, "cleanupDays": 7}
    if owner:
        props["openLineageOwner"] = owner
    return SystemInfo.of(props)


@pytest.mark.parametrize(
    ("patterns", "shared", "keeps"),
    [
        (["etl"], [], True),
        (["spark?"], [], False),
        (["spark[12]"], [], False),
        (["etl*"], [], False),
        (["etl", "ml"], [], False),
        (["etl"], ["common"], False),
    ],
)
def test_cutoff_on_a_dataset_system_needs_one_literal_namespace(
    patterns: list[str], shared: list[str], keeps: bool
):
    d = definition(allowedJobNamespaces=patterns, sharedJobNamespaces=shared)
    assert keeps_cutoff(d, system("lake", ME)) is keeps
    # never on a System another definition created, nor on one nobody created
    assert keeps_cutoff(d, system("lake", OTHER)) is False
    assert keeps_cutoff(d, system("lake", None)) is False


def test_a_snapshot_cuts_off_the_namespaces_it_alone_writes_and_ages_the_shared_ones():
    d = definition(allowedJobNamespaces=["etl"], sharedJobNamespaces=["common"])
    v = decide(d, BatchShape(True, ("etl", "common", "elsewhere")), {})
    assert v.mode == CUTOFF
    assert v.cutoff_namespaces == ("etl",)
    assert v.days_namespaces == ("common",)
    reasons = {s.what: s.reason for s in v.skipped}
    assert reasons["namespace:common"] == SHARED_NAMESPACE
    assert "namespace:elsewhere" in reasons  # not admitted: never a scope


def test_a_snapshot_that_describes_no_job_cleans_no_dataset_system_by_cutoff():
    d = definition(allowedJobNamespaces=["etl"])
    systems = {"lake": system("lake", ME)}
    v = decide(d, BatchShape(True, (), dataset_systems=("lake",)), systems)
    assert v.cutoff_namespaces == ()
    assert all(c.mode != CUTOFF for c in v.dataset_systems)
    assert any(s.reason == NO_JOB_DESCRIBED for s in v.skipped)

    described = decide(d, BatchShape(True, ("etl",), dataset_systems=("lake",)), systems)
    assert [(c.system, c.mode) for c in described.dataset_systems] == [("lake", CUTOFF)]


def test_a_system_another_definition_created_is_never_cleaned():
    d = definition()
    systems = {"theirs": system("theirs", OTHER), "mine": system("mine", ME, "DAYS")}
    v = decide(d, BatchShape(True, ("etl",), dataset_systems=("theirs", "mine")), systems)
    assert [(c.system, c.mode, c.days) for c in v.dataset_systems] == [("mine", DAYS, 7)]
    assert {(s.what, s.reason) for s in v.skipped} == {("system:theirs", OTHER_OWNER)}


def test_a_job_event_in_a_shared_namespace_replaces_nothing():
    d = definition(snapshotMode="ADDITIVE", sharedJobNamespaces=["common"])
    v = decide(
        d, BatchShape(False, ("etl", "common"), described_jobs=(("etl", "a"), ("common", "b"))), {}
    )
    assert v.replaced_jobs == (("etl", "a"),)
    assert v.days_namespaces == ("common", "etl")


def test_datasets_of_a_system_another_definition_claimed_are_placed_in_their_own():
    d = definition(name="add", uuid=OTHER)
    catalog = {
        "lake": system("lake", ME, "CUTOFF"),  # claimed by ``snap``
        "shared": system("shared", ME, "DAYS"),  # created by ``snap``, shared by policy
        "crawled": system("crawled", None, "NONE"),
        "own": system("own", OTHER, "CUTOFF"),
    }
    wanted = ["lake", "shared", "crawled", "own", "new"]
    assert placements(d, wanted, catalog) == {"lake": "lake [add]"}


def test_the_removal_share_is_judged_per_kind():
    held = {"jobs": 10, "datasets": 4, "fields": 0, "dataFlows": 20}
    assert share_exceeded({"jobs": 1, "datasets": 3}, held, 0.5) == ["datasets"]
    assert share_exceeded({"jobs": 5, "datasets": 2, "dataFlows": 10}, held, 0.5) == []
    assert share_exceeded({"fields": 99}, held, 0.5) == []  # nothing held of that kind
    # a batch that keeps its jobs but loses most of their flows
    assert share_exceeded({"dataFlows": 11}, held, 0.5) == ["dataFlows"]
    # a removed job's flows go with it: the job share judges them
    assert share_exceeded({"jobs": 6, "dataFlows": 11}, held, 0.5) == ["jobs"]
    assert share_exceeded({"jobs": 1, "dataFlows": 20}, held, 0.5) == []
    # a removed dataset's fields go with it; columns lost from kept datasets are judged
    held_fields = {**held, "fields": 10}
    assert share_exceeded({"datasets": 1, "fields": 9}, held_fields, 0.5) == []
    assert share_exceeded({"fields": 9}, held_fields, 0.5) == ["fields"]
    # column-level flows on their own: a batch that keeps its data flows but loses most of its
    # column lineage is stopped; a removed job's column flows go with it
    held_columns = {**held, "fieldFlows": 10}
    assert share_exceeded({"dataFlows": 1, "fieldFlows": 6}, held_columns, 0.5) == ["fieldFlows"]
    assert share_exceeded({"jobs": 1, "fieldFlows": 10}, held_columns, 0.5) == []
