"""Reading a request body within the definition's limits, gzip included.

The size limit applies to the bytes after decompression too: a small gzip body that inflates to
gigabytes (a gzip bomb) is refused while it inflates, not after it has filled the memory.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Callable

_ENCODINGS = {"", "identity", "gzip", "x-gzip"}


class BodyError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


async def read_body(
    chunks: AsyncIterator[bytes],
    encoding: str,
    max_bytes: int,
    on_size: Callable[[int], None] | None = None,
) -> bytes:
    """``on_size`` is told the body's size so far (after decompression) as it grows; it may raise
    ``BodyError`` to stop reading (the receiver's bound on large posts in progress)."""
    encoding = encoding.strip().lower()
    if encoding not in _ENCODINGS:
        raise BodyError(415, f"Content-Encoding {encoding!r} is not supported (use gzip or none)")
    gzip = encoding in ("gzip", "x-gzip")
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS) if gzip else None
    parts: list[bytes] = []
    size = 0
    raw = 0
    too_big = BodyError(413, f"request body is larger than limits.maxBodyBytes ({max_bytes} bytes)")
    async for chunk in chunks:
        raw += len(chunk)
        if raw > max_bytes:
            raise too_big
        if inflater is None:
            parts.append(chunk)
            size += len(chunk)
            if on_size is not None:
                on_size(size)
            continue
        data = chunk
        while data:
            try:
                out = inflater.decompress(data, max_bytes + 1 - size)
            except zlib.error as exc:
                raise BodyError(400, f"request body is not valid gzip: {exc}") from None
            size += len(out)
            if size > max_bytes:
                raise too_big
            parts.append(out)
            if on_size is not None:
                on_size(size)
            data = inflater.unconsumed_tail
            if inflater.eof and inflater.unused_data:
                # a multi-member gzip body (concatenated streams): read every member
                data = inflater.unused_data + data
                inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    if inflater is not None and not inflater.eof and (raw or parts):
        raise BodyError(400, "request body is not valid gzip: the stream is truncated")
    return b"".join(parts)
