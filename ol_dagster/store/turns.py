"""Fair turns at SQLite's single write lock for the threads of one process (the receiver).

A large post is written in short transactions (``store.posted``); without turns, SQLite's
polling busy handler let it take the lock again and again ahead of a waiting single-event post.
Kept apart from the store's tables: it is about the lock, not about any one of them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class WriteTurns:
    """First come, first served turns at SQLite's write lock for this process's threads (the
    receiver's posts), each transaction of a post in chunks taking a new turn.

    SQLite's busy handler polls with growing sleeps (up to 100 ms): a post written in short
    transactions, each asking for the lock again as soon as the last one ended, kept it from a
    waiting single-event post, which rarely polled in the gap, and a waiter woke late. Here a
    write waits its turn on a condition (woken at once) before it asks SQLite, so between two
    chunks every write that came meanwhile goes first. Other processes (a sync run) are not in
    it: they poll as before."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._changed = threading.Condition()
        self._next = 0  # the ticket the next write gets
        self._serving = 0  # the ticket whose turn it is

    @contextmanager
    def turn(self) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        with self._changed:
            ticket = self._next
            self._next += 1
            self._changed.wait_for(lambda: self._serving == ticket)
        try:
            yield
        finally:
            with self._changed:
                self._serving += 1
                self._changed.notify_all()
