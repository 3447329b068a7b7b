"""``<definition>/stale_cleanup``: the day-based cleanup, daily, on a schedule.

One asset per catalog the definition feeds (``[<definition>, <catalog>, stale_cleanup]`` when it
feeds several), each with its own lock, guards, checks and report; one schedule runs them all.

Additive producers never re-send what they did not run, so what they stopped describing is only
removed once it has not been updated for ``cleanup.staleJobDays`` (dataset Systems with DAYS after
their ``cleanupDays``). Snapshot definitions get it too, for their DAYS Systems. The same guards,
report and result (``defs.results.cleanup_result``) as the per-batch cleanup apply.
"""

from collections.abc import Iterator

import dagster as dg

from ol_dagster.defs import assets, names
from ol_dagster.defs import constants as C
from ol_dagster.defs.assets import CleanupConfig, refresh_lineage_state, run_alive
from ol_dagster.defs.resources import catalog_of, store_of
from ol_dagster.defs.results import STALE_CLEANUP_CHECKS, check_spec, cleanup_result
from ol_dagster.settings import SyncDefinition
from ol_dagster.sync import batch as sync_batch
from ol_dagster.sync import fanout


def build_stale_cleanup(
    definition: SyncDefinition, files: names.FileNames
) -> tuple[list[dg.AssetsDefinition], dg.ScheduleDefinition]:
    """The day-based cleanup of each catalog of ``definition``, and its daily schedule."""
    assets_ = [_stale_cleanup(definition, k, files) for k in definition.catalog_keys]
    schedule = dg.ScheduleDefinition(
        name=names.stale_cleanup_schedule(definition.name),
        cron_schedule=C.STALE_CLEANUP_CRON,
        target=dg.AssetSelection.assets(*assets_),
        default_status=dg.DefaultScheduleStatus.RUNNING,
        tags={C.DEFINITION_TAG: definition.name},
        description=f"The day-based cleanup of {definition.name}, daily.",
    )
    return assets_, schedule


def _stale_cleanup(
    definition: SyncDefinition, catalog_key: str, files: names.FileNames
) -> dg.AssetsDefinition:
    key = names.catalog_asset_key(
        definition.name, definition.catalog_keys, catalog_key, names.STALE_CLEANUP
    )
    primary = fanout.target(definition, catalog_key).primary

    @dg.asset(
        key=key,
        group_name=names.group(definition.name),
        kinds={"catalog"},
        check_specs=[check_spec(c, key) for c in STALE_CLEANUP_CHECKS],
        tags={C.DEFINITION_TAG: definition.name, **names.catalog_tags(catalog_key)},
        description=names.catalog_asset_description(
            definition.catalog_keys,
            catalog_key,
            "what the definition's producers have not described for staleJobDays, removed "
            "from it (daily).",
        ),
        required_resource_keys={files.store, files.catalog},
    )
    def stale_cleanup(
        context: dg.AssetExecutionContext, config: CleanupConfig
    ) -> Iterator[dg.MaterializeResult]:
        """What this definition's producers have not described for staleJobDays (and DAYS
        dataset Systems after their cleanupDays), removed from the catalog."""
        store = store_of(context, files).get()
        # what it removes may be in any definition's asset graph: each compares at its next sync
        store.unsign_lineage()
        with catalog_of(context, files).open(definition.name, catalog_key) as catalog:
            try:
                report = sync_batch.stale_cleanup(
                    store,
                    catalog,
                    definition,
                    run_id=context.run_id,
                    max_removals=config.maxRemovalsPerRun,
                    requested_by={"tags": dict(context.run.tags)},
                    is_alive=run_alive(context.instance),
                    wait_seconds=assets.LOCK_WAIT_SECONDS,
                    catalog_key=catalog_key,
                )
            except sync_batch.SyncBusy as exc:
                raise dg.Failure(str(exc)) from None
            if primary:  # the asset graph's lineage is read from the primary catalog
                refresh_lineage_state(context, catalog, definition, store)
        yield cleanup_result(report, STALE_CLEANUP_CHECKS)

    return stale_cleanup
