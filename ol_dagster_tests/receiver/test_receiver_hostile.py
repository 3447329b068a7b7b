"""Hostile clients against a real loopback receiver: what they can no longer hold.

Each test serves ``create_app`` through ``serve_guarded_in_background`` (the guarded h11 protocol
``ol-dagster serve`` runs) and plays the client with raw sockets. The hostile client connects
from 127.0.0.2 (on Linux the whole of 127.0.0.0/8 is this machine), the producer and ``/healthz``
from 127.0.0.1, as a load balancer's checks come from an address of their own. Counts are bounded
and deadlines are generous multiples of the configured limits: a loaded machine is slow, never
early.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import sqlite3
import threading
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from ol_dagster.commands.cli import main
from ol_dagster.receiver.app import create_app
from ol_dagster.receiver.protocol import LINGER_SECONDS, RATE_GRACE_SECONDS
from ol_dagster.receiver.server import Background, serve_guarded_in_background
from ol_dagster.settings import SettingsError, parse_settings
from ol_dagster.store import EventStore
from ol_dagster_tests.conftest import TOKENS, events_of, run_event, settings_data
from ol_dagster_tests.receiver.test_receiver_limits import receiver

SNAP = TOKENS["OL_TEST_TOKEN_SNAP"]
AUTH = {"Authorization": f"Bearer {SNAP}"}
HOSTILE = "127.0.0.2"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EventStore]:
    s = EventStore(f"sqlite:///{tmp_path / 'store.db'}")
    yield s
    s.dispose()


def _connect(served: Background, source: str = HOSTILE) -> socket.socket:
    host, port = served.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0))


def _until_closed(sock: socket.socket, timeout: float = 15) -> bytes:
    """What the server sends until it closes the connection; fails if it keeps it open."""
    sock.settimeout(timeout)
    chunks = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            break
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
    raise AssertionError(f"the server kept the connection open {timeout} s: {chunks!r}")


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def _head(path: str, length: int, *, token: str | None = None, extra: bytes = b"") -> bytes:
    auth = b"Authorization: Bearer %s\r\n" % token.encode() if token else b""
    return (
        b"POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n%s\r\n" % (path.encode(), auth, length, extra)
    )


def _healthy(served: Background) -> bool:
    return httpx.get(f"{served.url}/healthz", timeout=30).status_code == 200


def _post_ok(served: Background) -> bool:
    resp = httpx.post(f"{served.url}/api/v1/lineage", json=run_event(), headers=AUTH, timeout=30)
    return resp.status_code == 200


# -- connections held by clients that are refused or slow --------------------------------------


@pytest.mark.parametrize(
    ("status", "head"),
    [
        (401, _head("/api/v1/lineage/batch", 100_000_000)),  # no token
        (413, _head("/api/v1/lineage/batch", 100_000_000, token=SNAP)),  # over maxBodyBytes
        (
            431,
            _head("/api/v1/lineage", 1000, extra=b"".join(b"X-%d: 1\r\n" % i for i in range(120))),
        ),
    ],
    ids=["401", "413", "431"],
)
def test_a_refused_request_closes_its_connection_however_the_client_trickles(
    tmp_path, store, tokens, status, head
):
    """Refused before its body is read, the client trickles the 100 MB it announced one byte at
    a time: once it was kept for the whole body deadline, each byte postponing the close. Now
    the answer says ``Connection: close`` and the connection is closed after the answer."""
    with receiver(tmp_path, store, tokens) as served:
        sock = _connect(served)
        sock.sendall(head)
        stop = threading.Event()
        trickled: list[int] = []

        def trickle() -> None:
            while not stop.wait(0.1):
                try:
                    sock.send(b"{")
                except OSError:
                    return
                trickled.append(1)

        feeder = threading.Thread(target=trickle)
        feeder.start()
        try:
            answer = _until_closed(sock)
        finally:
            stop.set()
            feeder.join()
        assert _status(answer) == status, answer
        assert b"connection: close" in answer.lower()
        # closed after LINGER_SECONDS of discarded body, not after bodyTimeoutSeconds (120)
        assert len(trickled) < (LINGER_SECONDS + 5) / 0.1
        assert served.counters.closed_after_answer == 1
        assert store.batches() == []
        assert _healthy(served) and _post_ok(served)


def test_a_large_post_with_a_wrong_token_reads_its_401_not_a_reset(tmp_path, store, tokens):
    """The connection is closed after a 401, but a client still sending its body is given the
    time to finish it: it reads the 401 (a close while it sends would reset it)."""
    with receiver(tmp_path, store, tokens) as served:
        body = b" " * 60_000_000  # more than the kernel's buffers hold: still being sent
        resp = httpx.post(
            f"{served.url}/api/v1/lineage/batch",
            content=body,
            headers={"Authorization": "Bearer not-the-token", "Content-Type": "application/json"},
            timeout=30,
        )
        assert resp.status_code == 401
        assert resp.headers["connection"] == "close"
        assert store.batches() == []


def test_a_body_slower_than_min_body_bytes_per_second_is_closed(tmp_path, store, tokens):
    """A byte every 0.1 s is within bodyTimeoutSeconds (120 s) for a long time; it is below
    minBodyBytesPerSecond once the grace is past, and the connection is closed then."""
    with receiver(tmp_path, store, tokens, minBodyBytesPerSecond=1000) as served:
        sock = _connect(served)
        sock.sendall(_head("/api/v1/lineage/batch", 1_000_000, token=SNAP) + b'{"events": [')
        sent = 0
        deadline = time.monotonic() + RATE_GRACE_SECONDS + 30
        while time.monotonic() < deadline:
            try:
                sock.send(b" ")
            except OSError:
                break
            sent += 1
            time.sleep(0.1)
        assert sent < (RATE_GRACE_SECONDS + 20) / 0.1, "the slow body was never closed"
        assert served.counters.too_slow == 1
        assert store.batches() == []
        # a body at a normal pace goes through
        assert _post_ok(served)


def test_one_address_holds_at_most_max_connections_per_client(tmp_path, store, tokens):
    """Idle sockets from one address: beyond maxConnectionsPerClient each is answered 503 with
    Retry-After and closed at once; /healthz and the producer, from another address, go on."""
    with (
        receiver(
            tmp_path, store, tokens, maxConnectionsPerClient=10, headerTimeoutSeconds=60
        ) as served,
        ExitStack() as held,
    ):
        socks = [_connect(served) for _ in range(30)]
        for s in socks:
            held.callback(s.close)
        refused = 0
        for s in socks:
            s.settimeout(0.5)
            try:
                answer = s.recv(65536)
            except TimeoutError:
                continue  # accepted, waiting for its headers
            if answer.startswith(b"HTTP/1.1 503"):
                assert b"retry-after: 5" in answer.lower()
                assert b"from this address" in answer
                refused += 1
        assert refused == 20
        assert served.counters.refused_connections == 20
        assert _healthy(served) and _post_ok(served)


def test_one_client_holds_at_most_max_concurrent_requests_per_client(tmp_path, store, tokens):
    with receiver(tmp_path, store, tokens, maxConcurrentRequestsPerClient=2) as served:
        held = []
        for _ in range(2):  # two posts in progress, reading their bodies
            sock = _connect(served)
            sock.sendall(_head("/api/v1/lineage/batch", 1000, token=SNAP) + b'{"events": [')
            held.append(sock)
        time.sleep(0.5)
        with httpx.Client(transport=httpx.HTTPTransport(local_address=HOSTILE)) as hostile:
            third = hostile.post(f"{served.url}/api/v1/lineage", json=run_event(), headers=AUTH)
        assert third.status_code == 503, third.text
        assert "receiver.maxConcurrentRequestsPerClient (2)" in third.json()["message"]
        assert third.headers["retry-after"] == "5"
        # another client, and /healthz, are not counted with them
        assert _healthy(served) and _post_ok(served)
        for sock in held:
            sock.close()


def test_a_batch_of_many_small_events_is_a_large_post(tmp_path, store, tokens):
    """100,000 empty events fit in 293 KB and cost as much to sort as 50 MB of real events: a
    batch of largePostEvents events or more takes a large post's slot, whatever its bytes."""
    with receiver(
        tmp_path,
        store,
        tokens,
        largePostBytes=4096,
        largePostEvents=1000,
        minBodyBytesPerSecond=100,  # the held post waits while the others are answered
    ) as served:
        big = json.dumps({"events": events_of(60)}).encode()
        held = _connect(served, "127.0.0.1")  # large by its bytes, still sending: the slot
        held.sendall(_head("/api/v1/lineage/batch", len(big), token=SNAP) + big[:6000])
        time.sleep(0.5)
        many = {"events": [{}] * 2000}
        refused = httpx.post(f"{served.url}/api/v1/lineage/batch", json=many, headers=AUTH)
        assert refused.status_code == 503, refused.text
        assert "receiver.largePostEvents (1000)" in refused.json()["message"]
        assert refused.headers["retry-after"] == "5"
        few = httpx.post(
            f"{served.url}/api/v1/lineage/batch", json={"events": [{}] * 999}, headers=AUTH
        )
        assert few.status_code == 400  # every event rejected, but sorted: not a large post
        held.sendall(big[6000:])
        assert b"60 event(s) accepted" in _until_closed(held, timeout=30)
        again = httpx.post(f"{served.url}/api/v1/lineage/batch", json=many, headers=AUTH)
        assert again.status_code == 400, again.text
        assert again.json()["failedEventsNotListed"] == 1900


