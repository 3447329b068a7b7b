"""The consumer loop: poll, store, then commit (confluent-kafka, a consumer group).

At-least-once from Kafka, exactly once in the store: each poll's messages are stored in one
transaction together with each partition's next offset (``EventStore.add_kafka_write``), and
only then committed to Kafka, synchronously. A consumer killed between the two re-reads what it
had stored, and the store skips it; a commit refused during a rebalance changes nothing either.
On assignment a partition starts at the offset the store holds (the group's committed offset
can only be behind it), so a group whose offsets expired re-reads nothing. (A topic deleted and
created again starts its offsets over: its rows in ``ol_kafka_offsets`` must be deleted, or its
first messages are taken as stored. The end offset a broker reports cannot decide it: Tansu
reports 1 for a partition of 750 messages.)

Several consumers of one group split the partitions; before a partition is revoked everything
polled from it is stored and committed (a poll is stored before the next one, and the callbacks
run inside a poll), and an open snapshot of it is dropped, to be read whole by its next owner.

An event store that cannot be reached during a rebalance: a revoked partition only misses the
re-commit of its stored offsets (a warning; its next reader starts at the store's offsets anyway).
An assigned one cannot start without them, so the consumer stops (``StoreLostInRebalance``;
``ol-dagster consume`` ends in one line, exit 2), committing nothing more, and leaves the group.
Not a retry, as the write path does: the callback runs inside the poll, so retrying there holds
the poll past ``max.poll.interval.ms`` and the group drops the member anyway, while the partitions
it holds read nothing; a stopped member hands them over at once, and its supervisor's restart
waits for the store (start-up refuses an unreachable store in one line).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.exc import InterfaceError, OperationalError

from ol_dagster.kafka.intake import Assembler, Message
from ol_dagster.kafka.reachability import (
    STATS_EVERY_MS,
    UNREACHABLE,
    BrokerWatch,
    DropConnectionFailures,
)
from ol_dagster.kafka.settings import KafkaSettings
from ol_dagster.settings import Settings
from ol_dagster.store import EventStore, StoreUnavailable
from ol_dagster.store.kafka_writes import KafkaStored, KafkaWrite

log = logging.getLogger("ol_dagster.kafka")

INSTALL_HINT = "pip install 'ol-dagster[kafka]' (the confluent-kafka client)"
_STORE_RETRY_MAX = 30.0  # seconds between two tries of a store that refuses writes


class KafkaUnavailable(RuntimeError):
    """confluent-kafka is not installed (the message says how to install it)."""


class StoreLostInRebalance(RuntimeError):
    """The event store could not give the offsets of the partitions just assigned: the consumer
    stops (the message is the store's reason)."""


def confluent() -> Any:
    try:
        import confluent_kafka
    except ImportError:
        raise KafkaUnavailable(f"the Kafka intake needs confluent-kafka: {INSTALL_HINT}") from None
    return confluent_kafka


@dataclass(slots=True)
class Totals:
    messages: int = 0
    events: int = 0
    snapshots: int = 0
    dead_letters: int = 0
    skipped: int = 0

    def add(self, stored: KafkaStored) -> None:
        self.events += stored.events
        self.snapshots += len(stored.snapshot_batches)
        self.dead_letters += stored.dead_letters
        self.skipped += stored.skipped


class KafkaIntake:
    """One consumer of the group, storing into ``store``. ``run`` until ``stop()`` is true."""

    def __init__(self, settings: Settings, store: EventStore) -> None:
        if settings.kafka is None:
            raise ValueError("the settings have no 'kafka' block")
        self.kafka: KafkaSettings = settings.kafka
        self.store = store
        self.assembler = Assembler(self.kafka, {d.name: d for d in settings.definitions})
        self.totals = Totals()
        self.assigned: set[tuple[str, int]] = set()
        self.joined = False  # the group has given this consumer its first assignment
        self.store_lost: str | None = None  # why it stopped in a rebalance: no store call since
        self.last_activity = time.monotonic()
        ck = confluent()
        self._ck = ck
        self._cooperative = "cooperative" in str(
            self.kafka.properties.get("partition.assignment.strategy", "")
        )
        self.brokers = BrokerWatch(",".join(self.kafka.bootstrapServers))
        self._fatal: Any = None  # a fatal error told by the error callback, raised by ``run``
        client_log = logging.getLogger("ol_dagster.kafka.client")
        if not any(isinstance(f, DropConnectionFailures) for f in client_log.filters):
            client_log.addFilter(DropConnectionFailures())
        config = {
            **self.kafka.consumer_config(),
            "error_cb": self._on_error,
            "stats_cb": self.brokers.stats,
            "statistics.interval.ms": STATS_EVERY_MS,
        }
        self.consumer = ck.Consumer(config, logger=client_log)

    def _on_error(self, error: Any) -> None:
        if error.fatal():
            self._fatal = error
        elif error.name() in UNREACHABLE:
            self.brokers.unreachable(error.str(), specific=error.name() != "_ALL_BROKERS_DOWN")
        else:
            log.warning("consumer: %s", error.str())

    def broker_answers(self, timeout: float = 1.0) -> bool:
        """Whether a broker answers a metadata request for the first topic now."""
        if self.brokers.answered:
            return True
        try:
            self.consumer.list_topics(topic=self.kafka.topics[0].topic, timeout=timeout)
        except self._ck.KafkaException:
            return False
        self.brokers.reachable()
        return True

    # -- rebalance -------------------------------------------------------------------------------

    def _offsets(self, topics: set[str]) -> dict[tuple[str, int], int]:
        """The store's offsets of ``topics``; ``StoreUnavailable`` when it cannot be reached."""
        if not topics:
            return {}  # an empty assignment needs no store
        try:
            return self.store.kafka_offsets(topics)
        except (OperationalError, InterfaceError) as exc:
            raise StoreUnavailable(" ".join(str(exc.orig or exc).split())) from None

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        if self.store_lost is not None:
            return  # stopping: confluent-kafka assigns them itself, nothing is read from them
        try:
            stored = self._offsets({p.topic for p in partitions})
        except StoreUnavailable as exc:
            self.store_lost = str(exc)
            raise StoreLostInRebalance(str(exc)) from None
        for p in partitions:
            key = (p.topic, p.partition)
            if key in stored:
                p.offset = stored[key]
            self.assigned.add(key)
        (consumer.incremental_assign if self._cooperative else consumer.assign)(partitions)
        self.joined = True
        self.brokers.reachable()
        self.last_activity = time.monotonic()
        log.info("assigned %s", _names(partitions))

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        keys = [(p.topic, p.partition) for p in partitions]
        self.assembler.drop(keys)
        if self.store_lost is None:
            try:
                stored = self._offsets({t for t, _ in keys})
            except StoreUnavailable as exc:
                log.warning(
                    "event store unreachable (%s): the stored offsets of %s are not committed "
                    "again (their next reader starts at the event store's offsets)",
                    exc,
                    _names(partitions),
                )
            else:
                # what is stored is committed, in case the commit after its write was refused
                self._commit({k: stored[k] for k in keys if k in stored})
        if self._cooperative:
            consumer.incremental_unassign(partitions)
        self.assigned.difference_update(keys)
        log.info("revoked %s", _names(partitions))

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        keys = [(p.topic, p.partition) for p in partitions]
        self.assembler.drop(keys)
        self.assigned.difference_update(keys)
        log.warning("lost %s (another consumer reads them now)", _names(partitions))

    # -- the loop --------------------------------------------------------------------------------

    def run(self, stop: Callable[[], bool]) -> Totals:
        topics = [t.topic for t in self.kafka.topics]
        self.consumer.subscribe(
            topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        try:
            while not stop():
                polled = self.consumer.consume(
                    num_messages=self.kafka.maxPollMessages,
                    timeout=self.kafka.pollTimeoutSeconds,
                )
                if self._fatal is not None:
                    raise self._ck.KafkaException(self._fatal)
                read = self.totals.messages
                write = self.assembler.add(self._messages(polled))
                if self.totals.messages > read:
                    self.brokers.reachable()
                    self.last_activity = time.monotonic()
                    self._store(write, stop)
                # snapshots whose producer stopped before their end marker
                if expired := self.assembler.expire():
                    self._store(expired, stop)
        finally:
            self.consumer.close()  # leaves the group: its partitions go to the others at once
        return self.totals

    def _messages(self, polled: list[Any]) -> Iterator[Message]:
        """The poll's messages one at a time, each let go once the assembler took it: a poll of
        64 messages of 1 MB held four copies of each at once (the client's, its value, the
        decoded event, the stored bytes)."""
        polled.reverse()
        while polled:
            message = self._message(polled.pop())
            if message is not None:
                self.totals.messages += 1
                yield message

    def _message(self, raw: Any) -> Message | None:
        error = raw.error()
        if error is not None:
            if error.fatal():
                raise self._ck.KafkaException(error)
            log.warning("consumer: %s", error)
            return None
        return Message(
            raw.topic(),
            raw.partition(),
            raw.offset(),
            raw.value(),
            raw.headers() or (),
            _timestamp(raw.timestamp(), self._ck.TIMESTAMP_NOT_AVAILABLE),
        )

    def _store(self, write: KafkaWrite, stop: Callable[[], bool]) -> None:
        """Store the write (retrying while the store refuses: nothing is committed meanwhile),
        then commit its offsets."""
        wait = 1.0
        while True:
            try:
                stored = self.store.add_kafka_write(write)
                break
            except StoreUnavailable as exc:
                if stop():
                    return  # not stored, not committed: read again at the next start
                log.warning("event store unavailable (%s); retrying in %.0f s", exc, wait)
                time.sleep(wait)
                wait = min(wait * 2, _STORE_RETRY_MAX)
        self.totals.add(stored)
        for warning in write.warnings:
            log.warning("%s", warning)
        for letter in write.dead_letters:
            log.warning(
                "dead letter %s[%d]@%d for %s: %s",
                letter.topic,
                letter.partition,
                letter.offset,
                letter.definition,
                letter.reason,
            )
        self._commit(write.next_offsets)

    def _commit(self, offsets: dict[tuple[str, int], int]) -> None:
        if not offsets:
            return
        partitions = [self._ck.TopicPartition(t, p, o) for (t, p), o in offsets.items()]
        try:
            self.consumer.commit(offsets=partitions, asynchronous=False)
        except self._ck.KafkaException as exc:
            # the store holds the offsets: the next reader skips what this commit would cover
            log.warning("commit refused (%s); the event store keeps the offsets", exc)


def _timestamp(stamp: tuple[int, int], not_available: int) -> datetime | None:
    """A message's (type, milliseconds) timestamp as a time, None when the broker gave none."""
    kind, ms = stamp
    if kind == not_available or ms < 0:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC)


def _names(partitions: list[Any]) -> str:
    return ", ".join(f"{p.topic}[{p.partition}]" for p in partitions) or "nothing"
