"""What ``ol-dagster check`` reports: findings, one report per catalog, the table a person reads.

Every URL it prints, in a finding's words too, has its user part's secret and its query's values
masked (``safe_url``): a report is pasted into tickets and chats. A finding carries whether the
sync needs it (``needed_by_sync``): only those decide the exit
code; the others (clock skew, an unmapped namespace, ``Create``) are warnings. Nothing here asks
anything: each kind's checker (``catalog/<kind>/check.py``) makes findings, and
``ol_dagster/commands/check.py`` gathers them into reports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl


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
            "detail": mask_urls(self.detail),
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
            "url": safe_url(self.url),
            "ok": self.ok,
            "summary": mask_urls(self.summary()),
            "findings": [f.as_dict() for f in self.findings],
        }


def render(report: Report) -> str:
    """The table a person reads: check, holds, detail; then the summary line."""
    scope = f"definition {report.definition!r}, " if report.definition else ""
    head = f"{scope}catalog {report.catalog!r} ({report.kind} at {safe_url(report.url)})"
    rows = [("check", "holds", "detail")]
    for f in report.findings:
        holds = "yes" if f.holds else "no"
        detail = mask_urls(f.detail)
        rows.append(
            (f.name, holds, detail if f.needed_by_sync or f.holds else f"(warning) {detail}")
        )
    width = min(max(len(r[0]) for r in rows), 48)
    lines = [head, ""]
    lines += [f"{name:<{width}}  {holds:<5}  {detail}" for name, holds, detail in rows]
    lines += ["", mask_urls(report.summary())]
    return "\n".join(lines)


def safe_url(url: str) -> str:
    """A URL as it is shown: its password (a database URL may hold one), a user part without one
    (which may be a token: ``https://<token>@host``) and its query's values (``?token=...``)
    masked; its query's names kept, so a person still sees which parameters it has. The rest is
    left exactly as written (``sqlite:////abs/path.db`` keeps its four slashes)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, tail = rest[:end], rest[end:]
    user, at, host = authority.rpartition("@")
    if at:
        name, colon, _ = user.partition(":")
        authority = f"{name}:***@{host}" if colon else f"***@{host}"
    path, question, query = tail.partition("?")
    if question:
        query, hash_, fragment = query.partition("#")
        names = [n for n, _ in parse_qsl(query, keep_blank_values=True)]
        query = "&".join(f"{n}=***" for n in names) if names else ("***" if query else "")
        tail = f"{path}?{query}{hash_}{fragment}"
    return f"{scheme}://{authority}{tail}"


# a URL inside a message (an error quoting the address it failed on)
_URL_IN_TEXT = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def mask_urls(text: str) -> str:
    """``text`` with every URL in it shown as ``safe_url`` shows it."""
    return _URL_IN_TEXT.sub(lambda m: safe_url(m.group(0)), text)


def one_line(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def skew_words(server: datetime, local: datetime) -> str:
    seconds = (server - local).total_seconds()
    if abs(seconds) < 2:  # the Date header counts whole seconds
        return "in step with this machine"
    return f"{abs(seconds):.0f} s {'ahead of' if seconds > 0 else 'behind'} this machine"
