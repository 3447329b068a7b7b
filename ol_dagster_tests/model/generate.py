"""Small universes and spec-valid OpenLineage events for the lineage safety model test.

A universe is two or three definitions feeding one catalog, with disjoint job namespaces and shared
dataset namespaces:

* ``snap``: job namespace ``etl`` (one pattern, no ``*``: it may own a CUTOFF System alone), the
  bucket ``s3://bucket`` mapped to the System ``bucket``;
* ``multi``: job namespaces ``features`` and ``orch`` (parents of ``features`` jobs live there),
  maybe its own job System for ``orch``, maybe the same ``bucket`` rule (whoever creates the System
  first owns it) and a ``s3://shared`` rule;
* ``ml`` (sometimes): ``ml*``, maybe the ``s3://shared`` rule too.

Every definition reads and writes the warehouse ``postgres://db:5432`` (no rule: never cleaned).
``airflow`` is nobody's namespace: a parent there is a foreign parent. Events are built as the
model's plain ``Event`` values first, then rendered to JSON by ``to_json``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from ol_dagster_tests.model.reference import (
    CUTOFF,
    DAYS,
    NONE,
    Dataset,
    DefinitionSpec,
    Event,
)

PRODUCER = "https://example.com/ol-dagster-tests/model"
SPEC = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
BASE_TIME = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
RUN_NAMESPACE = uuid.UUID("6d1c3c52-55a4-4c1c-9a4c-7c1a2b9f0e11")

WAREHOUSE = "postgres://db:5432"
BUCKET = "s3://bucket"
SHARED = "s3://shared"
DATASETS: tuple[tuple[str, str], ...] = (
    (WAREHOUSE, "shop.public.a"),
    (WAREHOUSE, "shop.public.b"),
    (BUCKET, "a"),
    (BUCKET, "b"),
    (BUCKET, "c"),
    (SHARED, "a"),
    (SHARED, "b"),
    (WAREHOUSE, "shop.public.c"),
)
NAMES_IN = {ns: tuple(n for s, n in DATASETS if s == ns) for ns, _ in DATASETS}

JOBS: dict[str, tuple[str, ...]] = {
    "etl": ("load", "kpi", "dag"),
    "features": ("f1", "f2"),
    "orch": ("dag",),
    "ml": ("train", "score"),
}
FOREIGN_PARENT = ("airflow", "dag")
PARENTS: dict[str, tuple[tuple[str, str], ...]] = {
    "etl": (("etl", "dag"), FOREIGN_PARENT),
    "features": (("orch", "dag"), FOREIGN_PARENT),
    "orch": (FOREIGN_PARENT,),
    "ml": (FOREIGN_PARENT,),
}
NAMESPACES = {"snap": ("etl",), "multi": ("features", "orch"), "ml": ("ml",)}
UUIDS = {
    "snap": "11111111-1111-4111-8111-111111111111",
    "multi": "22222222-2222-4222-8222-222222222222",
    "ml": "33333333-3333-4333-8333-333333333333",
}
# (processingType, eventTrigger, eventContentMode); the first is the default (no jobType facet)
EMISSIONS = (
    ("BATCH", "EVENT_BASED", "ACCUMULATIVE"),
    ("STREAMING", "PERIODIC", "ACCUMULATIVE"),
    ("STREAMING", "PERIODIC", "COMPLETE_SNAPSHOT"),
    ("BATCH", "EVENT_BASED", "COMPLETE_SNAPSHOT"),
    ("STREAMING", "EVENT_BASED", "ACCUMULATIVE"),  # a streaming job's COMPLETE: a restart
    ("SERVICE", "PERIODIC", "ACCUMULATIVE"),
)


# Event shapes a test can leave out (``EventFactory.avoid``): each one a disagreement with the
# production code reported to the lead, kept in sight by an xfail test until it is decided.
SHAPES = {
    # a COMPLETE_SNAPSHOT run with more than one window (left out: every such run has one event)
    "crossed windows",
    # an accumulative run going on in a later batch that is not a whole snapshot, without ending
    # there (left out: a run goes on over batches only in whole snapshots, or to its end)
    "split runs",
    # a COMPLETE_SNAPSHOT run going on in a later batch that carries its earlier windows: a whole
    # snapshot, or the event that ends the run (left out: later windows come in other posts, and
    # a run continued over posts does not end)
    "carried windows",
}


# -- universes ---------------------------------------------------------------------------------


@st.composite
def _limits(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "cleanup_enabled": draw(st.sampled_from([True] * 7 + [False])),
        "max_removals": draw(st.sampled_from([500] * 5 + [0, 1, 2, 4])),
        "max_share": draw(st.sampled_from([0.5] * 4 + [1.0, 0.34, 0.0])),
        "dry_run": draw(st.sampled_from([False] * 9 + [True])),
    }


@st.composite
def universes(draw: st.DrawFn) -> tuple[DefinitionSpec, ...]:
    modes = st.sampled_from([CUTOFF, CUTOFF, CUTOFF, DAYS, NONE])
    snap = DefinitionSpec(
        name="snap",
        uuid=UUIDS["snap"],
        snapshot=draw(st.sampled_from([True, True, True, False])),
        replace_jobs=draw(st.booleans()),
        allowed=NAMESPACES["snap"],
        job_system="snap_jobs",
        dataset_rules=((BUCKET, "bucket", draw(modes)),),
        **draw(_limits()),
    )
    multi_rules: list[tuple[str, str, str]] = []
    if draw(st.booleans()):
        multi_rules.append((BUCKET, "bucket", draw(modes)))
    if draw(st.booleans()):
        multi_rules.append((SHARED, "shared", draw(modes)))
    multi = DefinitionSpec(
        name="multi",
        uuid=UUIDS["multi"],
        snapshot=draw(st.sampled_from([True, True, False])),
        replace_jobs=draw(st.booleans()),
        allowed=NAMESPACES["multi"],
        job_system="multi_jobs",
        job_system_rules=draw(st.sampled_from([(), (("orch", "orch_jobs"),)])),
        dataset_rules=tuple(multi_rules),
        **draw(_limits()),
    )
    out = [snap, multi]
    if draw(st.booleans()):
        out.append(
            DefinitionSpec(
                name="ml",
                uuid=UUIDS["ml"],
                snapshot=draw(st.booleans()),
                replace_jobs=draw(st.booleans()),
                allowed=("ml*",),
                job_system="ml_jobs",
                dataset_rules=((SHARED, "shared", draw(modes)),) if draw(st.booleans()) else (),
                **draw(_limits()),
            )
        )
    return tuple(out)


def definition_spec(name: str = "snap", **overrides: Any) -> DefinitionSpec:
    """One definition of the universes, by name, with the safe defaults (for written sequences):
    ``snap`` is BATCH_SNAPSHOT over ``etl`` owning the ``bucket`` System (CUTOFF)."""
    base: dict[str, Any] = {
        "snap": {"allowed": NAMESPACES["snap"], "dataset_rules": ((BUCKET, "bucket", CUTOFF),)},
        "multi": {"allowed": NAMESPACES["multi"]},
        "ml": {"allowed": ("ml*",)},
    }[name]
    fields = {"snapshot": True, "replace_jobs": False, "job_system": f"{name}_jobs", **base}
    return DefinitionSpec(name=name, uuid=UUIDS[name], **{**fields, **overrides})


def definition_data(spec: DefinitionSpec, catalog: str = "main") -> dict[str, Any]:
    """The settings of a definition (``SyncDefinition.model_validate`` or the YAML file)."""
    return {
        "name": spec.name,
        "uuid": spec.uuid,
        "catalog": catalog,
        "snapshotMode": "BATCH_SNAPSHOT" if spec.snapshot else "ADDITIVE",
        "lineageReplacement": "JOB" if spec.replace_jobs else "NONE",
        "allowedJobNamespaces": list(spec.allowed),
        "openLineageSystem": spec.job_system,
        "jobSystems": [{"namespaces": p, "system": s} for p, s in spec.job_system_rules],
        "datasetSystems": [
            {"namespace": ns, "system": s, "cleanupMode": m} for ns, s, m in spec.dataset_rules
        ],
        "cleanup": {
            "enabled": spec.cleanup_enabled,
            "maxRemovalsPerRun": spec.max_removals,
            "maxRemovalShare": spec.max_share,
        },
        "outputOptions": {"dryRun": spec.dry_run},
        "receiver": {"token": {"env": f"OL_TEST_TOKEN_{spec.name.upper()}"}},
    }


# -- events ------------------------------------------------------------------------------------


@dataclass
class OpenRun:
    run_id: str
    job: tuple[str, str]
    emission: tuple[str, str, str]  # processingType, eventTrigger, eventContentMode
    parent: tuple[str, str] | None
    started: bool = False
    post: int = 0  # the post (``events`` call) of its latest event


@dataclass
class EventFactory:
    """Draws events for one definition at a time, remembering runs still open (a run goes on
    in later posts until a terminal event) and the time (events of a sequence never go back)."""

    runs: dict[str, list[OpenRun]] = field(default_factory=dict)
    serial: int = 0
    post: int = 0  # ``events`` calls so far
    stream: bool = False  # the current call is single events (they may share a batch)
    whole: bool = False  # the current post is a whole snapshot so far
    split: bool = False  # a run of an earlier post went on, not to its end, in the current one
    avoid: frozenset[str] = frozenset()  # event shapes left out (see ``SHAPES``)

    def _tick(self) -> int:
        self.serial += 1
        return self.serial

    def _run_id(self) -> str:
        return str(uuid.uuid5(RUN_NAMESPACE, f"run-{self._tick()}"))

    def events(
        self, data: st.DataObject, spec: DefinitionSpec, *, max_size: int = 4, stream: bool = False
    ) -> list[Event]:
        """The events of one post (``stream``: single events posted one after the other)."""
        self.post += 1
        self.stream = stream
        self.whole = not stream and spec.snapshot  # a whole snapshot, unless an event is rejected
        self.split = False
        n = data.draw(st.integers(0, max_size), label="events")
        return [self.event(data, spec) for _ in range(n)]

    def _continuable(self, spec: DefinitionSpec, run: OpenRun) -> bool:
        """Whether ``run`` may go on now, the shapes left out considered."""
        if run.emission[2] == "COMPLETE_SNAPSHOT":
            if "crossed windows" in self.avoid:
                return False
            return not (self.whole and run.post != self.post and "carried windows" in self.avoid)
        return True

    def event(self, data: st.DataObject, spec: DefinitionSpec) -> Event:
        open_runs = [r for r in self.runs.setdefault(spec.name, []) if self._continuable(spec, r)]
        kinds = ["run", "run", "oneshot", "job", "dataset", "rejected"]
        if self.split and "split runs" in self.avoid:
            kinds.remove("rejected")  # the post must stay a whole snapshot
        if open_runs:
            kinds[:0] = ["continue", "continue"]
        kind = data.draw(st.sampled_from(kinds), label="kind")
        if kind == "rejected":
            self.whole = False
            if data.draw(st.booleans(), label="invalid"):
                return Event("invalid", time=self._tick())
            other = [ns for name, nss in NAMESPACES.items() if name != spec.name for ns in nss]
            ns = data.draw(st.sampled_from(other), label="foreign namespace")
            return self._run_event(data, ns, data.draw(st.sampled_from(JOBS[ns])), terminal=True)
        if kind == "dataset":
            return Event("dataset", dataset=self._dataset(data, lifecycle=True), time=self._tick())
        ns = data.draw(st.sampled_from(NAMESPACES[spec.name]), label="namespace")
        name = data.draw(st.sampled_from(JOBS[ns]), label="job")
        if kind == "job":
            return Event(
                "job",
                ns,
                name,
                inputs=self._datasets(data),
                outputs=self._datasets(data, lifecycle=True),
                time=self._tick(),
            )
        if kind == "oneshot":  # a run seen only through its COMPLETE event
            return self._run_event(data, ns, name, terminal=True, lifecycle=True)
        if kind == "continue":
            run = data.draw(st.sampled_from(open_runs), label="open run")
            return self._next_event(data, run, self.runs[spec.name])
        run = OpenRun(
            self._run_id(),
            (ns, name),
            data.draw(st.sampled_from(EMISSIONS), label="emission"),
            data.draw(st.sampled_from([None, *PARENTS[ns]]), label="parent"),
        )
        self.runs[spec.name].append(run)
        return self._next_event(data, run, self.runs[spec.name])

    def _next_event(self, data: st.DataObject, run: OpenRun, open_runs: list[OpenRun]) -> Event:
        if run.emission[1] == "PERIODIC":
            types = ["RUNNING", "RUNNING", "COMPLETE"]
        elif run.started:
            types = ["RUNNING", "COMPLETE", "COMPLETE", "FAIL"]
        else:
            types = ["START", "RUNNING", "COMPLETE", "COMPLETE", "FAIL"]
        later = run.post != self.post and run.started  # in a later post than its last event
        split = later and run.emission[2] == "ACCUMULATIVE"
        if split and not self.whole and "split runs" in self.avoid:
            types = ["COMPLETE", "FAIL"]  # over batches: to its end
        if later and not split and "carried windows" in self.avoid:
            types = ["RUNNING"]  # a window that ends the run is judged with the earlier ones
        run.started = True
        run.post = self.post
        event_type = data.draw(st.sampled_from(types), label="eventType")
        ends = event_type in ("COMPLETE", "FAIL")
        self.split |= split and not ends  # a whole snapshot carries it: no rejection after it
        if ends and run in open_runs:
            open_runs.remove(run)
        return Event(
            "run",
            *run.job,
            run_id=run.run_id,
            event_type=event_type,
            inputs=self._datasets(data),
            outputs=self._datasets(data),
            parent=run.parent,
            processing=run.emission[0],
            trigger=run.emission[1],
            content=run.emission[2],
            time=self._tick(),
        )

    def _run_event(
        self, data: st.DataObject, ns: str, name: str, *, terminal: bool, lifecycle: bool = False
    ) -> Event:
        return Event(
            "run",
            ns,
            name,
            run_id=self._run_id(),
            event_type="COMPLETE",
            inputs=self._datasets(data),
            outputs=self._datasets(data, lifecycle=lifecycle),
            parent=data.draw(st.sampled_from([None, *PARENTS.get(ns, ())]), label="parent"),
            time=self._tick(),
        )

    def _datasets(self, data: st.DataObject, *, lifecycle: bool = False) -> tuple[Dataset, ...]:
        picked = data.draw(
            st.lists(st.sampled_from(DATASETS), max_size=2, unique=True), label="datasets"
        )
        return tuple(self._dataset(data, lifecycle=lifecycle, at=p) for p in picked)

    def _dataset(
        self, data: st.DataObject, *, lifecycle: bool, at: tuple[str, str] | None = None
    ) -> Dataset:
        ns, name = at or data.draw(st.sampled_from(DATASETS), label="dataset")
        if not lifecycle:
            return Dataset(ns, name)
        change = data.draw(st.sampled_from([None, "DROP", "RENAME"]), label="lifecycle")
        if change == "RENAME":  # to a name of its own (``a`` -> ``a.v2``), or to a known one
            if data.draw(st.booleans(), label="to a new name"):
                return Dataset(ns, f"{name}.v2", "RENAME", name)
            previous = data.draw(st.sampled_from(NAMES_IN[ns]), label="previous name")
            if previous == name:
                return Dataset(ns, name)
            return Dataset(ns, name, "RENAME", previous)
        return Dataset(ns, name, change)


# -- JSON ---------------------------------------------------------------------------------------


def _facet(name: str, **content: Any) -> dict[str, Any]:
    return {
        "_producer": PRODUCER,
        "_schemaURL": f"https://openlineage.io/spec/facets/1-0-1/{name}.json#/$defs/{name}",
        **content,
    }


def _time(serial: int) -> str:
    return (BASE_TIME + timedelta(seconds=serial)).isoformat().replace("+00:00", "Z")


def _dataset_json(d: Dataset) -> dict[str, Any]:
    out: dict[str, Any] = {"namespace": d.namespace, "name": d.name}
    if d.lifecycle == "DROP":
        out["facets"] = {
            "lifecycleStateChange": _facet(
                "LifecycleStateChangeDatasetFacet", lifecycleStateChange="DROP"
            )
        }
    elif d.lifecycle == "RENAME":
        out["facets"] = {
            "lifecycleStateChange": _facet(
                "LifecycleStateChangeDatasetFacet",
                lifecycleStateChange="RENAME",
                previousIdentifier={"namespace": d.namespace, "name": d.previous},
            )
        }
    return out


def to_json(e: Event) -> dict[str, Any]:
    """The OpenLineage event (spec 2-0-2) ``e`` stands for."""
    if e.kind == "invalid":
        return {"eventTime": "not a time", "producer": PRODUCER}
    if e.kind == "dataset":
        assert e.dataset is not None
        return {
            "eventTime": _time(e.time),
            "producer": PRODUCER,
            "schemaURL": f"{SPEC}#/$defs/DatasetEvent",
            "dataset": _dataset_json(e.dataset),
        }
    job: dict[str, Any] = {"namespace": e.namespace, "name": e.name}
    body: dict[str, Any] = {
        "eventTime": _time(e.time),
        "producer": PRODUCER,
        "job": job,
        "inputs": [_dataset_json(d) for d in e.inputs],
        "outputs": [_dataset_json(d) for d in e.outputs],
    }
    if e.kind == "job":
        return {**body, "schemaURL": f"{SPEC}#/$defs/JobEvent"}
    if (e.processing, e.trigger, e.content) != EMISSIONS[0]:
        job["facets"] = {
            "jobType": _facet(
                "JobTypeJobFacet",
                processingType=e.processing,
                integration="FLINK",
                jobType="JOB",
                emissionPattern={"eventTrigger": e.trigger, "eventContentMode": e.content},
            )
        }
    run: dict[str, Any] = {"runId": e.run_id}
    if e.parent is not None:
        parent_run = uuid.uuid5(RUN_NAMESPACE, f"parent-{e.parent[0]}.{e.parent[1]}")
        run["facets"] = {
            "parent": _facet(
                "ParentRunFacet",
                run={"runId": str(parent_run)},
                job={"namespace": e.parent[0], "name": e.parent[1]},
            )
        }
    return {**body, "eventType": e.event_type, "schemaURL": f"{SPEC}#/$defs/RunEvent", "run": run}
