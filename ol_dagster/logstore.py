"""Egeria's file-based Open Lineage log store: every accepted event as one JSON file in a folder.

Layout (seed: "organized by the namespace and job name in the event")::

    <folder>/<job namespace>/<job name>/<eventTime>_<runId>_<eventType>_<hash>.json   RunEvent
    <folder>/<job namespace>/<job name>/<eventTime>_job_<hash>.json                   JobEvent
    <folder>/_datasets/<namespace>/<name>/<eventTime>_dataset_<hash>.json             DatasetEvent

``eventTime`` is UTC in ISO basic form (``20261101T020000.000000Z``: sortable, no ``:``; the year
always four digits, ``09990101T...`` for the year 999), ``hash``
the first 16 hex digits of the SHA-256 of the event's canonical JSON (sorted keys, no blanks), so
the same event always lands in the same file, whatever its formatting: writing is idempotent. A
file is written to a temporary file in its directory (``.tmp-...``), flushed to disk, then renamed
over its final name (``os.replace``): a reader never sees half an event. Names written before
the year was padded (``9990101T...``, the C library's unpadded ``%Y``) are still read, in event-time
order, and a same event is not written again under the padded name.

Names from events are untrusted. Every path component is encoded by ``encode_component``:

- bytes outside ``A-Z a-z 0-9 - _ .`` are percent-encoded from UTF-8 (``/``, ``\\``, ``:``, NUL,
  control characters, blanks, ``%`` itself, and every non-ASCII character, so bidi overrides and
  zero-width characters are visible and no two spellings of a name collide after normalization);
- a ``.`` at the start or the end is encoded (no ``.``/``..``, no hidden files, no trailing dot
  that Windows would strip), and so is a ``_`` at the start (``_datasets`` stays reserved);
- a Windows device name (CON, PRN, AUX, NUL, COM0-9, LPT0-9, with or without an extension, in any
  case) gets its first letter encoded;
- a name with upper-case letters gets ``~`` and a hash of the name appended, so names that differ
  only in case stay distinct on case-insensitive file systems;
- an encoded name longer than ``MAX_COMPONENT`` characters is cut (never inside a ``%XX``) and gets
  ``~`` and a hash of the whole name appended.

Without a ``~`` suffix the encoding is plain percent-encoding, so it is reversible and injective;
``~`` never appears otherwise, so suffixed and plain names never meet; suffixed names differ in
their hash. Finally every target is checked to resolve inside the folder before anything is written.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from ol_dagster.openlineage.models import DatasetEvent, Event, JobEvent, RunEvent

DATASETS_DIR = "_datasets"
MAX_COMPONENT = 120  # characters of an encoded directory name (file systems allow 255 bytes)
MAX_RUN_ID = 72  # characters of the encoded run id inside a file name
_HASH_CHARS = 16
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
_WINDOWS_DEVICES = frozenset(
    {"CON", "PRN", "AUX", "NUL"}
    | {f"COM{i}" for i in range(10)}
    | {f"LPT{i}" for i in range(10)}
    | {"CONIN$", "CONOUT$", "CLOCK$"}
)
# the date of an older name may have 5 to 7 digits: its year was not padded
_TIME_PREFIX = re.compile(r"^(\d{5,8})(T\d{6}\.\d{6}Z)_")
_TMP_PREFIX = ".tmp-"
_EVENT_TYPE = re.compile(r"[A-Z]{1,16}")


class UnsafePath(ValueError):
    """A log store path that would resolve outside its folder (never expected: a safety net)."""


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:_HASH_CHARS]


def _utf8(text: str) -> bytes:
    # JSON allows lone surrogates ("\ud800"): keep them distinct instead of failing
    return text.encode("utf-8", "surrogatepass")


def encode_component(name: str, *, max_length: int = MAX_COMPONENT) -> str:
    """A file-system-safe, collision-free directory or file-name part for an untrusted name."""
    raw = _utf8(name)
    if not raw:
        return "%"  # "%" alone is never produced otherwise
    parts = [chr(b) if b in _SAFE else f"%{b:02X}" for b in raw]
    # never ".", "..", a hidden name, a trailing dot, or the reserved "_" prefix
    if parts[0] in (".", "_"):
        parts[0] = f"%{ord(parts[0]):02X}"
    if parts[-1] == ".":
        parts[-1] = "%2E"
    stem = name.split(".", 1)[0].rstrip(" ").upper()
    if stem in _WINDOWS_DEVICES:
        parts[0] = f"%{raw[0]:02X}"
    encoded = "".join(parts)
    suffix = ""
    if any("A" <= c <= "Z" for c in name):
        suffix = "~" + _digest(raw)
    if len(encoded) + len(suffix) > max_length:
        suffix = "~" + _digest(raw)
        budget = max_length - len(suffix)
        cut, used = [], 0
        for p in parts:  # whole parts only: a "%XX" is never split
            if used + len(p) > budget:
                break
            cut.append(p)
            used += len(p)
        encoded = "".join(cut)
    return encoded + suffix


def _canonical(raw: bytes) -> bytes:
    try:
        obj = json.loads(raw)
    except ValueError:
        return raw
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8", "surrogatepass"
    )


def event_hash(raw_event: bytes) -> str:
    """The event's identity in file names: the same event, however formatted, the same hash."""
    return _digest(_canonical(raw_event))


