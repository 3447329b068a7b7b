"""The rows of the entities an upload writes: each job and dataset as the catalog holds it.

The upload's entities step upserts them (``upload``); kept apart from it because what a row holds is
one concern (the catalog's picture of a job or a dataset) and how the upload decides which rows to
write is another.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from ol_dagster.catalog.embedded.tables import JOB
from ol_dagster.lineage import LineageGraph
from ol_dagster.lineage.graph import NodeKey


def entity_rows(
    graph: LineageGraph,
    sys_ids: Mapping[str, int],
    job_sys: Mapping[NodeKey, str],
    skip_jobs: Collection[NodeKey],
    skip_ds: Collection[NodeKey],
    at: datetime,
    job_digest: Mapping[NodeKey, str],
    ds_digest: Mapping[NodeKey, str],
) -> tuple[list[NodeKey], list[NodeKey], list[dict[str, Any]]]:
    """The rows of the entities to upsert, with time ``at`` (all but ``skip_jobs`` and
    ``skip_ds``: clean ones, other owners' jobs): the jobs' keys, the datasets' keys, and the
    rows, jobs first."""
    rows: list[dict[str, Any]] = []
    job_keys: list[NodeKey] = []
    for key, j in graph.jobs.items():
        if key in skip_jobs:
            continue
        job_keys.append(key)
        rows.append(
            {
                "system_id": sys_ids[job_sys[key]],
                "schema": j.namespace,
                "name": j.name,
                "type": JOB,
                "ol_namespace": j.namespace,
                "ol_name": j.name,
                "description": j.description,
                "properties": {
                    "integration": j.integration,
                    "jobType": j.job_type,
                    "processingType": j.processing_type,
                    "owners": j.owners,
                    "sourceCodeLocation": j.source_code_location,
                },
                "last_update": at,
                "fields_update": None,
                "content_hash": job_digest.get(key),
            }
        )
    ds_keys: list[NodeKey] = []
    for key, d in graph.datasets.items():
        if key in skip_ds:
            continue
        ds_keys.append(key)
        rows.append(
            {
                "system_id": sys_ids[d.system],
                "schema": d.schema,
                "name": d.object_name,
                "type": d.type,
                "ol_namespace": d.namespace,
                "ol_name": d.name,
                "description": d.description,
                "properties": {"owners": d.owners},
                "last_update": at,
                "fields_update": at if d.has_schema else None,
                "content_hash": ds_digest.get(key),
            }
        )
    return job_keys, ds_keys, rows
