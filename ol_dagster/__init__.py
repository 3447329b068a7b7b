"""ol-dagster: a Dagster code location that keeps data catalogs in sync with OpenLineage.

The public API, for a project that builds on ol-dagster rather than running it as it is:

- ``build_defs(path=None, *, translator=None, ...)``: the ``dg.Definitions`` of every sync
  definition in a settings file (assets, checks, sensors, schedules, synced lineage);
- ``OpenLineageTranslator``: subclass it to change the keys, groups and metadata of the synced
  jobs and datasets in the asset graph, and pass it to ``build_defs``;
- ``OpenLineageSyncComponent``: the same definitions for a YAML-first (``dg``) project;
- ``Catalog``: the protocol every catalog backend implements;
- ``load_settings`` / ``Settings``: the settings file, validated.

Every name is loaded on first use: ``import ol_dagster`` imports neither Dagster nor a catalog
client, so the receiver and most commands start without them. See ARCHITECTURE.md for the map.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ol_dagster.catalog.protocol import Catalog
    from ol_dagster.definitions import build_defs
    from ol_dagster.defs.component import OpenLineageSyncComponent
    from ol_dagster.defs.lineage_assets import OpenLineageTranslator
    from ol_dagster.settings import Settings, load_settings

# ``dg`` finds the component here (entry point ``dagster_dg_cli.registry_modules``: ``ol_dagster``)
# by ``dir()``.
_LAZY = {
    "build_defs": "ol_dagster.definitions",
    "OpenLineageTranslator": "ol_dagster.defs.lineage_assets",
    "OpenLineageSyncComponent": "ol_dagster.defs.component",
    "Catalog": "ol_dagster.catalog.protocol",
    "Settings": "ol_dagster.settings",
    "load_settings": "ol_dagster.settings",
}

__all__ = [
    "Catalog",
    "OpenLineageSyncComponent",
    "OpenLineageTranslator",
    "Settings",
    "build_defs",
    "load_settings",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ol_dagster' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
