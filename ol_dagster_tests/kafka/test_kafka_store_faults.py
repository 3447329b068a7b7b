"""The Kafka intake when its event store goes away during a rebalance: a real ``ol-dagster
consume`` on a real PostgreSQL store, the server stopped, a real second member joining the group
(or the consumer told to stop). Assigned partitions need the store's offsets: without them the
consumer stops in one line, exit 2, having committed nothing more; revoked ones only lose a
re-commit the store makes unneeded. Once the store is back, a new consumer reads what was not
stored, and nothing is stored twice."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
import yaml

from ol_dagster_tests.conftest import (
    PROJECT_ROOT,
    events_of,
    settings_data,
    stored_count,
    stored_raws,
    wait_until,
)
from ol_dagster_tests.kafka_broker import TansuBroker
from ol_dagster_tests.postgres import PostgresServer

pytestmark = pytest.mark.postgres


@pytest.fixture
def server() -> Iterator[PostgresServer]:
    """A PostgreSQL server of this test alone: it is stopped and started again."""
    try:
        pg = PostgresServer().start()
    except (FileNotFoundError, OSError) as exc:
        pytest.skip(f"PostgreSQL binaries not available: {exc}")
    try:
        yield pg
    finally:
        pg.stop()


class Setup:
    def __init__(self, broker: TansuBroker, server: PostgresServer, tmp_path: Path) -> None:
        self.broker, self.server, self.tmp_path = broker, server, tmp_path
        self.topic = f"lineage-{uuid.uuid4().hex[:8]}"
        broker.create_topic(self.topic, 1)
        self.group = f"g-{uuid.uuid4().hex[:8]}"
        data = settings_data(tmp_path)
        data["store"]["url"] = server.fresh_database("store")
        data["kafka"] = {
            "bootstrapServers": broker.bootstrap,
            "groupId": self.group,
            "pollTimeoutSeconds": 0.2,
            "sessionTimeoutSeconds": 2,
            "topics": [{"topic": self.topic, "definition": "add"}],
        }
        self.path = tmp_path / "ol_dagster.yaml"
        self.path.write_text(yaml.safe_dump(data), encoding="utf-8")
        self.store_url = data["store"]["url"]

    def produce(self, messages: list[dict[str, Any]]) -> None:
        producer = confluent_kafka.Producer({"bootstrap.servers": self.broker.bootstrap})
        for m in messages:
            producer.produce(self.topic, value=json.dumps(m).encode())
        assert producer.flush(30) == 0

    def start(self, log: str = "consume.log") -> subprocess.Popen[str]:
        """``ol-dagster consume`` running, its stderr in ``log`` (``self.log``)."""
        self.log = self.tmp_path / log
        cmd = [sys.executable, "-m", "ol_dagster.commands.cli", "--settings", str(self.path)]
        with self.log.open("w") as err:
            return subprocess.Popen(
                [*cmd, "consume"], stdout=subprocess.PIPE, stderr=err, text=True, cwd=PROJECT_ROOT
            )

    def stored(self) -> int:
        return stored_count(self.store_url)

    def run_ids(self) -> list[str]:
        return [json.loads(r)["run"]["runId"] for r in stored_raws(self.store_url)]

    def member(self) -> Any:
        """Another member of the group (manual commits: it commits nothing)."""
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": self.broker.bootstrap,
                "group.id": self.group,
                "enable.auto.commit": False,
                "session.timeout.ms": 2000,
                "heartbeat.interval.ms": 600,
            }
        )
        consumer.subscribe([self.topic])
        return consumer

    def committed(self) -> int:
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": self.broker.bootstrap, "group.id": self.group}
        )
        try:
            (tp,) = consumer.committed([confluent_kafka.TopicPartition(self.topic, 0)], timeout=30)
            return tp.offset
        finally:
            consumer.close()


@pytest.fixture
def setup(broker, server, tmp_path: Path, tokens) -> Setup:
    return Setup(broker, server, tmp_path)


def _consuming(setup: Setup, n: int) -> subprocess.Popen[str]:
    """``ol-dagster consume`` running, with ``n`` events stored and committed."""
    setup.produce(events_of(n, "etl", "before"))
    proc = setup.start()
    # deadlines, not delays: a loaded 2-core machine needs more than a minute for a first join
    wait_until(lambda: setup.stored() == n, 180)
    wait_until(lambda: setup.committed() == n, 180)
    return proc


def test_a_store_gone_during_a_rebalance_stops_the_consumer_in_one_line(setup: Setup) -> None:
    proc = _consuming(setup, 20)
    member = None
    try:
        setup.server._ctl("stop")  # the store's server stops (its data kept)
        member = setup.member()  # joins the group: the consumer's partition is revoked, reassigned
        deadline = time.monotonic() + 120
        while proc.poll() is None:
            member.poll(0.2)
            assert time.monotonic() < deadline, "the consumer did not stop"
        out = proc.stdout.read() if proc.stdout else ""
    finally:
        if member is not None:
            member.close()
        proc.kill()
        proc.wait(30)
    log = setup.log.read_text()
    assert proc.returncode == 2, log
    assert "Traceback" not in log, log
    last = log.strip().splitlines()[-1]
    assert last.startswith("ol-dagster: the event store became unreachable during a rebalance")
    assert "nothing more is committed" in last
    assert out == ""  # no totals: it did not end normally
    assert setup.committed() == 20  # nothing committed past what was stored

    # the store back: the next consumer reads on from its offsets, nothing twice
    setup.server._ctl("start")
    setup.produce(events_of(5, "etl", "after"))
    again = setup.start("again.log")
    try:
        # a new join after an unclean leave may wait out the old session
        wait_until(lambda: setup.stored() == 25, 180)
        again.send_signal(signal.SIGTERM)
        again.wait(60)
    finally:
        again.kill()
    assert again.returncode == 0, setup.log.read_text()
    assert len(set(setup.run_ids())) == 25


def test_a_store_gone_when_the_consumer_stops_loses_only_a_recommit(setup: Setup) -> None:
    proc = _consuming(setup, 20)
    try:
        setup.server._ctl("stop")
        proc.send_signal(signal.SIGTERM)  # leaving the group revokes its partition
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    log = setup.log.read_text()
    assert proc.returncode == 0, log
    assert "Traceback" not in log, log
    assert any(
        "WARNING" in line and "event store unreachable" in line and "offsets" in line
        for line in log.splitlines()
    ), log
    assert json.loads(out.strip().splitlines()[-1])["events"] == 20
    assert setup.committed() == 20
