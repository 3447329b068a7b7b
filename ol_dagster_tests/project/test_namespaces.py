"""Job namespace patterns: whether two sets of them can admit a common namespace, exactly as
``fnmatchcase`` reads them (the settings refuse two definitions on one catalog that can).

The answer is checked against fnmatch itself: every witness must match a pattern of each side,
and a brute-force search over every string up to a length, on an alphabet that stands for all of
Unicode as far as the two patterns can tell, must find a common namespace exactly when there is
one of that length. Patterns are drawn from the characters real namespaces and adversaries use:
case variants, separators, ``%``, blanks, glob characters, NFC and NFD forms of one letter.
"""

from __future__ import annotations

import itertools
from fnmatch import fnmatchcase

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from ol_dagster.namespaces import common_namespace, is_literal

NAME_CHARS = ["e", "E", "t", "T", "|", "#", ".", "/", ":", "%", "_", " ", "\u00e9", "\u0301"]
GLOB_CHARS = ["?", "*", "[", "]", "!", "-"]
# "é" written NFC (one code point) and NFD (e + combining acute): two different namespaces
PIECES = [*NAME_CHARS, *GLOB_CHARS, "e\u0301"]

# classes drawn whole too, so ranges (empty ones as well), negations and odd members are common
_members = st.lists(
    st.one_of(
        st.sampled_from(PIECES),
        st.tuples(st.sampled_from(PIECES), st.sampled_from(PIECES)).map("-".join),
    ),
    max_size=3,
).map("".join)
_classes = st.tuples(st.sampled_from(["", "!"]), _members).map(lambda t: f"[{t[0]}{t[1]}]")
patterns = st.lists(st.one_of(st.sampled_from(PIECES), _classes), min_size=1, max_size=4).map(
    "".join
)

# strings up to this many per check of the brute force (about 10 ms)
BUDGET = 4000


def _matches(name: str, side: list[str]) -> bool:
    return any(fnmatchcase(name, p) for p in side)


def _alphabet(*sides: list[str]) -> list[str]:
    """Characters that stand for every code point: each character of the patterns, and one of
    each stretch between them (a range's ends are characters of its pattern, so code points of
    one stretch are matched alike by every pattern)."""
    points = sorted({ord(c) for side in sides for p in side for c in p})
    if not points:
        return ["a"]
    stand_ins = set(points) | {p + 1 for p in points if p < 0x10FFFF}
    if points[0] > 0:
        stand_ins.add(points[0] - 1)
    return [chr(p) for p in sorted(stand_ins)]


def _shortest_by_brute_force(a: list[str], b: list[str]) -> tuple[str | None, int]:
    """The shortest non-empty string both sides admit, searching every string up to the longest
    length that fits the budget; and that length."""
    alphabet = _alphabet(a, b)
    longest, total = 0, 0
    while total + len(alphabet) ** (longest + 1) <= BUDGET:
        longest += 1
        total += len(alphabet) ** longest
    for length in range(1, longest + 1):
        for chars in itertools.product(alphabet, repeat=length):
            name = "".join(chars)
            if _matches(name, a) and _matches(name, b):
                return name, longest
    return None, longest


@given(
    a=st.lists(patterns, min_size=1, max_size=2),
    b=st.lists(patterns, min_size=1, max_size=2),
)
def test_a_common_namespace_is_found_exactly_when_one_exists(a: list[str], b: list[str]) -> None:
    witness = common_namespace(a, b)
    found, longest = _shortest_by_brute_force(a, b)

    if witness is not None:
        assert witness and _matches(witness, a) and _matches(witness, b), witness
    if found is not None:
        assert witness is not None, f"{found!r} is admitted by both sides"
        if len(a) == len(b) == 1:
            assert len(witness) == len(found), "the witness is one of the shortest"
    else:
        assert witness is None or len(witness) > longest