def _stamp(t: datetime) -> str:
    """UTC in ISO basic form with a four-digit year: ``strftime("%Y")`` does not pad years before
    1000 on Linux, and ``9990101`` sorts after ``20260101``."""
    t = t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    return (
        f"{t.year:04d}{t.month:02d}{t.day:02d}T{t.hour:02d}{t.minute:02d}{t.second:02d}"
        f".{t.microsecond:06d}Z"
    )


def _time(event: Event) -> str:
    return _stamp(event.eventTime)


def _legacy(path: Path) -> Path | None:
    """The name an event of a year before 1000 had before years were padded, if it differs."""
    if not path.name.startswith("0"):
        return None
    return path.with_name(path.name.lstrip("0"))


def _time_key(filename: str) -> str | None:
    """The event time a file name starts with, padded (older names too); None: not an event."""
    match = _TIME_PREFIX.match(filename)
    if match is None:
        return None
    return match.group(1).zfill(8) + match.group(2)


def event_path(folder: str | os.PathLike[str], raw_event: bytes, event: Event) -> Path:
    """Where ``write_event`` puts an event (no file system access)."""
    base = Path(folder)
    digest = event_hash(raw_event)
    when = _time(event)
    if isinstance(event, DatasetEvent):
        d = event.dataset
        directory = base / DATASETS_DIR / encode_component(d.namespace) / encode_component(d.name)
        return directory / f"{when}_dataset_{digest}.json"
    directory = base / encode_component(event.job.namespace) / encode_component(event.job.name)
    if isinstance(event, JobEvent):
        return directory / f"{when}_job_{digest}.json"
    run_id = encode_component(event.run.runId, max_length=MAX_RUN_ID)
    event_type = event.eventType or "NONE"
    if not _EVENT_TYPE.fullmatch(event_type):  # validated upstream; encoded all the same
        event_type = encode_component(event_type, max_length=16)
    return directory / f"{when}_{run_id}_{event_type}_{digest}.json"


def _check_inside(folder: Path, target: Path) -> None:
    root = folder.resolve()
    if not target.resolve().is_relative_to(root):
        raise UnsafePath(f"{target} resolves outside the log store folder {root}")


def write_event(folder: str | os.PathLike[str], raw_event: bytes, event: Event) -> Path:
    """Write one accepted event (its raw bytes, as received) into the log store, atomically and
    idempotently; returns the file. ``event`` is the parsed form of ``raw_event``."""
    if not isinstance(event, RunEvent | JobEvent | DatasetEvent):
        raise TypeError(f"not a parsed OpenLineage event: {type(event).__name__}")
    base = Path(folder)
    target = event_path(base, raw_event, event)
    _check_inside(base, target.parent)
    if target.exists():
        return target  # the same event was logged before
    legacy = _legacy(target)
    if legacy is not None and legacy.exists():
        return legacy  # logged before, under the older unpadded name
    target.parent.mkdir(parents=True, exist_ok=True)
    _check_inside(base, target.parent)  # a directory on the way may be a link planted since
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=_TMP_PREFIX, suffix=".json")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw_event)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def iter_logged_files(
    folder: str | os.PathLike[str], *, since: datetime | None = None
) -> Iterator[Path]:
    """The event files of the log store, in path order (per job: in event-time order).

    ``since`` skips files whose event time (from the file name) is earlier, without reading them.
    Temporary files of writes in progress are never listed.
    """
    base = Path(folder)
    if not base.is_dir():
        return
    threshold = None
    if since is not None:
        threshold = _stamp(since)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        logged = [
            (key, filename)
            for filename in filenames
            if not filename.startswith(".")
            and filename.endswith(".json")
            and (key := _time_key(filename)) is not None
        ]
        for key, filename in sorted(logged):  # event-time order, older unpadded names too
            if threshold is not None and key < threshold:
                continue
            yield Path(dirpath) / filename


def iter_logged_events(
    folder: str | os.PathLike[str], *, since: datetime | None = None
) -> Iterator[bytes]:
    """The raw bytes of every logged event (see ``iter_logged_files``): an event source for the
    analyses."""
    for path in iter_logged_files(folder, since=since):
        yield path.read_bytes()
