"""``ol-dagster consume``: the Kafka intake, one member of the settings' consumer group.

Start as many as the topics have partitions to share the work; each stops cleanly on SIGTERM or
SIGINT (what it polled is stored and committed, then it leaves the group). What cannot work stops
it before it joins the group, in one line: no ``kafka`` block, confluent-kafka not installed, a
missing secret, an event store that cannot be opened. An event store lost during a rebalance
stops it the same way (``kafka.consumer``: the partitions assigned cannot start without the
store's offsets), having committed nothing more.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time

from ol_dagster.settings import Settings, SettingsError, load_settings

_JOIN_WAIT = 60.0


def _describe(settings: Settings) -> str:
    kafka = settings.kafka
    assert kafka is not None
    topics = ", ".join(
        f"{t.topic} -> {t.definition} ({'snapshots' if t.snapshot else 'stream'})"
        for t in kafka.topics
    )
    return f"group {kafka.groupId} on {','.join(kafka.bootstrapServers)}: {topics}"


def _scrubbed(settings: Settings, exc: Exception) -> str:
    """The store's reason without a secret of the settings (a driver may quote the URL)."""
    from ol_dagster.sync.run_failure import scrub, secret_values

    return scrub(str(exc), secret_values(settings))


def consume(settings_file: str | None, *, idle_exit: float | None = None) -> int:
    started = time.monotonic()
    from ol_dagster.commands.startup import open_store
    from ol_dagster.kafka.consumer import (
        KafkaIntake,
        KafkaUnavailable,
        StoreLostInRebalance,
        confluent,
    )

    settings = load_settings(settings_file)
    if settings.kafka is None:
        raise SettingsError("the settings have no 'kafka' block: nothing to consume")
    try:
        confluent()
    except KafkaUnavailable as exc:
        raise SettingsError(str(exc)) from None
    settings.kafka.consumer_config()  # every secret resolves, or the one-line error says which
    store = open_store(settings)
    stopping = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(f"ol-dagster consume: {_describe(settings)}", file=sys.stderr)
    intake = KafkaIntake(settings, store)
    intake.last_activity = started  # idle from the command's start

    def stop() -> bool:
        if stopping.is_set():
            return True
        if idle_exit is None:
            return False
        # idle: nothing read nor assigned for that long, counted from start; a broker that
        # answers gets its group's first join (which waits for the group's other members, at
        # most a minute) on top
        idle = time.monotonic() - intake.last_activity
        if idle <= idle_exit:
            return False
        if intake.joined:
            return True
        # no broker answered yet: one that reported no failure is asked once
        if intake.brokers.down_since is not None or not intake.broker_answers():
            raise SettingsError(
                f"no Kafka broker answered at {intake.brokers.servers} in "
                f"{idle_exit:g} s ({intake.brokers.reason or 'no answer'}): nothing consumed"
            )
        return idle > max(idle_exit, _JOIN_WAIT)

    try:
        totals = intake.run(stop)
    except StoreLostInRebalance as exc:
        # the command's one-line failure (exit 2), as at start-up
        raise SettingsError(
            f"the event store became unreachable during a rebalance ({_scrubbed(settings, exc)}): "
            "stopped, nothing more is committed; what was stored is kept and the rest is read "
            "again once it is started with the store back"
        ) from None
    finally:
        store.dispose()
    print(
        json.dumps(
            {
                "messages": totals.messages,
                "events": totals.events,
                "snapshots": totals.snapshots,
                "deadLetters": totals.dead_letters,
                "alreadyStored": totals.skipped,
            }
        )
    )
    return 0
