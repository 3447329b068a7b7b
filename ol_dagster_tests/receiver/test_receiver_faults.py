"""The receiver under faults: killed mid-write, its database restarted, slow clients, concurrency.

Every test ends by reading the store back and comparing it with what the clients were told: an
event answered with a 200 is stored exactly once, in the batch the answer named; nothing refused
is stored; no batch is ever half written or appended to after it was sealed.

The receivers run the way a deployment runs them: ``ol-dagster serve`` as separate processes (the
SIGKILL and two-receiver tests), or uvicorn in a thread of the test process.
"""

from __future__ import annotations

import json
import os
import re
import select as io_select
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import make_url

from ol_dagster import db
from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.catalog.embedded.tables import users
from ol_dagster.catalog.ledger.entries import Ledger as SyncLedger
from ol_dagster.db import open_engine
from ol_dagster.receiver.app import create_app
from ol_dagster.receiver.server import serve_in_background
from ol_dagster.settings import load_settings
from ol_dagster.store import BatchKind, BatchStatus, EventStore
from ol_dagster.store.schema import batches, events
from ol_dagster_tests.conftest import TOKENS, events_of, settings_data
from ol_dagster_tests.postgres import PostgresServer

LINEAGE = "/api/v1/lineage"
BATCH = "/api/v1/lineage/batch"
SNAP = TOKENS["OL_TEST_TOKEN_SNAP"]
ADD = TOKENS["OL_TEST_TOKEN_ADD"]
HEADERS = {"Authorization": f"Bearer {SNAP}", "Content-Type": "application/json"}


# -- helpers ---------------------------------------------------------------------------------------


def _wait_until(condition: Callable[[], bool], timeout: float, step: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return condition()


@dataclass
class Served:
    """``ol-dagster serve`` in its own process."""

    proc: subprocess.Popen
    log: Path
    log_start: int  # the log's size when the process started (a log may be appended to)
    url: str = ""  # known once the server has bound its port

    def bound_url(self) -> str:
        """The URL uvicorn says it runs on (the port it bound, asked for as port 0), or ""."""
        text = self.log.read_bytes()[self.log_start :].decode(errors="replace")
        found = re.findall(r"ol-dagster receiver on (http://127\.0\.0\.1:\d+) for: ", text)
        return found[-1] if found else ""

    def ready(self) -> bool:
        self.url = self.url or self.bound_url()
        if not self.url:
            return False
        try:
            return httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


def _spawn(settings: Path, log: Path) -> Served:
    """``ol-dagster serve --port 0``: the server binds a free port itself (nothing can take it
    between a probe and the bind); ``ready`` reads which from its log."""
    start = log.stat().st_size if log.exists() else 0
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ol_dagster.commands.cli",
            "--settings",
            str(settings),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
        ],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        env=dict(os.environ),
    )
    return Served(proc, log, start)


def _await_ready(served: Served) -> None:
    ok = _wait_until(lambda: served.proc.poll() is not None or served.ready(), 60, 0.05)
    if not ok or served.proc.poll() is not None:
        pytest.fail(f"ol-dagster serve did not start:\n{served.output()}")


@contextmanager
def receivers(settings: Path, logs: list[Path]) -> Iterator[list[Served]]:
    """Start one receiver process per log file (concurrently), kill them all afterwards."""
    started = [_spawn(settings, log) for log in logs]
    try:
        for served in started:
            _await_ready(served)
        yield started
    finally:
        for served in started:
            if served.proc.poll() is None:
                served.proc.kill()
            served.proc.wait(timeout=30)


def _write_settings(directory: Path, store_url: str, **snap: Any) -> Path:
    data = settings_data(directory, **snap)
    data["store"]["url"] = store_url
    path = directory / "ol_dagster.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@dataclass
class Answer:
    """What one post sent and what the client was told."""

    path: str
    definition: str
    run_ids: list[str]
    status: int | None  # None: no answer (connection error)
    body: dict[str, Any] | None = None
    error: str | None = None


