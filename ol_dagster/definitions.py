"""The Dagster entry point: per sync definition, its sync assets, job, sensor and schedule, and
the lineage it has synced as external assets."""

from __future__ import annotations

import logging

import dagster as dg

from ol_dagster.defs.analysis import analyses, analysis_schedule
from ol_dagster.defs.factory import build_definition_defs
from ol_dagster.defs.lineage_assets import OpenLineageTranslator, build_all_lineage_specs
from ol_dagster.defs.resources import CatalogResource, StoreResource
from ol_dagster.settings import Settings, load_settings, settings_path
from ol_dagster.store import EventStore

log = logging.getLogger(__name__)


def _lineage_states(settings: Settings) -> dict[str, dict]:
    """The synced-lineage snapshots, read from the store (one query per definition). A store that
    cannot be read leaves the lineage out rather than failing the whole code location."""
    try:
        store = EventStore(settings.store.url)
    except Exception as exc:  # noqa: BLE001 - any failure: load without synced lineage
        log.warning("synced lineage not shown: the event store is unavailable (%s)", exc)
        return {}
    try:
        return {d.name: store.lineage_state(d.name) or {} for d in settings.definitions}
    finally:
        store.dispose()


def build_defs(
    path: str | None = None, *, translator: OpenLineageTranslator | None = None
) -> dg.Definitions:
    """All definitions of the settings file; ``translator`` changes the lineage assets' keys,
    groups and metadata (subclass ``OpenLineageTranslator``)."""
    settings = load_settings(path)
    resolved = str(settings_path(path).resolve())
    translator = translator or OpenLineageTranslator()
    states = _lineage_states(settings)
    return dg.Definitions.merge(
        *(build_definition_defs(d, translator=translator) for d in settings.definitions),
        dg.Definitions(
            assets=[analyses, *build_all_lineage_specs(states, translator)],
            schedules=[analysis_schedule],
            resources={
                "ol_store": StoreResource(settings_path=resolved),
                "ol_catalog": CatalogResource(settings_path=resolved),
            },
        ),
    )


@dg.definitions
def defs() -> dg.Definitions:
    return build_defs()
