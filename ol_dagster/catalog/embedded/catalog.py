"""``EmbeddedCatalog``: the ``Catalog`` protocol over a SQLAlchemy database, as a thin facade.

The class opens the database (``schema``) and hands each call to the module that owns it: the
upload (``upload``, with ``bulk`` upserts, ``stamps`` for unchanged objects and ``placement`` for
Systems, renames and other owners' jobs), the clock (``clock``), the cleanup calls (``cleanup``,
behind ``permissions``, in a transaction or a rehearsal of ``rehearsal``), reads (``reads``),
analysis results (``annotations``) and the lineage state (``export``). What the rest of
ol-dagster sees of the embedded catalog is this one class.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from ol_dagster.catalog.embedded import annotations, clock, export, reads, schema
from ol_dagster.catalog.embedded import cleanup as cleanup_ops
from ol_dagster.catalog.embedded import permissions as access
from ol_dagster.catalog.embedded import retire as retire_ops
from ol_dagster.catalog.embedded import upload as upload_ops
from ol_dagster.catalog.embedded.bulk import Bulk, naive
from ol_dagster.catalog.embedded.rehearsal import Sessions
from ol_dagster.catalog.protocol import AnalysisItem, CleanupCounts, DatasetRef, UploadResult
from ol_dagster.db import open_engine
from ol_dagster.gcpause import gc_paused
from ol_dagster.lineage import LineageGraph
from ol_dagster.lineage.graph import NodeKey
from ol_dagster.lineage_state import DatasetPart, JobPart, LineageState
from ol_dagster.openlineage.envelope import namespace_allowed
from ol_dagster.sync_definition import SyncDefinition

DEFAULT_USER = "ol-dagster"


class EmbeddedCatalog:
    """The ``Catalog`` protocol over a SQLAlchemy database (SQLite file or PostgreSQL)."""

    def __init__(self, url: str, *, user: str = DEFAULT_USER, detect_changes: bool = True) -> None:
        """``detect_changes=False``: every upload re-sends every row, the digests unused (and
        cleared), as before change detection; the tests compare the two."""
        self.url = url
        self.user = user
        self.detect_changes = detect_changes
        self.engine = open_engine(url)
        self.bulk = Bulk(self.engine)
        self.sessions = Sessions(self.engine)
        schema.prepare(self.engine, self.bulk, user)

    def close(self) -> None:
        self.engine.dispose()

    def set_permissions(self, user: str, permissions: list[str]) -> None:
        with self.engine.begin() as conn:
            access.set_permissions(conn, user, permissions)

    def clock(self) -> datetime:
        """The database server's time (never the Python process's)."""
        return clock.read(self.engine, self.bulk)

    # -- upload (see upload.py) --------------------------------------------------------------------

    def upload(
        self,
        graph: LineageGraph,
        definition: SyncDefinition,
        raw_events: Callable[[], Iterable[bytes]] | None = None,
    ) -> UploadResult:
        """``raw_events`` is for catalogs that take OpenLineage events; this one takes the graph."""
        if self.sessions.rehearsing is not None:
            raise RuntimeError("no upload during a rehearsal: it would wait for its transaction")
        # hundreds of thousands of rows and keys, no cycles among them; with a large graph alive,
        # each collection the allocations trigger walks it all (a fifth of an unchanged upload)
        with gc_paused():
            return upload_ops.upload(
                self.engine,
                self.bulk,
                graph,
                definition,
                read_clock=self.clock,
                detect_changes=self.detect_changes,
            )

    # -- cleanup (see cleanup.py) ------------------------------------------------------------------

    def rehearsal(self) -> AbstractContextManager[None]:
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
        return self.sessions.rehearsal()

    def cleanup_flows(
        self,
        *,
        namespaces: Sequence[str] = (),
        jobs: Sequence[NodeKey] = (),
        before: datetime,
        dry_run: bool,
    ) -> CleanupCounts:
        with self.sessions.cleanup() as conn:
            access.require_admin(conn, self.user)
            return cleanup_ops.flows(
                conn, list(namespaces), [(ns, name) for ns, name in jobs], naive(before), dry_run
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
        with self.sessions.cleanup() as conn:
            access.require_admin(conn, self.user)
            return cleanup_ops.job_system(
                conn,
                system,
                schemas,
                naive(before),
                dry_run,
                naive(routines_before) if routines_before else None,
            )

    def children(self, parent: NodeKey) -> list[NodeKey]:
        with self.sessions.read() as conn:
            return retire_ops.children(conn, parent)

    def retire_jobs(
        self, system: str, *, jobs: Sequence[NodeKey], before: datetime, dry_run: bool
    ) -> CleanupCounts:
        with self.sessions.cleanup() as conn:
            access.require_admin(conn, self.user)
            return retire_ops.retire_jobs(conn, system, list(jobs), naive(before), dry_run)

    def cleanup_dataset_system(
        self, system: str, *, before: datetime, dry_run: bool
    ) -> CleanupCounts:
        with self.sessions.cleanup() as conn:
            access.require_admin(conn, self.user)
            return cleanup_ops.dataset_system(conn, system, naive(before), dry_run)

    def drop_datasets(self, datasets: list[DatasetRef], *, dry_run: bool) -> CleanupCounts:
        """Remove the dataset entities a DROP named, with their fields and the flows that touch
        them; counted per object type as they go (a flow once). Whether this definition may drop
        in their Systems is the planner's decision, not checked here."""
        with self.sessions.cleanup() as conn:
            access.require_admin(conn, self.user)
            return cleanup_ops.drop_datasets(conn, list(datasets), dry_run)

    def count_jobs(self, system: str, *, schemas: list[str] | None) -> int:
        with self.sessions.read() as conn:
            return cleanup_ops.count_jobs(conn, system, schemas)

    def count_held(
        self, *, namespaces: Sequence[str], dataset_systems: Sequence[str]
    ) -> dict[str, int]:
        with self.sessions.read() as conn:
            return cleanup_ops.count_held(conn, list(namespaces), list(dataset_systems))

    def disable_quality_checks(self, jobs: list[str]) -> int:
        with self.sessions.cleanup() as conn:
            return cleanup_ops.disable_quality_checks(conn, jobs)

    # -- reads (see reads.py) ----------------------------------------------------------------------

    def systems(self) -> list[dict[str, Any]]:
        with self.sessions.read() as conn:
            return reads.list_systems(conn)

    def job_schemas(self, system: str) -> list[str]:
        with self.sessions.read() as conn:
            return reads.job_schemas(conn, system)

    def lineage(self, node: str, *, depth: int, upstream: bool, downstream: bool) -> dict[str, Any]:
        with self.engine.connect() as conn:
            return reads.lineage(conn, node, depth=depth, upstream=upstream, downstream=downstream)

    def export_state(self, definition: SyncDefinition) -> LineageState:
        """What ``definition`` has synced here, for the asset graph (see ``lineage_state``)."""
        with self.engine.connect() as conn:
            return export.export_state(conn, *_state_scope(definition))

    def state_sources(self, definition: SyncDefinition) -> tuple[dict[NodeKey, str | None], int]:
        """Each job's signature of its part of the state, and the jobs not shown
        (``export.sources``)."""
        with self.engine.connect() as conn:
            return export.sources(conn, *_state_scope(definition))

    def state_jobs(self, definition: SyncDefinition) -> tuple[set[NodeKey], int]:
        """The jobs a whole export keeps, and the others counted (``export.kept_jobs``)."""
        with self.engine.connect() as conn:
            return export.kept_jobs(conn, *_state_scope(definition))

    def export_parts(
        self, definition: SyncDefinition, jobs: Collection[NodeKey]
    ) -> tuple[list[JobPart], list[DatasetPart]]:
        """The parts of the state of these jobs (``export.export_parts``)."""
        with self.engine.connect() as conn:
            return export.export_parts(
                conn,
                str(definition.uuid),
                lambda ns: namespace_allowed(ns, definition.namespace_patterns),
                jobs,
            )

    def annotate(self, key: str, items: list[AnalysisItem]) -> int:
        """Record an analysis result on entities (see ``annotations``)."""
        with self.engine.begin() as conn:
            return annotations.annotate(conn, key, items)

    def counts(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            return reads.counts(conn)

    def job_names(self) -> list[str]:
        with self.engine.connect() as conn:
            return reads.job_names(conn)


def _state_scope(definition: SyncDefinition) -> tuple[str, Callable[[str], bool], int | None]:
    """What every read of a definition's part of the state is scoped by: its id, its namespaces
    and its asset graph's cap."""
    return (
        str(definition.uuid),
        lambda ns: namespace_allowed(ns, definition.namespace_patterns),
        definition.assetGraph.maxJobs,
    )
