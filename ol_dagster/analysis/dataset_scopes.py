"""Refine OpenLineage Data Scope (Egeria's Lovelace service): how each dataset is written and read.

Every output of a run that started in the window is a *write* (at the run's end, when the data is
visible); a write by a run that FAILed or was ABORTed changed nothing reliable and is only counted
in ``failedWrites``. Every input of a run is a *read*. A write is classified by its facets
(``classify_write``), first rule that applies:

1. ``lifecycleStateChange`` CREATE, TRUNCATE or DROP: REPLACE (the whole object is rebuilt or gone).
2. a ``subset`` facet with an ``outputCondition`` (any kind: partition, location, compare, binary),
   in the output facets or, from producers that put it there, the dataset facets: PARTITION. It
   wins over OVERWRITE: an ``INSERT OVERWRITE ... PARTITION`` replaces that partition only.
3. ``lifecycleStateChange`` OVERWRITE: REPLACE.
4. anything else (ALTER, RENAME, no lifecycle facet): APPEND, the writer adds to what is there.
   Writers that rebuild a table without saying so (no lifecycle facet) are therefore APPEND: the
   conservative reading, the collection window only grows.

The dataset's scope is the mode of most of its writes in the window (ties: REPLACE, then PARTITION,
then APPEND); UNKNOWN when it was only read. The data collection window ends at the latest write;
it starts at the latest rebuild (a REPLACE write, or a DatasetEvent whose lifecycle change is
CREATE, TRUNCATE, DROP or OVERWRITE) when there is one in the window; else it is extended back to
the earliest write seen: in the window, or before it when the caller passes the start it knew
(``previous_starts``, e.g. read back from the catalog). Statistics (``outputStatistics``) give
the rows and bytes written in the window and since the start of the collection window. Write and
read rates are per observed day (``_common.Prepared.observed_days``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ol_dagster.analysis._common import (
    DEFAULT_WINDOW_DAYS,
    EventSource,
    Key,
    Prepared,
    aware,
    iso,
    prepare,
    rounded,
)
from ol_dagster.lineage.runs import facet_items

REPLACE = "REPLACE"
PARTITION = "PARTITION"
APPEND = "APPEND"
UNKNOWN = "UNKNOWN"

_WHOLE_OBJECT = frozenset({"CREATE", "TRUNCATE", "DROP"})
_REBUILD = _WHOLE_OBJECT | {"OVERWRITE"}
_TIE_ORDER = (REPLACE, PARTITION, APPEND)


@dataclass(frozen=True, slots=True)
class WriteMode:
    mode: str  # REPLACE / PARTITION / APPEND
    reason: str  # the facet that decided it
    partitions: tuple[str, ...] = ()  # what a PARTITION write touched, as readable keys


def _condition_keys(condition: Any) -> list[str]:
    """Readable keys of what a subset condition selects (partitions, locations, comparisons)."""
    if not isinstance(condition, Mapping):
        return []
    kind = condition.get("type")
    if kind == "partition":
        out = []
        for p in condition.get("partitions") or []:
            if not isinstance(p, Mapping):
                continue
            dims = p.get("dimensions")
            ident = p.get("identifier")
            if isinstance(ident, str) and ident:
                out.append(ident)
            elif isinstance(dims, Mapping):
                out.append(",".join(f"{k}={dims[k]}" for k in sorted(dims)))
        return out
    if kind == "location":
        return [str(loc) for loc in condition.get("locations") or []]
    if kind == "binary":
        return _condition_keys(condition.get("left")) + _condition_keys(condition.get("right"))
    if kind == "compare":
        left, right = condition.get("left"), condition.get("right")

        def side(s: Any) -> str:
            if isinstance(s, Mapping):
                return str(s.get("field", s.get("value", "")))
            return ""

        return [f"{side(left)} {condition.get('comparison', '?')} {side(right)}"]
    return []


def _subset(*facet_maps: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for facets in facet_maps:
        subset = facets.get("subset")
        if isinstance(subset, Mapping) and isinstance(subset.get("outputCondition"), Mapping):
            return subset
    return None


def classify_write(facets: Mapping[str, Any], io_facets: Mapping[str, Any]) -> WriteMode:
    """How one write treats its dataset, from its dataset facets and output facets."""
    change = facets.get("lifecycleStateChange")
    state = getattr(change, "lifecycleStateChange", None)
    if state in _WHOLE_OBJECT:
        return WriteMode(REPLACE, f"lifecycleStateChange {state}")
    subset = _subset(io_facets, facets)
    if subset is not None:
        keys = tuple(dict.fromkeys(_condition_keys(subset["outputCondition"])))
        return WriteMode(PARTITION, "subset", keys)
    if state == "OVERWRITE":
        return WriteMode(REPLACE, "lifecycleStateChange OVERWRITE")
    return WriteMode(APPEND, f"lifecycleStateChange {state}" if state else "no lifecycle facet")


@dataclass(slots=True)
class _Write:
    time: datetime
    mode: WriteMode
    rows: int | None
    size: int | None
    job: Key
    lifecycle: str | None


@dataclass(slots=True)
class _Activity:
    writes: list[_Write] = field(default_factory=list)
    failed_writes: int = 0
    reads: list[datetime] = field(default_factory=list)
    readers: set[Key] = field(default_factory=set)
    lifecycle_events: list[tuple[datetime, str]] = field(default_factory=list)  # DatasetEvents


@dataclass(frozen=True, slots=True)
class DatasetScope:
    namespace: str
    name: str
    scope: str  # REPLACE / PARTITION / APPEND / UNKNOWN (only read)
    writes: int
    failed_writes: int
    writes_by_mode: dict[str, int]
    reads: int
    writers: list[str]  # "namespace/name" of the writing jobs
    readers: list[str]
    rebuilds: int
    last_rebuild: datetime | None
    collection_start: datetime | None
    collection_end: datetime | None
    collection_basis: str | None  # REBUILD / EARLIEST_WRITE / PREVIOUS_START
    observed_days: float
    write_rate: float  # writes per observed day
    read_rate: float  # reads per observed day
    rows_written: int | None
    bytes_written: int | None
    rows_in_collection: int | None  # rows written from the collection start on
    partitions_written: int
    last_write: datetime | None
    last_lifecycle_change: str | None
    dropped: bool

    @property
    def key(self) -> Key:
        return (self.namespace, self.name)

    def properties(self) -> dict[str, Any]:
        """The DataScope as recorded on the dataset (camelCase, JSON-ready)."""
        return {
            "scope": self.scope,
            "writes": self.writes,
            "failedWrites": self.failed_writes,
            "replaceWrites": self.writes_by_mode.get(REPLACE, 0),
            "partitionWrites": self.writes_by_mode.get(PARTITION, 0),
            "appendWrites": self.writes_by_mode.get(APPEND, 0),
            "reads": self.reads,
            "writers": len(self.writers),
            "readers": len(self.readers),
            "rebuilds": self.rebuilds,
            "lastRebuild": iso(self.last_rebuild),
            "collectionStart": iso(self.collection_start),
            "collectionEnd": iso(self.collection_end),
            "collectionBasis": self.collection_basis,
            "observedDays": rounded(self.observed_days),
            "writeRatePerDay": rounded(self.write_rate),
            "readRatePerDay": rounded(self.read_rate),
            "rowsWritten": self.rows_written,
            "bytesWritten": self.bytes_written,
            "rowsInCollection": self.rows_in_collection,
            "partitionsWritten": self.partitions_written,
            "lastWrite": iso(self.last_write),
            "lastLifecycleChange": self.last_lifecycle_change,
            "dropped": self.dropped,
        }


@dataclass(frozen=True, slots=True)
class DatasetScopes:
    now: datetime
    window_days: float
    window_start: datetime
    scopes: list[DatasetScope]  # sorted by (namespace, name)
    ambiguous: list[Key]  # datasets left out: their events disagree on their identity
    skipped_events: list[str]

    def __iter__(self) -> Iterator[DatasetScope]:
        return iter(self.scopes)

    def __len__(self) -> int:
        return len(self.scopes)

    def get(self, namespace: str, name: str) -> DatasetScope | None:
        return next((s for s in self.scopes if s.key == (namespace, name)), None)

    def rows(self) -> list[dict[str, Any]]:
        return [{"namespace": s.namespace, "name": s.name, **s.properties()} for s in self]


def _sum(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _scope(
    key: Key,
    act: _Activity,
    prepared: Prepared,
    previous: datetime | None,
) -> DatasetScope:
    writes = sorted(act.writes, key=lambda w: w.time)
    by_mode = Counter(w.mode.mode for w in writes)
    scope = UNKNOWN
    if writes:
        scope = max(_TIE_ORDER, key=lambda m: (by_mode[m], -_TIE_ORDER.index(m)))

    rebuild_times = [w.time for w in writes if w.mode.mode == REPLACE]
    rebuild_times += [t for t, state in act.lifecycle_events if state in _REBUILD]
    last_rebuild = max(rebuild_times) if rebuild_times else None
    write_times = [w.time for w in writes]
    start = end = basis = None
    if last_rebuild is not None:
        start, basis = last_rebuild, "REBUILD"
    elif write_times:
        start, basis = write_times[0], "EARLIEST_WRITE"
        if previous is not None and aware(previous) < start:
            start, basis = aware(previous), "PREVIOUS_START"
    if write_times or rebuild_times:
        end = max(write_times + rebuild_times)

    changes = [(w.time, w.lifecycle) for w in writes if w.lifecycle]
    changes += act.lifecycle_events
    last_change = max(changes, key=lambda c: c[0])[1] if changes else None

    activity = write_times + act.reads + [t for t, _ in act.lifecycle_events]
    observed = prepared.observed_days(min(activity) if activity else None)
    partitions = {p for w in writes for p in w.mode.partitions}
    in_collection = [w for w in writes if start is not None and w.time >= start]
    return DatasetScope(
        namespace=key[0],
        name=key[1],
        scope=scope,
        writes=len(writes),
        failed_writes=act.failed_writes,
        writes_by_mode={m: by_mode[m] for m in _TIE_ORDER if by_mode[m]},
        reads=len(act.reads),
        writers=sorted({"/".join(w.job) for w in writes}),
        readers=sorted("/".join(r) for r in act.readers),
        rebuilds=len(rebuild_times),
        last_rebuild=last_rebuild,
        collection_start=start,
        collection_end=end,
        collection_basis=basis,
        observed_days=observed,
        write_rate=len(writes) / observed,
        read_rate=len(act.reads) / observed,
        rows_written=_sum([w.rows for w in writes]),
        bytes_written=_sum([w.size for w in writes]),
        rows_in_collection=_sum([w.rows for w in in_collection]),
        partitions_written=len(partitions),
        last_write=write_times[-1] if write_times else None,
        last_lifecycle_change=last_change,
        dropped=last_change == "DROP",
    )


def compute_dataset_scopes(
    source: EventSource | Prepared,
    *,
    now: datetime,
    window_days: float = DEFAULT_WINDOW_DAYS,
    previous_starts: Mapping[Key, datetime] | None = None,
) -> DatasetScopes:
    """The data scope of every dataset written or read in the ``window_days`` ending at ``now``.

    ``previous_starts`` maps (namespace, name) to the collection start recorded by an earlier
    analysis, so a dataset that is only appended to keeps its older start.
    """
    prepared = prepare(source, now=now, window_days=window_days)
    ids = prepared.identities
    activity: dict[Key, _Activity] = {}

    def act(namespace: str, name: str) -> _Activity | None:
        key = ids.key(namespace, name)
        if key is None:
            return None
        if key not in activity:
            activity[key] = _Activity()
        return activity[key]

    for run in prepared.runs:
        failed = run.status in ("FAIL", "ABORT")
        for d in run.view.outputs.values():
            a = act(d.namespace, d.name)
            if a is None:
                continue
            if failed:
                a.failed_writes += 1
                continue
            stats = d.io_facets.get("outputStatistics")
            change = d.facets.get("lifecycleStateChange")
            a.writes.append(
                _Write(
                    run.end,
                    classify_write(d.facets, d.io_facets),
                    getattr(stats, "rowCount", None),
                    getattr(stats, "size", None),
                    run.job,
                    getattr(change, "lifecycleStateChange", None),
                )
            )
        for d in run.view.inputs.values():
            a = act(d.namespace, d.name)
            if a is not None:
                a.reads.append(run.start)
                a.readers.add(run.job)
    for event in prepared.dataset_events:
        change = facet_items(event.dataset.facets).get("lifecycleStateChange")
        state = getattr(change, "lifecycleStateChange", None)
        if state is None:
            continue
        a = act(event.dataset.namespace, event.dataset.name)
        if a is not None:
            a.lifecycle_events.append((aware(event.eventTime), state))

    previous = previous_starts or {}
    scopes = [_scope(k, a, prepared, previous.get(k)) for k, a in sorted(activity.items())]
    return DatasetScopes(
        prepared.now,
        prepared.window_days,
        prepared.window_start,
        scopes,
        prepared.ambiguous_datasets,
        list(prepared.skipped_events),
    )
