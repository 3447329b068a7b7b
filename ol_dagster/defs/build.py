"""Every definition of a settings file as one ``dg.Definitions``: per sync definition, its sync
assets, job, sensor and schedule, and the lineage it has synced as external assets.

``build_defs`` is what the code location's entry point (``ol_dagster.definitions``), the ``dg``
component and ``ol-dagster sync`` load; a project of its own calls it to pass a translator.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

import dagster as dg

from ol_dagster.db import missing_sqlite_file
from ol_dagster.defs import names
from ol_dagster.defs.analysis import build_analyses
from ol_dagster.defs.executor import sync_executor
from ol_dagster.defs.factory import build_definition_defs
from ol_dagster.defs.lineage_assets import (
    OpenLineageTranslator,
    build_all_lineage_specs,
    job_runs_key,
    newest_jobs,
    with_job_runs,
)
from ol_dagster.defs.resources import file_resources
from ol_dagster.lineage_state import LineageState, stored_state
from ol_dagster.settings import Settings, SettingsError, load_settings, settings_path
from ol_dagster.store import EventStore

log = logging.getLogger(__name__)


def _lineage_states(settings: Settings) -> dict[str, LineageState]:
    """The synced-lineage snapshots with their jobs' last runs, read from the store (two queries
    per definition). A store that cannot be read leaves the lineage out rather than failing the
    whole code location. A store not made yet has synced nothing: it is not created here (a
    ``dg check defs`` leaves no ``.ol_dagster/`` in the project)."""
    if missing_sqlite_file(settings.store.url):
        return {}
    try:
        store = EventStore(settings.store.url)
    except Exception as exc:  # noqa: BLE001 - any failure: load without synced lineage
        log.warning("synced lineage not shown: the event store is unavailable (%s)", exc)
        return {}
    try:
        return {
            d.name: newest_jobs(
                with_job_runs(
                    stored_state(store.lineage_state(d.name)),
                    store.lineage_state(job_runs_key(d.name)),
                ),
                d.assetGraph.maxJobs,
            )
            for d in settings.definitions
        }
    finally:
        store.dispose()


def chosen_definitions(settings: Settings, names: Collection[str] | None, source: str) -> Settings:
    """``settings`` with only the named sync definitions (all when ``names`` is None); every
    unknown name is named at once, with the file and the names it has."""
    if names is None:
        return settings
    known = [d.name for d in settings.definitions]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        what = ", ".join(map(repr, unknown)) + " not in" if unknown else "the list is empty; see"
        raise SettingsError(f"definitions: {what} {source} (it has: {', '.join(known) or 'none'})")
    return settings.model_copy(
        update={"definitions": [d for d in settings.definitions if d.name in names]}
    )


def build_defs(
    path: str | None = None,
    *,
    translator: OpenLineageTranslator | None = None,
    synced_lineage: bool = True,
    definitions: Collection[str] | None = None,
    files: names.FileNames = names.CODE_LOCATION_FILE,
    analyses: bool = True,
) -> dg.Definitions:
    """All definitions of the settings file; ``translator`` changes the lineage assets' keys,
    groups and metadata (subclass ``OpenLineageTranslator``). ``synced_lineage=False`` leaves the
    synced jobs and datasets out: a process that only runs sync jobs (``ol-dagster sync``) needs
    none of them, and with 10,000 synced jobs they take seconds to build. ``definitions`` names
    the sync definitions to build (default: every one in the file). ``files`` names the file's
    resources and analyses (``names.file_names``: another file's beside the project's own);
    ``analyses=False`` leaves the file's analyses to another component of the same file."""
    resolved = str(settings_path(path).resolve())
    settings = chosen_definitions(load_settings(path), definitions, resolved)
    translator = translator or OpenLineageTranslator()
    lineage = synced_lineage_specs([settings], translator) if synced_lineage else []
    analysis_assets, analysis_schedules = [], []
    if analyses:
        asset, schedule = build_analyses(files)
        analysis_assets, analysis_schedules = [asset], [schedule]
    return dg.Definitions.merge(
        *(
            build_definition_defs(d, translator=translator, files=files)
            for d in settings.definitions
        ),
        dg.Definitions(
            assets=[*analysis_assets, *lineage],
            schedules=analysis_schedules,
            # A sync's steps run one after another and hand nothing over through IO managers: a
            # process per step would only add its start-up and its own load of the code location.
            executor=sync_executor,
            resources=file_resources(resolved, files),
        ),
    )


def synced_lineage_specs(
    sources: Collection[Settings], translator: OpenLineageTranslator
) -> list[dg.AssetSpec]:
    """The lineage the definitions of ``sources`` (settings, each with the definitions shown)
    have synced, as one graph: a dataset several of them touch is one asset."""
    states: dict[str, LineageState] = {}
    for settings in sources:
        states.update(_lineage_states(settings))
    return build_all_lineage_specs(states, translator)
