"""The sync ledger: what each definition uploaded to a catalog that cannot clean by itself.

OpenMetadata and Marquez keep no "scope" and no last-update time ol-dagster could clean by. The
ledger, kept in the event store's database, records every object a definition sent to such a
catalog (lineage edges with their scope, jobs, datasets, each with its catalog identity) and when a
sync last touched it. The cutoff, the dry-run counts, the calls and every guard of the cleanup then
work unchanged: "last touched before the cutoff" is read from the ledger, and the backend deletes
the matching objects through its own API.

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
    DateTime,
    Engine,
    Index,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    and_,
    delete,
    func,
    or_,
    select,
)
from sqlalchemy.dialects import postgresql, sqlite

from ol_dagster.db import AUTO_ID, lock_schema

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
    Column("identity", String(4000), nullable=False),
    Column("scope", String(3000)),
    Column("system", String(500)),
    Column("schema", String(1000)),
    Column("payload", JSON, nullable=False),
    Column("last_touched", DateTime, nullable=False),
    UniqueConstraint("catalog", "definition", "kind", "identity", name="ux_ol_ledger_identity"),
    Index("ix_ol_ledger_scope", "catalog", "definition", "kind", "scope"),
)

systems = Table(
    "ol_ledger_systems",
    metadata,
    Column("catalog", String(200), primary_key=True),
    Column("name", String(500), primary_key=True),
    Column("properties", JSON, nullable=False),
)


@dataclass(frozen=True, slots=True)
class LedgerItem:
    kind: str
    identity: str
    payload: dict[str, Any] = field(default_factory=dict)
    scope: str | None = None
    system: str | None = None
    schema: str | None = None


@dataclass(frozen=True, slots=True)
class Entry:
    id: int
    item: LedgerItem


def _naive(dt: datetime) -> datetime:
    return dt.astimezone(UTC).replace(tzinfo=None)


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class Ledger:
    def __init__(self, engine: Engine, catalog: str) -> None:
        self.engine = engine
        self.catalog = catalog
        with engine.begin() as conn:  # locked: syncs starting at once on an empty database
            lock_schema(conn, _SCHEMA_LOCK)
            metadata.create_all(conn)
        self._insert = postgresql.insert if engine.dialect.name == "postgresql" else sqlite.insert

    def touch(self, definition: str, entries: Iterable[LedgerItem], now: datetime) -> int:
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        for e in entries:
            rows[(e.kind, e.identity)] = {
                "catalog": self.catalog,
                "definition": definition,
                "kind": e.kind,
                "identity": e.identity,
                "scope": e.scope,
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
                        index_elements=["catalog", "definition", "kind", "identity"],
                        set_={
                            c: stmt.excluded[c]
                            for c in ("scope", "system", "schema", "payload", "last_touched")
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
        scope_prefixes: Sequence[str] = (),
        scopes: Sequence[str] = (),
        system: str | None = None,
        schemas: Sequence[str] | None = None,
    ) -> list[Entry]:
        c = items.c
        condition = and_(
            c.catalog == self.catalog,
            c.definition == definition,
            c.kind == kind,
            c.last_touched < _naive(before),
        )
        if scope_prefixes or scopes:
            condition = and_(
                condition,
                or_(
                    *(c.scope.like(_like_prefix(p), escape="\\") for p in scope_prefixes),
                    *([c.scope.in_(list(scopes))] if scopes else []),
                ),
            )
        if system is not None:
            condition = and_(condition, c.system == system)
        if schemas is not None:
            condition = and_(condition, c.schema.in_(list(schemas)))
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(c.id, c.kind, c.identity, c.payload, c.scope, c.system, c.schema)
                .where(condition)
                .order_by(c.id)
            ).all()
        return [Entry(r[0], LedgerItem(r[1], r[2], r[3] or {}, r[4], r[5], r[6])) for r in rows]

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
                    select(c.id, c.kind, c.identity, c.payload, c.scope, c.system, c.schema)
                    .where(
                        c.catalog == self.catalog,
                        c.definition == definition,
                        c.kind == kind,
                        c.identity.in_(names[i : i + _CHUNK]),
                    )
                    .order_by(c.id)
                ).all()
                out += [
                    Entry(r[0], LedgerItem(r[1], r[2], r[3] or {}, r[4], r[5], r[6]))
                    for r in rows
                    if (r[2], None) in wanted or (r[2], r[5]) in wanted
                ]
        return sorted(out, key=lambda e: e.id)

    def count(
        self,
        definition: str,
        kind: str,
        *,
        system: str | None = None,
        schemas: Sequence[str] | None = None,
    ) -> int:
        """How many entries of ``kind`` this definition holds (in a System, in these schemas)."""
        c = items.c
        condition = and_(c.catalog == self.catalog, c.definition == definition, c.kind == kind)
        if system is not None:
            condition = and_(condition, c.system == system)
        if schemas is not None:
            condition = and_(condition, c.schema.in_(list(schemas)))
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
            rows = conn.execute(
                select(c.kind, c.identity, c.payload, c.scope, c.system, c.schema).where(condition)
            ).all()
        return [LedgerItem(r[0], r[1], r[2] or {}, r[3], r[4], r[5]) for r in rows]

    # -- Systems: the same properties the embedded catalog keeps on its Systems -------------------

    def ensure_systems(self, wanted: dict[str, dict[str, Any]]) -> None:
        with self.engine.begin() as conn:
            existing = {
                name: props
                for name, props in conn.execute(
                    select(systems.c.name, systems.c.properties).where(
                        systems.c.catalog == self.catalog, systems.c.name.in_(list(wanted))
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
                        .where(systems.c.catalog == self.catalog, systems.c.name == name)
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
