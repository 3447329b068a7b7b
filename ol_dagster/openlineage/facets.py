"""The standard OpenLineage facets ol-dagster reads, as msgspec Structs.

Only the facets that change what the catalog holds are modelled; every other facet (custom ones
included) is kept as it came, in ``custom`` of its facet map. A standard facet of the wrong shape
rejects its event, naming the field: a schema without field names or an ownership without owner
names would otherwise be catalogued as something the producer did not say. Numbers and booleans
are strict (``"12"`` is not a row count). Facets lacking ``_producer``/``_schemaURL`` are accepted:
older producers omit them and the meaning is clear. Properties a standard facet has beyond the
modelled ones are accepted and not kept (nothing reads them; the store keeps the event as sent).

msgspec rather than pydantic: an event validates while it is decoded, in C, into these classes
(``benchmarks/parse.py``: about the cost of ``orjson.loads`` instead of 6 to 9 times it). Two rules
msgspec cannot say are checked in Python by ``names``: a ``Name`` must not be blank (a regex per
string costs more than the whole decode), and a facet carrying ``_deleted: true`` removes that facet
(spec: job and dataset facets) instead of being validated; it is recorded in ``deleted`` of its
facet map. ``_deleted`` on a facet is declared so the decoder refuses a marker it cannot handle,
which sends the event to the exact path in ``exact``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import attrgetter
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, Literal

from msgspec import UNSET, Meta, Struct, UnsetType, field

NAME = object()
"""Marks a ``Name`` in a field's annotation (``names`` finds them to bound or check them)."""

# An identity part (namespace, name, run id): a string with something in it besides blanks. The
# "besides blanks" is ``names``' post-check; msgspec checks the type and the length.
Name = Annotated[str, Meta(min_length=1), NAME]


class _Part(Struct, frozen=True, kw_only=True, gc=False):
    """A piece of a facet. Immutable; never in a reference cycle (decoded JSON), so untracked."""


class _Facet(_Part, frozen=True):
    producer: str | None = field(default=None, name="_producer")
    schemaURL: str | None = field(default=None, name="_schemaURL")
    # only an absent or false ``_deleted`` decodes: a marker is handled before decoding
    deleted_: Literal[False] | UnsetType = field(default=UNSET, name="_deleted")


# -- run facets ----------------------------------------------------------------------------------


class RunRef(_Part, frozen=True):
    runId: Name


class JobRef(_Part, frozen=True):
    namespace: Name
    name: Name


class ParentRoot(_Part, frozen=True):
    run: RunRef
    job: JobRef


class ParentRunFacet(_Facet, frozen=True, kw_only=True):
    run: RunRef
    job: JobRef
    root: ParentRoot | None = None


class NominalTimeRunFacet(_Facet, frozen=True, kw_only=True):
    nominalStartTime: str
    nominalEndTime: str | None = None


class ErrorMessageRunFacet(_Facet, frozen=True, kw_only=True):
    message: str
    programmingLanguage: str
    stackTrace: str | None = None


class ProcessingEngineRunFacet(_Facet, frozen=True, kw_only=True):
    version: str
    name: str | None = None
    openlineageAdapterVersion: str | None = None


# -- job facets ----------------------------------------------------------------------------------


class EmissionPattern(_Part, frozen=True):
    eventTrigger: Literal["EVENT_BASED", "PERIODIC"] = "EVENT_BASED"
    eventContentMode: Literal["ACCUMULATIVE", "COMPLETE_SNAPSHOT"] = "ACCUMULATIVE"
    windowDuration: Annotated[int, Meta(ge=0)] | None = None


class JobTypeJobFacet(_Facet, frozen=True, kw_only=True):
    processingType: str
    integration: str
    jobType: str | None = None
    emissionPattern: EmissionPattern | None = None


class SQLJobFacet(_Facet, frozen=True, kw_only=True):
    query: str
    dialect: str | None = None


class SourceCodeJobFacet(_Facet, frozen=True, kw_only=True):
    language: str
    sourceCode: str


class SourceCodeLocationJobFacet(_Facet, frozen=True, kw_only=True):
    type: str
    url: str
    repoUrl: str | None = None
    path: str | None = None
    version: str | None = None
    tag: str | None = None
    branch: str | None = None


class DocumentationFacet(_Facet, frozen=True, kw_only=True):
    description: str
    contentType: str | None = None


class Owner(_Part, frozen=True):
    name: Name
    type: str | None = None


class OwnershipFacet(_Facet, frozen=True, kw_only=True):
    owners: list[Owner] = []


# -- dataset facets ------------------------------------------------------------------------------


class SchemaField(_Part, frozen=True):
    name: Name
    type: str | None = None
    description: str | None = None
    ordinal_position: int | None = None
    fields: list[SchemaField] = []


class SchemaDatasetFacet(_Facet, frozen=True, kw_only=True):
    fields: list[SchemaField] = []


class Transformation(_Part, frozen=True):
    type: str
    subtype: str | None = None
    description: str | None = None
    masking: bool | None = None


class InputField(_Part, frozen=True):
    namespace: Name
    name: Name
    field: Name
    transformations: list[Transformation] = []


class ColumnLineageField(_Part, frozen=True):
    inputFields: list[InputField] = []
    transformationType: str | None = None
    transformationDescription: str | None = None


class ColumnLineageDatasetFacet(_Facet, frozen=True, kw_only=True):
    fields: dict[str, ColumnLineageField] = {}
    dataset: list[InputField] = []


