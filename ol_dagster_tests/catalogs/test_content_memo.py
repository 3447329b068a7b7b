"""The content digests an upload keeps for the next upload of the same lineage (``memo``).

An unchanged snapshot's graph has the lineage of the one before (``LineageGraph.lineage_digest``,
set by the sync): its upload takes the digests kept by the last upload instead of hashing every
job and dataset again. Taken digests are what the upload compares with the catalog's; so a kept
digest that is not the catalog's (here written by hand) makes its job sent again, which shows
that the upload took it, and a graph whose placement, job Systems or collections differ is
hashed again.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from sqlalchemy import select, update

from ol_dagster.catalog.embedded import changes, memo
from ol_dagster.catalog.embedded import tables as t
from ol_dagster.catalog.systems import owned_jobs
from ol_dagster.lineage import LineageGraph
from ol_dagster_tests.catalogs.test_embedded_catalog import graph_of
from ol_dagster_tests.catalogs.test_upload_change_detection import (  # noqa: F401 (fixture)
    URL,
    Tracked,
    counts,
    definition,
    install_sent_log,
    new_url,
    shop,
    take_sent,
)

LINEAGE = b"the lineage of the shop".ljust(32, b".")
KPI = ("etl", "build_kpi")


def _kept(tracked: Tracked) -> changes.Contents:
    with tracked.catalog.engine.connect() as conn:
        data = conn.execute(select(t.content_memo.c.contents)).scalar_one()
    return memo._decoded(data).contents


def _with_lineage(graph: LineageGraph) -> LineageGraph:
    graph.lineage_digest = LINEAGE
    return graph


def test_an_upload_takes_the_digests_kept_for_the_same_lineage(
    new_url: URL,  # noqa: F811 (fixture)
    tmp_path: Path,
) -> None:
    d = definition(tmp_path)
    fast, full = Tracked(new_url()), Tracked(new_url(), detect_changes=False)
    try:
        first = _with_lineage(graph_of(shop(hour=2), d))
        for c in (fast, full):
            c.upload(first, d)
        # kept: the digests hashing gives
        assert _kept(fast) == changes.contents(first, owned_jobs(first, d))

        # a kept digest that is not the one the catalog holds: its job is sent again
        kept = _kept(fast)
        kept.jobs[KPI] = replace(kept.jobs[KPI], digest="0" * 32)
        with fast.catalog.engine.begin() as conn:
            conn.execute(
                update(t.content_memo).values(
                    contents=memo._encoded(kept, first, owned_jobs(first, d))
                )
            )
        install_sent_log(fast.catalog)
        second = [c.upload(_with_lineage(graph_of(shop(hour=3), d)), d) for c in (fast, full)]

        assert second[0].result.content_digests is not None
        assert second[0].result.content_digests["job"][KPI] == "0" * 32
        sent = {(tbl, row.get("schema"), row.get("name")) for tbl, row in take_sent(fast.catalog)}
        assert (t.entities.name, *KPI) in sent
        assert {(schema, name) for tbl, schema, name in sent if tbl == t.entities.name} == {KPI}
        # and the catalog is what a full re-send leaves, counts included
        assert counts(second[0].result) == counts(second[1].result)
        assert fast.dump() == full.dump()
    finally:
        fast.close()
        full.close()


def test_the_digests_are_named_by_every_input_of_them(tmp_path: Path) -> None:
    d = definition(tmp_path)
    graph = _with_lineage(graph_of(shop(hour=2), d))
    systems = owned_jobs(graph, d)
    key = memo.memo_key(graph, systems)
    assert key is not None and key == memo.memo_key(graph_of_again(graph), systems)

    assert memo.memo_key(replace(graph, lineage_digest=None), systems) is None
    assert memo.memo_key(replace(graph, lineage_digest=b"another".ljust(32)), systems) != key
    # a dataset placed in another System (a claimed one)
    first = next(iter(graph.datasets))
    moved = {**graph.datasets, first: replace(graph.datasets[first], system="elsewhere")}
    assert memo.memo_key(replace(graph, datasets=moved), systems) != key
    # another job System
    assert memo.memo_key(graph, {**systems, KPI: "other_jobs"}) != key
    # a graph changed after its lineage was named
    fewer = set(graph.field_flows)
    fewer.pop()
    assert memo.memo_key(replace(graph, field_flows=fewer), systems) != key


def graph_of_again(graph: LineageGraph) -> LineageGraph:
    """The same lineage, new run facts: what a whole reuse gives."""
    return replace(graph, quality_checks={}, completed_jobs=set())


def test_kept_digests_that_cannot_be_read_are_made_again(tmp_path: Path) -> None:
    d = definition(tmp_path)
    fast = Tracked(f"sqlite:///{tmp_path / 'memo.db'}")
    try:
        fast.upload(_with_lineage(graph_of(shop(hour=2), d)), d)
        with fast.catalog.engine.begin() as conn:
            conn.execute(update(t.content_memo).values(contents=b"not what was kept"))

        graph = _with_lineage(graph_of(shop(hour=3), d))
        second = fast.upload(graph, d)

        made = changes.contents(graph, owned_jobs(graph, d))
        assert second.result.content_digests == made.digests()
        assert second.result.failed == [] and not any(second.result.written.values())
        assert _kept(fast) == made  # kept again, readable
    finally:
        fast.close()


def test_an_edited_snapshot_takes_the_kept_digests_of_the_jobs_it_took_unchanged(
    new_url: URL,  # noqa: F811 (fixture)
    tmp_path: Path,
) -> None:
    """A graph that took jobs unchanged from the one the digests were kept for
    (``LineageGraph.unchanged_since``) takes their kept digests and hashes the others: a kept
    digest written by hand is taken for a job told unchanged (so it is sent again), not for a
    job that changed (its SQL here), nor when the graph took its jobs from another lineage."""
    d = definition(tmp_path)
    fast, full = Tracked(new_url()), Tracked(new_url(), detect_changes=False)
    anomalies = ("features", "export_anomalies")
    try:
        first = _with_lineage(graph_of(shop(hour=2), d))
        for c in (fast, full):
            c.upload(first, d)
        systems = owned_jobs(first, d)
        forged = _kept(fast)
        for key in (KPI, anomalies):
            forged.jobs[key] = replace(forged.jobs[key], digest="0" * 32)
        with fast.catalog.engine.begin() as conn:
            conn.execute(
                update(t.content_memo).values(contents=memo._encoded(forged, first, systems))
            )

        def edited(since: bytes) -> LineageGraph:
            graph = graph_of(shop(hour=3, kpi_sql="select 2 as total"), d)
            graph.lineage_digest = b"the edited lineage".ljust(32, b".")
            graph.unchanged_since = (since, frozenset({anomalies}))  # not KPI: its SQL changed
            return graph

        other = b"another lineage".ljust(32, b".")
        elsewhere, _ = [c.upload(edited(other), d).result for c in (fast, full)]
        assert elsewhere.content_digests is not None
        assert "0" * 32 not in elsewhere.content_digests["job"].values()

        # the digests kept for ``first`` again, forged again
        with fast.catalog.engine.begin() as conn:
            conn.execute(
                update(t.content_memo).values(
                    memo_key=memo.memo_key(first, systems),
                    contents=memo._encoded(forged, first, systems),
                )
            )
        install_sent_log(fast.catalog)
        second = [c.upload(edited(LINEAGE), d) for c in (fast, full)]
        digests = second[0].result.content_digests
        assert digests is not None
        assert digests["job"][anomalies] == "0" * 32  # taken: so sent again
        assert digests["job"][KPI] != "0" * 32  # changed: hashed
        sent = {(tbl, row.get("schema"), row.get("name")) for tbl, row in take_sent(fast.catalog)}
        assert (t.entities.name, *anomalies) in sent
        assert counts(second[0].result) == counts(second[1].result)
        assert fast.dump() == full.dump()
    finally:
        fast.close()
        full.close()
