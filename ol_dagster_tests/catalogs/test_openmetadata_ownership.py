"""OpenMetadata's cleanup deletes only the edges OpenMetadata says ol-dagster wrote.

OpenMetadata keeps one edge per pair of entities and every write replaces it, stamped with the
writer's user (``lineageDetails.updatedBy``) and how it came (``source``). The fake does the same
(``fakes/openmetadata_fake.py``, citing ``LineageRepository.addLineage`` and ``CollectionDAO``).
Through the real client and the fake, with three users: ol-dagster's bot, a person (``alice``,
``PUT /api/v1/lineage``) and another OpenLineage producer with its own bot (``spark-bot``, the
same batch endpoint, so the same ``source``). Assertions are on the edges an OpenMetadata user
sees and on the cleanup report.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ol_dagster.catalog.openmetadata.owners import CATALOG_WIDE, FOREIGN
from ol_dagster.defs.results import BATCH_CLEANUP_CHECKS, cleanup_result
from ol_dagster_tests.catalogs.test_openmetadata_lineage_delete import (
    BOT,
    DROP,
    JWT,
    KEEP,
    OTHER,
    OTHER_JWT,
    PERSON,
    TOKEN_ENV,
    Env,
    edge_entries,
    flows_call,
    fqn,
    running,
)
from ol_dagster_tests.fakes.harness import NS, calls, definition, ds, pg, run

LAKE = "s3://lake"
CONTAINER = "lake-store.lake.orders"


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, JWT)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    with running(tmp_path) as e:
        for table in ("orders", "kpi", "report"):
            e.fake.add_table(fqn(table))
        yield e


def keep() -> dict[str, Any]:
    return run(KEEP, [pg("orders")], [pg("kpi")])


def dropped() -> dict[str, Any]:
    return run(DROP, [pg("kpi")], [pg("report")])


def theirs() -> tuple[str, str]:
    return fqn("kpi"), fqn("report")


def deletes_of(env: Env, src: str, dst: str) -> list[Any]:
    ids = (env.fake.table_id(src), env.fake.table_id(dst))
    return [r for r in env.fake.server.seen("DELETE") if all(i in r.path for i in ids)]


def post_as_another_producer(env: Env, event: dict[str, Any]) -> None:
    with env.user(OTHER_JWT) as client:
        answer = client.post("/api/v1/openlineage/lineage/batch", json={"events": [event]})
    assert answer.status_code == 200, answer.text


# == before the first upload =======================================================================


def test_a_manual_edge_there_before_the_first_upload_survives_every_later_cleanup(env: Env):
    """The upload overwrites alice's edge (OpenMetadata keeps one per pair: it then reads as
    ol-dagster's), but it was read before: it is recorded as hers and never deleted, however
    often the flow comes and goes. ol-dagster's own edge next to it still goes."""
    assert env.add_manual_edge(*theirs()).status_code == 200
    catalog = env.catalog()

    first = env.syncer.sync(catalog, definition(), [keep(), dropped()])

    assert first.result.succeeded, first.result.failed
    assert env.fake.edges[theirs()]["updatedBy"] == BOT  # overwritten: last writer wins
    (entry,) = [i for i in edge_entries(catalog) if i.payload["to"]["fqn"] == fqn("report")]
    assert entry.payload["owner"] == {"ours": False, "by": PERSON, "source": "Manual"}
    for _ in range(2):  # the flow goes, comes back, goes again
        gone = env.syncer.sync(catalog, definition(), [keep()])
        assert gone.report["removedJobs"] == [f"{NS}.{DROP}"]
        assert flows_call(gone)["outcomes"] == {"kept": {"dataFlows": 1}}
        assert gone.report["keptBy"] == {PERSON: 1}
        assert theirs() in env.fake.edge_pairs()
        back = env.syncer.sync(catalog, definition(), [keep(), dropped()])
        assert back.result.succeeded

    assert deletes_of(env, *theirs()) == []
    recorded = catalog.ledger.all(FOREIGN, CATALOG_WIDE)
    assert [(i.payload["by"], i.payload["from"], i.payload["to"]) for i in recorded] == [
        (PERSON, *theirs())
    ]
    # ol-dagster's own edge still goes when its flow does
    env.syncer.sync(catalog, definition(), [dropped()])
    assert (fqn("orders"), fqn("kpi")) not in env.fake.edge_pairs()


