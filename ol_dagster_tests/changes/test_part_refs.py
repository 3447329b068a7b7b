"""A change set reads only the jobs that name what it changed (``store.part_refs``), and a user
sees the same change set, impact and picture as if every job on the catalog had been read.

Random stores of job and dataset parts (several definitions, parts written, rewritten and
removed) with hostile names (case variants, ``|``, ``#``, ``?``, ``.``, ``:``, unicode, names
that are prefixes of one another, the same name in two namespaces, names the picture writes
alike), and random change sets: the upload's and the cleanup's change sets (with their impact),
the picture, and the jobs the day-based cleanup forgets are compared with the same rules applied
to every part of the catalog, read straight from the table. A store written before the index
existed gets it on upgrade and answers the same.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from sqlalchemy import select

from ol_dagster.changes.changeset import ChangeSet, Collected, Item, job_changes, neighbourhood
from ol_dagster.changes.downstream import Reader, impacted, known_fields
from ol_dagster.changes.parts import digest
from ol_dagster.lineage.graph import NodeKey
from ol_dagster.store import EventStore, schema
from ol_dagster.store.changes import StoredPart
from ol_dagster.store.part_refs import ref_rows
from ol_dagster.sync import changes
from ol_dagster_tests.safety.test_cleanup_rules import definition
from ol_dagster_tests.store.test_store import _turn_back, ev

# few names, so that the stores and change sets drawn meet often: ``etl`` + ``a.b`` and ``etl.a``
# + ``b`` are both the removed job ``etl.a.b``; ``pg://db:5432`` + ``a`` and ``pg://db`` +
# ``5432:a`` are both the picture's node ``dataset:pg://db:5432:a``
NAMESPACES = ["etl", "ETL", "etl.a", "pg://db:5432", "pg://db", "n|s#?é"]
NAMES = ["a", "A", "ab", "b", "a.b", "5432:a", "ü|#?"]
FIELDS = ["id", "ID", "x.y", "x|y", "é"]
DEFINITIONS = {n: definition(name=n) for n in ("one", "ONE")}  # two definitions that differ in case

# drawn whole from lists (not built of parts, nor as sets): cheap to draw, so many examples run
KEYS = [(ns, n) for ns in NAMESPACES for n in NAMES]
keys = st.sampled_from(KEYS)
COLUMNS = [(ns, n, f) for ns, n in KEYS for f in FIELDS]
columns = st.sampled_from(COLUMNS)
flows = st.sampled_from(list(itertools.product(KEYS, KEYS)))
column_flows = st.sampled_from(list(itertools.product(COLUMNS, COLUMNS)))


def some(strategy: st.SearchStrategy[Any], most: int) -> st.SearchStrategy[set[Any]]:
    return st.lists(strategy, max_size=most).map(set)


@st.composite
def job_parts(draw: st.DrawFn) -> dict[str, Any]:
    """A job's part as the store keeps it: data flows and their ends, plus inputs and outputs
    with no flow, and column flows between any datasets."""
    data_flows = sorted(draw(some(flows, 3)))
    inputs = {s for s, _ in data_flows} | draw(some(keys, 1))
    outputs = {t for _, t in data_flows} | draw(some(keys, 1))
    return {
        "inputs": sorted(inputs),
        "outputs": sorted(outputs),
        "dataFlows": data_flows,
        "fieldFlows": sorted(draw(some(column_flows, 3))),
        "sql": None,
    }


dataset_parts = st.builds(
    lambda fields: {"fields": None if fields is None else sorted(fields)},
    st.none() | some(st.sampled_from(FIELDS), 3),
)
definitions = st.sampled_from(sorted(DEFINITIONS))
# (definition, jobs written, datasets written, jobs removed, datasets removed)
writes = st.tuples(
    definitions,
    st.lists(st.tuples(keys, job_parts()), max_size=5).map(dict),
    st.lists(st.tuples(keys, dataset_parts), max_size=4).map(dict),
    some(keys, 3),
    some(keys, 2),
)


def _ref(key: NodeKey) -> dict[str, str]:
    return {"namespace": key[0], "name": key[1]}


def _col(column: tuple[str, str, str]) -> dict[str, str]:
    return {"namespace": column[0], "name": column[1], "field": column[2]}


items = st.one_of(
    st.builds(
        lambda k, c: {"kind": "dataset", "change": c, **_ref(k)},
        keys,
        st.sampled_from(["added", "removed"]),
    ),
    st.builds(
        lambda k, f: {
            "kind": "dataset",
            "change": "changed",
            **_ref(k),
            "fieldsRemoved": sorted(f),
        },
        keys,
        st.lists(st.sampled_from(FIELDS), min_size=1, max_size=2),
    ),
    st.builds(
        lambda c, j, s, t: {
            "kind": "dataFlow",
            "change": c,
            "job": _ref(j),
            "source": _ref(s),
            "target": _ref(t),
        },
        st.sampled_from(["added", "removed"]),
        keys,
        keys,
        keys,
    ),
    st.builds(
        lambda c, j, s, t: {
            "kind": "fieldFlow",
            "change": c,
            "job": _ref(j),
            "source": _col(s),
            "target": _col(t),
        },
        st.sampled_from(["added", "removed"]),
        keys,
        columns,
        columns,
    ),
    st.builds(
        lambda c, k, gone: {
            "kind": "job",
            "change": c,
            **_ref(k),
            **({"outputsRemoved": [_ref(g) for g in sorted(gone)]} if gone else {}),
        },
        st.sampled_from(["added", "removed", "changed"]),
        keys,
        some(keys, 2),
    ),
)


def _dotted(key: NodeKey) -> str:
    return f"{key[0]}.{key[1]}"


def removed_names(stored: Iterable[NodeKey]) -> st.SearchStrategy[set[str]]:
    """Names of removed jobs (``<namespace>.<name>``), mostly of jobs stored: ``etl`` + ``a.b``
    and ``etl.a`` + ``b`` are both ``etl.a.b``, a removed job's name says neither."""
    named = st.sampled_from(sorted({_dotted(k) for k in stored}) or ["etl.a"])
    return some(named | st.builds(_dotted, keys) | st.sampled_from(["etl.a.b.c", "etl.x"]), 4)


