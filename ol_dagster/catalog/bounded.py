"""Bounded, idempotent writes for every HTTP catalog: what a batch does when the server, or a proxy
in front of it, refuses its size or loses its answer, and what a retried delete counts.

* ``post_bounded``: a batch answered 413 is halved and each half sent, down to one item; one item
  still answered 413 is that item's failure, and every other item lands. A batch whose answer was
  lost (``MayHaveLanded``: a timeout after it was sent, a gateway's 502 or 504) may still be
  running on the server, so it is never sent again blindly: the kind's ``read_back`` says which of
  its items the server holds, and only the others are sent again, halved. A kind that cannot read
  back what it wrote passes none: those items are reported (``unconfirmed``), never sent again.
  A server that is slow because of the batch's size (OpenMetadata resolves its events one after
  another) says ``max_lost=None``: the rest is halved down to one item, and one item that loses
  its answer alone fails (the server may still be writing it; the next sync sends it again).
* ``delete``: a delete that lost its answer and is then answered 404 removed the object on its
  first attempt: ``REMOVED``, not ``NOT_FOUND`` (``removal`` reads such an answer).

The batch itself is the kind's: ``post`` sends one (with ``resend_after_timeout=False``, or with
resends when sending an item twice is harmless: then only the 413 rule applies) and returns its
answer, which the kind folds as it did before.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ol_dagster.catalog.http import CatalogRefused, HttpCatalogClient, MayHaveLanded, Sent
from ol_dagster.catalog.protocol import Removal

T = TypeVar("T")
R = TypeVar("R")

TOO_LARGE = 413


@dataclass(slots=True)
class BatchOutcome(Generic[T, R]):
    """What became of the items: the batches answered (each with its answer), the items found on
    the server after their answer was lost, the items that could not be written and why, and the
    items whose answer was lost and that could not be read back (not sent again)."""

    answers: list[tuple[list[T], R]] = field(default_factory=list)
    read_back: list[T] = field(default_factory=list)
    failed: list[tuple[T, str]] = field(default_factory=list)
    unconfirmed: list[tuple[T, str]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.failed and not self.unconfirmed


def _halves(batch: list[T]) -> list[list[T]]:
    """The batch in two, the larger half first; one item stays whole."""
    half = (len(batch) + 1) // 2
    return [batch[:half], batch[half:]] if len(batch) > 1 else [batch]


def post_bounded(
    items: Sequence[T],
    post: Callable[[list[T]], R],
    *,
    read_back: Callable[[list[T]], Sequence[bool]] | None,
    pause: Callable[[int], None],
    max_lost: int | None,
) -> BatchOutcome[T, R]:
    """Send ``items`` as one batch, split as the server needs (see the module).

    ``read_back(batch)`` says, item by item, whether the server holds it as it was sent;
    ``pause(n)`` waits before the read-back of a batch that lost its answer ``n`` times before
    (the first attempt may still be running); an item whose answer was lost more than
    ``max_lost`` times fails (``None``: when it was sent alone). Other errors
    (``CatalogUnavailable``, a 4xx other than 413) are the caller's, as for one request."""
    outcome: BatchOutcome[T, R] = BatchOutcome()
    pending: deque[tuple[list[T], int]] = deque([(list(items), 0)] if items else [])
    while pending:
        batch, lost = pending.popleft()
        try:
            answer = post(batch)
        except CatalogRefused as exc:
            if exc.status != TOO_LARGE:
                raise
            if len(batch) == 1:
                outcome.failed.append((batch[0], f"{exc}: too large for the server even alone"))
                continue
            pending.extendleft((half, lost) for half in reversed(_halves(batch)))
            continue
        except MayHaveLanded as exc:
            if read_back is None:
                why = f"{exc}; this catalog cannot read back what it wrote: not sent again"
                outcome.unconfirmed.extend((item, why) for item in batch)
                continue
            pause(lost)
            held = list(read_back(batch))
            outcome.read_back.extend(item for item, h in zip(batch, held, strict=True) if h)
            rest = [item for item, h in zip(batch, held, strict=True) if not h]
            if not rest:
                continue
            if max_lost is None and len(batch) == 1:
                why = f"{exc}; the server may still be writing it: the batch is tried again later"
                outcome.failed.append((batch[0], why))
                continue
            if max_lost is not None and lost >= max_lost:
                why = f"{exc}; not written after {lost + 1} attempt(s)"
                outcome.failed.extend((item, why) for item in rest)
                continue
            pending.extendleft((half, lost + 1) for half in reversed(_halves(rest)))
            continue
        outcome.answers.append((batch, answer))
    return outcome


def removal(sent: Sent) -> Removal:
    """What a delete's answer says: ``NOT_FOUND`` for a 404, unless an earlier attempt lost its
    answer (it removed the object then); ``REMOVED`` otherwise."""
    if sent.response.status_code == 404 and not sent.lost_earlier:
        return Removal.NOT_FOUND
    return Removal.REMOVED


def delete(http: HttpCatalogClient, path: str) -> Removal:
    """``DELETE path``, retried as every request, read by ``removal``. 403 and other 4xx raise
    ``CatalogRefused``."""
    return removal(http.send("DELETE", path, ok=frozenset({404})))