@dataclass
class Ledger:
    """Every post's outcome, from many threads."""

    answers: list[Answer] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def post(
        self,
        client: httpx.Client,
        path: str,
        token: str,
        definition: str,
        evs: list[dict[str, Any]],
    ) -> Answer:
        body = evs[0] if path == LINEAGE else {"events": evs}
        ids = [e["run"]["runId"] for e in evs]
        try:
            resp = client.post(path, json=body, headers={"Authorization": f"Bearer {token}"})
            try:
                parsed = resp.json()
            except ValueError:
                parsed = {"text": resp.text[:500]}
            answer = Answer(path, definition, ids, resp.status_code, parsed)
        except httpx.HTTPError as exc:
            answer = Answer(path, definition, ids, None, error=repr(exc))
        with self.lock:
            self.answers.append(answer)
        return answer

    def ok(self) -> list[Answer]:
        return [a for a in self.answers if a.status == 200]


def _stored(store: EventStore) -> dict[str, tuple[int, int]]:
    """run id -> (batch id, position) of every stored event; a run id stored twice fails."""
    with store.engine.connect() as conn:
        rows = conn.execute(select(events.c.run_id, events.c.batch_id, events.c.position)).all()
    counts = Counter(r[0] for r in rows)
    twice = [k for k, n in counts.items() if n > 1]
    assert not twice, f"{len(twice)} event(s) stored more than once, e.g. {twice[:3]}"
    return {r[0]: (r[1], r[2]) for r in rows}


def _assert_batches_whole(store: EventStore) -> None:
    """Every batch holds exactly the events its counters say, at positions 0..n-1."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(
                events.c.batch_id,
                func.count(),
                func.min(events.c.position),
                func.max(events.c.position),
                func.count(events.c.position.distinct()),
            ).group_by(events.c.batch_id)
        ).all()
    per_batch = {r[0]: r[1:] for r in rows}
    for b in store.batches():
        n, lo, hi, distinct = per_batch.get(b.id, (0, None, None, 0))
        assert n == b.accepted_count, f"batch {b.id}: {n} events stored, {b.accepted_count} counted"
        if n:
            assert (lo, hi, distinct) == (0, n - 1, n), f"batch {b.id}: positions not 0..{n - 1}"
    assert len({b.id for b in store.batches()}) == len(store.batches())


def _assert_store_matches(store: EventStore, ledger: Ledger) -> None:
    """The store holds exactly the events answered with a 200, each in the batch it was told."""
    stored = _stored(store)
    accepted: dict[str, Answer] = {}
    for answer in ledger.ok():
        for run_id in answer.run_ids:
            assert run_id not in accepted, "the test posts every run id once"
            accepted[run_id] = answer
    assert set(stored) == set(accepted), (
        f"{len(set(accepted) - set(stored))} accepted event(s) missing, "
        f"{len(set(stored) - set(accepted))} stored event(s) never accepted"
    )
    for run_id, answer in accepted.items():
        assert answer.body is not None
        assert stored[run_id][0] == answer.body["batchId"], "stored in the batch the answer named"
    posted = [a.body["batchId"] for a in ledger.ok() if a.path == BATCH and a.body]
    assert len(posted) == len(set(posted)), "every batch post got its own batch id"
    by_id = {b.id: b for b in store.batches()}
    for answer in ledger.ok():
        batch = by_id[answer.body["batchId"]]  # type: ignore[index]
        assert batch.definition == answer.definition
        if answer.path == BATCH:
            assert batch.kind is BatchKind.POSTED
            assert batch.accepted_count == len(answer.run_ids)
        else:
            assert batch.kind is BatchKind.STREAM
    _assert_batches_whole(store)


def _open_stream_batches(store: EventStore) -> Counter[str]:
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(batches.c.definition).where(batches.c.status == BatchStatus.OPEN)
        ).all()
    return Counter(r[0] for r in rows)


class Sealer(threading.Thread):
    """The sensor's part: seal due stream batches (window 0) again and again, from its own engine,
    recording what each sealed batch held when it was sealed."""

    def __init__(self, url: str, definitions: list[str]) -> None:
        super().__init__(name="sealer", daemon=True)
        self.store = EventStore(url)
        self.definitions = definitions
        self.stop = threading.Event()
        self.sealed: dict[int, tuple[int, int]] = {}  # id -> (accepted_count, events stored)
        self.max_open: dict[str, int] = {}
        self.rounds = 0
        self.error: BaseException | None = None

    def _seal(self, force: bool = False) -> None:
        for definition in self.definitions:
            ids = self.store.seal_due(
                definition, window_seconds=0, max_events=1_000_000, force=force
            )
            for batch_id in ids:
                assert batch_id not in self.sealed, f"batch {batch_id} sealed twice"
                batch = self.store.get_batch(batch_id)
                assert batch.status is BatchStatus.SEALED
                n = sum(1 for _ in self.store.iter_events(batch_id))
                self.sealed[batch_id] = (batch.accepted_count, n)
        for definition, n in _open_stream_batches(self.store).items():
            self.max_open[definition] = max(self.max_open.get(definition, 0), n)
        self.rounds += 1

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self._seal()
                time.sleep(0.005)
        except BaseException as exc:  # reported by finish()
            self.error = exc

    def finish(self) -> None:
        self.stop.set()
        self.join(timeout=60)
        if self.error is not None:
            raise self.error
        self._seal(force=True)

    def check(self) -> None:
        """A sealed batch never changed after it was sealed; never two open batches at once."""
        assert self.rounds > 1
        assert all(n <= 1 for n in self.max_open.values()), self.max_open
        for batch_id, (count, n) in self.sealed.items():
            batch = self.store.get_batch(batch_id)
            assert count == n, f"batch {batch_id} was sealed holding {n} events, counting {count}"
            assert (batch.status, batch.accepted_count) == (BatchStatus.SEALED, count), (
                f"batch {batch_id} was appended to after it was sealed"
            )
            assert sum(1 for _ in self.store.iter_events(batch_id)) == n
        assert not _open_stream_batches(self.store), "the final forced seal left a batch open"
        self.store.dispose()


# -- (a) SIGKILL while a large batch is being written ----------------------------------------------

BIG = 20_000


@pytest.fixture(scope="module")
def big_batch() -> tuple[bytes, int]:
    posted = events_of(BIG, tag="big")
    return json.dumps({"events": posted}).encode(), BIG


def _sqlite_writing(db: Path) -> Callable[[], bool]:
    """True once the receiver's write transaction spills pages into the WAL (mid-write)."""
    wal = Path(f"{db}-wal")
    baseline = wal.stat().st_size if wal.exists() else 0
    return lambda: wal.exists() and wal.stat().st_size > baseline + 1_048_576


