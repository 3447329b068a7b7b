"""A night whose content is the one the parts were recorded from records no change without
reading every part (``sync.changes.record_upload``). Drawn nights, each fed to two syncs on
catalogs and stores of their own: one that may take that shortcut, and one that never does and
compares every part each night. Their change sets must be the same, night after night, whatever
happened between: jobs dropped (their parts go with the cleanup), edited, brought back, datasets
given columns or DROPped, a snapshot or an additive batch, and the daily cleanup forgetting a
job's part."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.settings import SyncDefinition
from ol_dagster.store import EventStore
from ol_dagster.sync import changes
from ol_dagster_tests.safety.test_cleanup_rules import WH, Harness, definition, ds, job

JOBS = ("a", "b", "c")

# one night: each job absent, or present with one of two inputs and one of three schemas of its
# table; a DROP of one table now and then (a quarter of the nights)
night = st.tuples(
    st.tuples(*(st.none() | st.tuples(st.integers(0, 1), st.integers(0, 2)) for _ in JOBS)),
    st.sampled_from([*[None] * 9, *JOBS]),
)
# most nights send what the night before sent (the shortcut's case); between them, anything
steps = st.lists(
    st.one_of(
        night.map(lambda n: ("night", n)),
        st.just(("again", None)),
        st.just(("again", None)),
        st.sampled_from(JOBS).map(lambda j: ("forget", j)),
    ),
    min_size=3,
    max_size=8,
)
SCHEMAS = (None, ["id"], ["id", "v"])


def events(spec: tuple[tuple[tuple[int, int] | None, ...], str | None]) -> list[dict[str, Any]]:
    shape, dropped = spec
    out = []
    for name, how in zip(JOBS, shape, strict=True):
        if how is None:
            continue
        source, schema = how
        table = ds(WH, f"model.{name}", SCHEMAS[schema])
        out.append(job("etl", name, [ds(WH, f"raw.{name}{source}")], [table]))
    if dropped is not None:
        out.append(
            {
                "eventTime": "2026-11-01T03:00:00.000Z",
                "producer": "https://example.com/drops",
                "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
                "dataset": {
                    "namespace": WH,
                    "name": f"model.{dropped}",
                    "facets": {
                        "lifecycleStateChange": {"lifecycleStateChange": "DROP"},
                    },
                },
            }
        )
    return out


class _NeverRecorded:
    """A store that never says what its parts were recorded from: every night compares them."""

    def __init__(self, store: EventStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def recorded_from(self, definition: str, catalog: str) -> None:
        return None


def _change_set(store: EventStore, d: SyncDefinition) -> dict[str, Any] | None:
    batch = store.latest_change_batch(d.name, "main")
    if batch is None:
        return None
    doc = store.change_set(batch, "main")
    assert doc is not None
    return {k: v for k, v in doc.items() if k not in ("batch", "recordedAt")}


@pytest.mark.parametrize("mode", ["BATCH_SNAPSHOT", "ADDITIVE"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=steps)
def test_the_change_sets_are_those_comparing_every_part_gives(mode: str, plan: list[Any]) -> None:
    d = definition(snapshotMode=mode)
    with tempfile.TemporaryDirectory() as tmp:
        sides = []
        for name in ("taking", "comparing"):
            store = EventStore(f"sqlite:///{Path(tmp) / f'{name}-store.db'}")
            catalog = EmbeddedCatalog(f"sqlite:///{Path(tmp) / f'{name}-cat.db'}")
            sides.append((store, catalog))
        taking, comparing = sides
        harnesses = (
            Harness(taking[1], taking[0]),
            Harness(comparing[1], _NeverRecorded(comparing[0])),  # type: ignore[arg-type]
        )
        last: Any = ((None, None, None), None)
        try:
            for what, arg in plan:
                if what == "again":
                    what, arg = "night", last
                for h in harnesses:
                    if what == "forget":
                        changes.forget_jobs(h.store, d, "main", [f"etl.{arg}"])
                    elif events(arg):
                        h.sync(d, events(arg), max_share=1.0)
                if what == "night" and events(arg):
                    last = arg
                    assert _change_set(taking[0], d) == _change_set(comparing[0], d), (what, arg)
        finally:
            for store, catalog in sides:
                store.dispose()
                catalog.close()
