"""Open the catalog a definition names in the settings: the backend of its ``kind``, given the
settings model of that kind (``settings.CatalogSettings``)."""

from __future__ import annotations

from importlib import import_module

from ol_dagster.catalog.embedded import EmbeddedCatalog
from ol_dagster.catalog.protocol import Catalog
from ol_dagster.settings import EmbeddedCatalogSettings, Settings, SettingsError

# kind -> (module, class) of the HTTP backends, imported only when used
HTTP_BACKENDS = {
    "openmetadata": ("ol_dagster.catalog.openmetadata", "OpenMetadataCatalog"),
    "marquez": ("ol_dagster.catalog.marquez", "MarquezCatalog"),
    "blindata": ("ol_dagster.catalog.blindata", "BlindataCatalog"),
}


def open_catalog(settings: Settings, name: str, *, definition: str | None = None) -> Catalog:
    """The catalog ``name``; ``definition`` scopes what an HTTP catalog's sync ledger reads."""
    try:
        cfg = settings.catalogs[name]
    except KeyError:
        raise SettingsError(f"no catalog named {name!r} in 'catalogs'") from None
    if isinstance(cfg, EmbeddedCatalogSettings):
        return EmbeddedCatalog(cfg.url, user=cfg.user)
    module, cls = HTTP_BACKENDS[cfg.kind]
    backend = getattr(import_module(module), cls)
    return backend(name, cfg, store_url=settings.store.url, definition=definition or "")
