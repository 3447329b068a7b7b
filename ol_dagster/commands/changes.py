"""``ol-dagster changes``: a batch's lineage change set, read from the event store.

What the sync recorded for the batch (``ol_dagster.sync.changes``): every job, dataset, data flow
and column flow it added, removed or changed in one catalog of the definition, and the downstream
readers its removals left without their input. As JSON, or as lines a person reads.
"""

from __future__ import annotations

import json
import sys

from ol_dagster.changes.changeset import CHANGES, KINDS, ChangeSet, describe
from ol_dagster.commands.startup import open_store
from ol_dagster.settings import Settings, SettingsError, SyncDefinition
from ol_dagster.store import EventStore
from ol_dagster.sync.changes import stored


def _catalog(definition: SyncDefinition, catalog: str | None) -> str:
    if catalog is None:
        return definition.catalog_keys[0]
    if catalog not in definition.catalog_keys:
        keys = ", ".join(definition.catalog_keys)
        raise SettingsError(f"definition {definition.name!r} feeds {keys}, not {catalog!r}")
    return catalog


def _owner(store: EventStore, batch: int) -> str | None:
    """The definition of a batch the store holds, else None."""
    try:
        return store.get_batch(batch).definition
    except KeyError:
        return None


def render(change_set: ChangeSet) -> str:
    """The change set as lines: counts, each item, each impacted reader."""
    lines = [
        f"batch {change_set.batch} of {change_set.definition}, catalog {change_set.catalog}",
        *(
            f"  {kind}: " + ", ".join(f"{change_set.counts[kind][c]} {c}" for c in CHANGES)
            for kind in KINDS
        ),
    ]
    for item in change_set.items:
        what, detail = describe(item)
        lines.append(
            f"{item['change']:8} {item['kind']:9} {what}" + (f"  ({detail})" if detail else "")
        )
    for hit in change_set.impacted:
        reads = hit["reads"]
        column = f".{hit['column']}" if hit["column"] else ""
        lines.append(
            f"impacted: job {hit['job']['namespace']}:{hit['job']['name']} "
            f"({hit['definition']}) writes {hit['dataset']['namespace']}:{hit['dataset']['name']}"
            f"{column} from {reads['namespace']}:{reads['name']}"
            + (f".{reads['field']}" if "field" in reads else "")
        )
    return "\n".join(lines)


def show_changes(
    settings: Settings,
    definition: SyncDefinition,
    *,
    batch: int | None,
    catalog: str | None,
    as_json: bool,
) -> int:
    """Print the change set of ``batch`` (default: the definition's newest one); exit 1 when
    none was recorded."""
    key = _catalog(definition, catalog)
    store = open_store(settings)
    try:
        if batch is None:
            batch = store.latest_change_batch(definition.name, key)
        elif _owner(store, batch) not in (None, definition.name):
            print(
                f"ol-dagster: batch {batch} belongs to definition {_owner(store, batch)!r}, "
                f"not {definition.name!r}",
                file=sys.stderr,
            )
            return 1
        change_set = stored(store, batch, key) if batch is not None else None
    finally:
        store.dispose()
    if change_set is None:
        which = f"batch {batch}" if batch is not None else "any batch"
        print(
            f"ol-dagster: no change set recorded for {which} of {definition.name!r} "
            f"in catalog {key!r} (it is recorded when a batch is uploaded)",
            file=sys.stderr,
        )
        return 1
    print(json.dumps(change_set.as_dict(), indent=2) if as_json else render(change_set))
    return 0
