"""The embedded catalog: a real catalog in SQLAlchemy, and the default target of every definition.

It holds Systems, physical entities (jobs and datasets) and data flows, each with a last-update time
written from the database server's clock. Every object an upload sends is touched whether it
changed or not, which is what makes "last updated before the cutoff" mean "not described by this
run" and keeps the cutoff cleanup safe.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    delete,
    func,
    or_,
    select,
    tuple_,
)
from sqlalchemy.dialects import postgresql, sqlite

from ol_dagster.catalog.protocol import CleanupCounts, ObjectType, UploadResult
from ol_dagster.catalog.systems import dataset_policy, job_system_for
from ol_dagster.db import open_engine
from ol_dagster.lineage import LineageGraph
from ol_dagster.settings import Definition

_Id = BigInteger().with_variant(Integer(), "sqlite")
_CHUNK = 500

JOB = "job"  # datasets carry their own type: table, file, folder, topic, other

metadata = MetaData()

systems = Table(
    "cat_systems",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("name", String(500), nullable=False, unique=True),
    Column("properties", JSON, nullable=False, default=dict),
)

entities = Table(
    "cat_physical_entities",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("system_id", _Id, ForeignKey("cat_systems.id", ondelete="CASCADE"), nullable=False),
    Column("schema", String(1000), nullable=False),
    Column("name", String(2000), nullable=False),
    Column("type", String(32), nullable=False),
    Column("description", Text),
    Column("last_update", DateTime, nullable=False),
    UniqueConstraint("system_id", "schema", "name", name="ux_cat_entity_identity"),
)

flows = Table(
    "cat_data_flows",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("scope", String(3000), nullable=False),
    Column(
        "from_entity",
        _Id,
        ForeignKey("cat_physical_entities.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column(
        "to_entity", _Id, ForeignKey("cat_physical_entities.id", ondelete="CASCADE"), nullable=False
    ),
    Column("last_update", DateTime, nullable=False),
    UniqueConstraint("scope", "from_entity", "to_entity", name="ux_cat_flow_identity"),
    Index("ix_cat_flows_scope", "scope"),
)


def _naive(dt: datetime) -> datetime:
    return dt.astimezone(UTC).replace(tzinfo=None)


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _chunks(items: Sequence, size: int = _CHUNK) -> Iterable[Sequence]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class EmbeddedCatalog:
    """The ``Catalog`` protocol over a SQLAlchemy database."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = open_engine(url)
        metadata.create_all(self.engine)
        self._insert = (
            postgresql.insert if self.engine.dialect.name == "postgresql" else sqlite.insert
        )

    def close(self) -> None:
        self.engine.dispose()

    # -- clock ---------------------------------------------------------------------------------

    def clock(self) -> datetime:
        """The database server's time (never the Python process's)."""
        with self.engine.connect() as conn:
            if self.engine.dialect.name == "postgresql":
                value = conn.exec_driver_sql("SELECT clock_timestamp() AT TIME ZONE 'UTC'").scalar()
            else:
                text = conn.exec_driver_sql("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')").scalar()
                value = datetime.fromisoformat(str(text))
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC)

    # -- upload --------------------------------------------------------------------------------

    def _ensure_systems(self, conn, names: dict[str, dict]) -> dict[str, int]:
        """Get or create Systems; ``names`` maps a System to the properties it gets when created."""
        ids: dict[str, int] = {}
        existing = conn.execute(
            select(systems.c.id, systems.c.name, systems.c.properties).where(
                systems.c.name.in_(list(names))
            )
        ).all()
        for sid, name, props in existing:
            ids[name] = sid
            wanted = names[name].get("openLineageJobSystem")
            if wanted:
                marks = list((props or {}).get("openLineageJobSystem") or [])
                if wanted[0] not in marks:
                    conn.execute(
                        systems.update()
                        .where(systems.c.id == sid)
                        .values(
                            properties={**(props or {}), "openLineageJobSystem": marks + wanted}
                        )
                    )
        for name, props in names.items():
            if name not in ids:
                ids[name] = conn.execute(
                    systems.insert().values(name=name, properties=props)
                ).inserted_primary_key[0]
        return ids

    def upload(self, graph: LineageGraph, definition: Definition) -> UploadResult:
        result = UploadResult()
        now = _naive(self.clock())
        owner = str(definition.uuid)
        wanted: dict[str, dict] = {}
        job_sys = {ns: job_system_for(definition, ns) for ns in graph.job_namespaces}
        for system in job_sys.values():
            wanted[system] = {"openLineageJobSystem": [owner], "kind": "job"}
        for system in sorted({d.system for d in graph.datasets.values()}):
            rule = dataset_policy(definition, system)
            wanted.setdefault(
                system,
                {
                    "kind": "dataset",
                    "openLineageOwner": owner,
                    "cleanupMode": rule.cleanupMode.value,
                    "cleanupDays": rule.cleanupDays,
                },
            )

        with self.engine.begin() as conn:
            sys_ids = self._ensure_systems(conn, wanted)
            rows = [
                {
                    "system_id": sys_ids[job_sys[j.namespace]],
                    "schema": j.namespace,
                    "name": j.name,
                    "type": JOB,
                    "description": j.description,
                    "last_update": now,
                }
                for j in graph.jobs.values()
            ] + [
                {
                    "system_id": sys_ids[d.system],
                    "schema": d.schema,
                    "name": d.object_name,
                    "type": d.type,
                    "description": d.description,
                    "last_update": now,
                }
                for d in graph.datasets.values()
            ]
            written, touched = self._upsert_entities(conn, rows)
            result.written[ObjectType.PHYSICAL_ENTITIES] = written
            result.touched[ObjectType.PHYSICAL_ENTITIES] = touched

        with self.engine.begin() as conn:
            identity = {
                key: (sys_ids[d.system], d.schema, d.object_name)
                for key, d in graph.datasets.items()
            }
            ent_ids = self._entity_ids(conn, list(identity.values()))
            flow_rows = []
            for f in graph.data_flows:
                src = ent_ids.get(identity.get(f.source))  # type: ignore[arg-type]
                dst = ent_ids.get(identity.get(f.target))  # type: ignore[arg-type]
                if src is None or dst is None:
                    result.dropped["DANGLING_FLOW"] = result.dropped.get("DANGLING_FLOW", 0) + 1
                    continue
                flow_rows.append(
                    {"scope": f.scope, "from_entity": src, "to_entity": dst, "last_update": now}
                )
            written, touched = self._upsert_flows(conn, flow_rows)
            result.written[ObjectType.DATA_FLOWS] = written
            result.touched[ObjectType.DATA_FLOWS] = touched
        return result

    def _entity_ids(
        self, conn, keys: list[tuple[int, str, str]]
    ) -> dict[tuple[int, str, str], int]:
        out: dict[tuple[int, str, str], int] = {}
        for chunk in _chunks(keys):
            q = select(
                entities.c.id, entities.c.system_id, entities.c.schema, entities.c.name
            ).where(
                tuple_(entities.c.system_id, entities.c.schema, entities.c.name).in_(list(chunk))
            )
            for eid, sid, schema, name in conn.execute(q):
                out[(sid, schema, name)] = eid
        return out

    def _upsert_entities(self, conn, rows: list[dict]) -> tuple[int, int]:
        if not rows:
            return 0, 0
        before = set(
            self._entity_ids(conn, [(r["system_id"], r["schema"], r["name"]) for r in rows])
        )
        for chunk in _chunks(rows):
            stmt = self._insert(entities)
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=["system_id", "schema", "name"],
                    set_={
                        "last_update": stmt.excluded.last_update,
                        "type": stmt.excluded.type,
                        "description": func.coalesce(
                            stmt.excluded.description, entities.c.description
                        ),
                    },
                ),
                list(chunk),
            )
        return len(rows) - len(before), len(before)

    def _upsert_flows(self, conn, rows: list[dict]) -> tuple[int, int]:
        if not rows:
            return 0, 0
        existing = 0
        for chunk in _chunks(rows):
            existing += conn.execute(
                select(func.count())
                .select_from(flows)
                .where(
                    tuple_(flows.c.scope, flows.c.from_entity, flows.c.to_entity).in_(
                        [(r["scope"], r["from_entity"], r["to_entity"]) for r in chunk]
                    )
                )
            ).scalar_one()
            stmt = self._insert(flows)
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=["scope", "from_entity", "to_entity"],
                    set_={"last_update": stmt.excluded.last_update},
                ),
                list(chunk),
            )
        return len(rows) - existing, existing

    # -- cleanup -------------------------------------------------------------------------------

    def cleanup_flows(
        self, *, scope_prefixes: list[str], before: datetime, dry_run: bool
    ) -> CleanupCounts:
        condition = and_(
            or_(*(flows.c.scope.like(_like_prefix(p), escape="\\") for p in scope_prefixes)),
            flows.c.last_update < _naive(before),
        )
        with self.engine.begin() as conn:
            n = conn.execute(select(func.count()).select_from(flows).where(condition)).scalar_one()
            if not dry_run and n:
                conn.execute(delete(flows).where(condition))
        return CleanupCounts({ObjectType.DATA_FLOWS: n})

    def cleanup_job_system(
        self, system: str, *, schemas: list[str], before: datetime, dry_run: bool
    ) -> CleanupCounts:
        with self.engine.begin() as conn:
            sid = conn.execute(select(systems.c.id).where(systems.c.name == system)).scalar()
            if sid is None:
                return CleanupCounts({ObjectType.PHYSICAL_ENTITIES: 0})
            condition = and_(
                entities.c.system_id == sid,
                entities.c.type == JOB,
                entities.c.schema.in_(schemas),
                entities.c.last_update < _naive(before),
            )
            stale = conn.execute(
                select(entities.c.id, entities.c.schema, entities.c.name).where(condition)
            ).all()
            if not dry_run and stale:
                for chunk in _chunks([r[0] for r in stale]):
                    conn.execute(delete(entities).where(entities.c.id.in_(list(chunk))))
        return CleanupCounts(
            {ObjectType.PHYSICAL_ENTITIES: len(stale)},
            sorted(f"{schema}.{name}" for _, schema, name in stale),
        )

    # -- reading -------------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            return {
                "systems": conn.execute(select(func.count()).select_from(systems)).scalar_one(),
                "jobs": conn.execute(
                    select(func.count()).select_from(entities).where(entities.c.type == JOB)
                ).scalar_one(),
                "datasets": conn.execute(
                    select(func.count()).select_from(entities).where(entities.c.type != JOB)
                ).scalar_one(),
                "dataFlows": conn.execute(select(func.count()).select_from(flows)).scalar_one(),
            }

    def job_names(self) -> list[str]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(entities.c.schema, entities.c.name)
                .where(entities.c.type == JOB)
                .order_by(entities.c.schema, entities.c.name)
            )
            return [f"{s}.{n}" for s, n in rows]