def test_another_openlineage_producers_edge_there_before_the_first_upload_survives(env: Env):
    """The same ``source`` (OpenLineage) is no evidence: its writer is another user."""
    post_as_another_producer(env, run("spark.job", [pg("kpi")], [pg("report")]))
    assert env.fake.edges[theirs()]["source"] == "OpenLineage"
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), [keep(), dropped()])

    synced = env.syncer.sync(catalog, definition(), [keep()])

    assert synced.report["keptBy"] == {OTHER: 1}
    assert theirs() in env.fake.edge_pairs()
    assert deletes_of(env, *theirs()) == []


def test_an_edge_its_owner_removed_is_ol_dagsters_once_it_writes_it_again(env: Env):
    """The record of alice's edge holds while her edge could be under ol-dagster's; once the
    pair was read empty before an upload, the edge that upload writes is ol-dagster's."""
    assert env.add_manual_edge(*theirs()).status_code == 200
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), [keep(), dropped()])
    with env.user() as alice:
        path = f"/api/v1/lineage/table/name/{fqn('kpi')}/table/name/{fqn('report')}"
        assert alice.delete(path).status_code == 200
    env.syncer.sync(catalog, definition(), [keep()])

    env.syncer.sync(catalog, definition(), [keep(), dropped()])  # written again, read empty first
    assert catalog.ledger.all(FOREIGN, CATALOG_WIDE) == []
    synced = env.syncer.sync(catalog, definition(), [keep()])

    assert flows_call(synced)["real"] == {"dataFlows": 1}
    assert theirs() not in env.fake.edge_pairs()


def test_a_second_definition_writing_someone_elses_pair_keeps_it_too(env: Env):
    """The record is the catalog's, not one definition's: the second definition to write the
    pair reads it as ol-dagster's (the first overwrote it) but the record says whose it was."""
    assert env.add_manual_edge(*theirs()).status_code == 200
    snap = env.catalog("snap")
    env.syncer.sync(snap, definition(), [keep(), dropped()])
    other = env.catalog("other")
    other_definition = definition(name="other", uuid="33333333-3333-4333-8333-333333333333")
    env.syncer.sync(other, other_definition, [dropped()])

    env.syncer.sync(snap, definition(), [keep()])
    synced = env.syncer.sync(other, other_definition, [run("etl.else", [pg("a")], [pg("b")])])

    assert synced.report["keptBy"] == {PERSON: 1}
    assert theirs() in env.fake.edge_pairs()


# == before a delete ===============================================================================


def test_an_edge_another_producer_wrote_over_since_is_kept_and_said_to_be_theirs(env: Env):
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), [keep(), dropped()])
    post_as_another_producer(env, run("spark.job", [pg("kpi")], [pg("report")]))

    synced = env.syncer.sync(catalog, definition(), [keep()])

    call = flows_call(synced)
    assert call["outcomes"] == {"kept": {"dataFlows": 1}} and call["keptBy"] == {OTHER: 1}
    assert env.fake.edges[theirs()]["updatedBy"] == OTHER
    assert deletes_of(env, *theirs()) == []
    # the cleanup's summary in the Dagster UI says whose it is
    summary = cleanup_result(synced.report, BATCH_CLEANUP_CHECKS).metadata["summary"].value
    assert f"**kept by**: {OTHER} 1" in str(summary)


def test_an_edge_ol_dagsters_user_drew_by_hand_is_not_its_upload_and_is_kept(env: Env):
    """Its user, but not through the OpenLineage endpoint (``source`` Manual): kept."""
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), [keep(), dropped()])
    with env.user(JWT) as bot:
        body = {
            "edge": {
                "fromEntity": {"id": env.fake.table_id(fqn("kpi")), "type": "table"},
                "toEntity": {"id": env.fake.table_id(fqn("report")), "type": "table"},
            }
        }
        assert bot.put("/api/v1/lineage", json=body).status_code == 200

    synced = env.syncer.sync(catalog, definition(), [keep()])

    assert synced.report["keptBy"] == {BOT: 1}
    assert env.fake.edges[theirs()]["source"] == "Manual"


