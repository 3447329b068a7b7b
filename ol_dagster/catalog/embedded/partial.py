"""Confirming the unchanged part of an edited upload: its clean rows taken as written, not stamped.

An edited snapshot (a few jobs changed, a few dropped) describes almost everything the last upload
wrote. Stamping every clean row with the new time (``stamps``) costs what the catalog holds, not
what changed: about 317,000 rows rewritten at 10,000 jobs for 100 edited ones. So the upload
confirms the rows of the last upload's time instead (``confirm``), as an unchanged one does,
after moving aside the rows of that time it does not describe as they are:

- the time ``prev`` of one described entity the catalog holds is taken as the last upload's (any
  time is safe: objects whose rows are not of it are written again, as changed ones);
- an object is clean when its digest is the stored one and the rows of ``prev`` of its entity,
  fields, routine and statement, and flow scopes are as many as it describes (rows of a clean
  object's time are a part of its content, so as many is the same rows, as ``confirm`` says);
- every other row of ``prev`` (a changed object's, a dropped one's, a row no upload described)
  is *demoted*: given a time of its own, ``now`` less a century, recorded as confirmed at the
  time it read as before (``prev``'s latest confirmation, else ``prev``). That time is earlier than
  any cutoff and than the time it reads as, so ``confirm.stale``, ``fresh`` and ``seen`` read it
  exactly as they read it before, whatever the cutoff; and it is the upload's alone, as ``now``
  is (``clock.claim``);
- the changed and new objects are then written with ``prev`` as their time, and ``prev`` is
  confirmed at ``now`` for each table: each row the upload describes reads as ``now``, every
  other one as it did, which is what stamping and re-sending give, and the rows of ``prev`` are
  again exactly one upload's, so the next one (unchanged or edited) confirms them in turn.

Each table's demotion and confirmation are made by the step that writes the table, in its
transaction; a demotion the database refuses leaves that table to stamping, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import islice
from typing import Any

from sqlalchemy import Connection, Table
from sqlalchemy.exc import SQLAlchemyError

from ol_dagster.catalog.embedded import confirm, stamps
from ol_dagster.catalog.embedded.bulk import Bulk, Stamp
from ol_dagster.catalog.embedded.changes import Contents
from ol_dagster.catalog.embedded.stamps import EntityKey
from ol_dagster.catalog.embedded.tables import (
    data_flows,
    entities,
    field_flows,
    fields,
    routines,
    statements,
)
from ol_dagster.catalog.name_keys import name_key
from ol_dagster.lineage import LineageGraph
from ol_dagster.lineage.graph import NodeKey, flow_scope, orchestration_scope

# a demoted row's own time lies this far before the upload's: before every cutoff
_ASIDE = timedelta(days=36_525)
# described entities whose time is looked up to find the last upload's, at most
_PROBES = 8


@dataclass(slots=True)
class Partial:
    """The rows of ``time`` an edited upload confirms (those of its clean objects), the clean
    jobs' and datasets' entity ids, and per table the rows of that time it demotes first: by
    the column that finds them, each value with how many rows it holds."""

    time: Stamp
    at: datetime  # ``time`` as the upload writes it for its changed objects
    job_ids: dict[NodeKey, int]
    ds_ids: dict[NodeKey, int]
    demote: dict[str, dict[Any, int]] = field(default_factory=dict)
    # entities whose fields' time is ``time``: theirs is demoted with them
    with_fields: set[int] = field(default_factory=set)
    clean_flow_tables: list[Table] = field(default_factory=list)


def of_graph(
    bulk: Bulk,
    conn: Connection,
    graph: LineageGraph,
    contents: Contents,
    job_sys: Mapping[NodeKey, str],
    sys_ids: Mapping[str, int],
    ds_digest: Mapping[NodeKey, str],
) -> Partial | None:
    """The clean objects of an edited upload of ``graph`` and the rows of their time it
    demotes; None when no described entity is held, two objects share one, or the catalog
    cannot be read (the upload then stamps, and finds the fault in the step it lies in)."""
    idents = confirm.identities(graph, contents, job_sys, sys_ids, ds_digest)
    if idents is None:
        return None
    job_ident, ds_ident, described = idents
    try:
        with conn.begin_nested():
            prev = _last_time(bulk, conn, [*islice(job_ident.values(), _PROBES)])
            if prev is None:
                return None
            held = confirm.read(bulk, conn, prev, described)
    except SQLAlchemyError:
        return None
    ds_ids = {
        k: eid
        for k, ident in ds_ident.items()
        if (eid := held.entities.get(ident)) is not None
        and held.fields.get(eid, 0) == len(graph.datasets[k].fields)
    }
    job_ids, clean_routines = _clean_jobs(graph, contents, job_ident, held)
    return _plan(bulk, prev, job_ids, ds_ids, clean_routines, held)


def _clean_jobs(
    graph: LineageGraph,
    contents: Contents,
    job_ident: Mapping[NodeKey, EntityKey],
    held: confirm.Held,
) -> tuple[dict[NodeKey, int], set[int]]:
    """The jobs whose entity, flow scopes, routine and statement of that time are as many as
    they describe, with their entity ids; and their routines' ids."""
    data, field_scopes = held.scopes[data_flows.name], held.scopes[field_flows.name]
    job_ids: dict[NodeKey, int] = {}
    clean_routines: set[int] = set()
    for k, ident in job_ident.items():
        eid = held.entities.get(ident)
        if eid is None:
            continue
        c = contents.jobs[k]
        scope, o_scope = flow_scope(*k), orchestration_scope(*k)
        if (
            data.get(scope, 0) != c.data_flows
            or data.get(o_scope, 0) != c.orchestration_flows
            or field_scopes.get(scope, 0) != c.field_flows
        ):
            continue
        rid = held.routines.get(ident)
        if (rid is not None) != (k in graph.routines) or (
            rid is not None and held.statements.get(rid) != 1
        ):
            continue
        job_ids[k] = eid
        if rid is not None:
            clean_routines.add(rid)
    return job_ids, clean_routines


