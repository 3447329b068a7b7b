"""The cleanup's summary on its materialization says what the catalog kept and whose it is.

A person reading the ``catalog_cleanup`` materialization in the Dagster UI sees, beside the counts,
who holds what was kept (``keptBy``) and each kept object with the catalog's reason
(``keptObjects``), the first ones only when there are many, with how many more the report holds.
"""

from __future__ import annotations

from ol_dagster.defs.report import KEPT_SHOWN
from ol_dagster.defs.results import STALE_CLEANUP_CHECKS, cleanup_result
from ol_dagster.sync.reports import CleanupReport


def report_with_kept(objects: int) -> CleanupReport:
    kept = [f"dataset warehouse:t{i}: written by job ml:refresh_{i}" for i in range(objects)]
    return {
        "mode": "DAYS",
        "cutoff": "2026-11-01T03:00:00+00:00",
        "skippedReason": None,
        "maxRemovalsPerRun": 1000,
        "plannedRemovals": objects,
        "calls": [
            {
                "target": "datasetSystem",
                "system": "warehouse",
                "dryRun": {"physicalEntities": objects},
                "real": {"physicalEntities": 0},
                "outcomes": {"kept": {"physicalEntities": objects}},
                "keptBy": {"alice": objects - 1, "bob|ops": 1},
                "keptObjects": kept,
            }
        ],
        "removedJobs": [],
        "warnings": [],
        "keptBy": {"alice": objects - 1, "bob|ops": 1},
    }


def summary(report: CleanupReport) -> str:
    return str(cleanup_result(report, STALE_CLEANUP_CHECKS).metadata["summary"].value)


def test_the_summary_says_who_kept_what_and_caps_the_objects_it_lists():
    shown = summary(report_with_kept(KEPT_SHOWN + 7))

    assert "**kept by**: alice 56, bob\\|ops 1" in shown
    listed = [line for line in shown.splitlines() if line.startswith("- dataset ")]
    assert len(listed) == KEPT_SHOWN
    assert listed[0] == "- dataset warehouse:t0: written by job ml:refresh_0"
    assert "_7 more not shown_" in shown


def test_a_cleanup_that_kept_nothing_says_nothing_of_it():
    report = report_with_kept(0)
    report["keptBy"] = {}
    report["calls"][0].pop("keptBy")

    shown = summary(report)

    assert "kept by" not in shown and "kept objects" not in shown
