"""The front door: what a newcomer imports from ``ol_dagster`` and reads in ARCHITECTURE.md.

``import ol_dagster`` must stay free of Dagster (the receiver and most commands start without it),
every public name must resolve, and every path ARCHITECTURE.md cites must exist, so that the map
does not drift away from the code it describes.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import ol_dagster

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "ARCHITECTURE.md"

# a backticked path into the package or the tests, optionally followed by ``::name``
_CITED = re.compile(r"`((?:ol_dagster|ol_dagster_tests)/[^`\s:]*)(?:::[^`]*)?`")


def test_import_does_not_load_dagster() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import ol_dagster, sys; assert 'dagster' not in sys.modules"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", ol_dagster.__all__)
def test_public_name_resolves(name: str) -> None:
    value = getattr(ol_dagster, name)
    assert getattr(value, "__name__", None) == name
    assert name in dir(ol_dagster)


def test_public_api_is_the_documented_one() -> None:
    assert {"build_defs", "OpenLineageTranslator", "Catalog", "load_settings", "Settings"} <= set(
        ol_dagster.__all__
    )


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = ol_dagster.no_such_name  # type: ignore[attr-defined]


def cited_paths(text: str) -> list[str]:
    return sorted(set(_CITED.findall(text)))


def test_every_cited_path_exists() -> None:
    cited = cited_paths(ARCHITECTURE.read_text(encoding="utf-8"))
    assert len(cited) > 20, cited  # the page is a map: it cites the package throughout
    missing = [p for p in cited if not any(ROOT.glob(p.rstrip("/")))]
    assert not missing, f"ARCHITECTURE.md cites paths that do not exist: {missing}"


def test_cited_path_check_would_catch_a_missing_path() -> None:
    assert cited_paths("see `ol_dagster/sync/cleanup.py::plan_batch` and `ol_dagster/nope/`") == [
        "ol_dagster/nope/",
        "ol_dagster/sync/cleanup.py",
    ]
    assert not any(ROOT.glob("ol_dagster/nope"))


def test_modules_cite_sections_the_page_has() -> None:
    headings = set(re.findall(r"^#+ (.+)$", ARCHITECTURE.read_text(encoding="utf-8"), re.M))
    cited = {
        (path.relative_to(ROOT).as_posix(), section)
        for path in (ROOT / "ol_dagster").rglob("*.py")
        for section in re.findall(r'ARCHITECTURE\.md "([^"]+)"', path.read_text(encoding="utf-8"))
    }
    assert cited, "no module cites a section of ARCHITECTURE.md: this check would prove nothing"
    missing = [(path, section) for path, section in cited if section not in headings]
    assert not missing, f"sections cited but not in ARCHITECTURE.md: {missing}"


# what git leaves in a file whose merge it could not finish
_UNMERGED = re.compile(r"^(<{7} |>{7} )", re.M)


def unmerged(pages: dict[str, str]) -> list[str]:
    return sorted(name for name, text in pages.items() if _UNMERGED.search(text))


def test_no_page_holds_an_unfinished_merge() -> None:
    pages = [ARCHITECTURE, ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = unmerged({p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8") for p in pages})
    assert not found, f"pages with both sides of a merge still in them: {found}"
    assert unmerged({"a.md": "x\n<<<<<<< HEAD\ny\n=======\nz\n>>>>>>> other\n"}) == ["a.md"]
