"""The receiver's limits before authentication, on a real loopback server (issue 15).

Each test serves ``create_app`` through ``serve_guarded_in_background`` (uvicorn, the guarded h11
protocol ``ol-dagster serve`` runs) with small limits, and plays the hostile or unlucky client
with raw sockets: oversized or too many headers, headers or a body sent byte by byte, idle
sockets, more connections or large posts than allowed, a store that refuses writes. Deadlines in
these tests are generous multiples of the configured limits: a loaded machine is slow, never
early.
"""

from __future__ import annotations

import gc
import json
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import event as sa_event

from ol_dagster.receiver.app import create_app
from ol_dagster.receiver.server import Background, serve_guarded_in_background
from ol_dagster.settings import parse_settings
from ol_dagster.store import EventStore
from ol_dagster_tests.conftest import TOKENS, events_of, run_event, settings_data

SNAP = TOKENS["OL_TEST_TOKEN_SNAP"]
AUTH = {"Authorization": f"Bearer {SNAP}"}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EventStore]:
    s = EventStore(f"sqlite:///{tmp_path / 'store.db'}")
    yield s
    s.dispose()


@contextmanager
def receiver(
    tmp_path: Path, store: EventStore, tokens: dict[str, str], **limits: Any
) -> Iterator[Background]:
    data = settings_data(tmp_path)
    data["receiver"] = limits
    app = create_app(parse_settings(data), store)
    with serve_guarded_in_background(app) as served:
        yield served


def _address(served: Background) -> tuple[str, int]:
    host, port = served.url.removeprefix("http://").split(":")
    return host, int(port)


def _connect(served: Background) -> socket.socket:
    sock = socket.create_connection(_address(served), timeout=10)
    return sock


def _read_all(sock: socket.socket, timeout: float = 10) -> bytes:
    """What the server sends until it closes the connection (or ``timeout`` passes)."""
    sock.settimeout(timeout)
    chunks = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        except ConnectionResetError:
            break
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
    raise AssertionError(f"the server kept the connection open {timeout} s: {chunks!r}")


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def _healthy(served: Background) -> bool:
    return httpx.get(f"{served.url}/healthz", timeout=10).status_code == 200


# -- headers -------------------------------------------------------------------------------------


def test_headers_beyond_max_header_bytes_are_refused_with_431(tmp_path, store, tokens):
    with receiver(tmp_path, store, tokens, maxHeaderBytes=4096) as served:
        sock = _connect(served)
        sock.sendall(b"POST /api/v1/lineage HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 64 * 1024)
        answer = _read_all(sock)
        assert _status(answer) == 431, answer
        assert b"receiver.maxHeaderBytes" in answer
        # a request within the limit is served as before
        assert httpx.post(f"{served.url}/api/v1/lineage", json=run_event(), headers=AUTH).is_success
        assert _healthy(served)


def test_more_header_fields_than_max_header_count_get_431_before_the_token_is_read(
    tmp_path, store, tokens
):
    with receiver(tmp_path, store, tokens, maxHeaderCount=20) as served:
        many = {f"x-h{i}": "1" for i in range(40)}
        resp = httpx.post(
            f"{served.url}/api/v1/lineage", json=run_event(), headers={**AUTH, **many}
        )
        assert resp.status_code == 431
        assert "receiver.maxHeaderCount (20)" in resp.json()["message"]
        assert store.batches() == []
        assert httpx.post(f"{served.url}/api/v1/lineage", json=run_event(), headers=AUTH).is_success


# -- time ----------------------------------------------------------------------------------------


def test_slow_headers_idle_sockets_and_slow_bodies_are_closed_at_their_deadlines(
    tmp_path, store, tokens
):
    with receiver(
        tmp_path, store, tokens, headerTimeoutSeconds=0.5, bodyTimeoutSeconds=1.0
    ) as served:
        idle = _connect(served)  # sends nothing at all
        trickle = _connect(served)  # slowloris: a header byte now and then
        trickle.sendall(b"POST /api/v1/lineage HTTP/1.1\r\nHost: x\r\n")
        body = json.dumps(run_event()).encode()
        slow_body = _connect(served)
        slow_body.sendall(
            b"POST /api/v1/lineage HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (SNAP.encode(), len(body), body[:10])
        )
        stop = threading.Event()
        trickled: list[int] = []  # header lines sent: a count, not a clock (a loaded machine)

        def trickle_headers() -> None:
            for i in range(100):
                if stop.wait(0.1):
                    return
                try:
                    trickle.sendall(b"X-%d: 1\r\n" % i)
                except OSError:
                    return
                trickled.append(i)

        feeder = threading.Thread(target=trickle_headers)
        feeder.start()
        try:
            for sock in (idle, trickle, slow_body):
                _read_all(sock, timeout=15)  # raises if the server keeps it open
        finally:
            stop.set()
            feeder.join()
        # closed by its deadline (0.5 s from the connection), not by silence after the trickle's
        # last header: a deadline moved by each byte would have let all 100 through
        assert len(trickled) < 100, "the trickling client was closed only once it stopped"
        assert served.counters.timed_out == 3
        assert store.batches() == []  # the slow body's event was never stored
        assert _healthy(served)


def test_keep_alive_connection_is_closed_when_idle_and_its_next_headers_are_timed(
    tmp_path, store, tokens
):
    with receiver(tmp_path, store, tokens, keepAliveSeconds=1, headerTimeoutSeconds=1) as served:
        sock = _connect(served)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.2)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # the second request never ends
        answer = _read_all(sock, timeout=15)
        assert answer.count(b"HTTP/1.1 200") == 1


