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
    owners: list[Owner] = Field(default_factory=list)


# -- dataset facets ------------------------------------------------------------------------------


class SchemaField(_Part):
    name: Name
    type: StrictStr | None = None
    description: StrictStr | None = None
    ordinal_position: StrictInt | None = None
    fields: list[SchemaField] = Field(default_factory=list)


class SchemaDatasetFacet(_Facet):
    fields: list[SchemaField] = Field(default_factory=list)


class Transformation(_Part):
    type: StrictStr
    subtype: StrictStr | None = None
    description: StrictStr | None = None
    masking: StrictBool | None = None


class InputField(_Part):
    namespace: Name
    name: Name
    field: Name
    transformations: list[Transformation] = Field(default_factory=list)


class ColumnLineageField(_Part):
    inputFields: list[InputField] = Field(default_factory=list)
    transformationType: StrictStr | None = None
    transformationDescription: StrictStr | None = None


class ColumnLineageDatasetFacet(_Facet):
    fields: dict[str, ColumnLineageField] = Field(default_factory=dict)
    dataset: list[InputField] = Field(default_factory=list)


class SymlinkIdentifier(_Part):
    namespace: Name
    name: Name
    type: StrictStr | None = None


class SymlinksDatasetFacet(_Facet):
    identifiers: list[SymlinkIdentifier] = Field(default_factory=list)


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


class DeletedFacet(BaseModel):
    """``{"_deleted": true}``: the producer removes this facet (spec: job and dataset facets)."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    deleted: Literal[True] = Field(alias="_deleted")


# A typed facet is tried in order, in Rust: a deletion marker first (it fails at once on a normal
# facet), then the facet itself: no Python runs per facet, events validate from bytes in one go.
_LTR = Field(union_mode="left_to_right")

# Validation error locations name the union member tried; these are not fields of the event.


_FACET_KEYS: dict[type, tuple[tuple[str, str], ...]] = {}


def facet_keys(cls: type[BaseModel]) -> tuple[tuple[str, str], ...]:
    """(field name, facet name) of a facet map's typed facets (``schema_`` is ``schema``)."""
    keys = _FACET_KEYS.get(cls)
    if keys is None:
        keys = _FACET_KEYS[cls] = tuple(
            (name, info.alias or name) for name, info in cls.model_fields.items()
        )
    return keys


class _FacetMap(BaseModel):
    """A facet map: known facets typed, unknown ones kept as they are, ``_deleted`` marked."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    @property
    def deleted(self) -> frozenset[str]:
        """Names of the facets this map deletes."""
        values = self.__dict__
        out = {
            key for name, key in facet_keys(type(self)) if isinstance(values[name], DeletedFacet)
        }
        for name, value in (self.__pydantic_extra__ or {}).items():
            if isinstance(value, dict) and value.get("_deleted") is True:
                out.add(name)
        return frozenset(out)

    def custom(self) -> dict[str, Any]:
        """The facets this model does not type (custom and non-lineage standard facets)."""
        return dict(self.__pydantic_extra__ or {})


class RunFacets(_FacetMap):
    parent: Annotated[DeletedFacet | ParentRunFacet | None, _LTR] = None
    nominalTime: Annotated[DeletedFacet | NominalTimeRunFacet | None, _LTR] = None
    errorMessage: Annotated[DeletedFacet | ErrorMessageRunFacet | None, _LTR] = None
    processing_engine: Annotated[DeletedFacet | ProcessingEngineRunFacet | None, _LTR] = None


class JobFacets(_FacetMap):
    jobType: Annotated[DeletedFacet | JobTypeJobFacet | None, _LTR] = None
    sql: Annotated[DeletedFacet | SQLJobFacet | None, _LTR] = None
    sourceCode: Annotated[DeletedFacet | SourceCodeJobFacet | None, _LTR] = None
    sourceCodeLocation: Annotated[DeletedFacet | SourceCodeLocationJobFacet | None, _LTR] = None
    documentation: Annotated[DeletedFacet | DocumentationFacet | None, _LTR] = None
    ownership: Annotated[DeletedFacet | OwnershipFacet | None, _LTR] = None


class DatasetFacets(_FacetMap):
    schema_: Annotated[DeletedFacet | SchemaDatasetFacet | None, _LTR] = Field(None, alias="schema")
    columnLineage: Annotated[DeletedFacet | ColumnLineageDatasetFacet | None, _LTR] = None
    symlinks: Annotated[DeletedFacet | SymlinksDatasetFacet | None, _LTR] = None
    lifecycleStateChange: Annotated[
        DeletedFacet | LifecycleStateChangeDatasetFacet | None, _LTR
    ] = None
    dataSource: Annotated[DeletedFacet | DatasourceDatasetFacet | None, _LTR] = None
    datasetType: Annotated[DeletedFacet | DatasetTypeDatasetFacet | None, _LTR] = None
    documentation: Annotated[DeletedFacet | DocumentationFacet | None, _LTR] = None
    ownership: Annotated[DeletedFacet | OwnershipFacet | None, _LTR] = None
    # dbt 1.40 sends assertions as a dataset facet too; the spec has them as an input facet
    dataQualityAssertions: Annotated[DeletedFacet | DataQualityAssertionsFacet | None, _LTR] = None
    dataQualityMetrics: Annotated[DeletedFacet | DataQualityMetricsFacet | None, _LTR] = None

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)


class InputFacets(_FacetMap):
    dataQualityAssertions: Annotated[DeletedFacet | DataQualityAssertionsFacet | None, _LTR] = None
    dataQualityMetrics: Annotated[DeletedFacet | DataQualityMetricsFacet | None, _LTR] = None
    inputStatistics: Annotated[DeletedFacet | StatisticsFacet | None, _LTR] = None


class OutputFacets(_FacetMap):
    outputStatistics: Annotated[DeletedFacet | StatisticsFacet | None, _LTR] = None


MODEL_NAMES = frozenset(
    name
    for name, obj in list(globals().items())
    if isinstance(obj, type) and issubclass(obj, BaseModel)
)
