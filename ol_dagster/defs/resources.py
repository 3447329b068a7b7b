"""Resources: the event store and the definition's catalog, both opened from the settings file.

Resources own all I/O (the dagster-sling pattern): assets ask them for a store or a catalog and
never build connections themselves, so tests swap the settings file and nothing else.

Each settings file has its pair, under its keys (``names.FileNames``): the definitions of several
files (several ``dg`` components) load side by side, and components of one file share one pair.

The settings are read once per run and once per sensor tick: Dagster sets up a copy of each
resource for each (``setup_for_execution``); its first call reads the file and every later call of
that run or tick answers from that snapshot, so a file edited mid-run is seen by the next run,
never by half of this one. Within a run both resources share one snapshot (by run id);
``settings_cache`` makes a snapshot of an unchanged file free.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import dagster as dg
from pydantic import PrivateAttr

from ol_dagster.catalog.protocol import Catalog
from ol_dagster.defs.names import FileNames
from ol_dagster.settings import Settings, load_settings
from ol_dagster.store import EventStore


@lru_cache(maxsize=8)
def _store(url: str) -> EventStore:
    # One engine (and one migration check) per store URL per process.
    return EventStore(url)


# (settings path, run id) -> the run's settings: the store and the catalog resource of one run
# read the same version of the file, even when it changes between their set-ups
_RUNS: OrderedDict[tuple[str, str], Settings] = OrderedDict()
_RUNS_LOCK = threading.Lock()
_RUNS_KEPT = 16  # runs of one process (a run worker has one; ``ol-dagster sync`` one at a time)


def _run_settings(path: str, run_id: str | None) -> Settings:
    if run_id is None:  # a sensor tick: its own snapshot
        return load_settings(path or None)
    with _RUNS_LOCK:
        if (path, run_id) in _RUNS:
            return _RUNS[(path, run_id)]
        settings = _RUNS[(path, run_id)] = load_settings(path or None)
        while len(_RUNS) > _RUNS_KEPT:
            _RUNS.popitem(last=False)
        return settings


class SettingsBacked(dg.ConfigurableResource):
    settings_path: str = ""  # empty: OL_DAGSTER_SETTINGS or ./ol_dagster.yaml
    # set up for a run or a tick (Dagster sets up a copy of the resource for each)
    _executing: bool = PrivateAttr(default=False)
    _run_id: str | None = PrivateAttr(default=None)
    _snapshot: Settings | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        # read at first use: a tick sets up every resource of the code location, and uses one
        self._executing, self._run_id = True, context.run_id

    def settings(self) -> Settings:
        """The settings of this run or tick (read now when used outside of one)."""
        if not self._executing:
            return load_settings(self.settings_path or None)
        if self._snapshot is None:
            self._snapshot = _run_settings(self.settings_path, self._run_id)
        return self._snapshot


class StoreResource(SettingsBacked):
    """The event store named by ``store.url`` in the settings."""

    def get(self) -> EventStore:
        return _store(self.settings().store.url)


class CatalogResource(SettingsBacked):
    """Opens a catalog a sync definition names (``definitions[].catalog`` or ``catalogs``)."""

    @contextmanager
    def open(self, definition_name: str, catalog_key: str | None = None) -> Iterator[Catalog]:
        """The catalog ``catalog_key`` of the definition; its primary catalog by default."""
        settings = self.settings()
        key = catalog_key or settings.definition(definition_name).catalog_keys[0]
        catalog = settings.open_catalog(key, definition=definition_name)
        try:
            yield catalog
        finally:
            catalog.close()


@lru_cache(maxsize=64)
def file_resources(settings_file: str, names: FileNames) -> dict[str, SettingsBacked]:
    """The resources of a settings file under its keys: the same objects for every component of
    the file (Dagster merges the components' definitions, and takes one key's resource only when
    it is the same object)."""
    return {
        names.store: StoreResource(settings_path=settings_file),
        names.catalog: CatalogResource(settings_path=settings_file),
    }


def store_of(context: Any, names: FileNames) -> StoreResource:
    """The file's store resource in a run, tick or hook (``required_resource_keys``)."""
    return getattr(context.resources, names.store)


def catalog_of(context: Any, names: FileNames) -> CatalogResource:
    return getattr(context.resources, names.catalog)
