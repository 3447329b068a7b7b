"""What one ``ol-dagster sync`` costs besides the sync itself: the fixed seconds per run and the
Dagster bookkeeping per synced job.

Users run ``ol-dagster sync`` (or the sensor's run worker): a new process that imports Dagster,
opens the instance in ``DAGSTER_HOME``, loads the definitions and runs the sync job with
``execute_in_process``, storing every Dagster event in the instance's event log. The stage
benchmarks (``run_all.py``) time the sync's own work outside Dagster; this one times the real
command, on a file-backed SQLite instance (``dagster.yaml`` of the project copied into a fresh
``DAGSTER_HOME``, as ``make demo`` does), and says where its time goes.

For each batch size (default 10 and 1,000 events; ``benchmarks/upload.py``'s dbt-like models, one
job per event, a whole snapshot per batch), in a fresh project (SQLite store and embedded
catalog, one BATCH_SNAPSHOT definition):

1. a warm-up sync (the instance's schema created, files cached, ``.pyc`` written), not counted;
2. ``--repeat`` times: a batch posted to the real receiver (in process, not timed), then
   ``ol-dagster --settings ... sync`` run as a subprocess: its wall and CPU seconds are the
   headline figures (CPU because the machine may be shared: wall time then varies twofold);
3. ``--repeat`` times: a batch posted, then ``ol_dagster.commands.cli.main([... "sync"])`` run in an
   instrumented child (this file with ``--child``), which takes the CPU seconds of the phases
   (the wall seconds of a phase are the machine's load as much as its work): imports, instance,
   definitions, ``execute_in_process`` and within it the event-log writes (rows and seconds, by
   event type), the sync's own work (``upload_batch``, ``cleanup_batch``, normalization, the
   lineage state) and the bookkeeping of the synced jobs' runs (before issue 14:
   ``_observe_runs``, one runless observation per job; after: the runs table on
   ``catalog_upload`` and the jobs' last runs kept in the store for their asset pages).
   Interpreter start and exit are the child's CPU time minus what it timed inside.

``--code A,B`` compares project trees (for example a checkout before and after a change): each
syncs its own batches in the same project and instance, taking turns, so both see the same load.
The trees must share the event store's schema.

Medians of the repeats are printed. "Dagster per job" is the marginal cost between the smallest
and the largest size of what is not the sync's own work (``execute_in_process`` minus the sync's
work), per job; "bookkeeping per job" is the runs bookkeeping's own cost per job.

Goals (issue 14): a 10-event sync <= 4 s warm; Dagster cost per synced job <= 0.1 ms.

Usage: ``.venv/bin/python benchmarks/sync_fixed_cost.py [--sizes 10,1000,10000] [--repeat 3]
[--code TREE,TREE] [--profile DIR]`` (``--profile`` writes a cProfile of each instrumented child
to DIR and prints the top functions of the first).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BIN = Path(sys.executable).parent
DEFINITION = "bench"
TOKEN_ENV = "OL_BENCH_TOKEN"
# The sync's own work, timed apart from Dagster: names looked up in ``ol_dagster.defs.assets``
# (the asset bodies call them through the module, so wrapping the module attribute sees every
# call). Names a version of the code does not have are skipped.
SYNC_WORK = (
    "upload_batch",
    "cleanup_batch",
    "build_graph",
    "batch_graph",
    "refresh_lineage_state",
    "_log_events",
)
# The bookkeeping of the synced jobs' runs, before and after issue 14.
BOOKKEEPING = ("_observe_runs", "batch_job_runs", "job_runs_metadata", "remember_job_runs")


def settings_yaml(tmp: Path) -> str:
    settings = {
        "store": {"url": f"sqlite:///{tmp / 'store.db'}"},
        "catalogs": {"main": {"kind": "embedded", "url": f"sqlite:///{tmp / 'catalog.db'}"}},
        "definitions": [
            {
                "name": DEFINITION,
                "uuid": "55555555-5555-4555-8555-555555555555",
                "catalog": "main",
                "snapshotMode": "BATCH_SNAPSHOT",
                "allowedJobNamespaces": ["dbt"],
                "cleanup": {"maxRemovalsPerRun": 10**9},
                "limits": {"maxEventsPerRun": 100_000, "maxEventsPerBatch": 100_000},
                "receiver": {"token": {"env": TOKEN_ENV}},
            }
        ],
    }
    return json.dumps(settings)  # JSON is YAML


def post_snapshot(settings: Path, events: int, day: int) -> None:
    """One whole snapshot of ``events`` dbt-like models through the real receiver (in process)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from starlette.testclient import TestClient
    from upload import model_event  # benchmarks/upload.py: the dbt-like snapshot generator

    from ol_dagster.receiver.app import create_app
    from ol_dagster.settings import load_settings
    from ol_dagster.store import EventStore

    loaded = load_settings(str(settings))
    store = EventStore(loaded.store.url)
    try:
        start = datetime(2026, 11, 1, 2, 0, tzinfo=UTC) + timedelta(days=day)
        parent = str(uuid.uuid4())
        body = {"events": [model_event(i, start, parent) for i in range(events)]}
        client = TestClient(create_app(loaded, store))
        r = client.post(
            "/api/v1/lineage/batch",
            json=body,
            headers={"Authorization": f"Bearer {os.environ[TOKEN_ENV]}"},
        )
        assert r.status_code == 200 and r.json()["summary"]["accepted"] == events, r.text
    finally:
        store.dispose()


