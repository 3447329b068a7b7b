"""The layering ARCHITECTURE.md states ("Layers"), enforced on the package's imports.

The table of layers is read from ARCHITECTURE.md itself, so the page and the code cannot drift
apart: every module of ``ol_dagster/`` belongs to one row (the most specific path that holds it),
imports only from its own layer or below, takes part in no import cycle, and imports Dagster only
from the Dagster shell up, and Dagster's private modules (``dagster._...``) only in the one
adapter. Every import counts, at the top of a module, inside a function or under
``TYPE_CHECKING``: each is a dependency. An import names a module (``from a.b import c`` names
``a.b.c`` when that is a module, else ``a.b``); the packages holding it are not edges (a package's
``__init__`` may import its own modules, as a kind's declaration imports its backend).

Each rule is also run on a small package made up here, so a check that could not fail is seen.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "ARCHITECTURE.md"
PACKAGE = "ol_dagster"
ADAPTER = "ol_dagster/defs/dagster_private.py"  # the only module that names ``dagster._...``
DAGSTER_SHELL = "Dagster shell"  # the lowest layer that may import Dagster


@dataclass(frozen=True, slots=True)
class Import:
    module: str  # the importing module, as a path (``ol_dagster/sync/batch.py``)
    target: str  # what it names (``ol_dagster.catalog.protocol``, ``dagster._core...``)
    line: int


def layers_of(architecture: str) -> list[tuple[str, list[str]]]:
    """The "Layers" table: (layer, its paths), the highest first."""
    section = architecture.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    layers = []
    for row in rows[1:]:  # the header
        name, paths = (cell.strip() for cell in row.strip("|").split("|"))
        layers.append((name, re.findall(r"`([^`]+)`", paths)))
    return layers


def module_files(root: Path, package: str = PACKAGE) -> dict[str, str]:
    """Every module of the package: path relative to ``root`` -> source."""
    return {
        p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted((root / package).rglob("*.py"))
    }


def dotted(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: str, source: str) -> Iterator[Import]:
    """Every import of a module, wherever it is written, relative ones resolved."""
    package = dotted(path) if path.endswith("__init__.py") else dotted(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(path, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            for alias in node.names:
                yield Import(path, f"{base}.{alias.name}", node.lineno)


def resolve(target: str, modules: Mapping[str, str]) -> str | None:
    """The module of ours an import names (the longest dotted prefix that is one), or None."""
    while target:
        if target in modules:
            return modules[target]
        target = target.rpartition(".")[0]
    return None


def layer_index(layers: list[tuple[str, list[str]]], path: str) -> int | None:
    """The row (0 = highest) of the most specific path that holds ``path``."""
    best: tuple[int, int] | None = None  # (length of the matching path, row)
    for row, (_, paths) in enumerate(layers):
        for held in paths:
            holds = path == held or (held.endswith("/") and path.startswith(held))
            if holds and (best is None or len(held) > best[0]):
                best = (len(held), row)
    return None if best is None else best[1]


def graph(files: Mapping[str, str]) -> dict[str, set[str]]:
    """Module path -> the module paths of ours it imports."""
    by_name = {dotted(path): path for path in files}
    edges: dict[str, set[str]] = {path: set() for path in files}
    for path, source in files.items():
        for imp in imports_of(path, source):
            found = resolve(imp.target, by_name)
            if found is not None and found != path:
                edges[path].add(found)
    return edges


def cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def upward(layers: list[tuple[str, list[str]]], edges: Mapping[str, set[str]]) -> list[str]:
    out = []
    for path, targets in sorted(edges.items()):
        mine = layer_index(layers, path)
        for target in sorted(targets):
            theirs = layer_index(layers, target)
            if mine is not None and theirs is not None and theirs < mine:
                out.append(
                    f"{path} ({layers[mine][0]}) imports {target} ({layers[theirs][0]}, above it)"
                )
    return out


def dagster_imports(files: Mapping[str, str]) -> Iterator[Import]:
    for path, source in files.items():
        for imp in imports_of(path, source):
            if imp.target == "dagster" or imp.target.startswith(("dagster.", "dagster_")):
                yield imp


def private_dagster(files: Mapping[str, str], adapter: str = ADAPTER) -> list[str]:
    """Imports of a private Dagster module (a dotted part starting with ``_``) but the adapter's."""
    return sorted(
        f"{imp.module}:{imp.line} imports {imp.target}"
        for imp in dagster_imports(files)
        if imp.module != adapter and any(p.startswith("_") for p in imp.target.split(".")[1:-1])
    )


