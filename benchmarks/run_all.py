"""The whole path under load: first the real path (``real_path.py``: POST → ``ol-dagster sync``
done, the daemon path, the code location's load), then its breakdown into the stages (receive,
normalize, upload, cleanup and end to end), in one command.

The real-path rows come first because they are what a user waits for: the stages below time each
stage in a bare process, without Python start-up, the Dagster instance, the code location or the
run. See ``real_path.py`` for exactly what its rows time; ``--no-real-path`` leaves them out.

For each snapshot size (default 1,000, 10,000 and 100,000 events) and each store/catalog backend
(SQLite files, and with ``--postgres`` a throwaway PostgreSQL server, ``ol_dagster_tests.postgres``,
fsync off), two snapshots of generated dbt-like events (``benchmarks/upload.py``'s generator: one
model per event, a 10-column schema on every input and output, column lineage for each column,
the model's SQL, a parent run facet and a quality assertion on every tenth model; ~5.9 KB an event)
go through the stages a sync runs:

1. **receive**: the snapshot posted to the real receiver (uvicorn, one worker, loopback) in
   requests of 1,000 events to ``/api/v1/lineage/batch`` (sequential, keep-alive, by a client in
   its own process); timed from the first request to the last answer; every answer is checked
   (200, all accepted). Each post is stored as a batch;
2. **normalize**: ``build_graph`` of ``store.iter_events`` of those batches, in order (the
   snapshot); the graph is checked (every job, no skipped event, no dangling flow);
3. **upload**: ``upload_graph`` of that graph into the embedded catalog (clock read + upload); the
   first snapshot writes every row; the second writes the edited jobs' new rows (at least their
   new data and field flows) and touches every other row it describes.
   The graph is built in the same process first, as the ``catalog_upload`` asset does (not
   timed), and the peak RSS is reset after it (Linux ``clear_refs``): the figure is the upload's
   peak with its graph in memory;
4. **cleanup**: ``run_cleanup`` of the snapshot (dry runs, cap, real calls). The second snapshot
   (a day later, new run ids) drops 1% of the jobs: exactly those are removed, with their flows,
   routines and tables; and edits another 1% (new SQL, one more input), which removes nothing.

Every stage runs in a fresh subprocess, so the peak RSS (``ru_maxrss``) is that stage's own: the
receiver's is the server process's. The subprocesses are forked (a ``preexec_fn``): spawned with
vfork, a child reports this process's peak as its own. End to end is the sum of the four stage
times of one snapshot, its peak the largest stage peak. Beside each figure: ``orjson.loads`` of
the same event bytes, one event at a time, measured in the same run (parse-only events/s), and
the ratio to it. CPU seconds are the stage process's (the receiver's while it served the posts):
the machine these run on may be shared, and CPU time is less disturbed by that than wall time.

Goals (issue 8): end to end at least 1/5 of parse-only; peak RSS under 2x the batch bytes + 300 MB;
receiver at least 5,000 events/s in 1,000-event batches on one worker.

The Markdown table is printed and written to ``benchmarks/results/latest.md``.

Usage: ``.venv/bin/python benchmarks/run_all.py [--sizes 1000,10000,100000] [--postgres] [--quick]
[--profile STAGE] [--real-sizes 10,1000,10000] [--daemon] [--load-jobs 10000,100000]
[--no-real-path] [--no-stages]`` (``--profile normalize`` etc. writes a cProfile of that stage per
size and prints its top functions; the real path runs at 10 events and the stage sizes unless
``--real-sizes`` says otherwise).
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import cProfile
import io
import json
import os
import platform
import pstats
import resource
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

TOKEN_ENV = "OL_BENCH_TOKEN"
DEFINITION = "bench"
JOB_NAMESPACE = "dbt"
WAREHOUSE = "postgres://warehouse.internal:5432"
REQUEST_EVENTS = 1000
DROP_EVERY = 100  # the second snapshot drops every 100th job: 1%
DEFAULT_SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (1_000, 10_000)
RESULTS = ROOT / "benchmarks" / "results"
STAGE_NAMES = ("receive", "normalize", "upload", "cleanup")
COLUMNS = 10  # benchmarks/upload.py: columns per table
# rows an edited model may rewrite: its ~32 catalog rows (job, datasets, fields, flows, routine,
# statement) with room for the new flows; a second upload writing more rewrote unchanged jobs
EDITED_ROWS_BOUND = 64


# -- the workload --------------------------------------------------------------------------------


def dropped_jobs(n: int) -> set[int]:
    return {i for i in range(n) if i % DROP_EVERY == DROP_EVERY // 3}


def edited_jobs(n: int) -> set[int]:
    """The second snapshot's changed models: a job that only loses its neighbours would let a
    sync that never looks at content pass, so 1% of the jobs also change what they say."""
    return {i for i in range(n) if i % DROP_EVERY == 2 * DROP_EVERY // 3}


def edit(
    event: dict[str, Any],
    i: int,
    described: Callable[[str], dict[str, Any]] | None = None,
    column_of: Callable[[str, str], str] | None = None,
) -> dict[str, Any]:
    """Model i edited: a new line in its SQL and one more input (a source table, with its
    schema and a column-lineage edge into each of the model's columns), so the catalog gains a
    data flow and field flows it cannot merely touch. ``described``: the source's dataset as the
    profile describes one (default: this workload's, ``upload._schema``); ``column_of``: the
    source's column a model's column comes from (default: the one of the same name), so that
    every edge names a column the source has."""
    from upload import SOURCES, WAREHOUSE, _schema

    source = f"raw.src_{(i + 7) % SOURCES:04d}"
    job = event["job"]["facets"]
    job["sql"]["query"] += f"\nunion all select * from {source}"
    event["inputs"].append(
        described(source)
        if described is not None
        else {"namespace": WAREHOUSE, "name": f"wh.{source}", "facets": {"schema": _schema(source)}}
    )
    for column, lineage in event["outputs"][0]["facets"]["columnLineage"]["fields"].items():
        lineage["inputFields"].append(
            {
                "namespace": WAREHOUSE,
                "name": f"wh.{source}",
                "field": column_of(source, column) if column_of is not None else column,
                "transformations": [{"type": "DIRECT", "subtype": "TRANSFORMATION"}],
            }
        )
    return event


def job_label(i: int) -> str:
    return f"{JOB_NAMESPACE}.analytics.m_{i:05d}"


def generate(n: int, snapshot: int, path: Path) -> tuple[int, int]:
    """Write the snapshot's events, one JSON document a line; returns (events, bytes)."""
    from upload import model_event  # benchmarks/upload.py: the dbt-like snapshot generator

    start = datetime(2026, 11, 1, 2, 0, tzinfo=UTC) + timedelta(days=snapshot - 1)
    parent = str(uuid.uuid4())
    skip = dropped_jobs(n) if snapshot == 2 else set()
    edited = edited_jobs(n) if snapshot == 2 else set()
    count = size = 0
    with path.open("wb") as f:
        for i in range(n):
            if i in skip:
                continue
            event = model_event(i, start, parent)
            raw = orjson.dumps(edit(event, i) if i in edited else event)
            f.write(raw + b"\n")
            count += 1
            size += len(raw)
    return count, size


def read_events(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def bodies_of(events: list[bytes]) -> list[tuple[int, bytes]]:
    return [
        (len(chunk), b'{"events":[' + b",".join(chunk) + b"]}")
        for chunk in (events[i : i + REQUEST_EVENTS] for i in range(0, len(events), REQUEST_EVENTS))
    ]


def settings_dict(store_url: str, catalog_url: str) -> dict[str, Any]:
    return {
        "store": {"url": store_url},
        "catalogs": {"main": {"kind": "embedded", "url": catalog_url}},
        "definitions": [
            {
                "name": DEFINITION,
                "uuid": "55555555-5555-4555-8555-555555555555",
                "catalog": "main",
                "snapshotMode": "BATCH_SNAPSHOT",
                "allowedJobNamespaces": [JOB_NAMESPACE],
                # the warehouse System is this definition's alone: its tables are cleaned by
                # cutoff too (the dropped models' tables that nothing reads any more go)
                "datasetSystems": [
                    {"namespace": WAREHOUSE, "system": "warehouse", "cleanupMode": "CUTOFF"}
                ],
                "cleanup": {"maxRemovalsPerRun": 10**9},
                "limits": {"maxEventsPerBatch": 100_000},
                "receiver": {"token": {"env": TOKEN_ENV}},
            }
        ],
    }


# -- measuring -----------------------------------------------------------------------------------


def peak_rss_mb() -> float:
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: KiB on Linux, bytes on macOS
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def best_of(
    repeat: int, fn: Callable[[], object], clock: Callable[[], float] = time.perf_counter
) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best


class Profiled:
    """cProfile around a block when asked; the stats go to ``path`` and a summary to stderr."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.profiler = cProfile.Profile() if path else None

    def __enter__(self) -> Profiled:
        if self.profiler:
            self.profiler.enable()
        return self

    def __exit__(self, *_: object) -> None:
        if self.profiler and self.path:
            self.profiler.disable()
            self.profiler.dump_stats(self.path)


def profile_summary(path: Path, top: int = 25) -> str:
    out = io.StringIO()
    stats = pstats.Stats(str(path), stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


# -- stages (each in its own subprocess) ----------------------------------------------------------


def _definition(cfg: dict[str, Any]):  # noqa: ANN202
    from ol_dagster.settings import parse_settings

    return parse_settings(settings_dict(cfg["store"], cfg["catalog"])).definition(DEFINITION)


def stage_parse(cfg: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """orjson.loads of the snapshot's event bytes, one event at a time (and per request body):
    wall and CPU time, each the best of three."""
    events = read_events(Path(args.events))
    bodies = [b for _, b in bodies_of(events)]
    loads = orjson.loads

    def per_event() -> None:
        for raw in events:
            loads(raw)

    def per_body() -> None:
        for body in bodies:
            loads(body)

    return {
        "events": len(events),
        "bytes": sum(map(len, events)),
        "seconds": best_of(3, per_event),
        # CPU time, to set beside a sync's CPU time on a machine shared with other work
        "cpu_seconds": best_of(3, per_event, time.process_time),
        "body_seconds": best_of(3, per_body),
    }


def stage_serve(cfg: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The receiver, one uvicorn worker on a loopback port, until "stop" arrives on stdin."""
    import uvicorn

    from ol_dagster.receiver.app import create_app
    from ol_dagster.settings import parse_settings
    from ol_dagster.store import EventStore

    settings = parse_settings(settings_dict(cfg["store"], cfg["catalog"]))
    store = EventStore(cfg["store"], background_checkpoints=True)  # as `ol-dagster serve`
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings, store),
            host="127.0.0.1",
            port=0,
            log_level="warning",
            access_log=False,
            lifespan="off",
        )
    )
    profiled = Profiled(Path(args.profile_to) if args.profile_to else None)

    def run() -> None:
        with profiled:
            server.run()

    thread = threading.Thread(target=run, name="receiver", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise SystemExit("the receiver did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    print(json.dumps({"url": f"http://127.0.0.1:{port}"}), flush=True)
    c0 = time.process_time()
    sys.stdin.readline()  # "stop"
    cpu = time.process_time() - c0  # serving the posts (this thread only waited)
    server.should_exit = True
    thread.join(timeout=60)
    store.dispose()
    return {"cpu": cpu}


def stage_post(cfg: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The producer: the snapshot in 1,000-event posts, one after the other (keep-alive). With
    ``--shard i/n`` it posts every n-th body from the i-th, after printing "ready" and reading
    "go" on stdin, so that several producers start together; times are then wall-clock."""
    import httpx

    bodies = bodies_of(read_events(Path(args.events)))
    shard, shards = (int(x) for x in (args.shard or "0/1").split("/"))
    bodies = bodies[shard::shards]
    headers = {
        "Authorization": f"Bearer {os.environ[TOKEN_ENV]}",
        "Content-Type": "application/json",
    }
    batch_ids: list[int] = []
    with httpx.Client(base_url=args.url, headers=headers, timeout=600) as client:
        client.get("/healthz").raise_for_status()  # connection up, not timed
        if args.shard:
            print("ready", flush=True)
            sys.stdin.readline()
        t0, w0 = time.perf_counter(), time.time()
        for count, body in bodies:
            resp = client.post("/api/v1/lineage/batch", content=body)
            answer = resp.json()
            if resp.status_code != 200 or answer["summary"]["accepted"] != count:
                raise SystemExit(f"receive: HTTP {resp.status_code}: {resp.text[:500]}")
            batch_ids.append(answer["batchId"])
        seconds, w1 = time.perf_counter() - t0, time.time()
    return {
        "seconds": seconds,
        "start": w0,
        "end": w1,
        "requests": len(bodies),
        "batch_ids": batch_ids,
    }


def post_concurrently(url: str, events_path: Path, producers: int) -> dict[str, Any]:
    """``producers`` producer processes posting their share of the snapshot at the same time."""
    procs = [
        subprocess.Popen(
            _stage_cmd("post", None, events=events_path, url=url, shard=f"{i}/{producers}"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(producers)
    ]
    try:
        for p in procs:
            assert p.stdout
            if p.stdout.readline().strip() != "ready":
                raise SystemExit(f"a producer did not start:\n{p.communicate()[1][-4000:]}")
        for p in procs:
            assert p.stdin
            p.stdin.write("go\n")
            p.stdin.flush()
        results = []
        for p in procs:
            out, err = p.communicate(timeout=3600)
            if p.returncode != 0:
                raise SystemExit(f"a producer failed ({p.returncode}):\n{err[-4000:]}")
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return {
        "seconds": max(r["end"] for r in results) - min(r["start"] for r in results),
        "requests": sum(r["requests"] for r in results),
        "batch_ids": sorted(b for r in results for b in r["batch_ids"]),
    }


def _snapshot_batches(cfg: dict[str, Any], args: argparse.Namespace) -> list[int]:
    return json.loads(Path(args.batches).read_text())


def _snapshot_graph(cfg: dict[str, Any], args: argparse.Namespace, definition: Any):  # noqa: ANN202
    """``build_graph`` of the snapshot's events as the assets call it: ``store.iter_events`` of
    its batches (the 1,000-event posts, in order)."""
    from ol_dagster.store import EventStore
    from ol_dagster.sync.upload import build_graph

    store = EventStore(cfg["store"])

    def raw_events() -> Iterator[bytes]:
        for batch_id in _snapshot_batches(cfg, args):
            for e in store.iter_events(batch_id):
                yield e.raw

    try:
        return build_graph(raw_events(), definition)
    finally:
        store.dispose()


def reset_peak_rss() -> None:
    """Start the peak RSS afresh from the current RSS (Linux: ``clear_refs``), if possible."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def stage_normalize(cfg: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    import ol_dagster.store
    import ol_dagster.sync.upload  # noqa: F401 - imported before the clock starts

    definition = _definition(cfg)
    with Profiled(Path(args.profile_to) if args.profile_to else None):
        t0, c0 = time.perf_counter(), time.process_time()
        graph = _snapshot_graph(cfg, args, definition)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss = peak_rss_mb()
    counts = graph.counts()
    problems = []
    if len(graph.jobs) != args.jobs + 1:  # the models and their dbt-run parent
        problems.append(f"{len(graph.jobs)} jobs, expected {args.jobs + 1}")
    if graph.skipped_events or graph.dangling:
        problems.append(f"skipped {graph.skipped_events[:2]}, dangling {len(graph.dangling)}")
    if problems:
        raise SystemExit("normalize: " + "; ".join(problems))
    return {"seconds": seconds, "cpu": cpu, "peak_rss_mb": rss, "counts": counts}


def _expected_rows(counts: dict[str, int]) -> dict[str, int]:
    return {
        "physicalEntities": counts["jobs"] + counts["datasets"],
        "physicalFields": counts["fields"],
        "routines": counts["routines"],
        "statements": counts["routines"],
        "dataFlows": counts["dataFlows"] + counts["fieldFlows"] + counts["orchestrationFlows"],
    }


def stage_upload(cfg: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
    from ol_dagster.sync.upload import graph_facts, upload_graph

    definition = _definition(cfg)
    # the graph is built in this process, as the catalog_upload asset does (not timed); the
    # peak RSS is then that of the upload with its graph in memory
    graph = _snapshot_graph(cfg, args, definition)
    catalog = EmbeddedCatalog(cfg["catalog"])
    reset_peak_rss()
    with Profiled(Path(args.profile_to) if args.profile_to else None):
        t0, c0 = time.perf_counter(), time.process_time()
        outcome = upload_graph(catalog, graph, definition)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss = peak_rss_mb()
    catalog.close()
    result = outcome.result
    want = _expected_rows(graph.counts())
    written = {k: v for k, v in result.written.items() if k in want}
    seen = {k: result.written.get(k, 0) + result.touched.get(k, 0) for k in want}
    problems = []
    if not result.succeeded:
        problems.append(f"failed rows: {result.failed[:3]}")
    if seen != want:
        problems.append(f"wrote+touched {seen}, expected {want}")
    if args.snapshot == 1 and written != want:
        problems.append(f"first upload wrote {written}, expected {want}")
    if args.snapshot == 2:
        # the edited models' new input is a data flow and a field flow per column that did not
        # exist: written, never touched; everything else the snapshot describes is unchanged
        edited = len(edited_jobs(args.jobs_total))
        if written.get("dataFlows", 0) < edited * (1 + COLUMNS):
            problems.append(f"second upload wrote {written}: the {edited} edited jobs' new flows")
        if sum(written.values()) > edited * EDITED_ROWS_BOUND:
            problems.append(f"second upload wrote {written}: more than the {edited} edited jobs")
    if problems:
        raise SystemExit("upload: " + "; ".join(problems))
    Path(args.outcome).write_text(
        json.dumps(
            {
                "cutoff": outcome.cutoff.isoformat(),
                "result": result.as_dict(),
                "graph": graph_facts(graph),
            }
        )
    )
    return {
        "seconds": seconds,
        "cpu": cpu,
        "peak_rss_mb": rss,
        "written": sum(result.written.values()),
        "touched": sum(result.touched.values()),
    }


def stage_cleanup(cfg: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
    from ol_dagster.sync.cleanup import BatchFacts, run_cleanup

    definition = _definition(cfg)
    upload = json.loads(Path(args.outcome).read_text())
    g = upload["graph"]
    facts = BatchFacts(
        posted=True,
        whole_snapshot=True,
        accepted=args.events_count,
        job_namespaces=g["jobNamespaces"],
        upload_succeeded=upload["result"]["succeeded"],
        dataset_systems=g["datasetSystems"],
        described_jobs=[tuple(j) for j in g["describedJobs"]],
        completed_jobs=[tuple(j) for j in g["completedJobs"]],
        jobs=g["jobs"],
        dropped=upload["result"]["dropped"],
    )
    catalog = EmbeddedCatalog(cfg["catalog"])
    with Profiled(Path(args.profile_to) if args.profile_to else None):
        t0, c0 = time.perf_counter(), time.process_time()
        report = run_cleanup(
            catalog, definition, facts, cutoff=datetime.fromisoformat(upload["cutoff"])
        )
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss = peak_rss_mb()
    catalog.close()
    expected = (
        sorted(job_label(i) for i in dropped_jobs(args.jobs_total)) if args.snapshot == 2 else []
    )
    if report["skippedReason"] is not None or report["removedJobs"] != expected:
        raise SystemExit(
            f"cleanup: skipped {report['skippedReason']}, removed {len(report['removedJobs'])} "
            f"jobs, expected {len(expected)}"
        )
    removed: dict[str, int] = {}
    for call in report["calls"]:
        for kind, k in (call["real"] or {}).items():
            removed[kind] = removed.get(kind, 0) + k
    return {"seconds": seconds, "cpu": cpu, "peak_rss_mb": rss, "removed": removed}


STAGES: dict[str, Callable[[dict[str, Any], argparse.Namespace], dict[str, Any]]] = {
    "parse": stage_parse,
    "serve": stage_serve,
    "post": stage_post,
    "normalize": stage_normalize,
    "upload": stage_upload,
    "cleanup": stage_cleanup,
}


def stage_main(args: argparse.Namespace) -> None:
    cfg = json.loads(Path(args.config).read_text()) if args.config else {}
    result = STAGES[args.stage](cfg, args)
    result.setdefault("peak_rss_mb", peak_rss_mb())
    print(json.dumps(result), flush=True)


# -- the orchestrator ----------------------------------------------------------------------------


def _fresh_process() -> None:
    """A ``preexec_fn`` makes subprocess fork instead of vfork: with vfork the child reports the
    parent's peak RSS as its own ``ru_maxrss`` (the kernel keeps the peak of the mm it leaves)."""


def _stage_cmd(stage: str, config: Path | None, **options: object) -> list[str]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--stage", stage]
    options = {"config": config, **options}
    for key, value in options.items():
        if value is not None:
            cmd += [f"--{key.replace('_', '-')}", str(value)]
    return cmd


def run_stage(stage: str, config: Path | None, **options: object) -> dict[str, Any]:
    proc = subprocess.run(
        _stage_cmd(stage, config, **options),
        capture_output=True,
        text=True,
        preexec_fn=_fresh_process,  # noqa: PLW1509 - no threads are running in this process
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"stage {stage} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def receive(
    config: Path, events_path: Path, profile: Path | None, producers: int = 1
) -> tuple[dict[str, Any], list]:
    """Start the receiver, post the snapshot from other processes (one producer, or several at
    once), stop the receiver; the time of the posts, the receiver's peak RSS and CPU time, and
    the batch ids."""
    proc = subprocess.Popen(
        _stage_cmd("serve", config, profile_to=profile),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_fresh_process,  # noqa: PLW1509
    )
    assert proc.stdin and proc.stdout and proc.stderr
    try:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"the receiver did not start:\n{proc.stderr.read()[-4000:]}")
        url = json.loads(line)["url"]
        if producers == 1:
            posted = run_stage("post", None, events=events_path, url=url)
        else:
            posted = post_concurrently(url, events_path, producers)
        proc.stdin.write("stop\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=120)
        if proc.returncode != 0:
            raise SystemExit(f"receiver failed ({proc.returncode}):\n{err[-4000:]}")
        result = json.loads(out.strip().splitlines()[-1])
    finally:
        if proc.poll() is None:
            proc.kill()
    result["seconds"] = posted["seconds"]
    result["requests"] = posted["requests"]
    return result, posted["batch_ids"]


def rss_goal_mb(batch_bytes: int) -> float:
    """Issue 14's memory goal for a process handling a batch: twice its bytes plus 300 MB."""
    return 2 * batch_bytes / 2**20 + 300


@dataclass
class Row:
    backend: str
    size: int
    snapshot: int
    stage: str
    events: int
    batch_bytes: int
    seconds: float
    cpu_seconds: float  # CPU time of the stage's process (the server's for receive)
    peak_rss_mb: float
    parse_rate: float  # orjson.loads events/s of the same bytes
    note: str = ""

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds else float("inf")

    @property
    def ratio(self) -> float:
        return self.rate / self.parse_rate

    @property
    def rss_limit_mb(self) -> float:
        return rss_goal_mb(self.batch_bytes)


@dataclass
class Backend:
    name: str
    urls: Callable[[int, Path], tuple[str, str]]  # size, dir -> (store url, catalog url)
    close: Callable[[], None] = lambda: None
    extra: dict[str, Any] = field(default_factory=dict)


def sqlite_backend() -> Backend:
    return Backend(
        "SQLite",
        lambda n, d: (f"sqlite:///{d / 'store.db'}", f"sqlite:///{d / 'catalog.db'}"),
    )


def postgres_backend() -> Backend:
    from ol_dagster_tests.postgres import PostgresServer

    server = PostgresServer().start()

    def urls(n: int, _d: Path) -> tuple[str, str]:
        return server.fresh_database(f"store_{n}"), server.fresh_database(f"catalog_{n}")

    return Backend("PostgreSQL (fsync=off)", urls, server.stop)


def run_size(
    backend: Backend,
    n: int,
    data: Path,
    work: Path,
    profile: str | None,
    log: Callable,
    producers: int = 0,
) -> list[Row]:
    d = work / f"{backend.name.split()[0].lower()}-{n}"
    d.mkdir(parents=True, exist_ok=True)
    store_url, catalog_url = backend.urls(n, d)
    config = d / "config.json"
    config.write_text(json.dumps({"store": store_url, "catalog": catalog_url}))
    rows: list[Row] = []
    for snapshot in (1, 2):
        rows += run_snapshot(backend, n, snapshot, data, d, config, profile, log)
    if producers > 1:
        # the first snapshot again, from several producers at once: a receiver behind a load
        # balancer serves many producers; its store write (in a thread) overlaps the next
        # request's parsing. Stored as more batches, which no stage above reads.
        count = json.loads((data / "snapshot1.json").read_text())["events"]
        size = json.loads((data / "snapshot1.json").read_text())["bytes"]
        parse = json.loads((data / "parse1.json").read_text())
        r, _ = receive(config, data / "snapshot1.ndjson", None, producers)
        row = Row(
            backend.name,
            n,
            1,
            f"receive, {producers} producers",
            count,
            size,
            r["seconds"],
            r["cpu"],
            r["peak_rss_mb"],
            count / parse["seconds"],
            f"{r['requests']} posts of ≤{REQUEST_EVENTS:,} events, {producers} at a time; "
            "not in end to end",
        )
        rows.append(row)
        log(
            f"  {backend.name} n={n:,} receive with {producers} producers: {r['seconds']:.2f} s, "
            f"{row.rate:,.0f} events/s"
        )
    return rows


def run_snapshot(
    backend: Backend,
    n: int,
    snapshot: int,
    data: Path,
    d: Path,
    config: Path,
    profile: str | None,
    log: Callable,
) -> list[Row]:
    """The four stages of one snapshot, then its end to end row."""
    events_path = data / f"snapshot{snapshot}.ndjson"
    meta = json.loads((data / f"snapshot{snapshot}.json").read_text())
    count, size = meta["events"], meta["bytes"]
    parse = json.loads((data / f"parse{snapshot}.json").read_text())
    parse_rate = count / parse["seconds"]
    rows: list[Row] = []

    def prof(stage: str) -> Path | None:
        return d / f"{stage}{snapshot}.prof" if profile == stage else None

    def row(stage: str, r: dict[str, Any], note: str = "") -> None:
        out = Row(
            backend.name,
            n,
            snapshot,
            stage,
            count,
            size,
            r["seconds"],
            r["cpu"],
            r["peak_rss_mb"],
            parse_rate,
            note,
        )
        rows.append(out)
        log(
            f"  {backend.name} n={n:,} snapshot {snapshot} {stage}: {r['seconds']:.2f} s "
            f"(CPU {r['cpu']:.2f} s), "
            f"{out.rate:,.0f} events/s, peak RSS {r['peak_rss_mb']:,.0f} MB"
        )

    r, batch_ids = receive(config, events_path, prof("receive"))
    row("receive", r, f"{r['requests']} posts of ≤{REQUEST_EVENTS:,} events")
    batches = d / f"batches{snapshot}.json"
    batches.write_text(json.dumps(batch_ids))
    outcome = d / f"upload{snapshot}.json"
    r = run_stage("normalize", config, batches=batches, jobs=count, profile_to=prof("normalize"))
    c = r["counts"]
    row(
        "normalize",
        r,
        f"{c['jobs']:,} jobs, {c['datasets']:,} datasets, {c['fields']:,} fields, "
        f"{c['dataFlows'] + c['orchestrationFlows']:,} flows, {c['fieldFlows']:,} field flows",
    )
    r = run_stage(
        "upload",
        config,
        batches=batches,
        outcome=outcome,
        snapshot=snapshot,
        jobs_total=n,
        profile_to=prof("upload"),
    )
    row("upload", r, f"{r['written']:,} rows written, {r['touched']:,} touched")
    r = run_stage(
        "cleanup",
        config,
        outcome=outcome,
        snapshot=snapshot,
        events_count=count,
        jobs_total=n,
        profile_to=prof("cleanup"),
    )
    removed = ", ".join(f"{k} {v:,}" for k, v in sorted(r["removed"].items()) if v)
    row("cleanup", r, f"removed {removed}" if removed else "nothing to remove")
    rows.append(
        Row(
            backend.name,
            n,
            snapshot,
            "end to end",
            count,
            size,
            sum(s.seconds for s in rows),
            sum(s.cpu_seconds for s in rows),
            max(s.peak_rss_mb for s in rows),
            parse_rate,
            "receive + normalize + upload + cleanup",
        )
    )
    return rows


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import pydantic
    import sqlalchemy

    return (
        f"{platform.system()} {platform.release()} {platform.machine()}, nproc {os.cpu_count()}, "
        f"{cpu}; Python {platform.python_version()}, pydantic {pydantic.VERSION}, orjson "
        f"{orjson.__version__}, SQLAlchemy {sqlalchemy.__version__}"
    )


def compile_package(root: Path = ROOT) -> None:
    """Bytecode for the ``ol_dagster`` of ``root``, as installing the package writes it. The
    commands import it from this tree (``PYTHONPATH``); where the environment sets
    ``PYTHONDONTWRITEBYTECODE`` (containers often do, and so may a benchmark machine), every
    command would compile its source again at start-up, about 0.5 s CPU that no installed copy
    (``pip install`` compiles, ``make install`` too) pays."""
    compileall.compile_dir(root / "ol_dagster", quiet=1)


def load_note() -> str:
    """The machine's load: on a shared machine wall times stretch with it, CPU times less."""
    one, five, fifteen = os.getloadavg()
    return f"load average at the end {one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min)"


def render(
    rows: list[Row], datasets: dict[int, dict[str, Any]], elapsed: float, real_path: str = ""
) -> str:
    lines = [
        "# ol-dagster benchmarks (`benchmarks/run_all.py`)",
        "",
        f"machine: {machine()}",
        f"run: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {elapsed / 60:.1f} min; {load_note()}",
        "",
        "Workload: two snapshots per size of dbt-like RunEvents (one model each: 10-column schema "
        "on inputs and output, column lineage, SQL, parent run, a quality assertion on every "
        "10th model); the second snapshot, a day later with new run ids, drops 1% of the jobs and "
        "edits another 1% (new SQL, one more input). Parse-only = `orjson.loads` of the same event "
        "bytes, one event at a time, in the same run.",
        "",
    ]
    if real_path:
        lines += [real_path, "## The stages (the breakdown)", ""]
    if not rows:
        return "\n".join(lines) + "\n"
    for n, meta in sorted(datasets.items()):
        lines.append(
            f"- {n:,} events: {meta['bytes'] / 2**20:,.1f} MiB ({meta['bytes'] / n:,.0f} B/event);"
            f" parse-only {meta['parse_rate']:,.0f} events/s per event, "
            f"{meta['body_rate']:,.0f} events/s per 1,000-event request body"
        )
    lines += [
        "",
        "| backend | events | snapshot | stage | seconds | CPU s | events/s | parse-only events/s "
        "| ratio | peak RSS MB | RSS goal MB | notes |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        stage = f"**{r.stage}**" if r.stage == "end to end" else r.stage
        lines.append(
            f"| {r.backend} | {r.size:,} | {r.snapshot} | {stage} | {r.seconds:,.2f} | "
            f"{r.cpu_seconds:,.2f} | {r.rate:,.0f} | {r.parse_rate:,.0f} | {r.ratio:.3f} | "
            f"{r.peak_rss_mb:,.0f} | {r.rss_limit_mb:,.0f} | {r.note} |"
        )
    lines += [
        "",
        "## Goals",
        "",
        "| backend | events | snapshot | end to end ≥ 1/5 parse-only | peak RSS < 2× batch + "
        "300 MB (worst stage) | receiver ≥ 5,000 events/s |",
        "|---|---:|---:|---|---|---|",
    ]
    for r in rows:
        if r.stage != "end to end":
            continue
        group = [
            x
            for x in rows
            if (x.backend, x.size, x.snapshot) == (r.backend, r.size, r.snapshot)
            and x.stage != "end to end"
        ]
        worst = max(group, key=lambda x: x.peak_rss_mb)
        rcv = next(x for x in group if x.stage == "receive")
        many = [x for x in group if x.stage.startswith("receive, ")]

        def mark(ok: bool) -> str:
            return "✅" if ok else "❌"

        lines.append(
            f"| {r.backend} | {r.size:,} | {r.snapshot} | "
            f"{mark(r.ratio >= 0.2)} {r.ratio:.3f} ({r.rate:,.0f} vs {r.parse_rate / 5:,.0f}) | "
            f"{mark(worst.peak_rss_mb < worst.rss_limit_mb)} {worst.stage} "
            f"{worst.peak_rss_mb:,.0f} / {worst.rss_limit_mb:,.0f} | "
            f"{mark(rcv.rate >= 5000)} {rcv.rate:,.0f} one producer"
            + "".join(f"; {mark(m.rate >= 5000)} {m.rate:,.0f} {m.stage[9:]}" for m in many)
            + " |"
        )
    lines += [
        "",
        "Each stage ran in its own subprocess (peak RSS is that process's `ru_maxrss`; the "
        "receiver's is the server process, the HTTP client being another process; the upload's "
        "is its peak with its graph in memory, the graph built in the same process first as the "
        "`catalog_upload` asset does). CPU s is the stage process's CPU time. The snapshot is "
        "posted as 1,000-event requests, each stored as a batch; normalize reads those batches "
        "in order as one snapshot. PostgreSQL runs with fsync off: its figures are an upper bound "
        "for a durable server.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    import real_path  # benchmarks/real_path.py (it imports this module: not at the top)

    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--sizes", help="comma-separated snapshot sizes (default 1000,10000,100000)")
    ap.add_argument("--quick", action="store_true", help="1,000 and 10,000 events only")
    ap.add_argument("--postgres", action="store_true", help="also on a throwaway PostgreSQL")
    ap.add_argument("--no-sqlite", action="store_true", help="skip SQLite (with --postgres)")
    ap.add_argument("--profile", choices=STAGE_NAMES, help="cProfile this stage")
    ap.add_argument(
        "--producers",
        type=int,
        default=4,
        help="also receive the first snapshot from this many producers at once (0: skip)",
    )
    ap.add_argument("--workdir", help="keep the working files here (default: a temp dir)")
    ap.add_argument("--output", default=str(RESULTS / "latest.md"))
    ap.add_argument("--no-real-path", action="store_true", help="the stage table only")
    ap.add_argument("--no-stages", action="store_true", help="the real path only")
    ap.add_argument("--real-sizes", help="real-path sizes (default: 10 and the stage sizes)")
    real_path.add_options(ap)
    # internal: one stage in a subprocess
    ap.add_argument("--stage", choices=list(STAGES), help=argparse.SUPPRESS)
    for opt in ("config", "events", "batches", "outcome", "url", "profile-to", "shard"):
        ap.add_argument(f"--{opt}", help=argparse.SUPPRESS)
    for opt in ("jobs", "snapshot", "events-count", "jobs-total"):
        ap.add_argument(f"--{opt}", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.stage:
        stage_main(args)
        return

    if args.sizes:
        sizes = tuple(int(s) for s in args.sizes.split(","))
    else:
        sizes = QUICK_SIZES if args.quick else DEFAULT_SIZES
    os.environ.setdefault(TOKEN_ENV, secrets.token_urlsafe(24))
    started = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f}s] {msg}", file=sys.stderr, flush=True)

    work = Path(args.workdir or tempfile.mkdtemp(prefix="ol_bench_all_"))
    work.mkdir(parents=True, exist_ok=True)
    backends: list[Callable[[], Backend]] = []
    if not args.no_sqlite:
        backends.append(sqlite_backend)
    if args.postgres:
        backends.append(postgres_backend)
    rows: list[Row] = []
    datasets: dict[int, dict[str, Any]] = {}
    try:
        for n in sizes:
            data = work / f"data-{n}"
            data.mkdir(exist_ok=True)
            for snapshot in (1, 2):
                count, size = generate(n, snapshot, data / f"snapshot{snapshot}.ndjson")
                (data / f"snapshot{snapshot}.json").write_text(
                    json.dumps({"events": count, "bytes": size})
                )
                p = run_stage("parse", None, events=data / f"snapshot{snapshot}.ndjson")
                (data / f"parse{snapshot}.json").write_text(json.dumps(p))
                if snapshot == 1:
                    datasets[n] = {
                        "bytes": size,
                        "parse_rate": count / p["seconds"],
                        "body_rate": count / p["body_seconds"],
                    }
            log(
                f"generated {n:,} events ({datasets[n]['bytes'] / 2**20:,.0f} MiB); parse-only "
                f"{datasets[n]['parse_rate']:,.0f} events/s"
            )
        real = ""
        if not args.no_real_path:
            real_sizes = (
                tuple(int(s) for s in args.real_sizes.split(","))
                if args.real_sizes
                else (real_path.FIXED_SIZE, *sizes)
            )
            real = real_path.measure(
                real_sizes,
                tuple(int(j) for j in args.load_jobs.split(",") if j),
                work,
                log,
                postgres=args.postgres,
                sqlite=not args.no_sqlite,
                daemon=args.daemon,
                profile=args.profile_sync,
                profiles=tuple(args.profiles.split(",")),
                histories=real_path._ints(args.history),
                second=args.second,
                json_out=Path(args.output).with_name("real_path.json"),
            )
        for make in backends if not args.no_stages else []:
            backend = make()
            try:
                for n in sizes:
                    rows += run_size(
                        backend, n, work / f"data-{n}", work, args.profile, log, args.producers
                    )
            finally:
                backend.close()
        report = render(rows, datasets, time.perf_counter() - started, real)
        print(report)
        out = Path(args.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report)
        for prof in sorted(work.glob(f"*/{args.profile}*.prof")) if args.profile else []:
            print(
                f"\n## cProfile: {prof.parent.name}/{prof.name}\n\n```\n{profile_summary(prof)}```"
            )
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
