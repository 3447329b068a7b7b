"""Running the receiver: in the foreground (``ol-dagster serve``) or in a background thread.

The background form serves the demo and the tests on a free loopback port, through the same
uvicorn server a deployment runs, so what they exercise is the real HTTP path.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from starlette.applications import Starlette
from starlette.types import ASGIApp


def serve(app: Starlette, host: str, port: int) -> None:
    uvicorn.run(app, host=host, port=port, log_level="info", access_log=False)


@contextmanager
def serve_in_background(
    app: ASGIApp, host: str = "127.0.0.1", *, date_header: bool = True
) -> Iterator[str]:
    """Serve ``app`` on a free port of ``host``; yields the base URL. ``date_header=False`` leaves
    the ``Date`` header to the app (a fake catalog whose clock the tests set)."""
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=host,
            port=0,
            log_level="warning",
            access_log=False,
            lifespan="off",
            date_header=date_header,
        )
    )
    thread = threading.Thread(target=server.run, name="ol-dagster-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
