"""The receiver's connections: uvicorn's h11 protocol with the limits it lacks.

uvicorn and h11 bound a request's header bytes; what one client could still hold is bounded here,
around their own parser, never in place of it:

- header bytes: h11's ``max_incomplete_event_size`` refuses them; uvicorn answers any parse error
  with 400, so the answer is 431 when h11 refused a buffer for being too long (its own hint);
- time: uvicorn only times idle keep-alive connections, so a connection that sends nothing, or
  its headers or body byte by byte (slowloris), would be held for ever. A deadline runs from the
  connection (or the last answer) to the end of the headers, then another to the end of the body;
  and a body must keep to ``minBodyBytesPerSecond`` on average once its first
  ``RATE_GRACE_SECONDS`` are past (a byte every 2 s no longer holds a connection for
  ``bodyTimeoutSeconds``). A connection that misses either is closed. After an answer with
  ``Retry-After`` both the idle keep-alive and the header deadline start that many seconds later:
  clients that honour it (urllib3, the openlineage client) retry on the same connection, and a
  close timed like their retry reset it;
- answers that end a connection: 401, 403, 413 and 431, an answer given before the request's body
  was read, and one to a request that sent both Content-Length and Transfer-Encoding (RFC 9112
  §6.3) carry ``Connection: close`` and the connection is closed. A client still sending its body
  is given ``LINGER_SECONDS`` to finish (what it sends is discarded; the staged close of RFC 9112
  §9.6) so that it reads its answer instead of a reset;
- answers nobody reads: once an answer waits in the process's buffer because the client does not
  read it, the client has ``sendTimeoutSeconds`` to make progress; then the connection is dropped
  with what it held;
- connections: uvicorn's ``limit_concurrency`` answers 503 only once a request arrives, so idle
  sockets still take a file descriptor each. Beyond ``maxConnections`` in all, or
  ``maxConnectionsPerClient`` from one address, a new connection is answered 503 with
  ``Retry-After`` and closed at once.

Each of these is logged as the receiver logs every refusal: once per limit and client address,
then counted (``receiver.refusal_lines``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from ol_dagster.receiver.refusal_lines import RefusalLines
from ol_dagster.settings import ReceiverLimits

log = logging.getLogger("ol_dagster.receiver")

# the first seconds of a body are not held to ``minBodyBytesPerSecond`` (a client's slow start)
RATE_GRACE_SECONDS = 5.0
# how long a client still sending a refused body is given to finish and read its answer
LINGER_SECONDS = 2.0
# answers after which the connection is closed, whatever the client asked for
CLOSING_STATUSES = frozenset({401, 403, 413, 431})


def _refusal(limits: ReceiverLimits, reason: bytes) -> bytes:
    body = reason + b"; retry later\n"
    return (
        b"HTTP/1.1 503 Service Unavailable\r\n"
        b"content-type: text/plain; charset=utf-8\r\n"
        b"retry-after: %d\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
        % (limits.retryAfterSeconds, len(body), body)
    )


class Counters:
    """What the guards did, for the benchmark and the tests (one server per process here), and
    the connections open from each client address."""

    def __init__(self, refusal_log_seconds: float = 10.0) -> None:
        self.refused_connections = 0  # beyond maxConnections or maxConnectionsPerClient
        self.timed_out = 0  # headers or body past their deadline
        self.too_slow = 0  # a body below minBodyBytesPerSecond
        self.closed_after_answer = 0  # Connection: close added to an answer
        self.send_timed_out = 0  # an answer left unread past sendTimeoutSeconds
        self.per_client: Counter[str] = Counter()
        self._lines = RefusalLines(log, refusal_log_seconds)

    def warn(self, client: str | None, message: str, *args: object) -> None:
        """Log a connection refused or closed by a limit (``message``) from ``client``."""
        self._lines.refused(message, client, message, message, *args)


class _GuardedConnection(h11.Connection):
    """h11's connection, noting whether the last answer told the client when to retry, and adding
    ``Connection: close`` to an answer after which the connection must not be reused."""

    retry_after = False
    ambiguous_length = False  # the request sent Content-Length and Transfer-Encoding
    closes = False  # the last answer closes the connection

    def next_event(self) -> Any:
        event = super().next_event()
        if isinstance(event, h11.Request):
            names = {name for name, _ in event.headers}
            self.ambiguous_length = b"content-length" in names and b"transfer-encoding" in names
        return event

    def send(self, event: h11.Event) -> bytes | None:  # type: ignore[override]
        if isinstance(event, h11.Response):
            self.retry_after = any(name == b"retry-after" for name, _ in event.headers)
            self.closes = (
                event.status_code in CLOSING_STATUSES
                or self.ambiguous_length
                or self.their_state is h11.SEND_BODY  # its body unread: no next request
            )
            said = any(n == b"connection" and b"close" in v.lower() for n, v in event.headers)
            if self.closes and not said:
                event = h11.Response(
                    status_code=event.status_code,
                    headers=[*event.headers, (b"connection", b"close")],
                    reason=event.reason,
                    http_version=event.http_version,
                )
        return super().send(event)


class _Transport(asyncio.Transport):
    """The connection's transport as uvicorn holds it: its ``close`` is the protocol's
    (``close_gently``), which lets a client still sending its body finish it first."""

    def __init__(self, real: asyncio.Transport, protocol: Any) -> None:
        super().__init__()
        self.real = real
        self.protocol = protocol

    def close(self) -> None:
        self.protocol.close_gently()

    def is_closing(self) -> bool:
        return self.real.is_closing() or self.protocol.lingering

    def write(self, data: Any) -> None:
        self.real.write(data)

    def writelines(self, list_of_data: Any) -> None:
        self.real.writelines(list_of_data)

    def abort(self) -> None:
        self.real.abort()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.real.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self.real.pause_reading()

    def resume_reading(self) -> None:
        self.real.resume_reading()

    def is_reading(self) -> bool:
        return self.real.is_reading()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.real.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self.real.get_protocol()

    def get_write_buffer_size(self) -> int:
        return self.real.get_write_buffer_size()

    def can_write_eof(self) -> bool:
        return self.real.can_write_eof()

    def write_eof(self) -> None:
        self.real.write_eof()


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol within ``limits`` (``guarded_protocol`` makes one per server)."""

    limits: ReceiverLimits
    counters: Counters
    too_many: bytes
    too_many_here: bytes
    _deadline: asyncio.TimerHandle | None = None
    _in_body = False
    _rate: asyncio.TimerHandle | None = None
    _body_start = 0.0
    _body_bytes = 0
    _send_deadline: asyncio.TimerHandle | None = None
    _linger: asyncio.TimerHandle | None = None
    _address: str | None = None
    _real: asyncio.Transport | None = None
    lingering = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = _GuardedConnection(h11.SERVER, self.limits.maxHeaderBytes)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        address = self.client[0] if self.client else None
        if len(self.connections) > self.limits.maxConnections:
            self._refuse(
                self.too_many, "receiver.maxConnections (%d) reached", self.limits.maxConnections
            )
            return
        if address is not None:
            if self.counters.per_client[address] >= self.limits.maxConnectionsPerClient:
                self._refuse(
                    self.too_many_here,
                    "receiver.maxConnectionsPerClient (%d) reached for %s",
                    self.limits.maxConnectionsPerClient,
                    address,
                )
                return
            self.counters.per_client[address] += 1
            self._address = address
        self._real = transport
        self.transport = _Transport(transport, self)
        self._arm(self.limits.headerTimeoutSeconds, in_body=False)

    def _refuse(self, answer: bytes, message: str, *args: object) -> None:
        self.counters.refused_connections += 1
        self._warn(message + ": new connections refused with 503", *args)
        self.transport.write(answer)
        self.transport.close()

    def _warn(self, message: str, *args: object) -> None:
        """Log a refusal or a drop of this client, rate-limited per client address."""
        self.counters.warn(self.client[0] if self.client else None, message, *args)

    def connection_lost(self, exc: Exception | None) -> None:
        for handle in (self._deadline, self._rate, self._send_deadline, self._linger):
            if handle is not None:
                handle.cancel()
        self._deadline = self._rate = self._send_deadline = self._linger = None
        if self._address is not None:
            self.counters.per_client[self._address] -= 1
            if self.counters.per_client[self._address] <= 0:
                del self.counters.per_client[self._address]
            self._address = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.lingering:
            return  # the rest of a refused body: discarded
        super().data_received(data)
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            if not self._in_body:
                self._arm(self.limits.bodyTimeoutSeconds, in_body=True)
                self._start_rate()
            self._body_bytes += len(data)
        elif state is not h11.IDLE:
            self._disarm()  # the request is in: the app's time is not the client's

    # -- the body's rate ---------------------------------------------------------------

    def _start_rate(self) -> None:
        self._body_start, self._body_bytes = self.loop.time(), 0
        if self.limits.minBodyBytesPerSecond:
            self._rate = self.loop.call_later(RATE_GRACE_SECONDS, self._check_rate)

    def _check_rate(self) -> None:
        self._rate = None
        if self.conn.their_state is not h11.SEND_BODY or self.transport.is_closing():
            return
        due = (
            self._body_start
            + RATE_GRACE_SECONDS
            + self._body_bytes / self.limits.minBodyBytesPerSecond
        )
        if self.loop.time() < due:
            self._rate = self.loop.call_at(due, self._check_rate)
            return
        self.counters.too_slow += 1
        self._warn(
            "a client sent its body slower than receiver.minBodyBytesPerSecond (%d): "
            "connection closed",
            self.limits.minBodyBytesPerSecond,
        )
        self._close_now()

    # -- answers ---------------------------------------------------------------------------

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.closes:
            self.counters.closed_after_answer += 1
        if self._real is not None and self._real.get_write_buffer_size():
            self._arm_send()  # the answer is still in the buffer: the client must read it
        if self.transport.is_closing():
            return
        wait = 0.0
        if self.conn.retry_after and self.timeout_keep_alive_task is not None:
            # the client was told to come back in retryAfterSeconds, and urllib3 (the
            # openlineage client) does, on this connection: closing it after keepAliveSeconds
            # (5 and 5 by default) met its retry, which got a reset instead of an answer
            wait = self.limits.retryAfterSeconds
            self.timeout_keep_alive_task.cancel()
            self.timeout_keep_alive_task = self.loop.call_later(
                wait + self.timeout_keep_alive, self.timeout_keep_alive_handler
            )
        if self.conn.their_state is h11.IDLE:
            # the next request's headers are due within the same time as the first one's
            # (uvicorn's keep-alive timer closes an idle connection sooner)
            self._arm(wait + self.limits.headerTimeoutSeconds, in_body=False)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._send_deadline is None:
            self._arm_send()

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._send_deadline is not None:
            self._arm_send()  # the client reads: its time starts again

    def _arm_send(self) -> None:
        if self._send_deadline is not None:
            self._send_deadline.cancel()
        self._send_deadline = self.loop.call_later(
            self.limits.sendTimeoutSeconds, self._send_timed_out
        )

    def _send_timed_out(self) -> None:
        self._send_deadline = None
        if self._real is None or not self._real.get_write_buffer_size():
            return  # read meanwhile
        self.counters.send_timed_out += 1
        self._warn(
            "a client did not read its answer within receiver.sendTimeoutSeconds (%s): "
            "connection dropped",
            self.limits.sendTimeoutSeconds,
        )
        self._real.abort()  # close() would wait for the client to read it

    def send_400_response(self, msg: str) -> None:
        if len(self.conn.trailing_data[0]) <= self.limits.maxHeaderBytes:
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
        self._close_now()

    # -- closing ---------------------------------------------------------------------------

    def close_gently(self) -> None:
        """Close; a client still sending its body may finish it (discarded) and read its
        answer for ``LINGER_SECONDS``, then the connection is closed whatever it does."""
        real = self._real
        assert real is not None
        if self.lingering or real.is_closing() or self.conn.their_state is not h11.SEND_BODY:
            real.close()
            return
        self.lingering = True
        self._disarm()
        if self._rate is not None:
            self._rate.cancel()
            self._rate = None
        if real.can_write_eof():
            real.write_eof()  # the answer, then the end: the client may close first
        self._linger = self.loop.call_later(LINGER_SECONDS, real.close)

    def _close_now(self) -> None:
        (self._real or self.transport).close()

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
        self.counters.timed_out += 1
        self._warn(
            "a client took longer than receiver.%s to send its request: connection closed",
            "bodyTimeoutSeconds" if self._in_body else "headerTimeoutSeconds",
        )
        self._close_now()


def guarded_protocol(limits: ReceiverLimits, counters: Counters) -> type[H11Protocol]:
    """The protocol class uvicorn runs each connection with, for these limits."""
    return type(
        "GuardedH11Protocol",
        (GuardedH11Protocol,),
        {
            "limits": limits,
            "counters": counters,
            "too_many": _refusal(limits, b"too many connections"),
            "too_many_here": _refusal(limits, b"too many connections from this address"),
        },
    )
