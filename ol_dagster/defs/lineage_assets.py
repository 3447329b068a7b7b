"""Synced lineage in Dagster's asset graph: jobs and datasets other tools reported, as assets.

Dagster only draws lineage it runs itself. Engineers already look at the asset graph, so every job
and dataset a definition has synced appears there as an external ``AssetSpec``: a dataset depends
on the jobs that write it, a job on the datasets it reads; kinds from the job's integration and the
dataset's store; owners and descriptions from the facets; ``dagster/column_schema`` and
``dagster/column_lineage`` where the catalog has fields and field flows.

Open-source Dagster draws no ``dagster/column_lineage`` (only Dagster+ does), so each dataset with
field flows also gets ``openlineage/columnLineage``: a table on the asset's page (column, upstream
``dataset.column``, transformation, upstream asset key), cut at ``COLUMN_LINEAGE_MAX_ROWS`` rows
for wide tables, the last row saying how many are left out.

The asset graph labels a node with the last component of its key, cut in the middle past about
30 characters (Dagster's UI). So names are split into key components (on ``/`` when the name has
one, else on ``.``): the label is the table, file or task (``orders`` for
``[postgres_db_5432, shop, public, orders]``), the path in the asset catalog's folders.
``OpenLineageTranslator(split_names=False)`` keeps a whole name in one component
(``[postgres_db_5432, shop.public.orders]``, the keys before this became the default; no Dagster
event is recorded under these keys, so changing them loses no history).

The specs are built from the lineage state in the store (refreshed after each sync), never from the
catalog at load. ``OpenLineageTranslator`` maps a node to a spec, in the dagster-sling style:
subclass it to change keys, groups or metadata, and pass it to ``build_defs(translator=...)``. It
gets each node as a typed record (``JobNode``, ``DatasetNode``: ``defs.lineage_nodes``), read from
the state once.

A job's page also says how it last ran (status, time, duration, runs and failures in the batch that
last ran it): each sync keeps its jobs' last runs in a second store document beside the lineage
state (``job_runs_key``), read with it at load. An event per job would cost ~20 ms each on a
SQLite instance; the batch's runs are one table on ``catalog_upload`` instead.
"""

import hashlib
import re
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypedDict, cast

import dagster as dg

from ol_dagster.defs import names
from ol_dagster.defs.lineage_nodes import (
    ColumnInput,
    ColumnLineageRow,
    DatasetField,
    DatasetNode,
    JobNode,
)
from ol_dagster.lineage.naming import scheme_of
from ol_dagster.lineage_state import DatasetState, JobLastRun, JobState, LineageState

if TYPE_CHECKING:
    from ol_dagster.lineage import LineageGraph

__all__ = [
    "ColumnInput",
    "ColumnLineageRow",
    "DatasetField",
    "DatasetNode",
    "JobNode",
    "OpenLineageTranslator",
    "build_all_lineage_specs",
    "build_lineage_specs",
]

_SLUG = re.compile(r"[^A-Za-z0-9_.\-]+")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_STORE_KINDS = {
    "postgresql": "postgres",
    "s3a": "s3",
    "gs": "gcs",
    "abfss": "azure",
    "wasbs": "azure",
}


# Rows of the ``openlineage/columnLineage`` table per dataset: a wide table's hundreds of columns,
# each with several inputs, would make the page (and the code location's snapshot) heavy.
COLUMN_LINEAGE_MAX_ROWS = 200
_COLUMN_LINEAGE_SCHEMA = dg.TableSchema(
    columns=[
        dg.TableColumn("column", "string", description="a column of this dataset"),
        dg.TableColumn("upstream", "string", description="the dataset.column it comes from"),
        dg.TableColumn("transformation", "string", description="DIRECT/INDIRECT and subtype"),
        dg.TableColumn("upstream_asset", "string", description="the upstream dataset's asset"),
    ]
)


def _slug(text: str) -> str:
    return _SLUG.sub("_", text).strip("_") or "_"


def column_lineage_table(rows: Sequence[ColumnLineageRow]) -> dg.TableMetadataValue:
    """The ``openlineage/columnLineage`` table of a dataset's column lineage (``DatasetNode``'s
    ``column_lineage``): one line per column and upstream column, at most
    ``COLUMN_LINEAGE_MAX_ROWS``."""
    lines = [(row, i) for row in rows for i in row.inputs]
    records = [
        dg.TableRecord(
            {
                "column": row.field,
                "upstream": f"{i.name}.{i.field}",
                "transformation": i.transformation or "",
                "upstream_asset": i.asset,
            }
        )
        for row, i in lines[:COLUMN_LINEAGE_MAX_ROWS]
    ]
    if len(lines) > COLUMN_LINEAGE_MAX_ROWS:
        left = len(lines) - COLUMN_LINEAGE_MAX_ROWS
        note = f"{left:,} more not shown (of {len(lines):,})"
        records.append(
            dg.TableRecord(
                {"column": "…", "upstream": note, "transformation": "", "upstream_asset": ""}
            )
        )
    return dg.MetadataValue.table(records, schema=_COLUMN_LINEAGE_SCHEMA)


