"""What every inventory reader returns: the parent, the children it names, whether it is whole."""

from __future__ import annotations

from dataclasses import dataclass, replace

NodeKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Inventory:
    """A parent job's list of its children, as one event of its producer gave it.

    ``children`` are job names in ``namespace`` (the only namespace the list speaks for);
    ``partial`` is None for a list the reader trusts as complete, else why it is not
    (``PARTIAL_RUN: run_type backfill``...). ``run`` identifies the producer's run, ``time`` is
    the event's time as sent."""

    reader: str
    parent: NodeKey
    namespace: str
    children: frozenset[str]
    time: str
    run: str | None = None
    partial: str | None = None

    def marked_partial(self, why: str) -> Inventory:
        return replace(self, partial=why)

    def as_dict(self) -> dict[str, object]:
        return {
            "reader": self.reader,
            "parent": list(self.parent),
            "namespace": self.namespace,
            "children": sorted(self.children),
            "time": self.time,
            "run": self.run,
            "partial": self.partial,
        }

    @classmethod
    def of(cls, record: dict) -> Inventory:
        return cls(
            reader=str(record["reader"]),
            parent=(str(record["parent"][0]), str(record["parent"][1])),
            namespace=str(record["namespace"]),
            children=frozenset(str(c) for c in record["children"]),
            time=str(record["time"]),
            run=record.get("run"),
            partial=record.get("partial"),
        )
