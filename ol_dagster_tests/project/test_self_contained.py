"""The tests and benchmarks need nothing but the repository.

A clean clone on a machine that holds only the repository must test green, so no test or benchmark
may read a file outside it: the public OpenLineage events and schemas they use are copied into
``ol_dagster_tests/corpus`` (with their licence and where each file came from). Two guards: a scan
of every file under ``ol_dagster_tests/`` and ``benchmarks/`` (and the Makefile and ``.ci/``) for
paths that leave the repository, and a run of the corpus-reading tests through ``.ci/run``, in a
copy of the repository in an empty temporary folder.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ol_dagster_tests.conftest import CORPUS, PROJECT_ROOT

# left out of the scan: their examples name outside paths, for the checks to find them
CHECKS = {Path(__file__).resolve(), Path(__file__).resolve().with_name("test_docs.py")}

SCANNED = ("ol_dagster_tests", "benchmarks")
BENCHMARKS = PROJECT_ROOT / "benchmarks"
TEXT_SUFFIXES = {".py", ".md", ".txt", ".yaml", ".yml", ".toml", ".cfg", ".ini", ".sh", ".json"}

# The folder beside the repository on the machine that built it (spelt once: the examples below
# are made from it, so that no file of the repository names a path outside it literally).
BESIDE = "shared"
# Folders beside the repository or absolute paths of one machine.
_OUTSIDE = re.compile(
    rf"\.\./{BESIDE}\b|\b{BESIDE}/(?:corpus|seeds|design)\b|/work/|\bROOT\.parent\b"
)
_PARENTS_INDEX = re.compile(r"__file__\)(?:\.resolve\(\))?\.parents\[(\d+)\](\.parent\b)?")
_PARENT_CHAIN = re.compile(r"__file__\)(?:\.resolve\(\))?((?:\.parent\b)+)")


def outside_paths(relative: str, text: str) -> list[str]:
    """The places in ``text`` (the file at ``relative`` from the root) that name a path outside
    the repository: a known outside folder, or more ``parent`` steps from ``__file__`` than the
    file is deep (``Path(__file__).parents[depth - 1]`` is the root)."""
    depth = len(Path(relative).parts)
    found = [m.group(0) for m in _OUTSIDE.finditer(text)]
    for m in _PARENTS_INDEX.finditer(text):
        ups = int(m.group(1)) + 1 + (1 if m.group(2) else 0)
        if ups > depth:
            found.append(m.group(0))
    for m in _PARENT_CHAIN.finditer(text):
        if m.group(1).count(".parent") > depth:
            found.append(m.group(0))
    return found


def scanned_files() -> list[Path]:
    files = [
        p
        for folder in SCANNED
        for p in (PROJECT_ROOT / folder).rglob("*")
        if p.is_file()
        and p.suffix in TEXT_SUFFIXES
        and "__pycache__" not in p.parts
        and p.resolve() not in CHECKS
    ]
    return [*files, PROJECT_ROOT / "Makefile", *(PROJECT_ROOT / ".ci").iterdir()]


def test_no_test_or_benchmark_names_a_path_outside_the_repository() -> None:
    files = scanned_files()
    assert len(files) > 100  # the tests, the benchmarks and the corpus
    found = {}
    for path in files:
        relative = path.relative_to(PROJECT_ROOT).as_posix()
        if hits := outside_paths(relative, path.read_text(encoding="utf-8", errors="replace")):
            found[relative] = hits
    assert not found, f"paths outside the repository: {found}"


@pytest.mark.parametrize(
    ("relative", "text"),
    [
        ("ol_dagster_tests/conftest.py", f'CORPUS = ROOT.parent / "{BESIDE}" / "corpus"'),
        ("ol_dagster_tests/x/test_y.py", f"read ``../{BESIDE}/corpus/openlineage/MANIFEST.md``"),
        ("benchmarks/parse.py", f'Path("/work/{BESIDE}/corpus/openlineage/events")'),
        ("ol_dagster_tests/x/test_y.py", "Path(__file__).resolve().parents[2].parent / 'corpus'"),
        ("ol_dagster_tests/x/test_y.py", "Path(__file__).parents[3]"),
        ("benchmarks/parse.py", "Path(__file__).resolve().parent.parent.parent"),
        ("ol_dagster_tests/fakes/f.py", f"written from ``{BESIDE}/design/catalog-apis.md``"),
    ],
)
def test_the_scan_finds_a_path_outside(relative: str, text: str) -> None:
    assert outside_paths(relative, text)


@pytest.mark.parametrize(
    ("relative", "text"),
    [
        ("ol_dagster_tests/x/test_y.py", "Path(__file__).resolve().parents[2] / 'benchmarks'"),
        ("benchmarks/parse.py", "Path(__file__).resolve().parent.parent"),
        ("ol_dagster_tests/conftest.py", "PROJECT_ROOT = Path(__file__).resolve().parent.parent"),
        ("ol_dagster_tests/x/test_y.py", 'run_event("etl", "../../escape")  # hostile name'),
        ("ol_dagster_tests/x/test_y.py", 'outputs=[("s3://shared", "x")]'),
    ],
)
def test_the_scan_lets_paths_inside_pass(relative: str, text: str) -> None:
    assert outside_paths(relative, text) == []


# --- the corpus: inside, licensed, every file's origin recorded -----------------------------------


def test_the_corpus_is_inside_the_repository_with_its_licence() -> None:
    assert CORPUS.is_relative_to(PROJECT_ROOT) and CORPUS.is_dir()
    assert "Apache License" in (CORPUS / "LICENSE").read_text(encoding="utf-8")
    assert (CORPUS / "NOTICE").is_file()


def test_provenance_names_the_origin_of_every_corpus_file() -> None:
    text = (CORPUS / "PROVENANCE.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.splitlines():
        m = re.match(
            r"\| `([^`]+\.json)` \| ([\w.-]+/[\w.-]+) \| `([0-9a-f]{40})` \| `([^`]+)` \|", line
        )
        if m:
            rows[m.group(1)] = m.groups()[1:]
    files = sorted(p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*.json"))
    assert len(files) > 300
    assert sorted(rows) == files  # a row per file, and no row for a file that is not there
    for name in ("LICENSE", "NOTICE", "MANIFEST.md"):
        assert f"| `{name}` |" in text


@pytest.mark.parametrize("name", ["check_fast_paths", "parse", "receiver_load"])
def test_the_benchmarks_read_the_corpus_in_the_repository(name: str) -> None:
    # loaded from its file under another name: ``parse`` is also a package on PyPI
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.CORPUS == CORPUS / "events"
    assert len(module.corpus_events()) > 100


def test_the_code_under_test_is_this_checkout() -> None:
    """Run in the copy below, this shows the copy's own code was tested."""
    import ol_dagster

    assert Path(ol_dagster.__file__).resolve().is_relative_to(PROJECT_ROOT)


