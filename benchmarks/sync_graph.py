"""How often one sync normalizes and reads its events, and what the graph steps cost.

Issue 14 item 4: the ``lineage_graph`` asset built the graph, ``catalog_upload`` built it again,
and the event-taking catalogs read the events a third time. This runs ``headless.sync_batches``
(what ``ol-dagster sync`` runs: the sync job through ``execute_in_process`` on a file-backed
SQLite instance) on one posted whole-snapshot batch of ``benchmarks/upload.py``'s dbt-like events
into the embedded catalog, and reports per size:

- normalizations (calls of ``lineage.normalize``) and the seconds spent in them;
- raw events read back from the event store (rows of ``iter_events``, ``events_by_id``);
- the wall seconds of each step (the instance's step stats), and the wall and CPU seconds of the
  whole ``sync_batches`` (CPU seconds are less disturbed by a shared machine).

The counters wrap the store's and normalizer's functions in this process only (a measuring
instrument, not a test).

Usage: ``.venv/bin/python benchmarks/sync_graph.py [--sizes 1000,10000]``
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

DEFINITION = "bench"
WAREHOUSE = "postgres://warehouse.internal:5432"


def settings(workdir: Path) -> Path:
    data = {
        "store": {"url": f"sqlite:///{workdir / 'store.db'}"},
        "catalogs": {"main": {"kind": "embedded", "url": f"sqlite:///{workdir / 'catalog.db'}"}},
        "definitions": [
            {
                "name": DEFINITION,
                "uuid": "55555555-5555-4555-8555-555555555555",
                "catalog": "main",
                "snapshotMode": "BATCH_SNAPSHOT",
                "allowedJobNamespaces": ["dbt"],
                "datasetSystems": [
                    {"namespace": WAREHOUSE, "system": "warehouse", "cleanupMode": "CUTOFF"}
                ],
                "cleanup": {"maxRemovalsPerRun": 10**9},
                "limits": {"maxEventsPerBatch": 100_000},
                "receiver": {"token": {"env": "OL_BENCH_TOKEN"}},
            }
        ],
    }
    path = workdir / "ol_dagster.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


class Counters:
    def __init__(self) -> None:
        self.normalizations = 0
        self.normalize_seconds = 0.0
        self.events_read = 0

    def install(self) -> None:
        import ol_dagster.lineage  # noqa: F401 - the package's ``normalize`` hides the module
        from ol_dagster.store import EventStore

        norm = sys.modules["ol_dagster.lineage.normalize"]

        inner = norm._normalize

        @functools.wraps(inner)
        def counted_normalize(*args: Any, **kwargs: Any) -> Any:
            self.normalizations += 1
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.normalize_seconds += time.perf_counter() - t0

        norm._normalize = counted_normalize  # type: ignore[assignment]

        # the reads of raw events (``earlier_run_events`` before the graph was stored,
        # ``events_by_id`` after)
        for name in ("iter_events", "earlier_run_events", "events_by_id"):
            original = getattr(EventStore, name, None)
            if original is None:
                continue

            def counted(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
                for item in _original(*args, **kwargs):
                    self.events_read += 1
                    yield item

            setattr(EventStore, name, counted)


def run(n: int) -> dict[str, Any]:
    import dagster as dg
    from upload import model_event  # benchmarks/upload.py: the dbt-like snapshot generator

    from ol_dagster.commands.headless import sync_batches
    from ol_dagster.receiver.intake import sort_events
    from ol_dagster.settings import load_settings
    from ol_dagster.store import EventStore

    with tempfile.TemporaryDirectory(prefix="ol-sync-graph-") as tmp:
        workdir = Path(tmp)
        path = settings(workdir)
        start = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
        parent = str(uuid.uuid4())
        docs = [orjson.loads(orjson.dumps(model_event(i, start, parent))) for i in range(n)]
        intake = sort_events(docs, ["dbt"])
        assert not intake.rejected, intake.rejected[:3]
        store = EventStore(load_settings(path).store.url)
        batch_id = store.add_posted_batch(DEFINITION, intake.accepted, received=n, snapshot=True)
        raw_bytes = sum(len(e.raw) for e in intake.accepted)
        store.dispose()
        home = workdir / "dagster_home"
        home.mkdir()
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        os.environ["DAGSTER_HOME"] = str(home)
        counters = Counters()
        counters.install()
        with dg.DagsterInstance.get() as instance:
            t0, c0 = time.perf_counter(), time.process_time()
            lines = list(sync_batches(str(path), instance=instance))
            seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
            (line,) = lines
            assert line["batchId"] == batch_id and line["status"] == "synced", line
            steps = {
                s.step_key: (s.end_time or 0) - (s.start_time or 0)
                for s in instance.get_run_step_stats(line["runId"])
            }
    return {
        "events": n,
        "eventBytes": raw_bytes,
        "normalizations": counters.normalizations,
        "normalizeSeconds": round(counters.normalize_seconds, 2),
        "eventsReadFromStore": counters.events_read,
        "steps": {k: round(v, 2) for k, v in steps.items()},
        "syncSeconds": round(seconds, 2),
        "syncCpuSeconds": round(cpu, 2),
        "upload": line["upload"].get("written"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a size, in this process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run(args.one)))
        return
    import subprocess

    for size in (int(s) for s in args.sizes.split(",")):
        cmd = [sys.executable, __file__, "--one", str(size)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        print(out.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
