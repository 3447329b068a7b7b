"""Universes and spec-valid OpenLineage events for the lineage safety model test, with adversarial
names.

A universe is two or three definitions feeding one catalog. Their job namespaces are drawn from
*families* of look-alike patterns that admit no common namespace (``etl``, ``ETL``, ``etl?``,
``Etl``/``ETl``/``e_l``, ``étl`` in NFC and in NFD, ``a|b`` and ``a``, ``x*``, ``[pPq]s``), so the
settings load ("one definition per namespace per catalog"); a definition may also declare the
shared namespaces ``sh*`` (then nobody's cutoff covers them). A definition of one family with one
literal pattern and nothing shared has a single namespace: it may keep a CUTOFF System's cutoff.

Names are adversarial on purpose: job namespaces and names, dataset namespaces and names carry
case variants of one name, ``|``, ``#``, ``.``, ``/``, ``:``, ``%``, ``_``, ``?``, ``*``, ``[``,
spaces, NFC and NFD forms of one name, one-character names and a few of ``limits.maxNameLength``
(2,048) characters, and one longer (rejected). Pairs are chosen so that a string format of owners
would confuse them: namespace ``a|b`` with job ``c`` beside namespace ``a`` with job ``b|c``; job
``y`` (its orchestration scope) beside job ``y#orchestration``; ``etl`` beside ``ETL``, ``etl?``
beside ``etl_``.

Dataset namespaces: the warehouse ``postgres://db:5432`` (no rule: never cleaned), the bucket
``s3://bucket`` (a rule, literal or ``s3://b?cket``, to the System ``bucket``), ``s3://Bucket``
(its case variant, which no rule matches), ``s3://shared`` (rule ``shared``) and Kafka topics
(rule ``kafka://k[0-9]*`` to ``topics``). Several definitions may map one System: whoever creates
it owns it, and a CUTOFF one is claimed (the others' datasets go to ``<System> [<definition>]``).

``airflow`` is nobody's namespace: a parent there is a foreign parent. Events are built as the
model's plain ``Event`` values first, then rendered to JSON by ``to_json``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from ol_dagster_tests.model.reference import (
    CUTOFF,
    DAYS,
    MAX_NAME_LENGTH,
    NONE,
    Dataset,
    DefinitionSpec,
    Event,
)

PRODUCER = "https://example.com/ol-dagster-tests/model"
SPEC = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
BASE_TIME = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
RUN_NAMESPACE = uuid.UUID("6d1c3c52-55a4-4c1c-9a4c-7c1a2b9f0e11")

# -- names ---------------------------------------------------------------------------------------

NFC_ETL = "\u00e9tl"  # étl: one code point for é
NFD_ETL = "e\u0301tl"  # étl: e, then the combining acute accent
NFC_CAFE, NFD_CAFE = "caf\u00e9", "cafe\u0301"
LONG_NAMESPACE = "x" + "y" * (MAX_NAME_LENGTH - 1)  # as long as a name may be
LONG_JOB = "J" * MAX_NAME_LENGTH
LONG_DATASET = "d" * MAX_NAME_LENGTH
TOO_LONG = "x" + "z" * MAX_NAME_LENGTH  # one character too many: its event is rejected

WAREHOUSE = "postgres://db:5432"
BUCKET = "s3://bucket"
BUCKET_CASE = "s3://Bucket"  # no rule matches it: a System of its own, never cleaned
SHARED = "s3://shared"
TOPICS = ("kafka://k1:9092", "kafka://k2:9092")
DATASETS: tuple[tuple[str, str], ...] = (
    (WAREHOUSE, "shop.public.a"),
    (WAREHOUSE, "shop.public.b"),
    (WAREHOUSE, "shop.public.c"),
    (WAREHOUSE, "shop.public.A"),
    (WAREHOUSE, "shop.public.a|b"),
    (BUCKET, "a"),
    (BUCKET, "b"),
    (BUCKET, "c"),
    (BUCKET, "A"),
    (BUCKET, "a b"),
    (BUCKET, "a/b:c"),
    (BUCKET, "%_?*["),
    (BUCKET, NFC_CAFE),
    (BUCKET, NFD_CAFE),
    (BUCKET_CASE, "a"),
    ("s3://bucket|x", "a"),  # no rule matches it either
    ("z", "a#b"),  # a one-character namespace
    (SHARED, "a"),
    (SHARED, "b"),
    (TOPICS[0], "t|1"),
    (TOPICS[1], "t#1"),
    (TOPICS[1], "T"),
)
RARE_DATASETS: tuple[tuple[str, str], ...] = ((BUCKET, LONG_DATASET), (WAREHOUSE, "x"))
NAMES_IN = {ns: tuple(n for s, n in DATASETS if s == ns) for ns, _ in DATASETS}

# Job namespace families: (allowedJobNamespaces, the namespaces events use). No namespace matches
# patterns of two families, nor a shared pattern, nor a foreign namespace.
FAMILIES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "etl": (("etl",), ("etl",)),
    "ETL": (("ETL",), ("ETL",)),
    "nfc": ((NFC_ETL,), (NFC_ETL,)),
    "nfd": ((NFD_ETL,), (NFD_ETL,)),
    "a|b": (("a|b", "a"), ("a|b", "a")),
    "Etl": (("Etl", "ETl", "e_l"), ("Etl", "ETl", "e_l")),
    "etl?": (("etl?",), ("etl|", "etl#", "etl%", "etl_", "etl*", "etl[", "etl ", "etlE", "etle")),
    "x*": (("x*",), ("x", "x.y", "x.Y", "x/y", "x:y", "x#orchestration", LONG_NAMESPACE)),
    "[pPq]s": (("[pPq]s",), ("ps", "Ps", "qs")),
}
GLOBS = ("etl?", "x*", "[pPq]s")
SINGLE = tuple(
    f
    for f, (patterns, _) in FAMILIES.items()
    if len(patterns) == 1
    and "?" not in patterns[0]
    and "*" not in patterns[0]
    and "[" not in patterns[0]
)
SHARED_PATTERNS = ("sh*",)
SHARED_NAMESPACES = ("sh", "sh|etl", "shETL")
# nobody's: rejected when an event's job is there (the last one is admitted by ``x*`` but one
# character too long), a parent there is a foreign parent
FOREIGN = ("airflow", "EtL", "etl12", TOO_LONG)
FOREIGN_PARENT = ("airflow", "dag")

# the namespaces of the written sequences' definitions (``definition_spec``)
LEGACY_NAMESPACES = ("features", "orch", "ml", "ml2")
ALL_NAMESPACES: tuple[str, ...] = (
    *(ns for _, members in FAMILIES.values() for ns in members),
    *SHARED_NAMESPACES,
    *LEGACY_NAMESPACES,
)

_JOB_POOL = (
    "LOAD",
    "Load",
    "lo|ad",
    "lo#ad",
    "load#orchestration",
    "a.b",
    "a/b",
    "a:b",
    "l%d",
    "l_d",
    "l?d",
    "l*d",
    "l[d",
    "l d",
    NFC_CAFE,
    NFD_CAFE,
    "j",
)
# names chosen so that owners a string format would confuse meet: a|b + c and a + b|c, one job
# and its name with the orchestration suffix, case variants in one namespace
_JOBS: dict[str, tuple[str, ...]] = {
    "etl": ("load", "LOAD", "dag"),
    "ETL": ("load", NFC_CAFE, NFD_CAFE, "dag"),
    "a": ("b|c", "load", "dag"),
    "a|b": ("c", "load"),
    "x": ("y", "y#orchestration", LONG_JOB),
    "features": ("f1", "f2"),
    "orch": ("dag",),
    "ml": ("train", "score"),
    "ml2": ("train",),
}


# namespaces of one family that differ by a case, by ``_`` for a letter, by a ``|``
LOOK_ALIKE = frozenset(
    {"etlE", "etle", "etl_", "x.y", "x.Y", "Etl", "ETl", "e_l", "ps", "Ps", "a", "a|b"}
)
# jobs whose owners a string format would confuse: they often write one same flow
CONFUSABLE = {("a", "b|c"), ("a|b", "c"), ("x", "y"), ("x", "y#orchestration")}


def jobs_of(namespace: str) -> tuple[str, ...]:
    """The job names events use in a namespace: ``load``, ``dag`` and two of the pool."""
    if namespace in _JOBS:
        return _JOBS[namespace]
    i = sum(map(ord, namespace)) % len(_JOB_POOL)
    return ("load", _JOB_POOL[i], _JOB_POOL[(i + 5) % len(_JOB_POOL)], "dag")


def parents_of(namespace: str, members: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Parents a job of ``namespace`` may name: a DAG of its own namespace, one of another
    namespace of its definition, a foreign one."""
    others = [ns for ns in members if ns != namespace]
    return (
        (namespace, "dag"),
        *([(others[0], "dag")] if others else []),
        FOREIGN_PARENT,
    )


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
# production code, kept in sight by an xfail test until it is decided.
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
    # two RENAMEs of one previous name described by one batch (left out: a definition renames a
    # name once in a sequence)
    "renamed twice",
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


