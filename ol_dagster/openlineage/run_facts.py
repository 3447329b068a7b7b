"""What of an event is lineage and what is a fact of one run: the content digest, and the run facts.

A nightly snapshot sends the same jobs with the same SQL, columns and inputs, under new run ids,
new event times and new statistics. The event's *content digest* names what it says about the
lineage only, so a job whose events all have the digests they had in the last synced batch is
known unchanged without normalizing it again (``lineage.reuse``). Run facts are left out of it:

- ``eventTime``, ``eventType`` and ``run.runId``: when and how a run went;
- ``run.facets``, all of them but the parent's job and root job (``parent``: the orchestration
  flow is lineage; its run ids are not): nominal time, error messages, processing engine and any
  producer's own run facets describe the run;
- ``inputFacets`` / ``outputFacets`` of every dataset (``inputStatistics``, ``outputStatistics``,
  ``dataQualityMetrics``, ``dataQualityAssertions``): row counts, bytes and quality results;
- ``dataQualityAssertions`` given as a dataset facet: quality results all the same.

Everything else (the job's facets: SQL, documentation, owners, source code location, job type;
the datasets' names and facets: schema, column lineage, symlinks, documentation, owners, type,
lifecycle changes; the producer) is content: any change to it changes the digest. An event whose
column lineage names dataset-level lineage (``columnLineage.dataset``) gets no digest: its field
flows follow the output's fields as other jobs describe them, so it is normalized every time.

``run_facts_only`` is the other half: the event with its lineage content taken out (the job's
facets but its type, column lineage, run facets but the parent), what normalizing needs to
count the run (metrics, last run, quality results, the flows between its datasets) when the
rest of its job is reused. ``run_facts_event`` reads less still, for a batch whose every job is
reused (``lineage.reuse.build_whole``): the typed event with its datasets' quality results,
statistics and symlinks only, decoded in one pass.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec
import orjson
from msgspec import UNSET, Struct, UnsetType, field

from ol_dagster.openlineage.envelope import EventRejected, parse_event_time
from ol_dagster.openlineage.facets import (
    DataQualityAssertionsFacet,
    InputFacets,
    JobTypeJobFacet,
    OutputFacets,
    ParentRunFacet,
    SymlinksDatasetFacet,
    _FacetMap,
    register_facet_map,
)
from ol_dagster.openlineage.structs import EventType, RunEvent

_RUN_FACTS = ("eventTime", "eventType")
_IO_FACETS = ("inputFacets", "outputFacets")
_QUALITY = "dataQualityAssertions"


def _dict(value: object) -> dict[str, Any] | None:
    return value if type(value) is dict else None


def _parent_job(parent: dict[str, Any]) -> dict[str, Any]:
    """The parent facet without its run ids: the parent job and its root job."""
    kept: dict[str, Any] = {"job": parent.get("job")}
    root = _dict(parent.get("root"))
    if root is not None:
        kept["root"] = root.get("job")
    return kept


def _datasets_content(datasets: object) -> bool:
    """Strip the run facts of each dataset in place; False when one names dataset-level column
    lineage (never reused)."""
    if type(datasets) is not list:
        return True
    for d in datasets:
        d = _dict(d)
        if d is None:
            continue
        for key in _IO_FACETS:
            d.pop(key, None)
        facets = _dict(d.get("facets"))
        if facets is None:
            continue
        facets.pop(_QUALITY, None)
        lineage = _dict(facets.get("columnLineage"))
        if lineage is not None and lineage.get("dataset"):
            return False
    return True


def content_digest(raw: bytes) -> bytes | None:
    """The digest of what the event says about the lineage (``ol_events.content``), or None
    when it has none that may be trusted (not an object, or dataset-level column lineage):
    such an event is normalized every time."""
    try:
        event = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(event) is not dict:
        return None
    for key in _RUN_FACTS:
        event.pop(key, None)
    run = _dict(event.get("run"))
    if run is not None:
        run.pop("runId", None)
        facets = _dict(run.pop("facets", None))
        parent = _dict(facets.get("parent")) if facets is not None else None
        if parent is not None:
            run["parent"] = _parent_job(parent)
    for side in ("inputs", "outputs"):
        if not _datasets_content(event.get(side)):
            return None
    dataset = _dict(event.get("dataset"))  # a DatasetEvent
    if dataset is not None and not _datasets_content([dataset]):
        return None
    return hashlib.sha256(orjson.dumps(event)).digest()[:16]


def run_facts_only(raw: bytes) -> bytes:
    """The event without its job's content (its facets but ``jobType``), its outputs' column
    lineage and its run facets but ``parent``: still a valid event, which normalizes to the
    run's metrics, last run, quality results and the flows between its datasets, with the
    datasets as it describes them."""
    event = orjson.loads(raw)
    job = _dict(event.get("job"))
    if job is not None:
        facets = _dict(job.get("facets"))
        if facets is not None:
            job["facets"] = {k: v for k, v in facets.items() if k == "jobType"}
    run = _dict(event.get("run"))
    if run is not None:
        facets = _dict(run.get("facets"))
        if facets is not None:
            run["facets"] = {k: v for k, v in facets.items() if k == "parent"}
    outputs = event.get("outputs")
    if type(outputs) is list:
        for d in outputs:
            facets = _dict(d.get("facets")) if type(d) is dict else None
            if facets is not None:
                facets.pop("columnLineage", None)
    return orjson.dumps(event)


# -- an event read for its run facts only --------------------------------------------------------
#
# The same typed facets normalizing reads (so the same defaults and the same rules apply to them),
# in narrower maps: msgspec passes over everything else (schemas, column lineage, SQL) in C.


class _RunFacts(_FacetMap, frozen=True):
    parent: ParentRunFacet | None = None


class _JobRunFacts(_FacetMap, frozen=True):
    jobType: JobTypeJobFacet | None = None


class _DatasetRunFacts(_FacetMap, frozen=True):
    symlinks: SymlinksDatasetFacet | None = None  # the keys a run's datasets go under
    dataQualityAssertions: DataQualityAssertionsFacet | None = None


for _cls in (_RunFacts, _JobRunFacts, _DatasetRunFacts):
    register_facet_map(_cls)


class _Run(Struct, frozen=True, kw_only=True, gc=False):
    runId: str
    facets: _RunFacts = field(default_factory=_RunFacts)


class _Job(Struct, frozen=True, kw_only=True, gc=False):
    namespace: str
    name: str
    facets: _JobRunFacts = field(default_factory=_JobRunFacts)


class _Input(Struct, frozen=True, kw_only=True, gc=False):
    namespace: str
    name: str
    facets: _DatasetRunFacts = field(default_factory=_DatasetRunFacts)
    inputFacets: InputFacets = field(default_factory=InputFacets)


class _Output(Struct, frozen=True, kw_only=True, gc=False):
    namespace: str
    name: str
    facets: _DatasetRunFacts = field(default_factory=_DatasetRunFacts)
    outputFacets: OutputFacets = field(default_factory=OutputFacets)


class _RunFactsEnvelope(Struct, frozen=True, kw_only=True, gc=False):
    eventTime: str
    producer: str
    schemaURL: str | None = None
    eventType: EventType | None = None
    run: _Run | UnsetType = UNSET
    job: _Job | UnsetType = UNSET
    dataset: Any = UNSET
    inputs: list[_Input] = []
    outputs: list[_Output] = []


_RUN_FACTS_DECODER = msgspec.json.Decoder(_RunFactsEnvelope)


def run_facts_event(raw: bytes | str) -> RunEvent | None:
    """A stored RunEvent with only what its run facts need (``run_facts_only``'s and less: the
    datasets by name with their quality results, statistics and symlinks), read in one pass; None
    when it is not that simply (another kind, a deletion marker on a facet read here): the caller
    then reads it whole. The event was validated when it was accepted."""
    try:
        env = _RUN_FACTS_DECODER.decode(raw)
        time = parse_event_time(env.eventTime)
    except (msgspec.DecodeError, EventRejected):
        return None
    if env.run is UNSET or env.job is UNSET or env.dataset is not UNSET:
        return None
    url = env.schemaURL
    if url is not None and "#" in url and not url.endswith("/RunEvent"):
        return None  # a kind it names other than its fields: read whole, as normalizing does
    return RunEvent(
        eventTime=time,
        producer=env.producer,
        schemaURL=url,
        eventType=env.eventType,
        run=env.run,  # type: ignore[arg-type]  (narrower facet maps, the same attributes)
        job=env.job,  # type: ignore[arg-type]
        inputs=env.inputs,  # type: ignore[arg-type]
        outputs=env.outputs,  # type: ignore[arg-type]
    )
