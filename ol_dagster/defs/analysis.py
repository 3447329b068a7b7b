"""Egeria's analyses as daily assets: ``run_profiles``, ``dataset_scopes``, ``quality_summaries``.

One multi-asset reads the window (``analysisWindowDays``, 30 by default) from the event store once
and computes the three (``ol_dagster/analysis``). Each result is shown as a table in the UI and
written to the catalog of every definition (run profiles and quality on job entities, data scopes
and quality on datasets; catalogs that cannot hold them skip it). The ``jobs_on_schedule`` check
warns when a job stopped running on its inferred schedule.
"""

from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg

from ol_dagster.catalog.protocol import AnalysisItem, Annotating
from ol_dagster.defs import names
from ol_dagster.defs.report import rows_markdown
from ol_dagster.defs.resources import StoreResource, store_of
from ol_dagster.gcpause import gc_paused
from ol_dagster.openlineage.envelope import namespace_allowed
from ol_dagster.settings import Settings

# the keys of the code location's own file's analyses (another file's carry its label)
RUN_PROFILES = dg.AssetKey("run_profiles")
DATASET_SCOPES = dg.AssetKey("dataset_scopes")
QUALITY_SUMMARIES = dg.AssetKey("quality_summaries")
JOBS_ON_SCHEDULE = "jobs_on_schedule"
CRON = "30 3 * * *"  # daily, after the stale cleanup
_ROWS = 200

_PROFILE_COLUMNS = [
    "namespace",
    "name",
    "runsPerDay",
    "failureRate",
    "schedule",
    "regularity",
    "typicalDurationSeconds",
    "worstDurationSeconds",
    "stoppedOnSchedule",
]
_SCOPE_COLUMNS = [
    "namespace",
    "name",
    "scope",
    "collectionStart",
    "collectionEnd",
    "writesPerDay",
    "readsPerDay",
]


def _columns(rows: list[dict[str, Any]], preferred: list[str]) -> list[str]:
    present = {k for r in rows for k in r}
    return [c for c in preferred if c in present] or sorted(present)[:10]


def _annotate(settings: Settings, key: str, items: list[AnalysisItem]) -> int:
    """Write results to each definition's catalog, for the jobs of its namespaces (a catalog
    that cannot hold them, not ``Annotating``, is skipped)."""
    written = 0
    for definition in settings.definitions:
        mine = [
            i
            for i in items
            if i[0] != "job" or namespace_allowed(i[1], definition.namespace_patterns)
        ]
        # the primary catalog: the one the asset graph's lineage is read from
        catalog = settings.open_catalog(definition.catalog_keys[0], definition=definition.name)
        try:
            if isinstance(catalog, Annotating) and mine:
                written += catalog.annotate(key, mine)
        finally:
            catalog.close()
    return written


def build_analyses(
    files: names.FileNames,
) -> tuple[dg.AssetsDefinition, dg.ScheduleDefinition]:
    """The analyses of a settings file and their daily schedule, under the file's names."""
    run_profiles = files.analysis(RUN_PROFILES)
    dataset_scopes = files.analysis(DATASET_SCOPES)
    quality_summaries = files.analysis(QUALITY_SUMMARIES)
    group = files.analysis_group

    @dg.multi_asset(
        name=files.named("analyses"),
        specs=[
            dg.AssetSpec(
                run_profiles,
                group_name=group,
                kinds={"openlineage"},
                description="Per job: runs per day, failure rate, interval statistics, inferred "
                "schedule and regularity, typical and worst-case duration, mean data volume.",
            ),
            dg.AssetSpec(
                dataset_scopes,
                group_name=group,
                kinds={"openlineage"},
                description="Per dataset: whether writers REPLACE, PARTITION or APPEND it, the "
                "data collection window, write and read rates.",
            ),
            dg.AssetSpec(
                quality_summaries,
                group_name=group,
                kinds={"openlineage"},
                description="Per dataset and per job: pass rate per quality dimension and overall.",
            ),
        ],
        check_specs=[
            dg.AssetCheckSpec(
                JOBS_ON_SCHEDULE,
                asset=run_profiles,
                description="Every job with an inferred schedule ran when due (its last run "
                "plus 1.5 times its interval has not passed); a warning means some stopped "
                "running on their schedule (the result names them).",
            )
        ],
        required_resource_keys={files.store},
    )
    def analyses(context: dg.AssetExecutionContext):
        yield from _analyses(context, store_of(context, files), files)

    schedule = dg.ScheduleDefinition(
        name=files.analysis_schedule,
        cron_schedule=CRON,
        target=dg.AssetSelection.assets(run_profiles, dataset_scopes, quality_summaries),
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description="Egeria's analyses over the event store, daily.",
    )
    return analyses, schedule


