"""Marquez (and any server with the OpenLineage API): events in one by one, soft deletes out.

The kind's declaration; the package holds its settings (``settings``), its backend
(``catalog.MarquezCatalog``, a ledger catalog) and what ``ol-dagster check`` asks it (``check``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ol_dagster.catalog.kind import CatalogKind, CheckContext, Opening
from ol_dagster.catalog.marquez.settings import MarquezCatalogSettings
from ol_dagster.catalog.protocol import ExportsState, TakesEvents

if TYPE_CHECKING:
    from ol_dagster.catalog.check.findings import Finding
    from ol_dagster.catalog.marquez.catalog import MarquezCatalog


def _open(cfg: MarquezCatalogSettings, at: Opening) -> MarquezCatalog:
    from ol_dagster.catalog.marquez.catalog import MarquezCatalog

    return MarquezCatalog(at.name, cfg, store_url=at.store_url, definition=at.definition)


def _check(cfg: MarquezCatalogSettings, context: CheckContext) -> list[Finding]:
    from ol_dagster.catalog.marquez.check import check_marquez

    return check_marquez(cfg, context)


KIND = CatalogKind(
    name="marquez",
    settings=MarquezCatalogSettings,
    factory=_open,
    checker=_check,
    capabilities=frozenset({TakesEvents, ExportsState}),
)