def _pg_writing(url: str) -> tuple[Callable[[], bool], Callable[[], bool], Callable[[], None]]:
    """(writing, idle, close): a write transaction inserting events is running; no backend of
    the receiver is left in the database."""
    name = make_url(url).database
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    conn = engine.connect()

    def writing() -> bool:
        return bool(
            conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = :n "
                    "AND backend_xid IS NOT NULL "
                    "AND (query ILIKE 'COPY ol_events%' OR query ILIKE 'INSERT INTO ol_events%')"
                ),
                {"n": name},
            ).scalar()
        )

    def idle() -> bool:
        return not conn.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = :n "
                "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
            ),
            {"n": name},
        ).scalar()

    def close() -> None:
        conn.close()
        engine.dispose()

    return writing, idle, close


def _kill_during_post(directory: Path, url: str, body: bytes, n: int) -> str:
    """Post ``body`` to a fresh receiver, SIGKILL it once it writes, check the store; the
    outcome says where the kill landed."""
    settings = _write_settings(directory, url)
    close: Callable[[], None] = lambda: None  # noqa: E731
    result: dict[str, Any] = {}
    with receivers(settings, [directory / "receiver.log"]) as [served]:
        if url.startswith("sqlite"):
            writing, idle = _sqlite_writing(Path(make_url(url).database or "")), (lambda: True)
        else:
            writing, idle, close = _pg_writing(url)

        def send() -> None:
            try:
                result["resp"] = httpx.post(
                    f"{served.url}{BATCH}", content=body, headers=HEADERS, timeout=120
                )
            except httpx.HTTPError as exc:
                result["error"] = exc

        client = threading.Thread(target=send)
        client.start()
        _wait_until(lambda: writing() or not client.is_alive(), 60, 0.002)
        saw_write = client.is_alive() and writing()
        os.kill(served.proc.pid, signal.SIGKILL)
        served.proc.wait(timeout=30)
        client.join(timeout=60)
        assert not client.is_alive()
        assert _wait_until(idle, 30, 0.05), "the killed receiver's transaction lingers"
        close()

    store = EventStore(url)  # reopening recovers the store (SQLite rolls the WAL back)
    try:
        # the chunks committed before the kill: a RECEIVING batch nobody reads, removed as the
        # next receiver's start does (its writer is gone)
        leftover = store.batches(statuses=[BatchStatus.RECEIVING])
        assert store.remove_abandoned() == [b.id for b in leftover]
        stored = store.batches()
        _assert_batches_whole(store)
        with store.engine.connect() as conn:
            n_events = conn.execute(select(func.count()).select_from(events)).scalar()
        assert n_events == sum(b.accepted_count for b in stored), "no event outside a batch"
        assert len(stored) <= 1, "one post is at most one batch"
        if stored:  # never a part of the batch: all of it
            assert (stored[0].accepted_count, stored[0].status) == (n, BatchStatus.SEALED)
    finally:
        store.dispose()
    resp = result.get("resp")
    if resp is not None:
        # only an answer sent before the kill can reach the client, and then the batch is stored
        assert resp.status_code == 200 and stored, f"a killed receiver answered {resp.text}"
        return "answered before the kill"
    assert "error" in result, "the client learned nothing: its connection broke"
    if stored:
        return "killed after the commit, before the answer"
    return "killed mid-write" if saw_write else "killed before the write"


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_sigkill_while_writing_a_large_batch_leaves_no_half_batch(
    backend: str,
    tmp_path: Path,
    tokens: dict[str, str],
    big_batch: tuple[bytes, int],
    request: pytest.FixtureRequest,
):
    """``ol-dagster serve`` killed with SIGKILL while it writes a 20,000-event batch: the client
    gets no 200 and the reopened store holds no batch, or (killed after the commit) all of it."""
    body, n = big_batch
    outcomes: list[str] = []
    for attempt in range(5):  # the kill must land inside the write transaction at least once
        directory = tmp_path / f"attempt{attempt}"
        directory.mkdir()
        if backend == "sqlite":
            url = f"sqlite:///{directory / 'store.db'}"
        else:
            url = request.getfixturevalue("pg_server").fresh_database("f")
        outcomes.append(_kill_during_post(directory, url, body, n))
        if outcomes[-1] == "killed mid-write":
            break
    assert "killed mid-write" in outcomes, f"the kill never landed during the write: {outcomes}"

    # A receiver started again on the killed one's store takes the producer's retry.
    with receivers(directory / "ol_dagster.yaml", [directory / "again.log"]) as [served]:
        retry = events_of(3, tag="retry")
        resp = httpx.post(
            f"{served.url}{BATCH}", json={"events": retry}, headers=HEADERS, timeout=30
        )
        assert resp.status_code == 200, resp.text
    store = EventStore(url)
    try:
        [batch] = store.batches()
        assert [json.loads(e.raw) for e in store.iter_events(batch.id)] == retry
    finally:
        store.dispose()


