"""A plain ``pip install ol-dagster`` (no extras) must run: deployment images are built that way.

Two proofs. A fast one reads every import of ``ol_dagster/`` (the top-level ones and the ones
deferred into functions, not the ``if TYPE_CHECKING:`` ones) and finds each module's distribution
with ``importlib.metadata.packages_distributions()``: each must be the standard library,
``ol_dagster`` itself or a distribution in ``[project].dependencies``, and none a dev-only one
(``ol_dagster_tests``, the ``dev`` extra). A slow one does what a user does: builds the wheel,
installs it without extras in a clean venv (dependencies from the package registry) and runs
``ol-dagster demo``, ``inspect``, ``--help`` and ``dagster definitions validate`` from it in an
empty directory. ``orjson`` was once
imported but declared only in the ``dev`` extra: ``pip install .`` succeeded and ``ol-dagster
inspect`` then failed with ``ModuleNotFoundError``.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from ol_dagster.commands.demo import TEMPLATES, demo_settings
from ol_dagster.commands.inspection import inspect_files

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "ol_dagster"
TESTS_PACKAGE = "ol_dagster_tests"
# Never imported by ol_dagster, whatever the dev extra lists: the tests and what only they use.
ALWAYS_DEV_ONLY = {TESTS_PACKAGE, "pytest", "hypothesis", "jsonschema"}


def _normalize(name: str) -> str:
    """PEP 503 names: ``PyYAML``, ``pyyaml`` and ``py_yaml`` are one distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, f"unreadable requirement {requirement!r}"
    return _normalize(match.group(1))


@dataclass(frozen=True)
class Import:
    module: str  # the top-level name, as `import` resolves it
    where: str  # path:line


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, where: str) -> list[Import]:
    found: list[Import] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:  # the `else:` of `if TYPE_CHECKING:` runs
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend(Import(a.name.split(".")[0], f"{where}:{node.lineno}") for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(Import(node.module.split(".")[0], f"{where}:{node.lineno}"))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name | ast.Attribute)
            and getattr(node.func, "id", getattr(node.func, "attr", None))
            in {"import_module", "__import__"}
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and not node.args[0].value.startswith(".")
        ):
            found.append(Import(node.args[0].value.split(".")[0], f"{where}:{node.lineno}"))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def package_imports(root: Path) -> list[Import]:
    """Every absolute import under ``root/ol_dagster``, wherever in the module it is."""
    found: list[Import] = []
    for path in sorted((root / PACKAGE).rglob("*.py")):
        where = str(path.relative_to(root))
        found.extend(_imports(ast.parse(path.read_text(encoding="utf-8"), where), where))
    return found


