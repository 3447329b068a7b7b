"""Posting event files to a receiver (``ol-dagster send``): one batch per file.

A file may hold one event, a JSON array of events, ``{"events": [...]}``, or NDJSON (one event per
line). An NDJSON line that is not JSON is sent as a string, so the answer names its index.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from ol_dagster.eventfiles import BrokenLine, UnreadableFile, read_events

__all__ = ["BATCH_PATH", "UnreadableFile", "post_batch", "read_batch"]

BATCH_PATH = "/api/v1/lineage/batch"


def read_batch(path: Path) -> dict[str, Any]:
    """The file as one ``{"events": [...]}`` batch; NDJSON lines that are not JSON go as text."""
    events = [e.reason if isinstance(e, BrokenLine) else e for e in read_events(path)]
    return {"events": events}


def post_batch(client: httpx.Client, url: str, token: str, batch: dict[str, Any]) -> httpx.Response:
    return client.post(
        url.rstrip("/") + BATCH_PATH,
        json=batch,
        headers={"Authorization": f"Bearer {token}"},
    )
