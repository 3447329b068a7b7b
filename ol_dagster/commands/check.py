"""``ol-dagster check`` as a whole: one report per definition's catalog (or per catalog).

Without it, a wrong token, a missing permission or a disabled endpoint shows up late: after the
receiver accepted a batch, when its upload fails, or worse when its cleanup is refused and the
ledger keeps what it could not remove. ``check`` asks each question once, writes nothing, and
prints a table of what holds and what does not: the first thing to run against a real catalog.

Every report starts with what every kind needs (the settings load, the event store opens at its
schema version), then the findings of its catalog's kind: what is asked of each kind is that
kind's checker (``catalog/<kind>/check.py``, found through the kind's declaration). The event store
is opened once for all reports and disposed of at the end; nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from ol_dagster.catalog.check.findings import Finding, Report, one_line, render, safe_url
from ol_dagster.catalog.kind import CheckContext, Opening
from ol_dagster.catalog.registry import check_catalog
from ol_dagster.settings import Settings
from ol_dagster.store import EventStore
from ol_dagster.sync_definition import SyncDefinition

__all__ = ["Report", "check", "render"]

# every stored event, whenever it was received
_EVER = (datetime(1, 1, 2, tzinfo=UTC), datetime(9999, 12, 31, tzinfo=UTC))


def _open_store(settings: Settings) -> tuple[Finding, EventStore | None]:
    where = safe_url(settings.store.url)
    try:
        store = EventStore(settings.store.url)
        store.ping()
    except Exception as exc:  # noqa: BLE001 - any failure to open it is the finding
        return Finding("event store", False, f"{where}: {one_line(str(exc))}"), None
    return Finding("event store", True, f"{where}, schema version {store.schema_version}"), store


def _stored_events(
    store: EventStore | None, definition: SyncDefinition | None
) -> Callable[[], Iterable[bytes]] | None:
    if store is None or definition is None:
        return None
    return lambda: store.iter_events_between(*_EVER, definition=definition.name)


def check(settings: Settings, definitions: list[SyncDefinition], *, source: str) -> list[Report]:
    """One report per definition (its catalog), or per catalog when there is no definition."""
    targets: list[tuple[SyncDefinition | None, str]] = (
        [(d, key) for d in definitions for key in d.catalog_keys]
        if definitions
        else [(None, name) for name in settings.catalogs]
    )
    store_finding, store = _open_store(settings)
    try:
        reports = []
        for definition, name in targets:
            cfg = settings.catalogs[name]
            report = Report(
                definition.name if definition else None,
                name,
                cfg.kind,
                safe_url(cfg.url),
                [Finding("settings", True, f"{source} loads"), store_finding],
            )
            context = CheckContext(
                Opening(name, settings.store.url, definition.name if definition else ""),
                definition,
                _stored_events(store, definition),
            )
            report.findings += check_catalog(cfg, context)
            reports.append(report)
        return reports
    finally:
        if store is not None:
            store.dispose()