_MODES = st.sampled_from([CUTOFF, CUTOFF, CUTOFF, DAYS, NONE])
_BUCKET_PATTERNS = st.sampled_from([BUCKET, "s3://b?cket"])


# A pattern of another definition that admits a namespace of a family too (a glob over it, or a
# literal it matches): settings with both on one catalog must not load
OVERLAPPING: dict[str, str] = {
    "etl": "e?l",
    "ETL": "[eE]TL",
    "nfc": NFC_ETL + "*",
    "a|b": "a|*",
    "Etl": "E*",
    "etl?": "etl_",
    "x*": "x.y",
    "[pPq]s": "?s",
}


@st.composite
def universes(draw: st.DrawFn, overlap: bool = False) -> tuple[DefinitionSpec, ...]:
    """Two or three definitions on one catalog, with disjoint look-alike namespaces; with
    ``overlap``, now and then the second one admits a namespace of the first too (settings that
    must be refused at load)."""
    names = ("snap", "multi", "ml")[: draw(st.sampled_from([2, 2, 3]))]
    # the first: a single namespace (it may keep CUTOFF), or one glob pattern (it may not)
    first = draw(st.sampled_from([*SINGLE, *GLOBS, *GLOBS]))
    rest = draw(st.permutations([f for f in FAMILIES if f != first]))
    if draw(st.booleans()):
        # ``a|b`` (its owners a|b + c and a + b|c join to one string) comes second half the time
        rest = ["a|b", *(f for f in rest if f != "a|b")]
    out = []
    for i, name in enumerate(names):
        if i == 0:
            families = [first]
        else:
            k = draw(st.sampled_from([1, 1, 2]))
            families, rest = rest[:k], rest[k:]
        allowed = tuple(p for f in families for p in FAMILIES[f][0])
        if i == 1 and overlap and first in OVERLAPPING and draw(st.integers(0, 7)) == 7:
            allowed = (*allowed, OVERLAPPING[first])
        shared = SHARED_PATTERNS if draw(st.sampled_from([False, False, True])) else ()
        rules: list[tuple[str, str, str]] = []
        if i == 0 or draw(st.booleans()):
            rules.append((draw(_BUCKET_PATTERNS), "bucket", draw(_MODES)))
        if i > 0 and draw(st.booleans()):
            rules.append((SHARED, "shared", draw(_MODES)))
        if draw(st.sampled_from([False, False, True])):
            rules.append(("kafka://k[0-9]*", "topics", draw(_MODES)))
        job_rules: tuple[tuple[str, str], ...] = ()
        if len(allowed) > 1 and draw(st.booleans()):
            job_rules = ((allowed[-1], f"{name}_jobs_2"),)
        out.append(
            DefinitionSpec(
                name=name,
                uuid=UUIDS[name],
                snapshot=draw(st.sampled_from([True, True, True, False])),
                replace_jobs=draw(st.booleans()),
                allowed=allowed,
                shared=shared,
                job_system=f"{name}_jobs",
                job_system_rules=job_rules,
                dataset_rules=tuple(rules),
                **draw(_limits()),
            )
        )
    return tuple(out)


