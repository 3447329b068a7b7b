"""Kafka messages into what the store keeps: the receiver's validation, and snapshot framing.

Each message's value is one OpenLineage event, decoded and validated exactly as a posted event
(``receiver.decode.decode_event``, ``receiver.intake.sort_events`` with the definition's
``allowedJobNamespaces`` and ``limits``): accepted, it becomes the same stored event; rejected,
a dead letter with the same reason the receiver would answer. The topic chooses the definition.

A stream topic's events join the definition's open stream batch, as single posts do. A snapshot
topic (``snapshot: true``) carries whole snapshots, framed by headers on its messages:

- every message of a snapshot: ``ol-dagster-snapshot: <id>`` (the producer's name for it);
- its last message also: ``ol-dagster-snapshot-end: <n>``, the number of messages of the
  snapshot, this one included;
- optionally, every message of it: ``ol-snapshot-sequence: <n>``, the producer's order of its
  snapshots (``ol_dagster.snapshot_order``), the same on each message. Without it the snapshot is
  ordered by the timestamp of its first message, never by when it was read: partitions are read
  in any interleaving.

A snapshot's messages follow each other in one partition (one producer, one key). At its end
marker it is stored as one sealed batch, a whole snapshot when every message was accepted and
``n`` were received; else (a rejected message, a count that does not match, another snapshot
beginning before the end marker, a message whose ``ol-snapshot-sequence`` is malformed or
differs from its first message's) its accepted events are stored all the same, as a batch that
is not a snapshot, with the reason. Until its end marker nothing of it is stored, so the
partition's committed offset stays before its first message and a consumer that stops re-reads
it whole.

What an open snapshot holds is bounded, so that a producer that never sends the end marker cannot
take the consumer's memory (300 messages of 1 MB held 300 MB; killed, the consumer read the same
snapshot again at its restart): past ``kafka.maxSnapshotEvents`` messages (or the definition's
``limits.maxEventsPerBatch``, if fewer) or ``kafka.maxSnapshotBytes`` bytes, and after
``kafka.maxSnapshotIdleSeconds`` without a message of it (``expire``), what it holds is stored
as a batch that is not a snapshot, its offset committed, and a warning is logged; its later
messages make its next parts, none a snapshot. A message without the snapshot header is a dead
letter stored at once, never held with an open snapshot.

Pure: no Kafka client, no database. ``consumer`` feeds it and stores what it hands back.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ol_dagster.kafka.settings import KafkaSettings
from ol_dagster.receiver.decode import NotJson, decode_event
from ol_dagster.receiver.intake import sort_events
from ol_dagster.snapshot_order import KAFKA_HEADER as SEQUENCE_HEADER
from ol_dagster.snapshot_order import BadSequence, parse_sequence
from ol_dagster.store import NewEvent
from ol_dagster.store.kafka_writes import DeadLetter, KafkaWrite, SnapshotBatch, StreamEvent
from ol_dagster.sync_definition import SyncDefinition

SNAPSHOT_HEADER = "ol-dagster-snapshot"
SNAPSHOT_END_HEADER = "ol-dagster-snapshot-end"


@dataclass(frozen=True, slots=True)
class Message:
    """What the intake needs of a Kafka message."""

    topic: str
    partition: int
    offset: int
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp: datetime | None = None  # its Kafka timestamp, None when the broker gave none

    def header(self, name: str) -> str | None:
        """The last value of a header (Kafka allows repeats), as text."""
        found = None
        for key, value in self.headers:
            if key == name:
                found = (value or b"").decode("utf-8", errors="replace")
        return found


def judge(value: bytes | None, definition: SyncDefinition) -> NewEvent | str:
    """The message's event as the receiver would store it, or the reason it would refuse it."""
    if not value:
        return "the message has no value: each message carries one OpenLineage event"
    if len(value) > definition.limits.maxBodyBytes:
        return (
            f"the message is {len(value)} bytes; at most {definition.limits.maxBodyBytes} are "
            "accepted (limits.maxBodyBytes)"
        )
    try:
        parsed = decode_event(value)
    except NotJson as exc:
        return f"not valid JSON: {exc}"
    if isinstance(parsed, dict) and isinstance(parsed.get("events"), list):
        return "one event per message: a {'events': [...]} batch is not taken from Kafka"
    intake = sort_events(
        [parsed], definition.namespace_patterns, max_name_length=definition.limits.maxNameLength
    )
    if intake.accepted:
        return intake.accepted[0]
    # the receiver numbers the events of a post ("event 0: ..."); a message is one event
    rejection = intake.rejected[0]
    return rejection.reason.removeprefix(f"event {rejection.index}: ")


@dataclass(slots=True)
class _OpenSnapshot:
    """A snapshot whose end marker has not arrived yet, in one partition."""

    id: str
    first_offset: int
    events: list[NewEvent] = field(default_factory=list)
    rejections: list[dict] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)  # its rejected messages
    received: int = 0
    held: int = 0  # bytes of its events and dead letters, held until it is stored
    part: int = 0  # >0: the earlier parts were stored already (a bound cut it)
    sequence: int | None = None  # its first message's ol-snapshot-sequence
    produced_at: datetime | None = None  # its first message's timestamp
    last_seen: float = 0.0  # when its last message was read (the assembler's clock)