def _owners(names: Sequence[str]) -> list[str]:
    """Dagster takes e-mail addresses and ``team:`` names; other owner names stay in metadata."""
    out = []
    for name in names:
        if _EMAIL.match(name):
            out.append(name)
        elif name.startswith("team:") and len(name) > 5:
            out.append("team:" + _slug(name[5:]))
    return out


class OpenLineageTranslator:
    """Maps a synced job or dataset (``JobNode``, ``DatasetNode``) to an ``AssetSpec``.

    The key is ``[namespace, *parts of the name]`` (readable labels); ``split_names=False``
    makes it ``[namespace, name]`` (see the module docstring)."""

    def __init__(self, *, split_names: bool = True) -> None:
        self.split_names = split_names

    def get_group_name(self, definition: str) -> str:
        return f"{definition}_lineage"

    def _name_path(self, name: str) -> list[str]:
        if not self.split_names:
            return [_slug(name)]
        parts = name.split("/") if "/" in name else name.split(".")
        return [_slug(p) for p in parts if _SLUG.sub("", p)] or [_slug(name)]

    def get_dataset_key(self, namespace: str, name: str) -> dg.AssetKey:
        return dg.AssetKey([_slug(namespace), *self._name_path(name)])

    def get_job_key(self, namespace: str, name: str) -> dg.AssetKey:
        return dg.AssetKey([_slug(namespace), *self._name_path(name)])

    def get_dataset_kinds(self, dataset: DatasetNode) -> set[str]:
        scheme = scheme_of(dataset.namespace)
        return {_STORE_KINDS.get(scheme, scheme)} if scheme.isidentifier() else set()

    def get_job_kinds(self, job: JobNode) -> set[str]:
        integration = (job.integration or "").lower()
        return {integration} if integration else {"openlineage"}

    def get_dataset_spec(
        self,
        dataset: DatasetNode,
        *,
        key: dg.AssetKey,
        deps: list[dg.AssetKey],
        group: str,
        column_lineage: dg.TableColumnLineage | None,
    ) -> dg.AssetSpec:
        metadata: dict[str, Any] = {
            "openlineage/namespace": dataset.namespace,
            "openlineage/name": dataset.name,
            "catalog/system": dataset.system or "",
            "catalog/type": dataset.type or "",
        }
        if dataset.fields:
            metadata["dagster/column_schema"] = dg.TableSchema(
                columns=[
                    dg.TableColumn(name=f.name, type=f.type or "unknown", description=f.description)
                    for f in dataset.fields
                ]
            )
        if column_lineage is not None:
            metadata["dagster/column_lineage"] = column_lineage
        if dataset.column_lineage:
            metadata["openlineage/columnLineage"] = column_lineage_table(dataset.column_lineage)
        if dataset.owners:
            metadata["openlineage/owners"] = ", ".join(dataset.owners)
        return dg.AssetSpec(
            key=key,
            deps=deps,
            description=dataset.description or f"{dataset.namespace} {dataset.name}",
            group_name=group,
            kinds=self.get_dataset_kinds(dataset),
            owners=_owners(dataset.owners),
            metadata=metadata,
        )

    def get_job_spec(
        self, job: JobNode, *, key: dg.AssetKey, deps: list[dg.AssetKey], group: str
    ) -> dg.AssetSpec:
        metadata: dict[str, Any] = {
            "openlineage/namespace": job.namespace,
            "openlineage/name": job.name,
            "openlineage/jobType": job.job_type or "",
        }
        if job.owners:
            metadata["openlineage/owners"] = ", ".join(job.owners)
        metadata.update(last_run_metadata(job.last_run))
        return dg.AssetSpec(
            key=key,
            deps=deps,
            description=job.description or f"OpenLineage job {job.namespace} {job.name}",
            group_name=group,
            kinds=self.get_job_kinds(job),
            owners=_owners(job.owners),
            metadata=metadata,
        )


