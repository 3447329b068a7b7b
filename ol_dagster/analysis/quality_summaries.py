"""Summarise OpenLineage Data Quality (Egeria's Lovelace service): pass rates per quality dimension.

Outcomes, over the runs that started in the window (each counted at the run's end):

- Dataset assertions: ``dataQualityAssertions`` in a dataset's input facets (the spec) or in its
  dataset facets (dbt 1.40 sends both, with the same assertions). Within one run and one dataset an
  assertion (``assertion``, ``column``, ``name``) counts once, whichever facet and however many
  events of the run carried it (events of a run are combined first, the latest facet wins).
  ``success`` true is a pass, false a failure; severity does not change that (a ``warn`` failure
  still failed).
- Job tests: the run facet ``test`` (``TestRunFacet``): ``status`` pass or fail; skip (or any
  other status) is not an outcome. A test whose name is already one of the run's assertions is
  not counted twice.

A dataset's summary holds its assertions, whichever job evaluated them; a job's summary holds the
assertions of all the datasets of its runs plus its tests.

Dimension of an outcome (``assertion_dimension``), from the assertion's ``assertion`` (a test's
``type``, else its ``name``), lower-cased, ``.``/``-``/blanks read as ``_``, a leading ``source_``
(dbt source tests) and a package prefix (``dbt_utils_``, ``dbt_expectations_``, ``elementary_``)
dropped, then the first matching prefix:

- CONSISTENCY: relationships, equality, equal_rowcount, fewer_rows_than, cardinality_equality,
  expect_table_row_count_to_equal_other_table, expect_column_pair_*, expect_multicolumn_*
- UNIQUENESS: unique*, expect_column_values_to_be_unique, expect_compound_columns_to_be_unique,
  expect_select_column_values_to_be_unique_within_record, no_duplicate*, distinct*
- COMPLETENESS: not_null*, no_null*, not_empty*, not_blank*, at_least_one, row_count*,
  expect_column_values_to_not_be_null, expect_table_row_count*, expect_row_count*
- VALIDITY: accepted_values, not_accepted_values, accepted_range, expression_is_true, is_*,
  expect_column_values_to_be_in_set / _be_between / _match_* / _be_of_type / _be_in_type_list,
  expect_column_value_lengths_*, valid*, positive*, regex*
- TIMELINESS: freshness, recency, expect_row_values_to_have_recent_data,
  expect_grouped_row_values_to_have_recent_data
- OTHER: anything else (dbt singular tests such as ``assert_positive_amounts``, custom SQL).

dbt names generic tests ``<test>_<model>_<column>`` (``not_null_orders_id``), which the prefixes
match. The pass rate of a dimension is passes / outcomes; ``overall`` pools every outcome.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ol_dagster.analysis._common import (
    DEFAULT_WINDOW_DAYS,
    EventSource,
    Key,
    Prepared,
    iso,
    prepare,
    rounded,
)

COMPLETENESS = "COMPLETENESS"
UNIQUENESS = "UNIQUENESS"
VALIDITY = "VALIDITY"
CONSISTENCY = "CONSISTENCY"
TIMELINESS = "TIMELINESS"
OTHER = "OTHER"
DIMENSIONS = (COMPLETENESS, UNIQUENESS, VALIDITY, CONSISTENCY, TIMELINESS, OTHER)

DATASET = "DATASET"
JOB = "JOB"

_PREFIX_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        CONSISTENCY,
        (
            "relationships",
            "equality",
            "equal_rowcount",
            "fewer_rows_than",
            "cardinality_equality",
            "expect_table_row_count_to_equal_other_table",
            "expect_column_pair_",
            "expect_multicolumn_",
        ),
    ),
    (
        UNIQUENESS,
        (
            "unique",
            "expect_column_values_to_be_unique",
            "expect_compound_columns_to_be_unique",
            "expect_select_column_values_to_be_unique",
            "no_duplicate",
            "distinct",
        ),
    ),
    (
        COMPLETENESS,
        (
            "not_null",
            "no_null",
            "not_empty",
            "not_blank",
            "at_least_one",
            "row_count",
            "expect_column_values_to_not_be_null",
            "expect_table_row_count",
            "expect_row_count",
        ),
    ),
    (
        VALIDITY,
        (
            "accepted_values",
            "not_accepted_values",
            "accepted_range",
            "expression_is_true",
            "is_",
            "expect_column_values_to_be_in_set",
            "expect_column_values_to_be_between",
            "expect_column_values_to_match_",
            "expect_column_values_to_be_of_type",
            "expect_column_values_to_be_in_type_list",
            "expect_column_value_lengths_",
            "valid",
            "positive",
            "regex",
        ),
    ),
    (
        TIMELINESS,
        (
            "freshness",
            "recency",
            "expect_row_values_to_have_recent_data",
            "expect_grouped_row_values_to_have_recent_data",
        ),
    ),
)
_PACKAGES = ("dbt_utils_", "dbt_expectations_", "elementary_")
_SEPARATORS = re.compile(r"[.\-\s]+")


def assertion_dimension(assertion: str) -> str:
    """The quality dimension of an assertion or test name (rules in the module docstring)."""
    name = _SEPARATORS.sub("_", assertion.strip().lower())
    name = name.removeprefix("source_")
    for package in _PACKAGES:
        name = name.removeprefix(package)
    for dimension, prefixes in _PREFIX_RULES:
        if name.startswith(prefixes):
            return dimension
    return OTHER


@dataclass(slots=True)
class Score:
    passed: int = 0
    failed: int = 0

    @property
    def total(self) -> int:
        return self.passed + self.failed

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.total if self.total else None

    def add(self, success: bool) -> None:
        if success:
            self.passed += 1
        else:
            self.failed += 1


@dataclass(slots=True)
class QualitySummary:
    subject: str  # DATASET or JOB
    namespace: str
    name: str
    dimensions: dict[str, Score] = field(default_factory=dict)
    overall: Score = field(default_factory=Score)
    runs: int = 0  # runs that reported outcomes
    last_evaluated: datetime | None = None
    latest: dict[str, tuple[datetime, bool]] = field(default_factory=dict)  # per assertion

    @property
    def key(self) -> Key:
        return (self.namespace, self.name)

    @property
    def failing(self) -> list[str]:
        """Assertions whose latest outcome in the window is a failure."""
        return sorted(k for k, (_, ok) in self.latest.items() if not ok)

    def pass_rate(self, dimension: str) -> float | None:
        score = self.dimensions.get(dimension)
        return score.pass_rate if score else None

    def record(self, ident: str, dimension: str, success: bool, when: datetime) -> None:
        self.dimensions.setdefault(dimension, Score()).add(success)
        self.overall.add(success)
        seen = self.latest.get(ident)
        if seen is None or when >= seen[0]:
            self.latest[ident] = (when, success)

    def properties(self) -> dict[str, Any]:
        """The survey report: a pass rate and counts per dimension, plus the overall rate."""
        return {
            "overallPassRate": rounded(self.overall.pass_rate),
            "passed": self.overall.passed,
            "failed": self.overall.failed,
            "runs": self.runs,
            "lastEvaluated": iso(self.last_evaluated),
            "dimensions": {
                d: {
                    "passRate": rounded(s.pass_rate),
                    "passed": s.passed,
                    "failed": s.failed,
                }
                for d, s in sorted(self.dimensions.items(), key=lambda i: DIMENSIONS.index(i[0]))
            },
            "failingAssertions": self.failing,
        }

    def row(self) -> dict[str, Any]:
        """A flat row with one pass-rate column per dimension (None when not measured)."""
        out: dict[str, Any] = {
            "subject": self.subject,
            "namespace": self.namespace,
            "name": self.name,
            "overallPassRate": rounded(self.overall.pass_rate),
            "passed": self.overall.passed,
            "failed": self.overall.failed,
        }
        for d in DIMENSIONS:
            out[f"{d.lower()}PassRate"] = rounded(self.pass_rate(d))
        out["runs"] = self.runs
        out["lastEvaluated"] = iso(self.last_evaluated)
        out["failingAssertions"] = ", ".join(self.failing)
        return out


@dataclass(frozen=True, slots=True)
class QualitySummaries:
    now: datetime
    window_days: float
    window_start: datetime
    datasets: list[QualitySummary]  # sorted by (namespace, name)
    jobs: list[QualitySummary]
    ambiguous: list[Key]
    skipped_events: list[str]

    def __iter__(self) -> Iterator[QualitySummary]:
        return iter([*self.datasets, *self.jobs])

    def __len__(self) -> int:
        return len(self.datasets) + len(self.jobs)

    def dataset(self, namespace: str, name: str) -> QualitySummary | None:
        return next((s for s in self.datasets if s.key == (namespace, name)), None)

    def job(self, namespace: str, name: str) -> QualitySummary | None:
        return next((s for s in self.jobs if s.key == (namespace, name)), None)

    def rows(self) -> list[dict[str, Any]]:
        return [s.row() for s in self]


@dataclass(frozen=True, slots=True)
class _Outcome:
    ident: str
    dimension: str
    success: bool


def _assertions(facet_maps: tuple[Mapping[str, Any], ...]) -> list[_Outcome]:
    out: dict[tuple[str, str | None, str | None], _Outcome] = {}
    for facets in facet_maps:
        assertions = getattr(facets.get("dataQualityAssertions"), "assertions", None) or []
        for a in assertions:
            key = (a.assertion, a.column, a.name)
            if key in out:
                continue
            ident = a.assertion if a.column is None else f"{a.assertion}({a.column})"
            out[key] = _Outcome(ident, assertion_dimension(a.assertion), a.success)
    return list(out.values())


def _tests(run_facets: Mapping[str, Any], known: set[str]) -> list[_Outcome]:
    facet = run_facets.get("test")
    tests = facet.get("tests") if isinstance(facet, Mapping) else None
    out = []
    for t in tests if isinstance(tests, list) else []:
        if not isinstance(t, Mapping) or not isinstance(t.get("name"), str):
            continue
        status = str(t.get("status", "")).lower()
        if status not in ("pass", "fail") or t["name"] in known:
            continue
        kind = t.get("type")
        dimension = assertion_dimension(kind if isinstance(kind, str) and kind else t["name"])
        out.append(_Outcome(t["name"], dimension, status == "pass"))
    return out


def compute_quality_summaries(
    source: EventSource | Prepared,
    *,
    now: datetime,
    window_days: float = DEFAULT_WINDOW_DAYS,
) -> QualitySummaries:
    """Pass rates per dimension, per dataset and per job, over the ``window_days`` ending at
    ``now``; datasets and jobs without any outcome in the window are not listed."""
    prepared = prepare(source, now=now, window_days=window_days)
    datasets: dict[Key, QualitySummary] = {}
    jobs: dict[Key, QualitySummary] = {}
    for run in prepared.runs:
        when = run.end
        names: set[str] = set()  # what the run's assertions are called, to skip repeated tests
        # per dataset: (identified uniquely, key) -> its facet maps in this run
        facet_maps: dict[tuple[bool, Key], list[Mapping[str, Any]]] = {}
        for d in (*run.view.inputs.values(), *run.view.outputs.values()):
            for facets in (d.io_facets, d.facets):
                for a in getattr(facets.get("dataQualityAssertions"), "assertions", None) or []:
                    names.update(n for n in (a.assertion, a.name) if n)
            # a dataset both read and written by the run is still one dataset
            key = prepared.identities.key(d.namespace, d.name)
            slot = (True, key) if key is not None else (False, (d.namespace, d.name))
            facet_maps.setdefault(slot, []).extend((d.io_facets, d.facets))
        job_outcomes: list[_Outcome] = []
        for (identified, key), maps in facet_maps.items():
            outcomes = _assertions(tuple(maps))
            if not outcomes:
                continue
            # the same assertion on two datasets of a job is two outcomes
            job_outcomes += [
                _Outcome(f"{key[1]}:{o.ident}", o.dimension, o.success) for o in outcomes
            ]
            if not identified:
                continue
            summary = datasets.get(key) or datasets.setdefault(key, QualitySummary(DATASET, *key))
            _record(summary, outcomes, when)
        job_outcomes += _tests(run.view.run_facets, names)
        if job_outcomes:
            summary = jobs.get(run.job) or jobs.setdefault(run.job, QualitySummary(JOB, *run.job))
            _record(summary, job_outcomes, when)
    return QualitySummaries(
        prepared.now,
        prepared.window_days,
        prepared.window_start,
        [datasets[k] for k in sorted(datasets)],
        [jobs[k] for k in sorted(jobs)],
        prepared.ambiguous_datasets,
        list(prepared.skipped_events),
    )


def _record(summary: QualitySummary, outcomes: list[_Outcome], when: datetime) -> None:
    for o in outcomes:
        summary.record(o.ident, o.dimension, o.success, when)
    summary.runs += 1
    if summary.last_evaluated is None or when > summary.last_evaluated:
        summary.last_evaluated = when
