"""A sync definition: one producer's feed, the catalogs it fills, and the rules of its sync.

Each entry of the settings file's ``definitions:`` list. Its keys use the names of the product's
cleanup semantics (``snapshotMode``, ``allowedJobNamespaces``, ``maxRemovalsPerRun``...), and
every key has the safe default. The catalogs, the sync, the receiver and the ownership rules all
read a definition, so it sits below them, apart from the settings file as a whole
(``ol_dagster.settings``), which also knows every catalog kind.
"""

from __future__ import annotations

import re
import uuid
from enum import StrEnum
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from ol_dagster.lineage.inventories import READERS
from ol_dagster.namespaces import is_literal
from ol_dagster.openlineage.envelope import namespace_allowed
from ol_dagster.run_lineage_settings import RunLineageSettings
from ol_dagster.settings_base import EnvSecret, StrictModel

# Sync definition names become Dagster asset-key prefixes, group names and partition-set names.
DAGSTER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# the event store keeps definition names and catalog keys in columns of this many characters
MAX_KEY_LENGTH = 200


def _too_long(value: str) -> str | None:
    if len(value) <= MAX_KEY_LENGTH:
        return None
    return f"is {len(value)} characters long; at most {MAX_KEY_LENGTH} are allowed"


class SnapshotMode(StrEnum):
    BATCH_SNAPSHOT = "BATCH_SNAPSHOT"
    ADDITIVE = "ADDITIVE"


class LineageReplacement(StrEnum):
    NONE = "NONE"
    JOB = "JOB"


class CleanupMode(StrEnum):
    CUTOFF = "CUTOFF"
    DAYS = "DAYS"
    NONE = "NONE"


class JobSystemRule(StrictModel):
    namespaces: Annotated[str, Field(min_length=1)]
    system: Annotated[str, Field(min_length=1)]


class DatasetSystemRule(StrictModel):
    namespace: Annotated[str, Field(min_length=1)]
    system: Annotated[str, Field(min_length=1)]
    cleanupMode: CleanupMode = CleanupMode.NONE
    cleanupDays: Annotated[int, Field(ge=1)] = 30


class CleanupSettings(StrictModel):
    enabled: bool = True
    maxRemovalsPerRun: Annotated[int, Field(ge=0)] = 500
    staleJobDays: Annotated[int, Field(ge=1)] = 30
    # beyond the seed: a batch may not remove more than this share of the jobs the definition
    # holds (a partial "snapshot" is an accident to every user, whatever its absolute size)
    maxRemovalShare: Annotated[float, Field(ge=0, le=1)] = 0.5


class Limits(StrictModel):
    maxEventsPerRun: Annotated[int, Field(ge=1)] = 10_000
    batchWindowSeconds: Annotated[float, Field(ge=0)] = 60
    maxBodyBytes: Annotated[int, Field(ge=1024)] = 64 * 1024 * 1024
    maxEventsPerBatch: Annotated[int, Field(ge=1)] = 100_000
    # per namespace or name of a job or dataset: a catalog key, never a document
    maxNameLength: Annotated[int, Field(ge=1)] = 2048


class OutputOptions(StrictModel):
    dryRun: bool = False


class LogStoreSettings(StrictModel):
    """Egeria's file-based log store: every accepted event also kept as one JSON file."""

    folder: Annotated[str, Field(min_length=1)]


class ReceiverSettings(StrictModel):
    token: EnvSecret


class AssetGraphSettings(StrictModel):
    """How much of the synced lineage Dagster's asset graph shows. Every process that loads the code
    location (the code server at each reload, the webserver, the daemon) builds one asset per
    shown job and dataset, about 0.5 ms and 18 KB each: the newest ``maxJobs`` jobs by their last
    run are shown, with the datasets they read and write; ``ol-dagster lineage`` reads them all."""

    maxJobs: Annotated[int, Field(ge=0)] = 10_000


class Severity(StrEnum):
    WARN = "WARN"
    ERROR = "ERROR"


class ChangeSettings(StrictModel):
    """What a batch's lineage changes are held to: ``downstreamIntact`` is the severity of the
    check that fails when a batch takes away a dataset or column another job still reads."""

    downstreamIntact: Severity = Severity.WARN


