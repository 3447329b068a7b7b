"""OpenMetadata: events through its OpenLineage endpoint, edges read back and deleted by id.

The kind's declaration; the package holds its settings (``settings``), its backend
(``catalog.OpenMetadataCatalog``, a ledger catalog), the events made to conform to its request
schema (``events``), the tables its resolver finds (``tables``) and what ``ol-dagster check`` asks
it (``check``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ol_dagster.catalog.kind import CatalogKind, CheckContext, Opening
from ol_dagster.catalog.openmetadata.settings import OpenMetadataCatalogSettings
from ol_dagster.catalog.protocol import ExportsState, TakesEvents

if TYPE_CHECKING:
    from ol_dagster.catalog.check.findings import Finding
    from ol_dagster.catalog.openmetadata.catalog import OpenMetadataCatalog


def _open(cfg: OpenMetadataCatalogSettings, at: Opening) -> OpenMetadataCatalog:
    from ol_dagster.catalog.openmetadata.catalog import OpenMetadataCatalog

    return OpenMetadataCatalog(at.name, cfg, store_url=at.store_url, definition=at.definition)


def _check(cfg: OpenMetadataCatalogSettings, context: CheckContext) -> list[Finding]:
    from ol_dagster.catalog.openmetadata.check import check_openmetadata

    return check_openmetadata(cfg, context)


KIND = CatalogKind(
    name="openmetadata",
    settings=OpenMetadataCatalogSettings,
    factory=_open,
    checker=_check,
    capabilities=frozenset({TakesEvents, ExportsState}),
)
