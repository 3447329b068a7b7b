"""A batch's lineage change set: jobs, datasets, data flows and column flows added, removed and
changed in one catalog.

It is computed from what the sync did, never by comparing whole catalogs: each job the upload
wrote is compared with its part synced before (``parts``), each job the cleanup removed gives its
last part as removed, and a dataset no job of the definition reads or writes any more is removed
with it. Every item names its object (namespace and name; a flow both ends and its job; a column
flow the dataset and column at both ends) and, when changed, what changed.

``neighbourhood`` turns a change set into nodes and edges for a picture: the changed objects and
one hop around them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ol_dagster.changes.parts import DatasetPart, JobPart
from ol_dagster.lineage.graph import NodeKey

KINDS = ("job", "dataset", "dataFlow", "fieldFlow")
MAX_ITEMS = 10_000  # items a change set keeps; beyond, they are counted only
CHANGES = ("added", "removed", "changed")

Item = dict[str, Any]
Node = tuple[str, str, str, str]  # (id, label, kind "job" | "dataset", state)
Edge = tuple[str, str, str]  # (source id, target id, state)


def _ref(key: Sequence[str]) -> dict[str, str]:
    out = {"namespace": key[0], "name": key[1]}
    if len(key) > 2:
        out["field"] = key[2]
    return out


def _key(ref: Mapping[str, str]) -> tuple[str, ...]:
    if "field" in ref:
        return (ref["namespace"], ref["name"], ref["field"])
    return (ref["namespace"], ref["name"])


@dataclass(frozen=True, slots=True)
class ChangeSet:
    """What a batch changed in a catalog. ``counts``: {kind: {added, removed, changed}};
    ``impacted``: the downstream readers its removals leave without their input
    (``downstream``)."""

    definition: str
    batch: int
    catalog: str
    counts: Mapping[str, Mapping[str, int]]
    items: tuple[Item, ...]
    impacted: tuple[Item, ...] = field(default=())

    not_listed: int = 0  # items counted but not kept (``MAX_ITEMS``)

    @classmethod
    def of(
        cls,
        definition: str,
        batch: int,
        catalog: str,
        items: Iterable[Item],
        impacted: Iterable[Item] = (),
        *,
        dedupe: bool = False,
        not_listed: int = 0,
    ) -> ChangeSet:
        """The change set of ``items`` (``dedupe``: one per object, the last given): removals
        first, then changes, then additions, each by kind; the first ``MAX_ITEMS`` kept and all
        counted."""
        found = Collected()
        found.add(_dedupe(items) if dedupe else items)
        return cls.kept(definition, batch, catalog, found, impacted, not_listed=not_listed)

    @classmethod
    def kept(
        cls,
        definition: str,
        batch: int,
        catalog: str,
        found: Collected,
        impacted: Iterable[Item] = (),
        *,
        not_listed: int = 0,
    ) -> ChangeSet:
        """The change set of the items ``found`` (``Collected``, not ``whole``), as ``of``
        gives it."""
        counts = {k: {c: 0 for c in CHANGES} for k in KINDS}
        for (kind, change), rank in _RANK.items():
            counts[kind][change] = found.seen[rank]
        # by change and kind first, then by object among those kept
        kept = sorted([i for ranked in found.ranked for i in ranked][:MAX_ITEMS], key=_order)
        not_listed += sum(found.seen) - len(kept)
        return cls(definition, batch, catalog, counts, tuple(kept), tuple(impacted), not_listed)

    @property
    def empty(self) -> bool:
        return not self.items

    def as_dict(self) -> dict[str, Any]:
        return {
            "definition": self.definition,
            "batch": self.batch,
            "catalog": self.catalog,
            "counts": {k: dict(v) for k, v in self.counts.items()},
            "items": list(self.items),
            "itemsNotListed": self.not_listed,
            "impacted": list(self.impacted),
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> ChangeSet:
        return cls(
            doc["definition"],
            int(doc["batch"]),
            doc["catalog"],
            {k: dict(v) for k, v in (doc.get("counts") or count([])).items()},
            tuple(doc.get("items") or []),
            tuple(doc.get("impacted") or []),
            int(doc.get("itemsNotListed") or 0),
        )


def count(items: Iterable[Item]) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {k: {c: 0 for c in CHANGES} for k in KINDS}
    for item in items:
        counts[item["kind"]][item["change"]] += 1
    return counts


def _identity(item: Item) -> tuple[Any, ...]:
    ends = tuple(_key(item[k]) for k in ("job", "source", "target") if k in item)
    return (item["kind"], item.get("namespace", ""), item.get("name", ""), ends)


# what a person reads first, and what a long change set keeps: removals, then changes, then
# additions, each by kind
_RANK = {
    (k, c): i
    for i, (c, k) in enumerate((c, k) for c in ("removed", "changed", "added") for k in KINDS)
}


def _rank(item: Item) -> int:
    return _RANK[item["kind"], item["change"]]


def _order(item: Item) -> tuple[Any, ...]:
    return (_rank(item), _identity(item))


class Collected:
    """A change set's items as they are found, kept as ``ChangeSet.of`` keeps them: every one
    counted; of each change and kind (``_RANK``), in the order found, only those that can still
    be among the first ``MAX_ITEMS``; and every one that removes something (``removals``: what
    the change set breaks downstream is judged on them). A first snapshot adds hundreds of
    thousands of column flows (~90 MB of items at 10,000 jobs): they are counted, not held.
    ``whole``: every item is kept (``items``), for a change set merged one per object with an
    earlier one."""

    def __init__(self, *, whole: bool = False) -> None:
        self.whole = whole
        self.items: list[Item] = []  # whole only
        self.removals: list[Item] = []
        self.seen = [0] * len(_RANK)  # found, by rank
        self.ranked: list[list[Item]] = [[] for _ in _RANK]  # kept, by rank (not whole)

    def add(self, items: Iterable[Item]) -> None:
        seen, ranked = self.seen, self.ranked
        for item in items:
            if item["change"] == "removed" or "fieldsRemoved" in item:
                self.removals.append(item)
            if self.whole:
                self.items.append(item)
                continue
            rank = _rank(item)
            # those found before it of its rank and of any rank before: once past the limit,
            # every later one of its rank is too
            if seen[rank] + sum(seen[:rank]) < MAX_ITEMS:
                ranked[rank].append(item)
            seen[rank] += 1


def _dedupe(items: Iterable[Item]) -> list[Item]:
    """One item per object: the last one given wins."""
    return list({_identity(i): i for i in items}.values())


def job_changes(key: NodeKey, old: JobPart | None, new: JobPart | None) -> list[Item]:
    """The items of one job: itself, its data flows and its column flows."""
    job = _ref(key)
    before, after = old or {}, new or {}
    items: list[Item] = []
    for kind, name in (("dataFlow", "dataFlows"), ("fieldFlow", "fieldFlows")):
        was = {tuple(map(tuple, f)) for f in before.get(name) or []}
        now = {tuple(map(tuple, f)) for f in after.get(name) or []}
        for change, ends in (("added", now - was), ("removed", was - now)):
            items.extend(
                {"kind": kind, "change": change, "job": job, "source": _ref(s), "target": _ref(t)}
                for s, t in ends
            )
    if old is None or new is None:
        if old is not new:
            items.append({"kind": "job", "change": "added" if old is None else "removed", **job})
        return items
    what: Item = {}
    for name in ("inputs", "outputs"):
        was = {tuple(k) for k in before.get(name) or []}
        now = {tuple(k) for k in after.get(name) or []}
        if now - was:
            what[f"{name}Added"] = [_ref(k) for k in sorted(now - was)]
        if was - now:
            what[f"{name}Removed"] = [_ref(k) for k in sorted(was - now)]
    if before.get("sql") != after.get("sql"):
        what["sqlChanged"] = True
    columns = [i for i in items if i["kind"] == "fieldFlow"]
    if columns:
        what["fieldFlowsAdded"] = sum(1 for i in columns if i["change"] == "added")
        what["fieldFlowsRemoved"] = len(columns) - what["fieldFlowsAdded"]
    if what:
        items.append({"kind": "job", "change": "changed", **job, **what})
    return items


def dataset_change(key: NodeKey, old: DatasetPart | None, new: DatasetPart | None) -> Item | None:
    """A dataset's item: added, removed, or changed fields (compared only when both field lists
    are known)."""
    ref = _ref(key)
    if old is None and new is not None:
        return {"kind": "dataset", "change": "added", **ref}
    if new is None:
        return None if old is None else {"kind": "dataset", "change": "removed", **ref}
    assert old is not None
    was, now = old.get("fields"), new.get("fields")
    if was is None or now is None or was == now:
        return None
    item: Item = {"kind": "dataset", "change": "changed", **ref}
    if set(now) - set(was):
        item["fieldsAdded"] = sorted(set(now) - set(was))
    if set(was) - set(now):
        item["fieldsRemoved"] = sorted(set(was) - set(now))
    return item


def describe(item: Item) -> tuple[str, str]:
    """An item as a person reads it in a table: (object, what changed)."""
    if "source" in item:
        s, t, j = item["source"], item["target"], item["job"]
        sf = f".{s['field']}" if "field" in s else ""
        tf = f".{t['field']}" if "field" in t else ""
        what = f"by job {j['namespace']}:{j['name']}"
        return f"{s['namespace']}:{s['name']}{sf} → {t['namespace']}:{t['name']}{tf}", what
    parts = []
    for name, sign in (
        ("inputsAdded", "inputs +"),
        ("inputsRemoved", "inputs −"),
        ("outputsAdded", "outputs +"),
        ("outputsRemoved", "outputs −"),
    ):
        if item.get(name):
            parts.append(sign + ", ".join(f"{r['namespace']}:{r['name']}" for r in item[name]))
    if item.get("sqlChanged"):
        parts.append("SQL edited")
    if item.get("fieldFlowsAdded") or item.get("fieldFlowsRemoved"):
        added, removed = item.get("fieldFlowsAdded", 0), item.get("fieldFlowsRemoved", 0)
        parts.append(f"column flows +{added} −{removed}")
    for name, sign in (("fieldsAdded", "fields +"), ("fieldsRemoved", "fields −")):
        if item.get(name):
            parts.append(sign + ", ".join(item[name]))
    return f"{item['namespace']}:{item['name']}", "; ".join(parts)


def node_id(kind: str, key: Sequence[str]) -> str:
    """The node id of a job or dataset, as ``ol-dagster lineage`` names them."""
    return f"{kind}:{key[0]}:{key[1]}"


def neighbourhood(
    change_set: ChangeSet,
    around: Iterable[tuple[NodeKey, JobPart]] = (),
    *,
    limit: int = 50,
) -> tuple[list[Node], list[Edge]]:
    """The changed objects (at most ``limit`` of them, the first by kind and change) and one hop
    around them: their flows' ends, and the inputs and outputs that the jobs ``around`` (current
    parts, of any definition on the catalog) link to a changed object (``shown``), as context;
    the other jobs ``around`` add nothing."""
    states, labels, edges = _changed(change_set, limit)

    def node(kind: str, key: Sequence[str]) -> None:
        nid = node_id(kind, key)
        labels.setdefault(nid, (key[1], kind))
        states.setdefault(nid, "context")

    shown = {n for n, s in states.items() if s != "context"}
    for key, part in around:
        job = node_id("job", key)
        for ds, out in [(k, False) for k in part.get("inputs") or []] + [
            (k, True) for k in part.get("outputs") or []
        ]:
            dataset = node_id("dataset", ds)
            if job in shown or dataset in shown:
                node("job", key)
                node("dataset", ds)
                edges[(job, dataset) if out else (dataset, job)].add("context")
    nodes = [(nid, labels[nid][0], labels[nid][1], states[nid]) for nid in sorted(states)]
    return nodes, [(a, b, _edge_state(s)) for (a, b), s in sorted(edges.items())]


def shown(change_set: ChangeSet, *, limit: int = 50) -> set[str]:
    """The node ids of the changed objects ``neighbourhood`` draws: only a job that is one of
    them, or whose inputs or outputs are, adds to the picture."""
    states = _changed(change_set, limit)[0]
    return {n for n, s in states.items() if s != "context"}


def _changed(
    change_set: ChangeSet, limit: int
) -> tuple[dict[str, str], dict[str, tuple[str, str]], dict[tuple[str, str], set[str]]]:
    """The state and label of each node of the first ``limit`` changed objects and their flows'
    ends, and the edges of those flows."""
    states: dict[str, str] = {}
    labels: dict[str, tuple[str, str]] = {}
    edges: dict[tuple[str, str], set[str]] = defaultdict(set)

    def node(kind: str, key: Sequence[str], state: str | None = None) -> str:
        nid = node_id(kind, key)
        labels.setdefault(nid, (key[1], kind))
        if state is not None and states.get(nid, "context") == "context":
            states[nid] = state
        states.setdefault(nid, "context")
        return nid

    changed = 0
    for item in change_set.items:
        if changed >= limit:
            break
        if "source" in item:
            state = item["change"] if item["kind"] == "dataFlow" else "changed"
            job = node("job", _key(item["job"]), "changed")
            src = node("dataset", _key(item["source"])[:2])
            dst = node("dataset", _key(item["target"])[:2])
            edges[(src, job)].add(state)
            edges[(job, dst)].add(state)
        else:
            node(item["kind"], _key(item), item["change"])
        changed = sum(1 for s in states.values() if s != "context")
    return states, labels, edges


def _edge_state(states: set[str]) -> str:
    """An edge both added and removed (a flow moved to another end) stays: context."""
    if {"added", "removed"} <= states:
        return "context"
    for state in ("added", "removed", "changed"):
        if state in states:
            return state
    return "context"
