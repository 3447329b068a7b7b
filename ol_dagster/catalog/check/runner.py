"""``ol-dagster check`` as a whole: one report per definition's catalog (or per catalog).

Every report starts with what every kind needs (the settings load, the event store opens at its
schema version), then the findings of its catalog's kind. The event store is opened once for all
reports and disposed of at the end; nothing is written.
"""

from __future__ import annotations

from typing import Any

from ol_dagster.catalog.check.blindata import check_blindata
from ol_dagster.catalog.check.embedded import check_embedded
from ol_dagster.catalog.check.findings import Finding, Report, one_line, safe_url
from ol_dagster.catalog.check.marquez import check_marquez
from ol_dagster.catalog.check.openmetadata import check_openmetadata
from ol_dagster.settings import Settings, SyncDefinition


def _open_store(settings: Settings) -> tuple[Finding, Any]:
    from ol_dagster.store import EventStore

    where = safe_url(settings.store.url)
    try:
        store = EventStore(settings.store.url)
        store.ping()
    except Exception as exc:  # noqa: BLE001 - any failure to open it is the finding
        return Finding("event store", False, f"{where}: {one_line(str(exc))}"), None
    return Finding("event store", True, f"{where}, schema version {store.schema_version}"), store


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
            if cfg.kind == "embedded":
                report.findings += check_embedded(cfg)
            elif cfg.kind == "openmetadata":
                report.findings += check_openmetadata(name, cfg, settings, definition, store)
            elif cfg.kind == "marquez":
                report.findings += check_marquez(name, cfg, settings, definition)
            else:
                report.findings += check_blindata(name, cfg, settings, definition)
            reports.append(report)
        return reports
    finally:
        if store is not None:
            store.dispose()
