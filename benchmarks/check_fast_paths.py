"""Differential check of the fast paths the benchmarks led to, against the plain ones they replace.

1. ``check_event`` (the receiver: msgspec's fast path on the parsed object, names bounded) must
   accept exactly what ``parse_event`` accepts, with the same envelope, and reject with the same
   reason;
2. ``parse_event(raw, custom_facets=False)`` (normalize's second pass: one msgspec pass from the
   bytes) must give the typed event ``parse_event`` gives, without its custom facets, or fail
   where it fails;
3. ``normalize`` (one run at a time) must build the same graph as ``_normalize_at_once``.

The events: the public corpus (``ol_dagster_tests/corpus/events``), the benchmark generators'
events, and for each of them ``--mutations`` random mutations (a value at any path replaced by
another JSON value of another type, a key removed, a key such as ``_deleted``, ``schema_`` or
``producer`` added). The batches for (3): random mixes of these (valid and invalid) events, with
START/COMPLETE pairs, JobEvents, DatasetEvents and symlinks, shuffled.

Usage: ``.venv/bin/python benchmarks/check_fast_paths.py [--mutations 300] [--batches 200]``;
exits non-zero on the first difference.
"""

from __future__ import annotations

import argparse
import copy
import random
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from ol_dagster.lineage.normalize import normalize  # noqa: E402
from ol_dagster.openlineage.envelope import EventRejected  # noqa: E402
from ol_dagster.openlineage.facets import _FacetMap  # noqa: E402
from ol_dagster.openlineage.models import (  # noqa: E402
    check_event,
    header_of,
    parse_event,
)

CORPUS = ROOT / "ol_dagster_tests" / "corpus" / "events"
ALTERNATIVES: list[Any] = [
    1,
    0,
    -1,
    1.0,
    1.5,
    True,
    False,
    "1",
    "",
    " ",
    "true",
    None,
    [],
    {},
    [1],
    {"a": 1},
    "2024-01-01T00:00:00Z",
    "COMPLETE",
    {"_deleted": True},
    {"_deleted": 1},
]
KEYS = [
    "_deleted",
    "deleted",
    "schema_",
    "schema",
    "producer",
    "_producer",
    "_schemaURL",
    "kind",
    "run",
    "job",
    "dataset",
    "facets",
    "symlinks",
    "x",
    "eventType",
    "inputs",
    "outputs",
    "fields",
    "runId",
]
REMOVE = object()


def corpus_events() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted(CORPUS.rglob("*.json")):
        try:
            doc = orjson.loads(path.read_bytes())
        except orjson.JSONDecodeError:
            continue
        docs = doc if isinstance(doc, list) else [doc]
        out += [d for d in docs if isinstance(d, dict)]
    return out


def generated_events() -> list[dict[str, Any]]:
    from normalize import Generator
    from upload import model_event

    start = datetime(2026, 11, 1, tzinfo=UTC)
    parent = str(uuid.uuid4())
    out = [model_event(i, start, parent) for i in range(3)]
    out += [orjson.loads(b) for b in Generator().events(4)[0]]
    return out


def paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:3]):
            out += paths(v, (*prefix, i))
    return out


def at(obj: Any, path: tuple) -> Any:
    for part in path:
        obj = obj[part]
    return obj


def mutated(obj: dict[str, Any], path: tuple, value: Any) -> Any:
    if not path:
        return value
    out = copy.deepcopy(obj)
    parent = at(out, path[:-1])
    if value is REMOVE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return out


def mutations(base: dict[str, Any], rng: random.Random, n: int) -> list[Any]:
    ps = paths(base)
    dict_paths = [p for p in ps if isinstance(at(base, p), dict)]
    out: list[Any] = [base]
    for _ in range(n):
        p = rng.choice(ps)
        value = rng.choice([*ALTERNATIVES, REMOVE])
        if p or value is not REMOVE:
            out.append(mutated(base, p, value))
        q = rng.choice(dict_paths)
        out.append(mutated(base, (*q, rng.choice(KEYS)), rng.choice(ALTERNATIVES)))
    return out