class Assembler:
    """Turns the messages of each poll into one ``KafkaWrite``, keeping open snapshots (per
    partition) from one poll to the next, each within ``kafka.maxSnapshotBytes`` and
    ``kafka.maxSnapshotEvents``, and no longer than ``kafka.maxSnapshotIdleSeconds`` without a
    message (``expire``). ``clock``: seconds, for the idle time (monotonic)."""

    def __init__(
        self,
        kafka: KafkaSettings,
        definitions: Mapping[str, SyncDefinition],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kafka = kafka
        self.definitions = definitions
        self._clock = clock
        self._open: dict[tuple[str, int], _OpenSnapshot] = {}
        # a snapshot a bound cut: its next messages are its next part (never a whole snapshot)
        self._cut: dict[tuple[str, int], _OpenSnapshot] = {}
        self._last_offset: dict[tuple[str, int], int] = {}  # of snapshot topics' partitions

    def drop(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Forget the open snapshots of partitions this consumer no longer reads: nothing of
        them was stored or committed, so their next reader reads them whole."""
        for key in partitions:
            self._open.pop(key, None)
            self._cut.pop(key, None)
            self._last_offset.pop(key, None)

    def held_bytes(self) -> int:
        """Bytes the open snapshots hold, every partition's."""
        return sum(o.held for o in self._open.values())

    def add(self, messages: Iterable[Message]) -> KafkaWrite:
        write = KafkaWrite()
        for m in messages:
            key = (m.topic, m.partition)
            topic = self.kafka.topic(m.topic)
            definition = self.definitions[topic.definition]
            if topic.snapshot:
                self._last_offset[key] = m.offset
                self._snapshot_message(m, definition, write)
                opened = self._open.get(key)
                write.next_offsets[key] = opened.first_offset if opened else m.offset + 1
                continue
            outcome = judge(m.value, definition)
            if isinstance(outcome, str):
                write.dead_letters.append(self._dead(m, definition, outcome))
            else:
                write.stream.append(StreamEvent(definition.name, *key, m.offset, outcome))
            write.next_offsets[key] = m.offset + 1
        return write

    def expire(self) -> KafkaWrite:
        """Store the open snapshots that read no message for ``kafka.maxSnapshotIdleSeconds``
        (their producer stopped before the end marker): each as a batch that is not a snapshot,
        its partition's offset past it. A consumer calls it between polls."""
        write = KafkaWrite()
        idle = self.kafka.maxSnapshotIdleSeconds
        now = self._clock()
        for key, opened in list(self._open.items()):
            if now - opened.last_seen < idle:
                continue
            definition = self.definitions[self.kafka.topic(key[0]).definition]
            self._cut_short(
                key,
                definition,
                write,
                f"snapshot {opened.id!r} read no message for {idle:g} s after offset "
                f"{self._last_offset[key]} and no {SNAPSHOT_END_HEADER} message "
                "(kafka.maxSnapshotIdleSeconds): stored as it is, not a whole snapshot",
            )
            write.next_offsets[key] = self._last_offset[key] + 1
        return write

    def _dead(self, m: Message, definition: SyncDefinition, reason: str) -> DeadLetter:
        raw = m.value or b""
        limit = self.kafka.deadLetterMaxBytes
        return DeadLetter(
            definition.name, m.topic, m.partition, m.offset, reason, raw[:limit], len(raw)
        )

    def _snapshot_message(self, m: Message, definition: SyncDefinition, write: KafkaWrite) -> None:
        key = (m.topic, m.partition)
        opened = self._open.get(key)
        snapshot_id = m.header(SNAPSHOT_HEADER)
        if not snapshot_id:
            # a dead letter at once, even inside an open snapshot: nothing of it is held (the
            # store skips it when the snapshot is read again, from its first message)
            write.dead_letters.append(
                self._dead(
                    m,
                    definition,
                    f"topic {m.topic} carries snapshots: every message needs the header "
                    f"{SNAPSHOT_HEADER}: <snapshot id>",
                )
            )
            return
        if opened is not None and opened.id != snapshot_id:
            opened.rejections.append(
                {
                    "index": opened.received,
                    "reason": f"snapshot {opened.id!r} was interrupted at offset {m.offset} by "
                    f"snapshot {snapshot_id!r} before its {SNAPSHOT_END_HEADER} message",
                }
            )
            self._close(key, definition, write, whole=False)
            opened = None
        if opened is None:
            opened = self._open[key] = self._begin(key, snapshot_id, m)
        outcome = self._sequence_problem(m, opened) or judge(m.value, definition)
        if isinstance(outcome, str):
            opened.rejections.append(
                {"index": opened.received, "reason": f"offset {m.offset}: {outcome}"}
            )
            letter = self._dead(m, definition, outcome)
            opened.dead.append(letter)
            opened.held += len(letter.raw)
        else:
            opened.events.append(outcome)
            opened.held += len(outcome.raw)
        opened.received += 1
        opened.last_seen = self._clock()
        end = m.header(SNAPSHOT_END_HEADER)
        if end is not None:
            self._end(key, definition, write, end)
        elif reason := self._over_bounds(opened, definition):
            self._cut_short(key, definition, write, reason)

    def _begin(self, key: tuple[str, int], snapshot_id: str, m: Message) -> _OpenSnapshot:
        """A snapshot's first message, or the first of its next part after a bound cut it."""
        cut = self._cut.pop(key, None)
        if cut is not None and cut.id == snapshot_id:
            return _OpenSnapshot(
                snapshot_id,
                m.offset,
                part=cut.part + 1,
                sequence=cut.sequence,
                produced_at=cut.produced_at,
            )
        return _OpenSnapshot(snapshot_id, m.offset, produced_at=m.timestamp)

    def _over_bounds(self, opened: _OpenSnapshot, definition: SyncDefinition) -> str | None:
        """Why the open snapshot may hold no more, else None."""
        kafka = self.kafka
        events, events_key = kafka.maxSnapshotEvents, "kafka.maxSnapshotEvents"
        if definition.limits.maxEventsPerBatch < events:
            events, events_key = definition.limits.maxEventsPerBatch, "limits.maxEventsPerBatch"
        if opened.received >= events:
            return (
                f"snapshot {opened.id!r} has more than {opened.received} messages "
                f"({events_key}): stored in parts, none a whole snapshot"
            )
        if opened.held >= kafka.maxSnapshotBytes:
            return (
                f"snapshot {opened.id!r} holds {opened.held} bytes after {opened.received} "
                f"messages, more than {kafka.maxSnapshotBytes} (kafka.maxSnapshotBytes): "
                "stored in parts, none a whole snapshot"
            )
        return None

    def _cut_short(
        self, key: tuple[str, int], definition: SyncDefinition, write: KafkaWrite, reason: str
    ) -> None:
        """Store what the open snapshot holds as a batch that is not a snapshot, with ``reason``
        (a warning too); its next messages are its next part."""
        opened = self._open[key]
        opened.rejections.append({"index": opened.received, "reason": reason})
        write.warnings.append(f"{key[0]}[{key[1]}]: {reason}")
        self._close(key, definition, write, whole=False)
        self._cut[key] = opened

    @staticmethod
    def _sequence_problem(m: Message, opened: _OpenSnapshot) -> str | None:
        """Why the message's ol-snapshot-sequence makes it no message of the snapshot, else None.
        The first message gives the snapshot its sequence (none when it carries none, or a
        malformed one); every other message must carry the same."""
        try:
            sequence = parse_sequence(m.header(SEQUENCE_HEADER), header=SEQUENCE_HEADER)
        except BadSequence as exc:
            return str(exc)
        if opened.received == 0 and opened.part == 0:
            opened.sequence = sequence
            return None
        if sequence == opened.sequence:
            return None

        def said(value: int | None) -> str:
            return "none" if value is None else str(value)

        return (
            f"{SEQUENCE_HEADER} {said(sequence)} differs from the snapshot's first message "
            f"(offset {opened.first_offset}: {said(opened.sequence)}): every message of a "
            "snapshot carries the same"
        )

    def _end(
        self, key: tuple[str, int], definition: SyncDefinition, write: KafkaWrite, end: str
    ) -> None:
        opened = self._open[key]
        count = end.strip()
        # ASCII digits only, and no more than a count can have: int() refuses "²" (a digit to
        # str.isdigit) and 5,000 digits, and an exception here would stop the partition for good
        announced = int(count) if count.isascii() and count.isdigit() and len(count) < 19 else None
        if announced is None:
            opened.rejections.append(
                {
                    "index": opened.received - 1,
                    "reason": f"{SNAPSHOT_END_HEADER} must be the number of messages of the "
                    f"snapshot, not {end[:50]!r}",
                }
            )
        elif announced != opened.received and not opened.part:
            opened.rejections.append(
                {
                    "index": opened.received - 1,
                    "reason": f"snapshot {opened.id!r} announced {announced} messages; "
                    f"{opened.received} were read (from offset {opened.first_offset}): not whole",
                }
            )
        self._close(key, definition, write, whole=not opened.part)
        self._cut.pop(key, None)

    def _close(
        self,
        key: tuple[str, int],
        definition: SyncDefinition,
        write: KafkaWrite,
        *,
        whole: bool,
    ) -> None:
        opened = self._open.pop(key)
        write.snapshots.append(
            SnapshotBatch(
                definition.name,
                *key,
                first_offset=opened.first_offset,
                events=opened.events,
                received=opened.received,
                rejections=opened.rejections,
                whole=whole and not opened.rejections,
                sequence=opened.sequence,
                produced_at=opened.produced_at,
            )
        )
        write.dead_letters.extend(opened.dead)
        opened.events, opened.dead = [], []  # a cut snapshot is kept for its next part only
