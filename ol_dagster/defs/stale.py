"""``<definition>/stale_cleanup``: the day-based cleanup, daily, on a schedule.

Additive producers never re-send what they did not run, so what they stopped describing is only
removed once it has not been updated for ``cleanup.staleJobDays`` (dataset Systems with DAYS after
their ``cleanupDays``). Snapshot definitions get it too, for their DAYS Systems. The same guards
and report as the per-batch cleanup apply.
"""

import dagster as dg

from ol_dagster.defs import constants as C
from ol_dagster.defs.assets import CleanupConfig, refresh_lineage_state
from ol_dagster.defs.report import cleanup_markdown
from ol_dagster.defs.resources import CatalogResource, StoreResource
from ol_dagster.settings import Definition
from ol_dagster.sync.cleanup import (
    CLEANUP_PERMISSION_DENIED,
    REMOVAL_CAP_EXCEEDED,
    run_stale_cleanup,
)


def build_stale_cleanup(
    definition: Definition,
) -> tuple[dg.AssetsDefinition, dg.ScheduleDefinition]:
    key = dg.AssetKey([definition.name, C.STALE_CLEANUP])

    @dg.asset(
        key=key,
        group_name=definition.name,
        kinds={"catalog"},
        check_specs=[
            dg.AssetCheckSpec(C.REMOVAL_CAP, asset=key),
            dg.AssetCheckSpec(C.CLEANUP_PERMITTED, asset=key),
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
        with ol_catalog.open(definition.name) as catalog:
            report = run_stale_cleanup(catalog, definition, max_removals=config.maxRemovalsPerRun)
            refresh_lineage_state(context, catalog, definition, ol_store.get())
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
                dg.AssetCheckResult(
                    check_name=C.REMOVAL_CAP,
                    passed=reason != REMOVAL_CAP_EXCEEDED,
                    severity=dg.AssetCheckSeverity.WARN,
                    metadata={"plannedRemovals": report.get("plannedRemovals", 0)},
                ),
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
