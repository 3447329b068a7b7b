"""Which of two snapshots of a definition is the newer one: the producer's order, on every path.

A snapshot older than one already synced is SUPERSEDED (neither uploaded nor cleaned), so the
catalog ends as the newest snapshot says whatever order snapshots arrive in: over two HTTP
connections, or over two Kafka partitions a consumer reads in any interleaving. The order is the
producer's when it gives one, never the order of reading:

- a producer may number its snapshots: ``OL-Snapshot-Sequence`` on a ``/api/v1/lineage/batch``
  post, ``ol-snapshot-sequence`` on every message of a Kafka snapshot; a decimal integer from 0
  to 999,999,999,999,999,999 (ASCII digits only, at most 18: a Unix time in milliseconds or
  microseconds fits), the same for a snapshot sent again;
- without one, a Kafka snapshot is ordered by the timestamp of its first message (its
  CreateTime, as the producer set it; the broker's LogAppendTime on a topic configured so), an
  HTTP post by its arrival.

The one rule compares ``order_key``: (carries a sequence, sequence, time, batch id), higher is
newer. So a snapshot with a sequence is newer than any without one (a producer that starts
numbering takes over from its unnumbered snapshots; one that stops is SUPERSEDED by its last
numbered snapshot, and says so in the report); two with sequences go by sequence; equal
sequences, or none, go by time, then by the order they were stored in.

Pure: the store writes the parts (``ol_batches.snapshot_sequence``, ``ordered_at``) and asks
the same question in SQL (``store.catalog_facts.newer_synced_snapshot``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

HTTP_HEADER = "OL-Snapshot-Sequence"
KAFKA_HEADER = "ol-snapshot-sequence"
MAX_DIGITS = 18  # below 2**63: a BIGINT on every store


class BadSequence(ValueError):
    """A snapshot sequence that is not a decimal integer of at most ``MAX_DIGITS`` digits; the
    message says which value and what is expected."""


def parse_sequence(value: str | None, *, header: str) -> int | None:
    """The sequence a header gives (None when absent), or ``BadSequence``. Blanks around the
    value are allowed; signs, decimals, exponents, other digits than ASCII's, and empty values
    are not."""
    if value is None:
        return None
    text = value.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= MAX_DIGITS):
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise BadSequence(
            f"{header} must be a decimal integer from 0 to {'9' * MAX_DIGITS} (ASCII digits "
            f"only, e.g. a Unix time in milliseconds), not {shown!r}"
        )
    return int(text)


@dataclass(frozen=True, slots=True)
class SnapshotOrder:
    """A snapshot's place in its producer's order."""

    sequence: int | None  # the producer's sequence, None without one
    at: datetime  # the Kafka timestamp of its first message, else its arrival
    batch_id: int  # the order it was stored in, the last tie-breaker

    def key(self) -> tuple[int, int, datetime, int]:
        """Higher is newer."""
        seq = self.sequence
        return (0, 0, self.at, self.batch_id) if seq is None else (1, seq, self.at, self.batch_id)


def newer(a: SnapshotOrder, b: SnapshotOrder) -> bool:
    """Whether snapshot ``a`` is newer than snapshot ``b``."""
    return a.key() > b.key()