def members(spec: DefinitionSpec) -> tuple[str, ...]:
    """The job namespaces events of this definition use: those of the pool it admits."""
    return tuple(ns for ns in ALL_NAMESPACES if spec.admits(ns))


def foreign(spec: DefinitionSpec) -> tuple[str, ...]:
    """Job namespaces of the pool it does not admit, and one it admits but whose name is too
    long: an event there is rejected."""
    return (*(ns for ns in ALL_NAMESPACES if not spec.admits(ns)), *FOREIGN)


_LEGACY: dict[str, dict[str, Any]] = {
    "snap": {"allowed": ("etl",), "dataset_rules": ((BUCKET, "bucket", CUTOFF),)},
    "multi": {"allowed": ("features", "orch")},
    "ml": {"allowed": ("ml*",)},
}


def definition_spec(name: str = "snap", **overrides: Any) -> DefinitionSpec:
    """A definition by name, with the safe defaults (for written sequences): ``snap`` is
    BATCH_SNAPSHOT over ``etl`` owning the ``bucket`` System (CUTOFF), ``multi`` writes
    ``features`` and ``orch``, ``ml`` writes ``ml*``."""
    fields = {
        "snapshot": True,
        "replace_jobs": False,
        "job_system": f"{name}_jobs",
        **_LEGACY[name],
    }
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
        "sharedJobNamespaces": list(spec.shared),
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
        "limits": {"maxNameLength": spec.max_name_length},
        "outputOptions": {"dryRun": spec.dry_run},
        "receiver": {"token": {"env": f"OL_TEST_TOKEN_{spec.name.upper()}"}},
        "inventories": list(spec.inventories),
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
    partners: list[Event] = field(default_factory=list)  # look-alike owners' events to add
    numbers: dict[str, int | None] = field(default_factory=dict)  # definition -> last number
    renamed: set[tuple[str, str, str]] = field(default_factory=set)  # (definition, ns, previous)
    spec: str = ""  # the definition the current events are for

    def sequence(self, data: st.DataObject, spec: DefinitionSpec) -> int | None:
        """The ``OL-Snapshot-Sequence`` of a post. A definition's producer numbers its snapshots
        or not (drawn at its first post); one that does mostly counts up, but sends a number
        again (a retry), an older number later (two connections: the older snapshot arrives
        last), and now and then nothing (unnumbered: older than every numbered one)."""
        if spec.name not in self.numbers:
            numbered = data.draw(st.booleans(), label="numbered snapshots")
            self.numbers[spec.name] = 10 if numbered else None
        last = self.numbers[spec.name]
        if last is None:
            return None
        step = data.draw(st.sampled_from([1, 1, 1, 0, -1, -2, None]), label="sequence")
        if step is None:
            return None
        self.numbers[spec.name] = max(last, last + step)
        return last + step

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
        self.spec = spec.name
        self.whole = not stream and spec.snapshot  # a whole snapshot, unless an event is rejected
        self.split = False
        n = data.draw(st.integers(0, max_size), label="events")
        # the rarer branches are the higher draws, so that a shrunk sequence takes them only
        # when the failure needs them
        if n and not stream and data.draw(st.integers(0, 7), label="datasets only") == 7:
            # a batch of DatasetEvents alone: it describes no job
            return [
                Event("dataset", dataset=self._dataset(data, lifecycle=True), time=self._tick())
                for _ in range(n)
            ]
        self.partners = []
        out = [self.event(data, spec) for _ in range(n)]
        return [*out, *self.partners]  # a look-alike owner's event in the same post

    def again(self, events: list[Event]) -> list[Event]:
        """The same events sent again by a producer whose jobs changed nothing (tonight's
        snapshot): each run with a new run id, every event later than any before, in order."""
        self.post += 1
        ids: dict[str, str] = {}
        out = []
        for e in events:
            run_id = e.run_id
            if run_id is not None:
                run_id = ids.setdefault(run_id, self._run_id())
            out.append(replace(e, run_id=run_id, time=self._tick()))
        return out

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
        confusable = sorted(job for job in CONFUSABLE if spec.admits(job[0]))
        if confusable:
            kinds += ["confusable", "confusable"]
        if self.split and "split runs" in self.avoid:
            kinds.remove("rejected")  # the post must stay a whole snapshot
        if open_runs:
            kinds[:0] = ["continue", "continue"]
        kind = data.draw(st.sampled_from(kinds), label="kind")
        if kind == "rejected":
            self.whole = False
            why = data.draw(st.sampled_from(["invalid", "foreign", "too long"]), label="rejected")
            if why == "invalid":
                return Event("invalid", time=self._tick())
            if why == "too long":  # an output named one character over limits.maxNameLength
                ns = data.draw(st.sampled_from(members(spec)), label="namespace")
                return Event(
                    "job", ns, "load", outputs=(Dataset(BUCKET, TOO_LONG),), time=self._tick()
                )
            ns = data.draw(st.sampled_from(foreign(spec)), label="foreign namespace")
            return self._run_event(data, ns, data.draw(st.sampled_from(jobs_of(ns))), terminal=True)
        if kind == "dataset":
            return Event("dataset", dataset=self._dataset(data, lifecycle=True), time=self._tick())
        if kind == "confusable":
            # owners a string format would confuse write one same flow (one row, were they
            # confused), described by a JobEvent or a run seen through its COMPLETE
            ns, name = data.draw(st.sampled_from(confusable), label="confusable job")
            partners = [j for j in confusable if j[0] == ns and j != (ns, name)] or [
                j for j in confusable if j != (ns, name)
            ]
            if partners and data.draw(st.booleans(), label="with its look-alike"):
                self.partners.append(self._confusable(data, *partners[0]))
            return self._confusable(data, ns, name)
        admitted = members(spec)
        # look-alike namespaces of one definition (a case apart, ``_`` for a letter, ``|``
        # inside) come often: a cutoff over one must never reach the other
        weighted = [*admitted, *(ns for ns in admitted if ns in LOOK_ALIKE)]
        ns = data.draw(st.sampled_from(weighted), label="namespace")
        name = data.draw(st.sampled_from(jobs_of(ns)), label="job")
        if kind == "job":
            return Event(
                "job",
                ns,
                name,
                inputs=self._datasets(data, job=(ns, name)),
                outputs=self._datasets(data, lifecycle=True, job=(ns, name), output=True),
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
            data.draw(st.sampled_from([None, *parents_of(ns, admitted)]), label="parent"),
        )
        self.runs[spec.name].append(run)
        return self._next_event(data, run, self.runs[spec.name])

    def _confusable(self, data: st.DataObject, ns: str, name: str) -> Event:
        a, b = Dataset(WAREHOUSE, "shop.public.a"), Dataset(WAREHOUSE, "shop.public.b")
        if data.draw(st.booleans(), label="job event"):
            return Event("job", ns, name, inputs=(a,), outputs=(b,), time=self._tick())
        return Event(
            "run",
            ns,
            name,
            run_id=self._run_id(),
            event_type="COMPLETE",
            inputs=(a,),
            outputs=(b,),
            time=self._tick(),
        )

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
            inputs=self._datasets(data, job=run.job),
            outputs=self._datasets(data, job=run.job, output=True),
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
            inputs=self._datasets(data, job=(ns, name)),
            outputs=self._datasets(data, lifecycle=lifecycle, job=(ns, name), output=True),
            parent=data.draw(st.sampled_from([None, *parents_of(ns, ())]), label="parent"),
            time=self._tick(),
        )

    def _datasets(
        self,
        data: st.DataObject,
        *,
        lifecycle: bool = False,
        job: tuple[str, str] | None = None,
        output: bool = False,
    ) -> tuple[Dataset, ...]:
        picked = data.draw(
            st.lists(st.sampled_from(DATASETS), max_size=2, unique=True), label="datasets"
        )
        if data.draw(st.integers(0, 15), label="a rare dataset") == 15:
            picked = [*picked, data.draw(st.sampled_from(RARE_DATASETS), label="rare dataset")]
        return tuple(self._dataset(data, lifecycle=lifecycle, at=p) for p in picked)

    def _first_rename(self, ns: str, previous: str) -> bool:
        """Whether a RENAME of ``previous`` may be drawn (see "renamed twice" in ``SHAPES``)."""
        if "renamed twice" not in self.avoid:
            return True
        key = (self.spec, ns, previous)
        first = key not in self.renamed
        self.renamed.add(key)
        return first

    def _dataset(
        self, data: st.DataObject, *, lifecycle: bool, at: tuple[str, str] | None = None
    ) -> Dataset:
        ns, name = at or data.draw(st.sampled_from(DATASETS), label="dataset")
        if not lifecycle:
            return Dataset(ns, name)
        change = data.draw(st.sampled_from([None, "DROP", "RENAME"]), label="lifecycle")
        if change == "RENAME":  # to a name of its own (``a`` -> ``a.v2``), or to a known one
            if data.draw(st.booleans(), label="to a new name"):
                if len(name) + 3 > MAX_NAME_LENGTH or not self._first_rename(ns, name):
                    return Dataset(ns, name)  # its new name would be too long, or a second one
                return Dataset(ns, f"{name}.v2", "RENAME", name)
            previous = data.draw(st.sampled_from(NAMES_IN[ns]), label="previous name")
            if previous == name or not self._first_rename(ns, previous):
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
    if e.tasks is not None:  # the Airflow provider's DAG run START
        job.setdefault("facets", {})["airflow"] = _facet(
            "AirflowJobFacet", taskTree={}, taskGroups={}, tasks={t: {} for t in e.tasks}
        )
        dag_run = {"dag_id": e.name, "run_id": e.dag_run}
        if e.run_type is not None:
            dag_run["run_type"] = e.run_type
        run["facets"] = {"airflowDagRun": _facet("AirflowDagRunFacet", dag={}, dagRun=dag_run)}
    if e.parent is not None:
        parent_run = uuid.uuid5(RUN_NAMESPACE, f"parent-{e.parent[0]}.{e.parent[1]}")
        run.setdefault("facets", {})["parent"] = _facet(
            "ParentRunFacet",
            run={"runId": str(parent_run)},
            job={"namespace": e.parent[0], "name": e.parent[1]},
        )
    return {**body, "eventType": e.event_type, "schemaURL": f"{SPEC}#/$defs/RunEvent", "run": run}