class SyncDefinition(StrictModel):
    """One sync definition: a producer (or repository of producers) and the catalog it feeds."""

    name: str
    uuid: uuid.UUID
    # the catalog it feeds, or ``catalogs``: several, each with its own upload, cutoff, cleanup
    # and report (the first is the primary: the asset graph's lineage is read from it). Read
    # both through ``catalog_keys``.
    catalog: str | None = None
    catalogs: list[str] | None = None
    snapshotMode: SnapshotMode = SnapshotMode.ADDITIVE
    lineageReplacement: LineageReplacement = LineageReplacement.NONE
    allowedJobNamespaces: Annotated[
        list[Annotated[str, Field(min_length=1)]], Field(min_length=1)
    ] = ["*"]
    # namespaces this definition writes beside others on its catalogs: nobody runs a cutoff
    # over them (days only); every other namespace has one owner per catalog (``Settings``)
    sharedJobNamespaces: list[Annotated[str, Field(min_length=1)]] = []
    openLineageSystem: str | None = None
    jobSystems: list[JobSystemRule] = []
    datasetSystems: list[DatasetSystemRule] = []
    cleanup: CleanupSettings = CleanupSettings()
    limits: Limits = Limits()
    outputOptions: OutputOptions = OutputOptions()
    receiver: ReceiverSettings
    logStore: LogStoreSettings | None = None
    assetGraph: AssetGraphSettings = AssetGraphSettings()
    changes: ChangeSettings = ChangeSettings()
    openLineage: RunLineageSettings | None = None  # its own runs as OpenLineage events
    # producer inventories it trusts (``ol_dagster.lineage.inventories``): off by default
    inventories: list[str] = []

    @field_validator("name")
    @classmethod
    def _dagster_name(cls, value: str) -> str:
        if not DAGSTER_NAME.match(value):
            raise ValueError(
                "must start with a letter or '_' and hold only letters, digits and '_' "
                "(it becomes a Dagster asset-key prefix and group name)"
            )
        if problem := _too_long(value):
            raise ValueError(problem)
        return value

    @field_validator("inventories")
    @classmethod
    def _known_readers(cls, value: list[str]) -> list[str]:
        for i, name in enumerate(value):
            if name not in READERS:
                raise ValueError(
                    f"inventories.{i}: {name!r} is not an inventory reader "
                    f"(there are: {', '.join(sorted(READERS))})"
                )
            if name in value[:i]:
                raise ValueError(f"inventories.{i}: {name!r} is listed twice")
        return value

    @model_validator(mode="after")
    def _catalog_or_catalogs(self) -> SyncDefinition:
        if (self.catalog is None) == (self.catalogs is None):
            raise ValueError("give exactly one of 'catalog' (one key) and 'catalogs' (a list)")
        keys = self.catalogs or []
        if self.catalogs is not None and not keys:
            raise ValueError("catalogs: names no catalog (give at least one key)")
        for i, key in enumerate(keys):
            if not DAGSTER_NAME.match(key):
                raise ValueError(
                    f"catalogs.{i}: {key!r} must start with a letter or '_' and hold only "
                    "letters, digits and '_' (it becomes part of Dagster asset keys)"
                )
            if key in keys[:i]:
                raise ValueError(f"catalogs.{i}: {key!r} is listed twice")
        for where, key in (
            ("catalog", self.catalog),
            *((f"catalogs.{i}", k) for i, k in enumerate(keys)),
        ):
            if key is not None and (problem := _too_long(key)):
                raise ValueError(f"{where}: {problem}")
        return self

    @property
    def catalog_keys(self) -> tuple[str, ...]:
        """The catalogs this definition feeds, the primary first (``catalog`` or ``catalogs``)."""
        return (self.catalog,) if self.catalog is not None else tuple(self.catalogs or ())

    @property
    def namespace_patterns(self) -> tuple[str, ...]:
        """Every job namespace pattern this definition admits: its own, then the shared ones."""
        return (*self.allowedJobNamespaces, *self.sharedJobNamespaces)

    def is_shared(self, namespace: str) -> bool:
        """Whether other definitions may write this namespace too (a shared pattern admits it):
        then no cutoff runs over it, only the day-based cleanup."""
        return namespace_allowed(namespace, self.sharedJobNamespaces)

    @property
    def sole_namespace(self) -> bool:
        """The definition writes exactly one namespace, alone: one allowed pattern without a glob
        character, nothing shared. Only then may it keep CUTOFF on a dataset System."""
        return (
            len(self.allowedJobNamespaces) == 1
            and is_literal(self.allowedJobNamespaces[0])
            and not self.sharedJobNamespaces
        )

    @property
    def job_system(self) -> str:
        """The default job System: ``openLineageSystem``, or one derived from the name."""
        return self.openLineageSystem or f"{self.name}_jobs"
