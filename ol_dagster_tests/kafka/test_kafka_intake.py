"""The Kafka intake against a real broker (Tansu on loopback) and real ``ol-dagster consume``
processes: messages produced with confluent-kafka (and by openlineage-python's own
``KafkaTransport``) end in the event store as posted events would, bad ones as dead letters with
the receiver's reason, exactly once across a SIGKILL, shared by two consumers of one group;
snapshot topics store a snapshot whole at its end marker."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import confluent_kafka
import dagster as dg
import pytest

from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.kafka.intake import SNAPSHOT_END_HEADER, SNAPSHOT_HEADER, Assembler, Message
from ol_dagster.kafka.reachability import REPORT_EVERY, BrokerWatch
from ol_dagster.settings import load_settings, parse_settings
from ol_dagster.store import BatchKind, BatchStatus, EventStore
from ol_dagster_tests.conftest import (
    run_event,
    settings_data,
    stored_count,
    stored_raws,
    wait_until,
)
from ol_dagster_tests.kafka_broker import TansuBroker
from ol_dagster_tests.postgres import free_port

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PG = "postgres://db:5432"


def _topic(broker: TansuBroker, partitions: int = 1) -> str:
    name = f"lineage-{uuid.uuid4().hex[:8]}"
    broker.create_topic(name, partitions)
    return name


def _produce(
    broker: TansuBroker,
    topic: str,
    messages: list[bytes | dict],
    *,
    headers: list[list[tuple[str, str]]] | None = None,
    key: Callable[[int], str] = str,
) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for i, message in enumerate(messages):
        value = message if isinstance(message, bytes) else json.dumps(message).encode()
        producer.produce(topic, value=value, key=key(i), headers=headers[i] if headers else None)
    assert producer.flush(30) == 0


def _consume_cmd(path: Path, idle: float | None) -> list[str]:
    cmd = [sys.executable, "-m", "ol_dagster.commands.cli", "--settings", str(path), "consume"]
    return [*cmd, "--idle-exit", str(idle)] if idle is not None else cmd


def _consume(path: Path, idle: float = 1.5) -> dict[str, int]:
    """``ol-dagster consume --idle-exit`` to its end; its totals line."""
    proc = subprocess.run(
        _consume_cmd(path, idle), capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _start(path: Path, log: Path) -> subprocess.Popen[str]:
    """``ol-dagster consume`` running, its log (stderr) in ``log``."""
    with log.open("w") as err:
        return subprocess.Popen(
            _consume_cmd(path, None),
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            cwd=PROJECT_ROOT,
        )


def _assigned(log: Path, topic: str) -> bool:
    """The consumer's log says it was given a partition of the topic."""
    return any("assigned" in line and f"{topic}[" in line for line in log.read_text().splitlines())


def _jobs(n: int, tag: str) -> list[dict]:
    return [
        run_event(
            "etl", f"{tag}_{i}", inputs=[(PG, f"raw.{tag}{i}")], outputs=[(PG, f"m.{tag}{i}")]
        )
        for i in range(n)
    ]


def test_a_stream_topic_lands_in_the_definitions_stream_batch_and_syncs(
    broker, kafka_env, tmp_path: Path
):
    topic = _topic(broker)
    path = kafka_env([{"topic": topic, "definition": "add"}])
    good = _jobs(3, "k")
    wrong_namespace = run_event("elsewhere", "intruder")
    del wrong_namespace["job"]["name"]
    _produce(broker, topic, [good[0], b"{not json", good[1], wrong_namespace, good[2]])

    totals = _consume(path)

    assert totals["events"] == 3 and totals["deadLetters"] == 2
    store = EventStore(load_settings(path).store.url)
    try:
        (batch,) = store.batches("add")
        assert (batch.kind, batch.status, batch.accepted_count) == (
            BatchKind.STREAM,
            BatchStatus.OPEN,
            3,
        )
        names = [json.loads(e.raw)["job"]["name"] for e in store.iter_events(batch.id)]
        assert names == ["k_0", "k_1", "k_2"]  # the partition's order
        assert store.batches("snap") == []
        letters = store.dead_letters(definition="add")
        assert [(d.topic, d.partition, d.offset) for d in letters] == [(topic, 0, 1), (topic, 0, 3)]
        assert letters[0].reason.startswith("not valid JSON")
        assert letters[0].raw == b"{not json"
        assert "job.name" in letters[1].reason  # the receiver's own field path
    finally:
        store.dispose()

    home = tmp_path / "home"
    home.mkdir()
    sync = subprocess.run(
        [sys.executable, "-m", "ol_dagster.commands.cli", "--settings", str(path), "sync"],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env={**os.environ, "DAGSTER_HOME": str(home)},
        timeout=300,
    )
    assert sync.returncode == 0, sync.stderr
    lines = [json.loads(line) for line in sync.stdout.splitlines() if line.strip()]
    assert [line["status"] for line in lines if line["definition"] == "add"] == ["synced"]
    catalog = EmbeddedCatalog(load_settings(path).catalogs["other"].url)  # add's catalog
    try:
        assert {"etl.k_0", "etl.k_1", "etl.k_2"} <= set(catalog.job_names())
    finally:
        catalog.close()
    # the batch's page in Dagster shows the two messages Kafka brought that were no events
    with dg.DagsterInstance.from_config(str(home)) as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey(["add", "received_batch"]))
    assert event is not None and event.asset_materialization is not None
    metadata = event.asset_materialization.metadata
    assert metadata["kafkaDeadLetters"].value == 2
    reasons = str(metadata["kafkaDeadLetterReasons"].value)
    assert "not valid JSON" in reasons and "job.name" in reasons