def _analyses(context: dg.AssetExecutionContext, ol_store: StoreResource, files: names.FileNames):
    """Egeria's run profile, data scope and quality summary services over the event store."""
    # imported when the analyses run, not by every process that loads the code location
    from ol_dagster.analysis import (
        compute_dataset_scopes,
        compute_quality_summaries,
        compute_run_profiles,
        prepare,
    )

    settings = ol_store.settings()
    window = settings.analysisWindowDays
    now = datetime.now(UTC)
    store = ol_store.get()
    with gc_paused():
        # a day before the window too, so a run that started just before it is combined whole
        prepared = prepare(
            store.iter_events_between(now - timedelta(days=window + 1), now + timedelta(minutes=5)),
            now=now,
            window_days=window,
        )
        profiles = compute_run_profiles(prepared, now=now, window_days=window)
        scopes = compute_dataset_scopes(prepared, now=now, window_days=window)
        quality = compute_quality_summaries(prepared, now=now, window_days=window)

    written = {
        "runProfile": _annotate(
            settings, "runProfile", [("job", p.namespace, p.name, p.properties()) for p in profiles]
        ),
        "dataScope": _annotate(
            settings,
            "dataScope",
            [("dataset", s.namespace, s.name, s.properties()) for s in scopes],
        ),
        "qualitySummary": _annotate(
            settings,
            "qualitySummary",
            [("dataset", q.namespace, q.name, q.properties()) for q in quality.datasets]
            + [("job", q.namespace, q.name, q.properties()) for q in quality.jobs],
        ),
    }
    profile_rows, scope_rows, quality_rows = profiles.rows(), scopes.rows(), quality.rows()
    stopped = profiles.stopped()
    yield dg.MaterializeResult(
        asset_key=files.analysis(RUN_PROFILES),
        metadata={
            "jobs": len(profile_rows),
            "windowDays": window,
            "writtenToCatalogs": written["runProfile"],
            "profiles": dg.MetadataValue.md(
                rows_markdown(profile_rows, _columns(profile_rows, _PROFILE_COLUMNS), _ROWS)
            ),
        },
        check_results=[
            dg.AssetCheckResult(
                check_name=JOBS_ON_SCHEDULE,
                passed=not stopped,
                severity=dg.AssetCheckSeverity.WARN,
                description=None
                if not stopped
                else f"{len(stopped)} job(s) stopped running on their inferred schedule: "
                + ", ".join(f"{p.namespace}.{p.name}" for p in stopped[:20]),
                metadata={"stoppedJobs": len(stopped)},
            )
        ],
    )
    yield dg.MaterializeResult(
        asset_key=files.analysis(DATASET_SCOPES),
        metadata={
            "datasets": len(scope_rows),
            "windowDays": window,
            "writtenToCatalogs": written["dataScope"],
            "scopes": dg.MetadataValue.md(
                rows_markdown(scope_rows, _columns(scope_rows, _SCOPE_COLUMNS), _ROWS)
            ),
        },
    )
    yield dg.MaterializeResult(
        asset_key=files.analysis(QUALITY_SUMMARIES),
        metadata={
            "summaries": len(quality_rows),
            "windowDays": window,
            "writtenToCatalogs": written["qualitySummary"],
            "passRates": dg.MetadataValue.md(
                rows_markdown(quality_rows, _columns(quality_rows, []), _ROWS)
            ),
        },
    )


# the code location's own file's (``ol_dagster.definitions``)
analyses, analysis_schedule = build_analyses(names.CODE_LOCATION_FILE)
