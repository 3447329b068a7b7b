"""The settings file, parsed once per version of the file.

Every resource call, sensor tick and command asks for the settings; parsing the YAML and
validating it each time cost a parse per call (four or more per sync run, two per sensor tick),
and let two calls of one run see two versions of a file edited in between. ``load_settings``
asks here: a file whose resolved path, ``mtime_ns``, size and inode are unchanged is not read
again, and an edited (or replaced) file is read at the next call.

A file modified just before it was read is not trusted: file times have a coarse granularity
(a kernel tick, seconds on some file systems), so a second edit within it could keep the same
time and size. Such an entry is parsed again on each call until the file is ``RACY_SECONDS``
old (git's "racily clean" index entries, the same problem).

The callers that need one version for a whole run or sensor tick take a snapshot
(``defs.resources``); this cache only makes those snapshots cheap.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")

# older than this (by its own mtime), a file's stat identifies its content
RACY_SECONDS = 2.0
# settings files kept (a process reads one; a test session reads many)
MAX_FILES = 32


@dataclass(frozen=True, slots=True)
class CacheStats:
    hits: int  # answered without reading the file
    parses: int  # the file read and parsed


@dataclass(frozen=True, slots=True)
class _Entry(Generic[T]):
    version: tuple[int, int, int, int]  # mtime_ns, size, inode, device
    value: T
    settled: bool  # parsed when the file was already RACY_SECONDS old


class FileVersionCache(Generic[T]):
    """What ``parse`` made of each file, reused while the file keeps its version."""

    def __init__(self) -> None:
        self._entries: OrderedDict[Path, _Entry[T]] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = 0
        self._parses = 0

    def get(self, path: Path, parse: Callable[[Path], T]) -> T:
        try:
            resolved = path.resolve()
            st = resolved.stat()
        except OSError:  # missing, unreadable...: ``parse`` says why, in its words
            return self._parse(path, parse)
        version = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev)
        with self._lock:
            entry = self._entries.get(resolved)
            if entry is not None and entry.settled and entry.version == version:
                self._hits += 1
                self._entries.move_to_end(resolved)
                return entry.value
        started = time.time_ns()
        value = self._parse(path, parse)
        settled = started - st.st_mtime_ns >= RACY_SECONDS * 1e9
        with self._lock:
            self._entries[resolved] = _Entry(version, value, settled)
            self._entries.move_to_end(resolved)
            while len(self._entries) > MAX_FILES:
                self._entries.popitem(last=False)
        return value

    def _parse(self, path: Path, parse: Callable[[Path], T]) -> T:
        with self._lock:
            self._parses += 1
        return parse(path)

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self._hits, self._parses)
