"""Retention (``retention.keepDays``): which synced batches go, with their events, graphs and facts.

A run split over batches is judged whole when it ends (its earlier events are read back from the
store), so purging by age alone broke runs: the batch holding a long run's START went, and the
run's COMPLETE then described a run with no inputs or outputs, which replaced the job's lineage
with nothing. So a run's batches go together, once nothing can read them again:

- a batch goes only when it is SYNCED and was synced before the cutoff (pending work never goes);
- a batch holding an event of a run is kept while that run has not ended (no COMPLETE, FAIL or
  ABORT stored for it), and while any other batch holding an event of that run is kept (a pending
  batch that continues it, or one synced within ``keepDays``);
- so the batches linked by runs they share go all at once or not at all, and no run is ever left
  with some of its events (a run whose end was purged would look unended for ever);
- the definition's newest synced whole snapshot stays, whatever its age: the snapshot order is
  read from the stored batches, and an older snapshot synced after the newest one's batch went
  would no longer be SUPERSEDED (it would bring back what the newer one removed).

Most runs live in one batch: the store finds in one query per chunk the runs that do not (seen in
another batch, or not ended), and only those are followed from batch to batch. A run that never
ends (its producer died before sending COMPLETE) keeps its batches.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import Connection, or_, select

from ol_dagster.store.base import StoreBase, naive
from ol_dagster.store.catalog_facts import newest_synced_snapshot
from ol_dagster.store.schema import (
    BatchStatus,
    batch_catalogs,
    batch_changes,
    batch_graphs,
    batches,
    events,
)

TERMINAL = ("COMPLETE", "FAIL", "ABORT")
_CHUNK = 500  # ids per IN list: far below every database's limit on bound parameters


def _chunks(values: Iterable[int | str], size: int = _CHUNK) -> Iterable[list]:
    chunk: list = []
    for v in values:
        chunk.append(v)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _linked_runs(conn: Connection, batch_ids: Sequence[int]) -> dict[int, set[str]]:
    """The runs of these batches that tie them to other batches or keep them: runs with an event
    in another batch, and runs not ended. A run whose events are all in one batch, with its
    end among them, is the batch's own business and not listed."""
    e, o, t = events.alias("e"), events.alias("o"), events.alias("t")
    elsewhere = select(o.c.id).where(o.c.run_id == e.c.run_id, o.c.batch_id != e.c.batch_id)
    ended = select(t.c.id).where(t.c.run_id == e.c.run_id, t.c.event_type.in_(TERMINAL))
    out: dict[int, set[str]] = {}
    for chunk in _chunks(batch_ids):
        rows = conn.execute(
            select(e.c.batch_id, e.c.run_id)
            .where(
                e.c.batch_id.in_(chunk),
                e.c.run_id.is_not(None),
                or_(elsewhere.exists(), ~ended.exists()),
            )
            .distinct()
        ).all()
        for batch_id, run_id in rows:
            out.setdefault(int(batch_id), set()).add(run_id)
    return out


def _holders(conn: Connection, definition: str, runs: Iterable[str]) -> set[int]:
    """The definition's batches holding an event of any of these runs."""
    out: set[int] = set()
    for chunk in _chunks(runs):
        rows = conn.execute(
            select(events.c.batch_id)
            .join(batches, batches.c.id == events.c.batch_id)
            .where(events.c.run_id.in_(chunk), batches.c.definition == definition)
            .distinct()
        ).all()
        out.update(int(r[0]) for r in rows)
    return out


def _ended(conn: Connection, definition: str, runs: Iterable[str]) -> set[str]:
    """Those of these runs for which the definition holds a COMPLETE, FAIL or ABORT."""
    out: set[str] = set()
    for chunk in _chunks(runs):
        rows = conn.execute(
            select(events.c.run_id)
            .join(batches, batches.c.id == events.c.batch_id)
            .where(
                events.c.run_id.in_(chunk),
                events.c.event_type.in_(TERMINAL),
                batches.c.definition == definition,
            )
            .distinct()
        ).all()
        out.update(r[0] for r in rows)
    return out


def _linked_group(
    conn: Connection,
    definition: str,
    start: int,
    linked: dict[int, set[str]],
    expired: set[int],
) -> tuple[set[int], bool]:
    """The batches tied to ``start`` by runs they share, and whether they may all go: every one
    expired, every run among them ended."""
    group, runs = {start}, set(linked.get(start, ()))
    new_runs = set(runs)
    while new_runs:
        reached = _holders(conn, definition, new_runs) - group
        if reached - expired:
            return group | reached, False  # a pending or recent batch continues a run
        group |= reached
        found = _linked_runs(conn, sorted(reached))
        linked.update(found)
        new_runs = set().union(*found.values()) - runs if found else set()
        runs |= new_runs
    return group, runs <= _ended(conn, definition, runs)


class Retention(StoreBase):
    """Purging the synced batches past retention, a run's batches together."""

    def purge_synced(self, definition: str, *, before: datetime, limit: int = 500) -> list[int]:
        """Delete the definition's batches (with their events, graphs and catalog facts) synced
        before ``before`` that no run still needs (the module's rules): ``limit`` at most, or a
        few more when the last is one of batches linked by runs (they go whole); returns their
        ids, in id order. Failed
        and pending batches are never purged, whatever their age."""
        b = batches.c
        with self.engine.connect() as conn:
            newest = newest_synced_snapshot(conn, definition)
            expired_ids = [
                int(r[0])
                for r in conn.execute(
                    select(b.id)
                    .where(
                        b.definition == definition,
                        b.status == BatchStatus.SYNCED,
                        b.synced_at < naive(before),
                    )
                    .order_by(b.id)
                )
                if r[0] != newest
            ]
        expired = set(expired_ids)
        going: set[int] = set()
        decided: set[int] = set()
        for chunk in _chunks(expired_ids, 100):
            if len(going) >= limit:
                break
            # a read per chunk: on SQLite a read holds the write lock (``db.open_engine``), and
            # the receiver's writes take their turn between chunks
            with self.engine.connect() as conn:
                linked = _linked_runs(conn, chunk)
                for batch_id in chunk:
                    if len(going) >= limit:
                        break
                    if batch_id in decided:
                        continue
                    if batch_id not in linked:
                        going.add(batch_id)  # its runs are its own, and ended
                        decided.add(batch_id)
                        continue
                    group, may_go = _linked_group(conn, definition, batch_id, linked, expired)
                    decided |= group
                    if may_go:
                        going |= group
        if not going:
            return []
        purged: list[int] = []
        with self.engine.begin() as conn:
            for chunk in _chunks(sorted(going)):
                # read again in the deleting transaction: one synced again meanwhile (a person
                # re-running it) is no longer past retention, and stays
                still = [
                    int(r[0])
                    for r in conn.execute(
                        select(b.id).where(
                            b.id.in_(chunk),
                            b.status == BatchStatus.SYNCED,
                            b.synced_at < naive(before),
                        )
                    )
                ]
                conn.execute(events.delete().where(events.c.batch_id.in_(still)))
                conn.execute(batch_graphs.delete().where(batch_graphs.c.batch_id.in_(still)))
                conn.execute(batch_catalogs.delete().where(batch_catalogs.c.batch_id.in_(still)))
                conn.execute(batch_changes.delete().where(batch_changes.c.batch_id.in_(still)))
                conn.execute(batches.delete().where(b.id.in_(still)))
                purged.extend(still)
        return sorted(purged)
