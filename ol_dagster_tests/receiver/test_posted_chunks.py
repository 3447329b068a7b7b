"""A large posted batch is written in short transactions (issue 15): all of it or nothing, unseen
while RECEIVING, removed when its receiver dies mid-post, and no long wait for the others.

The writer paused or killed mid-post is a real process (``_WRITER``) on the same SQLite file:
paused before its third transaction begins (no lock held), then resumed or SIGKILLed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.exc import OperationalError

from ol_dagster.store import BatchStatus, EventStore, NewEvent, StoreUnavailable, schema
from ol_dagster.store import posted as posted_module
from ol_dagster.store.holder import this_process
from ol_dagster_tests.conftest import PROJECT_ROOT

T0 = datetime(2026, 11, 1, 2, 0, 0, tzinfo=UTC)
CHUNK = 10


def ev(i: int, *, run: str | None = None, pad: int = 0) -> NewEvent:
    return NewEvent(
        raw=json.dumps({"i": i, "pad": "x" * pad}).encode(),
        kind="run",
        event_type="COMPLETE",
        event_time=T0 + timedelta(seconds=i),
        producer="https://example.com/producer",
        job_namespace="etl",
        job_name=f"job_{i}",
        run_id=run or f"run-{i}",
    )


def count(store: EventStore, table) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(posted_module, "POSTED_CHUNK", CHUNK)


# -- all or nothing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "raised"),
    [
        (OperationalError("COMMIT", {}, Exception("disk I/O error")), StoreUnavailable),
        (RuntimeError("killed mid-write"), RuntimeError),
    ],
)
def test_a_failure_in_the_third_chunk_leaves_no_batch_and_no_events(
    event_store: EventStore, small_chunks: None, fault: Exception, raised: type[Exception]
) -> None:
    commits: list[int] = []

    def third_commit_fails(conn) -> None:
        commits.append(conn.exec_driver_sql("SELECT count(*) FROM ol_events").scalar_one())
        if len(commits) == 3:
            raise fault

    event.listen(event_store.engine, "commit", third_commit_fails)
    try:
        with pytest.raises(raised):
            event_store.add_posted_batch("snap", [ev(i) for i in range(5 * CHUNK)], received=50)
    finally:
        event.remove(event_store.engine, "commit", third_commit_fails)

    assert commits[:3] == [CHUNK, 2 * CHUNK, 3 * CHUNK]  # two chunks were committed first
    assert event_store.batches(statuses=list(BatchStatus)) == []
    assert count(event_store, schema.batches) == 0
    assert count(event_store, schema.events) == 0
    # a retry of the same post is stored whole
    batch_id = event_store.add_posted_batch("snap", [ev(i) for i in range(5 * CHUNK)], received=50)
    batch = event_store.get_batch(batch_id)
    assert (batch.status, batch.accepted_count) == (BatchStatus.SEALED, 5 * CHUNK)
    assert [e.position for e in event_store.iter_events(batch_id)] == list(range(5 * CHUNK))


def test_a_batch_of_several_chunks_is_sealed_whole(
    event_store: EventStore, small_chunks: None
) -> None:
    new = [ev(i) for i in range(3 * CHUNK + 3)]
    batch_id = event_store.add_posted_batch("snap", new, received=len(new), snapshot=True, now=T0)
    batch = event_store.get_batch(batch_id)
    assert (batch.status, batch.whole_snapshot, batch.sealed_at) == (BatchStatus.SEALED, True, T0)
    assert [e.raw for e in event_store.iter_events(batch_id)] == [e.raw for e in new]
    assert event_store.receiving_floor("snap") is None


# -- a writer paused or killed mid-post -----------------------------------------------------------

_WRITER = """
import json, sys
from datetime import UTC, datetime
from sqlalchemy import event
from ol_dagster.store import EventStore, NewEvent
from ol_dagster.store import posted as module

module.POSTED_CHUNK = {chunk}
store = EventStore(sys.argv[1])
commits = []

def pause_before_third(*_args):
    # at the connection's checkout for the third transaction: two chunks committed, no lock
    if len(commits) == 2:
        commits.append("paused")
        print("paused", flush=True)
        sys.stdin.readline()

