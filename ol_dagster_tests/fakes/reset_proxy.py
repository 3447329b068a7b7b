"""A TCP proxy in front of a fake catalog that resets connections on demand.

A fake HTTP server can answer slowly or with any status, but it cannot tear its own TCP connection
down the way a crashed pod, a load balancer or a NAT timeout does: the client sees a connection
reset (RST) instead of an answer. ``ResetProxy`` relays bytes between the client and the fake and,
for the next requests whose first bytes hold a marker (``b"POST /api/v1/lineage"``), resets the
client's connection either before the request reaches the fake (``when="before"``: nothing was
done) or once the fake has answered (``when="after"``: the work was done, the answer is lost).
"""

from __future__ import annotations

import select
import socket
import struct
import threading
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

_LINGER_RESET = struct.pack("ii", 1, 0)  # close() with SO_LINGER 0 sends RST, not FIN


@dataclass
class _Cut:
    marker: bytes
    when: Literal["before", "after"]


class ResetProxy:
    def __init__(self, target_url: str) -> None:
        parts = urlsplit(target_url)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._lock = threading.Lock()
        self._cuts: list[_Cut] = []
        self._closing = False
        self.resets = 0
        host, port = self._listener.getsockname()[:2]
        self.url = f"http://{host}:{port}"
        threading.Thread(target=self._accept, name="reset-proxy", daemon=True).start()

    def reset_next(
        self, marker: bytes, *, when: Literal["before", "after"] = "after", times: int = 1
    ) -> None:
        with self._lock:
            self._cuts.extend(_Cut(marker, when) for _ in range(times))

    def close(self) -> None:
        self._closing = True
        self._listener.close()

    def _take(self, data: bytes) -> _Cut | None:
        with self._lock:
            for i, cut in enumerate(self._cuts):
                if cut.marker in data:
                    return self._cuts.pop(i)
        return None

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _reset(self, client: socket.socket, upstream: socket.socket) -> None:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
        client.close()
        upstream.close()
        with self._lock:
            self.resets += 1

    def _relay(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self._target)
        except OSError:
            client.close()
            return
        pending: _Cut | None = None  # a request on its way that is to lose its answer
        try:
            while True:
                readable, _, _ = select.select([client, upstream], [], [], 30)
                if not readable:
                    return
                if client in readable:
                    data = client.recv(65536)
                    if not data:
                        return
                    cut = self._take(data)
                    if cut is not None and cut.when == "before":
                        self._reset(client, upstream)
                        return
                    pending = pending or cut
                    upstream.sendall(data)
                if upstream in readable:
                    data = upstream.recv(65536)
                    if not data:
                        return
                    if pending is not None:
                        self._reset(client, upstream)
                        return
                    client.sendall(data)
        except OSError:
            return
        finally:
            client.close()  # closing a closed socket is a no-op
            upstream.close()
