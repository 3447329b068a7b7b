"""Start-up refuses what cannot work: one line that says why, before anything is served or run.

A receiver that starts with no definition answers every post 401 while ``/healthz`` says 200; one
whose token variable ends in a newline never matches a client; two definitions with equal tokens
send every post to one of them; a store that cannot be reached fails the first post, or the first
sync, with a traceback. Each is found here, at start, and raised as a ``SettingsError`` (the
command prints it as its only line and exits 2). The message names the settings key or variable,
never a secret: a database URL is shown without its password, and its password is scrubbed from
the driver's own words.
"""

from __future__ import annotations

from typing import Any

from ol_dagster.settings import Settings, SettingsError, receiver_tokens
from ol_dagster.sync.run_failure import scrub


def refuse_unservable(settings: Settings, source: str) -> None:
    """What ``ol-dagster serve`` needs of the settings: at least one definition, and a well-formed
    token of its own for each (every problem named at once)."""
    if not settings.definitions:
        raise SettingsError(
            f"{source} defines no sync definition ('definitions' is empty or missing): "
            "the receiver would accept no event"
        )
    receiver_tokens(settings)


def open_store(settings: Settings, **kwargs: Any):
    """The event store the settings name, or a one-line ``SettingsError`` why it cannot be opened
    (unreachable server, wrong password, unknown database, not a database URL)."""
    from sqlalchemy.engine import make_url

    from ol_dagster.catalog.check.findings import safe_url
    from ol_dagster.store import EventStore

    url = settings.store.url
    try:
        password = make_url(url).password
    except Exception:  # noqa: BLE001 - the driver's message would quote the whole URL
        raise SettingsError(
            "the event store URL (store.url or databaseUrl) is not a database URL"
        ) from None
    try:
        return EventStore(url, **kwargs)
    except Exception as exc:  # noqa: BLE001 - whatever stops it, start-up stops with one line
        reason = scrub(str(exc) or type(exc).__name__, [str(password)] if password else [])
        raise SettingsError(f"event store {safe_url(url)} cannot be opened: {reason}") from None