# -- connections and requests -------------------------------------------------------------------


def test_connections_beyond_max_connections_get_503_with_retry_after_and_are_closed(
    tmp_path, store, tokens
):
    with receiver(tmp_path, store, tokens, maxConnections=5, retryAfterSeconds=7) as served:
        with ExitStack() as held:
            for _ in range(5):
                held.callback(_connect(served).close)
            time.sleep(0.2)  # the server has accepted them
            extra = _connect(served)
            answer = _read_all(extra)
            assert _status(answer) == 503
            assert b"retry-after: 7" in answer.lower()
            assert served.counters.refused_connections >= 1
        # once the held connections are gone, new ones are served again
        assert _wait(lambda: _healthy(served))


def _request(sock: socket.socket, body: bytes) -> bytes:
    """One single-event post on a kept-alive socket: its answer, or b"" if the server closed."""
    sock.sendall(
        b"POST /api/v1/lineage HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
        % (SNAP.encode(), len(body), body)
    )
    sock.settimeout(30)
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return b""
        if not chunk:
            return b""
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next(
        int(h.split(b":")[1])
        for h in head.split(b"\r\n")
        if h.lower().startswith(b"content-length")
    )
    while len(rest) < length:
        rest += sock.recv(65536)
    return head + b"\r\n\r\n" + rest


def test_a_client_that_waits_retry_after_retries_on_the_same_connection(tmp_path, tokens):
    """A client told to retry after N seconds (urllib3 and the openlineage client honour
    ``Retry-After``) comes back on its kept-alive connection after N seconds. The server must
    not close that connection in between: with ``Retry-After`` equal to the keep-alive (5 and 5,
    the defaults) the retry met the server's close and the client got a reset, not an answer."""
    home = tmp_path / "home"
    home.mkdir()
    store = EventStore(f"sqlite:///{home / 'store.db'}")
    try:
        with receiver(tmp_path, store, tokens, keepAliveSeconds=1, retryAfterSeconds=3) as served:
            sock = _connect(served)
            body = json.dumps(run_event()).encode()
            store.dispose()
            home.rename(tmp_path / "away")  # the store is unreachable: 503, retry later
            refused = _request(sock, body)
            assert _status(refused) == 503, refused
            assert b"retry-after: 3" in refused.lower()
            (tmp_path / "away").rename(home)
            time.sleep(3)  # as told; three times the keep-alive
            answer = _request(sock, body)
            assert answer, "the server closed the connection the client was told to retry on"
            assert _status(answer) == 200, answer
            sock.close()
        assert len(store.batches()) == 1
    finally:
        store.dispose()


def _wait(condition, timeout: float = 10) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    return False


def _start_slow_post(served: Background, body_len: int, first: bytes) -> socket.socket:
    sock = _connect(served)
    sock.sendall(
        b"POST /api/v1/lineage/batch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
        % (SNAP.encode(), body_len, first)
    )
    return sock


