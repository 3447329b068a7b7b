"""The sync ledger: what each definition uploaded to a catalog that cannot clean by itself.

OpenMetadata and Marquez keep no "scope" and no last-update time ol-dagster could clean by. The
ledger, kept in the event store's database, records every object a definition sent to such a
catalog (lineage edges with their owner, jobs, datasets, each with its catalog identity) and when a
sync last touched it. An edge's owner is stored as its parts (the job's namespace and name) and
matched with equality, like the embedded catalog's flows; an identity and a System's name are
keyed by their digest (``catalog.name_keys``). The cutoff, the dry-run counts, the calls and every
guard of the cleanup then work unchanged: "last touched before the cutoff" is
read from the ledger, and the backend deletes the matching objects through its own API.

Times in the ledger come from the catalog's clock (the ``Date`` of its answers), like the cutoff.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    ColumnElement,
    DateTime,
    Engine,
    Index,
    MetaData,
    Row,
    String,
    Table,
    Text,
    and_,
    delete,
    false,
    func,
    or_,
    select,
    tuple_,
)
from sqlalchemy.dialects import postgresql, sqlite

from ol_dagster.catalog import name_keys, owner_columns
from ol_dagster.catalog.name_keys import among, is_, key_column, name_key
from ol_dagster.db import AUTO_ID, create_missing_indexes, lock_schema
from ol_dagster.lineage.graph import FlowOwner, NodeKey, parse_scope

EDGE = "edge"
JOB = "job"
DATASET = "dataset"

_CHUNK = 500
_SCHEMA_LOCK = 0x6F6C5F6C65646772  # "ol_ledgr": the advisory lock of this schema's changes

metadata = MetaData()

items = Table(
    "ol_ledger_items",
    metadata,
    Column("id", AUTO_ID, primary_key=True, autoincrement=True),
    Column("catalog", String(200), nullable=False),
    Column("definition", String(200), nullable=False),
    Column("kind", String(16), nullable=False),
    # names of up to ``limits.maxNameLength`` characters, and strings made of them: unbounded
    Column("identity", Text, nullable=False),
    Column("scope", Text),  # an edge's ``FlowOwner.scope``, for display
    # an edge's owner, the job whose flow it is: what the flows cleanup matches, with equality
    Column("scope_namespace", Text),
    Column("scope_job", Text),
    Column("system", Text),
    Column("schema", Text),
    Column("payload", JSON, nullable=False),
    Column("last_touched", DateTime, nullable=False),
    key_column("identity_key", "identity"),
    # it also finds a definition's entries of a kind, whose owners are then matched by parts
    Index("ux_ol_ledger_key", "catalog", "definition", "kind", "identity_key", unique=True),
)
# the index of the scope strings, when a prefix of them chose the edges to remove; the index of
# the owners' names, which PostgreSQL refuses long entries in
_RETIRED_INDEXES = ("ix_ol_ledger_scope", "ix_ol_ledger_owner")

systems = Table(
    "ol_ledger_systems",
    metadata,
    Column("catalog", String(200), nullable=False),
    Column("name", Text, nullable=False),
    Column("properties", JSON, nullable=False),
    key_column("name_key", "name"),
    Index("ux_ol_ledger_system_key", "catalog", "name_key", unique=True),
)
# the unique keys over the names themselves an earlier version made
_RETIRED_CONSTRAINTS = {
    items.name: ("ux_ol_ledger_identity",),
    systems.name: ("ol_ledger_systems_pkey",),
}


@dataclass(frozen=True, slots=True)
class LedgerItem:
    kind: str
    identity: str
    payload: dict[str, Any] = field(default_factory=dict)
    scope: str | None = None  # an edge's scope string; its ``owner`` when that is not given
    system: str | None = None
    schema: str | None = None
    owner: FlowOwner | None = None  # an edge's owner

    @property
    def flow_owner(self) -> FlowOwner | None:
        """The owner of an edge: ``owner``, else read from its scope string."""
        if self.owner is not None or self.scope is None:
            return self.owner
        return parse_scope(self.scope)


@dataclass(frozen=True, slots=True)
class Entry:
    id: int
    item: LedgerItem


def _naive(dt: datetime) -> datetime:
    return dt.astimezone(UTC).replace(tzinfo=None)


_c = items.c
_ENTRY = select(
    _c.id,
    _c.kind,
    _c.identity,
    _c.payload,
    _c.scope,
    _c.system,
    _c.schema,
    _c.scope_namespace,
    _c.scope_job,
)


def _entry(r: Row[Any]) -> Entry:
    owner = FlowOwner(r[7], r[8]) if r[7] is not None and r[8] is not None else None
    return Entry(r[0], LedgerItem(r[1], r[2], r[3] or {}, r[4], r[5], r[6], owner))


def _owned_by(namespaces: Sequence[str], jobs: Sequence[NodeKey]) -> ColumnElement[bool]:
    """Edges owned by every job of ``namespaces`` or by ``jobs``, by the owner's parts (SQL
    equality: case and every character count); nothing when both are empty."""
    c = items.c
    owned: list[ColumnElement[bool]] = [false()]
    if namespaces:
        owned.append(c.scope_namespace.in_(list(namespaces)))
    if jobs:
        owned.append(tuple_(c.scope_namespace, c.scope_job).in_([(ns, job) for ns, job in jobs]))
    return or_(*owned)


class Ledger:
    def __init__(self, engine: Engine, catalog: str) -> None:
        self.engine = engine
        self.catalog = catalog
        with engine.begin() as conn:  # locked: syncs starting at once on an empty database
            lock_schema(conn, _SCHEMA_LOCK)
            metadata.create_all(conn)
            # a ledger an earlier version made: unbounded names, the owners of its edges as parts
            owner_columns.widen(conn, [items, systems])
            c = items.c
            owner_columns.add_owner_columns(conn, items, [c.catalog, c.definition, c.kind, c.scope])
            name_keys.add_keys(conn, [items, systems])
            name_keys.drop_constraints(conn, _RETIRED_CONSTRAINTS)
            create_missing_indexes(conn, [items, systems])
            for name in _RETIRED_INDEXES:
                conn.exec_driver_sql(f"DROP INDEX IF EXISTS {name}")
        self._insert = postgresql.insert if engine.dialect.name == "postgresql" else sqlite.insert

    def touch(self, definition: str, entries: Iterable[LedgerItem], now: datetime) -> int:
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        for e in entries:
            owner = e.flow_owner
            rows[(e.kind, e.identity)] = {
                "catalog": self.catalog,
                "definition": definition,
                "kind": e.kind,
                "identity": e.identity,
                "identity_key": name_key(e.identity),
                "scope": owner.scope if owner else e.scope,
                "scope_namespace": owner.namespace if owner else None,
                "scope_job": owner.job if owner else None,
                "system": e.system,
                "schema": e.schema,
                "payload": e.payload,
                "last_touched": _naive(now),
            }
        values = list(rows.values())
        with self.engine.begin() as conn:
            for i in range(0, len(values), _CHUNK):
                stmt = self._insert(items)
                conn.execute(
                    stmt.on_conflict_do_update(
                        index_elements=["catalog", "definition", "kind", "identity_key"],
                        set_={
                            c: stmt.excluded[c]
                            for c in (
                                "scope",
                                "scope_namespace",
                                "scope_job",
                                "system",
                                "schema",
                                "payload",
                                "last_touched",
                            )
                        },
                    ),
                    values[i : i + _CHUNK],
                )
        return len(values)

    def stale(
        self,
        definition: str,
        kind: str,
        *,
        before: datetime,
        namespaces: Sequence[str] | None = None,
        jobs: Sequence[NodeKey] | None = None,
        system: str | None = None,
        schemas: Sequence[str] | None = None,
    ) -> list[Entry]:
        """This definition's entries of ``kind`` last touched before ``before``; with
        ``namespaces`` or ``jobs``, only the edges those owners own (every job of a namespace;
        a job), matched by the owner's parts with equality (none when both are empty)."""
        c = items.c
        condition = and_(
            c.catalog == self.catalog,
            c.definition == definition,
            c.kind == kind,
            c.last_touched < _naive(before),
        )
        if namespaces is not None or jobs is not None:
            condition = and_(condition, _owned_by(namespaces or (), jobs or ()))
        if system is not None:
            condition = and_(condition, c.system == system)
        if schemas is not None:
            condition = and_(condition, c.schema.in_(list(schemas)))
        with self.engine.connect() as conn:
            rows = conn.execute(_ENTRY.where(condition).order_by(c.id)).all()
        return [_entry(r) for r in rows]

    def entries(
        self, definition: str, kind: str, identities: Sequence[tuple[str, str | None]]
    ) -> list[Entry]:
        """This definition's entries of ``kind`` for these ``(identity, system)`` pairs (a None
        system: whatever System the entry is in)."""
        wanted = set(identities)
        if not wanted:
            return []
        c = items.c
        out: list[Entry] = []
        names = sorted({identity for identity, _ in wanted})
        with self.engine.connect() as conn:
            for i in range(0, len(names), _CHUNK):
                rows = conn.execute(
                    _ENTRY.where(
                        c.catalog == self.catalog,
                        c.definition == definition,
                        c.kind == kind,
                        among(items, "identity_key", names[i : i + _CHUNK]),
                    ).order_by(c.id)
                ).all()
                out += [
                    entry
                    for entry in map(_entry, rows)
                    if (entry.item.identity, None) in wanted
                    or (entry.item.identity, entry.item.system) in wanted
                ]
        return sorted(out, key=lambda e: e.id)

    def count(
        self,
        definition: str,
        kind: str,
        *,
        system: str | None = None,
        system_names: Sequence[str] | None = None,
        schemas: Sequence[str] | None = None,
        namespaces: Sequence[str] | None = None,
    ) -> int:
        """How many entries of ``kind`` this definition holds (in a System or these Systems, in
        these schemas, owned by jobs of these namespaces)."""
        c = items.c
        condition = and_(c.catalog == self.catalog, c.definition == definition, c.kind == kind)
        if system is not None:
            condition = and_(condition, c.system == system)
        if system_names is not None:
            condition = and_(condition, c.system.in_(list(system_names)))
        if schemas is not None:
            condition = and_(condition, c.schema.in_(list(schemas)))
        if namespaces is not None:
            condition = and_(condition, _owned_by(namespaces, ()))
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).where(condition)).scalar() or 0)

    def forget(self, ids: Sequence[int]) -> None:
        with self.engine.begin() as conn:
            for i in range(0, len(ids), _CHUNK):
                conn.execute(delete(items).where(items.c.id.in_(list(ids[i : i + _CHUNK]))))

    def all(self, kind: str, definition: str | None = None) -> list[LedgerItem]:
        c = items.c
        condition = and_(c.catalog == self.catalog, c.kind == kind)
        if definition is not None:
            condition = and_(condition, c.definition == definition)
        with self.engine.connect() as conn:
            rows = conn.execute(_ENTRY.where(condition)).all()
        return [_entry(r).item for r in rows]

    # -- Systems: the same properties the embedded catalog keeps on its Systems -------------------

    def ensure_systems(self, wanted: dict[str, dict[str, Any]]) -> None:
        with self.engine.begin() as conn:
            existing = {
                name: props
                for name, props in conn.execute(
                    select(systems.c.name, systems.c.properties).where(
                        systems.c.catalog == self.catalog, among(systems, "name_key", list(wanted))
                    )
                )
            }
            for name, props in wanted.items():
                if name not in existing:
                    conn.execute(
                        systems.insert().values(catalog=self.catalog, name=name, properties=props)
                    )
                    continue
                mark = props.get("openLineageJobSystem")
                marks = list((existing[name] or {}).get("openLineageJobSystem") or [])
                if mark and mark[0] not in marks:
                    conn.execute(
                        systems.update()
                        .where(systems.c.catalog == self.catalog, is_(systems, "name_key", name))
                        .values(properties={**existing[name], "openLineageJobSystem": marks + mark})
                    )

    def systems(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            return [
                {"name": name, **(props or {})}
                for name, props in conn.execute(
                    select(systems.c.name, systems.c.properties)
                    .where(systems.c.catalog == self.catalog)
                    .order_by(systems.c.name)
                )
            ]

    def job_schemas(self, system: str) -> list[str]:
        c = items.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(c.schema)
                .where(c.catalog == self.catalog, c.kind == JOB, c.system == system)
                .distinct()
            )
            return sorted(r[0] for r in rows if r[0] is not None)
