"""The memory one ``ol-dagster consume`` takes for a snapshot that never ends.

A Tansu broker on loopback (``ol_dagster_tests/kafka_broker.py``), a snapshot topic of one
partition, an event store in a fresh SQLite file. A real ``ol-dagster consume`` process joins
its group first; then ``--messages`` messages of ``--size`` bytes are produced, every one with the
``ol-dagster-snapshot`` header and none with the end marker. The consumer's resident memory
(VmRSS, read every 50 ms) is reported as its peak above what it held once it had joined, with
what the store holds ``--settle`` seconds after the last message was produced.

Usage: ``.venv/bin/python benchmarks/kafka_snapshot_memory.py [--messages 300] [--size 1000000]``
(``--max-snapshot-bytes`` sets ``kafka.maxSnapshotBytes``, ``--queued-kbytes`` librdkafka's
``queued.max.messages.kbytes``; their defaults otherwise).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml
from sqlalchemy import func, select

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ol_dagster.store import EventStore  # noqa: E402
from ol_dagster.store.schema import batches, events  # noqa: E402
from ol_dagster_tests.conftest import run_event  # noqa: E402
from ol_dagster_tests.kafka_broker import TansuBroker  # noqa: E402


def _message(i: int, size: int) -> bytes:
    event = run_event("etl", f"job_{i}")
    event["run"]["facets"] = {"padding": {"_producer": "p", "_schemaURL": "s", "data": ""}}
    room = size - len(json.dumps(event).encode())
    event["run"]["facets"]["padding"]["data"] = "p" * max(room, 0)
    return json.dumps(event).encode()


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _settings(
    folder: Path, bootstrap: str, topic: str, max_bytes: int | None, queued_kb: int | None
) -> Path:
    kafka: dict = {
        "bootstrapServers": bootstrap,
        "groupId": f"bench-{uuid.uuid4().hex[:8]}",
        "sessionTimeoutSeconds": 2,
        "pollTimeoutSeconds": 0.2,
        "topics": [{"topic": topic, "definition": "bench", "snapshot": True}],
    }
    if max_bytes is not None:
        kafka["maxSnapshotBytes"] = max_bytes
    if queued_kb is not None:  # librdkafka's prefetch queue, per partition
        kafka["properties"] = {"queued.max.messages.kbytes": queued_kb}
    data = {
        "store": {"url": f"sqlite:///{folder / 'store.db'}"},
        "definitions": [
            {
                "name": "bench",
                "uuid": str(uuid.uuid4()),
                "catalog": "main",
                "snapshotMode": "BATCH_SNAPSHOT",
                "receiver": {"token": {"env": "OL_BENCH_TOKEN"}},
            }
        ],
        "kafka": kafka,
    }
    path = folder / "ol_dagster.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _stored(store: EventStore) -> tuple[int, int]:
    with store.engine.connect() as conn:
        n_events = conn.execute(select(func.count()).select_from(events)).scalar_one()
        n_batches = conn.execute(select(func.count()).select_from(batches)).scalar_one()
    return int(n_events), int(n_batches)


def run(args: argparse.Namespace) -> dict:
    import confluent_kafka

    broker = TansuBroker().start()
    topic = f"snap-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 1)
    try:
        with tempfile.TemporaryDirectory(prefix="ol_dagster_snapmem_") as tmp:
            folder = Path(tmp)
            path = _settings(
                folder, broker.bootstrap, topic, args.max_snapshot_bytes, args.queued_kbytes
            )
            store = EventStore(f"sqlite:///{folder / 'store.db'}")
            log = folder / "consume.log"
            cmd = [sys.executable, "-m", "ol_dagster.commands.cli", "--settings", str(path)]
            with log.open("w") as err:
                proc = subprocess.Popen(
                    [*cmd, "consume"], stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT
                )
            try:
                deadline = time.monotonic() + 60
                while f"{topic}[" not in log.read_text():
                    assert time.monotonic() < deadline, "the consumer did not join"
                    time.sleep(0.05)
                time.sleep(1.0)
                joined = _rss_mb(proc.pid)
                peak = joined
                producer = confluent_kafka.Producer(
                    {"bootstrap.servers": broker.bootstrap, "message.max.bytes": 2_000_000}
                )
                for i in range(args.messages):
                    producer.produce(
                        topic,
                        value=_message(i, args.size),
                        key="s1",
                        headers=[("ol-dagster-snapshot", b"s1")],
                    )
                    producer.poll(0)
                    peak = max(peak, _rss_mb(proc.pid))
                producer.flush(120)
                end = time.monotonic() + args.settle
                while time.monotonic() < end and proc.poll() is None:
                    peak = max(peak, _rss_mb(proc.pid))
                    time.sleep(0.05)
                alive = proc.poll() is None
                stored, n_batches = _stored(store)
            finally:
                proc.terminate()
                proc.communicate(timeout=60)
                store.dispose()
    finally:
        broker.stop()
    return {
        "messages": args.messages,
        "messageBytes": args.size,
        "maxSnapshotBytes": args.max_snapshot_bytes or "default",
        "queuedMaxMessagesKbytes": args.queued_kbytes or "default",
        "rssJoinedMB": round(joined, 1),
        "rssPeakMB": round(peak, 1),
        "rssGrowthMB": round(peak - joined, 1),
        "eventsStored": stored,
        "batchesStored": n_batches,
        "consumerAlive": alive,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--settle", type=float, default=20.0)
    parser.add_argument("--max-snapshot-bytes", type=int, default=None)
    parser.add_argument("--queued-kbytes", type=int, default=None)
    print(json.dumps(run(parser.parse_args())))


if __name__ == "__main__":
    main()