def test_requests_beyond_max_concurrent_requests_get_503_with_retry_after(tmp_path, store, tokens):
    with receiver(tmp_path, store, tokens, maxConcurrentRequests=2) as served:
        held = [_start_slow_post(served, 1000, b'{"events": [') for _ in range(2)]
        time.sleep(0.3)  # both are in progress, reading their bodies
        resp = httpx.post(f"{served.url}/api/v1/lineage", json=run_event(), headers=AUTH)
        assert resp.status_code == 503
        assert resp.headers["retry-after"] == "5"
        assert resp.json()["retriable"] is True
        for sock in held:
            sock.close()
        assert _wait(lambda: _healthy(served))
        assert httpx.post(f"{served.url}/api/v1/lineage", json=run_event(), headers=AUTH).is_success


def test_large_posts_beyond_max_concurrent_large_posts_get_503_small_ones_go_on(
    tmp_path, store, tokens
):
    with receiver(
        tmp_path, store, tokens, largePostBytes=4096, maxConcurrentLargePosts=1
    ) as served:
        big = json.dumps({"events": events_of(60)}).encode()
        assert len(big) > 8192
        held = _start_slow_post(served, len(big), big[:6000])  # large, still sending
        time.sleep(0.3)
        second = httpx.post(
            f"{served.url}/api/v1/lineage/batch",
            content=big,
            headers={**AUTH, "Content-Type": "application/json"},
        )
        assert second.status_code == 503
        assert "receiver.maxConcurrentLargePosts (1)" in second.json()["message"]
        assert second.headers["retry-after"] == "5"
        small = httpx.post(f"{served.url}/api/v1/lineage", json=run_event(), headers=AUTH)
        assert small.status_code == 200
        held.sendall(big[6000:])  # the held post completes and is stored whole
        answer = _read_all_response(held)
        assert b"60 event(s) accepted" in answer
        # its slot is free again
        again = httpx.post(
            f"{served.url}/api/v1/lineage/batch",
            content=big,
            headers={**AUTH, "Content-Type": "application/json"},
        )
        assert again.status_code == 200, again.text


def _read_all_response(sock: socket.socket) -> bytes:
    sock.settimeout(30)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int(
        next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[
            1
        ]
    )
    while len(rest) < length:
        rest += sock.recv(65536)
    sock.close()
    return head + b"\r\n\r\n" + rest


# -- large posts off the event loop --------------------------------------------------------------


def test_healthz_and_small_posts_are_answered_while_a_large_post_is_processed(
    tmp_path, store, tokens
):
    with receiver(tmp_path, store, tokens) as served:
        big = json.dumps({"events": events_of(20_000, tag="big")}).encode()
        done = threading.Event()
        result: dict[str, Any] = {}

        def post_big() -> None:
            resp = httpx.post(
                f"{served.url}/api/v1/lineage/batch",
                content=big,
                headers={**AUTH, "Content-Type": "application/json"},
                timeout=120,
            )
            result["status"] = resp.status_code
            done.set()

        poster = threading.Thread(target=post_big)
        poster.start()
        during, slowest, slowest_health = 0, 0.0, 0.0
        with httpx.Client(base_url=served.url, timeout=30) as client:
            while not done.is_set():
                start = time.monotonic()
                ok = client.get("/healthz").status_code == 200
                health = time.monotonic() - start
                ok &= client.post("/api/v1/lineage", json=run_event(), headers=AUTH).is_success
                if not done.is_set():
                    during += ok
                    slowest = max(slowest, time.monotonic() - start)
                    slowest_health = max(slowest_health, health)
        poster.join()
        assert result["status"] == 200
        # before issue 15 the loop answered nothing until the whole post was stored
        assert during >= 3, f"only {during} answers while the large post was processed"
        assert slowest < 5, f"a healthz + small post took {slowest:.1f} s"
        # /healthz reads: it never waits for the large post's write (it did, for seconds)
        assert slowest_health < 1, f"/healthz took {slowest_health:.1f} s"


def test_healthz_does_not_wait_for_a_write_in_progress(tmp_path, store, tokens):
    """SQLite has one writer: a large post's write holds the lock for seconds. /healthz only
    reads, so it answers meanwhile (its ping once began a write transaction and waited)."""
    with receiver(tmp_path, store, tokens) as served:
        locked, release = threading.Event(), threading.Event()

        def write() -> None:  # a write transaction that holds the lock, as a large post's does
            with store.engine.begin() as conn:
                conn.exec_driver_sql("UPDATE ol_batches SET attempts = attempts")
                locked.set()
                release.wait(30)

        writer = threading.Thread(target=write)
        writer.start()
        try:
            assert locked.wait(10)
            start = time.monotonic()
            health = httpx.get(f"{served.url}/healthz", timeout=30)
            took = time.monotonic() - start
        finally:
            release.set()
            writer.join()
        assert health.status_code == 200
        assert took < 1, f"/healthz waited {took:.1f} s for the write lock"


