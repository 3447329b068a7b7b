"""Job namespace patterns as the glob languages they are.

``allowedJobNamespaces`` and ``sharedJobNamespaces`` are ``fnmatch.fnmatchcase`` patterns, so two
questions about them cannot be answered by comparing strings: is a pattern a single namespace
(``spark?`` is not, though it has no ``*``), and can two sets of patterns admit a common namespace
(``*`` and ``fin`` can, ``etl`` and ``ETL`` cannot, ``[a-c]x`` and ``bx`` can). The settings ask
the second one at load, for every two definitions on one catalog: one owner per namespace per
catalog.

Each pattern is read as fnmatch reads it (``fnmatch.translate``: ``*``, ``?``, ``[seq]``,
``[!seq]``, ranges, empty ranges dropped, a ``[`` without its ``]`` taken literally) into a list of
steps over sets of code points; two patterns are intersected by walking both automata at once
(their product) over those sets, so the alphabet is all of Unicode without enumerating it. The
answer is a concrete namespace both patterns match, or None.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

_MAX = 0x10FFFF
GLOB_CHARACTERS = "*?["

# A set of code points: sorted, disjoint, non-adjacent inclusive ranges.
Ranges = tuple[tuple[int, int], ...]
_ANY: Ranges = ((0, _MAX),)

# the characters a witness is preferably made of, most readable first
_READABLE: tuple[Ranges, ...] = (
    ((ord("a"), ord("z")),),
    ((ord("0"), ord("9")),),
    ((ord("A"), ord("Z")),),
    ((0x21, 0x7E),),
    ((0xA1, _MAX),),
)


def is_literal(pattern: str) -> bool:
    """A pattern that is one namespace: it holds no glob character at all (``*``, ``?``, ``[``),
    so it matches exactly itself."""
    return not any(c in pattern for c in GLOB_CHARACTERS)


def common_namespace(a: Sequence[str], b: Sequence[str]) -> str | None:
    """A non-empty namespace some pattern of ``a`` and some pattern of ``b`` both match under
    ``fnmatchcase``, or None when no namespace is admitted by both."""
    for left in a:
        steps_left = _steps(left)
        for right in b:
            witness = _intersection(steps_left, _steps(right))
            if witness is not None:
                return witness
    return None


# -- sets of code points ---------------------------------------------------------------------------


def _normalized(ranges: list[tuple[int, int]]) -> Ranges:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def _complement(ranges: Ranges) -> Ranges:
    out: list[tuple[int, int]] = []
    start = 0
    for lo, hi in ranges:
        if lo > start:
            out.append((start, lo - 1))
        start = hi + 1
    if start <= _MAX:
        out.append((start, _MAX))
    return tuple(out)


def _meet(a: Ranges, b: Ranges) -> Ranges:
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def _pick(ranges: Ranges) -> str:
    """One character of a non-empty set, a readable one when the set has any."""
    for readable in _READABLE:
        if met := _meet(ranges, readable):
            return chr(met[0][0])
    return chr(ranges[0][0])


# -- a pattern as fnmatch reads it -----------------------------------------------------------------

# One character of a set, or None for ``*``: any run of characters, the empty one included.
Step = Ranges | None


def _steps(pattern: str) -> list[Step]:
    """The pattern as a sequence of steps, as ``fnmatch.translate`` reads it."""
    steps: list[Step] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            if not steps or steps[-1] is not None:
                steps.append(None)
        elif c == "?":
            steps.append(_ANY)
        elif c == "[":
            j = i
            if j < n and pattern[j] == "!":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:  # no closing bracket: a literal '['
                steps.append(((ord("["), ord("[")),))
            else:
                steps.append(_bracket(pattern, i, j))
                i = j + 1
        else:
            steps.append(((ord(c), ord(c)),))
    return steps


# the class of a regular expression fnmatch builds from a bracket: a character, or a hyphen
# that separates two chunks (a range operator); every other hyphen is an escaped literal
_RANGE_HYPHEN = None


def _bracket(pattern: str, i: int, j: int) -> Ranges:
    """The set ``pattern[i - 1 : j + 1]`` (``[`` ... ``]``) matches, with fnmatch's quirks: a
    hyphen after a range is literal, empty ranges (``z-a``) are dropped and their ends with them,
    and whatever then comes first decides the negation (``[b-a!x]`` is ``[!x]``)."""
    stuff = pattern[i:j]
    if "-" not in stuff:
        chunks = [stuff]
    else:
        chunks = []
        k = i + 2 if pattern[i] == "!" else i + 1
        while True:
            k = pattern.find("-", k, j)
            if k < 0:
                break
            chunks.append(pattern[i:k])
            i = k + 1
            k = k + 3
        chunk = pattern[i:j]
        if chunk:
            chunks.append(chunk)
        else:
            chunks[-1] += "-"
        for k in range(len(chunks) - 1, 0, -1):
            if chunks[k - 1][-1] > chunks[k][0]:
                chunks[k - 1] = chunks[k - 1][:-1] + chunks[k][1:]
                del chunks[k]
    items: list[str | None] = []
    for index, chunk in enumerate(chunks):
        if index:
            items.append(_RANGE_HYPHEN)
        items.extend(chunk)
    if not items:
        return ()  # never matches
    negated = items[0] == "!"
    if negated:
        items = items[1:]
        if not items:
            return _ANY  # "[!]" once emptied: any character
    return _complement(_class(items)) if negated else _class(items)


def _class(items: list[str | None]) -> Ranges:
    """The set a regular-expression class of these items is, read as ``re`` reads it."""
    ranges: list[tuple[int, int]] = []
    p = 0
    while p < len(items):
        first = ord(items[p] or "-")
        p += 1
        if p < len(items) and items[p] is _RANGE_HYPHEN:
            p += 1
            if p >= len(items):  # a hyphen before ']': literal
                ranges += [(first, first), (ord("-"), ord("-"))]
                break
            last = ord(items[p] or "-")
            p += 1
            if last < first:  # fnmatch drops these: ``re`` would refuse the pattern
                raise ValueError(f"the range {chr(first)}-{chr(last)} is empty")
            ranges.append((first, last))
        else:
            ranges.append((first, first))
    return _normalized(ranges)


# -- two patterns at once --------------------------------------------------------------------------


def _closure(steps: list[Step], i: int) -> list[int]:
    """Positions reachable from ``i`` without reading a character (past ``*`` steps)."""
    out = [i]
    while i < len(steps) and steps[i] is None:
        i += 1
        out.append(i)
    return out


def _moves(steps: list[Step], i: int) -> list[tuple[Ranges, int]]:
    """(characters, next position) for each way to read one character from position ``i``."""
    out: list[tuple[Ranges, int]] = []
    for p in _closure(steps, i):
        if p < len(steps):
            step = steps[p]
            out.append((_ANY, p) if step is None else (step, p + 1))
    return out


_State = tuple[int, int, bool]  # a position in each pattern, and whether a character was read


def _intersection(a: list[Step], b: list[Step]) -> str | None:
    """The shortest non-empty string both step lists match, or None: a breadth-first walk of
    the product automaton, a state being both positions and whether a character was read."""
    start: _State = (0, 0, False)
    parents: dict[_State, tuple[_State, str] | None] = {start: None}
    queue: deque[_State] = deque([start])
    while queue:
        state = queue.popleft()
        i, j, read = state
        if read and len(a) in _closure(a, i) and len(b) in _closure(b, j):
            chars: list[str] = []
            at = state
            while (link := parents[at]) is not None:
                at, char = link
                chars.append(char)
            return "".join(reversed(chars))
        for set_a, next_i in _moves(a, i):
            for set_b, next_j in _moves(b, j):
                both = _meet(set_a, set_b)
                following: _State = (next_i, next_j, True)
                if both and following not in parents:
                    parents[following] = (state, _pick(both))
                    queue.append(following)
    return None
