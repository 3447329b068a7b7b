"""The file-based log store: hostile names from events never write outside the folder.

Every hostile name is tried as a job namespace, a job name, a run id, and a dataset namespace and
name: each file must resolve inside the folder, distinct names must give distinct files, the same
event twice must be one file, and reading the folder back must give the events that were written.
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ol_dagster.logstore import (
    DATASETS_DIR,
    MAX_COMPONENT,
    UnsafePath,
    encode_component,
    event_path,
    iter_logged_events,
    iter_logged_files,
    write_event,
)
from ol_dagster.openlineage.models import parse_event
from ol_dagster_tests.conftest import run_event

HOSTILE = [
    "../",
    "..",
    ".",
    "...",
    "../../etc/passwd",
    "/abs/path",
    "/",
    "a\\b",
    "..\\..\\windows\\system32",
    "C:\\temp",
    "a/b",
    "a%2Fb",
    "%2e%2e",
    "a\x00b",
    "\x00",
    "\x01",
    "tab\there",
    "line\nbreak",
    "x" * 1000,
    "x" * 999 + "y",  # same 1,000-character prefix as the one above, but one letter
    "CON",
    "con",
    "Con",
    "nul.txt",
    "NUL",
    "COM1",
    "com9.log",
    "LPT1",
    "AUX.tar.gz",
    "name.",
    "name ",
    "name. .",
    "\u202etxt.exe",  # right-to-left override
    "a\u200bb",  # zero-width space
    "ab",
    "\ufeffbom",
    "日本語/テーブル",
    "émoji 🎉",
    "_datasets",
    "~",
    "a~b",
    "Job",
    "job",
    "JOB",
    '?*<>|":',
]


def hostile_events() -> list[tuple[bytes, Any]]:
    out: list[tuple[bytes, Any]] = []
    for i, name in enumerate(HOSTILE):
        time = f"2026-11-01T02:{i % 60:02d}:00Z"
        for event in (
            run_event(name, "job", event_time=time, run_id=str(uuid.UUID(int=i + 1))),
            run_event("etl", name, event_time=time, run_id=str(uuid.UUID(int=i + 1))),
            run_event("etl", "job", event_time=time, run_id=name),
            {
                "eventTime": time,
                "producer": "https://example.com/tests",
                "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
                "dataset": {"namespace": name, "name": name},
            },
            {
                "eventTime": time,
                "producer": "https://example.com/tests",
                "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
                "job": {"namespace": name, "name": name},
            },
        ):
            raw = json.dumps(event).encode()
            out.append((raw, parse_event(raw)))
    return out


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "logstore"


def test_every_hostile_name_stays_inside_the_folder(folder: Path, tmp_path: Path) -> None:
    events = hostile_events()
    paths = [write_event(folder, raw, event) for raw, event in events]
    root = folder.resolve()
    for path in paths:
        assert path.is_file()
        assert path.resolve().is_relative_to(root), path
    # nothing was created next to the folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logstore"]
    # every file on disk is inside too (walk, do not trust the returned paths)
    for dirpath, _dirs, files in os.walk(folder):
        for f in files:
            assert (Path(dirpath) / f).resolve().is_relative_to(root)


def test_distinct_events_give_distinct_files(folder: Path) -> None:
    events = hostile_events()
    paths = [write_event(folder, raw, event) for raw, event in events]
    assert len({*paths}) == len(events)
    # also when file names are compared the way a case-insensitive file system would
    assert len({str(p).lower() for p in paths}) == len(events)
    assert len(list(iter_logged_files(folder))) == len(events)


def test_the_same_event_twice_is_one_file(folder: Path) -> None:
    data = run_event("etl", "job", run_id=str(uuid.uuid4()))
    raw = json.dumps(data).encode()
    first = write_event(folder, raw, parse_event(raw))
    again = write_event(folder, raw, parse_event(raw))
    # the same event formatted differently is still the same event
    pretty = json.dumps(data, indent=2, sort_keys=True).encode()
    third = write_event(folder, pretty, parse_event(pretty))
    assert first == again == third
    assert list(iter_logged_files(folder)) == [first]
    assert first.read_bytes() == raw  # the first bytes written are kept


def test_reading_back_gives_the_same_events(folder: Path) -> None:
    events = hostile_events()
    for raw, event in events:
        write_event(folder, raw, event)
    written = sorted(raw for raw, _ in events)
    assert sorted(iter_logged_events(folder)) == written
    # parsed back, the names are the hostile ones exactly
    names = set()
    for raw in iter_logged_events(folder):
        e = parse_event(raw)
        names.add(e.dataset.name if e.kind == "DatasetEvent" else e.job.name)  # type: ignore[union-attr]
    assert set(HOSTILE) <= names


def test_no_temporary_files_are_left(folder: Path) -> None:
    for raw, event in hostile_events()[:20]:
        write_event(folder, raw, event)
    leftovers = [f for _d, _s, files in os.walk(folder) for f in files if f.startswith(".")]
    assert leftovers == []


def test_layout_and_since(folder: Path) -> None:
    run_id = "6f1c1c9e-6b1a-4b36-9b1c-0c6f3e7b2a11"
    raw = json.dumps(
        run_event("etl", "daily_kpi", run_id=run_id, event_time="2026-11-01T02:00:00.5Z")
    ).encode()
    path = write_event(folder, raw, parse_event(raw))
    rel = path.relative_to(folder)
    assert rel.parts[:2] == ("etl", "daily_kpi")
    assert rel.name.startswith(f"20261101T020000.500000Z_{run_id}_COMPLETE_")
    assert rel.name.endswith(".json")

    ds = {
        "eventTime": "2026-10-01T00:00:00Z",
        "producer": "p",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": {"namespace": "postgres://h:5432", "name": "db.s.t"},
    }
    ds_raw = json.dumps(ds).encode()
    ds_path = write_event(folder, ds_raw, parse_event(ds_raw))
    assert ds_path.relative_to(folder).parts[:3] == (
        DATASETS_DIR,
        "postgres%3A%2F%2Fh%3A5432",
        "db.s.t",
    )

    since = datetime(2026, 10, 15, tzinfo=UTC)
    assert list(iter_logged_events(folder, since=since)) == [raw]
    assert sorted(iter_logged_events(folder)) == sorted([raw, ds_raw])


def _at(when: str) -> bytes:
    return json.dumps(run_event("etl", "old", event_time=when, run_id=when)).encode()


ERAS = [
    "0001-01-01T00:00:00Z",
    "0099-12-31T23:59:59Z",
    "0999-01-02T00:00:00Z",
    "2026-11-01T02:00:00Z",
]


def test_years_before_1000_sort_by_event_time(folder: Path) -> None:
    paths = [write_event(folder, raw, parse_event(raw)) for raw in map(_at, reversed(ERAS))]

    assert {p.name[:9] for p in paths} == {"00010101T", "00991231T", "09990102T", "20261101T"}
    assert list(iter_logged_events(folder)) == [_at(t) for t in ERAS]  # time order
    since = datetime(999, 1, 1, tzinfo=UTC)
    assert list(iter_logged_events(folder, since=since)) == [_at(t) for t in ERAS[2:]]


def test_names_of_the_unpadded_scheme_are_still_read_and_not_written_again(folder: Path) -> None:
    """Before years were padded, ``strftime("%Y")`` wrote the year 999 as ``999``: such a file is
    listed in event-time order, ``since`` reads its time right, and the same event is not logged a
    second time under the padded name."""
    paths = [write_event(folder, raw, parse_event(raw)) for raw in map(_at, ERAS)]
    for path in paths[:3]:
        path.rename(path.with_name(path.name.lstrip("0")))  # as the older scheme named them
    by_name = sorted(folder.rglob("*.json"), key=lambda p: p.name)
    assert [json.loads(p.read_bytes())["eventTime"] for p in by_name] != ERAS  # not by name

    assert list(iter_logged_events(folder)) == [_at(t) for t in ERAS]
    since = datetime(99, 12, 31, tzinfo=UTC)
    assert list(iter_logged_events(folder, since=since)) == [_at(t) for t in ERAS[1:]]
    again = write_event(folder, _at(ERAS[2]), parse_event(_at(ERAS[2])))
    assert again.name.startswith("9990102T")
    assert len(list(folder.rglob("*.json"))) == len(ERAS)


def test_a_planted_link_out_of_the_folder_is_refused(folder: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    folder.mkdir()
    (folder / "etl").symlink_to(outside, target_is_directory=True)
    raw = json.dumps(run_event("etl", "job")).encode()
    with pytest.raises(UnsafePath):
        write_event(folder, raw, parse_event(raw))
    assert list(outside.iterdir()) == []


def test_missing_folder_reads_as_empty(tmp_path: Path) -> None:
    assert list(iter_logged_events(tmp_path / "nothing")) == []


# -- the component encoding itself --------------------------------------------------------------

_WINDOWS_DEVICES = {"CON", "PRN", "AUX", "NUL"} | {
    f"{d}{i}" for d in ("COM", "LPT") for i in range(10)
}
_SAFE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.%~")


@pytest.mark.parametrize("name", HOSTILE)
def test_encoded_component_is_safe_everywhere(name: str) -> None:
    enc = encode_component(name)
    assert enc not in ("", ".", "..")
    assert set(enc) <= _SAFE  # printable ASCII only: no separators, NUL, controls or bidi
    assert not enc.startswith((".", "_"))
    assert not enc.endswith((".", " "))
    assert len(enc) <= MAX_COMPONENT
    assert enc.split(".", 1)[0].upper() not in _WINDOWS_DEVICES


@pytest.mark.parametrize(
    ("name", "encoded"),
    [
        ("daily_kpi", "daily_kpi"),
        ("db.schema.table", "db.schema.table"),
        ("..", "%2E%2E"),
        (".", "%2E"),
        ("../", "%2E.%2F"),
        ("a/b", "a%2Fb"),
        ("a\\b", "a%5Cb"),
        ("a\x00b", "a%00b"),
        ("name.", "name%2E"),
        ("name ", "name%20"),
        ("nul.txt", "%6Eul.txt"),
        ("a%2fb", "a%252fb"),
        ("_datasets", "%5Fdatasets"),
        ("a\u200bb", "a%E2%80%8Bb"),
    ],
)
def test_encoding_examples(name: str, encoded: str) -> None:
    assert encode_component(name) == encoded


def test_case_and_length_get_a_hash_suffix() -> None:
    upper = encode_component("CON")
    assert upper.startswith("%43ON~") and len(upper) == len("%43ON~") + 16
    assert encode_component("Job") != encode_component("JOB")
    assert encode_component("Job").lower() != encode_component("job").lower()
    long_a, long_b = encode_component("x" * 1000), encode_component("x" * 999 + "y")
    assert long_a != long_b
    assert len(long_a) == MAX_COMPONENT
    # a long name of multi-byte characters is never cut inside a %XX
    cut = encode_component("é" * 500).split("~", 1)[0]
    assert len(cut) % 6 == 0 and cut.startswith("%C3%A9")


def test_event_path_needs_no_file_system(tmp_path: Path) -> None:
    raw = json.dumps(run_event("../../etc", "passwd")).encode()
    path = event_path(tmp_path / "never-created", raw, parse_event(raw))
    assert not (tmp_path / "never-created").exists()
    assert path.parts[-3] == "%2E.%2F..%2Fetc"  # one component, no separator in it