def test_a_large_post_peaks_under_three_times_its_body_and_gives_its_memory_back(
    tmp_path, store, tokens
):
    """What the receiver allocates for a large post, traced (every thread): at most 3x its body
    at the peak (the accepted events are compact copies, the body is dropped once they are
    sorted), and nothing of it is left once the post is answered."""
    body = json.dumps({"events": events_of(5_000, tag="mem")}).encode()
    headers = {**AUTH, "Content-Type": "application/json"}
    with (
        receiver(tmp_path, store, tokens, largePostBytes=64 * 1024) as served,
        httpx.Client(base_url=served.url, timeout=120) as client,
    ):
        # warm: imports, connections, the statements' caches
        warm = json.dumps({"events": events_of(1_000, tag="warm")}).encode()
        assert client.post("/api/v1/lineage/batch", content=warm, headers=headers).is_success
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            resp = client.post("/api/v1/lineage/batch", content=body, headers=headers)
            gc.collect()
            after, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert resp.status_code == 200, resp.text
    assert resp.json()["summary"]["accepted"] == 5_000
    ratio = (peak - before) / len(body)
    assert ratio <= 3, f"a {len(body) / 1e6:.1f} MB post peaked at {ratio:.1f}x its body"
    # what stays is pydantic_core's string cache (at most 16,384 strings, ~1 MB), not the
    # post: its body is 1x, its accepted events 1.8x
    left = (after - before) / len(body)
    assert left < 0.5, f"{left:.2f}x the body was still allocated after the answer"


# -- the store refusing writes -------------------------------------------------------------------


def test_healthz_is_503_while_the_store_refuses_writes_and_200_after(tmp_path, store, tokens):
    with receiver(tmp_path, store, tokens) as served:
        assert httpx.post(f"{served.url}/api/v1/lineage", json=run_event(), headers=AUTH).is_success
        full = {"on": True}

        # SQLite says "database or disk is full" once the file may not grow: reads still work
        def cap_pages(dbapi_conn, _record) -> None:  # noqa: ANN001
            if full["on"]:
                pages = dbapi_conn.execute("PRAGMA page_count").fetchone()[0]
                dbapi_conn.execute(f"PRAGMA max_page_count = {pages}")

        sa_event.listen(store.engine, "connect", cap_pages)
        store.engine.dispose()
        big = {"events": events_of(300, tag="fill")}
        refused = httpx.post(f"{served.url}/api/v1/lineage/batch", json=big, headers=AUTH)
        assert refused.status_code == 503, refused.text
        health = httpx.get(f"{served.url}/healthz")
        assert health.status_code == 503
        assert health.json()["store"] == "refuses writes"

        full["on"] = False
        store.engine.dispose()
        assert httpx.post(f"{served.url}/api/v1/lineage/batch", json=big, headers=AUTH).is_success
        assert _healthy(served)


# -- memory ----------------------------------------------------------------------------------------


def test_pauses_never_starve_full_collections():
    """In a long-lived process (``ol-dagster serve`` says it is one), every pause ages what it
    allocated, and cycles left behind by many small pauses (a request's task, exception,
    response) are collected: the tracked objects plateau.

    In a process of its own, as a receiver is: a full collection waits for a quarter of what
    survived the last one, so in a test process holding millions of objects from other tests
    the same pauses would rightly not collect yet."""
    done = subprocess.run(
        [sys.executable, "-c", _PAUSES],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-3000:]


_PAUSES = """
import gc
from typing import Any

from ol_dagster import gcpause

gcpause.collect_aged_objects()
gc.collect()


def requests(n: int) -> None:
    for _ in range(n):
        with gcpause.gc_paused():
            a: dict[str, Any] = {}
            b = {"a": a, "pad": [[] for _ in range(5)]}
            a["b"] = b  # a cycle: only a collection frees it


requests(50_000)
first = len(gc.get_objects())
before = gcpause.full_collections
requests(150_000)  # three times as many cycles left behind (over a million objects)
assert gcpause.full_collections > before
assert len(gc.get_objects()) < first + 250_000, "the heap grows with the number of pauses"
"""
