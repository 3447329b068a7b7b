"""Who else holds a Marquez dataset or flow, read from Marquez before the cleanup removes it.

The sync ledger says what this definition sent; it cannot say who else writes the same dataset.
Marquez can:

* a dataset's current version (``GET /api/v1/namespaces/{ns}/datasets/{name}``: ``currentVersion``)
  is the version the last stored COMPLETE of a run wrote (``OpenLineageService.buildJobOutput``
  makes each output version of the run current), or a DatasetEvent's. ``GET .../versions/{id}``
  names the run that made it, and the run its job (``createdByRun.jobVersion``: namespace and
  name, the name Marquez holds the job under). A version another job made is that job's: the
  dataset is **kept**, and the report says which job wrote it. A version made without a run (a
  DatasetEvent, or a dataset only ever read) names nobody: the dataset is kept when it changed
  after this definition last uploaded it (the version's ``createdAt``, or ``lastModifiedAt``,
  against the time recorded with the ledger entry);
* Marquez keeps column lineage by dataset versions, not by jobs: its column-lineage queries join
  datasets only (``ColumnLineageDao``: ``datasets_view``, no job), so the column lineage a job
  wrote stays visible after the job is hidden, and after its later versions stop writing it,
  until the output dataset itself is deleted. A flow whose target still shows column lineage
  from its source (the dataset's ``columnLineage``) is **kept** in the report, never counted as
  removed.

Upstream (MarquezProject/marquez @ a89b89cad27f87c90dd964c40dae8dfb3f64031f, under
``api/src/main/java/marquez/``): ``api/DatasetResource.java`` (``getDataset``, ``getVersion``),
``service/models/Dataset.java``, ``service/models/DatasetVersion.java``, ``service/models/Run.java``
(``getJobVersion``), ``service/OpenLineageService.java`` (``buildJobOutput``),
``db/DatasetVersionDao.java``, ``db/ColumnLineageDao.java`` (``getLineageRowsForDatasets``),
``service/ColumnLineageService.java`` (``enrichWithColumnLineage``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from ol_dagster.catalog.http import HttpCatalogClient
from ol_dagster.catalog.protocol import Removal, Removed

Job = tuple[str, str]  # (namespace, the name Marquez holds the job under)
WRITERS = "writtenBy"  # DATASET payload: this definition's jobs that wrote it, [[ns, name], ...]
UPLOADED = "uploadedAt"  # DATASET payload: when this definition last uploaded it (Marquez's clock)


def segment(value: str) -> str:
    """One path segment, percent-encoded whole (``/``, ``:`` and spaces included)."""
    return quote(value, safe="")


def dataset_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{segment(namespace)}/datasets/{segment(name)}"


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _dataset(http: HttpCatalogClient, namespace: str, name: str) -> dict[str, Any] | None:
    response = http.request("GET", dataset_path(namespace, name), ok=frozenset({404}))
    if response.status_code == 404:
        return None
    body = response.json()
    return body if isinstance(body, dict) else {}


def _version(http: HttpCatalogClient, namespace: str, name: str, version: str) -> dict[str, Any]:
    path = f"{dataset_path(namespace, name)}/versions/{segment(version)}"
    response = http.request("GET", path, ok=frozenset({404}))
    body = response.json() if response.status_code != 404 else None
    return body if isinstance(body, dict) else {}


def dataset_holder(
    http: HttpCatalogClient, payload: dict[str, Any], ours: set[Job]
) -> Removed | Removal | None:
    """None: nobody outside this definition wrote the dataset since its last upload (delete it);
    ``Removed`` (kept): who did; ``Removal.NOT_FOUND``: Marquez does not show it."""
    namespace, name = payload["namespace"], payload["name"]
    found = _dataset(http, namespace, name)
    if found is None:
        return Removal.NOT_FOUND
    what = f"dataset {namespace}:{name}"
    changed: list[datetime | None] = [_time(found.get("lastModifiedAt"))]
    current = found.get("currentVersion")
    if isinstance(current, str) and current:
        version = _version(http, namespace, name, current)
        run = version.get("createdByRun")
        job = run.get("jobVersion") if isinstance(run, dict) else None
        if isinstance(job, dict) and job.get("namespace") and job.get("name"):
            writer = (str(job["namespace"]), str(job["name"]))
            if writer in ours:
                return None
            run_id = run.get("id") if isinstance(run, dict) else None
            return Removed(
                Removal.KEPT,
                why=f"{what}: written by job {writer[0]}:{writer[1]}"
                + (f" (run {run_id})" if run_id else "")
                + ", which this definition does not describe",
            )
        changed.append(_time(version.get("createdAt")))
    uploaded = _time(payload.get(UPLOADED))
    later = sorted(t for t in changed if t is not None and uploaded is not None and t > uploaded)
    if later:
        return Removed(
            Removal.KEPT,
            why=f"{what}: changed at {later[-1].isoformat()}, after this definition's last upload "
            f"({uploaded.isoformat() if uploaded else '?'}), by a writer Marquez does not name",
        )
    return None


def flow_holder(http: HttpCatalogClient, payload: dict[str, Any]) -> Removed | None:
    """A kept ``Removed`` when Marquez still shows column lineage from the flow's source into its
    target (it keeps it after the job is hidden); None when it shows none."""
    src, dst = payload["from"], payload["to"]
    found = _dataset(http, dst["namespace"], dst["name"])
    for column in (found or {}).get("columnLineage") or []:
        if not isinstance(column, dict):
            continue
        for field in column.get("inputFields") or []:
            if not isinstance(field, dict):
                continue
            if (field.get("namespace"), field.get("dataset")) == (src["namespace"], src["name"]):
                return Removed(
                    Removal.KEPT,
                    why=f"flow {src['namespace']}:{src['name']} -> "
                    f"{dst['namespace']}:{dst['name']}: "
                    f"Marquez still shows its column lineage ({field.get('field')} -> "
                    f"{column.get('name')}); it keeps column lineage until a dataset is deleted",
                )
    return None
