"""The receiver's endpoints: the OpenLineage API that producers already know how to call.

``POST /api/v1/lineage`` takes one event (the openlineage-python client, Spark and Airflow HTTP
transports), ``POST /api/v1/lineage/batch`` takes ``{"events": [...]}`` (a snapshot is one such
post), ``GET /healthz`` answers load balancers. The bearer token selects the sync definition.

Every answer says, per event, what was accepted and why anything was not, so a producer can fix its
events; the store then holds exactly the accepted events. ``wholeSnapshot`` says whether the post
is stored as a whole snapshot (a BATCH_SNAPSHOT definition, every event accepted), which the next
sync cleans against; the message says it in words. A store that cannot be reached is a 503
(retriable), never a silent drop.

This module only wires; each step has its own module:

* ``receiver.refusals``: a log line per refused request (status, path, client, reason), the
  same refusals from one address counted instead (``receiver.refusal_lines``);
* ``receiver.guard``: header-count and concurrency limits, before any route;
* ``receiver.tenants``: the bearer token selects the definition;
* ``receiver.posts``: the two posting endpoints (authenticate, read the body, then decode,
  validate and store in a worker thread, so the event loop keeps answering other requests);
* ``receiver.large_posts``: under load (issue 15), a body of ``receiver.largePostBytes`` or more
  is a large post: at most ``receiver.maxConcurrentLargePosts`` at once (others get 503 with
  ``Retry-After``), processed with the collector paused, its memory handed back after the answer;
* ``receiver.answers``: the one JSON shape of every answer, and the snapshot sentence;
* ``receiver.health``: ``/healthz``, 503 while the store is unreachable or refuses writes.
"""

from __future__ import annotations

import logging

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route

from ol_dagster.receiver.guard import Guard
from ol_dagster.receiver.health import Health, WriteRefusals
from ol_dagster.receiver.posts import Posts
from ol_dagster.receiver.refusals import RefusalLog
from ol_dagster.receiver.tenants import Tenants
from ol_dagster.settings import Settings
from ol_dagster.store import EventStore
from ol_dagster.sync.run_failure import secret_values

log = logging.getLogger("ol_dagster.receiver")


def create_app(settings: Settings, store: EventStore) -> Starlette:
    """Build the app; resolves every definition's token now, so a missing secret stops the start.

    The app carries ``settings.receiver`` (``app.state.receiver_limits``) for the server that
    runs it (``receiver.server``): the connection, header and time limits are the server's."""
    tenants = Tenants(settings)  # blanks, two definitions sharing one token: refused here
    limits = settings.receiver
    for batch_id in store.remove_abandoned():  # a receiver killed mid-post left them unsealed
        log.warning("removed batch %s: its receiver stopped before it was stored whole", batch_id)
    writes = WriteRefusals()
    posts = Posts(store, limits, tenants, writes)
    health = Health(store, writes, definitions=len(tenants))
    app = Starlette(
        routes=[
            Route("/api/v1/lineage", posts.lineage, methods=["POST"]),
            Route("/api/v1/lineage/batch", posts.lineage_batch, methods=["POST"]),
            Route("/healthz", health.healthz, methods=["GET"]),
        ],
        middleware=[
            Middleware(
                RefusalLog, secrets=secret_values(settings), seconds=limits.refusalLogSeconds
            ),
            Middleware(Guard, limits=limits),
        ],
    )
    app.state.receiver_limits = limits
    return app