class _Keys:
    """Keys for every node, made unique when two nodes would slug to the same key."""

    def __init__(self, translator: OpenLineageTranslator) -> None:
        self.translator = translator
        self.by_node: dict[tuple[str, str, str], dg.AssetKey] = {}
        self.taken: set[dg.AssetKey] = set()

    def key(self, kind: str, namespace: str, name: str) -> dg.AssetKey:
        node = (kind, namespace, name)
        if node not in self.by_node:
            t = self.translator
            key = (t.get_job_key if kind == "job" else t.get_dataset_key)(namespace, name)
            if key in self.taken:
                digest = hashlib.sha1("|".join(node).encode()).hexdigest()[:8]
                key = dg.AssetKey([*key.path[:-1], f"{key.path[-1]}_{digest}"])
            self.taken.add(key)
            self.by_node[node] = key
        return self.by_node[node]


def build_lineage_specs(
    definition: str, state: LineageState, translator: OpenLineageTranslator
) -> list[dg.AssetSpec]:
    """The specs of one definition's synced lineage."""
    return build_all_lineage_specs({definition: state}, translator)


def build_all_lineage_specs(
    states: Mapping[str, LineageState], translator: OpenLineageTranslator
) -> list[dg.AssetSpec]:
    """The specs of every definition's synced lineage at once. A dataset several definitions
    touch (one writes it, another reads it) is one asset: an asset key has one spec. It joins the
    group of a definition that writes it, else of the first that reads it; a job the same way."""
    keys = _Keys(translator)
    jobs: dict[tuple[str, str], tuple[str, JobNode]] = {}
    datasets: dict[tuple[str, str], DatasetState] = {}
    dataset_group: dict[tuple[str, str], str] = {}
    writers: dict[tuple[str, str], set[dg.AssetKey]] = {}
    # per dataset and column, its inputs: (namespace, name, field, transformation) -> key
    lineage: dict[tuple[str, str], dict[str, dict[tuple[str, ...], dg.AssetKey]]] = {}
    for definition, state in states.items():
        group = translator.get_group_name(definition)
        for job in state.get("jobs", []):
            node = (job["namespace"], job["name"])
            if node not in jobs:
                jobs[node] = (group, JobNode.from_state(job))
            job_key = keys.key("job", *node)
            for ns, name in job.get("outputs", []):
                writers.setdefault((ns, name), set()).add(job_key)
                dataset_group.setdefault((ns, name), group)
        for ds in state.get("datasets", []):
            node = (ds["namespace"], ds["name"])
            known = datasets.get(node)
            if known is None or (not known.get("fields") and ds.get("fields")):
                datasets[node] = ds  # the richest description wins
        for cl in state.get("columnLineage", []):
            # an input is [namespace, name, field], and its transformation when the catalog has it
            lineage.setdefault((cl["dataset"][0], cl["dataset"][1]), {})[cl["field"]] = {
                (ns, name, field, *rest[:1]): keys.key("dataset", ns, name)
                for ns, name, field, *rest in cl["inputs"]
            }
    for definition, state in states.items():  # after every writer is known: readers last
        for ds in state.get("datasets", []):
            dataset_group.setdefault(
                (ds["namespace"], ds["name"]), translator.get_group_name(definition)
            )
    specs: list[dg.AssetSpec] = [
        spec
        for definition, state in states.items()
        if (spec := not_shown_spec(definition, state, translator.get_group_name(definition)))
    ]
    for node, (group, job) in jobs.items():
        specs.append(
            translator.get_job_spec(
                job,
                key=keys.key("job", *node),
                deps=sorted(
                    {keys.key("dataset", ns, name) for ns, name in job.inputs},
                    key=lambda k: tuple(k.path),
                ),
                group=group,
            )
        )
    for node, ds in datasets.items():
        cl = lineage.get(node)
        specs.append(
            translator.get_dataset_spec(
                DatasetNode.from_state(ds, _column_lineage_rows(cl) if cl else ()),
                key=keys.key("dataset", *node),
                deps=sorted(writers.get(node, set()), key=lambda k: tuple(k.path)),
                group=dataset_group[node],
                column_lineage=_column_deps(cl) if cl else None,
            )
        )
    return specs


def _column_deps(
    by_column: dict[str, dict[tuple[str, ...], dg.AssetKey]],
) -> dg.TableColumnLineage:
    """``dagster/column_lineage``: per column its upstream columns, once each (two jobs may
    write the same column from the same input with different transformations)."""
    return dg.TableColumnLineage(
        deps_by_column={
            column: [
                dg.TableColumnDep(asset_key=key, column_name=field)
                for key, field in dict.fromkeys((k, i[2]) for i, k in inputs.items())
            ]
            for column, inputs in by_column.items()
        }
    )


