"""``<definition>/stale_cleanup``: the day-based cleanup, daily, on a schedule.

Additive producers never re-send what they did not run, so what they stopped describing is only
removed once it has not been updated for ``cleanup.staleJobDays`` (dataset Systems with DAYS after
their ``cleanupDays``). Snapshot definitions get it too, for their DAYS Systems. The same guards
and report as the per-batch cleanup apply.
"""

import dagster as dg

from ol_dagster.defs import constants as C
from ol_dagster.defs.assets import (
    LOCK_WAIT_SECONDS,
    CleanupConfig,
    check_spec,
    refresh_lineage_state,
    removal_limits_check,
    run_alive,
)
from ol_dagster.defs.report import cleanup_markdown
from ol_dagster.defs.resources import CatalogResource, StoreResource
from ol_dagster.settings import Definition
from ol_dagster.sync import batch as sync_batch
from ol_dagster.sync.cleanup import CLEANUP_PERMISSION_DENIED


def build_stale_cleanup(
    definition: Definition,
) -> tuple[dg.AssetsDefinition, dg.ScheduleDefinition]:
    key = dg.AssetKey([definition.name, C.STALE_CLEANUP])

    @dg.asset(
        key=key,
        group_name=definition.name,
        kinds={"catalog"},
        check_specs=[
            check_spec(C.REMOVAL_CAP, key),
            check_spec(C.CLEANUP_PERMITTED, key),
        ],
        tags={C.DEFINITION_TAG: definition.name},
    )
    def stale_cleanup(
        context: dg.AssetExecutionContext,
        config: CleanupConfig,
        ol_catalog: CatalogResource,
        ol_store: StoreResource,
    ):
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
                    is_alive=run_alive(context.instance),
                    wait_seconds=LOCK_WAIT_SECONDS,
                )
            except sync_batch.SyncBusy as exc:
                raise dg.Failure(str(exc)) from None
            refresh_lineage_state(context, catalog, definition, store)
        if config.maxRemovalsPerRun is not None:
            report["override"] = {
                "maxRemovalsPerRun": config.maxRemovalsPerRun,
                "runId": context.run_id,
            }
        reason = report["skippedReason"]
        yield dg.MaterializeResult(
            metadata={
                "report": dg.MetadataValue.json(report),
                "summary": dg.MetadataValue.md(cleanup_markdown(report)),
                "skippedReason": str(reason),
                "removedJobs": len(report["removedJobs"]),
            },
            check_results=[
                removal_limits_check(report),
                dg.AssetCheckResult(
                    check_name=C.CLEANUP_PERMITTED,
                    passed=reason != CLEANUP_PERMISSION_DENIED,
                    severity=dg.AssetCheckSeverity.WARN,
                ),
            ],
        )

    schedule = dg.ScheduleDefinition(
        name=f"{definition.name}__stale_cleanup_daily",
        cron_schedule=C.STALE_CLEANUP_CRON,
        target=dg.AssetSelection.assets(key),
        default_status=dg.DefaultScheduleStatus.RUNNING,
        tags={C.DEFINITION_TAG: definition.name},
        description=f"The day-based cleanup of {definition.name}, daily.",
    )
    return stale_cleanup, schedule
