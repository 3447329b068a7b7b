"""Giving a large post's memory back to the system once it is answered (issue 15).

glibc's malloc keeps what Python frees for its own reuse: a heap returns only its free top, and
each worker thread that processes posts allocates from arenas of its own. After two 50 MB posts
the receiver kept about 1 GB that Python had freed. ``malloc_trim(0)`` returns the free pages of
every arena; the receiver calls it in the worker thread after each large post (ctypes releases
the interpreter for the call, so other requests go on). On a C library without it (musl, macOS)
this does nothing.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable


def _find_malloc_trim() -> Callable[[int], int] | None:
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the C library the interpreter runs on
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_MALLOC_TRIM = _find_malloc_trim()


def release_free_memory() -> bool:
    """Return freed heap memory to the system; False where the C library cannot."""
    if _MALLOC_TRIM is None:
        return False
    _MALLOC_TRIM(0)
    return True
