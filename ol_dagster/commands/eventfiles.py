"""Reading OpenLineage event files: one event, a JSON array, ``{"events": [...]}``, or NDJSON.

Shared by ``ol-dagster send`` and ``ol-dagster inspect`` so both read a file the same way. A file
is NDJSON only when its first line is a JSON object on its own; otherwise a file that does not
parse is one error for the whole file (a pretty-printed event with a stray brace is not a hundred
broken events).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class UnreadableFile(ValueError):
    """The file holds no events: unreadable, or not JSON at all."""


@dataclass(frozen=True, slots=True)
class BrokenLine:
    """An NDJSON line that is not JSON; kept in place so event indexes stay true."""

    reason: str


def read_events(path: str | Path) -> list[Any]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UnreadableFile(f"cannot read {path}: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) < 2 or not _is_object(lines[0]):
            raise UnreadableFile(
                f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            ) from None
        return [_line(line) for line in lines]
    if isinstance(data, dict) and isinstance(data.get("events"), list):
        return data["events"]
    if isinstance(data, list):
        return data
    return [data]


def _is_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


def _line(line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        return BrokenLine(f"not valid JSON: {exc.msg}")