@st.composite
def _pattern_matching(draw: st.DrawFn, name: str) -> str:
    """A pattern that admits ``name``: each character kept, or replaced by ``?`` or a class
    holding it, ``*`` stretches over runs of characters, and classes that leave it out."""
    out: list[str] = []
    i = 0
    while i < len(name):
        c = name[i]
        how = draw(st.sampled_from(["keep", "?", "class", "not", "range", "star", "star_before"]))
        other = draw(st.sampled_from([x for x in NAME_CHARS if x != c]))
        if how == "keep":
            out.append(f"[{c}]" if c in "*?[" else c)
        elif how == "?":
            out.append("?")
        elif how == "class":
            out.append(f"[{other}{c}]")
        elif how == "not":
            out.append(f"[!{other}]")
        elif how == "range":
            lo, hi = sorted([c, other])
            out.append(f"[{lo}-{hi}]")
        elif how == "star":
            out.append("*")
            i += draw(st.integers(0, len(name) - i - 1))
        else:
            out.append("*" + (f"[{c}]" if c in "*?[" else c))
        i += 1
    if draw(st.booleans()):
        out.append("*")
    return "".join(out)


@given(st.data(), st.lists(st.sampled_from([*NAME_CHARS, *GLOB_CHARS]), min_size=1, max_size=40))
def test_patterns_built_around_one_namespace_always_meet(data: st.DataObject, chars: list[str]):
    """Long namespaces, beyond the brute force's reach: two patterns that both admit one
    namespace are never said to be disjoint."""
    name = "".join(chars)
    a = data.draw(_pattern_matching(name))
    b = data.draw(_pattern_matching(name))
    # fnmatch's own quirks may make a drawn pattern miss the name (``[`` taken as a class)
    assume(fnmatchcase(name, a) and fnmatchcase(name, b))

    witness = common_namespace([a], [b])

    assert witness is not None
    assert fnmatchcase(witness, a) and fnmatchcase(witness, b)


@pytest.mark.parametrize(
    ("a", "b", "common"),
    [
        ("*", "fin", "fin"),
        ("fin", "fin", "fin"),
        ("spark?", "spark1", "spark1"),
        ("etl", "ETL", None),  # case counts
        ("[a-c]x", "bx", "bx"),
        ("a*b", "*c", None),  # one ends with b, the other with c
        ("*", "*", "a"),  # never the empty namespace
        ("etl", "etl_x", None),  # a name is not a prefix
        ("etl|x", "etl", None),
        ("\u00e9tl", "e\u0301tl", None),  # NFC and NFD are different namespaces
        ("[!e]tl", "etl", None),
        ("[z-a]", "?", None),  # fnmatch drops an empty range: the class matches nothing
        ("[b-a!x]", "x", None),  # ... and what then comes first negates it
        ("[b-a!x]", "y", "y"),
        ("[etl", "[etl", "[etl"),  # a '[' without ']' is a literal
        ("[]]", "]", "]"),
        ("[!]]", "]", None),
        ("a[-]", "a-", "a-"),
        ("fin*", "*ance", "finance"),
    ],
)
def test_written_cases(a: str, b: str, common: str | None) -> None:
    assert common_namespace([a], [b]) == common
    assert common_namespace([b], [a]) == common


def test_sets_of_patterns_meet_when_any_two_do() -> None:
    assert common_namespace(["etl", "features"], ["ops", "feat*"]) == "features"
    assert common_namespace(["etl", "features"], ["ops", "ml"]) is None
    assert common_namespace([], ["*"]) is None


@pytest.mark.parametrize(
    ("pattern", "literal"),
    [
        ("fin", True),
        ("etl.daily|x", True),
        ("spark?", False),  # no '*', yet several namespaces
        ("spark*", False),
        ("spark[12]", False),
        ("spark[", False),  # fnmatch reads it literally; a single namespace is one without any
        ("a]b!-", True),
    ],
)
def test_a_literal_pattern_has_no_glob_character(pattern: str, literal: bool) -> None:
    assert is_literal(pattern) is literal
