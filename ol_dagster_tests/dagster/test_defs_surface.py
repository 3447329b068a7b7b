"""What a Dagster user sees of the code location besides the assets: the schedules (names, crons
and targets, as docs/how-it-works.md documents them) and the asset checks' descriptions.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
import yaml

from ol_dagster.definitions import build_defs
from ol_dagster_tests.conftest import settings_data


@pytest.fixture
def defs(tmp_path: Path) -> dg.Definitions:
    data = settings_data(tmp_path)
    data["definitions"][0]["logStore"] = {"folder": str(tmp_path / "logs")}  # its check too
    path = tmp_path / "ol_dagster.yaml"
    path.write_text(yaml.safe_dump(data))
    return build_defs(str(path))


def test_the_schedules_are_the_documented_ones(defs: dg.Definitions) -> None:
    """``<definition>__stale_cleanup_daily`` at 03:00 runs that definition's ``stale_cleanup``;
    ``analyses_daily`` at 03:30 (after it) runs the three analyses; all running by default."""
    repo = defs.get_repository_def()
    found = {
        s.name: (
            s.cron_schedule,
            sorted(
                k.to_user_string() for k in repo.get_job(s.job_name).asset_layer.selected_asset_keys
            ),
            s.default_status,
        )
        for s in repo.schedule_defs
    }
    running = dg.DefaultScheduleStatus.RUNNING
    assert found == {
        "snap__stale_cleanup_daily": ("0 3 * * *", ["snap/stale_cleanup"], running),
        "add__stale_cleanup_daily": ("0 3 * * *", ["add/stale_cleanup"], running),
        "analyses_daily": (
            "30 3 * * *",
            ["dataset_scopes", "quality_summaries", "run_profiles"],
            running,
        ),
    }


def test_every_asset_check_says_what_it_guards_and_what_a_failure_means(
    defs: dg.Definitions,
) -> None:
    graph = defs.resolve_asset_graph()
    checks = {(k.asset_key.to_user_string(), k.name): k for k in graph.asset_check_keys}
    # every check of the code location, the log store's included (it exists with a logStore)
    assert {name for _, name in checks} == {
        "not_empty",
        "whole_snapshot",
        "log_store_written",
        "no_dangling_flows",
        "upload_succeeded",
        "downstream_intact",
        "removal_cap",
        "cleanup_permitted",
        "owned_dataset_systems",
        "jobs_on_schedule",
    }
    missing = []
    for (asset, name), key in sorted(checks.items()):
        description = graph.get_check_spec(key).description or ""
        # one sentence: what holds; then what a failure (or a warning) means
        ok = (
            description.endswith(".")
            and description.count(". ") == 0
            and ";" in description
            and ("a failure means" in description or "a warning means" in description)
        )
        if not ok:
            missing.append(f"{asset} {name}: {description!r}")
    assert not missing, "\n".join(missing)