class SymlinkIdentifier(_Part, frozen=True):
    namespace: Name
    name: Name
    type: str | None = None


class SymlinksDatasetFacet(_Facet, frozen=True, kw_only=True):
    identifiers: list[SymlinkIdentifier] = []


class PreviousIdentifier(_Part, frozen=True):
    namespace: Name
    name: Name


class LifecycleStateChangeDatasetFacet(_Facet, frozen=True, kw_only=True):
    lifecycleStateChange: Literal["ALTER", "CREATE", "DROP", "OVERWRITE", "RENAME", "TRUNCATE"]
    previousIdentifier: PreviousIdentifier | None = None


class DatasourceDatasetFacet(_Facet, frozen=True, kw_only=True):
    name: str | None = None
    uri: str | None = None


class DatasetTypeDatasetFacet(_Facet, frozen=True, kw_only=True):
    datasetType: str
    subType: str | None = None


class Assertion(_Part, frozen=True):
    assertion: str
    success: bool
    column: str | None = None
    severity: str | None = None
    name: str | None = None
    description: str | None = None


class DataQualityAssertionsFacet(_Facet, frozen=True, kw_only=True):
    assertions: list[Assertion]


class DataQualityMetricsFacet(_Facet, frozen=True, kw_only=True):
    columnMetrics: dict[str, Any]
    rowCount: int | None = None
    bytes: int | None = None
    fileCount: int | None = None


class StatisticsFacet(_Facet, frozen=True, kw_only=True):
    rowCount: int | None = None
    size: int | None = None
    fileCount: int | None = None


# -- facet maps ----------------------------------------------------------------------------------

_NO_CUSTOM: MappingProxyType[str, Any] = MappingProxyType({})


class _FacetMap(Struct, frozen=True, kw_only=True, dict=True):
    """A facet map: the known facets typed (``None`` when absent or deleted).

    ``custom`` (the facets it does not type, as they came) and ``deleted`` (the names of the
    facets it removes) are not fields, so no input key can fill them: ``facet_maps`` sets them on
    the instances the decoder builds, once, before anyone sees them. A map decoded without its
    custom facets (``parse_event(..., custom_facets=False)``, for normalization, which reads typed
    facets only) has an empty ``custom``."""

    custom: ClassVar[Mapping[str, Any]] = _NO_CUSTOM
    deleted: ClassVar[frozenset[str]] = frozenset()

    def given(self) -> list[tuple[str, Any]]:
        """(facet name, facet) of every facet this map gives: typed ones and custom ones, not
        the deletion markers. (Normalization asks every map of every event: one C call reads
        the typed facets.)"""
        names, values, none = _READERS[type(self)]
        typed = values(self)
        custom = self.custom
        if typed == none and not custom:  # most maps of a run's facts: nothing given
            return []
        out = [pair for pair in zip(names, typed, strict=True) if pair[1] is not None]
        for key, value in custom.items():
            if not (type(value) is dict and value.get("_deleted") is True):
                out.append((key, value))
        return out


_FACET_KEYS: dict[type, tuple[tuple[str, str], ...]] = {}
# facet map class -> (its facet names, a getter of its typed facets in that order)
# (and the tuple it gives for a map without any)
_READERS: dict[
    type, tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]], tuple[None, ...]]
] = {}


def facet_keys(cls: type) -> tuple[tuple[str, str], ...]:
    """(attribute, facet name) of a facet map's typed facets (``schema_`` is ``schema``)."""
    keys = _FACET_KEYS.get(cls)
    if keys is None:
        from msgspec.structs import fields

        keys = _FACET_KEYS[cls] = tuple((f.name, f.encode_name) for f in fields(cls))
    return keys


class RunFacets(_FacetMap, frozen=True):
    parent: ParentRunFacet | None = None
    nominalTime: NominalTimeRunFacet | None = None
    errorMessage: ErrorMessageRunFacet | None = None
    processing_engine: ProcessingEngineRunFacet | None = None


class JobFacets(_FacetMap, frozen=True):
    jobType: JobTypeJobFacet | None = None
    sql: SQLJobFacet | None = None
    sourceCode: SourceCodeJobFacet | None = None
    sourceCodeLocation: SourceCodeLocationJobFacet | None = None
    documentation: DocumentationFacet | None = None
    ownership: OwnershipFacet | None = None


class DatasetFacets(_FacetMap, frozen=True):
    schema_: SchemaDatasetFacet | None = field(default=None, name="schema")
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


class InputFacets(_FacetMap, frozen=True):
    dataQualityAssertions: DataQualityAssertionsFacet | None = None
    dataQualityMetrics: DataQualityMetricsFacet | None = None
    inputStatistics: StatisticsFacet | None = None


class OutputFacets(_FacetMap, frozen=True):
    outputStatistics: StatisticsFacet | None = None


FACET_MAPS: tuple[type[_FacetMap], ...] = (
    RunFacets,
    JobFacets,
    DatasetFacets,
    InputFacets,
    OutputFacets,
)


def register_facet_map(cls: type[_FacetMap]) -> None:
    """Make ``given`` work on a facet map class (the standard ones, and the narrower ones that
    read an event's run facts only: ``run_facts``)."""
    attrs = [attr for attr, _ in facet_keys(cls)]
    getter = attrgetter(*attrs)
    _READERS[cls] = (
        tuple(key for _, key in facet_keys(cls)),
        getter if len(attrs) > 1 else (lambda m, g=getter: (g(m),)),
        (None,) * len(attrs),
    )


for _cls in FACET_MAPS:
    register_facet_map(_cls)
