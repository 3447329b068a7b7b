"""The standard OpenLineage facets ol-dagster reads, as pydantic models.

Only the facets that change what the catalog holds are modelled; every other facet (custom ones
included) is kept as it came. A standard facet of the wrong shape rejects its event, naming the
field: a schema without field names or an ownership without owner names would otherwise be
catalogued as something the producer did not say. Numbers and booleans are strict (``"12"`` is not
a row count). Facets lacking ``_producer``/``_schemaURL`` are accepted: older producers omit them
and the meaning is clear.

A facet carrying ``_deleted: true`` removes that facet (spec: job and dataset facets); it is
recorded in ``deleted`` of the facet map rather than validated against the facet's schema.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    StringConstraints,
    model_validator,
)

# An identity part (namespace, name, run id): a string with something in it besides blanks.
Name = Annotated[str, StringConstraints(strict=True, min_length=1, pattern=r"\S")]


class _Facet(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)

    producer: StrictStr | None = Field(None, alias="_producer")
    schemaURL: StrictStr | None = Field(None, alias="_schemaURL")


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


# -- run facets ----------------------------------------------------------------------------------


class RunRef(_Part):
    runId: Name


class JobRef(_Part):
    namespace: Name
    name: Name


class ParentRoot(_Part):
    run: RunRef
    job: JobRef


class ParentRunFacet(_Facet):
    run: RunRef
    job: JobRef
    root: ParentRoot | None = None


class NominalTimeRunFacet(_Facet):
    nominalStartTime: StrictStr
    nominalEndTime: StrictStr | None = None


class ErrorMessageRunFacet(_Facet):
    message: StrictStr
    programmingLanguage: StrictStr
    stackTrace: StrictStr | None = None


class ProcessingEngineRunFacet(_Facet):
    version: StrictStr
    name: StrictStr | None = None
    openlineageAdapterVersion: StrictStr | None = None


# -- job facets ----------------------------------------------------------------------------------


class EmissionPattern(_Part):
    eventTrigger: Literal["EVENT_BASED", "PERIODIC"] = "EVENT_BASED"
    eventContentMode: Literal["ACCUMULATIVE", "COMPLETE_SNAPSHOT"] = "ACCUMULATIVE"
    windowDuration: StrictInt | None = Field(None, ge=0)


class JobTypeJobFacet(_Facet):
    processingType: StrictStr
    integration: StrictStr
    jobType: StrictStr | None = None
    emissionPattern: EmissionPattern | None = None


class SQLJobFacet(_Facet):
    query: StrictStr
    dialect: StrictStr | None = None


class SourceCodeJobFacet(_Facet):
    language: StrictStr
    sourceCode: StrictStr


class SourceCodeLocationJobFacet(_Facet):
    type: StrictStr
    url: StrictStr
    repoUrl: StrictStr | None = None
    path: StrictStr | None = None
    version: StrictStr | None = None
    tag: StrictStr | None = None
    branch: StrictStr | None = None


class DocumentationFacet(_Facet):
    description: StrictStr
    contentType: StrictStr | None = None


class Owner(_Part):
    name: Name
    type: StrictStr | None = None


class OwnershipFacet(_Facet):
    owners: list[Owner] = []


# -- dataset facets ------------------------------------------------------------------------------


class SchemaField(_Part):
    name: Name
    type: StrictStr | None = None
    description: StrictStr | None = None
    ordinal_position: StrictInt | None = None
    fields: list[SchemaField] = []


class SchemaDatasetFacet(_Facet):
    fields: list[SchemaField] = []


class Transformation(_Part):
    type: StrictStr
    subtype: StrictStr | None = None
    description: StrictStr | None = None
    masking: StrictBool | None = None


class InputField(_Part):
    namespace: Name
    name: Name
    field: Name
    transformations: list[Transformation] = []


class ColumnLineageField(_Part):
    inputFields: list[InputField] = []
    transformationType: StrictStr | None = None
    transformationDescription: StrictStr | None = None


class ColumnLineageDatasetFacet(_Facet):
    fields: dict[str, ColumnLineageField] = {}
    dataset: list[InputField] = []


class SymlinkIdentifier(_Part):
    namespace: Name
    name: Name
    type: StrictStr | None = None


class SymlinksDatasetFacet(_Facet):
    identifiers: list[SymlinkIdentifier] = []


class PreviousIdentifier(_Part):
    namespace: Name
    name: Name


class LifecycleStateChangeDatasetFacet(_Facet):
    lifecycleStateChange: Literal["ALTER", "CREATE", "DROP", "OVERWRITE", "RENAME", "TRUNCATE"]
    previousIdentifier: PreviousIdentifier | None = None


class DatasourceDatasetFacet(_Facet):
    name: StrictStr | None = None
    uri: StrictStr | None = None


class DatasetTypeDatasetFacet(_Facet):
    datasetType: StrictStr
    subType: StrictStr | None = None


class Assertion(_Part):
    assertion: StrictStr
    success: StrictBool
    column: StrictStr | None = None
    severity: StrictStr | None = None
    name: StrictStr | None = None
    description: StrictStr | None = None


class DataQualityAssertionsFacet(_Facet):
    assertions: list[Assertion]


class DataQualityMetricsFacet(_Facet):
    columnMetrics: dict[str, Any]
    rowCount: StrictInt | None = None
    bytes: StrictInt | None = None
    fileCount: StrictInt | None = None


class StatisticsFacet(_Facet):
    rowCount: StrictInt | None = None
    size: StrictInt | None = None
    fileCount: StrictInt | None = None


# -- facet maps ----------------------------------------------------------------------------------


class _FacetMap(BaseModel):
    """A facet map: known facets typed, unknown ones kept as they are, ``_deleted`` collected."""

    model_config = ConfigDict(extra="allow", frozen=True)

    deleted: frozenset[str] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _collect_deleted(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        deleted = {k for k, v in data.items() if isinstance(v, dict) and v.get("_deleted") is True}
        if not deleted:
            return data
        kept = {k: v for k, v in data.items() if k not in deleted}
        kept["deleted"] = frozenset(deleted)
        return kept

    def custom(self) -> dict[str, Any]:
        """The facets this model does not type (custom and non-lineage standard facets)."""
        return dict(self.__pydantic_extra__ or {})


class RunFacets(_FacetMap):
    parent: ParentRunFacet | None = None
    nominalTime: NominalTimeRunFacet | None = None
    errorMessage: ErrorMessageRunFacet | None = None
    processing_engine: ProcessingEngineRunFacet | None = None


class JobFacets(_FacetMap):
    jobType: JobTypeJobFacet | None = None
    sql: SQLJobFacet | None = None
    sourceCode: SourceCodeJobFacet | None = None
    sourceCodeLocation: SourceCodeLocationJobFacet | None = None
    documentation: DocumentationFacet | None = None
    ownership: OwnershipFacet | None = None


class DatasetFacets(_FacetMap):
    schema_: SchemaDatasetFacet | None = Field(None, alias="schema")
    columnLineage: ColumnLineageDatasetFacet | None = None
    symlinks: SymlinksDatasetFacet | None = None
    lifecycleStateChange: LifecycleStateChangeDatasetFacet | None = None
    dataSource: DatasourceDatasetFacet | None = None
    datasetType: DatasetTypeDatasetFacet | None = None
    documentation: DocumentationFacet | None = None
    ownership: OwnershipFacet | None = None
    # dbt 1.40 sends assertions as a dataset facet too; the spec has them as an input facet
    dataQualityAssertions: DataQualityAssertionsFacet | None = None
    dataQualityMetrics: DataQualityMetricsFacet | None = None

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)


class InputFacets(_FacetMap):
    dataQualityAssertions: DataQualityAssertionsFacet | None = None
    dataQualityMetrics: DataQualityMetricsFacet | None = None
    inputStatistics: StatisticsFacet | None = None


class OutputFacets(_FacetMap):
    outputStatistics: StatisticsFacet | None = None
