"""What each catalog backend implements, said where pyright checks it.

The sync finds a backend's optional capabilities at run time (``isinstance`` against the
``runtime_checkable`` protocols of ``catalog.protocol``) and the factory imports the HTTP backends
by name, so nothing in the running code makes pyright compare a backend with the protocols. These
assignments do: a backend whose method drifts from its protocol (a parameter renamed, a return
type changed) fails ``pyright``, not a sync. Nothing here runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ol_dagster.catalog.blindata import BlindataCatalog
    from ol_dagster.catalog.embedded import EmbeddedCatalog
    from ol_dagster.catalog.marquez import MarquezCatalog
    from ol_dagster.catalog.openmetadata import OpenMetadataCatalog
    from ol_dagster.catalog.protocol import (
        Annotating,
        Catalog,
        ExportsState,
        Rehearsing,
        TakesEvents,
    )

    def _embedded(c: EmbeddedCatalog) -> tuple[Catalog, Rehearsing, ExportsState, Annotating]:
        return c, c, c, c

    def _blindata(c: BlindataCatalog) -> Catalog:
        return c

    def _marquez(c: MarquezCatalog) -> tuple[Catalog, TakesEvents, ExportsState]:
        return c, c, c

    def _openmetadata(c: OpenMetadataCatalog) -> tuple[Catalog, TakesEvents, ExportsState]:
        return c, c, c
