"""Every Dagster name a sync definition gets, in one place.

A definition's name becomes its asset keys, job, partition set, sensors and schedule. Those names
are fixed interfaces (ARCHITECTURE.md): a Dagster instance keeps its runs, partitions, cursors and
materializations under them, and ``ol-dagster sync`` finds the job by name. Building one by hand
elsewhere is how two places drift apart, so every module asks here. The settings know nothing of
Dagster: these take the definition's name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from ol_dagster.defs import constants as C

# the assets of one sync definition, in the order a sync runs them
RECEIVED_BATCH = "received_batch"
LINEAGE_GRAPH = "lineage_graph"
CATALOG_UPLOAD = "catalog_upload"
CATALOG_CLEANUP = "catalog_cleanup"
SYNC_ASSETS = (RECEIVED_BATCH, LINEAGE_GRAPH, CATALOG_UPLOAD, CATALOG_CLEANUP)
# the day-based cleanup, on its own schedule
STALE_CLEANUP = "stale_cleanup"
# in the synced-lineage group of a definition whose assetGraph.maxJobs hides jobs
LINEAGE_JOBS_NOT_SHOWN = "lineage_jobs_not_shown"


def asset_key(definition: str, asset: str) -> dg.AssetKey:
    """``<definition>/<asset>``: one of ``SYNC_ASSETS``, ``STALE_CLEANUP`` or
    ``LINEAGE_JOBS_NOT_SHOWN``."""
    return dg.AssetKey([definition, asset])


# the assets a definition has once per catalog it feeds; the others are once per definition
PER_CATALOG = (CATALOG_UPLOAD, CATALOG_CLEANUP, STALE_CLEANUP)


def catalog_asset_key(
    definition: str, catalogs: tuple[str, ...], catalog: str, asset: str
) -> dg.AssetKey:
    """One of ``PER_CATALOG`` for the definition's catalog ``catalog`` (``catalogs``: all it
    feeds): ``<definition>/<asset>`` when it feeds one (the keys it always had, so an instance
    keeps their history), ``<definition>/<catalog>/<asset>`` when it feeds several."""
    if len(catalogs) == 1:
        return asset_key(definition, asset)
    return dg.AssetKey([definition, catalog, asset])


def catalog_asset_description(catalogs: tuple[str, ...], catalog: str, what: str) -> str | None:
    """What the asset graph shows under one of ``PER_CATALOG`` when the definition feeds several
    catalogs (their nodes have the same name): the catalog first, then ``what``. None (the
    asset's own docstring) when it feeds one."""
    return None if len(catalogs) == 1 else f"Catalog {catalog!r}: {what}"


def catalog_tags(catalog: str) -> dict[str, str]:
    """The tag naming the catalog of one of ``PER_CATALOG`` (filterable in the UI), when the
    catalog's key can be a tag value."""
    return {C.CATALOG_TAG: catalog} if re.fullmatch(r"[A-Za-z0-9_.-]{1,63}", catalog) else {}


def group(definition: str) -> str:
    """The asset group of a definition's sync assets and stale cleanup."""
    return definition


def job(definition: str) -> str:
    """The job that syncs one batch (one partition) of the definition."""
    return f"{definition}__sync"


def partitions(definition: str) -> str:
    """The dynamic partition set: one partition per batch id."""
    return f"{definition}__batches"


def new_batches_sensor(definition: str) -> str:
    return f"{definition}__new_batches"


def failed_syncs_sensor(definition: str) -> str:
    return f"{definition}__failed_syncs"


def stale_cleanup_schedule(definition: str) -> str:
    return f"{definition}__stale_cleanup_daily"


# -- the names a settings file's definitions share -------------------------------------------------

STORE_RESOURCE = "ol_store"
CATALOG_RESOURCE = "ol_catalog"
ANALYSIS_GROUP = "analysis"
ANALYSIS_SCHEDULE = "analyses_daily"


@dataclass(frozen=True)
class FileNames:
    """The names shared by the definitions of one settings file: its resources and its analyses.

    ``label`` None: the code location's own file (``ol_dagster.definitions``; in a ``dg``
    project the root's ``ol_dagster.yaml`` or the only file), with the names it always had.
    Another file's names carry its label, so components of several files load side by side in
    one project."""

    label: str | None = None

    def named(self, name: str) -> str:
        """``name``, or ``<name>__<label>`` for another file's."""
        return name if self.label is None else f"{name}__{self.label}"

    @property
    def store(self) -> str:
        """The resource key of the file's event store."""
        return self.named(STORE_RESOURCE)

    @property
    def catalog(self) -> str:
        """The resource key of the file's catalogs."""
        return self.named(CATALOG_RESOURCE)

    def analysis(self, key: dg.AssetKey) -> dg.AssetKey:
        """An analysis asset's key, or ``<label>/<key>`` for another file's."""
        return key if self.label is None else dg.AssetKey([self.label, *key.path])

    @property
    def analysis_group(self) -> str:
        return self.named(ANALYSIS_GROUP)

    @property
    def analysis_schedule(self) -> str:
        return self.named(ANALYSIS_SCHEDULE)


# the names of the code location's own settings file
CODE_LOCATION_FILE = FileNames()


def file_names(settings_file: Path, project_root: Path) -> FileNames:
    """The names of a settings file in a ``dg`` project: the plain ones for the project root's
    ``ol_dagster.yaml`` (the file the ``ol-dagster`` commands read there by default), else
    labelled by its path (relative to the project root when inside it), e.g. ``teams_sales``
    for ``teams/sales.yaml``."""
    settings_file, project_root = settings_file.resolve(), project_root.resolve()
    if settings_file == project_root / "ol_dagster.yaml":
        return CODE_LOCATION_FILE
    inside = settings_file.is_relative_to(project_root)
    path = settings_file.relative_to(project_root) if inside else settings_file
    label = re.sub(r"[^A-Za-z0-9]+", "_", str(path.with_suffix(""))).strip("_")
    return FileNames(label or "settings")