def _cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def run_command(settings: Path, env: dict[str, str]) -> tuple[float, float]:
    """``ol-dagster sync`` as a user runs it: (wall seconds, CPU seconds)."""
    start, cpu = time.perf_counter(), _cpu()
    out = subprocess.run(
        [str(BIN / "ol-dagster"), "--settings", str(settings), "sync"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall, cpu = time.perf_counter() - start, _cpu() - cpu
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    if out.returncode != 0 or not lines or any(x["status"] != "synced" for x in lines):
        raise SystemExit(f"ol-dagster sync failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return wall, cpu


def run_child(
    code: Path, settings: Path, env: dict[str, str], profile: Path | None
) -> dict[str, Any]:
    cmd = [sys.executable, str(code / "benchmarks" / Path(__file__).name), "--child", str(settings)]
    if profile:
        cmd += ["--profile", str(profile)]
    start, cpu = time.perf_counter(), _cpu()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall, cpu = time.perf_counter() - start, _cpu() - cpu
    if out.returncode != 0:
        raise SystemExit(f"instrumented sync failed:\n{out.stdout}\n{out.stderr}")
    phases = json.loads(out.stdout.splitlines()[-1])
    phases["wall"] = wall
    phases["cpu"] = cpu
    phases["interpreter"] = cpu - phases.pop("inside")
    return phases


# -- the instrumented child ----------------------------------------------------------------------


class Timer:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.active: list[str] = []

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        self.calls[name] = self.calls.get(name, 0) + 1

    def wrap(self, owner: Any, attr: str, name: str) -> None:
        fn = getattr(owner, attr, None)
        if fn is None:
            return
        timer = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            timer.active.append(name)
            start = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                timer.add(name, time.process_time() - start)
                timer.active.pop()

        setattr(owner, attr, timed)


def child(settings: str, profile: str | None) -> None:
    """``ol-dagster sync`` itself (``ol_dagster.commands.cli.main``), timed from inside: the
    phases are marked by wrapping what the command calls, installed the moment
    ``ol_dagster.commands.headless`` is first imported (by the command, lazily), so the command
    runs as it does for a user."""
    t0 = time.process_time()
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    timer = Timer()
    marks: dict[str, float] = {}
    rows: dict[str, int] = {}
    row_seconds: dict[str, float] = {}
    jobs = [0]

    def instrument(headless: Any) -> None:
        import dagster as dg

        import ol_dagster.defs.assets as assets

        timer.wrap(headless, "build_defs", "definitions")
        timer.wrap(dg.JobDefinition, "execute_in_process", "execute_in_process")
        for name in SYNC_WORK:
            timer.wrap(assets, name, "sync work")
        for name in BOOKKEEPING:
            timer.wrap(assets, name, "bookkeeping")
        open_instance = headless.instance_from_env
        sync_batches = headless.sync_batches

        def timed_instance(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            instance = open_instance(*args, **kwargs)
            marks["instance"] = time.process_time() - start
            storage = instance.event_log_storage
            store_event = storage.store_event

            def timed_store(event: Any) -> Any:
                start = time.process_time()
                try:
                    return store_event(event)
                finally:
                    took = time.process_time() - start
                    kind = event.dagster_event.event_type_value if event.dagster_event else "LOG"
                    rows[kind] = rows.get(kind, 0) + 1
                    row_seconds[kind] = row_seconds.get(kind, 0.0) + took
                    if "bookkeeping" in timer.active:
                        timer.add("bookkeeping event-log writes", took)

            storage.store_event = timed_store
            return instance

        def counted_sync(*args: Any, **kwargs: Any) -> Any:
            marks["sync start"] = time.process_time()
            for line in sync_batches(*args, **kwargs):
                if line["status"] == "synced":
                    jobs[0] += int(os.environ["OL_BENCH_EVENTS"])  # one job per event
                yield line
            marks["sync end"] = time.process_time()

        headless.instance_from_env = timed_instance
        headless.sync_batches = counted_sync

    import builtins

    real_import = builtins.__import__

    def hooked_import(name: str, *args: Any, **kwargs: Any) -> Any:
        module = real_import(name, *args, **kwargs)
        if name == "ol_dagster.commands.headless" and "imports" not in marks:
            marks["imports"] = time.process_time() - t0
            instrument(sys.modules[name])
        return module

    builtins.__import__ = hooked_import
    from ol_dagster.commands.cli import main

    code = main(["--settings", settings, "sync"])
    t_end = time.process_time()
    builtins.__import__ = real_import
    if prof is not None:
        prof.disable()
        prof.dump_stats(profile)  # type: ignore[arg-type]
    if code != 0:
        raise SystemExit(f"ol-dagster sync exited {code}")
    out = {
        "imports": marks["imports"],
        "instance": marks["instance"],
        "definitions": timer.seconds.get("definitions", 0.0),
        "execute_in_process": timer.seconds.get("execute_in_process", 0.0),
        "event-log rows": sum(rows.values()),
        "event-log writes": sum(row_seconds.values()),
        "sync work": timer.seconds.get("sync work", 0.0),
        "bookkeeping": timer.seconds.get("bookkeeping", 0.0),
        "bookkeeping event-log writes": timer.seconds.get("bookkeeping event-log writes", 0.0),
        "rows by type": rows,
        "jobs": jobs[0],
    }
    # sealing, partitions, the store, printing
    out["rest of sync"] = (
        marks["sync end"] - marks["sync start"] - out["definitions"] - out["execute_in_process"]
    )
    out["inside"] = t_end - t0
    print(json.dumps(out))


# -- the driver ----------------------------------------------------------------------------------


def median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def measure(
    size: int, codes: list[Path], repeat: int, profile_dir: Path | None
) -> list[dict[str, Any]]:
    """One project per size; each code tree syncs its own batches, the trees taking turns so
    that they share the machine's load."""
    tmp = Path(tempfile.mkdtemp(prefix=f"ol_sync_{size}_"))
    try:
        settings = tmp / "ol_dagster.yaml"
        settings.write_text(settings_yaml(tmp))
        home = tmp / "dagster_home"
        home.mkdir()
        shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
        envs = [
            {
                **os.environ,
                "DAGSTER_HOME": str(home),
                "OL_BENCH_EVENTS": str(size),
                # this code tree's ``ol_dagster``, whichever copy of the project is installed
                "PYTHONPATH": os.pathsep.join([str(code), os.environ.get("PYTHONPATH", "")]),
            }
            for code in codes
        ]
        day = 0
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from run_all import compile_package

        for code in codes:  # bytecode as an installed copy has it, whatever the environment says
            compile_package(code)
        for env in envs:  # warm-up: the instance's schema, the file cache
            post_snapshot(settings, size, day)
            run_command(settings, env)
            day += 1
        results = [
            {"size": size, "code": str(code), "commands": [], "children": []} for code in codes
        ]
        for _ in range(repeat):
            for env, result in zip(envs, results, strict=True):
                post_snapshot(settings, size, day)
                result["commands"].append(run_command(settings, env))
                day += 1
        for i in range(repeat):
            for n, (code, env, result) in enumerate(zip(codes, envs, results, strict=True)):
                post_snapshot(settings, size, day)
                profile = profile_dir / f"sync_{size}_{n}_{i}.prof" if profile_dir else None
                result["children"].append(run_child(code, settings, env, profile))
                day += 1
        for result in results:
            result["command"] = statistics.median(w for w, _ in result["commands"])
            result["command cpu"] = statistics.median(c for _, c in result["commands"])
        return results
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(results: list[dict[str, Any]]) -> str:
    keys = [
        "wall",
        "cpu",
        "interpreter",
        "imports",
        "instance",
        "definitions",
        "rest of sync",
        "execute_in_process",
        "event-log writes",
        "sync work",
        "bookkeeping",
        "bookkeeping event-log writes",
    ]
    codes = sorted({r["code"] for r in results}, key=[r["code"] for r in results].index)
    label = {c: f"code {i + 1}" if len(codes) > 1 else "" for i, c in enumerate(codes)}
    out = [f"code {i + 1}: {c}" for i, c in enumerate(codes)] if len(codes) > 1 else []
    head = "| | " + " | ".join(f"{r['size']:,} events {label[r['code']]}" for r in results) + " |"
    lines = [*out, "", head, "|---|" + "---|" * len(results)]
    lines.append(
        "| `ol-dagster sync` wall (s, median) | "
        + " | ".join(f"{r['command']:.2f}" for r in results)
        + " |"
    )
    lines.append(
        "| `ol-dagster sync` CPU (s, median) | "
        + " | ".join(f"{r['command cpu']:.2f}" for r in results)
        + " |"
    )
    lines.append(
        "| instrumented run, CPU seconds of each phase (median): | "
        + " | ".join("" for _ in results)
        + " |"
    )
    for key in keys:
        cells = [f"{median(r['children'], key):.3f}" for r in results]
        lines.append(f"| {key} (s) | " + " | ".join(cells) + " |")
    for key in ("event-log rows", "jobs"):
        cells = [f"{median(r['children'], key):.0f}" for r in results]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    per_job = []
    for r in results:
        jobs = median(r["children"], "jobs")
        own = median(r["children"], "bookkeeping")
        per_job.append(f"{1000 * own / jobs:.4f}" if jobs else "-")
    lines.append("| bookkeeping per job (ms) | " + " | ".join(per_job) + " |")
    lines.append("")
    for code in codes:
        mine = [r for r in results if r["code"] == code]
        rows = mine[0]["children"][0]["rows by type"]
        lines.append(
            f"event-log rows of a {mine[0]['size']}-event sync {label[code]}: "
            + ", ".join(f"{k} {v}" for k, v in sorted(rows.items()))
        )
        if len(mine) > 1:
            lo, hi = mine[0], mine[-1]

            def dagster(r: dict[str, Any]) -> float:
                return median(r["children"], "execute_in_process") - median(
                    r["children"], "sync work"
                )

            jobs = median(hi["children"], "jobs") - median(lo["children"], "jobs")
            if jobs:
                lines.append(
                    f"Dagster per job {label[code]}, marginal {lo['size']:,} -> {hi['size']:,} "
                    "events (execute_in_process minus the sync's work): "
                    f"{1000 * (dagster(hi) - dagster(lo)) / jobs:.4f} ms"
                )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="10,1000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--code",
        default=str(ROOT),
        help="comma-separated project trees to compare, taking turns (default: this one); "
        "they must share the event store's schema",
    )
    parser.add_argument("--profile", help="directory for cProfile dumps (driver) / file (child)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.profile)
        return
    os.environ.setdefault(TOKEN_ENV, uuid.uuid4().hex)
    profile_dir = Path(args.profile).resolve() if args.profile else None
    if profile_dir:
        profile_dir.mkdir(parents=True, exist_ok=True)
    codes = [Path(c).resolve() for c in args.code.split(",")]
    results: list[dict[str, Any]] = []
    for size in (int(s) for s in args.sizes.split(",")):
        results += measure(size, codes, args.repeat, profile_dir)
        print(f"{size:,} events done", file=sys.stderr)
    results.sort(key=lambda r: [str(c) for c in codes].index(r["code"]))
    print(report(results))
    if profile_dir:
        import pstats

        for size in args.sizes.split(","):
            for n in range(len(codes)):
                path = profile_dir / f"sync_{size}_{n}_0.prof"
                print(f"\n## cProfile of the {size}-event sync, code {n + 1} (top 30, cumulative)")
                pstats.Stats(str(path)).sort_stats("cumulative").print_stats(30)


if __name__ == "__main__":
    main()
