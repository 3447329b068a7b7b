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
rest of its job is reused.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

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


def _dataset_run_facts(d: object, io_key: str) -> dict[str, Any] | None:
    if type(d) is not dict:
        return None
    kept: dict[str, Any] = {"namespace": d.get("namespace"), "name": d.get("name")}
    facets = _dict(d.get("facets"))
    if facets is not None and _QUALITY in facets:
        kept["facets"] = {_QUALITY: facets[_QUALITY]}
    if io_key in d:
        kept[io_key] = d[io_key]
    return kept


def run_skeleton(raw: bytes) -> bytes:
    """Less still than ``run_facts_only``: the datasets by name with their statistics and
    quality results only, for a batch whose every job and dataset is reused (their
    descriptions are taken whole from the last graph)."""
    event = orjson.loads(raw)
    kept: dict[str, Any] = {
        k: event[k] for k in ("eventType", "eventTime", "producer", "schemaURL") if k in event
    }
    job = _dict(event.get("job"))
    if job is not None:
        facets = _dict(job.get("facets")) or {}
        kept["job"] = {
            "namespace": job.get("namespace"),
            "name": job.get("name"),
            "facets": {k: v for k, v in facets.items() if k == "jobType"},
        }
    run = _dict(event.get("run"))
    if run is not None:
        facets = _dict(run.get("facets")) or {}
        kept["run"] = {
            "runId": run.get("runId"),
            "facets": {k: v for k, v in facets.items() if k == "parent"},
        }
    for side, io_key in (("inputs", "inputFacets"), ("outputs", "outputFacets")):
        datasets = event.get(side)
        if type(datasets) is list:
            kept[side] = [_dataset_run_facts(d, io_key) for d in datasets]
    return orjson.dumps(kept)
