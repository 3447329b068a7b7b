"""The Dagster entry point: one group of assets, a job and a sensor per sync definition."""

from __future__ import annotations

import dagster as dg

from ol_dagster.defs.factory import build_definition_defs
from ol_dagster.defs.resources import CatalogResource, StoreResource
from ol_dagster.settings import load_settings, settings_path


def build_defs(path: str | None = None) -> dg.Definitions:
    settings = load_settings(path)
    resolved = str(settings_path(path).resolve())
    return dg.Definitions.merge(
        *(build_definition_defs(d) for d in settings.definitions),
        dg.Definitions(
            resources={
                "ol_store": StoreResource(settings_path=resolved),
                "ol_catalog": CatalogResource(settings_path=resolved),
            }
        ),
    )


@dg.definitions
def defs() -> dg.Definitions:
    return build_defs()