def test_a_consumer_killed_mid_stream_loses_nothing_and_stores_nothing_twice(broker, kafka_env):
    topic = _topic(broker, partitions=2)
    path = kafka_env([{"topic": topic, "definition": "add"}], maxPollMessages=10)
    sent = _jobs(1500, "crash")
    _produce(broker, topic, sent)

    first = _start(path, path.parent / "first.log")
    try:
        wait_until(lambda: stored_count(load_settings(path).store.url) >= 100, 40)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        first.kill()
    stored_at_kill = stored_count(load_settings(path).store.url)
    assert 0 < stored_at_kill < len(sent), "the kill did not land mid-stream"

    totals = _consume(path)

    raw = stored_raws(load_settings(path).store.url)
    run_ids = [json.loads(r)["run"]["runId"] for r in raw]
    assert len(run_ids) == len(sent)  # nothing lost, nothing twice
    assert set(run_ids) == {e["run"]["runId"] for e in sent}
    # the restart began where the store's offsets are, not where Kafka's commits were
    assert totals["events"] == len(sent) - stored_at_kill


def test_two_consumers_of_one_group_split_the_partitions(broker, kafka_env, tmp_path: Path):
    topic = _topic(broker, partitions=4)
    path = kafka_env([{"topic": topic, "definition": "add"}])
    _produce(broker, topic, _jobs(200, "a"))
    one = _start(path, tmp_path / "one.log")
    two = None
    try:
        wait_until(lambda: stored_count(load_settings(path).store.url) == 200, 40)
        two = _start(path, tmp_path / "two.log")  # the group rebalances: one gives some up
        wait_until(lambda: _assigned(tmp_path / "two.log", topic), 40)
        _produce(broker, topic, _jobs(200, "b"), key=lambda i: f"b{i}")
        wait_until(lambda: stored_count(load_settings(path).store.url) == 400, 40)
        totals = []
        for proc in (one, two):
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=30)
            assert proc.returncode == 0
            totals.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in (one, two):
            if proc is not None:
                proc.kill()
    assert stored_count(load_settings(path).store.url) == 400
    assert sum(t["events"] for t in totals) == 400
    assert totals[1]["events"] > 0, "the second consumer was given no partition"
    assert totals[0]["events"] > 200  # and the first kept some after the rebalance


def test_openlineage_python_kafka_transport_posts_unchanged(broker, kafka_env, monkeypatch):
    from openlineage.client import OpenLineageClient
    from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
    from openlineage.client.transport.kafka import KafkaConfig, KafkaTransport

    for name in list(os.environ):
        if name.startswith("OPENLINEAGE"):
            monkeypatch.delenv(name)
    topic = _topic(broker)
    path = kafka_env([{"topic": topic, "definition": "snap"}])
    transport = KafkaTransport(
        KafkaConfig(config={"bootstrap.servers": broker.bootstrap}, topic=topic, flush=True)
    )
    client = OpenLineageClient(transport=transport)
    run_id = str(uuid.uuid4())
    client.emit(
        RunEvent(
            eventType=RunState.COMPLETE,
            eventTime="2026-12-01T10:00:00.000Z",
            run=Run(runId=run_id),
            job=Job(namespace="etl", name="from_the_client"),
            producer="https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python",
        )
    )

    assert _consume(path)["events"] == 1
    (raw,) = stored_raws(load_settings(path).store.url)
    event = json.loads(raw)
    assert (event["run"]["runId"], event["job"]["name"]) == (run_id, "from_the_client")


