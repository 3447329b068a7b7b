"""How long the code location takes to load with a large synced lineage state.

Writes a state of N jobs (each reading one table and writing the next, with 10 columns and column
lineage) into a temporary store, then times ``build_defs`` and ``resolve_asset_graph`` (what the
webserver and every run worker pay at load).
Run: .venv/bin/python benchmarks/lineage_load.py [--jobs N]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import yaml

from ol_dagster.definitions import build_defs
from ol_dagster.store import EventStore


def state(n: int) -> dict:
    cols = [f"c{i}" for i in range(10)]
    return {
        "version": 1,
        "jobs": [
            {
                "namespace": "etl",
                "name": f"job_{i}",
                "integration": "DBT",
                "owners": ["team:data"],
                "inputs": [["postgres://db:5432", f"w.s.t_{i}"]],
                "outputs": [["postgres://db:5432", f"w.s.t_{i + 1}"]],
            }
            for i in range(n)
        ],
        "datasets": [
            {
                "namespace": "postgres://db:5432",
                "name": f"w.s.t_{i}",
                "type": "table",
                "system": "pg",
                "fields": [{"name": c, "type": "INT"} for c in cols],
            }
            for i in range(n + 1)
        ],
        "parents": [],
        "columnLineage": [
            {
                "dataset": ["postgres://db:5432", f"w.s.t_{i + 1}"],
                "field": c,
                "inputs": [["postgres://db:5432", f"w.s.t_{i}", c]],
            }
            for i in range(n)
            for c in cols
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=15_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ol_dagster.yaml"
        path.write_text(
            yaml.safe_dump(
                {
                    "store": {"url": f"sqlite:///{tmp}/store.db"},
                    "catalogs": {
                        "main": {"kind": "embedded", "url": f"sqlite:///{tmp}/catalog.db"}
                    },
                    "definitions": [
                        {
                            "name": "big",
                            "uuid": "33333333-3333-4333-8333-333333333333",
                            "catalog": "main",
                            "receiver": {"token": {"env": "T"}},
                        }
                    ],
                }
            )
        )
        store = EventStore(f"sqlite:///{tmp}/store.db")
        store.save_lineage_state("big", state(args.jobs))
        store.dispose()
        t0 = time.perf_counter()
        defs = build_defs(str(path))
        t1 = time.perf_counter()
        graph = defs.resolve_asset_graph()
        t2 = time.perf_counter()
        nodes = len(graph.get_all_asset_keys())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("| jobs | asset nodes | build_defs s | resolve_asset_graph s | peak RSS MiB |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {args.jobs:,} | {nodes:,} | {t1 - t0:.2f} | {t2 - t1:.2f} | {rss:.0f} |")


if __name__ == "__main__":
    main()