new = [
    NewEvent(json.dumps({{"w": i}}).encode(), "run", "COMPLETE", datetime(2026, 11, 1, tzinfo=UTC),
             None, "etl", "writer_job", "writer-run")
    for i in range(5 * {chunk})
]
event.listen(store.engine, "commit", lambda _conn: commits.append(1))
event.listen(store.engine.pool, "checkout", pause_before_third)
print(store.add_posted_batch("snap", new, received=len(new)), flush=True)
"""


class PausedWriter:
    """A process mid-way through a post of five chunks: two committed, three to go."""

    def __init__(self, url: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER.format(chunk=CHUNK), url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=PROJECT_ROOT,
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        assert self.proc.stdout.readline().strip() == "paused"

    def resume(self) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        batch_id = int(self.proc.stdout.readline())
        assert self.proc.wait(timeout=30) == 0
        return batch_id

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()


@pytest.fixture
def paused_writer() -> Iterator[Callable[[str], PausedWriter]]:
    made: list[PausedWriter] = []

    def make(url: str) -> PausedWriter:
        made.append(PausedWriter(url))
        return made[-1]

    yield make
    for w in made:
        w.close()


def test_a_batch_being_received_is_read_by_nobody(
    tmp_path: Path, paused_writer: Callable[[str], PausedWriter]
) -> None:
    store = EventStore(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        earlier = store.add_posted_batch("snap", [ev(0, run="writer-run")], received=1)
        writer = paused_writer(store.url)
        [receiving] = store.batches(statuses=[BatchStatus.RECEIVING])
        assert count(store, schema.events) == 1 + 2 * CHUNK  # its first two chunks are there
        later = store.add_posted_batch("snap", [ev(1, run="writer-run")], received=1)

        assert [b.id for b in store.batches()] == [earlier, later]
        assert [b.id for b in store.batches("snap", statuses=[BatchStatus.SEALED])] == [
            earlier,
            later,
        ]
        analysed = list(store.iter_events_between(T0 - timedelta(days=400), T0 + timedelta(1)))
        assert analysed == [ev(0, run="writer-run").raw, ev(1, run="writer-run").raw]
        runs = {("writer-run", "etl", "writer_job")}
        assert store.earlier_run_digests("snap", runs, before_batch=later) == []
        assert store.receiving_floor("snap") == receiving.id
        # the writer lives: nothing removes its batch
        assert store.remove_abandoned() == []

        sealed = writer.resume()
        assert sealed == receiving.id
        batch = store.get_batch(sealed)
        assert (batch.status, batch.accepted_count) == (BatchStatus.SEALED, 5 * CHUNK)
        assert len(list(store.iter_events(sealed))) == 5 * CHUNK
        assert [b.id for b in store.batches()] == sorted([earlier, later, sealed])
        assert len(store.earlier_run_digests("snap", runs, before_batch=later + 1)) == 5 * CHUNK
    finally:
        store.dispose()


def test_the_batch_of_a_killed_writer_is_removed_at_the_next_start(
    tmp_path: Path, paused_writer: Callable[[str], PausedWriter]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = EventStore(url)
    try:
        writer = paused_writer(url)
        [leftover] = store.batches(statuses=[BatchStatus.RECEIVING])
        writer.kill()
        assert store.batches() == []

        kept = store.add_posted_batch("snap", [ev(0)], received=1)
        assert store.remove_abandoned() == [leftover.id]  # what a receiver's start does
        assert store.batches(statuses=list(BatchStatus)) == [store.get_batch(kept)]
        assert count(store, schema.events) == 1
    finally:
        store.dispose()


def test_a_receiving_batch_of_a_process_that_cannot_be_checked_goes_after_an_hour(
    event_store: EventStore,
) -> None:
    """A writer on another machine cannot be seen gone: its batch is abandoned by age."""
    with event_store.engine.begin() as conn:
        batch_id = conn.execute(
            schema.batches.insert().values(
                definition="snap",
                kind="posted",
                status=BatchStatus.RECEIVING,
                received_at=T0.replace(tzinfo=None),
                received_count=1,
                accepted_count=1,
                rejected_count=0,
                whole_snapshot=False,
                rejections=[],
                writer="another-machine:1:42:123",
            )
        ).inserted_primary_key[0]
    assert event_store.remove_abandoned(now=T0 + timedelta(minutes=59)) == []
    assert event_store.remove_abandoned(now=T0 + timedelta(minutes=61)) == [batch_id]
    assert count(event_store, schema.batches) == 0
    assert this_process() is not None  # this machine can check its own processes (Linux)


# -- no long wait ---------------------------------------------------------------------------------


def test_a_single_event_is_stored_while_a_large_batch_is_written(tmp_path: Path) -> None:
    """On SQLite (one writer), a single event waits for one chunk, not the whole batch: every
    one stored during the large write took under a second (generous: a chunk takes ~3 ms;
    the whole batch takes seconds)."""
    store = EventStore(f"sqlite:///{tmp_path / 'store.db'}")
    big = [ev(i, pad=400) for i in range(60_000)]
    first_chunk, done = threading.Event(), threading.Event()
    result: list[int] = []

    def post() -> None:
        try:
            result.append(store.add_posted_batch("snap", big, received=len(big)))
        finally:
            done.set()

    try:
        event.listen(store.engine, "commit", lambda _conn: first_chunk.set())
        writer = threading.Thread(target=post)
        writer.start()
        assert first_chunk.wait(timeout=60)
        waits: list[float] = []
        while not done.is_set():
            started = time.monotonic()
            store.add_stream_events("add", [ev(len(waits))], received=1)
            elapsed = time.monotonic() - started
            if not done.is_set():  # stored while the large write went on
                waits.append(elapsed)
        writer.join(timeout=120)
        assert len(waits) >= 2, f"{len(waits)} single event(s) stored during the large write"
        assert max(waits) < 1.0, f"single events waited {waits}"
        assert store.get_batch(result[0]).accepted_count == len(big)
        stream = store.batches("add")[0]
        assert stream.accepted_count >= len(waits)
    finally:
        store.dispose()