def _snapshot(snapshot_id: str, jobs: list[dict], *, announce: int | None = None):
    headers = [[(SNAPSHOT_HEADER, snapshot_id)] for _ in jobs]
    if announce is not None:
        headers[-1].append((SNAPSHOT_END_HEADER, str(announce)))
    return jobs, headers


def test_a_snapshot_topic_stores_each_snapshot_whole_at_its_end_marker(broker, kafka_env):
    topic = _topic(broker)
    path = kafka_env([{"topic": topic, "definition": "snap", "snapshot": True}])
    whole, whole_headers = _snapshot("s1", _jobs(3, "s1"), announce=3)
    short, short_headers = _snapshot("s2", _jobs(2, "s2"), announce=3)  # a message went missing
    unended, unended_headers = _snapshot("s3", _jobs(3, "s3"))
    _produce(
        broker,
        topic,
        [*whole, *short, *unended[:2]],
        headers=[*whole_headers, *short_headers, *unended_headers[:2]],
    )

    assert _consume(path)["snapshots"] == 2

    store = EventStore(load_settings(path).store.url)
    try:
        first, second = store.batches("snap")
        assert (first.kind, first.status, first.accepted_count, first.whole_snapshot) == (
            BatchKind.POSTED,
            BatchStatus.SEALED,
            3,
            True,
        )
        assert (second.accepted_count, second.whole_snapshot) == (2, False)
        assert "announced 3 messages; 2 were read" in second.rejections[0]["reason"]
        # s3 has no end marker yet: nothing of it is stored, nor committed past its start
        assert stored_count(load_settings(path).store.url) == 5
    finally:
        store.dispose()

    _produce(
        broker,
        topic,
        unended[2:],
        headers=[[*unended_headers[2], (SNAPSHOT_END_HEADER, "3")]],
    )
    assert _consume(path)["snapshots"] == 1
    store = EventStore(load_settings(path).store.url)
    try:
        third = store.batches("snap")[-1]
        assert (third.accepted_count, third.whole_snapshot) == (3, True)
        names = [json.loads(e.raw)["job"]["name"] for e in store.iter_events(third.id)]
        assert names == ["s3_0", "s3_1", "s3_2"]
    finally:
        store.dispose()


def test_consume_without_a_kafka_block_says_so_in_one_line(write_settings):
    path = write_settings()
    proc = subprocess.run(
        _consume_cmd(path, 1), capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=60
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "ol-dagster: the settings have no 'kafka' block: nothing to consume"
    )


def test_consume_with_no_broker_exits_within_idle_exit_in_one_line_per_interval(
    write_settings, tmp_path: Path
):
    # nothing listens on the port: every connection is refused at once, ~20 tries a second
    server = f"127.0.0.1:{free_port()}"
    data = settings_data(tmp_path)
    data["kafka"] = {"bootstrapServers": [server], "topics": [{"topic": "t", "definition": "snap"}]}
    idle = 3.0
    assert idle < REPORT_EVERY
    began = time.monotonic()
    proc = subprocess.run(
        _consume_cmd(write_settings(data), idle),
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        timeout=60,
    )
    elapsed = time.monotonic() - began

    assert proc.returncode == 2, proc.stderr
    # the seconds counted from start, not from a join that never comes (was: a minute); the rest
    # is the interpreter's start and the consumer's close on a loaded machine
    assert elapsed < idle + 4, elapsed
    started, retrying, failed = proc.stderr.splitlines()  # was ~20 lines a second
    assert started.startswith(f"ol-dagster consume: group ol-dagster on {server}: t -> snap")
    assert retrying.startswith(f"WARNING ol_dagster.kafka: no Kafka broker answers at {server} (")
    assert "Connection refused" in retrying and "retrying, next report in 10 s" in retrying
    assert failed.startswith(f"ol-dagster: no Kafka broker answered at {server} in 3 s (")
    assert "Connection refused" in failed and failed.endswith("): nothing consumed")
    assert proc.stdout == ""


