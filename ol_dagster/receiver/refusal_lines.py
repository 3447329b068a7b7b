"""Refusals logged without flooding the log: the first of a kind at once, then how many followed.

The receiver logs what it refuses, so that an operator sees a misconfigured producer. One line per
refusal let a client refused in a loop flood the log: 510 sockets without a token made ~270 lines
a second. Every refusal the receiver logs goes through ``RefusalLines``, by its kind (the status
and reason, or the limit it hit) and its client's address (without the port, which changes with
every connection):

- the first refusal of a kind from an address is logged at once, in full, as before;
- the next ones within ``receiver.refusalLogSeconds`` (10 s) are counted, not logged;
- once that time is past, one line says how many there were: ``... and 412 more refused from
  10.0.0.5 in the last 10 s: 401 missing or unknown bearer token``; a kind still refused starts a
  new count then, so a client refused in a loop costs a line every 10 s. The line comes with the
  next refusal, or from a timer on the receiver's event loop when none comes.

The table of kinds and addresses holds at most ``MAX_KEYS`` (1,000) of them: a hostile client may
have as many addresses as it likes, so beyond that the refusals of new ones are counted together
by status, "from other clients" (their first one logged too). ``refusalLogSeconds: 0`` logs every
refusal in full.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

MAX_KEYS = 1_000
OTHER_CLIENTS = "other clients"
_KIND_CHARS = 200  # of a reason, in a key: a reason may quote a long event


@dataclass(slots=True)
class _Count:
    kind: str
    since: float
    more: int = 0


class RefusalLines:
    """Logs refusals through ``logger``, at most one line per kind and address per ``seconds``."""

    def __init__(
        self,
        logger: logging.Logger,
        seconds: float,
        *,
        max_keys: int = MAX_KEYS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.seconds = seconds
        self.max_keys = max_keys
        self.clock = clock
        self._counts: dict[tuple[str, str], _Count] = {}
        self._timer: asyncio.TimerHandle | None = None

    def refused(
        self, kind: str, client: str | None, overflow: str, message: str, *args: object
    ) -> None:
        """Log ``message % args``, a refusal of ``kind`` from ``client`` (an address, None when
        unknown), or count it; ``overflow`` is its kind among other clients' (its status)."""
        if self.seconds <= 0:
            self.logger.warning(message, *args)
            return
        now = self.clock()
        self.flush(now)
        key = (kind[:_KIND_CHARS], client or "an unknown client")
        count = self._counts.get(key)
        if count is None and len(self._counts) >= self.max_keys:
            key = (overflow, OTHER_CLIENTS)
            count = self._counts.get(key)
        if count is not None:
            count.more += 1
            return
        self._counts[key] = _Count(key[0], now)
        self.logger.warning(message, *args)
        self._arm()

    def flush(self, now: float | None = None) -> None:
        """Log the counts whose time is past; forget the kinds no longer refused."""
        now = self.clock() if now is None else now
        for key, count in list(self._counts.items()):
            if now - count.since < self.seconds:
                continue
            if count.more == 0:
                del self._counts[key]
                continue
            self.logger.warning(
                "... and %d more refused from %s in the last %.0f s: %s",
                count.more,
                key[1],
                now - count.since,
                count.kind,
            )
            count.since, count.more = now, 0

    def _arm(self) -> None:
        """A timer that logs the counts when no refusal comes to (on the running event loop;
        none outside one, where the next refusal does it)."""
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._timer = loop.call_later(self.seconds, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self.flush()
        if self._counts:
            self._arm()