# -- /healthz while posts wait for another process's write lock --------------------------------


def test_healthz_answers_while_every_request_slot_waits_for_another_process_lock(
    tmp_path, store, tokens
):
    """Another process holds SQLite's write lock; 45 posts wait for it, every request slot
    taken. ``/healthz`` (outside the request limits, its ping on a thread of its own) answers
    while the lock is still held: it waited for a thread of the posts' pool (11 s) before."""
    with receiver(tmp_path, store, tokens, maxConcurrentRequests=45) as served:
        other = sqlite3.connect(tmp_path / "store.db", isolation_level=None, timeout=30)
        other.execute("BEGIN IMMEDIATE")
        statuses: list[int] = []

        def post() -> None:
            resp = httpx.post(
                f"{served.url}/api/v1/lineage", json=run_event(), headers=AUTH, timeout=60
            )
            statuses.append(resp.status_code)

        posters = [threading.Thread(target=post) for _ in range(45)]
        try:
            for t in posters:
                t.start()
            full = False  # every slot taken: one more request is refused (a GET: no lock)
            for _ in range(200):
                if httpx.get(f"{served.url}/api/v1/lineage").status_code == 503:
                    full = True
                    break
                time.sleep(0.1)
            assert full, "the 45 posts never took every request slot"
            health = httpx.get(f"{served.url}/healthz", timeout=15)
            waiting = statuses == []  # the lock is still held: no post could be stored
        finally:
            other.execute("ROLLBACK")
            other.close()
            for t in posters:
                t.join(60)
        assert health.status_code == 200, health.text
        assert waiting
        assert statuses == [200] * 45


