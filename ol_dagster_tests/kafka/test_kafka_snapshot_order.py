"""Snapshots read from Kafka are ordered by their producer, not by the read: snapshots keyed as
the docs advise land on different partitions, which a consumer reads in any interleaving. An
older snapshot read after a newer one was stored and synced last, and brought back what the newer
one removed. Now it is SUPERSEDED: ordered by its ``ol-snapshot-sequence``, or without one by the
timestamp of its first message. Through ``ol-dagster consume``, ``sync`` and ``lineage``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

from ol_dagster.kafka.intake import SNAPSHOT_END_HEADER, SNAPSHOT_HEADER, Message
from ol_dagster.settings import load_settings
from ol_dagster.snapshot_order import KAFKA_HEADER
from ol_dagster.store import EventStore
from ol_dagster_tests.conftest import PROJECT_ROOT, run_event
from ol_dagster_tests.kafka.test_kafka_intake import SNAPS, _consume, _framing, _topic
from ol_dagster_tests.kafka_broker import TansuBroker

PG = "postgres://db:5432"
T0 = datetime(2026, 11, 1, 2, 0, 0, tzinfo=UTC)


def _load(name: str) -> dict[str, Any]:
    return run_event("etl", name, inputs=[(PG, f"raw.{name}")], outputs=[(PG, f"mart.{name}")])


def _headers(snapshot_id: str, n: int, sequence: str | None = None) -> list[list[tuple[str, str]]]:
    headers = [[(SNAPSHOT_HEADER, snapshot_id)] for _ in range(n)]
    if sequence is not None:
        for h in headers:
            h.append((KAFKA_HEADER, sequence))
    headers[-1].append((SNAPSHOT_END_HEADER, str(n)))
    return headers


# -- framing, message by message ----------------------------------------------------------------


def _messages(
    jobs: list[dict[str, Any]], headers: list[list[tuple[str, str]]], at: datetime | None = None
) -> list[Message]:
    return [
        Message(
            SNAPS,
            0,
            i,
            json.dumps(job).encode(),
            [(k, v.encode()) for k, v in h],
            at + timedelta(seconds=i) if at else None,
        )
        for i, (job, h) in enumerate(zip(jobs, headers, strict=True))
    ]


def test_a_snapshot_keeps_its_sequence_and_its_first_messages_timestamp(tmp_path: Path):
    assembler, store = _framing(tmp_path)
    try:
        jobs = [_load("a"), _load("b")]
        stored = store.add_kafka_write(assembler.add(_messages(jobs, _headers("s", 2, "41"), T0)))
        batch = store.get_batch(stored.snapshot_batches[0])
        assert (batch.whole_snapshot, batch.snapshot_sequence, batch.ordered_at) == (True, 41, T0)
    finally:
        store.dispose()


@pytest.mark.parametrize(
    ("second", "reason"),
    [
        ("-3", f"{KAFKA_HEADER} must be a decimal integer"),
        ("7", f"{KAFKA_HEADER} 7 differs from the snapshot's first message (offset 0: 5)"),
        (None, f"{KAFKA_HEADER} none differs from the snapshot's first message (offset 0: 5)"),
    ],
)
def test_a_message_with_another_or_a_malformed_sequence_is_a_dead_letter(
    tmp_path: Path, second: str | None, reason: str
):
    assembler, store = _framing(tmp_path)
    try:
        jobs = [_load("a"), _load("b"), _load("c")]
        headers = _headers("s", 3, "5")
        headers[1] = [(k, v) for k, v in headers[1] if k != KAFKA_HEADER]
        if second is not None:
            headers[1].append((KAFKA_HEADER, second))
        stored = store.add_kafka_write(assembler.add(_messages(jobs, headers)))
        batch = store.get_batch(stored.snapshot_batches[0])
        # not a snapshot any more: the day-based cleanup only; its other events are kept
        assert (batch.whole_snapshot, batch.accepted_count) == (False, 2)
        assert batch.rejections[0]["reason"].startswith(f"offset 1: {reason}")
        (letter,) = store.dead_letters(definition="snap")
        assert (letter.offset, letter.reason.startswith(reason)) == (1, True)
    finally:
        store.dispose()


# -- through ol-dagster consume, sync and lineage -----------------------------------------------


def _produce(
    broker: TansuBroker,
    topic: str,
    partition: int,
    jobs: list[dict[str, Any]],
    headers: list[list[tuple[str, str]]],
    at: datetime,
) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for job, h in zip(jobs, headers, strict=True):
        producer.produce(
            topic,
            value=json.dumps(job).encode(),
            partition=partition,
            headers=h,
            timestamp=int(at.timestamp() * 1000),
        )
    assert producer.flush(30) == 0


def _cli(path: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ol_dagster.commands.cli", "--settings", str(path), *args],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env={**os.environ, "DAGSTER_HOME": str(home)},
        timeout=300,
    )


def _sync(path: Path, home: Path) -> list[dict[str, Any]]:
    proc = _cli(path, home, "sync", "--definition", "snap")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def _upstream(path: Path, home: Path, table: str) -> set[str]:
    """The jobs ``ol-dagster lineage`` shows writing the dataset (none: it is not there)."""
    node = f"dataset:{PG}:{table}"
    proc = _cli(
        path, home, "lineage", node, "--definition", "snap", "--upstream", "--depth", "1", "--json"
    )
    if proc.returncode == 1 and "is not in the catalog" in proc.stderr:
        return set()
    assert proc.returncode == 0, proc.stderr
    return {e["from"] for e in json.loads(proc.stdout)["edges"]}


@pytest.mark.parametrize("ordered_by", ["timestamp", "sequence"])
def test_an_older_snapshot_read_after_a_newer_one_from_another_partition_is_superseded(
    broker: TansuBroker, kafka_env: Callable[..., Path], tmp_path: Path, ordered_by: str
):
    """Snapshot 1 describes jobs a and b; snapshot 2, newer, only a. Snapshot 2 is read first
    (partition 0), snapshot 1 after it (partition 1): the catalog keeps snapshot 2's state."""
    topic = _topic(broker, partitions=2)
    path = kafka_env([{"topic": topic, "definition": "snap", "snapshot": True}])
    home = tmp_path / "dagster_home"
    home.mkdir()
    both, only_a = [_load("a"), _load("b")], [_load("a")]
    by_sequence = ordered_by == "sequence"

    # the state both snapshots follow: a and b in the catalog
    _produce(broker, topic, 0, both, _headers("s0", 2, "1" if by_sequence else None), T0)
    assert _consume(path)["snapshots"] == 1
    (first,) = _sync(path, home)
    assert first["status"] == "synced"
    assert _upstream(path, home, "mart.b") == {"job:etl:b"}

    # by sequence, the producer's clock may even say otherwise: the sequence decides
    newer_at, older_at = (T0 + timedelta(minutes=1), T0 + timedelta(minutes=2))
    if not by_sequence:
        newer_at, older_at = older_at, newer_at
    _produce(broker, topic, 0, only_a, _headers("s2", 1, "3" if by_sequence else None), newer_at)
    assert _consume(path)["snapshots"] == 1
    _produce(broker, topic, 1, both, _headers("s1", 2, "2" if by_sequence else None), older_at)
    assert _consume(path)["snapshots"] == 1

    newer_line, older_line = _sync(path, home)

    assert newer_line["status"] == older_line["status"] == "synced"
    assert newer_line["cleanup"]["removedJobs"] == ["etl.b"]
    assert older_line["upload"]["skippedReason"] == "SUPERSEDED"
    assert older_line["upload"]["supersededBy"] == newer_line["batchId"]
    assert older_line["cleanup"]["skippedReason"] == "SUPERSEDED"
    # b is not brought back by the older snapshot
    assert _upstream(path, home, "mart.b") == set()
    assert _upstream(path, home, "mart.a") == {"job:etl:a"}
    store = EventStore(load_settings(path).store.url)
    try:
        older = store.get_batch(older_line["batchId"])
        assert older.id > newer_line["batchId"]  # stored after the newer one
        if by_sequence:
            assert older.snapshot_sequence == 2
        else:
            assert older.ordered_at == older_at
    finally:
        store.dispose()
