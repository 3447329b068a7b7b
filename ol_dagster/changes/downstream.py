"""What a batch's removals break downstream: the jobs that still read what it took away.

A batch takes a dataset away when it removes it, or when the jobs that wrote it stop writing it
(a rename: the job now writes another name) and no job on the catalog writes it any more. It
takes a column away when the dataset's whole schema no longer has it, or when the column flows
that fed it went and nothing feeds it any more (and no schema known of it, whichever definition
synced it, lists it). Every job on the catalog (whichever definition syncs it) whose column
flows or data flows still read such a dataset or column is impacted: each is listed with the
dataset and column it feeds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ol_dagster.changes.changeset import Item
from ol_dagster.changes.parts import JobPart
from ol_dagster.lineage.graph import NodeKey

Reader = tuple[str, NodeKey, JobPart]  # (definition, job, its current part)


def _key(ref: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(ref[k] for k in ("namespace", "name", "field") if k in ref)


def _ref(key: Sequence[str]) -> dict[str, str]:
    return dict(zip(("namespace", "name", "field"), key, strict=False))


def taken_away(
    items: Sequence[Item],
    readers: Sequence[Reader],
    fields_now: Mapping[NodeKey, list[str] | None],
) -> tuple[set[NodeKey], set[tuple[str, str, str]]]:
    """The datasets and columns the change set's removals took away, given every job's current
    part on the catalog (``readers``) and the datasets' current field lists (``fields_now``)."""
    written = {tuple(k) for _, _, part in readers for k in part.get("outputs") or []}
    fed = {tuple(t) for _, _, part in readers for _, t in part.get("fieldFlows") or []}
    datasets: set[NodeKey] = set()
    columns: set[tuple[str, str, str]] = set()
    for item in items:
        kind, change = item["kind"], item["change"]
        if kind == "dataset" and change == "removed":
            datasets.add((item["namespace"], item["name"]))
        elif kind == "dataset" and change == "changed":
            columns |= {(item["namespace"], item["name"], f) for f in item.get("fieldsRemoved", [])}
        elif kind == "dataFlow" and change == "removed":
            target = _key(item["target"])
            if target not in written:
                datasets.add((target[0], target[1]))
        elif kind == "fieldFlow" and change == "removed":
            t = _key(item["target"])
            column = (t[0], t[1], t[2])
            known = fields_now.get((t[0], t[1]))
            if column not in fed and (known is None or t[2] not in known):
                columns.add(column)
    return datasets, columns


def impacted(
    items: Sequence[Item],
    readers: Sequence[Reader],
    fields_now: Mapping[NodeKey, list[str] | None],
) -> list[Item]:
    """Each downstream job, dataset and column that reads what the change set took away: a
    column flow from it names the column it feeds; a data flow alone names the dataset."""
    datasets, columns = taken_away(items, readers, fields_now)
    if not datasets and not columns:
        return []
    out: dict[tuple[Any, ...], Item] = {}
    for definition, job, part in readers:
        by_column: set[NodeKey] = set()
        for s, t in part.get("fieldFlows") or []:
            source = (s[0], s[1], s[2])
            if source in columns or (s[0], s[1]) in datasets:
                by_column.add((s[0], s[1]))
                hit = {
                    "definition": definition,
                    "job": _ref(job),
                    "dataset": _ref(t[:2]),
                    "column": t[2],
                    "reads": _ref(source),
                }
                out[(definition, job, tuple(t), source)] = hit
        for s, t in part.get("dataFlows") or []:
            source = (s[0], s[1])
            if source in datasets and source not in by_column:
                hit = {
                    "definition": definition,
                    "job": _ref(job),
                    "dataset": _ref(t),
                    "column": None,
                    "reads": _ref(source),
                }
                out[(definition, job, tuple(t), source)] = hit
    return [out[k] for k in sorted(out, key=repr)]


def concerned(items: Sequence[Item]) -> tuple[set[NodeKey], set[NodeKey]]:
    """The datasets whose jobs ``taken_away`` and ``impacted`` look at, and those whose field
    lists they look at. Every job whose part changes their answer names one of the first (it
    writes the target of a data flow that went, feeds the column a column flow fed, or reads
    what was taken away): given only the jobs that name them, they answer as given every job."""
    datasets: set[NodeKey] = set()
    fields: set[NodeKey] = set()
    for item in items:
        kind, change = item["kind"], item["change"]
        if kind == "dataset" and (change == "removed" or item.get("fieldsRemoved")):
            datasets.add((item["namespace"], item["name"]))
        elif kind in ("dataFlow", "fieldFlow") and change == "removed":
            target = (item["target"]["namespace"], item["target"]["name"])
            datasets.add(target)
            if kind == "fieldFlow":
                fields.add(target)
    return datasets, fields


def known_fields(
    parts: Iterable[tuple[NodeKey, Mapping[str, Any]]],
) -> dict[NodeKey, list[str] | None]:
    """Each dataset's fields as its parts know them (of any definition: the fields any of them
    lists), None when none knows its schema."""
    out: dict[NodeKey, list[str] | None] = {}
    for key, part in parts:
        known, had = part.get("fields"), out.get(key)
        if known is None:
            out.setdefault(key, None)
        else:
            out[key] = sorted({*(had or ()), *known})
    return out


def readers_of(parts: Iterable[tuple[str, str, str, JobPart]]) -> list[Reader]:
    """(definition, namespace, name, part) rows as readers."""
    return [(d, (ns, name), part) for d, ns, name, part in parts]
