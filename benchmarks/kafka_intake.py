"""The Kafka intake's throughput: events/s for one ``ol-dagster consume`` and for two in a group.

A Tansu broker on loopback (``ol_dagster_tests/kafka_broker.py``), a topic of ``--partitions``
partitions, an event store in a fresh SQLite file per run. The consumers (real ``ol-dagster
consume`` processes) are started and have joined their group before the messages are produced,
so the time is produce -> poll -> validate -> store -> commit, from the first message produced
until the store holds them all (read every 50 ms): the intake's rate, not its start-up. The
events are ``benchmarks/upload.py``'s dbt-like model events (column lineage for 10 columns, SQL,
schema facets), about 6 KB each. ``orjson.loads`` of the same messages, in the same run, is the
floor the ratio is taken against (parse only, one process).

Usage: ``.venv/bin/python benchmarks/kafka_intake.py [--events 5000] [--partitions 4]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import orjson
import yaml
from sqlalchemy import func, select

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.upload import model_event  # noqa: E402
from ol_dagster.store import EventStore  # noqa: E402
from ol_dagster.store.schema import events  # noqa: E402
from ol_dagster_tests.kafka_broker import TansuBroker  # noqa: E402


def _messages(n: int) -> list[bytes]:
    start = datetime(2026, 12, 1, tzinfo=UTC)
    parent = str(uuid.uuid4())
    return [orjson.dumps(model_event(i, start, parent)) for i in range(n)]


def _parse_rate(messages: list[bytes], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for m in messages:
            orjson.loads(m)
        best = min(best, time.perf_counter() - t0)
    return len(messages) / best


def _settings(folder: Path, bootstrap: str, topic: str) -> Path:
    path = folder / "ol_dagster.yaml"
    data = {
        "store": {"url": f"sqlite:///{folder / 'store.db'}"},
        "definitions": [
            {
                "name": "bench",
                "uuid": str(uuid.uuid4()),
                "catalog": "main",
                "receiver": {"token": {"env": "OL_BENCH_TOKEN"}},
            }
        ],
        "kafka": {
            "bootstrapServers": bootstrap,
            "groupId": f"bench-{uuid.uuid4().hex[:8]}",
            "sessionTimeoutSeconds": 2,
            "pollTimeoutSeconds": 0.2,
            "topics": [{"topic": topic, "definition": "bench"}],
        },
    }
    path.write_text(yaml.safe_dump(data))
    return path


def _stored(store: EventStore) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(events)).scalar_one())


def _run(broker: TansuBroker, messages: list[bytes], consumers: int, partitions: int) -> dict:
    import confluent_kafka

    topic = f"bench-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, partitions)
    with tempfile.TemporaryDirectory(prefix="ol_dagster_kafka_bench_") as tmp:
        folder = Path(tmp)
        path = _settings(folder, broker.bootstrap, topic)
        store = EventStore(f"sqlite:///{folder / 'store.db'}")
        cmd = [sys.executable, "-m", "ol_dagster.commands.cli", "--settings", str(path), "consume"]
        logs = [folder / f"consumer{i}.log" for i in range(consumers)]
        procs = []
        for log in logs:
            with log.open("w") as err:
                procs.append(
                    subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT)
                )
        try:
            # every consumer holds partitions: the group has settled
            deadline = time.monotonic() + 60
            while not all(f"{topic}[" in log.read_text() for log in logs):
                assert time.monotonic() < deadline, "the consumers did not join"
                time.sleep(0.05)
            time.sleep(0.5)
            producer = confluent_kafka.Producer(
                {"bootstrap.servers": broker.bootstrap, "linger.ms": 5}
            )
            t0 = time.perf_counter()
            for i, m in enumerate(messages):
                producer.produce(topic, value=m, key=str(i))
                producer.poll(0)
            producer.flush(60)
            produced = time.perf_counter() - t0
            while _stored(store) < len(messages):
                assert time.perf_counter() - t0 < 600, "the consumers stopped"
                time.sleep(0.05)
            elapsed = time.perf_counter() - t0
        finally:
            totals = []
            for proc in procs:
                proc.terminate()
                out, _ = proc.communicate(timeout=60)
                totals.append(json.loads(out.strip().splitlines()[-1]) if out.strip() else {})
            store.dispose()
    return {
        "consumers": consumers,
        "events": len(messages),
        "seconds": round(elapsed, 3),
        "produceSeconds": round(produced, 3),
        "eventsPerSecond": round(len(messages) / elapsed),
        "perConsumer": [t.get("events") for t in totals],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    messages = _messages(args.events)
    load_before = os.getloadavg()
    broker = TansuBroker().start()
    try:
        rows = [_run(broker, messages, n, args.partitions) for n in (1, 2)]
    finally:
        broker.stop()
    parse = _parse_rate(messages)
    load_after = os.getloadavg()
    size = sum(map(len, messages)) / len(messages)
    print(f"{args.events} events of {size:,.0f} B, {args.partitions} partitions, SQLite store")
    print(f"orjson.loads: {parse:,.0f} events/s")
    for row in rows:
        row["ratioToOrjson"] = round(row["eventsPerSecond"] / parse, 4)
        print(json.dumps(row))
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (1 min)")


if __name__ == "__main__":
    main()
