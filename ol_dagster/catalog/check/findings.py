"""What ``ol-dagster check`` reports: findings, one report per catalog, the table a person reads.

A finding carries whether the sync needs it (``needed_by_sync``): only those decide the exit
code; the others (clock skew, an unmapped namespace, ``Create``) are warnings. Nothing here asks
anything: each kind's checker (``catalog/<kind>/check.py``) makes findings, and
``ol_dagster/commands/check.py`` gathers them into reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
from sqlalchemy.engine import make_url


@dataclass(frozen=True, slots=True)
class Finding:
    name: str
    holds: bool
    detail: str
    needed_by_sync: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {
            "check": self.name,
            "holds": self.holds,
            "detail": self.detail,
            "neededBySync": self.needed_by_sync,
        }


@dataclass(slots=True)
class Report:
    definition: str | None
    catalog: str
    kind: str
    url: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def missing(self) -> list[Finding]:
        return [f for f in self.findings if f.needed_by_sync and not f.holds]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if not f.needed_by_sync and not f.holds]

    @property
    def ok(self) -> bool:
        return not self.missing

    def summary(self) -> str:
        warned = f", {len(self.warnings)} warning(s)" if self.warnings else ""
        if self.ok:
            needed = sum(1 for f in self.findings if f.needed_by_sync)
            return f"ready: all {needed} checks the sync needs hold{warned}"
        first = self.missing[0]
        more = f" (and {len(self.missing) - 1} more)" if len(self.missing) > 1 else ""
        return f"NOT READY: {first.name}: {first.detail}{more}{warned}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "definition": self.definition,
            "catalog": self.catalog,
            "kind": self.kind,
            "url": self.url,
            "ok": self.ok,
            "summary": self.summary(),
            "findings": [f.as_dict() for f in self.findings],
        }


def render(report: Report) -> str:
    """The table a person reads: check, holds, detail; then the summary line."""
    scope = f"definition {report.definition!r}, " if report.definition else ""
    head = f"{scope}catalog {report.catalog!r} ({report.kind} at {report.url})"
    rows = [("check", "holds", "detail")]
    for f in report.findings:
        holds = "yes" if f.holds else "no"
        rows.append(
            (f.name, holds, f.detail if f.needed_by_sync or f.holds else f"(warning) {f.detail}")
        )
    width = min(max(len(r[0]) for r in rows), 48)
    lines = [head, ""]
    lines += [f"{name:<{width}}  {holds:<5}  {detail}" for name, holds, detail in rows]
    lines += ["", report.summary()]
    return "\n".join(lines)


def safe_url(url: str) -> str:
    """A URL without its password (a database URL may hold one)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a database URL: an HTTP one, shown without userinfo
        parts = httpx.URL(url)
        return str(parts.copy_with(username=None, password=None)) if parts.userinfo else url


def one_line(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def skew_words(server: datetime, local: datetime) -> str:
    seconds = (server - local).total_seconds()
    if abs(seconds) < 2:  # the Date header counts whole seconds
        return "in step with this machine"
    return f"{abs(seconds):.0f} s {'ahead of' if seconds > 0 else 'behind'} this machine"
