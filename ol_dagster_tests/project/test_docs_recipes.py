"""The recipe of docs/catalogs.md that points the demo at a fake catalog runs it on a Dagster
instance of its own: the partitions of a definition are batch ids, so two event stores on one
instance would name different batches ``1`` and ``2``."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
RECIPE = PROJECT_ROOT / "docs" / "catalogs.md"


def _make_lines() -> dict[str, dict[str, str]]:
    """The recipe's ``make <target> VAR=value...`` lines: per target, its variables."""
    found = {}
    for line in RECIPE.read_text().splitlines():
        if not line.startswith("make "):
            continue
        words = shlex.split(line, comments=True)
        if len(words) > 2:
            found[words[1]] = dict(w.split("=", 1) for w in words[2:])
    return found


def test_the_fake_catalog_recipe_keeps_its_store_and_instance_in_a_folder_of_its_own() -> None:
    lines = _make_lines()
    assert set(lines) == {"demo", "dev"}, lines
    for target, variables in lines.items():
        settings = Path(variables["OL_DAGSTER_SETTINGS"])
        home = Path(variables["DAGSTER_HOME"])
        # the instance beside the settings (and the store they anchor there), not the checkout's
        assert home.parent == settings.parent != PROJECT_ROOT, (target, variables)

        # make takes the instance given after it over the Makefile's own (a dry run: nothing runs)
        planned = subprocess.run(
            ["make", "-n", target, *(f"{k}={v}" for k, v in variables.items())],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert planned.returncode == 0, planned.stderr
        assert f"mkdir -p {home}" in planned.stdout
        assert str(PROJECT_ROOT / ".dagster_home") not in planned.stdout
        if target == "dev":
            assert f"cd {home} &&" in planned.stdout
            assert f"OL_DAGSTER_SETTINGS={settings}" in planned.stdout
