"""README.md and docs/ are for users: short enough to read, links that lead somewhere, no words
from how the project was built.

The README stays a front door (at most 300 lines; the rest lives in docs/ by subject), every
relative link of the README, docs/ and the benchmark history points at a file of the repository
(and at a heading of it when it names one), the README's settings example loads and its table of
settings agrees with the reference in docs/configuration.md, and no page speaks of the project's
own work items ("issue 14", "step 3", "wave", "seed" documents, commit hashes in prose).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ol_dagster.settings import load_settings
from ol_dagster_tests.conftest import PROJECT_ROOT
from ol_dagster_tests.project.test_self_contained import BESIDE

README = PROJECT_ROOT / "README.md"
DOCS = sorted((PROJECT_ROOT / "docs").glob("*.md"))
USER_PAGES = [README, *DOCS]
LINKED_PAGES = [
    *USER_PAGES,
    PROJECT_ROOT / "benchmarks" / "HISTORY.md",
    PROJECT_ROOT / "ARCHITECTURE.md",
]

_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)


def prose(text: str) -> str:
    """The page without its fenced code blocks (commands and examples are not prose)."""
    return _FENCE.sub("", text)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(h) for h in _HEADING.findall(prose(page.read_text(encoding="utf-8")))}


def broken_links(text: str, page: Path) -> list[str]:
    """Each relative link of ``text`` (the page at ``page``) that names no file of the repository,
    or no heading of the page it names."""
    broken = []
    for target in _LINK.findall(prose(text)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path_part, _, anchor = target.partition("#")
        linked = (page.parent / path_part).resolve() if path_part else page
        inside = linked.is_relative_to(PROJECT_ROOT) and linked.exists()
        if not inside or (anchor and linked.suffix == ".md" and anchor not in anchors(linked)):
            broken.append(target)
    return broken


def test_the_readme_is_at_most_300_lines() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= 300, f"README.md has {lines} lines: move a subject to docs/"


def test_the_readme_links_every_page_of_docs() -> None:
    text = README.read_text(encoding="utf-8")
    missing = [p.name for p in DOCS if f"](docs/{p.name})" not in text]
    assert not missing, f"docs/ pages the README does not link: {missing}"


@pytest.mark.parametrize("page", LINKED_PAGES, ids=lambda p: p.relative_to(PROJECT_ROOT).as_posix())
def test_relative_links_resolve(page: Path) -> None:
    assert broken_links(page.read_text(encoding="utf-8"), page) == []


def test_the_link_check_finds_a_broken_link() -> None:
    assert slug("Before the first sync: `ol-dagster check`") == (
        "before-the-first-sync-ol-dagster-check"
    )
    text = (
        "[ok](catalogs.md#one-feed-several-catalogs) ![img](column-lineage.png)"
        " [moved](docs/catalogs.md) [gone](catalogs.md#no-such-heading) [out](../../etc/passwd)"
        " [web](https://dagster.io) [here](#a-heading)\n```\n[in code](nowhere.md)\n```\n"
    )
    page = PROJECT_ROOT / "docs" / "a-page.md"  # read only for its own anchors: none
    assert broken_links(text, page) == [
        "docs/catalogs.md",
        "catalogs.md#no-such-heading",
        "../../etc/passwd",
        "#a-heading",
    ]


# --- no internal vocabulary -------------------------------------------------------------------

_INTERNAL = [
    (re.compile(r"\bissues?\b", re.I), "a work item"),
    (re.compile(r"\bsteps?\s+\d", re.I), "a numbered work step"),
    (re.compile(r"\bwaves?\b", re.I), "a wave of work"),
    (re.compile(r"(?<!dbt )\bseeds?\b", re.I), "a seed document"),
    (
        re.compile(
            r"blindata-openlineage-removal|openlineage-jobtype-job-facet|"
            r"openmetadata-openlineage-events-api|egeria-leveraging-open-lineage"
        ),
        "a seed file name",
    ),
    (re.compile(r"\blead'?s\b|\bhelpers?\b", re.I), "the people who built it"),
    (re.compile(r"/work/|\bshared/(?:corpus|seeds|design)\b"), "a path of the build machine"),
]
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_HEX = re.compile(r"(?<![\w-])[0-9a-f]{7,40}(?![\w-])")


def internal_words(text: str) -> list[str]:
    found = [f"{m.group(0)!r} ({why})" for rx, why in _INTERNAL for m in rx.finditer(text)]
    for m in _HEX.finditer(_UUID.sub("", prose(text))):
        if re.search(r"[a-f]", m.group(0)) and re.search(r"\d", m.group(0)):
            found.append(f"{m.group(0)!r} (a commit hash)")
    return found


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: p.relative_to(PROJECT_ROOT).as_posix())
def test_no_internal_vocabulary(page: Path) -> None:
    assert internal_words(page.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "text",
    [
        "Goals of issue 14 on the real path",
        "## Before step 3: the real path",
        "the second wave of changes",
        "(seed `blindata-openlineage-removal-of-deprecated-metadata`)",
        "the lead's decision",
        "measured at commit 65f73f2 on SQLite",
        f"of the 110 RunEvents of `../{BESIDE}/corpus`",
    ],
)
def test_the_vocabulary_check_finds_an_internal_word(text: str) -> None:
    assert internal_words(text)


def test_the_vocabulary_check_lets_user_words_pass() -> None:
    text = (
        "the failing step and its error; `dbt seed` loads a CSV; uuid "
        "6f1c2d9e-4b7a-4c1e-9d2f-0a1b2c3d4e5f; a 128-bit digest\n```\nsha 65f73f2\n```\n"
    )
    assert internal_words(text) == []


# --- the README's settings -------------------------------------------------------------------


def test_the_readme_settings_example_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = README.read_text(encoding="utf-8")
    (example,) = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "store:" in b]
    path = tmp_path / "ol_dagster.yaml"
    path.write_text(example, encoding="utf-8")
    monkeypatch.setenv("OL_TOKEN_ANALYTICS", "a-token-for-the-example")
    settings = load_settings(path)
    assert [d.name for d in settings.definitions] == ["analytics_repo"]
    assert yaml.safe_load(example)["definitions"][0]["snapshotMode"] == "BATCH_SNAPSHOT"


def _table_defaults(page: Path) -> dict[str, str]:
    """key -> default of each settings table row whose first cell is one backticked key."""
    rows = re.findall(r"^\| `([^`]+)`[^|]*\| ([^|]+) \|", page.read_text(encoding="utf-8"), re.M)
    return {key: default.strip() for key, default in rows}


def test_the_readme_settings_agree_with_the_reference() -> None:
    readme = _table_defaults(README)
    reference = _table_defaults(PROJECT_ROOT / "docs" / "configuration.md")
    compared = {
        k: v for k, v in readme.items() if v.startswith("`") or v in {"required", "none (keep)"}
    }
    assert len(compared) >= 6, readme
    differ = {k: (v, reference.get(k)) for k, v in compared.items() if reference.get(k) != v}
    assert not differ, f"README default != docs/configuration.md default: {differ}"
