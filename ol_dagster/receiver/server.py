"""Running the receiver: in the foreground (``ol-dagster serve``) or in a background thread.

The background form serves the demo and the tests on a free loopback port, through the same
uvicorn server a deployment runs, so what they exercise is the real HTTP path.

The receiver runs on uvicorn's h11 protocol, not httptools, because h11 bounds what a client can
make it hold before a request is complete: httptools buffers headers without limit (30 MB of
unfinished headers per connection was measured). What uvicorn and h11 lack (deadlines, a body's
minimum rate, answers that end a connection, a deadline on unread answers, connections in all and
per client address) is added in ``receiver.protocol``; ``serve`` raises the process's file limit
to fit ``maxConnections`` (or refuses to start). Requests in progress and header counts are
bounded in the app (``receiver.guard``), where the 503 and the 431 carry a JSON body.
"""

from __future__ import annotations

import asyncio
import errno
import resource
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.types import ASGIApp

from ol_dagster import gcpause
from ol_dagster.receiver.protocol import Counters, guarded_protocol
from ol_dagster.settings import ReceiverLimits, SettingsError

# file descriptors the process needs besides its client connections (store, logs, imports)
_FD_RESERVE = 64


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
    counters = Counters() if limits is None else Counters(limits.refusalLogSeconds)
    if limits is not None:
        options = {
            "http": guarded_protocol(limits, counters),
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


def serve(app: Starlette, sock: socket.socket, on_stop: Callable[[], None]) -> None:
    """Serve ``app`` on ``sock`` (``listen``) until SIGTERM or SIGINT; ``on_stop`` runs once the
    last request is answered, before the process ends by the signal."""
    gcpause.collect_aged_objects()  # a receiver lives for months: its pauses must not starve GC
    limits = _limits_of(app)
    if limits is not None:
        fit_file_limit(limits)
    host, port = sock.getsockname()[:2]
    config, _ = _config(app, host, port, limits, log_level="info")
    _StoppingServer(config, on_stop).run(sockets=[sock])


class _StoppingServer(uvicorn.Server):
    """uvicorn's server, with a last step of its own: uvicorn ends a process stopped by a signal
    by raising that signal again once it has shut down, so code after ``run`` never runs."""

    def __init__(self, config: uvicorn.Config, on_stop: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_stop = on_stop

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().shutdown(sockets)
        finally:
            self._on_stop()


class Background:
    """A server running in a thread: its base URL, what its guards did, and its event loop."""

    def __init__(
        self, url: str, counters: Counters, loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        self.url = url
        self.counters = counters
        self.loop = loop

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
    listening = server.servers[0]
    port = listening.sockets[0].getsockname()[1]
    try:
        yield Background(f"http://{host}:{port}", counters, listening.get_loop())
    finally:
        server.should_exit = True
        thread.join(timeout=10)
