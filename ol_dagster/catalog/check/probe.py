"""How the HTTP checks ask a catalog: once each, through the catalog's own client, secrets scrubbed.

``catalog_client`` opens the backend the sync would use (its URL, auth headers, tenant and
timeout), or says why it cannot (a secret not in the environment...); ``Prober`` sends one request
at a time through it, without retries, and turns a missing answer into ``NoAnswer``; every detail
is scrubbed of the resolved token and API key. ``reachable`` and ``clock`` are the first two
findings of every HTTP kind.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from ol_dagster.catalog.check.findings import Finding, one_line, skew_words
from ol_dagster.catalog.http import server_time
from ol_dagster.catalog.settings import HttpCatalogSettings
from ol_dagster.settings_base import SettingsError

PROBE_NAMESPACE = "ol-dagster-check"  # a namespace no producer writes: the probes' names
MAX_SKEW_SECONDS = 300.0
MAX_TIMEOUT_SECONDS = 15.0


class NoAnswer(Exception):
    """The server gave no HTTP answer (connection refused, timeout...): one line why."""


@dataclass(frozen=True, slots=True)
class Answer:
    response: httpx.Response
    local: datetime  # this machine's time in the middle of the exchange

    @property
    def status(self) -> int:
        return self.response.status_code

    def json(self) -> Any:
        try:
            return self.response.json() if self.response.content else None
        except ValueError:
            return None

    def message(self) -> str:
        """The server's own words (OpenMetadata/Marquez ``message``, Blindata ``message``)."""
        body = self.json()
        if isinstance(body, dict):
            for key in ("message", "error", "errors"):
                if body.get(key):
                    return one_line(str(body[key]))
        return one_line(self.response.text) if self.response.text else ""


class Prober:
    """Sends one request at a time, without retries (a check is asked once), through the
    client's own ``httpx.Client`` (its base URL, auth headers and tenant); scrubs secrets."""

    def __init__(self, client: httpx.Client, timeout: float, secrets: list[str]) -> None:
        self.client = client
        self.timeout = min(timeout, MAX_TIMEOUT_SECONDS)
        self.secrets = [s for s in secrets if s]

    def scrub(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text

    def ask(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json_body: Any = None,
    ) -> Answer:
        started = time.time()
        try:
            response = self.client.request(
                method, path, params=params, json=json_body, timeout=self.timeout
            )
        except httpx.HTTPError as exc:
            reason = str(exc) or "no answer"
            raise NoAnswer(self.scrub(one_line(f"{type(exc).__name__}: {reason}"))) from None
        middle = (started + time.time()) / 2
        return Answer(response, datetime.fromtimestamp(middle, UTC))

    def said(self, answer: Answer) -> str:
        """``HTTP <status>`` and the server's message, scrubbed."""
        message = answer.message()
        return self.scrub(f"HTTP {answer.status}" + (f": {message}" if message else ""))


def clock(answer: Answer, where: str) -> Finding:
    """The sync reads the catalog's time from ``Date``: without it the upload fails; a skew is
    only a warning (cutoffs are the catalog's own time)."""
    when = server_time(answer.response)
    if when is None:
        return Finding("clock", False, f"{where} answered without a Date header")
    skew = abs((when - answer.local).total_seconds())
    return Finding(
        "clock",
        skew <= MAX_SKEW_SECONDS,
        f"Date {when:%Y-%m-%d %H:%M:%S}Z, {skew_words(when, answer.local)}",
        needed_by_sync=skew <= MAX_SKEW_SECONDS,
    )


def reachable(prober: Prober, method: str, path: str, **kw: Any) -> tuple[Finding, Answer | None]:
    """Any answer but a 5xx: a proxy's 502 or a server's 503 is a catalog that is down (the
    client's retries would not outlast it either); nothing else is asked then."""
    try:
        answer = prober.ask(method, path, **kw)
    except NoAnswer as exc:
        return Finding("reachable", False, f"{method} {path}: {exc}"), None
    if answer.status >= 500:
        return Finding("reachable", False, f"{method} {path}: {prober.said(answer)}"), None
    return Finding("reachable", True, f"{method} {path} answered HTTP {answer.status}"), answer


def resolved_secrets(cfg: HttpCatalogSettings) -> list[str]:
    out = []
    for secret in cfg.secrets():
        with suppress(SettingsError):  # a missing secret is reported where it is used
            out.append(secret.resolve())
    return out


@dataclass(frozen=True, slots=True)
class CatalogClient:
    prober: Prober
    catalog: Any  # the backend itself, for the calls the check makes its own way (dry runs)


@contextmanager
def catalog_client(
    backend: Callable[[], Any], cfg: HttpCatalogSettings, *, ledger: bool
) -> Iterator[CatalogClient | Finding]:
    """The catalog's own client (its URL, headers and timeout), as ``backend()`` opens it, or the
    finding why it cannot be opened (a secret not in the environment...); ``ledger``: the
    backend opens its sync ledger in the event store too."""
    try:
        catalog = backend()
    except SettingsError as exc:
        yield Finding("credentials", False, str(exc))
        return
    except Exception as exc:  # noqa: BLE001 - e.g. the ledger's tables in an unreachable store
        where = "its sync ledger is in the event store: " if ledger else ""
        yield Finding("catalog client", False, f"cannot open ({where}{one_line(str(exc))})")
        return
    try:
        yield CatalogClient(
            Prober(catalog.http.client, cfg.timeoutSeconds, resolved_secrets(cfg)), catalog
        )
    finally:
        catalog.close()
