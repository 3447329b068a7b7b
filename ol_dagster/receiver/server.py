"""Running the receiver: in the foreground (``ol-dagster serve``) or in a background thread.

The background form serves the demo and the tests on a free loopback port, through the same
uvicorn server a deployment runs, so what they exercise is the real HTTP path.

The receiver runs on uvicorn's h11 protocol, not httptools, because h11 bounds what a client can
make it hold before a request is complete (issue 15): httptools buffers headers without limit (30
MB of unfinished headers per connection was measured). What uvicorn and h11 lack is added in
``_guarded_protocol``, around their own parser, never in place of it:

- header bytes: h11's ``max_incomplete_event_size`` refuses them; uvicorn answers any parse error
  with 400, so the answer is 431 when h11 refused a buffer for being too long (its own hint);
- time: uvicorn only times idle keep-alive connections, so a connection that sends nothing, or
  its headers or body byte by byte (slowloris), would be held for ever. A deadline runs from the
  connection (or the last answer) to the end of the headers, then another to the end of the body;
  a connection that misses it is closed. After an answer with ``Retry-After`` both the idle
  keep-alive and the header deadline start that many seconds later: clients that honour it
  (urllib3, the openlineage client) retry on the same connection, and a close timed like their
  retry reset it;
- connections: uvicorn's ``limit_concurrency`` answers 503 only once a request arrives, so idle
  sockets still take a file descriptor each. Beyond ``maxConnections`` a new connection is
  answered 503 with ``Retry-After`` and closed at once, and ``serve`` raises the process's file
  limit to fit them (or refuses to start).

Requests in progress and header counts are bounded in the app (``receiver.guard``), where the
503 and the 431 carry a JSON body.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import h11
import uvicorn
from starlette.applications import Starlette
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

from ol_dagster import gcpause
from ol_dagster.settings import ReceiverLimits, SettingsError

log = logging.getLogger("ol_dagster.receiver")

# file descriptors the process needs besides its client connections (store, logs, imports)
_FD_RESERVE = 64
_QUIET_LOG_SECONDS = 10.0


def _refusal(limits: ReceiverLimits) -> bytes:
    body = b"too many connections; retry later\n"
    return (
        b"HTTP/1.1 503 Service Unavailable\r\n"
        b"content-type: text/plain; charset=utf-8\r\n"
        b"retry-after: %d\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
        % (limits.retryAfterSeconds, len(body), body)
    )


class _Counters:
    """What the guards did, for the benchmark and the tests (one server per process here)."""

    def __init__(self) -> None:
        self.refused_connections = 0
        self.timed_out = 0
        self._last_log = 0.0

    def warn(self, message: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._last_log >= _QUIET_LOG_SECONDS:  # one line per burst, not per socket
            self._last_log = now
            log.warning(message, *args)


class _RetryAfterConnection(h11.Connection):
    """h11's connection, noting whether the last answer told the client when to retry."""

    retry_after = False

    def send(self, event: h11.Event) -> bytes | None:  # type: ignore[override]
        if isinstance(event, h11.Response):
            self.retry_after = any(name == b"retry-after" for name, _ in event.headers)
        return super().send(event)


def _guarded_protocol(limits: ReceiverLimits, counters: _Counters) -> type[H11Protocol]:
    refusal = _refusal(limits)

    class GuardedH11Protocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _in_body = False

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.conn = _RetryAfterConnection(h11.SERVER, limits.maxHeaderBytes)

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > limits.maxConnections:
                counters.refused_connections += 1
                counters.warn(
                    "receiver.maxConnections (%d) reached: new connections refused with 503",
                    limits.maxConnections,
                )
                transport.write(refusal)
                transport.close()
                return
            self._arm(limits.headerTimeoutSeconds, in_body=False)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            state = self.conn.their_state
            if state is h11.SEND_BODY and not self._in_body:
                self._arm(limits.bodyTimeoutSeconds, in_body=True)
            elif state is not h11.IDLE and state is not h11.SEND_BODY:
                self._disarm()  # the request is in: the app's time is not the client's

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self.transport.is_closing():
                return
            wait = 0.0
            if self.conn.retry_after and self.timeout_keep_alive_task is not None:
                # the client was told to come back in retryAfterSeconds, and urllib3 (the
                # openlineage client) does, on this connection: closing it after keepAliveSeconds
                # (5 and 5 by default) met its retry, which got a reset instead of an answer
                wait = limits.retryAfterSeconds
                self.timeout_keep_alive_task.cancel()
                self.timeout_keep_alive_task = self.loop.call_later(
                    wait + self.timeout_keep_alive, self.timeout_keep_alive_handler
                )
            if self.conn.their_state is h11.IDLE:
                # the next request's headers are due within the same time as the first one's
                # (uvicorn's keep-alive timer closes an idle connection sooner)
                self._arm(wait + limits.headerTimeoutSeconds, in_body=False)

        def send_400_response(self, msg: str) -> None:
            if len(self.conn.trailing_data[0]) <= limits.maxHeaderBytes:
                super().send_400_response(msg)
                return
            # h11 refused the buffer for its size (its error_status_hint is 431)
            body = b"request headers are larger than receiver.maxHeaderBytes\n"
            headers = [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"connection", b"close"),
            ]
            for event in (
                h11.Response(status_code=431, headers=headers),
                h11.Data(data=body),
                h11.EndOfMessage(),
            ):
                self.transport.write(self.conn.send(event) or b"")
            self.transport.close()

        def _arm(self, seconds: float, *, in_body: bool) -> None:
            self._disarm()
            self._in_body = in_body
            self._deadline = self.loop.call_later(seconds, self._deadline_passed)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _deadline_passed(self) -> None:
            self._deadline = None
            if self.transport.is_closing():
                return
            counters.timed_out += 1
            counters.warn(
                "a client took longer than receiver.%s to send its request: connection closed",
                "bodyTimeoutSeconds" if self._in_body else "headerTimeoutSeconds",
            )
            self.transport.close()

    return GuardedH11Protocol


