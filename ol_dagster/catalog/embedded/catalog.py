"""The embedded catalog's upload and clock; cleanup and reads live beside it.

Uploads are bulk and idempotent: every object is an upsert on its natural key, chunked, one
transaction per object type, so a failure leaves no half-written flow set, and the same graph twice
writes nothing new but touches everything. ``created_by`` (the upload's id, kept on conflict) tells
rows this upload wrote from rows it only touched, without a read before each write.

Unchanged objects are not sent again (``changes``): a job or dataset whose digest is the one the
catalog stored has its rows stamped with the upload's time, set-based (``UPDATE ... SET last_update
WHERE scope IN (...) AND last_update = <its last upload's time>``, chunked), so every object the
graph describes gets the new last-update exactly as a re-send gives it. Each upload takes a time
no earlier upload had (``_claim_stamp``), so the rows of one time are those one upload sent.

On PostgreSQL a chunk is one ``INSERT ... SELECT FROM unnest(<one array per column>) ON CONFLICT
... RETURNING``: a short statement whatever the chunk's size, so psycopg does not rewrite a
statement of thousands of placeholders for every chunk (which took most of the upload's time).
On SQLite it is one multi-row ``INSERT ... VALUES ... RETURNING``. Both go straight to the driver
(``_bulk_upsert``), the values converted as SQLAlchemy would.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import cache
from itertools import chain, islice
from operator import itemgetter
from typing import Any, Literal, overload

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Connection,
    DateTime,
    Float,
    Integer,
    String,
    Table,
    func,
    inspect,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError

from ol_dagster.catalog.embedded import changes, export, reads
from ol_dagster.catalog.embedded import cleanup as cleanup_ops
from ol_dagster.catalog.embedded.tables import (
    DATA,
    JOB,
    JOB_REFERENCE,
    ORCHESTRATION,
    SYSTEMS_ADMIN,
    clock,
    data_flows,
    entities,
    field_flows,
    fields,
    metadata,
    quality_checks,
    quality_suites,
    routines,
    run_metrics,
    statements,
    systems,
    users,
)
from ol_dagster.catalog.protocol import (
    CleanupCounts,
    DatasetRef,
    FailedRow,
    ObjectType,
    UploadResult,
)
from ol_dagster.catalog.renames import may_move, renames
from ol_dagster.catalog.systems import owned_jobs, wanted_systems
from ol_dagster.db import lock_schema, open_engine
from ol_dagster.gcpause import gc_paused
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
from ol_dagster.openlineage.envelope import namespace_allowed
from ol_dagster.settings import SyncDefinition

CHUNK = 500
STAMP_CHUNK = 5_000  # values of an IN list, well within SQLite's 32,766 variables
PG_CHUNK = 10_000  # rows per unnest upsert: the statement's size does not grow with it
DEFAULT_USER = "ol-dagster"
# PostgreSQL tables whose rows every upload updates, and the share of each page filled by inserts
STAMPED_TABLES = (
    entities,
    fields,
    routines,
    statements,
    data_flows,
    field_flows,
    quality_checks,
    run_metrics,
)
PG_FILLFACTOR = 50
# Indexes earlier versions created that no query needs: each costs every upload a btree insert
# per row (the scope ones repeat the leading column of the flows' unique keys).
RETIRED_INDEXES = ("ix_cat_flows_scope", "ix_cat_field_flows_scope")
_SCHEMA_LOCK = 0x6F6C5F636174616C  # "ol_catal": the advisory lock of this schema's changes

# element types of the unnest arrays; strings go as text, so that a value too long for its
# VARCHAR(n) column fails on assignment as with INSERT ... VALUES (a cast to varchar(n)[] would
# silently cut it), and JSON goes as its text, cast per value
_PG_ARRAY_TYPES: tuple[tuple[type, str], ...] = (
    (BigInteger, "bigint"),
    (Integer, "integer"),
    (Boolean, "boolean"),
    (Float, "double precision"),
    (DateTime, "timestamp"),
    (String, "text"),
    (JSON, "text"),
)

EntityKey = tuple[int, str, str]  # (system id, schema, name)
Stamp = Any  # a last-update as the driver gives it: SQLite's text, PostgreSQL's datetime


def naive(dt: datetime) -> datetime:
    return dt.astimezone(UTC).replace(tzinfo=None)


_first = itemgetter(0)


def batched(items: Iterable[Any], size: int = CHUNK) -> Iterator[list[Any]]:
    """Lists of ``size`` items (the last one shorter); ``items`` may be a generator."""
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


class EmbeddedCatalog:
    """The ``Catalog`` protocol over a SQLAlchemy database (SQLite file or PostgreSQL)."""

    def __init__(self, url: str, *, user: str = DEFAULT_USER, detect_changes: bool = True) -> None:
        """``detect_changes=False``: every upload re-sends every row, the digests unused (and
        cleared), as before change detection; the tests compare the two."""
        self.url = url
        self.user = user
        self.detect_changes = detect_changes
        self.engine = open_engine(url)
        self._pg = self.engine.dialect.name == "postgresql"
        self._insert = postgresql.insert if self._pg else sqlite.insert
        self._chunk = PG_CHUNK if self._pg else CHUNK  # rows per upsert statement
        self._rehearsal: Connection | None = None  # the open transaction of a rehearsal
        # one locked transaction: catalogs opened at once on an empty PostgreSQL database (runs,
        # a sensor, the webserver) would otherwise race on CREATE TABLE and on the first user
        with self.engine.begin() as conn:
            lock_schema(conn, _SCHEMA_LOCK)
            metadata.create_all(conn)
            # a catalog created by an earlier version gains the columns and indexes added since
            present = {c["name"] for c in inspect(conn).get_columns(entities.name)}
            for column, ddl in (("analysis", "JSON"), ("content_hash", "VARCHAR(32)")):
                if column not in present:
                    conn.exec_driver_sql(f"ALTER TABLE {entities.name} ADD COLUMN {column} {ddl}")
            for table in metadata.sorted_tables:
                for index in table.indexes:
                    index.create(conn, checkfirst=True)
            for name in RETIRED_INDEXES:
                conn.exec_driver_sql(f"DROP INDEX IF EXISTS {name}")
            if self._pg:
                self._set_fillfactor(conn)
            self._ensure_clock_row(conn)
            if conn.execute(select(func.count()).select_from(users)).scalar_one() == 0:
                # a new catalog: its own sync user administers Systems, as Blindata's must
                conn.execute(users.insert().values(name=user, permissions=[SYSTEMS_ADMIN]))

    def close(self) -> None:
        self.engine.dispose()

    def _set_fillfactor(self, conn: Connection) -> None:
        """Leave half of each new page of the stamped tables free (PostgreSQL).

        Every upload updates every row it describes (a stamp, or an upsert of run results). On a
        full page the new row version goes to another page and every index of the table gets an
        entry for it: at 10,000 jobs an unchanged snapshot took ~6 s, then ~10 s as the indexes
        grew, the catalog 285 then 450 MB after seven snapshots. With room on the page the
        update is heap-only (no index entry; the previous version is pruned when the page is
        next updated): ~1.7 s every time, 155 MB (``benchmarks/upload.py``). A catalog created
        before gets it for the pages written from now on (``VACUUM FULL`` rewrites the others)."""
        names = [t.name for t in STAMPED_TABLES]
        found = conn.exec_driver_sql(
            "SELECT relname, reloptions FROM pg_class "
            "WHERE oid = ANY(ARRAY[" + ", ".join(["%s::regclass"] * len(names)) + "])",
            tuple(names),
        ).all()
        wanted = f"fillfactor={PG_FILLFACTOR}"
        for name, options in found:
            if wanted not in (options or []):
                conn.exec_driver_sql(f"ALTER TABLE {name} SET (fillfactor = {PG_FILLFACTOR})")

    # -- users ---------------------------------------------------------------------------------

    def set_permissions(self, user: str, permissions: list[str]) -> None:
        with self.engine.begin() as conn:
            if (
                conn.execute(
                    update(users).where(users.c.name == user).values(permissions=permissions)
                ).rowcount
                == 0
            ):
                conn.execute(users.insert().values(name=user, permissions=permissions))

    def _require_admin(self, conn: Connection) -> None:
        perms = conn.execute(select(users.c.permissions).where(users.c.name == self.user)).scalar()
        if SYSTEMS_ADMIN not in (perms or []):
            raise cleanup_ops.CleanupPermissionDenied(
                f"user {self.user!r} lacks {SYSTEMS_ADMIN}: cleanup refused"
            )

    # -- clock ---------------------------------------------------------------------------------

    def clock(self) -> datetime:
        """The database server's time (never the Python process's)."""
        with self.engine.connect() as conn:
            if self._pg:
                value = conn.exec_driver_sql("SELECT clock_timestamp() AT TIME ZONE 'UTC'").scalar()
            else:
                text = conn.exec_driver_sql("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')").scalar()
                value = datetime.fromisoformat(str(text))
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC)

    def _ensure_clock_row(self, conn: Connection) -> None:
        conn.execute(
            self._insert(clock)
            .values(id=1, last_stamp=datetime(1970, 1, 1))
            .on_conflict_do_nothing(index_elements=["id"])
        )

    def _claim_stamp(self) -> datetime:
        """The upload's time: the catalog clock, or just after the last upload's time if the
        clock has not passed it (two uploads in one SQLite millisecond, a clock set back). Never
        before the clock, so never before a cutoff read earlier; never an earlier upload's, so
        the rows of a time are those one upload sent, which change detection relies on."""
        now = naive(self.clock())  # first: on SQLite, the claim below holds the write lock
        with self.engine.begin() as conn:  # SQLite: BEGIN IMMEDIATE, one claim at a time
            self._ensure_clock_row(conn)
            last = select(clock.c.last_stamp).where(clock.c.id == 1)
            last_stamp = conn.execute(last.with_for_update() if self._pg else last).scalar_one()
            if now <= last_stamp:
                now = last_stamp + timedelta(microseconds=1)
            conn.execute(update(clock).where(clock.c.id == 1).values(last_stamp=now))
        return now

    # -- upload --------------------------------------------------------------------------------

    @overload
    def _upsert(
        self,
        conn: Connection,
        table: Table,
        rows: list[dict[str, Any]],
        keys: list[str],
        refresh: list[str],
        upload_id: str,
    ) -> tuple[list[int], int]: ...

    @overload
    def _upsert(
        self,
        conn: Connection,
        table: Table,
        rows: Iterable[tuple[tuple, dict[str, Any]]],
        keys: list[str],
        refresh: list[str],
        upload_id: str,
        *,
        keyed: Literal[True],
        want_ids: bool = True,
    ) -> tuple[dict[tuple, int], int]: ...

    def _upsert(
        self,
        conn: Connection,
        table: Table,
        rows: Any,
        keys: list[str],
        refresh: list[str],
        upload_id: str,
        *,
        keyed: bool = False,
        want_ids: bool = True,
    ) -> tuple[Any, int]:
        """Upsert ``rows``; returns their ids in order and how many this upload inserted.

        Rows sharing a key (two OpenLineage names for one catalog object) are written once.
        RETURNING gives each row's key with its id, so ids are matched by key, not by position:
        ``sort_by_parameter_order`` cannot order an upsert (PostgreSQL sorts the returned rows by
        id, which puts existing rows before new ones; SQLite falls back to one row a statement).

        ``keyed``: ``rows`` are ``(key, row)`` pairs of distinct keys, possibly a generator (a
        large snapshot's fields and flows are built a chunk at a time); the ids come back by key
        (an empty dict unless ``want_ids``)."""
        if keyed:
            return self._upsert_unique(
                conn, table, rows, keys, refresh, upload_id, want_ids=want_ids
            )
        row_keys = [tuple(r[c] for c in keys) for r in rows]
        unique = dict(zip(row_keys, rows, strict=True))  # the last row of a key, at its first place
        ids, written = self._upsert_unique(
            conn, table, unique.items(), keys, refresh, upload_id, want_ids=True
        )
        return [ids[k] for k in row_keys], written

    def _upsert_unique(
        self,
        conn: Connection,
        table: Table,
        rows: Iterable[tuple[tuple, dict[str, Any]]],
        keys: list[str],
        refresh: list[str],
        upload_id: str,
        *,
        want_ids: bool,
    ) -> tuple[dict[tuple, int], int]:
        """Upsert ``(key, row)`` pairs of distinct keys, a chunk at a time (``rows`` may be a
        generator: only a chunk of rows is ever built); returns the ids by key (when wanted) and
        how many rows this upload inserted (``created_by``, kept on conflict, is its id)."""
        ids: dict[tuple, int] = {}
        written = 0
        id_col = table.c.id if "id" in table.c else table.c[keys[0]]
        returning = [table.c.created_by]
        if want_ids:
            returning = [id_col, table.c.created_by, *(table.c[c] for c in keys)]
        for chunk in batched(rows, self._chunk):
            returned = self._bulk_upsert(
                conn,
                table,
                [r for _, r in chunk],
                keys,
                refresh,
                {"created_by": upload_id},
                returning,
            )
            if not want_ids:
                written += sum(1 for (created_by,) in returned if created_by == upload_id)
                continue
            mine = {k: k for k, _ in chunk}  # the ids dict keeps the graph's key objects
            for rid, created_by, *key in returned:
                ids[mine[tuple(key)]] = rid
                written += created_by == upload_id
        return ids, written

    def _bulk_upsert(
        self,
        conn: Connection,
        table: Table,
        rows: list[dict[str, Any]],
        keys: list[str],
        refresh: list[str],
        constants: dict[str, Any],
        returning: list[Column],
    ) -> list[Sequence[Any]]:
        """``INSERT ... ON CONFLICT (keys) DO UPDATE SET refresh RETURNING returning`` of one
        chunk in one statement handed straight to the driver, ``constants`` the same for every
        row; the rows share their columns (as any executemany's). SQLAlchemy's executemany builds
        and processes a parameter dict per row: half the time of a 300,000-row upload."""
        if not rows:
            return []
        quote = self.engine.dialect.identifier_preparer.quote
        columns = [*constants, *rows[0]]
        if self._pg:
            source, params = self._pg_rows(table, rows, constants)
        else:
            source, params = self._sqlite_rows(table, rows, constants)
        sql = (
            f"INSERT INTO {quote(table.name)} ({', '.join(quote(c) for c in columns)}) {source} "
            f"ON CONFLICT ({', '.join(quote(c) for c in keys)}) DO UPDATE SET "
            + ", ".join(f"{quote(c)} = EXCLUDED.{quote(c)}" for c in refresh)
        )
        if returning:
            sql += f" RETURNING {', '.join(quote(c.name) for c in returning)}"
        result = conn.exec_driver_sql(sql, tuple(params))
        return list(result.all()) if returning else []

    def _pg_rows(
        self, table: Table, rows: list[dict[str, Any]], constants: dict[str, Any]
    ) -> tuple[str, list[Any]]:
        """``SELECT ... FROM unnest(...)``: the rows' values as one binary array per column."""
        serialize = self.engine.dialect._json_serializer or json.dumps  # type: ignore[attr-defined]
        arrays: list[str] = []
        selected: list[str] = ["%s"] * len(constants)  # params in statement order: these first
        params: list[Any] = list(constants.values())
        for i, name in enumerate(rows[0]):
            column_type = table.c[name].type
            element = next(t for base, t in _PG_ARRAY_TYPES if isinstance(column_type, base))
            values = [r[name] for r in rows]
            if isinstance(column_type, JSON):
                values = [serialize(v) for v in values]
                selected.append(f"u.c{i}::json")
            else:
                if element == "double precision":
                    values = [float(v) if v is not None else None for v in values]
                selected.append(f"u.c{i}")
            arrays.append(f"%b::{element}[]")  # binary: arrays dump ~3x faster than as text
            params.append(values)
        names = ", ".join(f"c{i}" for i in range(len(rows[0])))
        source = f"SELECT {', '.join(selected)} FROM unnest({', '.join(arrays)}) AS u({names})"
        return source, params

    def _sqlite_rows(
        self, table: Table, rows: list[dict[str, Any]], constants: dict[str, Any]
    ) -> tuple[str, list[Any]]:
        """``VALUES (?, ...), ...`` (a chunk of at most ``CHUNK`` rows, within SQLite's 32,766
        variables), converted by the columns' own SQLAlchemy bind processors."""
        dialect = self.engine.dialect
        columns = [*constants, *rows[0]]
        # column by column, then interleaved: far fewer Python steps than row by row
        values: list[list[Any]] = []
        for name in columns:
            process = table.c[name].type._cached_bind_processor(dialect)  # noqa: SLF001
            if name in constants:
                value = constants[name]
                values.append([process(value) if process else value] * len(rows))
                continue
            column = [r[name] for r in rows]
            if process is not None:
                if isinstance(table.c[name].type, DateTime):
                    process = cache(process)  # a chunk's times are mostly the upload's clock
                # every processor takes None as SQLAlchemy gives it (JSON's stores 'null')
                column = list(map(process, column))
            values.append(column)
        params = list(chain.from_iterable(zip(*values, strict=True)))
        one = f"({', '.join('?' * len(columns))})"
        return f"VALUES {', '.join([one] * len(rows))}", params

    def _ensure_systems(self, conn: Connection, wanted: dict[str, dict]) -> dict[str, int]:
        """Get or create Systems; ``wanted`` maps a System to the properties it gets if created."""
        ids: dict[str, int] = {}
        for sid, name, props in conn.execute(
            select(systems.c.id, systems.c.name, systems.c.properties).where(
                systems.c.name.in_(list(wanted))
            )
        ):
            ids[name] = sid
            mark = wanted[name].get("openLineageJobSystem")
            marks = list((props or {}).get("openLineageJobSystem") or [])
            if mark and mark[0] not in marks:
                conn.execute(
                    systems.update()
                    .where(systems.c.id == sid)
                    .values(properties={**(props or {}), "openLineageJobSystem": marks + mark})
                )
        for name, props in wanted.items():
            if name not in ids:
                ids[name] = conn.execute(
                    systems.insert().values(name=name, properties=props)
                ).inserted_primary_key[0]  # type: ignore[index]
        return ids

    def upload(
        self,
        graph: LineageGraph,
        definition: SyncDefinition,
        raw_events: Callable[[], Iterable[bytes]] | None = None,
    ) -> UploadResult:
        """``raw_events`` is for catalogs that take OpenLineage events; this one takes the graph."""
        if self._rehearsal is not None:
            raise RuntimeError("no upload during a rehearsal: it would wait for its transaction")
        # hundreds of thousands of rows and keys, no cycles among them; with a large graph alive,
        # each collection the allocations trigger walks it all (a fifth of an unchanged upload)
        with gc_paused():
            return self._upload(graph, definition)

    def _upload(self, graph: LineageGraph, definition: SyncDefinition) -> UploadResult:
        result = UploadResult()
        try:
            now = self._claim_stamp()
        except SQLAlchemyError as exc:
            reason = f"{type(exc).__name__}: {getattr(exc, 'orig', exc)}"
            result.failed.append(FailedRow("clock", "*", reason))
            return result
        upload_id = str(uuid.uuid4())
        # a job known only as a parent, in a namespace this definition does not own, is another
        # definition's job: never created in, touched in or removed from its job Systems; the
        # orchestration flow to it (owned by the child's scope) links to its entity, or to a stub
        job_sys = owned_jobs(graph, definition)
        foreign = set(graph.jobs) - set(job_sys)
        linked = sorted(
            {k for o in graph.orchestration_flows for k in (o.parent, o.child)} & foreign
        )
        wanted = wanted_systems(graph, definition)
        taken = {*wanted, definition.job_system, *(r.system for r in definition.jobSystems)}

        def step(object_type: str, fn: Callable[[Connection], tuple[int, int]]) -> bool:
            try:
                with self.engine.begin() as conn:
                    written, touched = fn(conn)
            except SQLAlchemyError as exc:
                result.failed.append(
                    FailedRow(
                        object_type, "*", f"{type(exc).__name__}: {getattr(exc, 'orig', exc)}"
                    )
                )
                return False
            result.written[object_type] = result.written.get(object_type, 0) + written
            result.touched[object_type] = result.touched.get(object_type, 0) + touched
            return True

        # digests of what this upload writes per job and dataset: those the catalog already
        # holds with the same digest are only stamped (``changes``); the others are upserted
        contents = changes.contents(graph, job_sys) if self.detect_changes else None
        # the clean objects, each with the last-update its rows carry since the upload that
        # stamped them last; a job leaves ``clean_jobs`` as soon as one of its rows is missing
        clean_jobs: dict[NodeKey, Stamp] = {}
        clean_ds: dict[NodeKey, Stamp] = {}
        state: dict[str, Any] = {}

        def do_systems(conn: Connection) -> tuple[int, int]:
            state["sys"] = self._ensure_systems(conn, wanted)
            return 0, 0

        def do_entities(conn: Connection) -> tuple[int, int]:
            sys_ids = state["sys"]
            state["renamed"] = self._apply_renames(conn, graph, definition, sys_ids)
            job_digest = {k: c.digest for k, c in contents.jobs.items()} if contents else {}
            ds_digest = contents.datasets if contents else {}
            job_ids: dict[NodeKey, int] = {}
            ds_ids: dict[NodeKey, int] = {}
            stamped = 0
            if contents is not None and not state["renamed"]:
                # a rename moved an entity under the digests' feet: this upload re-sends all
                job_ident = {k: (sys_ids[job_sys[k]], k[0], k[1]) for k in job_digest}
                ds_ident = {
                    k: (sys_ids[d.system], d.schema, d.object_name)
                    for k, d in graph.datasets.items()
                    if k in ds_digest
                }
                stored = self._stored_entities(conn, [*job_ident.values(), *ds_ident.values()])
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
                for (prev, schema), members in groups.items():
                    lost = self._stamp(
                        conn,
                        entities,
                        now,
                        prev,
                        "id",
                        dict.fromkeys((m[0] for m in members), 1),
                        also={"fields_update": now if schema else None},
                    )
                    for eid, key, is_job in members:
                        if eid not in lost:
                            (job_ids if is_job else ds_ids)[key] = eid
                            (clean_jobs if is_job else clean_ds)[key] = prev
                            stamped += 1
            rows: list[dict[str, Any]] = []
            job_keys: list[NodeKey] = []
            for key, j in graph.jobs.items():
                if key in foreign or key in clean_jobs:
                    continue
                job_keys.append(key)
                rows.append(
                    {
                        "system_id": sys_ids[job_sys[key]],
                        "schema": j.namespace,
                        "name": j.name,
                        "type": JOB,
                        "ol_namespace": j.namespace,
                        "ol_name": j.name,
                        "description": j.description,
                        "properties": {
                            "integration": j.integration,
                            "jobType": j.job_type,
                            "processingType": j.processing_type,
                            "owners": j.owners,
                            "sourceCodeLocation": j.source_code_location,
                        },
                        "last_update": now,
                        "fields_update": None,
                        "content_hash": job_digest.get(key),
                    }
                )
            ds_keys: list[NodeKey] = []
            for key, d in graph.datasets.items():
                if key in clean_ds:
                    continue
                ds_keys.append(key)
                rows.append(
                    {
                        "system_id": sys_ids[d.system],
                        "schema": d.schema,
                        "name": d.object_name,
                        "type": d.type,
                        "ol_namespace": d.namespace,
                        "ol_name": d.name,
                        "description": d.description,
                        "properties": {"owners": d.owners},
                        "last_update": now,
                        "fields_update": now if d.has_schema else None,
                        "content_hash": ds_digest.get(key),
                    }
                )
            ids, written = self._upsert(
                conn,
                entities,
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
                upload_id,
            )
            job_ids.update(zip(job_keys, ids[: len(job_keys)], strict=True))
            ds_ids.update(zip(ds_keys, ids[len(job_keys) :], strict=True))
            state["job_ids"], state["ds_ids"] = job_ids, ds_ids
            touched = stamped + len(set(ids)) - written
            foreign_ids, stubs = self._link_foreign_jobs(conn, linked, taken, now, upload_id)
            state["job_ids"].update(foreign_ids)
            return written + stubs, touched

        def do_fields(conn: Connection) -> tuple[int, int]:
            ds_ids = state["ds_ids"]
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
                for eid in self._stamp(conn, fields, now, prev, "entity_id", expected):
                    resend.add(of_entity[eid])
                    stamped -= expected[eid]
            # a million fields in a large snapshot: rows are built a chunk at a time
            unique: dict[tuple[int, str], FieldNode] = {}  # the last field of a key, first place
            count = 0
            for key, d in graph.datasets.items():
                if key in clean_ds and key not in resend:
                    continue
                eid = ds_ids[key]
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
                        "last_update": now,
                    },
                )
                for k, f in unique.items()
            )
            ids, written = self._upsert(
                conn,
                fields,
                rows,
                ["entity_id", "name"],
                ["type", "description", "ordinal_position", "last_update"],
                upload_id,
                keyed=True,
            )
            state["field_ids"] = ids  # by (entity id, field path); clean ones read when needed
            return written, stamped + count - written

        def do_routines(conn: Connection) -> tuple[int, int]:
            sys_ids = state["sys"]
            items = [(key, r) for key, r in graph.routines.items() if key in job_sys]
            statement_ids: dict[NodeKey, int] = {}
            stamped = 0
            groups: defaultdict[tuple[Stamp, int, str], list[str]] = defaultdict(list)
            for key, _ in items:
                if key in clean_jobs:
                    groups[(clean_jobs[key], sys_ids[job_sys[key]], key[0])].append(key[1])
            for (prev, sid, schema), names in groups.items():
                lost = self._stamp(
                    conn,
                    routines,
                    now,
                    prev,
                    "name",
                    dict.fromkeys(names, 1),
                    match={"system_id": sid, "schema": schema},
                )
                kept = [n for n in names if n not in lost]
                lost |= self._stamp_statements(conn, now, prev, sid, schema, kept)
                stamped += len(names) - len(lost)
                for name in lost:  # removed since: the job's rows are all sent again
                    del clean_jobs[(schema, name)]
            items = [(key, r) for key, r in items if key not in clean_jobs]
            rows = [
                {
                    "system_id": sys_ids[job_sys[key]],
                    "schema": key[0],
                    "name": key[1],
                    "last_update": now,
                }
                for key, _ in items
            ]
            ids, written = self._upsert(
                conn, routines, rows, ["system_id", "schema", "name"], ["last_update"], upload_id
            )
            stmt_rows = [
                {"routine_id": rid, "text": r.statement, "dialect": r.dialect, "last_update": now}
                for rid, (_, r) in zip(ids, items, strict=True)
            ]
            sids, s_written = self._upsert(
                conn,
                statements,
                stmt_rows,
                ["routine_id"],
                ["text", "dialect", "last_update"],
                upload_id,
            )
            statement_ids.update((key, sid) for (key, _), sid in zip(items, sids, strict=True))
            state["statement_ids"] = statement_ids
            result.written[ObjectType.STATEMENTS] = s_written
            result.touched[ObjectType.STATEMENTS] = stamped + len(stmt_rows) - s_written
            return written, stamped + len(rows) - written

        def do_flows(conn: Connection) -> tuple[int, int]:
            ds, jobs, stm = state["ds_ids"], state["job_ids"], state.get("statement_ids", {})
            # one scope string per job, not one per flow
            scope = cache(lambda job: flow_scope(*job))
            o_scope = cache(lambda job: orchestration_scope(*job))

            stamped = 0
            if contents is not None and clean_jobs:
                short = self._stamp_flows(conn, now, contents.jobs, clean_jobs, scope, o_scope)
                # their routines were only stamped: their flows need the statements' ids
                with_sql = [k for k in short if k in graph.routines]
                stm = {**stm, **self._statement_ids(conn, state["sys"], job_sys, with_sql)}
                stamped = sum(contents.jobs[key].flow_objects for key in clean_jobs)

            # rows are built a chunk at a time: keys first (the last flow of a key), then the rows
            # in key order, so the flow indexes grow at their end instead of at random places
            # (the graph's sets have no order): half the time of a 30,000-job upload on SQLite
            flows: dict[tuple, DataFlow | OrchestrationFlow] = {}
            count = 0
            for f in graph.data_flows:
                if f.job not in clean_jobs:
                    flows[(scope(f.job), ds[f.source], ds[f.target])] = f
                    count += 1
            for o in graph.orchestration_flows:
                if o.child not in clean_jobs:
                    flows[(o_scope(o.child), jobs[o.parent], jobs[o.child])] = o
                    count += 1
            rows = (
                (
                    k,
                    {
                        "scope": k[0],
                        "kind": DATA if isinstance(f, DataFlow) else ORCHESTRATION,
                        "from_entity": k[1],
                        "to_entity": k[2],
                        "statement_id": stm.get(f.job) if isinstance(f, DataFlow) else None,
                        "last_update": now,
                    },
                )
                for k, f in sorted(flows.items(), key=_first)
            )
            _, written = self._upsert(
                conn,
                data_flows,
                rows,
                ["scope", "from_entity", "to_entity"],
                ["kind", "statement_id", "last_update"],
                upload_id,
                keyed=True,
                want_ids=False,
            )
            del flows
            if contents is None:
                resent = list(graph.field_flows)
            else:
                resent = [
                    ff
                    for job, job_flows in contents.field_flows.items()
                    if job not in clean_jobs
                    for ff in job_flows
                ]
            fids = self._field_ids(conn, state["field_ids"], ds, resent)
            field_rows: dict[tuple, FieldFlow] = {}
            for ff in resent:
                source = fids[(ds[ff.source[:2]], ff.source[2])]
                target = fids[(ds[ff.target[:2]], ff.target[2])]
                kept = field_rows.setdefault((scope(ff.job), source, target), ff)
                if kept is not ff:  # one row for both: the same one whatever the sets' order
                    field_rows[(scope(ff.job), source, target)] = changes.pick_field_flow(kept, ff)
            count += len(resent)
            frows = (
                (
                    k,
                    {
                        "scope": k[0],
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
            _, f_written = self._upsert(
                conn,
                field_flows,
                frows,
                ["scope", "from_field", "to_field"],
                ["transformation", "subtype", "statement_id", "last_update"],
                upload_id,
                keyed=True,
                want_ids=False,
            )
            return written + f_written, stamped + count - written - f_written

        def do_quality(conn: Connection) -> tuple[int, int]:
            suites = sorted({f"{q.job[0]}.{q.job[1]}" for q in graph.quality_checks.values()})
            suite_ids: dict[str, int] = {}
            for chunk in batched(suites):
                stmt = self._insert(quality_suites).on_conflict_do_nothing(index_elements=["code"])
                conn.execute(stmt, [{"code": c} for c in chunk])
                for sid, code in conn.execute(
                    select(quality_suites.c.id, quality_suites.c.code).where(
                        quality_suites.c.code.in_(list(chunk))
                    )
                ):
                    suite_ids[code] = sid
            rows = [
                {
                    "suite_id": suite_ids[f"{q.job[0]}.{q.job[1]}"],
                    "code": f"{q.dataset[0]}:{q.dataset[1]}|{q.name}|{q.column or ''}",
                    "dataset": f"{q.dataset[0]}:{q.dataset[1]}",
                    "assertion": q.name,
                    "column_name": q.column,
                    "enabled": True,
                    "last_success": q.success,
                    "last_checked": naive(q.checked_at) if q.checked_at else None,
                    "last_update": now,
                }
                for q in graph.quality_checks.values()
            ]
            _, written = self._upsert(
                conn,
                quality_checks,
                rows,
                ["suite_id", "code"],
                ["enabled", "last_success", "last_checked", "last_update"],
                upload_id,
            )
            return written, len(rows) - written

        def do_metrics(conn: Connection) -> tuple[int, int]:
            rows = []
            for key, j in graph.jobs.items():
                m = j.metrics
                if not m.runs or key not in job_sys:  # another definition's job: not touched
                    continue
                rows.append(
                    {
                        "entity_id": state["job_ids"][key],
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
            if rows:
                keep = ["entity_id"]
                refresh = [c for c in rows[0] if c != "entity_id"]
                for chunk in batched(rows, self._chunk):
                    self._bulk_upsert(conn, run_metrics, chunk, keep, refresh, {}, [])
            return 0, 0

        steps: list[tuple[str, Callable[[Connection], tuple[int, int]]]] = [
            ("systems", do_systems),
            (ObjectType.PHYSICAL_ENTITIES, do_entities),
            (ObjectType.PHYSICAL_FIELDS, do_fields),
            (ObjectType.ROUTINES, do_routines),
            (ObjectType.DATA_FLOWS, do_flows),
            ("qualityChecks", do_quality),
            ("runMetrics", do_metrics),
        ]
        for object_type, fn in steps:
            if not step(object_type, fn):
                break  # later steps need the ids of this one; the failure blocks the cleanup
        result.written.pop("systems", None)
        result.touched.pop("systems", None)
        if ObjectType.PHYSICAL_ENTITIES in result.written:  # the renames were committed
            result.renamed = state.get("renamed", [])
        # a DROP removes nothing here: the cleanup calls drop_datasets after its guards
        return result

    # -- change detection: stamping what an upload does not re-send -----------------------------
    # Raw SQL on the driver: tens of thousands of keys per statement, which SQLAlchemy would
    # coerce and name one by one. A stored time is bound back as it was read (``Stamp``: SQLite's
    # text, PostgreSQL's timestamp), so it equals itself whatever its resolution.

    def _in(self, column: str, values: Sequence[Any], sql_type: str) -> tuple[str, list[Any]]:
        """``column IN (values)``: one array parameter on PostgreSQL (cast, so that an index on
        a bigint column serves it), a placeholder per value on SQLite."""
        if self._pg:
            return f"{column} = ANY(%s::{sql_type}[])", [list(values)]
        return f"{column} IN ({', '.join('?' * len(values))})", list(values)

    def _db_time(self, value: datetime) -> Stamp:
        process = DateTime()._cached_bind_processor(self.engine.dialect)  # noqa: SLF001
        return process(value) if process else value

    def _stored_entities(
        self, conn: Connection, idents: Iterable[EntityKey]
    ) -> dict[EntityKey, tuple[int, str | None, Stamp]]:
        """The id, digest and last-update of the entities of ``idents`` the catalog holds.

        Looked up through the identity index, by (System, schema) and a chunk of names: SQLite
        scans the table for a row-value ``IN``, so each term names its System and schema, and
        terms are OR-ed a few at a time (each an index search)."""
        groups: defaultdict[tuple[int, str], list[str]] = defaultdict(list)
        for sid, schema, name in idents:
            groups[(sid, schema)].append(name)
        terms = [
            (sid, schema, chunk)
            for (sid, schema), names in groups.items()
            for chunk in batched(names, STAMP_CHUNK)
        ]
        q = self.engine.dialect.identifier_preparer.quote
        ph = "%s" if self._pg else "?"
        head = (
            f"SELECT id, system_id, {q('schema')}, name, content_hash, last_update "
            f"FROM {q(entities.name)} WHERE "
        )
        out: dict[EntityKey, tuple[int, str | None, Stamp]] = {}
        start = 0
        while start < len(terms):
            end, names = start, 0
            while end < len(terms) and end - start < 100 and names < STAMP_CHUNK:
                names += len(terms[end][2])
                end += 1
            clauses: list[str] = []
            params: list[Any] = []
            for sid, schema, chunk in terms[start:end]:
                in_sql, in_params = self._in("name", chunk, "text")
                clauses.append(f"(system_id = {ph} AND {q('schema')} = {ph} AND {in_sql})")
                params += [sid, schema, *in_params]
            for eid, sid, schema, name, digest, prev in conn.exec_driver_sql(
                head + " OR ".join(clauses), tuple(params)
            ):
                out[(sid, schema, name)] = (eid, digest, prev)
            start = end
        return out

    def _stamp(
        self,
        conn: Connection,
        table: Table,
        now: datetime,
        prev: Stamp,
        column: str,
        expected: dict[Any, int],
        *,
        match: dict[str, Any] | None = None,
        also: dict[str, Any] | None = None,
    ) -> set[Any]:
        """``UPDATE table SET last_update = now WHERE column IN (expected) AND last_update =
        prev`` (and each column of ``match`` equal to its value; ``also`` set too), a chunk at a
        time. Returns the values of ``column`` with fewer rows stamped than ``expected`` says
        (the catalog lost some since).

        Only the rows stamped at ``prev`` are taken: those the upload of that time sent for the
        objects, not the older ones of the same scope that the cleanup is to judge. As no two
        uploads share a time (``_claim_stamp``), rows of that time are never more than expected,
        so a chunk whose count is right is right for each value; only a short chunk is counted
        value by value."""
        q = self.engine.dialect.identifier_preparer.quote
        ph = "%s" if self._pg else "?"
        sql_type = "bigint" if isinstance(table.c[column].type, Integer) else "text"
        sets = {"last_update": now, **(also or {})}
        set_values = [self._db_time(v) if isinstance(v, datetime) else v for v in sets.values()]
        match = match or {}
        where = f"last_update = {ph}" + "".join(f" AND {q(c)} = {ph}" for c in match)
        stamp = f"UPDATE {q(table.name)} SET {', '.join(f'{q(c)} = {ph}' for c in sets)} WHERE "
        count = f"SELECT {q(column)}, count(*) FROM {q(table.name)} WHERE "
        short: set[Any] = set()
        for chunk in batched(sorted(expected), STAMP_CHUNK):
            in_sql, in_params = self._in(q(column), chunk, sql_type)
            params = (*set_values, prev, *match.values(), *in_params)
            stamped = conn.exec_driver_sql(f"{stamp}{where} AND {in_sql}", params).rowcount
            if stamped == sum(map(expected.__getitem__, chunk)):
                continue
            got = {
                value: n
                for value, n in conn.exec_driver_sql(
                    f"{count}{where} AND {in_sql} GROUP BY {q(column)}",
                    (set_values[0], *match.values(), *in_params),
                )
            }
            short.update(k for k in chunk if got.get(k, 0) != expected[k])
        return short

    def _stamp_statements(
        self,
        conn: Connection,
        now: datetime,
        prev: Stamp,
        system_id: int,
        schema: str,
        names: list[str],
    ) -> set[str]:
        """Stamp the statements of the routines ``names`` (one each); returns the names whose
        statement was not there with ``prev``."""
        q = self.engine.dialect.identifier_preparer.quote
        ph = "%s" if self._pg else "?"
        db_now = self._db_time(now)
        short: set[str] = set()
        for chunk in batched(sorted(names), STAMP_CHUNK):
            in_sql, in_params = self._in("r.name", chunk, "text")
            of_chunk = f"r.system_id = {ph} AND r.{q('schema')} = {ph} AND {in_sql}"
            routine_ids = f"SELECT r.id FROM {q(routines.name)} r WHERE {of_chunk}"
            stamped = conn.exec_driver_sql(
                f"UPDATE {q(statements.name)} SET last_update = {ph} "
                f"WHERE last_update = {ph} AND routine_id IN ({routine_ids})",
                (db_now, prev, system_id, schema, *in_params),
            ).rowcount
            if stamped == len(chunk):
                continue
            found = {
                name
                for (name,) in conn.exec_driver_sql(
                    f"SELECT r.name FROM {q(routines.name)} r JOIN {q(statements.name)} s "
                    f"ON s.routine_id = r.id WHERE {of_chunk} AND s.last_update = {ph}",
                    (system_id, schema, *in_params, db_now),
                )
            }
            short.update(set(chunk) - found)
        return short

    def _statement_ids(
        self,
        conn: Connection,
        sys_ids: dict[str, int],
        job_sys: dict[NodeKey, str],
        jobs: list[NodeKey],
    ) -> dict[NodeKey, int]:
        """The ids of the statements of ``jobs``' routines, read from the catalog."""
        r, s = routines.c, statements.c
        groups: defaultdict[tuple[int, str], list[str]] = defaultdict(list)
        for key in jobs:
            groups[(sys_ids[job_sys[key]], key[0])].append(key[1])
        out: dict[NodeKey, int] = {}
        for (sid, schema), names in groups.items():
            for chunk in batched(names, STAMP_CHUNK):
                for name, stmt_id in conn.execute(
                    select(r.name, s.id)
                    .join(statements, s.routine_id == r.id)
                    .where(r.system_id == sid, r.schema == schema, r.name.in_(chunk))
                ):
                    out[(schema, name)] = stmt_id
        return out

    def _stamp_flows(
        self,
        conn: Connection,
        now: datetime,
        contents: dict[NodeKey, changes.JobContent],
        clean_jobs: dict[NodeKey, Stamp],
        scope: Callable[[NodeKey], str],
        o_scope: Callable[[NodeKey], str],
    ) -> set[NodeKey]:
        """Stamp the flows of the clean jobs' scopes. A job whose scopes hold fewer rows of its
        time than its content has (a flow removed since, or the cascade of a removed entity,
        field or statement) leaves ``clean_jobs``, its flows then upserted as a changed job's;
        returns those jobs."""
        by_prev: defaultdict[Stamp, list[NodeKey]] = defaultdict(list)
        for key, prev in clean_jobs.items():
            by_prev[prev].append(key)
        short: set[NodeKey] = set()
        for prev, keys in by_prev.items():
            data: dict[str, int] = {}
            field: dict[str, int] = {}
            owner: dict[str, NodeKey] = {}
            for key in keys:
                c = contents[key]
                if c.data_flows:
                    data[scope(key)] = c.data_flows
                    owner[scope(key)] = key
                if c.orchestration_flows:
                    data[o_scope(key)] = c.orchestration_flows
                    owner[o_scope(key)] = key
                if c.field_flows:
                    field[scope(key)] = c.field_flows
                    owner[scope(key)] = key
            for table, expected in ((data_flows, data), (field_flows, field)):
                lost = self._stamp(conn, table, now, prev, "scope", expected)
                short.update(owner[s] for s in lost)
        for key in short:
            del clean_jobs[key]
        return short

    def _field_ids(
        self,
        conn: Connection,
        ids: dict[tuple, int],
        ds_ids: dict[NodeKey, int],
        field_flows: Iterable[FieldFlow],
    ) -> dict[tuple, int]:
        """``ids`` (fields by (entity id, path)), with those of the fields ``field_flows`` link
        that this upload only stamped, read from the catalog."""
        missing: set[int] = set()
        for ff in field_flows:
            for end in (ff.source, ff.target):
                eid = ds_ids[end[:2]]  # type: ignore[index]
                if (eid, end[2]) not in ids:
                    missing.add(eid)
        f = fields.c
        for chunk in batched(sorted(missing), STAMP_CHUNK):
            for fid, eid, name in conn.execute(
                select(f.id, f.entity_id, f.name).where(f.entity_id.in_(chunk))
            ):
                ids.setdefault((eid, name), fid)
        return ids

    def _link_foreign_jobs(
        self,
        conn: Connection,
        jobs: list[NodeKey],
        taken: Collection[str],
        now: datetime,
        upload_id: str,
    ) -> tuple[dict[NodeKey, int], int]:
        """Entity ids for other definitions' jobs that orchestration flows need: their existing
        entity (left as it is: not this definition's to touch), else a stub in a neutral reference
        System named after the namespace, which no definition's cleanup visits. Returns the ids and
        how many stubs this upload created."""
        ids: dict[NodeKey, int] = {}
        missing: list[NodeKey] = []
        for key in jobs:
            eid = reads.job_entity_id(conn, *key)
            if eid is None:
                missing.append(key)
            else:
                ids[key] = eid
        created = 0
        ref_systems: dict[str, int] = {}
        for ns, name in missing:
            if ns not in ref_systems:
                ref_systems[ns] = self._reference_system(conn, ns, taken)
            identity = {"system_id": ref_systems[ns], "schema": ns, "name": name}
            eid = conn.execute(
                self._insert(entities)
                .values(
                    **identity,
                    type=JOB,
                    ol_namespace=ns,
                    ol_name=name,
                    properties={},
                    last_update=now,
                    created_by=upload_id,
                )
                .on_conflict_do_nothing(index_elements=list(identity))
                .returning(entities.c.id)
            ).scalar()
            if eid is None:  # already there (not as a job entity: the lookup would have found it)
                eid = conn.execute(
                    select(entities.c.id).where(
                        *(entities.c[column] == value for column, value in identity.items())
                    )
                ).scalar_one()
            else:
                created += 1
            ids[(ns, name)] = eid
        return ids, created

    def _reference_system(self, conn: Connection, namespace: str, taken: Collection[str]) -> int:
        """The neutral System of a namespace's job stubs: named after the namespace, unless that
        name is a System of another kind (or one this definition uses), then a suffixed name."""
        n = 0
        while True:
            name = namespace if n == 0 else f"{namespace} [job references {n}]"
            n += 1
            if name in taken:
                continue
            row = conn.execute(
                select(systems.c.id, systems.c.properties).where(systems.c.name == name)
            ).first()
            if row is None:
                return conn.execute(
                    systems.insert().values(name=name, properties={"kind": JOB_REFERENCE})
                ).inserted_primary_key[0]  # type: ignore[index]
            props = row[1] or {}
            if (
                props.get("kind") == JOB_REFERENCE
                and not props.get("openLineageOwner")
                and not props.get("openLineageJobSystem")
            ):
                return row[0]

    def _apply_renames(
        self,
        conn: Connection,
        graph: LineageGraph,
        definition: SyncDefinition,
        sys_ids: dict[str, int],
    ) -> list[str]:
        """Move each dataset a RENAME names when the rule says it moves (``catalog.renames``):
        its previous System exists, both Systems are this definition's to change, the old
        entity exists and the new name does not. Returns the renames applied, as
        ``"ns:name -> ns:name"``."""
        renamed: list[str] = []
        for r in renames(graph, definition):
            d, prev = r.dataset, r.previous
            found = conn.execute(
                select(systems.c.id, systems.c.properties).where(systems.c.name == prev.system)
            ).first()
            if found is None:
                continue
            old_system, props = found[0], found[1] or {}
            target = sys_ids[d.system]
            target_props = conn.execute(
                select(systems.c.properties).where(systems.c.id == target)
            ).scalar()
            if not may_move(definition, props, target_props or {}):
                continue
            exists = conn.execute(
                select(entities.c.id).where(
                    entities.c.system_id == target,
                    entities.c.schema == d.schema,
                    entities.c.name == d.object_name,
                )
            ).scalar()
            if exists is not None:
                continue
            moved = conn.execute(
                update(entities)
                .where(
                    entities.c.system_id == old_system,
                    entities.c.schema == prev.schema,
                    entities.c.name == prev.name,
                    entities.c.type != JOB,
                )
                .values(
                    system_id=target,
                    schema=d.schema,
                    name=d.object_name,
                    ol_namespace=d.namespace,
                    ol_name=d.name,
                )
            ).rowcount
            if moved:
                renamed.append(r.label)
        return renamed

    # -- cleanup (see cleanup.py) ----------------------------------------------------------------

    @contextmanager
    def rehearsal(self) -> Iterator[None]:
        """Rehearse cleanup calls for real, then undo them all.

        Inside, every cleanup call (``cleanup_flows``, ``cleanup_job_system``,
        ``cleanup_dataset_system``, ``drop_datasets``, ``disable_quality_checks``) runs on one
        connection, in one transaction rolled back when the block exits: a real call removes what
        it counts (cascades included) and later calls no longer see it, so the counts of the calls
        of a plan, in order, add up to what a real run of the plan removes, and nothing is gone
        afterwards. ``count_jobs``, ``systems`` and ``job_schemas`` read the rehearsed state too.
        Each call is a savepoint: one that fails (refused permission) leaves the earlier ones
        rehearsed. No upload is allowed inside (on SQLite it would wait for the write lock the
        rehearsal holds); rehearsals do not nest."""
        if self._rehearsal is not None:
            raise RuntimeError("a rehearsal is already under way")
        with self.engine.connect() as conn:
            transaction = conn.begin()
            self._rehearsal = conn
            try:
                yield
            finally:
                self._rehearsal = None
                transaction.rollback()

    @contextmanager
    def _cleanup_conn(self) -> Iterator[Connection]:
        """A transaction of its own, or, in a rehearsal, a savepoint of the rehearsal's."""
        conn = self._rehearsal
        if conn is None:
            with self.engine.begin() as own:
                yield own
            return
        with conn.begin_nested():
            yield conn

    @contextmanager
    def _read_conn(self) -> Iterator[Connection]:
        if self._rehearsal is not None:
            yield self._rehearsal
            return
        with self.engine.connect() as conn:
            yield conn

    def cleanup_flows(
        self,
        *,
        scope_prefixes: list[str] = (),  # type: ignore[assignment]
        scopes: list[str] = (),  # type: ignore[assignment]
        before: datetime,
        dry_run: bool,
    ) -> CleanupCounts:
        with self._cleanup_conn() as conn:
            self._require_admin(conn)
            return cleanup_ops.flows(
                conn, list(scope_prefixes), list(scopes), naive(before), dry_run
            )

    def cleanup_job_system(
        self,
        system: str,
        *,
        schemas: list[str] | None,
        before: datetime,
        dry_run: bool,
        routines_before: datetime | None = None,
    ) -> CleanupCounts:
        with self._cleanup_conn() as conn:
            self._require_admin(conn)
            return cleanup_ops.job_system(
                conn,
                system,
                schemas,
                naive(before),
                dry_run,
                naive(routines_before) if routines_before else None,
            )

    def cleanup_dataset_system(
        self, system: str, *, before: datetime, dry_run: bool
    ) -> CleanupCounts:
        with self._cleanup_conn() as conn:
            self._require_admin(conn)
            return cleanup_ops.dataset_system(conn, system, naive(before), dry_run)

    def drop_datasets(self, datasets: list[DatasetRef], *, dry_run: bool) -> CleanupCounts:
        """Remove the dataset entities a DROP named, with their fields and the flows that touch
        them; counted per object type as they go (a flow once). Whether this definition may drop
        in their Systems is the planner's decision, not checked here."""
        with self._cleanup_conn() as conn:
            self._require_admin(conn)
            return cleanup_ops.drop_datasets(conn, list(datasets), dry_run)

    def count_jobs(self, system: str, *, schemas: list[str] | None) -> int:
        with self._read_conn() as conn:
            return cleanup_ops.count_jobs(conn, system, schemas)

    def disable_quality_checks(self, jobs: list[str]) -> int:
        with self._cleanup_conn() as conn:
            return cleanup_ops.disable_quality_checks(conn, jobs)

    # -- reads (see reads.py) --------------------------------------------------------------------

    def systems(self) -> list[dict[str, Any]]:
        with self._read_conn() as conn:
            return reads.list_systems(conn)

    def job_schemas(self, system: str) -> list[str]:
        with self._read_conn() as conn:
            return reads.job_schemas(conn, system)

    def lineage(self, node: str, *, depth: int, upstream: bool, downstream: bool) -> dict[str, Any]:
        with self.engine.connect() as conn:
            return reads.lineage(conn, node, depth=depth, upstream=upstream, downstream=downstream)

    def export_state(self, definition: SyncDefinition) -> dict[str, Any]:
        """What ``definition`` has synced here, for the asset graph (see ``lineage_state``)."""
        with self.engine.connect() as conn:
            return export.export_state(
                conn,
                str(definition.uuid),
                lambda ns: namespace_allowed(ns, definition.allowedJobNamespaces),
                definition.assetGraph.maxJobs,
            )

    def annotate(self, key: str, items: list[tuple[str, str, str, dict[str, Any]]]) -> int:
        """Record an analysis result on entities: ``(kind, namespace, name, properties)`` with kind
        ``job`` or ``dataset``, stored under ``analysis[key]`` (uploads never overwrite it).
        Entities this catalog does not hold are skipped."""
        e = entities.c
        found = 0
        with self.engine.begin() as conn:
            for kind, namespace, name, props in items:
                type_match = (e.type == JOB) if kind == "job" else (e.type != JOB)
                for eid, current in conn.execute(
                    select(e.id, e.analysis).where(
                        e.ol_namespace == namespace, e.ol_name == name, type_match
                    )
                ).all():
                    conn.execute(
                        update(entities)
                        .where(e.id == eid)
                        .values(analysis={**(current or {}), key: props})
                    )
                    found += 1
        return found

    def counts(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            return reads.counts(conn)

    def job_names(self) -> list[str]:
        with self.engine.connect() as conn:
            return reads.job_names(conn)