def every_part(store: EventStore, catalog: str, kind: str) -> list[StoredPart]:
    """Every part of ``kind`` on the catalog, read straight from the table."""
    t = schema.lineage_parts
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(t.c.definition, t.c.namespace, t.c.name, t.c.digest, t.c.part).where(
                t.c.catalog == catalog, t.c.kind == kind
            )
        ).all()
    return [StoredPart(*row) for row in rows]


def found(items: Iterable[Item]) -> Collected:
    """The items as the upload finds them, one by one."""
    out = Collected()
    out.add(items)
    return out


def readers(parts: Iterable[StoredPart]) -> list[Reader]:
    return [(p.definition, (p.namespace, p.name), p.part) for p in parts]


def fields(parts: Iterable[StoredPart]) -> dict[NodeKey, list[str] | None]:
    return known_fields(((p.namespace, p.name), p.part) for p in parts)


def touched(items: Iterable[Item]) -> set[NodeKey]:
    out: set[NodeKey] = set()
    for item in items:
        out |= {(item[e]["namespace"], item[e]["name"]) for e in ("source", "target") if e in item}
        for k in ("inputsRemoved", "outputsRemoved"):
            out |= {(r["namespace"], r["name"]) for r in item.get(k) or []}
    return out


def job_of(item: Item) -> NodeKey | None:
    if item["kind"] == "job":
        return (item["namespace"], item["name"])
    return (item["job"]["namespace"], item["job"]["name"]) if "job" in item else None


def cleanup_from_every_part(
    jobs: list[StoredPart],
    datasets: list[StoredPart],
    name: str,
    earlier: ChangeSet,
    gone: set[str],
    removed_datasets: bool,
) -> tuple[ChangeSet | None, set[tuple[str, NodeKey]], set[tuple[str, NodeKey]]]:
    """What the cleanup records, judged on every part of the catalog (as it was before the
    index): its change set, and the (definition, key) of the jobs and datasets left."""
    listed = list(earlier.items)
    ending = {
        (i["namespace"], i["name"])
        for i in listed
        if i["kind"] == "job" and i["change"] == "removed"
    }
    left_jobs = {(p.definition, (p.namespace, p.name)) for p in jobs}
    left_datasets = {(p.definition, (p.namespace, p.name)) for p in datasets}
    if not gone and not removed_datasets and not ending:
        return None, left_jobs, left_datasets
    kept = {k for k in ending if _dotted(k) not in gone}
    out = [i for i in listed if job_of(i) not in kept]
    mine = sorted((p for p in jobs if p.definition == name), key=lambda p: (p.namespace, p.name))
    left = set()
    for p in mine:
        if _dotted((p.namespace, p.name)) in gone:
            if (p.namespace, p.name) not in ending:
                out.extend(job_changes((p.namespace, p.name), p.part, None))
            left.add((p.namespace, p.name))
    dropped: set[NodeKey] = set()
    if removed_datasets:
        still = {
            tuple(k)
            for p in mine
            if (p.namespace, p.name) not in left
            for k in [*p.part["inputs"], *p.part["outputs"]]
        }
        known = {(p.namespace, p.name) for p in datasets if p.definition == name}
        dropped = {k for k in touched(out) if k not in still and k in known}
        out.extend({"kind": "dataset", "change": "removed", **_ref(k)} for k in sorted(dropped))
    left_jobs -= {(name, k) for k in left}
    left_datasets -= {(name, k) for k in dropped}
    if not kept and len(out) == len(listed):
        return None, left_jobs, left_datasets
    now_jobs = [p for p in jobs if (p.definition, (p.namespace, p.name)) in left_jobs]
    now_ds = [p for p in datasets if (p.definition, (p.namespace, p.name)) in left_datasets]
    hit = impacted(out, readers(now_jobs), fields(now_ds))
    cs = ChangeSet.of(name, earlier.batch, earlier.catalog, out, hit, dedupe=True)
    return cs, left_jobs, left_datasets


