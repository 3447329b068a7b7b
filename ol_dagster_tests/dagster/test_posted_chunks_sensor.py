# ruff: noqa: F811  (the fixtures are imported from test_sensor and test_posted_chunks)
"""The sensor and a large post written in short transactions (``test_posted_chunks``): a batch
sealed after batches with higher ids is still requested; one whose writer was killed is removed."""

from __future__ import annotations

from collections.abc import Callable

from ol_dagster.store import BatchStatus, EventStore
from ol_dagster_tests.dagster.test_sensor import Harness, harness, instance, keys_of  # noqa: F401
from ol_dagster_tests.receiver.test_posted_chunks import PausedWriter, ev, paused_writer  # noqa: F401


def sealed_id(store: EventStore) -> int:
    [receiving] = store.batches(statuses=[BatchStatus.RECEIVING])
    return receiving.id


def test_the_sensor_requests_a_large_post_sealed_after_later_batches(
    harness: Callable[..., Harness], paused_writer: Callable[[str], PausedWriter]
) -> None:
    h = harness()
    writer = paused_writer(h.store.url)
    later = h.store.add_posted_batch("snap", [ev(1)], received=1)

    first = h.tick()
    assert keys_of(first) == [str(later)]  # not the batch being received
    assert first.cursor == str(sealed_id(h.store) - 1)

    sealed = writer.resume()
    assert sealed < later
    second = h.tick()
    assert keys_of(second) == [str(sealed), str(later)]  # the run key keeps ``later`` once
    assert second.cursor == str(later)
    assert h.tick().run_requests == []


def test_the_sensor_removes_the_batch_of_a_killed_writer(
    harness: Callable[..., Harness], paused_writer: Callable[[str], PausedWriter]
) -> None:
    h = harness()
    writer = paused_writer(h.store.url)
    later = h.store.add_posted_batch("snap", [ev(1)], received=1)
    writer.kill()

    data = h.tick()
    assert keys_of(data) == [str(later)]
    assert data.cursor == str(later)
    assert h.store.batches(statuses=list(BatchStatus)) == [h.store.get_batch(later)]
