"""Open the catalog a definition names in the settings."""

from __future__ import annotations

from ol_dagster.catalog.embedded import EmbeddedCatalog
from ol_dagster.catalog.protocol import Catalog
from ol_dagster.settings import Settings, SettingsError


def open_catalog(settings: Settings, name: str) -> Catalog:
    try:
        cfg = settings.catalogs[name]
    except KeyError:
        raise SettingsError(f"no catalog named {name!r} in 'catalogs'") from None
    if cfg.kind == "embedded":
        return EmbeddedCatalog(cfg.url)
    raise SettingsError(f"catalogs.{name}.kind: {cfg.kind!r} is not supported")
