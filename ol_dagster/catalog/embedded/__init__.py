"""The embedded catalog: a real catalog in SQLAlchemy, the default target of every definition.

The kind's declaration; the package holds its settings (``settings``), its backend
(``catalog.EmbeddedCatalog``, a thin facade over one module per concern) and what ``ol-dagster
check`` asks it (``check``).
"""

# no ``from __future__ import annotations`` here: it would put a name ``annotations`` in this
# package, hiding its ``annotations`` module from ``from ol_dagster.catalog.embedded import ...``
from typing import TYPE_CHECKING

from ol_dagster.catalog.embedded.settings import EmbeddedCatalogSettings
from ol_dagster.catalog.kind import CatalogKind, CheckContext, Opening
from ol_dagster.catalog.protocol import (
    Annotating,
    ExportsState,
    PatchesState,
    Rehearsing,
    RetiresChildren,
)

if TYPE_CHECKING:
    from ol_dagster.catalog.check.findings import Finding
    from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog


def _open(cfg: EmbeddedCatalogSettings, at: Opening) -> "EmbeddedCatalog":
    from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog

    return EmbeddedCatalog(cfg.url, user=cfg.user)


def _check(cfg: EmbeddedCatalogSettings, context: CheckContext) -> "list[Finding]":
    from ol_dagster.catalog.embedded.check import check_embedded

    return check_embedded(cfg)


KIND = CatalogKind(
    name="embedded",
    settings=EmbeddedCatalogSettings,
    factory=_open,
    checker=_check,
    capabilities=frozenset({Rehearsing, ExportsState, PatchesState, Annotating, RetiresChildren}),
)
