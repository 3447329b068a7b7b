"""Every Dagster name a sync definition gets, in one place.

A definition's name becomes its asset keys, job, partition set, sensors and schedule. Those names
are fixed interfaces (ARCHITECTURE.md): a Dagster instance keeps its runs, partitions, cursors and
materializations under them, and ``ol-dagster sync`` finds the job by name. Building one by hand
elsewhere is how two places drift apart, so every module asks here. The settings know nothing of
Dagster: these take the definition's name.
"""

from __future__ import annotations

import dagster as dg

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
