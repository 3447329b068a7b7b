"""A change set's items as a sync finds them: what it keeps and what it only counts.

A first snapshot of 10,000 jobs adds hundreds of thousands of column flows; the change set lists
the first ``MAX_ITEMS`` (removals, then changes, then additions) and counts the rest. These tests
hold the order and the counts to the plain rule (sort everything, keep the first), and check
that the items beyond the list are counted without being held, and that every removal is kept
for what it breaks downstream.
"""

from __future__ import annotations

import random

import pytest

from ol_dagster.changes import changeset
from ol_dagster.changes.changeset import CHANGES, KINDS, ChangeSet, Collected, Item


def _item(kind: str, change: str, n: int) -> Item:
    ref = {"namespace": "db", "name": f"t{n % 7}"}
    if kind in ("dataFlow", "fieldFlow"):
        return {
            "kind": kind,
            "change": change,
            "job": {"namespace": "etl", "name": f"j{n % 5}"},
            "source": {**ref, "field": f"c{n}"},
            "target": {"namespace": "db", "name": f"out{n % 3}", "field": f"c{n}"},
        }
    return {"kind": kind, "change": change, **ref, "n": n}


def _sorted_prefix(items: list[Item], limit: int) -> tuple[list[Item], dict[str, dict[str, int]]]:
    """The rule the change set follows: every item sorted by change and kind (in the order
    given within each), the first ``limit`` kept, then ordered by object; all counted."""
    order = [(c, k) for c in ("removed", "changed", "added") for k in KINDS]
    ranked = sorted(items, key=lambda i: order.index((i["change"], i["kind"])))
    counts = {
        k: {c: sum(1 for i in items if (i["kind"], i["change"]) == (k, c)) for c in CHANGES}
        for k in KINDS
    }
    return sorted(ranked[:limit], key=changeset._order), counts


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_change_set_keeps_the_first_items_by_change_and_kind_and_counts_all(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(changeset, "MAX_ITEMS", 40)
    rng = random.Random(seed)
    # mostly additions, as a first snapshot, with removals and changes arriving late
    kinds = [(k, "added") for k in KINDS] * 6 + [(k, c) for k in KINDS for c in CHANGES]
    items = [_item(*rng.choice(kinds), n) for n in range(300)]
    expected, counts = _sorted_prefix(items, 40)
    change_set = ChangeSet.of("d", 1, "main", items)
    assert list(change_set.items) == expected
    assert change_set.counts == counts
    assert change_set.not_listed == 300 - 40


def test_items_beyond_the_list_are_counted_not_held(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(changeset, "MAX_ITEMS", 100)
    found = Collected()
    # a first snapshot: each job's column flows, then the job itself
    for job in range(200):
        found.add([_item("fieldFlow", "added", job * 10 + c) for c in range(10)])
        found.add([_item("job", "added", job)])
    held = sum(len(r) for r in found.ranked)
    assert held <= 2 * 100  # 2,200 found: what cannot be listed any more is dropped as it comes
    change_set = ChangeSet.kept("d", 1, "main", found)
    assert change_set.counts["fieldFlow"]["added"] == 2000
    assert change_set.counts["job"]["added"] == 200
    # jobs rank before column flows: the list is the first 100 jobs, the rest counted
    assert [i["n"] for i in change_set.items] == sorted(range(100), key=lambda n: (f"t{n % 7}", n))
    assert change_set.not_listed == 2100


def test_removals_are_kept_whole_for_what_they_break() -> None:
    found = Collected()
    removed = [_item("fieldFlow", "removed", n) for n in range(3)]
    found.add([*removed, _item("dataset", "added", 1)])
    assert found.removals == removed
