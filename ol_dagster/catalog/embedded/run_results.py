"""The run results an upload writes every time: quality checks, in their job's suite, and run
metrics. They are new at every run, so neither is stamped nor confirmed (``stamps``, ``confirm``):
each is written as the run says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from sqlalchemy import Connection, select

from ol_dagster.catalog.embedded import tables as t
from ol_dagster.catalog.embedded.bulk import Bulk, batched, naive
from ol_dagster.catalog.embedded.refusals import Refused, isolated
from ol_dagster.catalog.name_keys import among, name_key
from ol_dagster.lineage import LineageGraph
from ol_dagster.lineage.graph import NodeKey


def quality(
    bulk: Bulk,
    conn: Connection,
    graph: LineageGraph,
    now: datetime,
    upload_id: str,
    refused: list[Refused],
) -> tuple[int, int, int]:
    """Every quality check of the graph, in its job's suite: written, updated, touched."""
    checks = graph.quality_checks.values()
    suites = sorted({f"{q.job[0]}.{q.job[1]}" for q in checks})
    suite_ids: dict[str, int] = {}
    stmt = bulk.insert(t.quality_suites).on_conflict_do_nothing(index_elements=["code_key"])

    def add_suites(codes: Sequence[str]) -> list[None]:
        conn.execute(stmt, [{"code": c, "code_key": name_key(c)} for c in codes])
        return []

    def refuse_suite(code: str, reason: str) -> None:
        refused.append(Refused(t.quality_suites.name, code, {"code": code}, reason))

    for chunk in batched(suites):
        isolated(conn, chunk, add_suites, refuse_suite)
        for sid, code in conn.execute(
            select(t.quality_suites.c.id, t.quality_suites.c.code).where(
                among(t.quality_suites, "code_key", chunk)
            )
        ):
            suite_ids[code] = sid
    rows = [
        {
            "suite_id": suite_ids[suite],
            "code": f"{q.dataset[0]}:{q.dataset[1]}|{q.name}|{q.column or ''}",
            "dataset": f"{q.dataset[0]}:{q.dataset[1]}",
            "assertion": q.name,
            "column_name": q.column,
            "enabled": True,
            "last_success": q.success,
            "last_checked": naive(q.checked_at) if q.checked_at else None,
            "last_update": now,
        }
        for q in checks
        if (suite := f"{q.job[0]}.{q.job[1]}") in suite_ids
    ]
    _, (written, updated) = bulk.upsert(
        conn,
        t.quality_checks,
        rows,
        ["suite_id", "code"],
        ["enabled", "last_success", "last_checked", "last_update"],
        upload_id,
        refused=refused,
    )
    return written, updated, len(rows) - written


def metrics(
    bulk: Bulk,
    conn: Connection,
    graph: LineageGraph,
    job_sys: Mapping[NodeKey, str],
    job_ids: Mapping[NodeKey, int],
    refused: list[Refused],
) -> None:
    """The run metrics of this definition's jobs that ran (not counted: their rows carry no
    upload's id)."""
    rows = []
    for key, j in graph.jobs.items():
        m = j.metrics
        if not m.runs or key not in job_sys or key not in job_ids:
            continue  # another definition's job (not touched), or its entity was refused
        rows.append(
            {
                "entity_id": job_ids[key],
                "runs": m.runs,
                "failures": m.failures,
                "first_run": naive(m.first_run) if m.first_run else None,
                "last_run": naive(m.last_run) if m.last_run else None,
                "last_duration_seconds": m.last_duration_seconds,
                "last_status": m.last_status,
                "rows_read": m.rows_read,
                "rows_written": m.rows_written,
                "bytes_read": m.bytes_read,
                "bytes_written": m.bytes_written,
            }
        )
    bulk.upsert_plain(conn, t.run_metrics, rows, ["entity_id"], refused)