def apply(store: EventStore, catalog: str, ops: list[Any]) -> None:
    """Write and remove parts as syncs do: a definition keeps a part of each dataset its jobs
    name (fields unknown, unless drawn)."""
    for name, jobs, drawn, jobs_gone, datasets_gone in ops:
        named = {tuple(k) for p in jobs.values() for n in ("inputs", "outputs") for k in p[n]}
        datasets = {**{k: {"fields": None} for k in named}, **drawn}
        for kind, written, removed in (
            ("job", jobs, jobs_gone),
            ("dataset", datasets, datasets_gone),
        ):
            rows = [(*k, digest(p), p) for k, p in written.items()]
            store.replace_parts(name, catalog, kind, rows, removed=sorted(removed - written.keys()))


def index_rows(store: EventStore, catalog: str) -> set[tuple[Any, ...]]:
    r = schema.part_refs
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(r.c.catalog, r.c.ref, r.c.definition, r.c.key).where(r.c.catalog == catalog)
        ).all()
    return {tuple(row) for row in rows}


def expected_index(store: EventStore, catalog: str) -> set[tuple[Any, ...]]:
    t = schema.lineage_parts
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(t.c.definition, t.c.key, t.c.namespace, t.c.name, t.c.part).where(
                t.c.catalog == catalog, t.c.kind == "job"
            )
        ).all()
    return {row for d, *job in rows for row in ref_rows(catalog, d, [tuple(job)])}


def names(parts: Iterable[StoredPart]) -> set[tuple[str, NodeKey]]:
    return {(p.definition, (p.namespace, p.name)) for p in parts}


@pytest.fixture
def store_and_batch(tmp_path: Path) -> Iterator[tuple[EventStore, int]]:
    """A store with one batch, whose change set each example records in a catalog of its own.
    On SQLite only (the upgrade test below runs the same reads on PostgreSQL too): the examples
    are many."""
    store = EventStore(f"sqlite:///{tmp_path / 'store.db'}")
    yield store, store.add_posted_batch("one", [ev(0)], received=1)
    store.dispose()


_catalogs = itertools.count()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    ops=st.lists(writes, min_size=1, max_size=4),
    change=st.lists(items, max_size=8),
    name=definitions,
    limit=st.integers(1, 6),
    data=st.data(),
    removed_datasets=st.booleans(),
    other=definitions,
)
def test_the_index_gives_what_every_part_gives(
    store_and_batch: tuple[EventStore, int],
    ops: list[Any],
    change: list[Item],
    name: str,
    limit: int,
    data: st.DataObject,
    removed_datasets: bool,
    other: str,
) -> None:
    store, batch = store_and_batch
    catalog = f"c{next(_catalogs)}"
    apply(store, catalog, ops)
    jobs, datasets = every_part(store, catalog, "job"), every_part(store, catalog, "dataset")
    note(f"jobs {[(p.definition, p.namespace, p.name) for p in jobs]}")
    stored = sorted({(p.namespace, p.name) for p in jobs})
    gone = data.draw(some(st.sampled_from(stored) if stored else keys, 3), label="gone")
    cleaned = data.draw(removed_names(stored), label="cleaned")
    forgotten = data.draw(removed_names(stored), label="forgotten")

    # the upload's change set: its impact, the definition's jobs ``gone`` no longer reading
    upload = changes._save(
        store, DEFINITIONS[name], catalog, batch, found(change), earlier=None, gone=gone
    )
    still = [r for r in readers(jobs) if not (r[0] == name and r[1] in gone)]
    expected = ChangeSet.of(name, batch, catalog, change, impacted(change, still, fields(datasets)))
    assert upload.as_dict() == expected.as_dict()

    # its picture
    around = [((p.namespace, p.name), p.part) for p in jobs]
    assert changes.picture_graph(store, upload, limit=limit) == (
        neighbourhood(upload, around, limit=limit) if not upload.empty else ([], [])
    )

    # the cleanup's change set, and what it leaves
    want, jobs_left, datasets_left = cleanup_from_every_part(
        jobs, datasets, name, upload, cleaned, removed_datasets
    )
    got = changes.record_cleanup(
        store, DEFINITIONS[name], catalog, batch, sorted(cleaned), removed_datasets
    )
    assert (got.as_dict() if got else None) == (want.as_dict() if want else None)
    assert names(every_part(store, catalog, "job")) == jobs_left
    assert names(every_part(store, catalog, "dataset")) == datasets_left

    # the day-based cleanup forgets the jobs it removed, of its definition only
    forgot = {(other, k) for d, k in jobs_left if d == other and _dotted(k) in forgotten}
    assert changes.forget_jobs(store, DEFINITIONS[other], catalog, sorted(forgotten)) == len(forgot)
    assert names(every_part(store, catalog, "job")) == jobs_left - forgot

    assert index_rows(store, catalog) == expected_index(store, catalog)