def test_a_broker_down_for_25_seconds_is_told_in_one_line_per_interval_then_back(caplog):
    now = [0.0]
    watch = BrokerWatch("k1:9092", clock=lambda: now[0])
    refused = "k1:9092/bootstrap: Connect to ipv4#10.0.0.1:9092 failed: Connection refused"
    with caplog.at_level(logging.INFO, logger="ol_dagster.kafka"):
        watch.unreachable("1/1 brokers are down", specific=False)
        while now[0] < 25:  # librdkafka's pace against a port that refuses
            watch.unreachable(refused)
            now[0] += 0.05
        watch.stats(json.dumps({"brokers": {"k1:9092/1": {"state": "UP"}}}))

    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "no Kafka broker answers at k1:9092 (1/1 brokers are down); retrying, next report in 10 s",
        f"no Kafka broker answers at k1:9092 for 10 s ({refused}); retrying, next report in 10 s",
        f"no Kafka broker answers at k1:9092 for 20 s ({refused}); retrying, next report in 10 s",
        "a Kafka broker answers at k1:9092 again after 25 s",
    ]
    assert watch.answered and watch.down_since is None


# --- snapshot framing, message by message (the intake's own rules, with a real store) ----------


SNAPS = "snaps"


def _framing(tmp_path: Path, **limits: int) -> tuple[Assembler, EventStore]:
    """An assembler for topic ``snaps`` (snapshots of ``snap``) and the settings' store."""
    data = settings_data(tmp_path, **({"limits": limits} if limits else {}))
    data["kafka"] = {
        "bootstrapServers": "127.0.0.1:9",  # never contacted: no consumer is made
        "topics": [{"topic": SNAPS, "definition": "snap", "snapshot": True}],
    }
    settings = parse_settings(data)
    assert settings.kafka is not None
    store = EventStore(settings.store.url)
    return Assembler(settings.kafka, {d.name: d for d in settings.definitions}), store


def _messages(first: int, jobs: list[dict], headers: list[list[tuple[str, str]]]) -> list[Message]:
    return [
        Message(SNAPS, 0, first + i, json.dumps(job).encode(), [(k, v.encode()) for k, v in h])
        for i, (job, h) in enumerate(zip(jobs, headers, strict=True))
    ]


def _names(store: EventStore, batch_id: int) -> list[str]:
    return [json.loads(e.raw)["job"]["name"] for e in store.iter_events(batch_id)]


def test_a_snapshot_split_over_polls_is_stored_once_whole_and_a_restart_reads_it_again(
    tmp_path: Path,
):
    assembler, store = _framing(tmp_path)
    try:
        jobs, headers = _snapshot("s1", _jobs(4, "p"), announce=4)
        messages = _messages(0, jobs, headers)
        # the first poll ends inside the snapshot: nothing stored, the offset stays at its start
        first = store.add_kafka_write(assembler.add(messages[:2]))
        assert (first.events, store.kafka_offsets([SNAPS])) == (0, {(SNAPS, 0): 0})
        # a consumer that starts again there (a crash, a rebalance) reads the snapshot whole
        again = Assembler(assembler.kafka, assembler.definitions)
        assert store.add_kafka_write(again.add(messages[:3])).events == 0
        stored = store.add_kafka_write(again.add(messages[3:]))
        (batch_id,) = stored.snapshot_batches
        batch = store.get_batch(batch_id)
        assert (batch.whole_snapshot, batch.accepted_count) == (True, 4)
        assert _names(store, batch_id) == ["p_0", "p_1", "p_2", "p_3"]
        assert store.kafka_offsets([SNAPS]) == {(SNAPS, 0): 4}
        # the first consumer, handed the rest late, stores nothing twice
        late = store.add_kafka_write(assembler.add(messages[2:]))
        assert (late.events, late.skipped) == (0, 1)
        assert len(store.batches("snap")) == 1
    finally:
        store.dispose()


def test_an_interrupted_snapshot_is_kept_but_not_whole_and_the_next_one_is(tmp_path: Path):
    assembler, store = _framing(tmp_path)
    try:
        cut, cut_headers = _snapshot("s1", _jobs(2, "cut"))  # its producer died: no end marker
        full, full_headers = _snapshot("s2", _jobs(3, "full"), announce=3)
        stored = store.add_kafka_write(
            assembler.add(_messages(0, [*cut, *full], [*cut_headers, *full_headers]))
        )
        first, second = (store.get_batch(i) for i in stored.snapshot_batches)
        assert (first.whole_snapshot, first.accepted_count) == (False, 2)
        assert "'s1' was interrupted at offset 2 by snapshot 's2'" in first.rejections[0]["reason"]
        assert (second.whole_snapshot, _names(store, second.id)) == (
            True,
            ["full_0", "full_1", "full_2"],
        )
        assert store.kafka_offsets([SNAPS]) == {(SNAPS, 0): 5}
    finally:
        store.dispose()