def _plan(
    bulk: Bulk,
    prev: Stamp,
    job_ids: dict[NodeKey, int],
    ds_ids: dict[NodeKey, int],
    clean_routines: set[int],
    held: confirm.Held,
) -> Partial:
    """The confirmation: every row of ``prev`` that is not a clean object's is demoted."""
    clean = {*job_ids.values(), *ds_ids.values()}
    clean_scopes = {s for k in job_ids for s in (flow_scope(*k), orchestration_scope(*k))}
    part = Partial(prev, bulk.from_db_time(prev), job_ids, ds_ids)
    demoted = [*held.other, *(eid for eid in held.entities.values() if eid not in clean)]
    part.demote[entities.name] = dict.fromkeys(demoted, 1)
    part.with_fields = held.with_fields & part.demote[entities.name].keys()
    part.demote[fields.name] = {e: n for e, n in held.fields.items() if e not in clean}
    part.demote[routines.name] = {
        rid: 1 for rid in held.routines.values() if rid not in clean_routines
    }
    part.demote[statements.name] = {
        rid: n for rid, n in held.statements.items() if rid not in clean_routines
    }
    for table in (data_flows, field_flows):
        scopes = held.scopes[table.name]
        part.demote[table.name] = {s: n for s, n in scopes.items() if s not in clean_scopes}
        if any(s in clean_scopes for s in scopes):
            part.clean_flow_tables.append(table)
    return part


def demote(bulk: Bulk, conn: Connection, part: Partial, now: datetime, *tables: Table) -> bool:
    """Give the rows of ``part.time`` in ``tables`` that the upload does not confirm a time of
    their own, read as the one they read as before (see the module); in a savepoint, so a
    refusal (False) leaves the step's transaction as it was."""
    aside = now - _ASIDE
    try:
        with conn.begin_nested():
            for table in tables:
                rows = part.demote.get(table.name)
                if rows:
                    _demote(bulk, conn, part, table, rows, aside)
    except SQLAlchemyError:
        return False
    return True


def _demote(
    bulk: Bulk, conn: Connection, part: Partial, table: Table, rows: dict, aside: datetime
) -> None:
    prev, column = part.time, confirm.COUNTED_BY[table.name]
    if table is entities:
        both = {eid: 1 for eid in rows if eid in part.with_fields}
        stamps.stamp(bulk, conn, table, aside, prev, column, both, also={"fields_update": aside})
        rest = {eid: 1 for eid in rows if eid not in both}
        stamps.stamp(bulk, conn, table, aside, prev, column, rest)
    else:
        # a flow's scope is found by its digest's index
        keyed = ("scope_key", name_key) if table is data_flows or table is field_flows else None
        stamps.stamp(bulk, conn, table, aside, prev, column, rows, keyed=keyed)
    confirm.read_as_before(bulk, conn, aside, prev, table)


def _last_time(bulk: Bulk, conn: Connection, probes: list[EntityKey]) -> Stamp | None:
    for key in probes:
        found = confirm.time_of(bulk, conn, key)
        if found is not None:
            return found
    return None
