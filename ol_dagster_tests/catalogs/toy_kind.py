"""A catalog kind of one's own, written outside ``ol_dagster/``: what a user adds for a catalog
ol-dagster does not ship (docs/adding-a-catalog-kind.md shows the same three parts).

The toy catalog is a server that takes OpenLineage events and deletes jobs and datasets by name,
as Marquez does, so its backend is a ledger catalog: it writes ``send``, ``clock`` and the
deletes, and the sync ledger gives it the cutoff cleanup. Its "server" keeps what it holds in one
JSON file under ``folder`` and is reached through an in-process httpx transport, so the toy needs
no network and a test can read what a sync left in it. Its clock moves a minute with each post of
events, so two syncs in one second still see time pass.

A settings file lists this module under ``catalogKinds``; importing it registers the kind.
"""

from __future__ import annotations

import email.utils
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import httpx

from ol_dagster.catalog.check.findings import Finding
from ol_dagster.catalog.http import CatalogRefused
from ol_dagster.catalog.kind import CatalogKind, CheckContext, Opening
from ol_dagster.catalog.ledger.catalog import LedgerCatalog, SendOutcome
from ol_dagster.catalog.ledger.entries import LedgerItem
from ol_dagster.catalog.protocol import ExportsState, Removal, TakesEvents
from ol_dagster.catalog.registry import register
from ol_dagster.catalog.settings import HttpCatalogSettings

START = datetime(2026, 11, 1, tzinfo=UTC)

# -- 1. the keys a toy catalog reads -----------------------------------------------------------


class ToyCatalogSettings(HttpCatalogSettings):
    kind: str = "toy"
    folder: str  # where the toy server keeps what it holds


# -- the toy server (what a real kind finds at its URL) ------------------------------------------


class ToyServer:
    """Events in (``POST /events``), jobs and datasets out by name (``DELETE``), its time in every
    answer's ``Date`` (a minute past ``START`` per post); what it holds in
    ``<folder>/holdings.json``."""

    def __init__(self, folder: Path) -> None:
        self.file = folder / "holdings.json"

    def holdings(self) -> dict[str, Any]:
        if not self.file.exists():
            return {"jobs": [], "datasets": [], "posts": 0}
        return json.loads(self.file.read_text(encoding="utf-8"))

    def handle(self, request: httpx.Request) -> httpx.Response:
        held = self.holdings()
        parts = [unquote(p) for p in request.url.raw_path.decode().split("?")[0].split("/")[1:]]
        status, body = 404, {"message": f"no route {request.method} {request.url.path}"}
        if request.method == "GET" and parts == ["time"]:
            status, body = 200, {}
        elif request.method == "POST" and parts == ["events"]:
            for event in json.loads(request.content):
                job = [event["job"]["namespace"], event["job"]["name"]]
                datasets = [[d["namespace"], d["name"]] for d in event.get("outputs") or []]
                for item, where in ((job, "jobs"), *((d, "datasets") for d in datasets)):
                    if item not in held[where]:
                        held[where].append(item)
            held["posts"] += 1
            status, body = 200, {}
        elif request.method == "DELETE" and len(parts) == 3 and parts[0] in ("jobs", "datasets"):
            if parts[1:] in held[parts[0]]:
                held[parts[0]].remove(parts[1:])
                status, body = 200, {}
            else:
                body = {"message": f"no {parts[0][:-1]} {parts[1]}:{parts[2]}"}
        self.file.write_text(json.dumps(held, sort_keys=True), encoding="utf-8")
        now = START + timedelta(minutes=held["posts"])
        date = email.utils.format_datetime(now, usegmt=True)
        return httpx.Response(status, json=body, headers={"Date": date})


# -- 2. the backend ------------------------------------------------------------------------------


class ToyCatalog(LedgerCatalog[ToyCatalogSettings]):
    kind = "toy"
    clock_call = ("/time", {})

    def __init__(self, name: str, cfg: ToyCatalogSettings, *, store_url: str, definition: str):
        Path(cfg.folder).mkdir(parents=True, exist_ok=True)
        transport = httpx.MockTransport(ToyServer(Path(cfg.folder)).handle)
        super().__init__(name, cfg, store_url=store_url, definition=definition, transport=transport)

    def send(self, events: Sequence[bytes]) -> SendOutcome:
        docs = [json.loads(raw) for raw in events]
        if docs:
            self.http.request("POST", "/events", json=docs)
        return SendOutcome(sent=len(docs))

    def _delete(self, where: str, item: LedgerItem) -> Removal:
        ns, name = (quote(item.payload[k], safe="") for k in ("namespace", "name"))
        self.http.request("DELETE", f"/{where}/{ns}/{name}")  # a 404 is counted as not found
        return Removal.REMOVED

    def delete_job(self, item: LedgerItem) -> Removal:
        return self._delete("jobs", item)

    def delete_dataset(self, item: LedgerItem) -> Removal:
        return self._delete("datasets", item)

    def delete_edge(self, item: LedgerItem) -> None:
        return None  # the toy keeps no edges: they go with their job


# -- 3. the declaration: what ``ol-dagster check`` asks, and the registration --------------------


def check_toy(cfg: ToyCatalogSettings, context: CheckContext) -> list[Finding]:
    at = context.opening
    try:
        catalog = ToyCatalog(at.name, cfg, store_url=at.store_url, definition=at.definition)
    except Exception as exc:  # noqa: BLE001 - the catalog that does not open is the finding
        return [Finding("toy server", False, f"cannot open: {exc}")]
    try:
        when = catalog.clock()
        held = ToyServer(Path(cfg.folder)).holdings()
    except CatalogRefused as exc:
        return [Finding("toy server", False, str(exc))]
    finally:
        catalog.close()
    return [
        Finding("toy server", True, f"answers at {when:%Y-%m-%d %H:%M:%S}Z"),
        Finding("toy holdings", True, f"{len(held['jobs'])} job(s) in {cfg.folder}"),
    ]


def open_toy(cfg: ToyCatalogSettings, at: Opening) -> ToyCatalog:
    return ToyCatalog(at.name, cfg, store_url=at.store_url, definition=at.definition)


KIND = register(
    CatalogKind(
        name="toy",
        settings=ToyCatalogSettings,
        factory=open_toy,
        checker=check_toy,
        capabilities=frozenset({TakesEvents, ExportsState}),
    )
)


def holdings(folder: str | Path) -> dict[str, Any]:
    """What the toy server holds, for a test to read."""
    return ToyServer(Path(folder)).holdings()