# -- answers nobody reads -------------------------------------------------------------------------


def test_an_answer_lists_the_first_rejected_events_and_counts_the_rest(tmp_path, store, tokens):
    with receiver(tmp_path, store, tokens, maxFailedEventsListed=10) as served:
        resp = httpx.post(
            f"{served.url}/api/v1/lineage/batch",
            json={"events": [{}] * 1000 + events_of(1)},
            headers=AUTH,
            timeout=60,
        )
    answer = resp.json()
    assert resp.status_code == 200
    assert answer["summary"] == {"received": 1001, "accepted": 1, "rejected": 1000}
    assert [e["index"] for e in answer["failedEvents"]] == list(range(10))
    assert answer["failedEventsNotListed"] == 990
    assert "990 more are not listed" in answer["message"]
    assert len(resp.content) < 10_000


def _not_reading(served: Background) -> socket.socket:
    """A client that reads nothing: its receive buffer as small as the kernel allows, set before
    it connects (the window is agreed then)."""
    host, port = served.url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.bind((HOSTILE, 0))
    sock.settimeout(10)
    sock.connect((host, int(port)))
    return sock


def test_a_client_that_does_not_read_its_answer_is_dropped_with_what_it_held(
    tmp_path, store, tokens
):
    """A 13 MB answer (every rejected event listed) to a client that never reads: the
    connection is dropped after sendTimeoutSeconds and the answer's memory freed; it was held for
    as long as the client kept its socket open."""
    body = json.dumps({"events": [{}] * 100_000}).encode()
    with receiver(
        tmp_path, store, tokens, maxFailedEventsListed=100_000, sendTimeoutSeconds=1
    ) as served:
        assert _post_ok(served)  # warm
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            sock = _not_reading(served)
            sock.sendall(_head("/api/v1/lineage/batch", len(body), token=SNAP) + body)
            deadline = time.monotonic() + 30
            while served.counters.send_timed_out == 0 and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(1)
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        got = b""
        try:
            while chunk := sock.recv(1 << 20):  # what reached the client before the drop
                got += chunk
        except ConnectionResetError:
            pass
        sock.close()
        assert served.counters.send_timed_out == 1
        assert _status(got) == 400 and len(got) < 13_000_000, "the whole answer was sent"
        assert held < 2_000_000, f"{held / 1e6:.1f} MB still held after the drop"
        assert _healthy(served) and _post_ok(served)


