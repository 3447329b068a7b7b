"""Posting event files to a receiver (``ol-dagster send``): one batch per file.

A file may hold one event, a JSON array of events, ``{"events": [...]}``, or NDJSON (one event per
line). Lines that are not JSON are still sent, as they are, so the receiver's answer names them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

BATCH_PATH = "/api/v1/lineage/batch"


class UnreadableFile(ValueError):
    pass


def read_batch(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) < 2:
            raise UnreadableFile(f"{path}: not JSON, a JSON array or NDJSON") from None
        events = []
        for n, line in enumerate(lines, 1):
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise UnreadableFile(f"{path}: line {n} is not JSON: {exc.msg}") from None
        return {"events": events}
    if isinstance(data, dict) and isinstance(data.get("events"), list):
        return data
    if isinstance(data, list):
        return {"events": data}
    return {"events": [data]}


def post_batch(client: httpx.Client, url: str, token: str, batch: dict[str, Any]) -> httpx.Response:
    return client.post(
        url.rstrip("/") + BATCH_PATH,
        json=batch,
        headers={"Authorization": f"Bearer {token}"},
    )
