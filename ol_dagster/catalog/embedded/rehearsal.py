"""The connections of the embedded catalog's cleanup calls and reads, and its rehearsal.

The cleanup's dry run is a rehearsal: the calls of a plan made for real, in order, in one
transaction rolled back at the end, so each call's counts are exactly what it would remove after
the earlier ones (cascades included), and nothing is gone afterwards. Outside a rehearsal every
cleanup call is a transaction of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine


class Sessions:
    """Where a cleanup call or a read runs: its own transaction or connection, or the
    rehearsal's while one is under way (``rehearsing``)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.rehearsing: Connection | None = None  # the open transaction of a rehearsal

    @contextmanager
    def rehearsal(self) -> Iterator[None]:
        """Rehearse cleanup calls for real, then undo them all (see ``EmbeddedCatalog``)."""
        if self.rehearsing is not None:
            raise RuntimeError("a rehearsal is already under way")
        with self.engine.connect() as conn:
            transaction = conn.begin()
            self.rehearsing = conn
            try:
                yield
            finally:
                self.rehearsing = None
                transaction.rollback()

    @contextmanager
    def cleanup(self) -> Iterator[Connection]:
        """A transaction of its own, or, in a rehearsal, a savepoint of the rehearsal's: a call
        that fails (refused permission) leaves the earlier ones rehearsed."""
        conn = self.rehearsing
        if conn is None:
            with self.engine.begin() as own:
                yield own
            return
        with conn.begin_nested():
            yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection of its own, or the rehearsal's (reads see the rehearsed state)."""
        if self.rehearsing is not None:
            yield self.rehearsing
            return
        with self.engine.connect() as conn:
            yield conn
