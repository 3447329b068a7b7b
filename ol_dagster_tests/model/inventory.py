"""The reference model's producer inventories, from docs/deletion-rules.md ("Producer
inventories") and docs/configuration.md (``inventories``) alone: nothing of ``ol_dagster``.

The rules, as those pages say them:

* off unless the definition names the reader in ``inventories``; the one reader is ``airflow``;
* the ``airflow`` list: a DAG run's ``START`` naming at least one task, whose run type is
  ``scheduled`` or ``manual``, and the first ``START`` of that DAG run in the batch; anything else
  is a ``PARTIAL_RUN`` and retires nothing; the DAG's job is ``(namespace, dag_id)``, each task's
  job ``(namespace, "<dag_id>.<task_id>")``;
* of several whole lists of one parent in a batch, the newest counts (a tie: the later one);
* a child is a job whose ``parent`` facet names the parent job, names compared exactly (the
  catalog's orchestration flows from the parent); only children in the namespace the list speaks
  for (the DAG's), when the definition admits it alone, and not named by the list, are retired;
* retiring removes the child's job entity and every flow it owns or that touches it, each only
  when the batch did not touch it (a child the batch described is never retired); the removals
  count against the cap and the share like any other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

AIRFLOW = "airflow"
WHOLE_RUN_TYPES = ("scheduled", "manual")

Job = tuple[str, str]


def inventories(
    events: Iterable[Any], readers: tuple[str, ...], admits_alone: Callable[[str], bool]
) -> dict[Job, frozenset[str]]:
    """Parent job -> the child job names of its newest whole list in the batch's ``events``
    (``Event``s of ``reference``, in arrival order), for a definition reading with ``readers``."""
    if AIRFLOW not in readers:
        return {}
    seen_runs: set[tuple[str, str, str]] = set()
    newest: dict[Job, tuple[int, frozenset[str]]] = {}
    for e in events:
        if e.kind != "run" or e.event_type != "START" or not e.tasks:
            continue
        first = (e.namespace, e.name, e.dag_run) not in seen_runs
        seen_runs.add((e.namespace, e.name, e.dag_run))
        if e.run_type not in WHOLE_RUN_TYPES or not first or not admits_alone(e.namespace):
            continue
        if e.job not in newest or e.time >= newest[e.job][0]:
            newest[e.job] = (e.time, frozenset(f"{e.name}.{t}" for t in e.tasks))
    return {parent: names for parent, (_, names) in newest.items()}


def retired(
    lists: Mapping[Job, frozenset[str]],
    links: Iterable[tuple[Job, Job]],
    admits_alone: Callable[[str], bool],
) -> set[Job]:
    """The children to retire: ``links`` are (parent, child) of the catalog's orchestration
    flows."""
    out: set[Job] = set()
    for parent, child in links:
        names = lists.get(parent)
        if names is None or child == parent:
            continue
        if child[0] == parent[0] and admits_alone(child[0]) and child[1] not in names:
            out.add(child)
    return out
