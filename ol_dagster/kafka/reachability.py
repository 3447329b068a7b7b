"""Whether the Kafka brokers answer, told once per interval rather than once per attempt.

librdkafka tries a broker that refuses connections again every few tens of milliseconds and
reports each try (about twenty lines a second). A person reading the consumer's log needs to
know that no broker answers, where, why and for how long: one line per ``REPORT_EVERY`` seconds,
and one when a broker answers again. ``ol-dagster consume --idle-exit`` also needs to know
whether a broker ever answered: until one has there is no group to wait for, so its idle time
counts from start.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

log = logging.getLogger("ol_dagster.kafka")

REPORT_EVERY = 10.0  # seconds between two lines saying the brokers do not answer
STATS_EVERY_MS = 1000  # librdkafka's statistics, read for the brokers' states while none answers

# librdkafka's errors that mean no broker can be talked to (the others are logged as they come)
UNREACHABLE = frozenset({"_ALL_BROKERS_DOWN", "_TRANSPORT", "_RESOLVE", "_AUTHENTICATION", "_SSL"})
# librdkafka's log facility of a failed connection: the error callback reports the same failure
CONNECTION_FAILED = "FAIL"


class DropConnectionFailures(logging.Filter):
    """Drops librdkafka's per-attempt connection failure lines (``BrokerWatch`` reports them)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        return not (isinstance(args, tuple) and args and args[0] == CONNECTION_FAILED)


class BrokerWatch:
    """The brokers' reachability as the consumer's callbacks tell it."""

    def __init__(self, servers: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.servers = servers
        self.clock = clock
        self.answered = False  # a broker answered at least once
        self.down_since: float | None = None
        self.reason = ""
        self._reported: float | None = None  # when the last "no broker answers" line was written

    def unreachable(self, reason: str, *, specific: bool = True) -> None:
        """A try failed; ``specific`` is false for a summary (``_ALL_BROKERS_DOWN``) that must
        not hide the reason of the try that failed."""
        now = self.clock()
        if self.down_since is None:
            self.down_since = now
        if specific or not self.reason:
            self.reason = reason
        if self._reported is not None and now - self._reported < REPORT_EVERY:
            return
        self._reported = now
        log.warning(
            "no Kafka broker answers at %s%s (%s); retrying, next report in %.0f s",
            self.servers,
            f" for {now - self.down_since:.0f} s" if now > self.down_since else "",
            self.reason,
            REPORT_EVERY,
        )

    def reachable(self) -> None:
        if self.down_since is not None and self._reported is not None:
            log.info(
                "a Kafka broker answers at %s again after %.0f s",
                self.servers,
                self.clock() - self.down_since,
            )
        self.down_since = None
        self.reason = ""
        self.answered = True

    def stats(self, stats_json: str) -> None:
        """librdkafka's statistics: a broker in state ``UP`` answers."""
        if self.answered and self.down_since is None:
            return  # nothing to learn: not parsed
        brokers = json.loads(stats_json).get("brokers", {})
        if any(b.get("state") == "UP" for b in brokers.values()):
            self.reachable()