def outcome(fn: Any, arg: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(arg)
    except EventRejected as exc:
        return "rejected", str(exc)


def typed(value: Any) -> Any:
    """A typed event as plain data: every field, facet maps without their custom facets."""
    if isinstance(value, _FacetMap):
        out = {f.name: typed(getattr(value, f.name)) for f in msgspec.structs.fields(value)}
        return {**out, "deleted": value.deleted - set(value.custom)}
    if isinstance(value, msgspec.Struct):
        return {f.name: typed(getattr(value, f.name)) for f in msgspec.structs.fields(value)}
    if isinstance(value, list):
        return [typed(v) for v in value]
    return value


def check_events(events: list[Any]) -> tuple[list[Any], int]:
    """(1) and (2) over the events; returns the accepted ones and how many were compared."""
    accepted: list[Any] = []
    compared = 0
    for event in events:
        want = outcome(parse_event, event)
        got = outcome(check_event, event)
        if want[0] == "ok":
            want = ("ok", header_of(want[1]))
            accepted.append(event)
        if got != want:
            raise SystemExit(f"check_event differs: {got} != {want} for {str(event)[:400]}")
        try:
            raw = orjson.dumps(event)
        except TypeError:
            continue  # not JSON (an integer over 64 bits): normalize parses it with the models
        compared += 1
        want = outcome(parse_event, raw)
        got = outcome(lambda r: parse_event(r, custom_facets=False), raw)
        same = (want[0] == "ok") == (got[0] == "ok")
        if same and want[0] == "ok":
            same = typed(want[1]) == typed(got[1])
        if not same:
            raise SystemExit(f"custom_facets=False differs for {str(event)[:400]}")
    return accepted, compared


def batch(rng: random.Random, pool: list[dict[str, Any]]) -> list[bytes | str]:
    """A shuffled mix: pool events, START/COMPLETE pairs of one run, JobEvents, DatasetEvents
    with symlinks, a few broken documents."""
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    out: list[Any] = [rng.choice(pool) for _ in range(rng.randint(1, 12))]
    for k in range(rng.randint(0, 4)):
        run = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        job = {"namespace": "etl", "name": f"job_{rng.randint(0, 3)}"}
        ds = {
            "namespace": "s3://bucket",
            "name": f"path/t{k}",
            "facets": {
                "symlinks": {
                    "identifiers": [{"namespace": "hive://h", "name": f"db.t{k}", "type": "TABLE"}]
                }
            }
            if rng.random() < 0.5
            else {},
        }
        for etype in rng.sample(["START", "RUNNING", "COMPLETE", "FAIL"], rng.randint(1, 3)):
            out.append(
                {
                    "eventType": etype,
                    "eventTime": (t0 + timedelta(seconds=rng.randint(0, 5))).isoformat(),
                    "producer": "p",
                    "run": {"runId": run},
                    "job": job,
                    "inputs": [ds] if rng.random() < 0.5 else [],
                    "outputs": [{"namespace": "pg://db:5432", "name": f"a.b.t{k}"}],
                }
            )
        if rng.random() < 0.3:
            out.append({"eventTime": t0.isoformat(), "producer": "p", "job": job, "outputs": [ds]})
        if rng.random() < 0.3:
            out.append({"eventTime": t0.isoformat(), "producer": "p", "dataset": ds})
    rng.shuffle(out)
    raws: list[bytes | str] = []
    for e in out:
        try:
            raw = orjson.dumps(e)
        except TypeError:
            continue
        raws.append(raw if rng.random() < 0.8 else raw.decode())
    if rng.random() < 0.2:
        raws.insert(rng.randint(0, len(raws)), b"{not json")
    return raws


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--mutations", type=int, default=300, help="per base event")
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)

    bases = corpus_events() + generated_events()
    events: list[Any] = []
    for base in bases:
        events += mutations(base, rng, args.mutations)
    accepted, compared = check_events(events)
    print(
        f"events: {len(events):,} ({len(bases)} bases and their mutations), {len(accepted):,} "
        f"accepted: check_event == parse_event; {compared:,} as JSON: "
        "parse_event(custom_facets=False) == parse_event less custom facets"
    )

    module = sys.modules["ol_dagster.lineage.normalize"]

    restarts = 0
    at_once = module._normalize_at_once

    def counted(*a: Any, **k: Any) -> Any:
        nonlocal restarts
        restarts += 1
        return at_once(*a, **k)

    module._normalize_at_once = counted  # type: ignore[assignment]
    pool = [e for e in events if isinstance(e, dict)]
    valid = [e for e in accepted if isinstance(e, dict)]
    held_as_is = module._HELD_AS_IS
    for i in range(args.batches):
        raws = batch(rng, valid if i % 3 else pool)
        want = at_once(raws, [])
        module._HELD_AS_IS = 0 if i % 2 else held_as_is  # every other batch held compressed
        got = normalize(raws)
        if got != want:
            raise SystemExit(f"normalize differs on a batch of {len(raws)} events")
    print(
        f"batches: {args.batches} random batches: normalize == _normalize_at_once "
        f"({args.batches - restarts} one run at a time, {restarts} handed back to at-once)"
    )


if __name__ == "__main__":
    main()
