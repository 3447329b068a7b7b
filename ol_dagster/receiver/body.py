"""Reading a request body within the definition's limits, gzip included.

The event loop only reads the bytes as they come (``read_body``): at most ``maxBodyBytes`` of
them, and a ``Content-Length`` above it is refused before any is read. A gzip body is inflated
afterwards in the worker thread that processes the post (``inflate``), never on the event loop:
inflating a gzip bomb there, or 157,000 empty gzip members, stopped every other request for half a
second. The size limit applies to the inflated bytes too, checked every ``INFLATE_STEP`` bytes as
they are inflated, so a small body that inflates to gigabytes is refused once it passes the limit,
not after it has filled the memory.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Callable

_ENCODINGS = {"", "identity", "gzip", "x-gzip"}

# inflated at most this much at a time (zlib releases the interpreter while it inflates)
INFLATE_STEP = 1024 * 1024
# fed to zlib at most this much at a time (``inflate``)
_INPUT_STEP = 16 * 1024


class BodyError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _too_big(max_bytes: int) -> BodyError:
    return BodyError(413, f"request body is larger than limits.maxBodyBytes ({max_bytes} bytes)")


def is_gzip(encoding: str) -> bool:
    """Whether a body of this Content-Encoding is gzip; ``BodyError`` 415 for one not taken."""
    encoding = encoding.strip().lower()
    if encoding not in _ENCODINGS:
        raise BodyError(415, f"Content-Encoding {encoding!r} is not supported (use gzip or none)")
    return encoding in ("gzip", "x-gzip")


def check_length(content_length: str | None, max_bytes: int) -> None:
    """Refuse a body whose announced length is over the limit before reading any of it."""
    length = (content_length or "").strip()
    if length.isdigit() and int(length) > max_bytes:
        raise _too_big(max_bytes)


async def read_body(
    chunks: AsyncIterator[bytes],
    max_bytes: int,
    on_size: Callable[[int], None] | None = None,
) -> bytes:
    """The body's bytes as sent (gzip still compressed). ``on_size`` is told the body's size so
    far as it grows; it may raise ``BodyError`` to stop reading (the receiver's bound on large
    posts in progress)."""
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > max_bytes:
            raise _too_big(max_bytes)
        parts.append(chunk)
        if on_size is not None:
            on_size(size)
    return b"".join(parts)


def inflate(data: bytes, max_bytes: int, on_size: Callable[[int], None] | None = None) -> bytes:
    """A gzip body inflated, every member of it, within ``max_bytes`` (``BodyError`` 413 as soon
    as it passes them, 400 for a body that is not gzip). ``on_size`` is told the inflated size as
    it grows, as ``read_body`` tells it.

    The body is fed to zlib ``_INPUT_STEP`` bytes at a time: at the end of each member zlib copies
    the input it was given past it, and given the whole body a body of 157,000 empty members made
    that copy 157,000 times (15 s)."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    view = memoryview(data)
    parts: list[bytes] = []
    size = pos = 0
    pending: bytes | memoryview = b""
    while True:
        if not pending:
            if pos >= len(view):
                break
            pending, pos = view[pos : pos + _INPUT_STEP], pos + _INPUT_STEP
        try:
            out = inflater.decompress(pending, min(INFLATE_STEP, max_bytes + 1 - size))
            pending = inflater.unconsumed_tail
            if not pending and pos >= len(view) and not inflater.eof:
                # all of it read: what inflating it still holds (one match of 258 bytes at most)
                out += inflater.flush()
        except zlib.error as exc:
            raise BodyError(400, f"request body is not valid gzip: {exc}") from None
        size += len(out)
        if size > max_bytes:
            raise _too_big(max_bytes)
        if out:
            parts.append(out)
            if on_size is not None:
                on_size(size)
        if inflater.eof:
            # a multi-member gzip body (concatenated streams): read every member (what follows
            # the end of this one is all in ``unused_data``, its unconsumed tail included)
            pending = inflater.unused_data
            if pending or pos < len(view):
                inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    if data and not inflater.eof:
        raise BodyError(400, "request body is not valid gzip: the stream is truncated")
    return b"".join(parts)
