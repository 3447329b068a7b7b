"""Every definition of a settings file as one ``dg.Definitions``: per sync definition, its sync
assets, job, sensor and schedule, and the lineage it has synced as external assets.

``build_defs`` is what the code location's entry point (``ol_dagster.definitions``), the ``dg``
component and ``ol-dagster sync`` load; a project of its own calls it to pass a translator.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

import dagster as dg

from ol_dagster.defs.analysis import analyses, analysis_schedule
from ol_dagster.defs.factory import build_definition_defs
from ol_dagster.defs.lineage_assets import (
    OpenLineageTranslator,
    build_all_lineage_specs,
    job_runs_key,
    newest_jobs,
    with_job_runs,
)
from ol_dagster.defs.resources import CatalogResource, StoreResource
from ol_dagster.lineage_state import LineageState, stored_state
from ol_dagster.settings import Settings, SettingsError, load_settings, settings_path
from ol_dagster.store import EventStore

log = logging.getLogger(__name__)


def _lineage_states(settings: Settings) -> dict[str, LineageState]:
    """The synced-lineage snapshots with their jobs' last runs, read from the store (two queries
    per definition). A store that cannot be read leaves the lineage out rather than failing the
    whole code location."""
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
) -> dg.Definitions:
    """All definitions of the settings file; ``translator`` changes the lineage assets' keys,
    groups and metadata (subclass ``OpenLineageTranslator``). ``synced_lineage=False`` leaves the
    synced jobs and datasets out: a process that only runs sync jobs (``ol-dagster sync``) needs
    none of them, and with 10,000 synced jobs they take seconds to build. ``definitions`` names
    the sync definitions to build (default: every one in the file)."""
    resolved = str(settings_path(path).resolve())
    settings = chosen_definitions(load_settings(path), definitions, resolved)
    translator = translator or OpenLineageTranslator()
    states = _lineage_states(settings) if synced_lineage else {}
    return dg.Definitions.merge(
        *(build_definition_defs(d, translator=translator) for d in settings.definitions),
        dg.Definitions(
            assets=[analyses, *build_all_lineage_specs(states, translator)],
            schedules=[analysis_schedule],
            # A sync's steps run one after another and hand nothing over through IO managers: a
            # process per step would only add its start-up and its own load of the code location.
            executor=dg.in_process_executor,
            resources={
                "ol_store": StoreResource(settings_path=resolved),
                "ol_catalog": CatalogResource(settings_path=resolved),
            },
        ),
    )
