"""Posting event files to a receiver (``ol-dagster send``): one batch per file.

A file may hold one event, a JSON array of events, ``{"events": [...]}``, or NDJSON (one event per
line). An NDJSON line that is not JSON is sent as a string, so the answer names its index.

An answer that says the post is stored as a whole snapshot (``wholeSnapshot``) is also told in a
line of its own (``snapshot_notice``): the next sync removes what such a post does not describe.

``--url`` is what a producer is given: the receiver's base URL (``http://host:5000``) or one of its
endpoints (``.../api/v1/lineage`` or ``.../api/v1/lineage/batch``); each file goes to the batch
endpoint (``batch_url``).

The token is read from an environment variable (``$OL_DAGSTER_TOKEN``, or the one ``--token-env``
names): a token on the command line is visible to every user of the machine (``ps``, the
process's command line), so ``--token`` still works but warns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from ol_dagster.commands.eventfiles import BrokenLine, UnreadableFile, read_events

__all__ = [
    "BATCH_PATH",
    "UnreadableFile",
    "batch_url",
    "post_batch",
    "read_batch",
    "snapshot_notice",
]

BATCH_PATH = "/api/v1/lineage/batch"


def batch_url(url: str) -> str:
    """The batch endpoint of ``url``: a base URL gets ``/api/v1/lineage/batch``; a URL that already
    ends with the single-event endpoint (what producers are configured with) or the batch one is
    completed or kept, so it is not posted to ``.../api/v1/lineage/api/v1/lineage/batch`` (404)."""
    base = url.rstrip("/")
    single = BATCH_PATH.removesuffix("/batch")
    if base.endswith(BATCH_PATH):
        return base
    if base.endswith(single):
        return base + "/batch"
    return base + BATCH_PATH


def read_batch(path: Path) -> dict[str, Any]:
    """The file as one ``{"events": [...]}`` batch; NDJSON lines that are not JSON go as text."""
    events = [e.reason if isinstance(e, BrokenLine) else e for e in read_events(path)]
    return {"events": events}


def post_batch(client: httpx.Client, url: str, token: str, batch: dict[str, Any]) -> httpx.Response:
    # the token's UTF-8 bytes, as the receiver compares them (httpx would refuse a non-ASCII str)
    return client.post(
        batch_url(url),
        json=batch,
        headers={b"Authorization": b"Bearer " + token.encode()},
    )


def snapshot_notice(file: str, answer: object) -> str | None:
    """``whole snapshot: FILE: ...`` when the answer says the post is stored as a whole snapshot,
    with the receiver's sentence on what the next sync removes; else None."""
    if not isinstance(answer, dict) or answer.get("wholeSnapshot") is not True:
        return None
    _, found, rest = str(answer.get("message", "")).partition("stored as a whole snapshot")
    detail = (found + rest) if found else "stored as a whole snapshot"
    return f"whole snapshot: {file}: {detail}"