# -- (b) PostgreSQL restarted while producers post -------------------------------------------------


@pytest.mark.postgres
def test_postgres_restart_mid_run_is_503_then_recovers_with_nothing_half_written(
    write_settings: Callable[..., Path],
    tokens: dict[str, str],
    pg_server: PostgresServer,
    pg_url: str,
):
    """Posts while PostgreSQL restarts get a retriable 503 (never a 500, never a hang); the
    receiver reconnects by itself; the store holds every 200-answered event once and no part of
    a refused batch."""
    store = EventStore(pg_url)
    settings = load_settings(write_settings())
    ledger = Ledger()
    stop = threading.Event()
    restarted = threading.Event()
    after_restart: list[int] = []

    def producer(n: int, url: str) -> None:
        with httpx.Client(base_url=url, timeout=60) as client:
            i = 0
            while not stop.is_set():
                if i % 2:
                    answer = ledger.post(client, BATCH, SNAP, "snap", events_of(3, tag=f"p{n}"))
                else:
                    answer = ledger.post(client, LINEAGE, SNAP, "snap", events_of(1, tag=f"p{n}"))
                if restarted.is_set() and answer.status == 200:
                    after_restart.append(1)
                i += 1
                time.sleep(0.005)

    try:
        with serve_in_background(create_app(settings, store)) as url:
            threads = [threading.Thread(target=producer, args=(n, url)) for n in range(2)]
            for t in threads:
                t.start()
            try:
                assert _wait_until(lambda: len(ledger.ok()) >= 5, 30)
                pg_server.restart()
                restarted.set()
                assert _wait_until(lambda: len(after_restart) >= 10, 30), "no recovery"
            finally:
                stop.set()
                for t in threads:
                    t.join(timeout=60)
            assert httpx.get(f"{url}/healthz").status_code == 200
        statuses = Counter(a.status for a in ledger.answers)
        assert set(statuses) <= {200, 503}, (
            statuses,
            [a for a in ledger.answers if a.status not in (200, 503)][:3],
        )
        assert statuses[503] >= 1, f"no post fell into the restart: {statuses}"
        for a in ledger.answers:
            if a.status == 503:
                assert a.body is not None
                assert (a.body["status"], a.body["retriable"], a.body["batchId"]) == (
                    "failure",
                    True,
                    None,
                )
        _assert_store_matches(store, ledger)
    finally:
        store.dispose()


