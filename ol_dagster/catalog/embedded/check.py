"""``ol-dagster check`` of an embedded catalog: a database, asked directly.

The database opens, every table and column of this version is there, its clock answers, and the
cleanup user holds ``SYSTEMS_ADMIN`` (the embedded cleanup refuses without).
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import inspect, select

from ol_dagster.catalog.check.findings import Finding, one_line, safe_url, skew_words
from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.catalog.embedded.settings import EmbeddedCatalogSettings
from ol_dagster.catalog.embedded.tables import SYSTEMS_ADMIN, metadata, users


def check_embedded(cfg: EmbeddedCatalogSettings) -> list[Finding]:
    where = safe_url(cfg.url)
    try:
        catalog = EmbeddedCatalog(cfg.url, user=cfg.user)
    except Exception as exc:  # noqa: BLE001 - the database that does not open is the finding
        return [Finding("database", False, f"{where}: {one_line(str(exc))}")]
    findings = [Finding("database", True, f"{where} opens ({catalog.engine.dialect.name})")]
    try:
        with catalog.engine.connect() as conn:
            found = inspect(conn)
            missing = []
            for table in metadata.sorted_tables:
                if not found.has_table(table.name):
                    missing.append(table.name)
                    continue
                present = {c["name"] for c in found.get_columns(table.name)}
                missing += [
                    f"{table.name}.{c.name}" for c in table.columns if c.name not in present
                ]
            perms = conn.execute(
                select(users.c.permissions).where(users.c.name == cfg.user)
            ).scalar()
        findings.append(
            Finding(
                "schema current",
                not missing,
                f"missing: {', '.join(missing[:10])}"
                if missing
                else f"all {len(metadata.sorted_tables)} tables of this version, every column",
            )
        )
        local = datetime.now(UTC)
        when = catalog.clock()
        findings.append(
            Finding("clock", True, f"the database's time, {skew_words(when, local)}", False)
        )
        admin = SYSTEMS_ADMIN in (perms or [])
        findings.append(
            Finding(
                f"{SYSTEMS_ADMIN} ({cfg.user})",
                admin,
                "the cleanup user may clean"
                if admin
                else f"user {cfg.user!r} lacks {SYSTEMS_ADMIN}: every cleanup is refused",
            )
        )
    finally:
        catalog.close()
    return findings
