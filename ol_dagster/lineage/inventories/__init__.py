"""Producer inventories: a parent job's event that names every child the producer has.

Per-event producers never send a snapshot, so a task deleted from an Airflow DAG would stay in the
catalog until ``staleJobDays``. Some producers do say, in the parent's event, which children exist
(the Airflow provider lists a DAG's tasks on each DAG run's START). A reader turns such an event
into an ``Inventory``; the cleanup retires the parent's children it no longer names, through every
guard (``ownership.decide``, ``sync.cleanup``). Each reader is one module of this package and one
entry of ``READERS``; a definition turns readers on by name (``inventories: [airflow]``).

A reader says exactly what it trusts: an event it cannot vouch for as the whole list (a partial
run) is still returned, with ``partial`` saying why, so the report can show it was not used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ol_dagster.lineage.inventories import airflow
from ol_dagster.lineage.inventories.base import Inventory

__all__ = ["READERS", "Inventory", "Reader", "read_inventories"]

Reader = Callable[[Mapping[str, Any]], Inventory | None]

# one registration per reader: its name in the settings -> the function reading one event
READERS: dict[str, Reader] = {airflow.NAME: airflow.read}


def read_inventories(
    events: Iterable[Mapping[str, Any]], readers: Iterable[str]
) -> list[Inventory]:
    """The inventories the events hold, by the named readers, in the events' order. A second
    list of one run of one parent (a re-run of a cleared DAG run sends its START again) is
    partial: a run that started again is not a whole run."""
    chosen = [READERS[name] for name in readers]
    found: list[Inventory] = []
    runs: set[tuple[str, str, str, str]] = set()
    for event in events:
        for reader in chosen:
            inventory = reader(event)
            if inventory is None:
                continue
            if inventory.run is not None:
                key = (inventory.reader, *inventory.parent, inventory.run)
                if key in runs and inventory.partial is None:
                    inventory = inventory.marked_partial(airflow.RERUN)
                runs.add(key)
            found.append(inventory)
    return found
