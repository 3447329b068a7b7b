"""How the receiver holds a large post in bounded memory (issue 15).

A body of ``receiver.largePostBytes`` or more is a large post, and so is a batch of
``receiver.largePostEvents`` events or more (100,000 empty events fit in 293 KB and cost as much to
sort as 50 MB of real ones: 20 of them at once held the interpreter from every other request for
seconds): at most ``receiver.maxConcurrentLargePosts`` are read and processed at once
(``LargeSlot``: others get 503 with ``Retry-After`` as soon as their body grows that large, or
their events are counted), the worker thread takes the body
(``HeldBody``) so that nothing else keeps it alive once its events are sorted, and the post is
processed with the collector paused (``receiver.decode`` decodes its events one at a time); its
memory is handed back to the system after the answer (``receiver.trim``). A post peaks at about
3x its body, and its memory is returned. Small posts are processed with the collector running as
usual.
"""

from __future__ import annotations

from collections.abc import Callable

from anyio import from_thread
from starlette.responses import JSONResponse

from ol_dagster.gcpause import gc_paused
from ol_dagster.receiver.body import BodyError
from ol_dagster.receiver.trim import release_free_memory
from ol_dagster.settings import ReceiverLimits, SyncDefinition


class HeldBody:
    """A post's body on its way to the worker thread, which takes it: the event loop's frame and
    the thread call's arguments would otherwise keep a large body alive until the answer, on
    top of its accepted events (the batch endpoint drops it once they are sorted)."""

    __slots__ = ("_data", "large_by_events", "size", "slot")

    def __init__(self, data: bytes, slot: LargeSlot | None = None) -> None:
        self._data = data
        self.size = len(data)
        self.slot = slot  # the post's large-post slot, for a batch that counts its events
        self.large_by_events = False

    def count_events(self, events: int) -> None:
        """In the worker thread: a batch of ``largePostEvents`` or more takes a large post's slot
        (``BodyError`` 503 when every slot is taken)."""
        slot = self.slot
        if slot is not None and events >= slot.posts.limits.largePostEvents:
            self.large_by_events = True
            if not slot.taken:
                from_thread.run_sync(slot.take)

    def take(self) -> bytes:
        data, self._data = self._data, b""
        return data


class LargePosts:
    """The large posts being read or processed (one event loop: no lock)."""

    def __init__(self, limits: ReceiverLimits) -> None:
        self.limits = limits
        self.in_progress = 0


class LargeSlot:
    """``read_body``'s ``on_size`` for one post: takes a slot when the body becomes large, or
    refuses the post with 503 (``Retry-After``) when every slot is taken. ``release`` frees it."""

    def __init__(self, posts: LargePosts) -> None:
        self.posts = posts
        self.taken = False

    def __call__(self, size: int) -> None:
        if not self.taken and size >= self.posts.limits.largePostBytes:
            self.take()

    def take(self) -> None:
        limits = self.posts.limits
        if self.taken:
            return
        if self.posts.in_progress >= limits.maxConcurrentLargePosts:
            raise BodyError(
                503,
                f"receiver.maxConcurrentLargePosts ({limits.maxConcurrentLargePosts}) posts of "
                f"receiver.largePostBytes ({limits.largePostBytes}) bytes or "
                f"receiver.largePostEvents ({limits.largePostEvents}) events or more are in "
                "progress; retry later",
            )
        self.posts.in_progress += 1
        self.taken = True

    def from_worker(self) -> Callable[[int], None]:
        """This ``on_size`` for a worker thread (a gzip body inflating): the slot is taken on the
        event loop, which alone counts the slots."""
        threshold = self.posts.limits.largePostBytes

        def on_size(size: int) -> None:
            if size >= threshold and not self.taken:
                from_thread.run_sync(self, size)

        return on_size

    def release(self) -> None:
        if self.taken:
            self.taken = False
            self.posts.in_progress -= 1


Process = Callable[[SyncDefinition, HeldBody], JSONResponse]


def process_held(
    process: Process, definition: SyncDefinition, held: HeldBody, large_post_bytes: int
) -> JSONResponse:
    """Runs in the worker thread. A small post is processed with the collector running as usual,
    so its cycles are collected as they come. A large one with the collector paused
    (``gcpause``) from its decoding to its stored answer; what it allocated is all dropped when
    ``process`` returns, before the pause ends (nothing left to age), then handed back to the
    system, as is what a batch large by its events allocated."""
    if held.size < large_post_bytes:
        response = process(definition, held)
    else:
        with gc_paused():
            response = process(definition, held)
    if held.size >= large_post_bytes or held.large_by_events:
        release_free_memory()
    return response
