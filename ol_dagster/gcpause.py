"""Pausing Python's cyclic garbage collector while a batch of events is parsed, without ever
starving the full collections a long-lived process needs.

Parsing a batch allocates millions of small objects that all stay alive until the batch is done;
each automatic collection then walks every one of them, and measured on 10,000 dbt events that was
more than half of the time spent. The parsed objects hold no reference cycles, so collecting during
the batch frees nothing: the collector is paused for the batch, and what the batch left alive is
then aged into the oldest generation rather than walked once more (see ``_age_young_objects``).

Aging that way bypasses the collector's own bookkeeping: ``gc.freeze()`` resets the young
generation's count, and the objects it moves are not counted as pending for a full collection.
A process that pauses often (the receiver once per post, issue 15) then never collects at all:
every cycle left behind by a request (an exception, a task, a response) is aged and kept, and the
memory grows linearly. So in a long-lived process (``collect_aged_objects``: the receiver) the
pauses keep the count themselves and do what the collector would have done: a full collection
once the objects aged since the last one exceed a quarter of those that survived it (CPython's
own rule for full collections, ``long_lived_pending > long_lived_total / 4``), never fewer than
``_MIN_PENDING``. A process that runs one sync and exits (``ol-dagster sync``, a run worker) does
not: a collection there walks a whole lineage graph (1 s of a 10,000-event sync) to free
nothing before the process ends anyway.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# below this many aged objects a full collection is not worth its walk (a fresh process holds
# ~300,000 tracked objects after its imports; the collector's own rule would wait for a quarter)
_MIN_PENDING = 100_000
# middle-generation collections between two full ones in a one-sync process (the default is 10)
_ONE_SYNC_FULL = 1_000

_lock = threading.Lock()
_pending = 0  # objects aged by pauses since the last full collection (an upper bound)
_long_lived = 0  # tracked objects that survived the last full collection we ran
full_collections = 0  # full collections the pauses ran (for tests and benchmarks)
_collecting = False  # set by long-lived processes: see ``collect_aged_objects``


def collect_aged_objects(enabled: bool = True) -> None:
    """Called once by a process that lives long and pauses often (the receiver): the pauses then
    run the full collections the collector would have run (see the module docstring)."""
    global _collecting, _pending
    with _lock:
        _collecting = enabled
        _pending = 0


def one_sync_process() -> None:
    """Called by a process that runs the pending syncs and exits (``ol-dagster sync``): the
    collector still runs its young collections (a cycle made and dropped goes soon), but a full
    one only after a hundred times the allocations it waits for by default. Each full collection
    walks every object the process holds (a lineage graph and the catalog's rows: 0.15-0.25 s
    at 10,000 jobs, two or three times a sync) and frees next to nothing: a sync leaves no
    large cycle behind (``lineage.packed``), and the process ends when the syncs are done."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, _ONE_SYNC_FULL)


@contextmanager
def gc_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            _age_young_objects()
            gc.enable()


def _age_young_objects() -> None:
    """Move what the pause allocated to the oldest generation, without looking at it.

    Re-enabled, the collector would at once collect the young generation: every object the batch
    allocated that is still alive (the parsed body, a whole lineage graph), walked to free
    nothing (0.3 s for a 10,000-event graph). ``gc.freeze()`` then ``gc.unfreeze()`` moves every
    tracked object to the oldest generation instead, in constant time; the next full collection
    looks at them as it would have anyway, and ``_count_aged`` makes sure there is one. Skipped
    when the process keeps objects frozen on purpose (``unfreeze`` would release them).
    """
    if gc.get_freeze_count() == 0:
        young = gc.get_count()[0]  # net containers allocated since the last young collection
        gc.freeze()
        gc.unfreeze()
        _count_aged(young)


def _count_aged(young: int) -> None:
    global _pending, _long_lived, full_collections
    if not _collecting:
        return
    with _lock:
        _pending += max(young, 0)
        if _pending <= max(_MIN_PENDING, _long_lived // 4):
            return
        _pending = 0
    gc.collect()
    # every survivor is in the oldest generation now: counting them is a walk of a list, far
    # cheaper than the collection itself (freeze/unfreeze move lists, they do not visit objects)
    if gc.get_freeze_count() == 0:
        gc.freeze()
        survivors = gc.get_freeze_count()
        gc.unfreeze()
        with _lock:
            _long_lived = survivors
            full_collections += 1


def _full_collection_done(phase: str, info: dict[str, int]) -> None:
    """A full collection the collector ran on its own also settles what the pauses aged."""
    global _pending
    if phase == "stop" and info.get("generation") == 2:
        _pending = 0


gc.callbacks.append(_full_collection_done)