def test_unread_answers_to_posts_of_empty_events_hold_no_memory(tmp_path, store, tokens):
    """Posts of 9,000 empty events whose answers are never read: each answer lists 100
    rejected events and counts the rest, so what stays allocated while the clients hold their
    sockets is small (a 100,000-event post was answered 13 MB)."""
    body = json.dumps({"events": [{}] * 9_000}).encode()
    with receiver(tmp_path, store, tokens) as served:
        assert _post_ok(served)  # warm
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            socks = []
            for _ in range(4):
                sock = _connect(served)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.sendall(_head("/api/v1/lineage/batch", len(body), token=SNAP) + body)
                socks.append(sock)
            # every answer written: each socket has bytes waiting to be read
            for sock in socks:
                sock.settimeout(120)
                assert sock.recv(1, socket.MSG_PEEK) == b"H"
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        answer = _until_closed(socks[0])
        for sock in socks:
            sock.close()
    assert _status(answer) == 400
    assert b'"failedEventsNotListed":8900' in answer
    assert len(answer) < 30_000
    assert held < 1_000_000, f"{held / 1e6:.1f} MB held for 4 unread answers"


# -- gzip and framing -------------------------------------------------------------------------


def _loop_lag(served: Background, done: threading.Event) -> list[float]:
    """How late the server's event loop ran a 10 ms timer, again and again until ``done``."""
    lags: list[float] = []

    async def probe() -> None:
        loop = asyncio.get_running_loop()
        while not done.is_set():
            start = loop.time()
            await asyncio.sleep(0.01)
            lags.append(loop.time() - start - 0.01)

    assert served.loop is not None
    asyncio.run_coroutine_threadsafe(probe(), served.loop)
    return lags


def _bomb() -> bytes:
    deflate = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = b"\0" * (1 << 20)
    return b"".join(deflate.compress(zeros) for _ in range(200)) + deflate.flush()


def _empty_members() -> bytes:
    return gzip.compress(b"") * 157_000 + gzip.compress(b'{"events": []}')