def test_ol_dagsters_own_edges_are_removed_and_nothing_is_said_kept(env: Env):
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), [keep(), dropped()])

    synced = env.syncer.sync(catalog, definition(), [keep()])

    assert flows_call(synced)["real"] == {"dataFlows": 1}
    assert synced.report["keptBy"] == {} and synced.report["kept"] == {}
    assert env.fake.edge_pairs() == {(fqn("orders"), fqn("kpi"))}


# == containers and pipelines ======================================================================


def test_an_edge_from_a_container_is_recorded_and_removed_like_a_tables(env: Env):
    """A storage dataset no table matches is the container at its path (2.1); the edge is read
    back through the table's lineage and the container's ``fullPath``, and deleted by type."""
    env.fake.add_container(CONTAINER, f"{LAKE}/raw/orders")
    env.fake.add_container("lake-store.lake.other", f"{LAKE}/raw/other")  # not this one
    catalog = env.catalog()
    load = run(DROP, [ds(LAKE, "raw/orders")], [pg("kpi")])
    env.fake.add_edge("lake-store.lake.other", fqn("kpi"), source="Manual")

    first = env.syncer.sync(catalog, definition(), [keep(), load])

    assert first.result.succeeded, first.result.failed
    assert (CONTAINER, fqn("kpi")) in env.fake.edge_pairs()
    (entry,) = [i for i in edge_entries(catalog) if i.payload["from"]["type"] == "container"]
    assert entry.payload["from"]["id"] == env.fake.table_id(CONTAINER)
    assert entry.payload["owner"]["ours"] is True

    second = env.syncer.sync(catalog, definition(), [keep()])

    assert flows_call(second)["real"] == {"dataFlows": 1}
    assert (CONTAINER, fqn("kpi")) not in env.fake.edge_pairs()
    assert ("lake-store.lake.other", fqn("kpi")) in env.fake.edge_pairs()
    (delete,) = env.fake.server.seen("DELETE")
    assert delete.path.startswith("/api/v1/lineage/container/")


def test_a_pipeline_openmetadata_2_0_made_for_a_job_is_left_and_counted(tmp_path: Path):
    """2.0 makes a pipeline per job under its ``openlineage`` service, with no writer recorded,
    shared by any producer of a job of that name: the job's edges go, its pipeline stays, and
    the report counts it."""
    with running(tmp_path) as env:
        env.fake.generation = 1
        catalog = env.catalog()
        env.syncer.sync(catalog, definition(), [keep(), dropped()])
        made = set(env.fake.pipelines)
        assert made == {'openlineage."repo-etl.keep"', 'openlineage."repo-etl.dropped"'}

        synced = env.syncer.sync(catalog, definition(), [keep()])

        assert synced.report["removedJobs"] == [f"{NS}.{DROP}"]
        assert synced.report["left"] == {"pipelines": 1}
        assert set(env.fake.pipelines) == made
        assert [c.get("left") for c in calls(synced.report, "flows")] == [None]


# == what the server refuses =======================================================================


@pytest.mark.parametrize("token", [JWT, None])
@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/api/v1/openlineage/lineage/batch"), ("PUT", "/api/v1/lineage")],
)
def test_a_body_that_is_not_json_is_refused_415_before_the_token_is_read(
    env: Env, method: str, path: str, token: str | None
):
    """``@Consumes(APPLICATION_JSON)``: Jersey answers 415 before any filter runs, whatever
    the body (here one the server would take as JSON)."""
    body: dict[str, Any] = (
        {"events": [keep()]}
        if method == "POST"
        else {
            "edge": {
                "fromEntity": {"id": env.fake.table_id(fqn("kpi")), "type": "table"},
                "toEntity": {"id": env.fake.table_id(fqn("report")), "type": "table"},
            }
        }
    )
    headers = {"Content-Type": "text/plain"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    with httpx.Client(base_url=env.url) as client:
        answer = client.request(method, path, content=json.dumps(body), headers=headers)

    assert answer.status_code == 415
    assert answer.json() == {"code": 415, "message": "HTTP 415 Unsupported Media Type"}
    assert env.fake.edge_pairs() == set() and env.fake.received == []


def test_every_body_the_client_sends_is_json(env: Env):
    catalog = env.catalog()
    env.syncer.sync(catalog, definition(), [keep(), dropped()])
    env.syncer.sync(catalog, definition(), [keep()])

    bodies = [r for r in env.fake.server.requests if r.method in ("POST", "PUT")]
    assert bodies and {r.headers.get("content-type") for r in bodies} == {"application/json"}
