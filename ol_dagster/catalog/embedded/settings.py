"""The keys of an embedded catalog: a database (its own, or the settings file's ``databaseUrl``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Self

from pydantic import Field

from ol_dagster.catalog.settings import CatalogSettings
from ol_dagster.settings_base import anchor_sqlite

DEFAULT_CATALOG_URL = "sqlite:///.ol_dagster/catalog.db"


class EmbeddedCatalogSettings(CatalogSettings):
    """The embedded catalog: a SQLAlchemy URL, and the user its cleanups run as."""

    kind: str = "embedded"
    url: str = DEFAULT_CATALOG_URL
    # the cleanup user: the catalog checks its SYSTEMS_ADMIN permission (kept in 200 characters)
    user: Annotated[str, Field(min_length=1, max_length=200)] = "ol-dagster"

    def anchored(self, base: Path) -> Self:
        return self.model_copy(update={"url": anchor_sqlite(self.url, base)})

    def on_database(self, url: str) -> Self:
        return self if "url" in self.model_fields_set else self.model_copy(update={"url": url})
