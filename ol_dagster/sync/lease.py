"""The sync lock's lease kept alive while a step works, so that it expires soon after its holder.

A step holding a definition's sync lock (the upload, the cleanup) may run for minutes, and a
holder that dies must not block the definition for long. So while a step runs, its lock has a
short lease (``STEP_LEASE_SECONDS``) that a background thread renews every
``HEARTBEAT_SECONDS``, recording the process (``store.holder``) so that a sync on the same
machine sees at once that it is gone. A holder killed in a step thus frees the definition at
once on its machine, and within ``STEP_LEASE_SECONDS`` anywhere else. Between a run's upload
and its cleanup step nothing renews it: the lock then has the longer handover lease of
``sync.batch``, still with the process (the sync jobs run every step in one process), and a run
Dagster knows has failed is passed over at once.
"""

from __future__ import annotations

import logging
import threading
from types import TracebackType

from ol_dagster.store import EventStore
from ol_dagster.store.holder import this_process

STEP_LEASE_SECONDS = 90.0
HEARTBEAT_SECONDS = 15.0

log = logging.getLogger(__name__)


class Heartbeat:
    """Renews ``holder``'s lease of a definition's lock every ``every`` seconds until exited.
    ``lost`` is True once a renewal found the lock no longer this holder's."""

    def __init__(
        self,
        store: EventStore,
        definition: str,
        holder: str,
        *,
        lease_seconds: float = STEP_LEASE_SECONDS,
        every: float = HEARTBEAT_SECONDS,
    ) -> None:
        self.store = store
        self.definition = definition
        self.holder = holder
        self.lease_seconds = lease_seconds
        self.every = every
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"sync-lease-{definition}", daemon=True
        )

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        process = this_process()
        while not self._stop.wait(self.every):
            try:
                renewed = self.store.renew_sync_lock(
                    self.definition, self.holder, lease_seconds=self.lease_seconds, process=process
                )
            except Exception:  # the store is briefly unreachable: the lease runs on, try again
                log.warning("could not renew the sync lock of %r", self.definition, exc_info=True)
                continue
            if not renewed:
                self.lost = True
                log.warning(
                    "the sync lock of %r is no longer held by %r", self.definition, self.holder
                )
                return
