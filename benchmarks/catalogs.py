"""Upload throughput into the HTTP catalogs' fakes: events/s for one batch on loopback.

Each backend gets the same ``--events`` generated RunEvents (one job each, reading one of 50
warehouse tables with a ``--columns``-column schema facet and writing its own table), normalized
once into the batch's graph. For each backend and each of ``--repeat`` rounds a fresh fake is
served by uvicorn on a free 127.0.0.1 port (a background thread of this process, so client and
server share one interpreter: the figures are a floor for a real server on another machine) and
two things are timed:

- ``send``: the events posted by the backend's ``send`` alone (Marquez: one POST per event on the
  ``--concurrency`` pool; OpenMetadata: ``--chunk-size`` events per batch request);
- ``upload``: the whole ``LedgerCatalog.upload`` a sync makes (the clock read, the send, and the
  sync ledger written to a temporary SQLite store).

Blindata takes no events: its ``upload`` writes the graph's objects one request each (Systems,
entities, fields, routines, flows, quality suites; reads paged), ``--concurrency`` at a time, so it
has no ``send`` column; it is checked by every job entity arriving in the fake.

Before a time is reported the result is checked: no failed row, and every event arrived in the
fake (Marquez: every job visible; OpenMetadata: one edge per event). The median round is reported.

One function per backend (``bench_<kind>``), listed in ``BACKENDS``: a new backend adds its own.

Usage: ``.venv/bin/python benchmarks/catalogs.py [--events 1000] [--repeat 3] [--only marquez]``
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ol_dagster.catalog.blindata.catalog import BlindataCatalog  # noqa: E402
from ol_dagster.catalog.blindata.settings import BlindataCatalogSettings
from ol_dagster.catalog.ledger.catalog import LedgerCatalog  # noqa: E402
from ol_dagster.catalog.marquez.catalog import MarquezCatalog  # noqa: E402
from ol_dagster.catalog.marquez.settings import MarquezCatalogSettings
from ol_dagster.catalog.openmetadata.catalog import OpenMetadataCatalog  # noqa: E402
from ol_dagster.catalog.openmetadata.settings import OpenMetadataCatalogSettings
from ol_dagster.lineage import LineageGraph  # noqa: E402
from ol_dagster.receiver.server import serve_in_background  # noqa: E402
from ol_dagster.settings import SyncDefinition
from ol_dagster.sync.upload import build_graph  # noqa: E402
from ol_dagster_tests.fakes.blindata_fake import BlindataFake, FakeClock  # noqa: E402
from ol_dagster_tests.fakes.faults import serve  # noqa: E402
from ol_dagster_tests.fakes.marquez_fake import MarquezFake  # noqa: E402
from ol_dagster_tests.fakes.openmetadata_fake import (  # noqa: E402
    CREATE,
    EDIT_LINEAGE,
    OpenMetadataFake,
)

NS = "repo"
WAREHOUSE = "postgres://warehouse.internal:5432"
SERVICE = "warehouse"
PRODUCER = "https://example.com/ol-dagster-benchmarks"
SPEC = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
TOKEN_ENV = "OL_BENCH_OM_JWT"
TOKEN = "bench-jwt"


def _schema(columns: int) -> dict[str, Any]:
    return {
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json",
        "fields": [{"name": f"col_{c}", "type": "integer"} for c in range(columns)],
    }


def make_events(count: int, columns: int) -> list[bytes]:
    events = []
    for i in range(count):
        event = {
            "eventType": "COMPLETE",
            "eventTime": "2026-11-01T02:00:00.000Z",
            "producer": PRODUCER,
            "schemaURL": SPEC,
            "run": {"runId": str(uuid.uuid4())},
            "job": {"namespace": NS, "name": f"etl.job_{i:05d}"},
            "inputs": [
                {
                    "namespace": WAREHOUSE,
                    "name": f"shop.public.src_{i % 50:02d}",
                    "facets": {"schema": _schema(columns)},
                }
            ],
            "outputs": [
                {
                    "namespace": WAREHOUSE,
                    "name": f"shop.public.out_{i:05d}",
                    "facets": {"schema": _schema(columns)},
                }
            ],
        }
        events.append(orjson.dumps(event))
    return events


def definition() -> SyncDefinition:
    return SyncDefinition.model_validate(
        {
            "name": "bench",
            "uuid": "44444444-4444-4444-8444-444444444444",
            "catalog": "main",
            "snapshotMode": "BATCH_SNAPSHOT",
            "allowedJobNamespaces": [NS],
            "receiver": {"token": {"env": "OL_BENCH_RECEIVER_TOKEN"}},
        }
    )


@dataclass
class Round:
    send_seconds: float | None  # None: the backend takes no events (Blindata)
    upload_seconds: float


@dataclass
class Row:
    backend: str
    setting: str
    events: int
    rounds: list[Round]

    def median(self, attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in self.rounds)


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _rounds(
    events: list[bytes],
    graph: LineageGraph,
    d: SyncDefinition,
    repeat: int,
    serve_fake: Callable[[], tuple[Any, Any]],
    open_catalog: Callable[[str, str], LedgerCatalog],
    arrived: Callable[[Any], int],
) -> list[Round]:
    """``repeat`` rounds; each times ``send`` and ``upload`` on a fresh fake, then checks that
    nothing failed and that ``arrived(fake)`` counts every event."""
    rounds = []
    for _ in range(repeat):
        seconds: dict[str, float] = {}
        for stage in ("send", "upload"):
            fake, server = serve_fake()
            with serve(server) as url, tempfile.TemporaryDirectory() as tmp:
                catalog = open_catalog(url, f"sqlite:///{tmp}/store.db")
                try:
                    if stage == "send":
                        seconds[stage], outcome = _timed(lambda c=catalog: c.send(events))
                    else:
                        seconds[stage], outcome = _timed(
                            lambda c=catalog: c.upload(graph, d, lambda: iter(events))
                        )
                finally:
                    catalog.close()
            assert not outcome.failed, outcome.failed[:3]
            assert arrived(fake) == len(events), (stage, arrived(fake))
        rounds.append(Round(seconds["send"], seconds["upload"]))
    return rounds


def bench_marquez(
    events: list[bytes], graph: LineageGraph, d: SyncDefinition, args: argparse.Namespace
) -> Row:
    def fake() -> tuple[MarquezFake, Any]:
        f = MarquezFake()
        return f, f.server

    def catalog(url: str, store_url: str) -> LedgerCatalog:
        cfg = MarquezCatalogSettings(url=url, concurrency=args.concurrency)
        return MarquezCatalog("main", cfg, store_url=store_url, definition=d.name)

    rounds = _rounds(events, graph, d, args.repeat, fake, catalog, lambda f: len(f.visible_jobs()))
    return Row("marquez", f"concurrency {args.concurrency}", len(events), rounds)


def bench_openmetadata(
    events: list[bytes], graph: LineageGraph, d: SyncDefinition, args: argparse.Namespace
) -> Row:
    os.environ[TOKEN_ENV] = TOKEN

    def fake() -> tuple[OpenMetadataFake, Any]:
        f = OpenMetadataFake(
            generation=2,
            tokens={TOKEN: {EDIT_LINEAGE, CREATE}},
            mapping={WAREHOUSE: SERVICE},
            services={SERVICE: ["shop"]},
        )
        return f, f.server

    def catalog(url: str, store_url: str) -> LedgerCatalog:
        cfg = OpenMetadataCatalogSettings.model_validate(
            {
                "kind": "openmetadata",
                "url": url,
                "token": {"env": TOKEN_ENV},
                "chunkSize": args.chunk_size,
                "serviceMapping": {WAREHOUSE: SERVICE},
            }
        )
        return OpenMetadataCatalog("main", cfg, store_url=store_url, definition=d.name)

    rounds = _rounds(events, graph, d, args.repeat, fake, catalog, lambda f: len(f.edges))
    return Row("openmetadata", f"chunkSize {args.chunk_size}", len(events), rounds)


def bench_blindata(
    events: list[bytes], graph: LineageGraph, d: SyncDefinition, args: argparse.Namespace
) -> Row:
    tenant, key_env = "bench-tenant", "OL_BENCH_BLINDATA_APIKEY"
    os.environ[key_env] = "bench-api-key"
    rounds = []
    for _ in range(args.repeat):
        fake = BlindataFake(FakeClock(start=None))  # the real time
        fake.add_user("ol-dagster", tenant=tenant, api_key=os.environ[key_env])
        with serve_in_background(fake.app, date_header=False) as url:  # type: ignore[arg-type]
            cfg = BlindataCatalogSettings.model_validate(
                {
                    "kind": "blindata",
                    "url": url,
                    "tenant": tenant,
                    "apiKey": {"env": key_env},
                    "concurrency": args.concurrency,
                }
            )
            catalog = BlindataCatalog("main", cfg, store_url="", definition=d.name)
            try:
                seconds, result = _timed(lambda c=catalog: c.upload(graph, d))
            finally:
                catalog.close()
        assert result.succeeded, result.failed[:3]
        arrived = len(fake.entities(tenant, system=d.job_system))
        assert arrived == len(events), arrived
        rounds.append(Round(None, seconds))
    return Row("blindata", f"concurrency {args.concurrency}", len(events), rounds)


BACKENDS: dict[
    str, Callable[[list[bytes], LineageGraph, SyncDefinition, argparse.Namespace], Row]
] = {
    "marquez": bench_marquez,
    "openmetadata": bench_openmetadata,
    "blindata": bench_blindata,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--columns", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8, help="Marquez/Blindata pool size")
    parser.add_argument("--chunk-size", type=int, default=100, help="OpenMetadata events/request")
    parser.add_argument("--only", choices=sorted(BACKENDS), action="append")
    args = parser.parse_args()

    events = make_events(args.events, args.columns)
    d = definition()
    graph = build_graph(events, d)
    rows = [BACKENDS[name](events, graph, d, args) for name in (args.only or BACKENDS)]

    print(
        f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; "
        f"{args.events} events, {args.columns}-column schemas, median of {args.repeat} round(s)\n"
    )
    print(
        "| backend | setting | events | send (s) | send events/s | upload (s) | upload events/s |"
    )
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        upload = row.median("upload_seconds")
        if any(r.send_seconds is None for r in row.rounds):
            sent = "– | –"
        else:
            send = row.median("send_seconds")
            sent = f"{send:.3f} | {row.events / send:,.0f}"
        print(
            f"| {row.backend} | {row.setting} | {row.events} | {sent} | "
            f"{upload:.3f} | {row.events / upload:,.0f} |"
        )


if __name__ == "__main__":
    main()
