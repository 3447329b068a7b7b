"""The synced jobs and datasets as ``OpenLineageTranslator`` gets them: typed, read-only records.

The lineage state is JSON (``lineage_state``); a translator subclass should not have to know its
keys, nor which of them a state stored by an older version lacks. So each node is read from the
state once, here, into a frozen dataclass (as dagster-airbyte hands its translator an
``AirbyteConnectionTableProps``), and ``defs.lineage_assets`` maps those to ``AssetSpec`` s.
"""

from __future__ import annotations

from dataclasses import dataclass

from ol_dagster.lineage_state import DatasetState, JobLastRun, JobState


@dataclass(frozen=True, slots=True)
class DatasetField:
    """A column (field) of a dataset, as the catalog has it."""

    name: str
    type: str | None = None
    description: str | None = None


@dataclass(frozen=True, slots=True)
class ColumnInput:
    """An upstream column of a dataset's column, with the asset that holds it."""

    namespace: str
    name: str
    field: str
    asset: str  # the upstream dataset's asset key, as a user string ("pg/shop/orders")
    transformation: str | None = None  # "DIRECT/IDENTITY"..., when the catalog has it


@dataclass(frozen=True, slots=True)
class ColumnLineageRow:
    """A column of a dataset and the upstream columns it comes from."""

    field: str
    inputs: tuple[ColumnInput, ...]


@dataclass(frozen=True, slots=True)
class JobNode:
    """A synced job: what ``get_job_kinds`` and ``get_job_spec`` are given."""

    namespace: str
    name: str
    description: str | None = None
    integration: str | None = None  # "DBT", "SPARK", "AIRFLOW"... (the jobType facet)
    job_type: str | None = None  # "MODEL", "QUERY", "TASK"...
    owners: tuple[str, ...] = ()
    inputs: tuple[tuple[str, str], ...] = ()  # (namespace, name) of the datasets it reads
    outputs: tuple[tuple[str, str], ...] = ()  # ... and writes
    last_run: JobLastRun | None = None  # from the batch that last ran it

    @classmethod
    def from_state(cls, job: JobState) -> JobNode:
        return cls(
            namespace=job["namespace"],
            name=job["name"],
            description=job.get("description"),
            integration=job.get("integration"),
            job_type=job.get("jobType"),
            owners=tuple(job.get("owners") or ()),
            inputs=tuple((ns, name) for ns, name in job.get("inputs") or ()),
            outputs=tuple((ns, name) for ns, name in job.get("outputs") or ()),
            last_run=job.get("lastRun"),
        )


@dataclass(frozen=True, slots=True)
class DatasetNode:
    """A synced dataset: what ``get_dataset_kinds`` and ``get_dataset_spec`` are given."""

    namespace: str
    name: str
    type: str | None = None  # the catalog's type ("table", "file", "topic"...)
    system: str | None = None  # the catalog System that files it
    description: str | None = None
    owners: tuple[str, ...] = ()
    fields: tuple[DatasetField, ...] = ()
    column_lineage: tuple[ColumnLineageRow, ...] = ()  # per column, its upstream columns

    @classmethod
    def from_state(
        cls, dataset: DatasetState, column_lineage: tuple[ColumnLineageRow, ...] = ()
    ) -> DatasetNode:
        return cls(
            namespace=dataset["namespace"],
            name=dataset["name"],
            type=dataset.get("type"),
            system=dataset.get("system"),
            description=dataset.get("description"),
            owners=tuple(dataset.get("owners") or ()),
            fields=tuple(
                DatasetField(f["name"], f.get("type"), f.get("description"))
                for f in dataset.get("fields") or ()
            ),
            column_lineage=column_lineage,
        )
