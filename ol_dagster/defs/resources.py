"""Resources: the event store and the definition's catalog, both opened from the settings file.

Resources own all I/O (the dagster-sling pattern): assets ask them for a store or a catalog and
never build connections themselves, so tests swap the settings file and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

import dagster as dg

from ol_dagster.catalog.factory import open_catalog
from ol_dagster.catalog.protocol import Catalog
from ol_dagster.settings import Settings, load_settings
from ol_dagster.store import EventStore


@lru_cache(maxsize=8)
def _store(url: str) -> EventStore:
    # One engine (and one migration check) per store URL per process.
    return EventStore(url)


class SettingsBacked(dg.ConfigurableResource):
    settings_path: str = ""  # empty: OL_DAGSTER_SETTINGS or ./ol_dagster.yaml

    def settings(self) -> Settings:
        return load_settings(self.settings_path or None)


class StoreResource(SettingsBacked):
    """The event store named by ``store.url`` in the settings."""

    def get(self) -> EventStore:
        return _store(self.settings().store.url)


class CatalogResource(SettingsBacked):
    """Opens the catalog a sync definition names (``definitions[].catalog``)."""

    @contextmanager
    def open(self, definition_name: str) -> Iterator[Catalog]:
        settings = self.settings()
        catalog = open_catalog(
            settings, settings.definition(definition_name).catalog, definition=definition_name
        )
        try:
            yield catalog
        finally:
            catalog.close()