def test_a_locked_sqlite_store_holds_posts_then_answers_503_and_loses_nothing(
    write_settings: Callable[..., Path],
    tokens: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
):
    """Another process holds the SQLite store's write lock (a long sync, a backup, a person in
    the sqlite3 shell): a post waits for it up to the busy timeout (here 0.5 s instead of 30),
    gets a retriable 503 after that, and is stored once the lock is gone; nothing half written."""
    monkeypatch.setattr(db, "SQLITE_BUSY_TIMEOUT_MS", 500)
    path = tmp_path / "store.db"
    store = EventStore(f"sqlite:///{path}", background_checkpoints=True)
    settings = load_settings(write_settings())
    first, second = events_of(3, tag="first"), events_of(2, tag="second")
    locker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        with (
            serve_in_background(create_app(settings, store)) as url,
            httpx.Client(base_url=url, headers=HEADERS, timeout=30) as client,
        ):
            locker.execute("BEGIN IMMEDIATE")  # the write lock, held
            t0 = time.monotonic()
            refused = client.post(BATCH, json={"events": first})
            waited = time.monotonic() - t0
            assert refused.status_code == 503, refused.text
            assert refused.json()["retriable"] is True
            assert waited >= 0.45, "the post waited for the lock before giving up"

            release = threading.Timer(0.2, locker.execute, args=("ROLLBACK",))
            release.start()
            held = client.post(BATCH, json={"events": second})  # waits 0.2 s, then stored
            release.join()
            assert held.status_code == 200, held.text
            assert held.json()["summary"]["accepted"] == 2

            retried = client.post(BATCH, json={"events": first})  # the producer's retry
            assert retried.status_code == 200, retried.text
        assert [b.accepted_count for b in store.batches()] == [2, 3]
        assert sum(1 for b in store.batches() for _ in store.iter_events(b.id)) == 5
    finally:
        locker.close()
        store.dispose()


# -- (c) slow clients ------------------------------------------------------------------------------