def _column_lineage_rows(
    by_column: dict[str, dict[tuple[str, ...], dg.AssetKey]],
) -> tuple[ColumnLineageRow, ...]:
    """A dataset's column lineage for ``get_dataset_spec`` (``DatasetNode.column_lineage``): per
    column, its inputs with their asset key, as the table on the asset's page shows them."""
    return tuple(
        ColumnLineageRow(
            column,
            tuple(
                ColumnInput(
                    namespace=i[0],
                    name=i[1],
                    field=i[2],
                    asset=key.to_user_string(),
                    transformation=i[3] if len(i) > 3 else None,
                )
                for i, key in inputs.items()
            ),
        )
        for column, inputs in by_column.items()
    )


def job_asset_key(translator: OpenLineageTranslator, namespace: str, name: str) -> dg.AssetKey:
    """The key a job's observations are recorded on (collisions aside, as in the specs)."""
    return translator.get_job_key(namespace, name)


# -- the synced jobs' last runs -------------------------------------------------------------------

JOB_RUNS_VERSION = 1


class JobRunRow(TypedDict):
    """A job the batch ran (``batch_job_runs``): a row of ``catalog_upload``'s ``jobRuns`` table,
    and, less its names, the job's last run (``JobLastRun``)."""

    namespace: str
    name: str
    asset: str
    lastRunStatus: str
    lastRunTime: str | None
    lastRunDurationSeconds: float | None
    runs: int
    failures: int
    rowsWritten: int
    bytesWritten: int


class JobRunsDoc(TypedDict):
    """The store document of a definition's jobs' last runs (``job_runs_key``)."""

    version: int
    jobs: dict[str, dict[str, JobLastRun]]  # namespace -> name -> last run


def job_runs_key(definition: str) -> str:
    """The store document holding a definition's jobs' last runs. Sync definition names are Dagster
    names (letters, digits, ``_``), so no definition's own lineage state can take this key."""
    return f"{definition}/jobRuns"


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC).isoformat()


def batch_job_runs(graph: "LineageGraph", translator: OpenLineageTranslator) -> list[JobRunRow]:
    """Each job the batch ran, with its run metrics of the batch (as the catalog got them): the
    rows of ``catalog_upload``'s ``jobRuns`` table and of the jobs' last runs."""
    rows: list[JobRunRow] = []
    for job in graph.jobs.values():
        m = job.metrics
        if not m.runs:
            continue
        rows.append(
            {
                "namespace": job.namespace,
                "name": job.name,
                "asset": job_asset_key(translator, job.namespace, job.name).to_user_string(),
                "lastRunStatus": m.last_status or "",
                "lastRunTime": _iso(m.last_run),
                "lastRunDurationSeconds": m.last_duration_seconds,
                "runs": m.runs,
                "failures": m.failures,
                "rowsWritten": m.rows_written,
                "bytesWritten": m.bytes_written,
            }
        )
    return rows


def stored_job_runs(doc: dict[str, Any] | None) -> JobRunsDoc | None:
    """The job-runs document as the store gives it back (JSON it does not check), or None when
    there is none of this version."""
    return cast(JobRunsDoc, doc) if doc and doc.get("version") == JOB_RUNS_VERSION else None


def merge_job_runs(
    doc: dict[str, Any] | None, runs: Sequence[JobRunRow], batch_id: int
) -> JobRunsDoc:
    """``doc`` (the job-runs document, or None) with the batch's runs: per job, the batch whose
    last run is the latest wins (a batch retried after a newer one does not take a job back)."""
    merged = stored_job_runs(doc) or {"version": JOB_RUNS_VERSION, "jobs": {}}
    jobs = merged["jobs"]
    for run in runs:
        by_name = jobs.setdefault(run["namespace"], {})
        known = by_name.get(run["name"])
        # ISO 8601 in UTC, one format: comparing the strings compares the times
        if known and (known.get("lastRunTime") or "") > (run["lastRunTime"] or ""):
            continue
        by_name[run["name"]] = {
            "lastRunStatus": run["lastRunStatus"],
            "lastRunTime": run["lastRunTime"],
            "lastRunDurationSeconds": run["lastRunDurationSeconds"],
            "runs": run["runs"],
            "failures": run["failures"],
            "rowsWritten": run["rowsWritten"],
            "bytesWritten": run["bytesWritten"],
            "batchId": batch_id,
        }
    return merged


