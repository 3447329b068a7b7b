"""Writing a batch into the log store without ever blocking the catalog: what fails waits.

The log store is a copy of the events for other tools; the catalog is what the sync is for. So an
event that cannot be written (a name the file system refuses, a full disk, a file where a
directory should be) fails alone: the batch goes on to the catalog, the event is counted with its
reason, and it is kept in a backlog in the event store (``<definition>/logStoreBacklog``, next to
the definition's other state) by batch id and position. Each later sync of the definition retries
the backlog first; writing is idempotent, so a retry never duplicates a file. An event whose batch
was purged by retention before it could be written is dropped from the backlog and counted as
lost.

The backlog is read, retried, and merged into a fresh read just before it is saved, so a sync of
another batch of the definition that runs at the same time loses at most its own retries' result,
never another batch's failures.
"""

from __future__ import annotations

import errno
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ol_dagster.logstore import write_event
from ol_dagster.openlineage.models import parse_event
from ol_dagster.store import EventStore


def backlog_key(definition: str) -> str:
    """The store document of a definition's backlog. Sync definition names are Dagster names
    (letters, digits, ``_``): no definition's own lineage state can take this key."""
    return f"{definition}/logStoreBacklog"


@dataclass
class LogOutcome:
    """What one sync wrote into the log store, and what waits."""

    written: int = 0  # events of this batch written (or found already written)
    retried: int = 0  # events of earlier batches written from the backlog
    failed: int = 0  # events that could not be written now (this batch and retries)
    pending: int = 0  # events in the backlog after this sync
    lost: int = 0  # backlog events whose batch is no longer in the event store
    reasons: Counter[str] = field(default_factory=Counter)
    example: str | None = None  # one file that could not be written (relative to the folder)

    @property
    def reason(self) -> str | None:
        """The commonest reason, with how many more there are."""
        if not self.reasons:
            return None
        (top, count), *others = self.reasons.most_common()
        more = f" (and {len(others)} other reason(s))" if others else ""
        return f"{top}: {count} event(s){more}"

    def as_metadata(self) -> dict[str, Any]:
        return {
            "written": self.written,
            "retried": self.retried,
            "failed": self.failed,
            "pending": self.pending,
            "lost": self.lost,
            "reasons": dict(self.reasons),
            **({"example": self.example} if self.example else {}),
        }


def _reason(exc: Exception) -> str:
    """Why a write failed, without the path (so that failures group by reason)."""
    if isinstance(exc, OSError) and exc.errno is not None:
        name = errno.errorcode.get(exc.errno, str(exc.errno))
        return f"{exc.strerror or type(exc).__name__} ({name})"
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


def _ranges(positions: Iterable[int]) -> list[list[int]]:
    """Positions as inclusive ``[first, last]`` runs: a batch whose every event failed (a full
    disk) is one pair, not 100,000 numbers."""
    out: list[list[int]] = []
    for p in sorted(set(positions)):
        if out and out[-1][1] == p - 1:
            out[-1][1] = p
        else:
            out.append([p, p])
    return out


def _positions(ranges: list[list[int]]) -> set[int]:
    return {p for first, last in ranges for p in range(first, last + 1)}


def _count(ranges: list[list[int]]) -> int:
    return sum(last - first + 1 for first, last in ranges)


def _load(store: EventStore, definition: str) -> dict[str, list[list[int]]]:
    doc = store.lineage_state(backlog_key(definition)) or {}
    return dict(doc.get("pending", {}))


def _write(
    folder: Path, events: Iterator[tuple[int, bytes]], outcome: LogOutcome
) -> tuple[set[int], int]:
    """Write each event; the positions that failed and how many were written."""
    failed: set[int] = set()
    written = 0
    for position, raw in events:
        try:
            # the file name needs the envelope only: no custom facets to keep
            write_event(folder, raw, parse_event(raw, custom_facets=False))
        except (OSError, ValueError) as exc:  # a full disk, a refused name, an unsafe path
            failed.add(position)
            outcome.reasons[_reason(exc)] += 1
            if outcome.example is None:
                outcome.example = _example(folder, exc)
            continue
        written += 1
    return failed, written


def _example(folder: Path, exc: Exception) -> str | None:
    name = getattr(exc, "filename", None)
    if not name:
        return None
    try:
        return str(Path(name).relative_to(folder))
    except ValueError:
        return str(name)


def log_batch(store: EventStore, definition: str, folder: str, batch_id: int) -> LogOutcome:
    """Retry the definition's backlog, then write the batch's events; keep what failed."""
    base = Path(folder)
    outcome = LogOutcome()
    before = _load(store, definition)
    after: dict[str, list[list[int]]] = {}
    for key, ranges in before.items():
        if key == str(batch_id):
            continue  # the whole batch is written below
        wanted = _positions(ranges)
        found = [(e.position, e.raw) for e in store.iter_events(int(key)) if e.position in wanted]
        outcome.lost += len(wanted) - len(found)
        failed, written = _write(base, iter(found), outcome)
        outcome.retried += written
        after[key] = _ranges(failed)
    events = ((e.position, e.raw) for e in store.iter_events(batch_id))
    failed, outcome.written = _write(base, events, outcome)
    after[str(batch_id)] = _ranges(failed)
    outcome.failed = sum(outcome.reasons.values())

    if not before and not any(after.values()):
        return outcome  # nothing waited, nothing waits: the store is not written
    fresh = _load(store, definition)  # another batch's sync may have added its failures since
    fresh.update(after)
    pending = {k: v for k, v in fresh.items() if v}
    outcome.pending = sum(_count(v) for v in pending.values())
    store.save_lineage_state(backlog_key(definition), {"pending": pending})
    return outcome
