"""Event validation against parsing alone: what the receiver and normalization pay per event.

Issue 14's goal is validation "at the speed of parsing". The events, each serialized to bytes once:

- the public corpus (``ol_dagster_tests/corpus/events``: real producers' events, 1-x and 2-x);
- ``--events`` generated dbt-like events: ``benchmarks/upload.py``'s ``model_event`` (column lineage
  for 10 columns, SQL, parent, schema facets) and ``benchmarks/normalize.py``'s ``Generator``
  (20 columns, START/COMPLETE pairs, statistics and custom facets), half each.

Per set, each timed one event at a time over every event, the best of ``--repeat`` runs:

- ``orjson.loads(raw)``: parse only, the floor (ratio 1.0);
- ``parse_event(raw)``: bytes to a typed event with its custom facets (analysis, ``inspect``);
- ``parse_event(raw, custom_facets=False)``: bytes to a typed event without them, in one pass;
- receiver: ``check_event(obj)`` of the object the receiver parsed the body into, i.e. validation
  and the envelope it stores, without the parse (``pydantic_core.from_json`` of the body is
  timed by the receiver's own benchmark, ``benchmarks/ingest.py``);
- normalization's parse: what ``normalize``'s second pass does per event (``_Plan.event``), from
  the bytes to the typed event.

Each ratio is that time over ``orjson.loads`` of the same events in the same run; the paths take
turns within each repetition (the best of each is kept), so a machine busy with other work slows
them alike. Every event of each set must be accepted by each path, so a fast wrong answer cannot
pass as speed. Runs against an older checkout too (a row it has no API for is left out), which is
how the "before" figures of issue 14 were taken.

Usage: ``.venv/bin/python benchmarks/parse.py [--events 2000] [--repeat 5]``
"""

from __future__ import annotations

import argparse
import gc
import inspect
import platform
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from ol_dagster.lineage.normalize import _Plan  # noqa: E402
from ol_dagster.openlineage.models import (  # noqa: E402
    DEFAULT_MAX_NAME_LENGTH,
    check_event,
    parse_event,
)

CORPUS = ROOT / "ol_dagster_tests" / "corpus" / "events"


def corpus_events() -> list[bytes]:
    """Each corpus event the receiver accepts, as compact JSON bytes (as the store keeps it)."""
    out: list[bytes] = []
    for path in sorted(CORPUS.rglob("*.json")):
        try:
            doc = orjson.loads(path.read_bytes())
        except orjson.JSONDecodeError:
            continue
        for event in doc if isinstance(doc, list) else [doc]:
            raw = orjson.dumps(event)
            try:
                parse_event(raw)
            except ValueError:
                continue  # the corpus holds templates and rejected examples too
            out.append(raw)
    return out


def generated_events(n: int) -> list[bytes]:
    from normalize import Generator
    from upload import model_event

    start = datetime(2026, 11, 1, tzinfo=UTC)
    parent = str(uuid.uuid4())
    out = [orjson.dumps(model_event(i, start, parent)) for i in range(n // 2)]
    out += Generator().events(n - len(out))[0]
    return out


def normalize_parse(raws: list[bytes]) -> Callable[[bytes], Any]:
    """``_Plan.event`` as normalize's second pass calls it: the plan holds the bytes already."""
    plan = _Plan()
    for raw in raws:
        plan.add(raw)
    index = {id(raw): i for i, raw in enumerate(plan.inputs)}
    return lambda raw: plan.event(index[id(raw)])


def once(fn: Callable[[Any], Any], items: list[Any]) -> float:
    """Seconds for one pass of ``fn`` over ``items``, one at a time."""
    gc.collect()
    gc.disable()
    started = time.perf_counter()
    for item in items:
        fn(item)
    elapsed = time.perf_counter() - started
    gc.enable()
    return elapsed


def measure(name: str, raws: list[bytes], repeat: int) -> None:
    objs = [orjson.loads(r) for r in raws]
    for raw, obj in zip(raws, objs, strict=True):  # each path accepts each event
        parse_event(raw)
        check_event(obj, max_name_length=DEFAULT_MAX_NAME_LENGTH)
    in_plan = normalize_parse(raws)
    for raw in raws:
        in_plan(raw)
    paths: list[tuple[str, Callable[[Any], Any], list[Any]]] = [
        ("orjson.loads(raw)", orjson.loads, raws),
        ("parse_event(raw)", parse_event, raws),
    ]
    if "custom_facets" in inspect.signature(parse_event).parameters:
        paths.append(
            (
                "parse_event(raw, custom_facets=False)",
                lambda r: parse_event(r, custom_facets=False),  # type: ignore[call-arg]
                raws,
            )
        )
    paths += [
        (
            "receiver: check_event(obj)",
            lambda o: check_event(o, max_name_length=DEFAULT_MAX_NAME_LENGTH),
            objs,
        ),
        ("normalize: _Plan.event(raw)", in_plan, raws),
    ]
    times: dict[str, float] = {}
    for _ in range(repeat):  # in turns: load from other processes falls on every path alike
        for label, fn, items in paths:
            elapsed = once(fn, items)
            times[label] = min(times.get(label, elapsed), elapsed)
    floor = times["orjson.loads(raw)"]
    rows = list(times.items())
    size = sum(map(len, raws))
    print(f"\n{name}: {len(raws):,} events, {size / len(raws):,.0f} bytes on average")
    print(f"  {'path':<38} {'us/event':>9} {'x orjson.loads':>15}")
    for label, seconds in rows:
        print(f"  {label:<38} {seconds / len(raws) * 1e6:>9.1f} {seconds / floor:>15.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(f"Python {platform.python_version()} on {platform.machine()}")
    measure("corpus", corpus_events(), args.repeat)
    measure("generated", generated_events(args.events), args.repeat)


if __name__ == "__main__":
    main()
