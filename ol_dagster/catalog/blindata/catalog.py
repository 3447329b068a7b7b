"""``BlindataCatalog``: the ``Catalog`` protocol over Blindata, as a thin facade.

The class only opens the client and hands each protocol call to the module that owns it
(``upload``, ``cleanup``, ``quality``, ``reads``), so what the rest of ol-dagster sees of Blindata
is this one class while each concern stays a short module of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

import httpx

from ol_dagster.catalog.blindata import cleanup, quality, reads
from ol_dagster.catalog.blindata import upload as upload_ops
from ol_dagster.catalog.blindata.client import BlindataClient
from ol_dagster.catalog.blindata.settings import BlindataCatalogSettings
from ol_dagster.catalog.protocol import CleanupCounts, DatasetRef, UploadResult
from ol_dagster.lineage import LineageGraph
from ol_dagster.lineage.graph import NodeKey
from ol_dagster.sync_definition import SyncDefinition


class BlindataCatalog:
    """A Blindata tenant, reached over HTTP; ``store_url`` and ``definition`` are accepted as the
    ledger catalogs take them (this catalog keeps no ledger)."""

    kind = "blindata"

    def __init__(
        self,
        name: str,
        cfg: BlindataCatalogSettings,
        *,
        store_url: str = "",
        definition: str = "",
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.definition_name = definition
        self.client = BlindataClient(name, cfg, transport=transport, sleep=sleep)
        self.http = self.client.http  # ``ol-dagster check`` probes through the same connection
        self.workers = self.client.workers

    def close(self) -> None:
        self.client.close()

    def __repr__(self) -> str:
        return f"BlindataCatalog(name={self.name!r}, url={self.cfg.url!r})"

    def headers(self, cfg: BlindataCatalogSettings) -> dict[str, str]:
        """Tenant and credentials; secrets come from the environment, here, when it opens."""
        return self.client.headers(cfg)

    def clock(self) -> datetime:
        """The server's time: the ``Date`` header of an authenticated cheap call (whole seconds,
        rounded down, so everything the server stamps after the call is at or after it)."""
        return self.client.clock()

    # -- upload ------------------------------------------------------------------------------------

    def upload(
        self,
        graph: LineageGraph,
        definition: SyncDefinition,
        raw_events: Callable[[], Iterable[bytes]] | None = None,
    ) -> UploadResult:
        return upload_ops.upload(self.client, graph, definition)

    # -- cleanup -----------------------------------------------------------------------------------

    def cleanup_flows(
        self,
        *,
        namespaces: Sequence[str] = (),
        jobs: Sequence[NodeKey] = (),
        before: datetime,
        dry_run: bool,
    ) -> CleanupCounts:
        return cleanup.cleanup_flows(
            self.client, namespaces=namespaces, jobs=jobs, before=before, dry_run=dry_run
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
        return cleanup.cleanup_job_system(
            self.client,
            system,
            schemas=schemas,
            before=before,
            dry_run=dry_run,
            routines_before=routines_before,
        )

    def cleanup_dataset_system(
        self, system: str, *, before: datetime, dry_run: bool
    ) -> CleanupCounts:
        return cleanup.cleanup_dataset_system(self.client, system, before=before, dry_run=dry_run)

    def drop_datasets(self, datasets: Sequence[DatasetRef], *, dry_run: bool) -> CleanupCounts:
        return cleanup.drop_datasets(self.client, datasets, dry_run=dry_run)

    def count_jobs(self, system: str, *, schemas: list[str] | None) -> int:
        return cleanup.count_jobs(self.client, system, schemas=schemas)

    def count_held(
        self, *, namespaces: Sequence[str], dataset_systems: Sequence[str]
    ) -> dict[str, int]:
        return cleanup.count_held(
            self.client, namespaces=namespaces, dataset_systems=dataset_systems
        )

    def disable_quality_checks(self, jobs: list[str]) -> int:
        return quality.disable_quality_checks(self.client, jobs)

    # -- reads -------------------------------------------------------------------------------------

    def systems(self) -> list[dict[str, Any]]:
        return reads.systems(self.client)

    def job_schemas(self, system: str) -> list[str]:
        return reads.job_schemas(self.client, system)

    def lineage(self, node: str, *, depth: int, upstream: bool, downstream: bool) -> dict[str, Any]:
        """Lineage around a node from the OpenLineage flows in Blindata (scopes ``ol:``)."""
        return reads.lineage(
            self.client, node, depth=depth, upstream=upstream, downstream=downstream
        )
