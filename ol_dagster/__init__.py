"""ol-dagster: a Dagster code location that keeps data catalogs in sync with OpenLineage."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ol_dagster.defs.component import OpenLineageSyncComponent

# Loaded on first use: the receiver and most commands never import Dagster. ``dg`` finds the
# component here (entry point ``dagster_dg_cli.registry_modules``: ``ol_dagster``) by ``dir()``.
_LAZY = {"OpenLineageSyncComponent": "ol_dagster.defs.component"}

__all__ = ["OpenLineageSyncComponent"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ol_dagster' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