@pytest.mark.parametrize(
    ("make", "status"),
    [(_bomb, 413), (_empty_members, 200)],  # 200 MB of zeros in 200 KB; 157,000 empty members
    ids=["bomb", "empty-members"],
)
def test_gzip_is_inflated_off_the_event_loop(tmp_path, store, tokens, make, status):
    """Inflating on the event loop stopped every other request (a bomb, 157,000 empty members):
    now the loop answers on time while the post's own thread inflates it, and the inflated-size
    limit stops a bomb at limits.maxBodyBytes."""
    body = make()
    with receiver(tmp_path, store, tokens) as served:
        done = threading.Event()
        lags = _loop_lag(served, done)
        time.sleep(0.2)
        start = time.monotonic()
        resp = httpx.post(
            f"{served.url}/api/v1/lineage/batch",
            content=body,
            headers={**AUTH, "Content-Type": "application/json", "Content-Encoding": "gzip"},
            timeout=120,
        )
        took = time.monotonic() - start
        done.set()
        assert resp.status_code == status, resp.text
        if status == 413:
            assert "limits.maxBodyBytes" in resp.json()["message"]
        # the loop was never held for the post's time: its timers ran on time meanwhile
        assert lags and max(lags) < took / 2, (max(lags), took)
        assert _healthy(served)


def test_content_length_with_transfer_encoding_closes_the_connection(tmp_path, store, tokens):
    """RFC 9112 §6.3: a request with both is answered, and its connection closed (a proxy in
    front may have framed it the other way)."""
    event = json.dumps(run_event()).encode()
    with receiver(tmp_path, store, tokens) as served:
        sock = _connect(served, "127.0.0.1")
        sock.sendall(
            b"POST /api/v1/lineage HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
            b"Content-Type: application/json\r\nContent-Length: 5\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n"
            % (SNAP.encode(), len(event), event)
        )
        answer = _until_closed(sock)
        assert _status(answer) == 200, answer
        assert b"connection: close" in answer.lower()
        # a request with one of them stays on its kept-alive connection
        with httpx.Client(base_url=served.url, headers=AUTH) as client:
            first = client.post("/api/v1/lineage", json=run_event())
            assert "close" not in first.headers.get("connection", "")


# -- tokens ---------------------------------------------------------------------------------------


def test_a_receiver_token_shorter_than_16_characters_stops_the_start(tmp_path, store, monkeypatch):
    monkeypatch.setenv("OL_TEST_TOKEN_SNAP", "x")
    monkeypatch.setenv("OL_TEST_TOKEN_ADD", "add-secret-token")
    with pytest.raises(SettingsError) as raised:
        create_app(parse_settings(settings_data(tmp_path)), store)
    message = str(raised.value)
    assert message == (
        "definition snap: the receiver token in OL_TEST_TOKEN_SNAP is shorter than 16 "
        "characters; use a random one, e.g. python3 -c 'import secrets; "
        "print(secrets.token_urlsafe(24))'"
    )


def test_a_non_ascii_token_is_compared_as_utf8(tmp_path, store, monkeypatch, capsys):
    """A client sends a non-ASCII token as UTF-8 (``ol-dagster send`` does): it is accepted; its
    Latin-1 bytes, which alone matched before, are not."""
    token = "jeton-de-réception-ünïcode"
    monkeypatch.setenv("OL_TEST_TOKEN_SNAP", token)
    monkeypatch.setenv("OL_TEST_TOKEN_ADD", "add-secret-token")
    app = create_app(parse_settings(settings_data(tmp_path)), store)
    with serve_guarded_in_background(app) as served:
        url = f"{served.url}/api/v1/lineage"
        as_utf8 = httpx.post(
            url, json=run_event(), headers={b"Authorization": b"Bearer " + token.encode()}
        )
        as_latin1 = httpx.post(
            url, json=run_event(), headers={b"Authorization": b"Bearer " + token.encode("latin-1")}
        )
        file = tmp_path / "one.json"
        file.write_text(json.dumps(run_event("etl", "sent")))
        monkeypatch.setenv("OL_DAGSTER_TOKEN", token)
        sent = main(["send", str(file), "--url", served.url])
    assert as_utf8.status_code == 200, as_utf8.text
    assert as_latin1.status_code == 401
    assert sent == 0, capsys.readouterr()
    assert len(store.batches()) == 2
