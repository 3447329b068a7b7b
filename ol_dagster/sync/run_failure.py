"""Why a sync run failed, in one line: the failing step and its error, without secrets.

``ol-dagster sync`` prints one JSON line per batch; for a failed run the reason otherwise sits in
Dagster's log of the run (a screen of stack trace). The failing step's error is Dagster's wrapper
("Error occurred while executing op ...") around the exception the step raised: the innermost
cause is the one a person can act on. Secrets a message might quote are scrubbed: the values of
the settings' secret variables and the password of any URL.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ol_dagster.kafka.settings import KafkaSecret
from ol_dagster.settings import EnvSecret, Settings, SettingsError

_WRAPPERS = {"DagsterExecutionStepExecutionError", "DagsterUserCodeExecutionError"}
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^\s/@:]*:)[^\s/@]+@")
_MAX_CHARS = 500


def secret_values(settings: Settings) -> list[str]:
    """The values of every secret the settings name that is set (unset ones hide nothing)."""
    secrets: list[EnvSecret | KafkaSecret] = [d.receiver.token for d in settings.definitions]
    for catalog in settings.catalogs.values():
        secrets += catalog.secrets()
    if settings.kafka is not None:
        secrets += settings.kafka.secrets()
    values = []
    for secret in secrets:
        try:
            values.append(secret.resolve())
        except SettingsError:
            continue
    return values + _url_passwords(settings)


def _url_passwords(settings: Settings) -> list[str]:
    """The passwords of the URLs (the event store's, every catalog's): a driver's message may
    quote one without its URL, where the ``scheme://user:***@`` rule cannot see it."""
    from sqlalchemy.engine import make_url

    urls = [settings.store.url, *(c.url for c in settings.catalogs.values())]
    passwords = []
    for url in urls:
        try:
            password = make_url(url).password
        except Exception:  # noqa: BLE001 - not a database URL: no password in it to hide
            continue
        if password:
            passwords.append(str(password))
    return passwords


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` on one line, with every secret value and URL password as ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    text = _URL_PASSWORD.sub(r"\g<head>***@", text)
    text = " ".join(text.split())
    return text if len(text) <= _MAX_CHARS else text[: _MAX_CHARS - 3] + "..."


def _innermost(error: Any) -> Any:
    while error.cls_name in _WRAPPERS and error.cause is not None:
        error = error.cause
    return error


def _message(error: Any) -> str:
    # Dagster's message is "<module>.<class>: <text>"; the class alone is enough
    head, sep, rest = error.message.partition(": ")
    return f"{error.cls_name}: {rest}" if sep and head.endswith(error.cls_name) else error.message


def _error(event: Any, error: Any, secrets: Iterable[str]) -> str:
    text = _message(_innermost(error)) if error is not None else event.message
    return scrub(text or "", secrets)


def run_failure(records: Iterable[Any], secrets: Iterable[str] = ()) -> dict[str, str] | None:
    """``{"step": ..., "error": ...}`` of the first failed step among a run's event log records
    (``instance.all_logs``), or of the run itself when no step failed (a run that could not
    start); None when nothing failed."""
    run_level = None
    for record in records:
        event = getattr(record, "dagster_event", None) or record
        kind = getattr(event, "event_type_value", None)
        data = getattr(event, "event_specific_data", None)
        error = getattr(data, "error", None)
        if kind == "STEP_FAILURE":
            return {"step": str(event.step_key), "error": _error(event, error, secrets)}
        if kind in ("PIPELINE_FAILURE", "RUN_FAILURE") and run_level is None:
            run_level = {"step": "", "error": _error(event, error, secrets)}
    return run_level