def fit_file_limit(limits: ReceiverLimits) -> None:
    """Raise the soft limit on open files so ``maxConnections`` fit, or refuse to start: beyond
    it accept() fails and /healthz with it, with nothing logged."""
    needed = limits.maxConnections + _FD_RESERVE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            raise SettingsError(
                f"receiver.maxConnections ({limits.maxConnections}) needs {needed} open files, "
                f"but the process may open at most {hard} (ulimit -n): lower maxConnections "
                "or raise the limit"
            )
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def _config(app: ASGIApp, host: str, port: int, limits: ReceiverLimits | None, **extra: Any):
    options: dict[str, Any] = {}
    counters = _Counters()
    if limits is not None:
        options = {
            "http": _guarded_protocol(limits, counters),
            "h11_max_incomplete_event_size": limits.maxHeaderBytes,
            "timeout_keep_alive": limits.keepAliveSeconds,
            "backlog": limits.backlog,
        }
    config = uvicorn.Config(app, host=host, port=port, access_log=False, **options, **extra)
    return config, counters


def _limits_of(app: ASGIApp) -> ReceiverLimits | None:
    """The limits ``create_app`` left on the receiver's app (``None``: another app, a fake)."""
    state = getattr(app, "state", None)
    return getattr(state, "receiver_limits", None)


def listen(host: str, port: int) -> socket.socket:
    """The receiver's socket, bound before anything starts: a port another process holds (or a
    host this machine does not have) is one line (``SettingsError``), not a banner followed by
    the server's own error. Port 0: a free port, which ``url_of`` names."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise SettingsError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn's own bind does
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        hint = (
            ": another process listens there; stop it or choose another --port"
            if exc.errno == errno.EADDRINUSE
            else ""
        )
        raise SettingsError(
            f"cannot listen on port {port} of {host} ({exc.strerror}){hint}"
        ) from None
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def serve(app: Starlette, sock: socket.socket) -> None:
    """Serve ``app`` on ``sock`` (``listen``) until SIGTERM or SIGINT."""
    gcpause.collect_aged_objects()  # a receiver lives for months: its pauses must not starve GC
    limits = _limits_of(app)
    if limits is not None:
        fit_file_limit(limits)
    host, port = sock.getsockname()[:2]
    config, _ = _config(app, host, port, limits, log_level="info")
    uvicorn.Server(config).run(sockets=[sock])


class Background:
    """A server running in a thread: its base URL and what its guards did."""

    def __init__(self, url: str, counters: _Counters) -> None:
        self.url = url
        self.counters = counters

    def __str__(self) -> str:
        return self.url


@contextmanager
def serve_in_background(
    app: ASGIApp, host: str = "127.0.0.1", *, date_header: bool = True
) -> Iterator[str]:
    """Serve ``app`` on a free port of ``host``; yields the base URL. ``date_header=False`` leaves
    the ``Date`` header to the app (a fake catalog whose clock the tests set)."""
    with serve_guarded_in_background(app, host, date_header=date_header) as served:
        yield served.url


@contextmanager
def serve_guarded_in_background(
    app: ASGIApp, host: str = "127.0.0.1", *, date_header: bool = True
) -> Iterator[Background]:
    """``serve_in_background``, also yielding the guards' counters (refused, timed out)."""
    config, counters = _config(
        app, host, 0, _limits_of(app), log_level="warning", lifespan="off", date_header=date_header
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="ol-dagster-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Background(f"http://{host}:{port}", counters)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