def test_a_store_from_before_the_index_gets_it_on_upgrade_and_answers_the_same(
    store_url: str,
) -> None:
    """A version-16 store with parts (here: this one turned back, its index dropped) is upgraded:
    the index is built from the parts it holds, and a removal's impact and picture are what
    every part gives, names the picture writes alike included."""
    store = EventStore(store_url)
    batch = store.add_posted_batch("one", [ev(0)], received=1)
    flow = (("etl", "a.b"), ("etl", "b"))
    load: dict[str, Any] = {"inputs": [flow[0]], "outputs": [flow[1]], "dataFlows": [flow]}
    read, wrote = ("pg://db:5432", "a"), ("pg://db", "5432:a")  # both dataset:pg://db:5432:a
    report = {"inputs": [read], "outputs": [wrote], "dataFlows": [(read, wrote)]}
    other = {"inputs": [("etl", "b")], "outputs": [("ETL", "a")], "fieldFlows": []}
    apply(
        store,
        "main",
        [
            (
                "one",
                {("etl", "load"): load, ("etl", "x"): other},
                {read: {"fields": None}},
                set(),
                set(),
            ),
            ("two", {("ETL", "report"): report}, {}, set(), set()),
        ],
    )
    built = index_rows(store, "main")
    _turn_back(store, 16, f"DROP TABLE {schema.part_refs.name}")

    upgraded = EventStore(store_url)
    try:
        assert upgraded.schema_version == schema.SCHEMA_VERSION == 17
        assert index_rows(upgraded, "main") == built == expected_index(upgraded, "main")
        change = [
            {"kind": "dataset", "change": "removed", **_ref(read)},
            {
                "kind": "dataFlow",
                "change": "removed",
                "job": _ref(("etl", "load")),
                "source": _ref(("etl", "a.b")),
                "target": _ref(read),
            },
        ]
        got = changes._save(
            upgraded, DEFINITIONS["one"], "main", batch, found(change), earlier=None
        )
        assert list(got.impacted) == [
            {
                "definition": "two",
                "job": _ref(("ETL", "report")),
                "dataset": _ref(wrote),
                "column": None,
                "reads": _ref(read),
            }
        ]
        jobs = every_part(upgraded, "main", "job")
        around = [((p.namespace, p.name), p.part) for p in jobs]
        picture = changes.picture_graph(upgraded, got)
        assert picture == neighbourhood(got, around)
        assert ("job:ETL:report", "dataset:pg://db:5432:a", "context") in picture[1]
        assert ("job:etl:x", "job", "context") not in [(n[0], n[2], n[3]) for n in picture[0]]
    finally:
        upgraded.dispose()


def test_a_cleanup_removes_a_dataset_no_job_of_its_definition_names_though_another_reads_it(
    store_and_batch: tuple[EventStore, int],
) -> None:
    """The definition's last job naming a dataset goes: the dataset goes with it, even though
    another definition's job (its name differing in case only) still reads it, and that job is
    listed as impacted."""
    store, batch = store_and_batch
    x, y = ("pg://db:5432", "a"), ("pg://db", "5432:a")
    job = {"inputs": [x], "outputs": [y], "dataFlows": [(x, y)], "fieldFlows": []}
    reader = {"inputs": [x], "outputs": [("etl", "b")], "dataFlows": [(x, ("etl", "b"))]}
    apply(store, "m", [("one", {("etl", "a.b"): job}, {}, set(), set())])
    apply(store, "m", [("ONE", {("etl.a", "b"): reader}, {}, set(), set())])
    got = changes.record_cleanup(store, DEFINITIONS["one"], "m", batch, ["etl.a.b"], True)
    assert got is not None
    removed = {(i["kind"], i["namespace"], i["name"]) for i in got.items if "source" not in i}
    assert removed == {("job", "etl", "a.b"), ("dataset", *x), ("dataset", *y)}
    assert [(i["definition"], i["job"], i["reads"]) for i in got.impacted] == [
        ("ONE", _ref(("etl.a", "b")), _ref(x))
    ]
    assert names(every_part(store, "m", "job")) == {("ONE", ("etl.a", "b"))}