# --- the suite from a copy with nothing beside it -------------------------------------------------

IN_THE_COPY = [
    "ol_dagster_tests/project/test_self_contained.py::test_the_corpus_is_inside_the_repository_with_its_licence",
    "ol_dagster_tests/project/test_self_contained.py::test_provenance_names_the_origin_of_every_corpus_file",
    "ol_dagster_tests/project/test_self_contained.py::test_the_benchmarks_read_the_corpus_in_the_repository",
    "ol_dagster_tests/project/test_self_contained.py::test_the_code_under_test_is_this_checkout",
    "ol_dagster_tests/lineage/test_corpus.py",
    "ol_dagster_tests/dagster/test_run_lineage.py::test_the_schemas_are_the_corpus_and_catch_a_wrong_facet",
    "ol_dagster_tests/catalogs/test_marquez_contract.py::test_the_fake_stores_the_events_marquezs_own_tests_post",
    "ol_dagster_tests/commands/test_inspect.py",
]


def test_the_corpus_tests_pass_in_a_copy_with_nothing_beside_it() -> None:
    """``.ci/run`` copies the repository into an empty temporary folder and runs a command there;
    the tests that read the corpus pass in that copy, with its own code on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OL_DAGSTER", "PYTEST"))}
    env["PYTHONPATH"] = "."  # the copy's code first, as in the copy's own venv
    done = subprocess.run(
        [str(PROJECT_ROOT / ".ci" / "run"), sys.executable, "-m", "pytest", "-q", "-n", "0"]
        + ["-p", "no:cacheprovider", *IN_THE_COPY],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    copy = re.search(r"running in (\S+) \(a copy of", done.stderr)
    assert copy and Path(copy.group(1)) != PROJECT_ROOT, done.stderr
    assert not Path(copy.group(1)).exists()  # the temporary folder is gone afterwards
    passed = re.search(r"(\d+) passed", done.stdout)
    assert passed and int(passed.group(1)) > 250, done.stdout[-2000:]