def dagster_below_the_shell(layers: list[tuple[str, list[str]]], files: Mapping[str, str]):
    shell = next(i for i, (name, _) in enumerate(layers) if name == DAGSTER_SHELL)
    return sorted(
        f"{imp.module}:{imp.line} imports {imp.target}"
        for imp in dagster_imports(files)
        if (layer_index(layers, imp.module) or 0) > shell
    )


# -- the package -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def layers() -> list[tuple[str, list[str]]]:
    table = layers_of(ARCHITECTURE.read_text(encoding="utf-8"))
    assert len(table) >= 5, table  # the page states the layers: this test would prove nothing
    return table


@pytest.fixture(scope="module")
def files() -> dict[str, str]:
    return module_files(ROOT)


def test_every_module_is_in_one_layer(layers, files) -> None:
    unplaced = [path for path in files if layer_index(layers, path) is None]
    assert not unplaced, f"modules no row of ARCHITECTURE.md's Layers holds: {unplaced}"
    stale = [p for _, paths in layers for p in paths if not any(ROOT.glob(p.rstrip("/")))]
    assert not stale, f"ARCHITECTURE.md's Layers names paths that do not exist: {stale}"


def test_imports_go_downward(layers, files) -> None:
    assert upward(layers, graph(files)) == []


def test_no_module_imports_itself_through_others(files) -> None:
    assert cycles(graph(files)) == []


def test_private_dagster_modules_are_named_in_the_adapter_only(files) -> None:
    assert private_dagster(files) == []
    assert any(  # the adapter exists and is where they are
        imp.target.startswith("dagster._") for imp in dagster_imports({ADAPTER: files[ADAPTER]})
    )


def test_nothing_below_the_dagster_shell_imports_dagster(layers, files) -> None:
    assert dagster_below_the_shell(layers, files) == []


# -- each rule can fail ----------------------------------------------------------------------------

MADE_UP_LAYERS = [("top", ["p/top.py"]), ("middle", ["p/mid/"]), ("bottom", ["p/"])]


def test_the_rules_catch_what_they_are_about() -> None:
    made_up = {
        "p/__init__.py": "",
        "p/top.py": "import p.mid.a\n",
        "p/mid/__init__.py": "",
        "p/mid/a.py": "from . import b\nfrom dagster._core import x\n",
        "p/mid/b.py": "def f():\n    from p.mid.a import g\n",  # a cycle, inside a function
        "p/low.py": "import typing\nif typing.TYPE_CHECKING:\n    from p.top import T\n",
    }
    edges = graph(made_up)

    assert edges["p/mid/a.py"] == {"p/mid/b.py"}
    assert cycles(edges) == [["p/mid/a.py", "p/mid/b.py"]]
    assert upward(MADE_UP_LAYERS, edges) == ["p/low.py (bottom) imports p/top.py (top, above it)"]
    assert private_dagster(made_up, adapter="p/top.py") == ["p/mid/a.py:2 imports dagster._core.x"]
    assert layer_index(MADE_UP_LAYERS, "p/mid/b.py") == 1  # the most specific path
    assert layer_index(MADE_UP_LAYERS, "q/other.py") is None


def test_the_table_is_read_as_the_page_writes_it() -> None:
    page = "# A\n\n## Layers\n\ntext\n\n| layer | modules |\n|---|---|\n| up | `x/`, `y.py` |\n"
    page += "| down | `z/` |\n\n## Next\n\n| not | `this` |\n"
    assert layers_of(page) == [("up", ["x/", "y.py"]), ("down", ["z/"])]
