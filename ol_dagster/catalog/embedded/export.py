"""What a definition has synced into the embedded catalog, as the lineage state of the asset graph.

After each sync the catalog (after its cleanup, so what it holds is what producers still describe)
is read once for the definition: its jobs (in the job Systems it marks), the data flows of their
scopes with the datasets at both ends, those datasets' fields, and the field flows. Dagster builds
its external assets from this state at load, never from the catalog.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from typing import Any

from sqlalchemy import Connection, Row, Select, Table, func, or_, select

from ol_dagster.catalog.embedded import tables as t
from ol_dagster.catalog.embedded.changes import digest
from ol_dagster.catalog.embedded.confirm import seen
from ol_dagster.catalog.name_keys import among, name_key
from ol_dagster.lineage.graph import flow_scope, orchestration_scope
from ol_dagster.lineage_state import (
    ColumnLineageState,
    DatasetPart,
    DatasetState,
    JobPart,
    JobState,
    LineageState,
    new_state,
)

_FETCH = 5_000  # rows per fetch

# scopes per ``IN`` list when only some jobs are exported (SQLite allows 32,766 parameters)
_CHUNK = 500


JobKey = tuple[str, str]  # (namespace, name)


def export_state(
    conn: Connection, uuid: str, allowed: Callable[[str], bool], max_jobs: int | None = None
) -> LineageState:
    """``allowed(namespace) -> bool`` filters the job namespaces of the definition. With
    ``max_jobs``, only that many jobs are exported, newest first by their last run (as the
    asset graph orders them: ``defs.lineage_assets.newest_jobs``; jobs that never reported a run
    last, by last update; ties by namespace and name), with only their flows and datasets: the
    asset graph shows no more (``assetGraph.maxJobs``), and a sync of a 100,000-job definition
    should not read and store them all each time. ``jobsNotShown`` counts the others."""
    jobs, job_ids, newest = _jobs(conn, uuid, allowed)
    not_shown = 0
    if max_jobs is not None and len(jobs) > max_jobs:
        kept = _newest(newest, max_jobs)
        not_shown = len(jobs) - len(kept)
        jobs = {k: v for k, v in jobs.items() if k in kept}
        job_ids = {i: k for i, k in job_ids.items() if k in kept}
    scopes = sorted(flow_scope(*k) for k in jobs) if not_shown else None
    dataset_ids = _data_flows(conn, jobs, scopes)
    datasets = _datasets(conn, sorted(dataset_ids))
    columns = _column_lineage(conn, jobs, datasets, scopes)
    return new_state(
        jobs.values(), datasets.values(), _parents(conn, job_ids), columns, not_shown=not_shown
    )


def _newest(newest: dict[JobKey, tuple[bool, Any, Any]], max_jobs: int) -> set[JobKey]:
    """The ``max_jobs`` newest jobs (see ``export_state``)."""
    return set(sorted(sorted(newest), key=newest.__getitem__, reverse=True)[:max_jobs])


def _jobs(
    conn: Connection, uuid: str, allowed: Callable[[str], bool], ids: set[int] | None = None
) -> tuple[dict[JobKey, JobState], dict[int, JobKey], dict[JobKey, tuple[bool, Any, Any]]]:
    """The definition's jobs (in the job Systems it marks, of its namespaces; of ``ids`` only
    when given), by their key and by their entity id, and how new each is (whether it ran, its
    last run or update)."""
    e = t.entities.c
    job_systems = _job_systems(conn, uuid)
    of_ids = [] if ids is None else [e.id.in_(chunk) for chunk in _id_chunks(sorted(ids))]
    jobs: dict[JobKey, JobState] = {}
    job_ids: dict[int, JobKey] = {}
    newest: dict[JobKey, tuple[bool, Any, Any]] = {}
    for eid, ns, name, desc, props, last_update, last_run in _rows(
        conn,
        select(
            e.id,
            e.ol_namespace,
            e.ol_name,
            e.description,
            e.properties,
            seen(e.last_update),
            t.run_metrics.c.last_run,
        )
        .outerjoin(t.run_metrics, t.run_metrics.c.entity_id == e.id)
        .where(e.type == t.JOB, e.system_id.in_(job_systems), *([or_(*of_ids)] if of_ids else [])),
    ):
        if not allowed(ns):
            continue
        newest[(ns, name)] = (last_run is not None, last_run or last_update, last_update)
        props = props or {}
        jobs[(ns, name)] = {
            "namespace": ns,
            "name": name,
            "description": desc,
            "integration": props.get("integration"),
            "jobType": props.get("jobType"),
            "owners": props.get("owners") or [],
            "inputs": [],
            "outputs": [],
        }
        job_ids[eid] = (ns, name)
    return jobs, job_ids, newest


def _of_jobs(statement: Select, table: Table, scopes: list[str] | None) -> list[Select]:
    """``statement`` over every flow of ``table``, or, when jobs were left out (``scopes``: the
    kept jobs' data scopes), in chunks of them (their unique indexes start with the scope's
    digest)."""
    if scopes is None:
        return [statement]
    return [
        statement.where(among(table, "scope_key", scopes[i : i + _CHUNK]))
        for i in range(0, len(scopes), _CHUNK)
    ]


def _data_flows(
    conn: Connection, jobs: dict[JobKey, JobState], scopes: list[str] | None
) -> set[int]:
    """Each job's inputs and outputs, from the data flows of its scope; the ids of the datasets
    at either end."""
    src, dst = t.entities.alias(), t.entities.alias()
    f = t.data_flows.c
    dataset_ids: set[int] = set()
    io: dict[JobKey, tuple[set[JobKey], set[JobKey]]] = {}
    data_flows = (
        select(
            f.scope_namespace,
            f.scope_job,
            src.c.id,
            src.c.ol_namespace,
            src.c.ol_name,
            dst.c.id,
            dst.c.ol_namespace,
            dst.c.ol_name,
        )
        .join(src, src.c.id == f.from_entity)
        .join(dst, dst.c.id == f.to_entity)
        .where(f.kind == t.DATA)
    )
    for job_ns, job_name, s_id, s_ns, s_name, d_id, d_ns, d_name in (
        row
        for statement in _of_jobs(data_flows, t.data_flows, scopes)
        for row in _rows(conn, statement)
    ):
        job = (job_ns, job_name)
        if job not in jobs:
            continue
        ins, outs = io.setdefault(job, (set(), set()))
        ins.add((s_ns, s_name))
        outs.add((d_ns, d_name))
        dataset_ids |= {s_id, d_id}
    for job, (ins, outs) in io.items():
        jobs[job]["inputs"] = sorted([list(k) for k in ins])
        jobs[job]["outputs"] = sorted([list(k) for k in outs])
    return dataset_ids


def _parents(conn: Connection, job_ids: dict[int, JobKey]) -> list[list[list[str]]]:
    """[parent, child] of the orchestration flows between exported jobs."""
    f = t.data_flows.c
    return [
        [list(job_ids[p_id]), list(job_ids[c_id])]
        for p_id, c_id in _rows(
            conn, select(f.from_entity, f.to_entity).where(f.kind == t.ORCHESTRATION)
        )
        if p_id in job_ids and c_id in job_ids
    ]


def _datasets(conn: Connection, ids: list[int]) -> dict[int, DatasetState]:
    """The datasets of these entity ids, with their System and their fields in order."""
    e, fc = t.entities.c, t.fields.c
    datasets: dict[int, DatasetState] = {}
    for i in range(0, len(ids), 500):
        for eid, ns, name, typ, desc, props, system in _rows(
            conn,
            select(
                e.id,
                e.ol_namespace,
                e.ol_name,
                e.type,
                e.description,
                e.properties,
                t.systems.c.name,
            )
            .join(t.systems, t.systems.c.id == e.system_id)
            .where(e.id.in_(ids[i : i + 500])),
        ):
            datasets[eid] = {
                "namespace": ns,
                "name": name,
                "type": typ,
                "system": system,
                "description": desc,
                "owners": (props or {}).get("owners") or [],
                "fields": [],
            }
        for entity_id, fname, ftype, fdesc in _rows(
            conn,
            select(fc.entity_id, fc.name, fc.type, fc.description)
            .where(fc.entity_id.in_(ids[i : i + 500]))
            .order_by(fc.entity_id, fc.ordinal_position, fc.name),
        ):
            datasets[entity_id]["fields"].append(
                {"name": fname, "type": ftype, "description": fdesc}
            )
    return datasets


def _column_lineage(
    conn: Connection,
    jobs: dict[JobKey, JobState],
    datasets: dict[int, DatasetState],
    scopes: list[str] | None,
) -> list[ColumnLineageState]:
    """Each exported column's upstream columns, from the field flows of exported jobs between
    exported datasets: an input is [namespace, name, field], plus its transformation
    ("DIRECT/IDENTITY") when the catalog has it."""
    column_lineage: dict[tuple[int, str], set[tuple[str, ...]]] = {}
    field_flows = _field_flows()
    for job_ns, job_name, s_entity, s_field, d_entity, d_field, kind, subtype in (
        row
        for statement in _of_jobs(field_flows, t.field_flows, scopes)
        for row in _rows(conn, statement)
    ):
        if (job_ns, job_name) not in jobs or s_entity not in datasets or d_entity not in datasets:
            continue
        s = datasets[s_entity]
        label = "/".join(x for x in (kind, subtype) if x)
        column_lineage.setdefault((d_entity, d_field), set()).add(
            (s["namespace"], s["name"], s_field, *([label] if label else []))
        )
    return [
        {
            "dataset": [datasets[eid]["namespace"], datasets[eid]["name"]],
            "field": field,
            "inputs": sorted(list(x) for x in inputs),
        }
        for (eid, field), inputs in column_lineage.items()
    ]


# -- per job: what changed since the state was stored ---------------------------------------------

# above this many jobs to export again, their flows are read whole rather than by scope
_MANY = 2_000


def _job_systems(conn: Connection, uuid: str) -> list[int]:
    return [
        sid
        for sid, props in _rows(conn, select(t.systems.c.id, t.systems.c.properties))
        if uuid in ((props or {}).get("openLineageJobSystem") or [])
    ]


def sources(
    conn: Connection, uuid: str, allowed: Callable[[str], bool], max_jobs: int | None = None
) -> tuple[dict[JobKey, str | None], int]:
    """Each job's signature of what its part of the state is exported from: its digest, its
    data flows with their datasets' digests, its parents and how many field flows it owns
    (what a cleanup removes shows); None for a job or dataset the catalog keeps no digest of
    (it is exported each time). With ``max_jobs``, of the jobs ``export_state`` keeps only,
    and how many it leaves out.

    Every flow of the catalog is read after each sync that changed it, so each read is the
    cheapest one giving the same signatures: the jobs' runs only when they choose the newest,
    the datasets' digests for data flows only, and the field flows counted per scope key over
    the index that leads with it (each job's field flows are those of its data scope,
    ``flow_scope``, as the upload writes them and the cleanup finds them)."""
    e, m = t.entities.c, t.run_metrics.c
    signed: dict[JobKey, list[Any]] = {}
    unsigned: set[JobKey] = set()  # a digest missing: exported each time
    capped = max_jobs is not None
    newest: dict[JobKey, tuple[bool, Any, Any]] = {}
    jobs = select(e.ol_namespace, e.ol_name, e.content_hash)
    if capped:
        jobs = jobs.add_columns(seen(e.last_update), m.last_run).outerjoin(
            t.run_metrics, m.entity_id == e.id
        )
    for ns, name, content, *runs in _rows(
        conn, jobs.where(e.type == t.JOB, e.system_id.in_(_job_systems(conn, uuid)))
    ):
        if allowed(ns):
            signed[(ns, name)] = [content]
            if content is None:
                unsigned.add((ns, name))
            if capped:
                last_update, last_run = runs
                newest[(ns, name)] = (last_run is not None, last_run or last_update, last_update)
    not_shown = 0
    if max_jobs is not None and len(signed) > max_jobs:
        kept = _newest(newest, max_jobs)
        not_shown = len(signed) - len(kept)
        signed = {k: v for k, v in signed.items() if k in kept}
    src, dst = t.entities.alias(), t.entities.alias()
    f, ff = t.data_flows.c, t.field_flows.c
    for job_ns, job_name, s_id, s_hash, d_id, d_hash in _rows(
        conn,
        select(
            f.scope_namespace,
            f.scope_job,
            f.from_entity,
            src.c.content_hash,
            f.to_entity,
            dst.c.content_hash,
        )
        .join(src, src.c.id == f.from_entity)
        .join(dst, dst.c.id == f.to_entity)
        .where(f.kind == t.DATA),
    ):
        parts = signed.get((job_ns, job_name))
        if parts is not None:
            parts.append((t.DATA, s_id, s_hash, d_id, d_hash))
            if s_hash is None or d_hash is None:
                unsigned.add((job_ns, job_name))
    for kind, job_ns, job_name, s_id, d_id in _rows(
        conn,
        select(f.kind, f.scope_namespace, f.scope_job, f.from_entity, f.to_entity).where(
            f.kind != t.DATA
        ),
    ):
        parts = signed.get((job_ns, job_name))
        if parts is not None:
            parts.append((kind, s_id, "", d_id, ""))
    by_scope = {name_key(flow_scope(*job)): parts for job, parts in signed.items()}
    for scope_key, count in _rows(conn, select(ff.scope_key, func.count()).group_by(ff.scope_key)):
        parts = by_scope.get(scope_key)
        if parts is not None:
            parts.append(("field", count))
    return {
        key: None if key in unsigned else digest([parts[0], sorted(parts[1:])])
        for key, parts in signed.items()
    }, not_shown


def kept_jobs(
    conn: Connection, uuid: str, allowed: Callable[[str], bool], max_jobs: int | None = None
) -> tuple[set[JobKey], int]:
    """The jobs ``export_state`` keeps (``max_jobs``: the newest) and how many it leaves out,
    from the jobs and their last runs alone."""
    e, m = t.entities.c, t.run_metrics.c
    newest = {
        (ns, name): (last_run is not None, last_run or last_update, last_update)
        for ns, name, last_update, last_run in _rows(
            conn,
            select(e.ol_namespace, e.ol_name, seen(e.last_update), m.last_run)
            .outerjoin(t.run_metrics, m.entity_id == e.id)
            .where(e.type == t.JOB, e.system_id.in_(_job_systems(conn, uuid))),
        )
        if allowed(ns)
    }
    if max_jobs is None or len(newest) <= max_jobs:
        return set(newest), 0
    kept = _newest(newest, max_jobs)
    return kept, len(newest) - len(kept)


def export_parts(
    conn: Connection, uuid: str, allowed: Callable[[str], bool], keys: Collection[JobKey]
) -> tuple[list[JobPart], list[DatasetPart]]:
    """The parts of the state of these jobs (those the definition holds) and of every dataset
    they read or write, as ``export_state`` exports them."""
    wanted = set(keys)
    many = len(wanted) > _MANY
    e = t.entities.c
    named = [
        select(e.id).where(e.ol_name.in_(chunk))
        for chunk in _chunked(sorted({name for _, name in wanted}))
    ]
    ids = None if many else {i for s in named for (i,) in _rows(conn, s)}
    if ids is not None and not ids:
        return [], []
    jobs, job_ids, _ = _jobs(conn, uuid, allowed, ids)
    jobs = {k: v for k, v in jobs.items() if k in wanted}
    scopes = None if many else sorted(flow_scope(*k) for k in jobs)
    datasets = _datasets(conn, sorted(_data_flows(conn, jobs, scopes)))
    parents: dict[JobKey, list[list[str]]] = {}
    lines: dict[JobKey, list[list[Any]]] = {}
    f, p = t.data_flows.c, t.entities.alias()
    o_scopes = None if many else sorted(orchestration_scope(*k) for k in jobs)
    for job_ns, job_name, p_ns, p_name in (
        row
        for s in _of_jobs(
            select(f.scope_namespace, f.scope_job, p.c.ol_namespace, p.c.ol_name)
            .join(p, p.c.id == f.from_entity)
            .where(f.kind == t.ORCHESTRATION),
            t.data_flows,
            o_scopes,
        )
        for row in _rows(conn, s)
    ):
        if (job_ns, job_name) in jobs:
            parents.setdefault((job_ns, job_name), []).append([p_ns, p_name])
    for job, line in _field_lines(conn, scopes, jobs, datasets):
        lines.setdefault(job, []).append(line)
    return (
        [
            {"job": j, "parents": sorted(parents.get(k, [])), "columnLineage": lines.get(k, [])}
            for k, j in jobs.items()
        ],
        [{"dataset": d, "columnLineage": []} for d in datasets.values()],
    )


def _field_lines(
    conn: Connection,
    scopes: list[str] | None,
    jobs: Collection[JobKey],
    datasets: dict[int, DatasetState],
) -> Iterator[tuple[JobKey, list]]:
    """Each field flow of these jobs (of ``scopes``) as its job and [dataset namespace, name,
    field, input]. Its datasets are named from ``datasets`` (the exported jobs reach them,
    without another join), the few others looked up."""
    statement = _field_flows()
    names = {i: (d["namespace"], d["name"]) for i, d in datasets.items()}
    found = [
        (job, s_id, s_field, d_id, d_field, kind, sub)
        for s in _of_jobs(statement, t.field_flows, scopes)
        for job_ns, job_name, s_id, s_field, d_id, d_field, kind, sub in _rows(conn, s)
        if (job := (job_ns, job_name)) in jobs
    ]
    others = sorted({i for f in found for i in (f[1], f[3])} - names.keys())
    e = t.entities.c
    for chunk in _id_chunks(others):
        for eid, ns, name in _rows(
            conn, select(e.id, e.ol_namespace, e.ol_name).where(e.id.in_(chunk))
        ):
            names[eid] = (ns, name)
    for job, s_id, s_field, d_id, d_field, kind, sub in found:
        label = f"{kind}/{sub}" if kind and sub else kind or sub
        source = [*names[s_id], s_field, *([label] if label else [])]
        yield job, [*names[d_id], d_field, source]


def _rows(conn: Connection, statement: Select) -> Iterator[Row[Any]]:
    """The rows of ``statement``, fetched many at a time: an export reads hundreds of thousands,
    and fetching each one on its own costs more than reading it."""
    for batch in conn.execute(statement).partitions(_FETCH):
        yield from batch


def _chunked(values: list[str]) -> Iterator[list[str]]:
    for i in range(0, len(values), _CHUNK):
        yield values[i : i + _CHUNK]


def _id_chunks(ids: list[int]) -> Iterator[list[int]]:
    for i in range(0, len(ids), _CHUNK):
        yield ids[i : i + _CHUNK]


def _field_flows() -> Select:
    """Every field flow as its scope, then the entity and name of the field at each end, then its
    transformation and subtype: what both the whole export and the patch read."""
    ff = t.field_flows.c
    sf, df = t.fields.alias(), t.fields.alias()
    return (
        select(
            ff.scope_namespace,
            ff.scope_job,
            sf.c.entity_id,
            sf.c.name,
            df.c.entity_id,
            df.c.name,
            ff.transformation,
            ff.subtype,
        )
        .join(sf, sf.c.id == ff.from_field)
        .join(df, df.c.id == ff.to_field)
    )