def dependency_problems(root: Path) -> list[str]:
    """What a plain install of the project at ``root`` would miss or should not carry."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = {_requirement_name(r) for r in project.get("dependencies", [])}
    extras = project.get("optional-dependencies", {})
    dev = {_requirement_name(r) for r in extras.get("dev", [])} | ALWAYS_DEV_ONLY
    dev_only = dev - runtime
    distributions = importlib.metadata.packages_distributions()
    problems = [
        f"{name} is a dev-only package in [project].dependencies" for name in sorted(runtime & dev)
    ]
    for imp in package_imports(root):
        if imp.module in sys.stdlib_module_names or imp.module == PACKAGE:
            continue
        dists = {_normalize(d) for d in distributions.get(imp.module, [])}
        if imp.module == TESTS_PACKAGE or (dists & dev_only and not dists & runtime):
            problems.append(f"{imp.where}: imports dev-only {imp.module}")
        elif not dists:
            problems.append(f"{imp.where}: imports {imp.module}, which no distribution provides")
        elif not dists & runtime:
            names = ", ".join(sorted(dists))
            problems.append(
                f"{imp.where}: imports {imp.module} ({names}), not in [project].dependencies"
            )
    return problems


def test_every_runtime_import_is_a_declared_runtime_dependency() -> None:
    assert dependency_problems(PROJECT_ROOT) == []


def test_the_check_finds_what_a_plain_install_would_miss(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = ["PyYAML>=6", "pytest>=8"]\n'
        '[project.optional-dependencies]\ndev = ["pytest>=8", "jsonschema>=4", "packaging"]\n',
        encoding="utf-8",
    )
    pkg = tmp_path / PACKAGE
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "mod.py").write_text(
        "from __future__ import annotations\n"
        "import json, yaml\n"  # stdlib and declared: fine
        "from typing import TYPE_CHECKING\n"
        "from . import other\n"  # relative: the package itself
        "from ol_dagster.settings import x\n"
        "if TYPE_CHECKING:\n"
        "    import orjson\n"  # never runs
        "else:\n"
        "    import httpx\n"  # runs: undeclared
        "def later():\n"
        "    import jsonschema\n"  # deferred, dev-only
        "    from ol_dagster_tests.fakes import harness\n"
        "    import packaging.version\n"  # dev-only
        "    return importlib.import_module('pydantic_core')\n"  # undeclared
        "import no_such_module_anywhere\n",
        encoding="utf-8",
    )
    assert dependency_problems(tmp_path) == [
        "pytest is a dev-only package in [project].dependencies",
        "ol_dagster/mod.py:9: imports httpx (httpx), not in [project].dependencies",
        "ol_dagster/mod.py:11: imports dev-only jsonschema",
        "ol_dagster/mod.py:12: imports dev-only ol_dagster_tests",
        "ol_dagster/mod.py:13: imports dev-only packaging",
        "ol_dagster/mod.py:14: imports pydantic_core (pydantic-core), "
        "not in [project].dependencies",
        "ol_dagster/mod.py:15: imports no_such_module_anywhere, which no distribution provides",
    ]


def test_the_packaged_demo_defaults_are_the_checkouts() -> None:
    """The wheel's demo writes these; they must be what ``make demo`` runs on."""
    for name in TEMPLATES:
        packaged = PROJECT_ROOT / PACKAGE / "templates" / name
        assert packaged.read_text("utf-8") == (PROJECT_ROOT / name).read_text("utf-8"), (
            f"ol_dagster/templates/{name} differs from ./{name}: copy it over"
        )


def test_the_demo_writes_its_defaults_only_where_there_are_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OL_DAGSTER_SETTINGS", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dagster.yaml").write_text("# the user's own instance\n", encoding="utf-8")

    assert demo_settings(None) == Path("ol_dagster.yaml")
    assert (tmp_path / "ol_dagster.yaml").read_text("utf-8") == (
        PROJECT_ROOT / "ol_dagster.yaml"
    ).read_text("utf-8")
    assert (tmp_path / "dagster.yaml").read_text("utf-8") == "# the user's own instance\n"
    assert "wrote the demo defaults (ol_dagster.yaml)" in capsys.readouterr().out

    (tmp_path / "ol_dagster.yaml").write_text("# edited\n", encoding="utf-8")
    demo_settings(None)
    assert (tmp_path / "ol_dagster.yaml").read_text("utf-8") == "# edited\n"

    # A settings file the user named is theirs to get right: the demo writes nothing for it.
    assert demo_settings("elsewhere/mine.yaml") == Path("elsewhere/mine.yaml")
    assert not (tmp_path / "elsewhere").exists()


# --- the slow proof: a wheel in a clean venv, as a user installs it ---------------------------

INSPECTED = "events/marquez/marquez-docker-metadata__metadata_20.json"
RETIRED_TASK = "warehouse.warehouse_daily.export_revenue"


