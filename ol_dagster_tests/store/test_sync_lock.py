"""The event store's sync lock, on SQLite and on a real PostgreSQL (the ``event_store`` fixture):
one sync per definition at a time, across processes."""

from __future__ import annotations

import json
import multiprocessing
import queue
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import inspect, text

from ol_dagster.store import EventStore, NewEvent, SyncLock, schema
from ol_dagster.store.event_store import utcnow

T0 = datetime(2026, 11, 1, 2, 0, 0, tzinfo=UTC)
LEASE = 60.0


def later(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def take(store: EventStore, holder: str, definition: str = "snap", **kwargs) -> str | None:
    kwargs.setdefault("lease_seconds", LEASE)
    kwargs.setdefault("now", T0)
    return store.acquire_sync_lock(definition, holder, **kwargs)


# -- taking, refusing, renewing, releasing --------------------------------------------------------


def test_a_free_lock_is_taken(event_store: EventStore) -> None:
    assert event_store.sync_lock("snap") is None

    assert take(event_store, "run-a") is None

    assert event_store.sync_lock("snap") == SyncLock("snap", "run-a", T0, later(LEASE))
    lock = event_store.sync_lock("snap")
    assert lock is not None and lock.expires_at.tzinfo is not None


def test_a_held_lock_is_refused_with_its_holder(event_store: EventStore) -> None:
    take(event_store, "run-a")

    assert take(event_store, "run-b", now=later(30)) == "run-a"

    assert event_store.sync_lock("snap") == SyncLock("snap", "run-a", T0, later(LEASE))


def test_the_holder_takes_it_again_and_renews_its_lease(event_store: EventStore) -> None:
    take(event_store, "run-a")

    assert take(event_store, "run-a", now=later(30)) is None

    # the same tenure, a later end
    assert event_store.sync_lock("snap") == SyncLock("snap", "run-a", T0, later(30 + LEASE))


def test_renew_extends_only_the_holders_lease(event_store: EventStore) -> None:
    take(event_store, "run-a")

    assert event_store.renew_sync_lock("snap", "run-a", lease_seconds=120, now=later(50)) is True
    assert event_store.sync_lock("snap") == SyncLock("snap", "run-a", T0, later(170))
    assert event_store.renew_sync_lock("snap", "run-b", lease_seconds=600, now=later(50)) is False
    assert event_store.sync_lock("snap") == SyncLock("snap", "run-a", T0, later(170))
    # the lease runs on from the new end: another holder is still refused past the old one
    assert take(event_store, "run-b", now=later(100)) == "run-a"

    event_store.release_sync_lock("snap", "run-a")
    assert event_store.renew_sync_lock("snap", "run-a", lease_seconds=120) is False
    assert event_store.sync_lock("snap") is None


def test_renew_uses_the_current_time_by_default(event_store: EventStore) -> None:
    take(event_store, "run-a")
    before = utcnow()
    assert event_store.renew_sync_lock("snap", "run-a", lease_seconds=300) is True
    lock = event_store.sync_lock("snap")
    assert lock is not None
    assert before + timedelta(seconds=299) <= lock.expires_at <= utcnow() + timedelta(seconds=301)


def test_only_the_holder_releases_the_lock(event_store: EventStore) -> None:
    take(event_store, "run-a")

    assert event_store.release_sync_lock("snap", "run-b") is False
    assert event_store.sync_lock("snap") == SyncLock("snap", "run-a", T0, later(LEASE))

    assert event_store.release_sync_lock("snap", "run-a") is True
    assert event_store.sync_lock("snap") is None
    assert event_store.release_sync_lock("snap", "run-a") is False

    # free again: the next sync takes it at once
    assert take(event_store, "run-b", now=later(1)) is None
    assert event_store.sync_lock("snap") == SyncLock("snap", "run-b", later(1), later(1 + LEASE))


def test_an_expired_lease_is_taken_over(event_store: EventStore) -> None:
    take(event_store, "run-a")

    assert take(event_store, "run-b", now=later(LEASE - 1)) == "run-a"
    assert take(event_store, "run-b", now=later(LEASE)) is None

    assert event_store.sync_lock("snap") == SyncLock(
        "snap", "run-b", later(LEASE), later(2 * LEASE)
    )
    # the old holder lost it: it can neither extend nor release the new holder's lease
    assert event_store.renew_sync_lock("snap", "run-a", lease_seconds=LEASE) is False
    assert event_store.release_sync_lock("snap", "run-a") is False
    assert event_store.sync_lock("snap").holder == "run-b"  # type: ignore[union-attr]


def test_a_dead_holder_is_taken_over_via_is_alive(event_store: EventStore) -> None:
    asked: list[str] = []

    def alive(holder: str) -> bool:
        asked.append(holder)
        return holder != "run-a"

    assert take(event_store, "run-a", is_alive=alive) is None
    assert asked == []  # a free lock needs no one's liveness
    assert take(event_store, "run-a", is_alive=alive, now=later(1)) is None
    assert asked == []  # nor does the holder taking it again

    assert take(event_store, "run-b", is_alive=alive, now=later(10)) is None  # run-a is dead
    assert asked == ["run-a"]
    assert event_store.sync_lock("snap") == SyncLock("snap", "run-b", later(10), later(10 + LEASE))

    assert take(event_store, "run-c", is_alive=alive, now=later(20)) == "run-b"  # alive
    assert asked == ["run-a", "run-b"]
    assert event_store.sync_lock("snap").holder == "run-b"  # type: ignore[union-attr]


def test_a_live_holder_keeps_the_lock_without_a_liveness_check(event_store: EventStore) -> None:
    """Without ``is_alive`` only the lease decides."""
    take(event_store, "run-a")
    assert take(event_store, "run-b", now=later(LEASE / 2)) == "run-a"


def test_is_alive_runs_with_no_transaction_open_and_a_change_meanwhile_wins(
    store_url: str,
) -> None:
    """``is_alive`` may take long (it asks Dagster): another process changes the lock while it
    runs, which it could not if a transaction held the lock row (PostgreSQL) or the database
    (SQLite). The takeover then respects that change: a new live holder keeps the lock."""
    one, other = EventStore(store_url), EventStore(store_url)
    try:
        take(one, "run-a")

        def dead_but_replaced(holder: str) -> bool:
            if holder == "run-a":
                assert other.release_sync_lock("snap", "run-a") is True
                assert take(other, "run-c", now=later(5)) is None
                return False
            return True

        assert take(one, "run-b", is_alive=dead_but_replaced, now=later(10)) == "run-c"
        assert one.sync_lock("snap") == SyncLock("snap", "run-c", later(5), later(5 + LEASE))

        def released_meanwhile(holder: str) -> bool:
            assert other.release_sync_lock("snap", holder) is True
            return False

        assert take(one, "run-b", is_alive=released_meanwhile, now=later(20)) is None
        assert one.sync_lock("snap") == SyncLock("snap", "run-b", later(20), later(20 + LEASE))
    finally:
        one.dispose()
        other.dispose()


def test_definitions_are_locked_independently(event_store: EventStore) -> None:
    assert take(event_store, "run-a", "snap") is None
    assert take(event_store, "run-b", "add") is None
    assert take(event_store, "run-c", "snap") == "run-a"
    assert take(event_store, "run-c", "add") == "run-b"

    assert event_store.release_sync_lock("snap", "run-a") is True
    assert event_store.sync_lock("snap") is None
    assert event_store.sync_lock("add") == SyncLock("add", "run-b", T0, later(LEASE))
    # one holder may hold several definitions
    assert take(event_store, "run-b", "snap") is None


@pytest.mark.parametrize("lease", [0, -5])
def test_a_lease_must_be_positive(event_store: EventStore, lease: float) -> None:
    with pytest.raises(ValueError, match="lease_seconds"):
        take(event_store, "run-a", lease_seconds=lease)
    assert event_store.sync_lock("snap") is None


# -- across processes -----------------------------------------------------------------------------

PROCESSES = 4
ROUNDS = 6
GHOST = "ghost"  # the holder the race's "dead" rounds start from; its process is gone


def _ghost_is_dead(holder: str) -> bool:
    return holder != GHOST


def _race(url: str, me: str, definitions: list[str], barrier, results) -> None:
    """One process of the race: at each barrier, try to take the next definition's lock."""
    store = EventStore(url)
    try:
        mine = {}
        for definition in definitions:
            barrier.wait(timeout=60)
            mine[definition] = store.acquire_sync_lock(
                definition, me, lease_seconds=600, is_alive=_ghost_is_dead
            )
        results.put((me, mine))
    finally:
        store.dispose()


def test_only_one_of_several_processes_takes_the_lock(store_url: str) -> None:
    """Processes (a sensor's run, an operator's command ...) try to take one definition's lock at
    the same instant, round after round: from nobody, from an expired lease, from a holder
    ``is_alive`` finds dead. Exactly one takes it each time; the others are told who did."""
    store = EventStore(store_url)  # creates the schema before the processes open it
    try:
        definitions = []
        for r in range(ROUNDS):
            definitions += [f"free-{r}", f"expired-{r}", f"dead-{r}"]
            expired = utcnow() - timedelta(hours=2)
            assert take(store, "old", f"expired-{r}", now=expired) is None
            assert take(store, GHOST, f"dead-{r}", lease_seconds=3600, now=utcnow()) is None

        ctx = multiprocessing.get_context("spawn")
        barrier, results = ctx.Barrier(PROCESSES), ctx.Queue()
        names = [f"process-{i}" for i in range(PROCESSES)]
        procs = [
            ctx.Process(target=_race, args=(store_url, name, definitions, barrier, results))
            for name in names
        ]
        for p in procs:
            p.start()
        try:
            outcome = dict(results.get(timeout=180) for _ in procs)
        except queue.Empty:
            pytest.fail("a racing process did not report")
        finally:
            for p in procs:
                p.join(timeout=60)
                if p.is_alive():
                    p.kill()
        assert [p.exitcode for p in procs] == [0] * PROCESSES
        assert sorted(outcome) == names

        for definition in definitions:
            answers = {name: outcome[name][definition] for name in names}
            winners = [name for name, answer in answers.items() if answer is None]
            assert len(winners) == 1, f"{definition}: {answers}"
            lock = store.sync_lock(definition)
            assert lock is not None and lock.holder == winners[0]
            assert {answers[n] for n in names if n != winners[0]} == {winners[0]}
    finally:
        store.dispose()


# -- schema ---------------------------------------------------------------------------------------


def test_a_version_5_store_gains_the_sync_locks_on_open(store_url: str) -> None:
    """The real v5 -> v6 migration: a store written before sync locks existed keeps its batches
    and gets the ol_sync_locks table."""
    store = EventStore(store_url)
    event = NewEvent(json.dumps({"i": 0}).encode(), "run", "COMPLETE", T0, None, "etl", "j", "r")
    batch_id = store.add_posted_batch("snap", [event], received=1)
    with store.engine.begin() as conn:
        conn.execute(text("DROP TABLE ol_sync_locks"))
        conn.execute(
            schema.meta.update().where(schema.meta.c.key == "schema_version").values(value="5")
        )
    store.dispose()

    upgraded = EventStore(store_url)
    try:
        assert upgraded.schema_version == schema.SCHEMA_VERSION >= 6
        with upgraded.engine.connect() as conn:
            assert "ol_sync_locks" in inspect(conn).get_table_names()
        assert take(upgraded, "run-a") is None
        assert take(upgraded, "run-b") == "run-a"
        assert [e.raw for e in upgraded.iter_events(batch_id)] == [event.raw]
    finally:
        upgraded.dispose()


# -- a holder that dies: its process, its heartbeat -----------------------------------------------


def _hold_and_die(url: str, conn) -> None:
    """Take the lock with this process recorded, say so, and wait to be killed."""
    from ol_dagster.store.holder import this_process

    store = EventStore(url)
    taken = store.acquire_sync_lock("snap", "run-dead", lease_seconds=3600, process=this_process())
    assert taken is None
    conn.send("held")
    conn.recv()  # never answered: the test kills this process


def test_a_holder_whose_process_is_gone_is_passed_over_before_its_lease_ends(
    store_url: str,
) -> None:
    """The killed holder's lease has an hour to run; on its machine the next sync takes the
    lock at once. While the process lives, it keeps the lock."""
    from ol_dagster.store.holder import this_process

    store = EventStore(store_url)
    try:
        ctx = multiprocessing.get_context("spawn")
        mine, theirs = ctx.Pipe()
        proc = ctx.Process(target=_hold_and_die, args=(store_url, theirs))
        proc.start()
        try:
            assert mine.poll(120) and mine.recv() == "held"
            assert store.acquire_sync_lock("snap", "run-next", lease_seconds=LEASE) == "run-dead"
        finally:
            proc.kill()
            proc.join(timeout=60)
        held = store.sync_lock("snap")
        assert held is not None and held.holder == "run-dead" and held.process is not None

        assert (
            store.acquire_sync_lock("snap", "run-next", lease_seconds=LEASE, process=this_process())
            is None
        )
        assert store.sync_lock("snap").holder == "run-next"  # type: ignore[union-attr]
        # a lock with no process recorded (another machine's) waits for its lease
        store.release_sync_lock("snap", "run-next")
        assert take(store, "run-far", now=utcnow()) is None
        assert store.acquire_sync_lock("snap", "run-b", lease_seconds=LEASE) == "run-far"
    finally:
        store.dispose()


def test_the_heartbeat_keeps_a_short_lease_alive_and_notices_a_lost_lock(
    event_store: EventStore,
) -> None:
    from ol_dagster.sync.lease import Heartbeat

    assert take(event_store, "run-a", lease_seconds=1.0, now=utcnow()) is None
    with Heartbeat(event_store, "snap", "run-a", lease_seconds=1.0, every=0.1) as beat:
        deadline = utcnow() + timedelta(seconds=3)
        while utcnow() < deadline:
            lock = event_store.sync_lock("snap")
            assert lock is not None and lock.expires_at > utcnow()  # never lapses
        assert not beat.lost
        event_store.release_sync_lock("snap", "run-a")
        while not beat.lost and utcnow() < deadline + timedelta(seconds=30):
            pass
        assert beat.lost
    # once the holder stops beating, its lease lapses and another takes the lock
    assert take(event_store, "run-b", lease_seconds=1.0, now=utcnow()) is None
