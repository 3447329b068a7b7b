"""An open Kafka snapshot (no end marker yet) is bounded: by bytes (``kafka.maxSnapshotBytes``),
by messages (``kafka.maxSnapshotEvents``) and by time without a message
(``kafka.maxSnapshotIdleSeconds``). Past a bound, what it holds is stored as a batch that is not
a snapshot, its offset committed, with a warning and the reason in the batch's rejections (the
``whole_snapshot`` check warns). Before, 300 messages of 1 MB without an end marker held 300 MB
in the consumer, and a consumer killed for it read the same snapshot again at its restart.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from ol_dagster.commands.headless import sync_batches
from ol_dagster.kafka.intake import SNAPSHOT_END_HEADER, SNAPSHOT_HEADER, Assembler, Message
from ol_dagster.settings import load_settings, parse_settings
from ol_dagster.store import EventStore
from ol_dagster_tests.conftest import run_event, settings_data
from ol_dagster_tests.kafka.test_kafka_intake import PROJECT_ROOT, _consume_cmd, _produce, _topic

SNAPS = "snaps"


def _event(i: int, padding: int) -> dict[str, Any]:
    """A run of job ``big_<i>`` carrying ``padding`` characters in a custom run facet."""
    event = run_event("etl", f"big_{i}")
    event["run"]["facets"] = {
        "padding": {
            "_producer": "https://example.com/ol-dagster-tests",
            "_schemaURL": "https://example.com/padding.json",
            "data": "p" * padding,
        }
    }
    return event


def _framing(tmp_path: Path, clock: list[float] | None = None, **kafka: Any):
    data = settings_data(tmp_path)
    data["kafka"] = {
        "bootstrapServers": "127.0.0.1:9",  # never contacted: no consumer is made
        "topics": [{"topic": SNAPS, "definition": "snap", "snapshot": True}],
        **kafka,
    }
    settings = parse_settings(data)
    assert settings.kafka is not None
    store = EventStore(settings.store.url)
    definitions = {d.name: d for d in settings.definitions}
    if clock is None:
        return Assembler(settings.kafka, definitions), store
    return Assembler(settings.kafka, definitions, clock=lambda: clock[0]), store


def _message(offset: int, event: dict, snapshot: str | None, end: int | None = None) -> Message:
    headers = [] if snapshot is None else [(SNAPSHOT_HEADER, snapshot.encode())]
    if end is not None:
        headers.append((SNAPSHOT_END_HEADER, str(end).encode()))
    return Message(SNAPS, 0, offset, json.dumps(event).encode(), headers)


def test_an_open_snapshot_holds_no_more_than_max_snapshot_bytes(tmp_path: Path):
    assembler, store = _framing(tmp_path, maxSnapshotBytes=20_000)
    try:
        messages = [_message(i, _event(i, 3_000), "s1") for i in range(30)]
        one = max(len(m.value or b"") for m in messages)
        held, warnings, batches = [], [], []
        for m in messages:  # a poll of one message each: the most the assembler would hold
            write = assembler.add([m])
            held.append(assembler.held_bytes())
            warnings += write.warnings
            batches += store.add_kafka_write(write).snapshot_batches
        assert max(held) < 20_000 + one
        parts = [store.get_batch(b) for b in batches]
        assert len(parts) >= 4 and not any(p.whole_snapshot for p in parts)
        assert "(kafka.maxSnapshotBytes): stored in parts" in parts[0].rejections[-1]["reason"]
        assert len(warnings) == len(parts)
        stored = sum(p.accepted_count for p in parts)
        # each stored part is committed: a restart starts after the last one
        assert store.kafka_offsets([SNAPS]) == {(SNAPS, 0): stored}
        # the end marker closes the last part: no part is a whole snapshot
        end = store.add_kafka_write(assembler.add([_message(30, _event(30, 10), "s1", end=31)]))
        (last,) = end.snapshot_batches
        assert store.get_batch(last).whole_snapshot is False
        assert stored + store.get_batch(last).accepted_count == 31
    finally:
        store.dispose()


def test_max_snapshot_events_bounds_it_below_the_definitions_limit(tmp_path: Path):
    assembler, store = _framing(tmp_path, maxSnapshotEvents=3)
    try:
        write = assembler.add([_message(i, _event(i, 10), "s1") for i in range(7)])
        stored = store.add_kafka_write(write)
        parts = [store.get_batch(b) for b in stored.snapshot_batches]
        assert [p.accepted_count for p in parts] == [3, 3]
        assert "more than 3 messages (kafka.maxSnapshotEvents)" in parts[0].rejections[-1]["reason"]
        assert store.kafka_offsets([SNAPS]) == {(SNAPS, 0): 6}
    finally:
        store.dispose()


def test_a_stalled_snapshot_is_stored_after_max_snapshot_idle_seconds(tmp_path: Path):
    clock = [1000.0]
    assembler, store = _framing(tmp_path, clock, maxSnapshotIdleSeconds=10)
    try:
        store.add_kafka_write(assembler.add([_message(i, _event(i, 10), "s1") for i in range(2)]))
        clock[0] += 5
        assert not assembler.expire()  # not idle for long enough yet
        clock[0] += 6
        expired = assembler.expire()
        (batch_id,) = store.add_kafka_write(expired).snapshot_batches
        batch = store.get_batch(batch_id)
        assert (batch.accepted_count, batch.whole_snapshot) == (2, False)
        assert "(kafka.maxSnapshotIdleSeconds)" in batch.rejections[-1]["reason"]
        assert expired.warnings and store.kafka_offsets([SNAPS]) == {(SNAPS, 0): 2}
        assert assembler.held_bytes() == 0
        # its producer comes back: the rest is its next part, not a whole snapshot either
        rest = store.add_kafka_write(assembler.add([_message(2, _event(2, 10), "s1", end=3)]))
        (part,) = rest.snapshot_batches
        assert (store.get_batch(part).accepted_count, store.get_batch(part).whole_snapshot) == (
            1,
            False,
        )
        # the next snapshot is whole again
        whole = [_message(3 + i, _event(i, 10), "s2", end=2 if i else None) for i in range(2)]
        (next_id,) = store.add_kafka_write(assembler.add(whole)).snapshot_batches
        assert store.get_batch(next_id).whole_snapshot is True
    finally:
        store.dispose()


@pytest.fixture
def instance(tmp_path: Path):
    (tmp_path / "instance").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "instance")) as inst:
        yield inst


def test_consume_stores_and_commits_a_snapshot_without_end_marker(broker, kafka_env, instance):
    """Through a real broker and ``ol-dagster consume``: 24 messages of 100 KB with no end
    marker and a bound of 1 MB are stored in parts (the last one once it stalled), committed,
    each a batch whose ``whole_snapshot`` check warns; a second consumer reads nothing again."""
    topic = _topic(broker)
    path = kafka_env(
        [{"topic": topic, "definition": "snap", "snapshot": True}],
        maxSnapshotBytes=1_048_576,
        maxSnapshotIdleSeconds=1,
    )
    events = [_event(i, 100_000) for i in range(24)]
    _produce(broker, topic, events, headers=[[(SNAPSHOT_HEADER, "s1")]] * 24, key=lambda _: "s1")

    proc = subprocess.run(
        _consume_cmd(path, 4), capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    totals = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (totals["events"], totals["snapshots"]) == (24, 3)
    assert "(kafka.maxSnapshotBytes)" in proc.stderr
    assert "(kafka.maxSnapshotIdleSeconds)" in proc.stderr

    again = subprocess.run(
        _consume_cmd(path, 2), capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=120
    )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout.strip().splitlines()[-1])["events"] == 0

    lines = list(sync_batches(str(path), definition="snap", instance=instance))
    assert [line["status"] for line in lines] == ["synced"] * 3
    assert all(line["checks"]["whole_snapshot"] is False for line in lines)
    store = EventStore(load_settings(path).store.url)
    try:
        assert not any(b.whole_snapshot for b in store.batches("snap"))
    finally:
        store.dispose()
