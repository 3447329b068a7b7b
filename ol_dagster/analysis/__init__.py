"""Egeria's Lovelace analyses over a window of OpenLineage events: pure functions, no Dagster.

``compute_run_profiles``, ``compute_dataset_scopes`` and ``compute_quality_summaries`` each take an
event source (raw bytes, parsed events, ``StoredEvent`` rows...) or a ``Prepared`` window (from
``prepare``, to parse once for all three), plus ``now`` and ``window_days`` (30 by default), and
return a result with ``rows()`` for a table and ``properties()`` per job or dataset for a catalog.
"""

from ol_dagster.analysis._common import (
    DEFAULT_WINDOW_DAYS,
    EventSource,
    Prepared,
    prepare,
)
from ol_dagster.analysis.dataset_scopes import (
    APPEND,
    PARTITION,
    REPLACE,
    DatasetScope,
    DatasetScopes,
    WriteMode,
    classify_write,
    compute_dataset_scopes,
)
from ol_dagster.analysis.quality_summaries import (
    DIMENSIONS,
    QualitySummaries,
    QualitySummary,
    Score,
    assertion_dimension,
    compute_quality_summaries,
)
from ol_dagster.analysis.run_profiles import (
    RunProfile,
    RunProfiles,
    compute_run_profiles,
    infer_schedule,
)

__all__ = [
    "APPEND",
    "DEFAULT_WINDOW_DAYS",
    "DIMENSIONS",
    "PARTITION",
    "REPLACE",
    "DatasetScope",
    "DatasetScopes",
    "EventSource",
    "Prepared",
    "QualitySummaries",
    "QualitySummary",
    "RunProfile",
    "RunProfiles",
    "Score",
    "WriteMode",
    "assertion_dimension",
    "classify_write",
    "compute_dataset_scopes",
    "compute_quality_summaries",
    "compute_run_profiles",
    "infer_schedule",
    "prepare",
]
