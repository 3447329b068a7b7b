"""The embedded catalog's upload: one graph written in the order its references need.

Systems, then entities (jobs and datasets, after the RENAMEs, with stubs of other owners' parent
jobs), fields, routines with their statements, data and field flows, quality checks and run
metrics. Each object type is one transaction, so a failure leaves no half-written flow set; it
stops the upload (later types need the ids of this one) and, as a failed row, blocks the cleanup.
Every object is an upsert on its natural key (``bulk``): the same graph twice writes nothing new
but touches everything. The upload deletes nothing: a DROP is the cleanup's ``drop_datasets``.

Unchanged objects are not sent again (``changes``): a job or dataset whose digest is the one the
catalog stored has its rows stamped with the upload's time (``stamps``), so every object the
graph describes gets the new last-update exactly as a re-send gives it. Each upload takes a time
no earlier upload had (``clock.claim``), so the rows of one time are those one upload sent. When
the rows of one earlier time are exactly the graph's (an unchanged snapshot), none is stamped: the
upload confirms that time at its own (``confirm``). An edited graph confirms its clean objects'
rows the same way, after setting aside the other rows of that time, and writes its changed objects
with that time (``partial``).

``Upload`` holds what the steps hand each other (the Systems' ids, the entities', the fields',
the statements', the clean objects); its methods are the steps, called in order by ``run``.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from functools import cache
from operator import itemgetter

from sqlalchemy import Connection, Engine, Table, select
from sqlalchemy.exc import SQLAlchemyError

from ol_dagster.catalog.embedded import (
    changes,
    clock,
    confirm,
    memo,
    partial,
    placement,
    run_results,
    stamps,
)
from ol_dagster.catalog.embedded import tables as t
from ol_dagster.catalog.embedded.bulk import STAMP_CHUNK, Bulk, Stamp, Upserted, batched, naive
from ol_dagster.catalog.embedded.entity_rows import entity_rows
from ol_dagster.catalog.embedded.refusals import Refused, failed_rows
from ol_dagster.catalog.embedded.tables import DATA, ORCHESTRATION
from ol_dagster.catalog.name_keys import name_key
from ol_dagster.catalog.protocol import FailedRow, ObjectType, UploadResult
from ol_dagster.catalog.systems import owned_jobs, wanted_systems
from ol_dagster.lineage import LineageGraph
from ol_dagster.lineage.graph import (
    DataFlow,
    FieldFlow,
    FieldNode,
    NodeKey,
    OrchestrationFlow,
    flow_scope,
    orchestration_scope,
)
from ol_dagster.sync_definition import SyncDefinition

SYSTEMS = "systems"  # a step of its own, reported only when it fails
# what a step did to the rows of its object type: written (added), updated (of those already
# there, changed; None when not known), touched (already there, given the upload's time)
Counted = tuple[int, int | None, int]

_first = itemgetter(0)


def _reason(exc: SQLAlchemyError) -> str:
    return f"{type(exc).__name__}: {getattr(exc, 'orig', exc)}"


def upload(
    engine: Engine,
    bulk: Bulk,
    graph: LineageGraph,
    definition: SyncDefinition,
    *,
    read_clock: Callable[[], datetime],
    detect_changes: bool,
) -> UploadResult:
    """Claim the upload's time from ``read_clock`` (the catalog's clock), then write the graph;
    a clock that cannot be read fails the upload as a ``clock`` row, before anything is written."""
    try:
        now = clock.claim(engine, bulk, naive(read_clock()))
    except SQLAlchemyError as exc:
        result = UploadResult()
        result.failed.append(FailedRow("clock", "*", _reason(exc)))
        return result
    return Upload(engine, bulk, graph, definition, now, detect_changes=detect_changes).run()


class Upload:
    """One upload of one graph at one time; single use."""

    def __init__(
        self,
        engine: Engine,
        bulk: Bulk,
        graph: LineageGraph,
        definition: SyncDefinition,
        now: datetime,
        *,
        detect_changes: bool,
    ) -> None:
        self.engine = engine
        self.bulk = bulk
        self.graph = graph
        self.definition = definition
        self.now = now
        self.upload_id = str(uuid.uuid4())
        # rows it changed, apart from those it sent again or stamped as they were
        self.result = UploadResult(updated={}, unchanged={})
        # a job known only as a parent, in a namespace this definition does not own, is another
        # definition's job: never created in, touched in or removed from its job Systems; the
        # orchestration flow to it (owned by the child's scope) links to its entity, or to a stub
        self.job_sys: dict[NodeKey, str] = owned_jobs(graph, definition)
        self.foreign: set[NodeKey] = set(graph.jobs) - set(self.job_sys)
        self.linked: list[NodeKey] = sorted(
            {k for o in graph.orchestration_flows for k in (o.parent, o.child)} & self.foreign
        )
        self.wanted: dict[str, dict] = wanted_systems(graph, definition)
        self.taken: set[str] = {
            *self.wanted,
            definition.job_system,
            *(r.system for r in definition.jobSystems),
        }
        # digests of what this upload writes per job and dataset: those the catalog already
        # holds with the same digest are only stamped (``changes``); the others are upserted
        self.contents: changes.Contents | None = (
            memo.contents(engine, graph, self.job_sys, definition.name) if detect_changes else None
        )
        if self.contents is not None:
            self.result.content_digests = self.contents.digests()
        # the clean objects, each with the last-update its rows carry since the upload that
        # stamped them last; a job leaves ``clean_jobs`` as soon as one of its rows is missing
        self.clean_jobs: dict[NodeKey, Stamp] = {}
        self.clean_ds: dict[NodeKey, Stamp] = {}
        # the time of the rows the upload confirmed whole instead of stamping them (``confirm``)
        self.confirmed: Stamp | None = None
        self.confirmed_flows: list[Table] = []  # the flow tables holding rows of that time
        # an edited upload's confirmation (``partial``), and the tables it confirms so far
        self.part: partial.Partial | None = None
        self.part_tables: set[str] = set()
        # what each step leaves for the next ones
        self.sys_ids: dict[str, int] = {}
        self.renamed: list[str] = []
        self.job_ids: dict[NodeKey, int] = {}  # other owners' linked jobs included
        self.ds_ids: dict[NodeKey, int] = {}
        self.field_ids: dict[tuple, int] = {}  # by (entity id, field path); clean ones not all
        self.statement_ids: dict[NodeKey, int] = {}
        # rows the database refused for their content (``refusals``): failed rows of the upload,
        # the rest written; what needs a refused row's id (an entity's fields, its flows) is not
        self.refused: list[Refused] = []
        # a flow's scope key (``name_keys``), once per scope: a job's flows share it
        self.scope_key: Callable[[str], bytes] = cache(name_key)

    def run(self) -> UploadResult:
        steps: list[tuple[str, Callable[[Connection], Counted]]] = [
            (SYSTEMS, self.systems),
            (ObjectType.PHYSICAL_ENTITIES, self.entities),
            (ObjectType.PHYSICAL_FIELDS, self.fields),
            (ObjectType.ROUTINES, self.routines),
            (ObjectType.DATA_FLOWS, self.flows),
            ("qualityChecks", self.quality),
            ("runMetrics", self.metrics),
        ]
        result = self.result
        for object_type, write in steps:
            if not self._step(object_type, write):
                break  # later steps need the ids of this one; the failure blocks the cleanup
        for counts in (result.written, result.updated, result.touched, result.unchanged):
            assert counts is not None
            counts.pop(SYSTEMS, None)
        if ObjectType.PHYSICAL_ENTITIES in result.written:  # the renames were committed
            result.renamed = self.renamed
        # a DROP removes nothing here: the cleanup calls drop_datasets after its guards
        return result

    def _step(self, object_type: str, write: Callable[[Connection], Counted]) -> bool:
        """One object type in one transaction, counted (``_count``); a database error is a
        failed row of the type."""
        result = self.result
        self.refused.clear()
        try:
            with self.engine.begin() as conn:
                counted = write(conn)
        except SQLAlchemyError as exc:
            result.failed.append(FailedRow(object_type, "*", _reason(exc)))
            return False
        result.failed.extend(failed_rows(self.refused, self._entity_labels))
        self._count(object_type, *counted)
        return True

    def _count(self, object_type: str, written: int, updated: int | None, touched: int) -> None:
        """Add to the result's counts of the type: ``touched`` rows were there already, of
        which ``updated`` got other values (None: not known, left out) and the rest the same."""
        result = self.result
        assert result.updated is not None and result.unchanged is not None
        result.written[object_type] = result.written.get(object_type, 0) + written
        result.touched[object_type] = result.touched.get(object_type, 0) + touched
        if updated is not None:
            result.updated[object_type] = result.updated.get(object_type, 0) + updated
            unchanged = result.unchanged.get(object_type, 0) + touched - updated
            result.unchanged[object_type] = unchanged

    def _entity_labels(self) -> dict[int, str]:
        """The OpenLineage identity of the entities this upload wrote, by id (failed rows)."""
        return {
            eid: f"{k[0]}:{k[1]}" for held in (self.job_ids, self.ds_ids) for k, eid in held.items()
        }

    # -- the steps, in order; each returns its ``Counted`` -------------------------------------

    def systems(self, conn: Connection) -> Counted:
        self.sys_ids = placement.ensure_systems(conn, self.wanted)
        return 0, 0, 0

    def entities(self, conn: Connection) -> Counted:
        """Jobs and datasets (after the RENAMEs), then stubs of other owners' linked jobs."""
        self.renamed = placement.apply_renames(conn, self.graph, self.definition, self.sys_ids)
        contents = self.contents
        job_digest = {k: c.digest for k, c in contents.jobs.items()} if contents else {}
        ds_digest = contents.datasets if contents else {}
        stamped = 0
        if contents is not None and not self.renamed:
            # a rename moved an entity under the digests' feet: this upload re-sends all
            confirmed = (
                self._confirm(conn, job_digest, ds_digest)
                if contents.same_as_last
                else self._confirm_part(conn, ds_digest)
            )
            if confirmed is not None:
                stamped = confirmed
            else:
                stamped = self._stamp_entities(conn, job_digest, ds_digest)
        job_keys, ds_keys, rows = entity_rows(
            self.graph,
            self.sys_ids,
            self.job_sys,
            self.foreign | self.clean_jobs.keys(),
            self.clean_ds,
            self._at(t.entities),
            job_digest,
            ds_digest,
        )
        ids, (written, updated) = self.bulk.upsert(
            conn,
            t.entities,
            rows,
            ["system_id", "schema", "name"],
            [
                "type",
                "ol_namespace",
                "ol_name",
                "description",
                "properties",
                "last_update",
                "fields_update",
                "content_hash",
            ],
            self.upload_id,
            refused=self.refused,
        )
        self._confirm_written(conn, bool(stamped or rows), t.entities)
        for keys, part, held in (
            (job_keys, ids[: len(job_keys)], self.job_ids),
            (ds_keys, ids[len(job_keys) :], self.ds_ids),
        ):
            held.update((k, i) for k, i in zip(keys, part, strict=True) if i is not None)
        touched = stamped + len({i for i in ids if i is not None}) - written
        foreign_ids, stubs = placement.link_foreign_jobs(
            self.bulk, conn, self.linked, self.taken, self.now, self.upload_id
        )
        self.job_ids.update(foreign_ids)
        return written + stubs, updated, touched

    def _confirm(
        self, conn: Connection, job_digest: dict[NodeKey, str], ds_digest: dict[NodeKey, str]
    ) -> int | None:
        """Confirm every row of an unchanged graph at this upload's time, none written
        (``confirm.of_graph``): every object becomes clean, with the time its rows carry.
        Returns how many entities that is; None when the catalog does not hold exactly those
        rows of one time (nothing done: they are stamped)."""
        assert self.contents is not None
        found = confirm.of_graph(
            self.bulk, conn, self.graph, self.contents, self.job_sys, self.sys_ids, ds_digest
        )
        if found is None:
            return None
        confirm.record(self.bulk, conn, found.time, self.now, t.entities)
        return self._take(found.time, found.job_ids, found.ds_ids, found.flow_tables)

    def _confirm_part(self, conn: Connection, ds_digest: dict[NodeKey, str]) -> int | None:
        """Confirm the clean objects of an edited graph, their rows of the last upload's time
        not written; the changed ones are then written with that time (``partial``). Returns
        how many entities are clean; None when nothing can be confirmed (all are stamped)."""
        assert self.contents is not None
        part = partial.of_graph(
            self.bulk, conn, self.graph, self.contents, self.job_sys, self.sys_ids, ds_digest
        )
        if part is None or not partial.demote(self.bulk, conn, part, self.now, t.entities):
            return None
        self.part = part
        self.part_tables.add(t.entities.name)
        return self._take(part.time, part.job_ids, part.ds_ids, part.clean_flow_tables)

    def _take(
        self,
        time: Stamp,
        job_ids: dict[NodeKey, int],
        ds_ids: dict[NodeKey, int],
        flow_tables: list[Table],
    ) -> int:
        """Take the confirmed objects as clean, with the time their rows carry; returns how
        many entities that is."""
        self.confirmed, self.confirmed_flows = time, flow_tables
        for ids, held, clean in (
            (job_ids, self.job_ids, self.clean_jobs),
            (ds_ids, self.ds_ids, self.clean_ds),
        ):
            held.update(ids)
            clean.update(dict.fromkeys(ids, time))
        return len(job_ids) + len(ds_ids)

    def _confirm_written(self, conn: Connection, holds_rows: bool, *tables: Table) -> None:
        """In an edited upload's confirmation, confirm the confirmed time of ``tables`` at the
        upload's once they hold rows of it (clean ones, or ones just written with it)."""
        if holds_rows and tables[0].name in self.part_tables:
            confirm.record(self.bulk, conn, self.confirmed, self.now, *tables)

    def _part_of(self, conn: Connection, *tables: Table) -> bool:
        """Whether ``tables`` take part in an edited upload's confirmation: their rows the
        upload does not describe demoted (a refusal leaves them to stamping)."""
        if self.part is None or not partial.demote(self.bulk, conn, self.part, self.now, *tables):
            return False
        self.part_tables.update(table.name for table in tables)
        return True

    def _at(self, table: Table) -> datetime:
        """The time the upload writes the rows of ``table`` with: its own, or in an edited
        upload's confirmation the confirmed one."""
        part = self.part
        return part.at if part is not None and table.name in self.part_tables else self.now

    def _stamp_entities(
        self, conn: Connection, job_digest: dict[NodeKey, str], ds_digest: dict[NodeKey, str]
    ) -> int:
        """Stamp the entities the catalog holds with this upload's digest; they become clean
        (with their ids), unless one was lost since. Returns how many were stamped."""
        graph, sys_ids, job_sys, now = self.graph, self.sys_ids, self.job_sys, self.now
        job_ident = {k: (sys_ids[job_sys[k]], k[0], k[1]) for k in job_digest}
        ds_ident = {
            k: (sys_ids[d.system], d.schema, d.object_name)
            for k, d in graph.datasets.items()
            if k in ds_digest
        }
        stored = stamps.stored_entities(self.bulk, conn, [*job_ident.values(), *ds_ident.values()])
        # by (last-update, carries a field list): one stamp per group
        groups: defaultdict[tuple[Stamp, bool], list[tuple[int, NodeKey, bool]]]
        groups = defaultdict(list)
        for is_job, idents, digests in (
            (True, job_ident, job_digest),
            (False, ds_ident, ds_digest),
        ):
            for key, ident in idents.items():
                found = stored.get(ident)
                if found is not None and found[1] == digests[key]:
                    schema = not is_job and graph.datasets[key].has_schema
                    groups[(found[2], schema)].append((found[0], key, is_job))
        stamped = 0
        for (prev, schema), members in groups.items():
            lost = stamps.stamp(
                self.bulk,
                conn,
                t.entities,
                now,
                prev,
                "id",
                dict.fromkeys((m[0] for m in members), 1),
                also={"fields_update": now if schema else None},
            )
            for eid, key, is_job in members:
                if eid not in lost:
                    (self.job_ids if is_job else self.ds_ids)[key] = eid
                    (self.clean_jobs if is_job else self.clean_ds)[key] = prev
                    stamped += 1
        return stamped

    def fields(self, conn: Connection) -> Counted:
        """The fields of changed datasets, and of clean ones whose field list is not whole."""
        graph, ds_ids, clean_ds, now = self.graph, self.ds_ids, self.clean_ds, self.now
        confirming = self.part is None or self._part_of(conn, t.fields)
        stamped = 0
        resend: set[NodeKey] = set()  # clean datasets whose field list is not whole
        by_prev: defaultdict[Stamp, dict[int, int]] = defaultdict(dict)
        of_entity: dict[int, NodeKey] = {}
        for key, prev in clean_ds.items():
            n = len(graph.datasets[key].fields)
            if n:
                by_prev[prev][ds_ids[key]] = n
                of_entity[ds_ids[key]] = key
                stamped += n
        for prev, expected in by_prev.items():
            if prev == self.confirmed and confirming:
                confirm.record(self.bulk, conn, prev, now, t.fields)
                continue
            for eid in stamps.stamp(self.bulk, conn, t.fields, now, prev, "entity_id", expected):
                resend.add(of_entity[eid])
                stamped -= expected[eid]
        # a million fields in a large snapshot: rows are built a chunk at a time
        unique: dict[tuple[int, str], FieldNode] = {}  # the last field of a key, first place
        count = 0
        for key, d in graph.datasets.items():
            eid = ds_ids.get(key)
            if eid is None or (key in clean_ds and key not in resend):
                continue  # clean, or its entity was refused
            for f in d.fields.values():
                unique[(eid, f.path)] = f
                count += 1
        rows = (
            (
                k,
                {
                    "entity_id": k[0],
                    "name": k[1],
                    "type": f.type,
                    "description": f.description,
                    "ordinal_position": f.ordinal,
                    "last_update": self._at(t.fields),
                },
            )
            for k, f in unique.items()
        )
        self.field_ids, (written, updated) = self.bulk.upsert(
            conn,
            t.fields,
            rows,
            ["entity_id", "name"],
            ["type", "description", "ordinal_position", "last_update"],
            self.upload_id,
            keyed=True,
            refused=self.refused,
        )
        self._confirm_written(conn, bool(count), t.fields)
        return written, updated, stamped + count - written

    def routines(self, conn: Connection) -> Counted:
        """The routines of this definition's jobs, each with its statement (counted apart)."""
        sys_ids, job_sys, clean_jobs, now = self.sys_ids, self.job_sys, self.clean_jobs, self.now
        confirming = self.part is None or self._part_of(conn, t.routines, t.statements)
        items = [(key, r) for key, r in self.graph.routines.items() if key in job_sys]
        stamped = 0
        groups: defaultdict[tuple[Stamp, int, str], list[str]] = defaultdict(list)
        for key, _ in items:
            if key in clean_jobs:
                groups[(clean_jobs[key], sys_ids[job_sys[key]], key[0])].append(key[1])
        for (prev, sid, schema), names in groups.items():
            if prev == self.confirmed and confirming:
                stamped += len(names)
                continue  # recorded once, below
            lost = stamps.stamp(
                self.bulk,
                conn,
                t.routines,
                now,
                prev,
                "name",
                dict.fromkeys(names, 1),
                match={"system_id": sid, "schema": schema},
                keyed=("identity_key", lambda name, schema=schema: name_key(schema, name)),
            )
            kept = [n for n in names if n not in lost]
            lost |= stamps.stamp_statements(self.bulk, conn, now, prev, sid, schema, kept)
            stamped += len(names) - len(lost)
            for name in lost:  # removed since: the job's rows are all sent again
                del clean_jobs[(schema, name)]
        if self.confirmed is not None and confirming and groups:
            confirm.record(self.bulk, conn, self.confirmed, now, t.routines, t.statements)
        items = [(key, r) for key, r in items if key not in clean_jobs]
        rows = [
            {
                "system_id": sys_ids[job_sys[key]],
                "schema": key[0],
                "name": key[1],
                "last_update": self._at(t.routines),
            }
            for key, _ in items
        ]
        ids, (written, updated) = self.bulk.upsert(
            conn,
            t.routines,
            rows,
            ["system_id", "schema", "name"],
            ["last_update"],
            self.upload_id,
            refused=self.refused,
        )
        items = [(item, rid) for item, rid in zip(items, ids, strict=True) if rid is not None]
        at = self._at(t.statements)
        self._confirm_written(conn, bool(rows), t.routines, t.statements)
        stmt_rows = [
            {"routine_id": rid, "text": r.statement, "dialect": r.dialect, "last_update": at}
            for (_, r), rid in items
        ]
        sids, (s_written, s_updated) = self.bulk.upsert(
            conn,
            t.statements,
            stmt_rows,
            ["routine_id"],
            ["text", "dialect", "last_update"],
            self.upload_id,
            refused=self.refused,
        )
        self.statement_ids = {
            key: sid for ((key, _), _), sid in zip(items, sids, strict=True) if sid is not None
        }
        self._count(
            ObjectType.STATEMENTS, s_written, s_updated, stamped + len(stmt_rows) - s_written
        )
        return written, updated, stamped + len(rows) - written

    def flows(self, conn: Connection) -> Counted:
        """Data and orchestration flows, then field flows: the clean jobs' stamped, the others'
        upserted (one object type: their counts add up)."""
        contents, clean_jobs = self.contents, self.clean_jobs
        stm = self.statement_ids
        # one scope string per job, not one per flow
        scope = cache(lambda job: flow_scope(*job))
        o_scope = cache(lambda job: orchestration_scope(*job))

        stamped = 0
        confirming = self.part is None or self._part_of(conn, t.data_flows, t.field_flows)
        if contents is not None and clean_jobs:
            if self.confirmed is not None and confirming:  # nothing to stamp, nothing lost
                flows = self.confirmed_flows
                confirm.record(self.bulk, conn, self.confirmed, self.now, *flows)
            else:
                jobs, now = contents.jobs, self.now
                short = stamps.stamp_flows(
                    self.bulk, conn, now, jobs, clean_jobs, scope, o_scope, self.scope_key
                )
                # their routines were only stamped: their flows need the statements' ids
                with_sql = [k for k in short if k in self.graph.routines]
                stm = {**stm, **stamps.statement_ids(conn, self.sys_ids, self.job_sys, with_sql)}
            stamped = sum(contents.jobs[key].flow_objects for key in clean_jobs)
        (written, updated), count = self._data_flows(conn, stm, scope, o_scope)
        (f_written, f_updated), f_count = self._field_flows(conn, stm, scope)
        self._confirm_written(conn, bool(count), t.data_flows)
        self._confirm_written(conn, bool(f_count), t.field_flows)
        touched = stamped + count + f_count - written - f_written
        return written + f_written, updated + f_updated, touched

    def _data_flows(
        self,
        conn: Connection,
        stm: dict[NodeKey, int],
        scope: Callable[[NodeKey], str],
        o_scope: Callable[[NodeKey], str],
    ) -> tuple[Upserted, int]:
        """Upsert the data and orchestration flows of the jobs that are not clean; returns what
        this upload wrote and changed of them, and how many it sent."""
        graph, clean_jobs, now = self.graph, self.clean_jobs, self._at(t.data_flows)
        ds, jobs = self.ds_ids, self.job_ids
        # rows are built a chunk at a time: keys first (the last flow of a key), then the rows
        # in key order, so the flow indexes grow at their end instead of at random places
        # (the graph's sets have no order): half the time of a 30,000-job upload on SQLite. The
        # scope string's order, not its digest's: the indexes of the flows' ends follow it (the
        # entities and fields were written in it), and they cost more than the unique one
        flows: dict[tuple, DataFlow | OrchestrationFlow] = {}
        count = 0
        for f in graph.data_flows:
            if f.job not in clean_jobs and f.source in ds and f.target in ds:
                flows[(scope(f.job), ds[f.source], ds[f.target])] = f
                count += 1
        for o in graph.orchestration_flows:
            if o.child not in clean_jobs and o.parent in jobs and o.child in jobs:
                flows[(o_scope(o.child), jobs[o.parent], jobs[o.child])] = o
                count += 1
        rows = (
            (
                k,
                {
                    "scope": k[0],
                    "scope_key": self.scope_key(k[0]),
                    "kind": DATA if isinstance(f, DataFlow) else ORCHESTRATION,
                    # the owner: a data flow's job, an orchestration flow's child
                    "scope_namespace": (f.job if isinstance(f, DataFlow) else f.child)[0],
                    "scope_job": (f.job if isinstance(f, DataFlow) else f.child)[1],
                    "from_entity": k[1],
                    "to_entity": k[2],
                    "statement_id": stm.get(f.job) if isinstance(f, DataFlow) else None,
                    "last_update": now,
                },
            )
            for k, f in sorted(flows.items(), key=_first)
        )
        _, counts = self.bulk.upsert(
            conn,
            t.data_flows,
            rows,
            ["scope", "from_entity", "to_entity"],
            ["kind", "statement_id", "last_update"],
            self.upload_id,
            keyed=True,
            want_ids=False,
            refused=self.refused,
        )
        return counts, count

    def _field_flows(
        self, conn: Connection, stm: dict[NodeKey, int], scope: Callable[[NodeKey], str]
    ) -> tuple[Upserted, int]:
        """Upsert the field flows of the jobs that are not clean (all of them without change
        detection); returns what this upload wrote and changed of them, and how many it sent."""
        graph, contents, clean_jobs = self.graph, self.contents, self.clean_jobs
        now, ds = self._at(t.field_flows), self.ds_ids
        if contents is None:
            resent = list(graph.field_flows)
        else:
            resent = graph.field_flows_of(clean_jobs, but=True)
        # a field flow whose end was refused (its field or entity) is not written
        resent = [ff for ff in resent if ff.source[:2] in ds and ff.target[:2] in ds]
        fids = self._field_ids(conn, resent)
        field_rows: dict[tuple, FieldFlow] = {}
        for ff in resent:
            source = fids.get((ds[ff.source[:2]], ff.source[2]))
            target = fids.get((ds[ff.target[:2]], ff.target[2]))
            if source is None or target is None:
                continue
            kept = field_rows.setdefault((scope(ff.job), source, target), ff)
            if kept is not ff:  # one row for both: the same one whatever the sets' order
                field_rows[(scope(ff.job), source, target)] = changes.pick_field_flow(kept, ff)
        frows = (
            (
                k,
                {
                    "scope": k[0],
                    "scope_key": self.scope_key(k[0]),
                    "scope_namespace": ff.job[0],
                    "scope_job": ff.job[1],
                    "from_field": k[1],
                    "to_field": k[2],
                    "transformation": ff.transformation,
                    "subtype": ff.subtype,
                    "statement_id": stm.get(ff.job),
                    "last_update": now,
                },
            )
            for k, ff in sorted(field_rows.items(), key=_first)
        )
        _, counts = self.bulk.upsert(
            conn,
            t.field_flows,
            frows,
            ["scope", "from_field", "to_field"],
            ["transformation", "subtype", "statement_id", "last_update"],
            self.upload_id,
            keyed=True,
            want_ids=False,
            refused=self.refused,
        )
        return counts, len(resent)

    def _field_ids(self, conn: Connection, resent: list[FieldFlow]) -> dict[tuple, int]:
        """``field_ids`` (fields by (entity id, path)), with those of the fields ``resent``
        links that this upload only stamped, read from the catalog."""
        ids, ds_ids = self.field_ids, self.ds_ids
        missing: set[int] = set()
        for ff in resent:
            for end in (ff.source, ff.target):
                eid = ds_ids[end[:2]]  # type: ignore[index]
                if (eid, end[2]) not in ids:
                    missing.add(eid)
        f = t.fields.c
        for chunk in batched(sorted(missing), STAMP_CHUNK):
            for fid, eid, name in conn.execute(
                select(f.id, f.entity_id, f.name).where(f.entity_id.in_(chunk))
            ):
                ids.setdefault((eid, name), fid)
        return ids

    def quality(self, conn: Connection) -> Counted:
        return run_results.quality(
            self.bulk, conn, self.graph, self.now, self.upload_id, self.refused
        )

    def metrics(self, conn: Connection) -> Counted:
        run_results.metrics(self.bulk, conn, self.graph, self.job_sys, self.job_ids, self.refused)
        return 0, None, 0
