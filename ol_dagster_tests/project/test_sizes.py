"""Short modules and short functions, each module saying why it exists (ARCHITECTURE.md,
"Layers").

A module of more than 700 lines holds more than one concept, and a function of more than 100
lines more than one step: both are split along what they do, not at a line count. A function
counts from its first decorator to its last line, docstring and nested functions included.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_MODULE_LINES = 700
MAX_FUNCTION_LINES = 100


def sources(root: Path = ROOT) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted((root / "ol_dagster").rglob("*.py"))
    }


def function_lengths(source: str) -> Iterator[tuple[str, int, int]]:
    """(qualified name, first line, lines) of every function and method, nested ones too."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, int, int]]:
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                name = f"{prefix}{child.name}"
                yield name, child.lineno, (child.end_lineno or child.lineno) - first + 1
                name += "."
            elif isinstance(child, ast.ClassDef):
                name = f"{prefix}{child.name}."
            yield from walk(child, name)

    yield from walk(ast.parse(source), "")


def too_long_modules(files: Mapping[str, str], limit: int = MAX_MODULE_LINES) -> list[str]:
    return [
        f"{path}: {n} lines"
        for path, source in files.items()
        if (n := len(source.splitlines())) > limit
    ]


def too_long_functions(files: Mapping[str, str], limit: int = MAX_FUNCTION_LINES) -> list[str]:
    return [
        f"{path}:{line} {name}: {n} lines"
        for path, source in files.items()
        for name, line, n in function_lengths(source)
        if n > limit
    ]


def test_no_module_is_longer_than_700_lines() -> None:
    assert too_long_modules(sources()) == []


def test_no_function_is_longer_than_100_lines() -> None:
    assert too_long_functions(sources()) == []


def test_every_module_says_why_it_exists() -> None:
    silent = [
        path for path, source in sources().items() if not ast.get_docstring(ast.parse(source))
    ]
    assert silent == []


def test_the_limits_would_catch_a_long_module_and_a_long_function() -> None:
    body = "\n".join(f"        x{i} = {i}" for i in range(99))
    made_up = {"m.py": f'"""Why."""\n\n\nclass C:\n    @staticmethod\n    def f():\n{body}\n'}

    assert list(function_lengths(made_up["m.py"])) == [("C.f", 6, 101)]
    assert too_long_functions(made_up) == ["m.py:6 C.f: 101 lines"]
    assert too_long_modules(made_up, limit=104) == ["m.py: 105 lines"]
    assert too_long_modules(made_up) == []
