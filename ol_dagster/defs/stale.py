"""``<definition>/stale_cleanup``: the day-based cleanup, daily, on a schedule.

Additive producers never re-send what they did not run, so what they stopped describing is only
removed once it has not been updated for ``cleanup.staleJobDays`` (dataset Systems with DAYS after
their ``cleanupDays``). Snapshot definitions get it too, for their DAYS Systems. The same guards,
report and result (``defs.results.cleanup_result``) as the per-batch cleanup apply.
"""

from collections.abc import Iterator

import dagster as dg

from ol_dagster.defs import assets
from ol_dagster.defs import constants as C
from ol_dagster.defs.assets import CleanupConfig, refresh_lineage_state, run_alive
from ol_dagster.defs.resources import CatalogResource, StoreResource
from ol_dagster.defs.results import STALE_CLEANUP_CHECKS, check_spec, cleanup_result
from ol_dagster.settings import SyncDefinition
from ol_dagster.sync import batch as sync_batch


def build_stale_cleanup(
    definition: SyncDefinition,
) -> tuple[dg.AssetsDefinition, dg.ScheduleDefinition]:
    key = dg.AssetKey([definition.name, C.STALE_CLEANUP])

    @dg.asset(
        key=key,
        group_name=definition.name,
        kinds={"catalog"},
        check_specs=[check_spec(c, key) for c in STALE_CLEANUP_CHECKS],
        tags={C.DEFINITION_TAG: definition.name},
    )
    def stale_cleanup(
        context: dg.AssetExecutionContext,
        config: CleanupConfig,
        ol_catalog: CatalogResource,
        ol_store: StoreResource,
    ) -> Iterator[dg.MaterializeResult]:
        """What this definition's producers have not described for staleJobDays (and DAYS
        dataset Systems after their cleanupDays), removed from the catalog."""
        store = ol_store.get()
        with ol_catalog.open(definition.name) as catalog:
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
                )
            except sync_batch.SyncBusy as exc:
                raise dg.Failure(str(exc)) from None
            refresh_lineage_state(context, catalog, definition, store)
        yield cleanup_result(report, STALE_CLEANUP_CHECKS)

    schedule = dg.ScheduleDefinition(
        name=f"{definition.name}__stale_cleanup_daily",
        cron_schedule=C.STALE_CLEANUP_CRON,
        target=dg.AssetSelection.assets(key),
        default_status=dg.DefaultScheduleStatus.RUNNING,
        tags={C.DEFINITION_TAG: definition.name},
        description=f"The day-based cleanup of {definition.name}, daily.",
    )
    return stale_cleanup, schedule