def test_slow_clients_do_not_block_others(
    write_settings: Callable[..., Path], tokens: dict[str, str], tmp_path: Path
):
    store = EventStore(f"sqlite:///{tmp_path / 'store.db'}")
    settings = load_settings(write_settings())
    slow_events = [events_of(2, tag=f"slow{i}") for i in range(3)]
    bodies = [json.dumps({"events": e}).encode() for e in slow_events]
    try:
        with (
            serve_in_background(create_app(settings, store)) as url,
            httpx.Client(base_url=url, timeout=30) as client,
        ):
            port = int(url.rsplit(":", 1)[1])
            socks = []
            for body in bodies:
                sock = socket.create_connection(("127.0.0.1", port), timeout=30)
                sock.sendall(
                    (
                        f"POST {BATCH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {SNAP}\r\n"
                        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                    ).encode()
                )
                socks.append(sock)
            # a client that gives up halfway: nothing of it may be stored
            quitter = socket.create_connection(("127.0.0.1", port), timeout=30)
            half = bodies[0][: len(bodies[0]) // 2]
            quitter.sendall(
                (
                    f"POST {BATCH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {SNAP}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(bodies[0])}\r\n\r\n"
                ).encode()
                + half[:-1]
            )

            fast = events_of(2, tag="fast")
            for i in range(40):  # 1 byte per 50 ms of each slow body: 2 s of dribbling
                for sock, body in zip(socks, bodies, strict=True):
                    sock.sendall(body[i : i + 1])
                if i in (10, 30):
                    # this thread alone feeds the slow bodies: a post that waited for them would
                    # never be answered (the client's timeout), one that waited for the server to
                    # give up on them would find them closed. No clock: a loaded machine is slow.
                    resp = client.post(
                        BATCH, json={"events": fast[i // 20 : i // 20 + 1]}, headers=HEADERS
                    )
                    assert resp.status_code == 200, resp.text
                    assert client.get("/healthz").status_code == 200
                    answered, _, _ = io_select.select(socks, [], [], 0)
                    assert not answered, "a slow client was answered or closed mid-body"
                time.sleep(0.05)
            quitter.close()

            for sock, body in zip(socks, bodies, strict=True):
                sock.sendall(body[40:])
            answers = []
            for sock in socks:
                status, answer = _read_answer(sock)
                assert status == 200, answer
                answers.append(answer)
        stored = {
            b.id: [json.loads(e.raw) for e in store.iter_events(b.id)] for b in store.batches()
        }
        expected = {a["batchId"]: evs for a, evs in zip(answers, slow_events, strict=True)}
        fast_batches = {k: v for k, v in stored.items() if k not in expected}
        assert {k: stored[k] for k in expected} == expected
        assert sorted(fast_batches.values(), key=str) == sorted(([e] for e in fast), key=str)
        _assert_batches_whole(store)
    finally:
        store.dispose()


def _read_answer(sock: socket.socket) -> tuple[int, dict[str, Any]]:
    """Read one HTTP/1.1 response with a Content-Length from a raw socket."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before the answer: {data!r}"
        data += chunk
    head, _, payload = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    length = next(
        int(v) for k, _, v in (h.partition(":") for h in lines) if k.lower() == "content-length"
    )
    while len(payload) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed mid-answer"
        payload += chunk
    sock.close()
    return int(status_line.split()[1]), json.loads(payload)


# -- (d) single events posted concurrently while the sensor seals ----------------------------------


def test_concurrent_posts_while_sealing(
    write_settings: Callable[..., Path], tokens: dict[str, str], event_store: EventStore
):
    settings = load_settings(write_settings())
    ledger = Ledger()
    sealer = Sealer(event_store.url, ["snap", "add"])

    def producer(n: int, url: str) -> None:
        with httpx.Client(base_url=url, timeout=60) as client:
            for i in range(20):
                token, definition = (SNAP, "snap") if (n + i) % 3 else (ADD, "add")
                ledger.post(client, LINEAGE, token, definition, events_of(1, tag=f"t{n}_{i}"))

    with serve_in_background(create_app(settings, event_store)) as url:
        sealer.start()
        threads = [threading.Thread(target=producer, args=(n, url)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        sealer.finish()
    statuses = Counter(a.status for a in ledger.answers)
    assert statuses == {200: 160}, [a for a in ledger.answers if a.status != 200][:3]
    sealer.check()
    _assert_store_matches(event_store, ledger)
    stream = [b for b in event_store.batches() if b.kind is BatchKind.STREAM]
    assert len(stream) > 2, "the sealing interleaved with the posts"
    assert all(b.status is BatchStatus.SEALED for b in stream)
    assert set(sealer.sealed) == {b.id for b in stream}, "every stream batch was sealed once"


# -- (e) two receiver processes on one store, a third party sealing --------------------------------


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_two_receiver_processes_and_a_sealer_on_one_store(
    backend: str, tmp_path: Path, tokens: dict[str, str], request: pytest.FixtureRequest
):
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'shared' / 'store.db'}"
    else:
        url = request.getfixturevalue("pg_server").fresh_database("f")
    settings = _write_settings(tmp_path, url)
    ledger = Ledger()
    with receivers(settings, [tmp_path / "r1.log", tmp_path / "r2.log"]) as served:
        sealer = Sealer(url, ["snap", "add"])
        sealer.start()

        def producer(n: int) -> None:
            with httpx.Client(base_url=served[n % 2].url, timeout=60) as client:
                for i in range(24):
                    token, definition = (SNAP, "snap") if i % 4 else (ADD, "add")
                    tag = f"p{n}_{i}"
                    if i % 3 == 0:
                        ledger.post(client, BATCH, token, definition, events_of(5, tag=tag))
                    else:
                        ledger.post(client, LINEAGE, token, definition, events_of(1, tag=tag))

        threads = [threading.Thread(target=producer, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        sealer.finish()
        for s in served:
            assert s.proc.poll() is None, s.output()
    statuses = Counter(a.status for a in ledger.answers)
    assert statuses == {200: 96}, [a for a in ledger.answers if a.status != 200][:3]
    sealer.check()
    store = EventStore(url)
    try:
        _assert_store_matches(store, ledger)
        accepted = sum(len(a.run_ids) for a in ledger.ok())
        assert sum(b.accepted_count for b in store.batches()) == accepted == 4 * (8 * 5 + 16)
        assert not _open_stream_batches(store)
    finally:
        store.dispose()


@pytest.mark.postgres
def test_receivers_starting_at_once_on_an_empty_database(
    tmp_path: Path, tokens: dict[str, str], pg_server: PostgresServer
):
    """Receivers behind a load balancer start together: both create or find the schema."""
    url = pg_server.fresh_database("f")
    settings = _write_settings(tmp_path, url)
    with receivers(settings, [tmp_path / f"r{i}.log" for i in range(3)]) as served:
        for s in served:
            resp = httpx.post(
                f"{s.url}{BATCH}", json={"events": events_of(1)}, headers=HEADERS, timeout=30
            )
            assert resp.status_code == 200, resp.text
    store = EventStore(url)
    try:
        assert len(store.batches()) == 3
    finally:
        store.dispose()


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_stores_opened_at_once_create_and_migrate_the_schema_once(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
):
    """The same race without process start-up jitter: four stores open a fresh database at the
    same instant (before the fix, three of them failed on PostgreSQL with a UniqueViolation on
    pg_type), then four open it again while a migration step is due: it runs once."""
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
    else:
        url = request.getfixturevalue("pg_server").fresh_database("f")

    def open_together() -> list[str]:
        barrier = threading.Barrier(4)
        errors: list[str] = []

        def open_one() -> None:
            barrier.wait()
            try:
                EventStore(url).dispose()
            except Exception as exc:  # reported below
                errors.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=open_one) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        return errors

    assert open_together() == []

    from ol_dagster.store import schema

    steps: list[int] = []

    def next_step(conn: Any) -> None:
        steps.append(1)
        conn.execute(text("ALTER TABLE ol_batches ADD COLUMN race_note VARCHAR(20)"))

    current = schema.SCHEMA_VERSION
    monkeypatch.setattr(schema, "SCHEMA_VERSION", current + 1)
    monkeypatch.setattr(schema, "MIGRATIONS", {current: next_step})
    assert open_together() == []
    assert steps == [1], "a migration step runs once, whoever gets to it first"


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_catalogs_and_ledgers_opened_at_once_create_their_tables_and_one_sync_user(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
):
    """Runs, a sensor and the webserver open the embedded catalog (and the sync ledger) of an
    empty database at the same instant: every one opens, and the catalog has one sync user
    (before the fix, PostgreSQL raced on CREATE TABLE and on inserting the first user)."""
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'catalog.db'}"
    else:
        url = request.getfixturevalue("pg_server").fresh_database("f")
    barrier = threading.Barrier(6)
    errors: list[str] = []

    def open_one(i: int) -> None:
        barrier.wait()
        try:
            if i % 2:
                EmbeddedCatalog(url).close()
            else:
                engine = create_engine(url) if backend == "postgresql" else open_engine(url)
                try:
                    SyncLedger(engine, "main")
                finally:
                    engine.dispose()
        except Exception as exc:  # reported below
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=open_one, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    catalog = EmbeddedCatalog(url)
    try:
        with catalog.engine.connect() as conn:
            assert conn.execute(select(users.c.name)).scalars().all() == ["ol-dagster"]
    finally:
        catalog.close()