def _run(cmd: list[str | Path], *, cwd: Path, env: dict[str, str] | None = None, timeout: int):
    started = time.monotonic()
    done = subprocess.run(
        [str(c) for c in cmd],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    print(f"{time.monotonic() - started:6.1f} s  {' '.join(str(c) for c in cmd)}")
    assert done.returncode == 0, (
        f"{cmd} exited {done.returncode}\n--- stdout\n{done.stdout[-4000:]}\n"
        f"--- stderr\n{done.stderr[-4000:]}"
    )
    return done


@pytest.mark.timeout(900)
def test_the_wheel_installed_without_extras_runs_the_demo(tmp_path: Path, corpus: Path) -> None:
    # Built from a copy: an in-tree build leaves build/ behind, whose stale modules a later
    # wheel would carry.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(PROJECT_ROOT / name, source / name)
    shutil.copytree(
        PROJECT_ROOT / PACKAGE,
        source / PACKAGE,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip"]
    _run([*pip, "wheel", "--no-deps", "-q", "-w", wheels, source], cwd=tmp_path, timeout=300)
    (wheel,) = wheels.glob("ol_dagster-*.whl")

    # Nothing of this test's own environment (its venv, PYTHONPATH, settings, tokens) leaks in;
    # pip's own settings (the registry, its cache) stay.
    venv = tmp_path / "venv"
    workdir = tmp_path / "empty"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OL_", "PYTHON", "VIRTUAL_ENV", "DAGSTER"))
    }
    # and the venv is not activated: its commands are run by their paths, as a person who
    # installed it without activating it does
    env["DAGSTER_HOME"] = str(workdir / "dagster_home")
    (workdir / "dagster_home").mkdir(parents=True)

    _run([sys.executable, "-m", "venv", venv], cwd=tmp_path, env=env, timeout=120)
    python, ol_dagster = venv / "bin" / "python", venv / "bin" / "ol-dagster"
    # no byte-compiling of every installed module: what the demo imports compiles as it loads
    _run(
        [python, "-m", "pip", "install", "-q", "--no-compile", wheel],
        cwd=tmp_path,
        env=env,
        timeout=600,
    )

    # Nothing from the dev extra, nor the tests, came along: the demo below runs without them.
    probe = (
        "import importlib.util, json; print(json.dumps([m for m in "
        f"{sorted(ALWAYS_DEV_ONLY)!r} if importlib.util.find_spec(m)]))"
    )
    found = _run([python, "-c", probe], cwd=tmp_path, env=env, timeout=60).stdout
    assert json.loads(found) == []

    demo = _run([ol_dagster, "demo"], cwd=workdir, env=env, timeout=600).stdout
    assert (workdir / "ol_dagster.yaml").exists(), demo
    synced = re.findall(r"^  batch \d+ \((.*)\): (\w+)$", demo, re.MULTILINE)
    assert len(synced) == 2 and all(status == "synced" for _, status in synced), demo
    assert f"removed jobs: {RETIRED_TASK}" in demo, demo
    lineage = demo.split("\nupstream of ", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    assert lineage and all("  ->  " in edge for edge in lineage), demo
    assert "make dev" not in demo, "a wheel has no Makefile: the hint must work without one"
    # the UI command it prints works as printed in a plain shell (checking the code location
    # instead of serving it), and so does the lineage command (was: dagster: command not found)
    ui = demo.split("in the UI: ", 1)[1].split("  (then open ", 1)[0]
    assert str(venv / "bin" / "dagster") in ui, ui
    validate = ui.replace(" dev -m ", " definitions validate -m ")
    _run(["/bin/sh", "-c", validate], cwd=workdir, env=env, timeout=300)
    printed = re.search(r"^upstream of \S+ \((.*)\):$", demo, re.MULTILINE)
    assert printed and printed.group(1).startswith(str(ol_dagster)), demo
    _run(["/bin/sh", "-c", printed.group(1)], cwd=workdir, env=env, timeout=120)

    # The code location loads from the wheel, as a deployment image's gRPC server loads it.
    validate = [venv / "bin" / "dagster", "definitions", "validate", "-m", "ol_dagster.definitions"]
    _run(validate, cwd=workdir, env=env, timeout=300)

    # The installed package makes of a corpus file what the checkout makes of it.
    event_file = corpus / INSPECTED
    shown = _run([ol_dagster, "inspect", "--json", event_file], cwd=workdir, env=env, timeout=120)
    expected = inspect_files([str(event_file)], lenient=False)
    installed = json.loads(shown.stdout)
    assert installed["graph"] == expected["graph"]
    assert [e["accepted"] for e in installed["events"]] == [True]

    usage = _run([ol_dagster, "--help"], cwd=workdir, env=env, timeout=60).stdout
    for command in ("serve", "send", "sync", "inspect", "lineage", "check", "demo"):
        assert command in usage