def prune_job_runs(
    doc: dict[str, Any] | None, held: Collection[tuple[str, str]] | None
) -> JobRunsDoc | None:
    """``doc`` without the jobs the lineage state no longer holds (``held``: removed by a
    cleanup), or None when it holds none of those. A state that leaves jobs out
    (``assetGraph.maxJobs``: ``held`` None) cannot tell a removed job from one not shown: the
    document is kept whole (it holds no more jobs than the definition ever synced)."""
    if not doc or not doc.get("jobs") or held is None:
        return None
    pruned = cast(JobRunsDoc, doc)
    jobs = pruned["jobs"]
    gone = [(ns, name) for ns, names in jobs.items() for name in names if (ns, name) not in held]
    if not gone:
        return None
    for ns, name in gone:
        del jobs[ns][name]
        if not jobs[ns]:
            del jobs[ns]
    return pruned


def with_job_runs(state: LineageState, doc: dict[str, Any] | None) -> LineageState:
    """The lineage state with each job's last run (``lastRun``), for ``get_job_spec``."""
    runs = stored_job_runs(doc)
    jobs = runs["jobs"] if runs else None
    if not jobs:
        return state
    for job in state.get("jobs", []):
        run = jobs.get(job["namespace"], {}).get(job["name"])
        if run is not None:
            job["lastRun"] = run
    return state


def newest_jobs(state: LineageState, max_jobs: int) -> LineageState:
    """The lineage state with at most ``max_jobs`` jobs, newest first by their last run (jobs that
    never reported one last, then by namespace and name), the datasets those jobs read and write,
    and the field flows between them. The count left out is ``jobsNotShown``."""
    jobs = state.get("jobs", [])
    if len(jobs) <= max_jobs:
        return state

    def last_run(job: JobState) -> str:
        run = job.get("lastRun")
        return (run.get("lastRunTime") if run else None) or ""

    by_name = sorted(jobs, key=lambda j: (j["namespace"], j["name"]))
    kept = sorted(by_name, key=last_run, reverse=True)[:max_jobs]  # stable: ties by name
    touched = {tuple(d) for j in kept for d in (*j.get("inputs", []), *j.get("outputs", []))}
    return {
        **state,
        "jobs": kept,
        "datasets": [
            d for d in state.get("datasets", []) if (d["namespace"], d["name"]) in touched
        ],
        "columnLineage": [
            {**cl, "inputs": [i for i in cl["inputs"] if (i[0], i[1]) in touched]}
            for cl in state.get("columnLineage", [])
            if tuple(cl["dataset"]) in touched
        ],
        "jobsNotShown": int(state.get("jobsNotShown") or 0) + len(jobs) - len(kept),
    }


def not_shown_spec(definition: str, state: LineageState, group: str) -> dg.AssetSpec | None:
    """One asset in a capped definition's lineage group that says so where engineers look."""
    hidden = int(state.get("jobsNotShown") or 0)
    if not hidden:
        return None
    shown = len(state.get("jobs", []))
    return dg.AssetSpec(
        key=names.asset_key(definition, names.LINEAGE_JOBS_NOT_SHOWN),
        description=(
            f"{hidden:,} older jobs of {definition} are not shown in this asset graph "
            f"(assetGraph.maxJobs is {shown:,}; the newest by last run are shown). They are in "
            f"the catalog: `ol-dagster lineage --definition {definition}` lists every job."
        ),
        group_name=group,
        kinds={"openlineage"},
        metadata={"openlineage/jobsShown": shown, "openlineage/jobsNotShown": hidden},
    )


def last_run_metadata(run: JobLastRun | None) -> dict[str, Any]:
    """A job spec's metadata from its last run; the counts are those of the batch that ran it.
    (A document of an older version may lack keys: each has its default.)"""
    if not run:
        return {}
    out: dict[str, Any] = {"openlineage/lastRunStatus": run.get("lastRunStatus") or ""}
    when = run.get("lastRunTime")
    if when:
        out["openlineage/lastRunTime"] = dg.MetadataValue.timestamp(datetime.fromisoformat(when))
    duration = run.get("lastRunDurationSeconds")
    if duration is not None:
        out["openlineage/lastRunDurationSeconds"] = float(duration)
    counts = {
        "runs": run.get("runs"),
        "failures": run.get("failures"),
        "rowsWritten": run.get("rowsWritten"),
        "bytesWritten": run.get("bytesWritten"),
    }
    for name, n in counts.items():
        out[f"openlineage/{name}"] = int(n or 0)
    out["openlineage/lastBatchId"] = str(run.get("batchId", ""))
    return out