def test_a_snapshot_larger_than_max_events_per_batch_is_stored_in_parts_none_whole(
    tmp_path: Path,
):
    assembler, store = _framing(tmp_path, maxEventsPerBatch=3)
    try:
        jobs, headers = _snapshot("big", _jobs(7, "big"), announce=7)
        stored = store.add_kafka_write(assembler.add(_messages(0, jobs, headers)))
        parts = [store.get_batch(i) for i in stored.snapshot_batches]
        assert [p.accepted_count for p in parts] == [3, 3, 1]
        assert [p.whole_snapshot for p in parts] == [False, False, False]  # none may clean
        assert (
            "more than 3 messages (limits.maxEventsPerBatch)" in (parts[0].rejections[0]["reason"])
        )
        assert sum((_names(store, p.id) for p in parts), []) == [f"big_{i}" for i in range(7)]
        assert store.kafka_offsets([SNAPS]) == {(SNAPS, 0): 7}
    finally:
        store.dispose()


def test_a_message_without_the_snapshot_header_is_a_dead_letter_stored_at_once(
    tmp_path: Path,
):
    assembler, store = _framing(tmp_path)
    try:
        stray = Message(SNAPS, 0, 0, json.dumps(_jobs(1, "stray")[0]).encode())
        jobs, headers = _snapshot("s1", _jobs(2, "s"), announce=2)
        snapshot = _messages(1, jobs, headers)
        lone = Message(SNAPS, 0, 3, json.dumps(_jobs(1, "lone")[0]).encode(), [("x", None)])
        # a stray before the snapshot is a dead letter at once, and so is one inside it: an open
        # snapshot holds none (the partition's offset stays at the snapshot's start)
        first = store.add_kafka_write(assembler.add([stray, snapshot[0]]))
        assert first.dead_letters == 1
        inside = Message(SNAPS, 0, 2, b'{"no": "header"}')
        assert store.add_kafka_write(assembler.add([inside, lone])).dead_letters == 2
        assert store.kafka_offsets([SNAPS]) == {(SNAPS, 0): 1}
        # read again from the snapshot's start (a restart): the strays are not stored twice
        again = Assembler(assembler.kafka, assembler.definitions)
        ending = Message(SNAPS, 0, 4, snapshot[1].value, snapshot[1].headers)
        second = store.add_kafka_write(again.add([snapshot[0], inside, lone, ending]))
        assert (second.dead_letters, second.skipped) == (0, 2)
        (batch_id,) = second.snapshot_batches
        # the strays are not part of the snapshot: it is whole with its own two messages
        assert store.get_batch(batch_id).whole_snapshot is True
        letters = store.dead_letters(definition="snap")
        assert [d.offset for d in letters] == [0, 2, 3]
        assert all(f"needs the header {SNAPSHOT_HEADER}" in d.reason for d in letters)
    finally:
        store.dispose()


@pytest.mark.parametrize("count", ["three", "", "-3", "3.0", "²", "³", "9" * 5000, "0x3"])
def test_an_end_marker_that_is_not_a_count_makes_the_snapshot_not_whole(tmp_path: Path, count: str):
    assembler, store = _framing(tmp_path)
    try:
        jobs, headers = _snapshot("s1", _jobs(3, "n"))
        headers[-1].append((SNAPSHOT_END_HEADER, count))
        stored = store.add_kafka_write(assembler.add(_messages(0, jobs, headers)))
        (batch_id,) = stored.snapshot_batches
        batch = store.get_batch(batch_id)
        assert (batch.whole_snapshot, batch.accepted_count) == (False, 3)
        assert (
            f"{SNAPSHOT_END_HEADER} must be the number of messages"
            in (batch.rejections[0]["reason"])
        )
        assert store.kafka_offsets([SNAPS]) == {(SNAPS, 0): 3}
    finally:
        store.dispose()


def test_a_consumer_keeps_going_past_an_end_marker_that_is_no_count(broker, kafka_env):
    # "²" is a digit to str.isdigit but no number to int(): it stopped the consumer, and every
    # restart, at the same message
    topic = _topic(broker)
    path = kafka_env([{"topic": topic, "definition": "snap", "snapshot": True}])
    odd, odd_headers = _snapshot("s1", _jobs(2, "odd"))
    odd_headers[-1].append((SNAPSHOT_END_HEADER, "²"))
    good, good_headers = _snapshot("s2", _jobs(2, "good"), announce=2)
    _produce(broker, topic, [*odd, *good], headers=[*odd_headers, *good_headers])

    assert _consume(path)["snapshots"] == 2

    store = EventStore(load_settings(path).store.url)
    try:
        first, second = store.batches("snap")
        assert (first.whole_snapshot, second.whole_snapshot) == (False, True)
    finally:
        store.dispose()
