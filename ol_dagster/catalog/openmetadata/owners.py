"""Whose an OpenMetadata edge is, by what OpenMetadata itself records: never by a guess.

OpenMetadata keeps one edge per pair of entities, and whoever writes it last replaces it: every
write stamps ``lineageDetails.updatedBy`` with the writer's user and ``source`` with how it came
(upstream open-metadata/OpenMetadata ``openmetadata-service/.../jdbi3/LineageRepository.java``
``addLineage``, at ``015f49b4999acbf63460f55ad16c60fbea68374d``; the row is replaced by
``CollectionDAO.EntityRelationshipDAO.insert``, ``ON DUPLICATE KEY UPDATE json`` /
``ON CONFLICT (fromId, toId, relation) DO UPDATE``, at
``1a0490187a2e7e6c63cc7b25541efa381e38d4e6``).
The OpenLineage endpoint writes as the caller (``securityContext.getUserPrincipal().getName()``
in ``OpenLineageResource.java``), which is the user ``GET /api/v1/users/loggedInUser`` names.

So two questions are asked of the server, never answered from a name or a source alone:

* **before the first write of a pair** (``Before``): did an edge exist on it, and who wrote it?
  Read before the upload posts anything, either ``GET /api/v1/lineage/getLineageEdge/{from}/{to}``
  (both ends known) or the lineage of the end that is known (``neighbours``). An edge that was
  there and is not ol-dagster's own is recorded as someone else's (``decide``), once for the whole
  catalog in the ledger (``FOREIGN``): the upload then overwrites it (the server keeps one), but
  no cleanup ever deletes it.
* **before a delete** (``ours``): is the edge's last writer ol-dagster's user, through the
  OpenLineage endpoint? Anything else (a person's edit, a connector, another OpenLineage producer
  with its own user, the server's own Kafka or Kinesis intake) is kept.

Both need ol-dagster's own user (a bot of its own): with the token of a user that OpenMetadata's
connectors also use, their edges read as ol-dagster's (``ol-dagster check`` warns).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

OPENLINEAGE_SOURCE = "OpenLineage"  # LineageDetails.Source.OPEN_LINEAGE
FOREIGN = "foreignEdge"  # ledger kind: an edge someone else had on a pair before ol-dagster
CATALOG_WIDE = ""  # the ledger "definition" of what holds for the whole catalog
UNKNOWN = "unknown"
# the user OpenMetadata's own ingestion (its connectors, OpenLineage included) runs as
INGESTION_BOT = "ingestion-bot"

Details = Mapping[str, Any]  # an edge's lineageDetails


def writer(details: Details) -> str:
    """Who OpenMetadata says wrote an edge last (its ``updatedBy``)."""
    return str(details.get("updatedBy") or UNKNOWN)


def ours(details: Details, me: str) -> bool:
    """The edge's last write is ol-dagster's: its user, through the OpenLineage endpoint."""
    return (
        bool(me) and details.get("updatedBy") == me and details.get("source") == OPENLINEAGE_SOURCE
    )


def pair_key(src_id: str, dst_id: str) -> str:
    return f"edge|{src_id}|{dst_id}"


@dataclass(slots=True)
class Before:
    """What OpenMetadata held around an upload's entities before the upload wrote anything."""

    direct: dict[tuple[str, str], Details | None] = field(default_factory=dict)
    down: dict[str, dict[str, Details]] = field(default_factory=dict)  # id -> {to id: details}
    up: dict[str, dict[str, Details]] = field(default_factory=dict)  # id -> {from id: details}
    absent: set[str] = field(default_factory=set)  # FQNs the server did not have yet

    def edge(
        self, src_id: str, dst_id: str, src_fqn: str, dst_fqn: str
    ) -> tuple[bool, Details | None]:
        """(known, the edge's details then, None: no edge). Unknown: nothing was read that
        covers this pair."""
        if (src_id, dst_id) in self.direct:
            return True, self.direct[(src_id, dst_id)]
        if src_id in self.down:
            return True, self.down[src_id].get(dst_id)
        if dst_id in self.up:
            return True, self.up[dst_id].get(src_id)
        if src_fqn in self.absent or dst_fqn in self.absent:
            return True, None  # an end the upload created: no edge could be there
        return False, None


@dataclass(frozen=True, slots=True)
class Owner:
    """What a ledger edge records of its writer: ``ours``, or whose it is (``by``, ``source``)."""

    ours: bool
    by: str
    source: str | None = None

    def payload(self) -> dict[str, Any]:
        return {"ours": self.ours, "by": self.by, "source": self.source}

    @classmethod
    def read(cls, value: Any) -> Owner | None:
        if not isinstance(value, Mapping) or not isinstance(value.get("ours"), bool):
            return None
        return cls(value["ours"], str(value.get("by") or UNKNOWN), value.get("source"))


def decide(
    me: str,
    *,
    held: Owner | None,
    foreign: Owner | None,
    known: bool,
    details: Details | None,
) -> tuple[Owner, bool]:
    """The writer of a pair an upload just wrote, and whether the catalog-wide record of someone
    else's edge on it still holds.

    ``held``: what an entry already recording the pair says (its first write decided it);
    ``foreign``: the catalog-wide record; ``known``/``details``: the pair as read before the
    upload. An edge that was gone before this upload is ol-dagster's from now on, whatever was
    recorded of an earlier one; an edge someone else wrote last before it is theirs, whatever
    was recorded before."""
    if known:
        if details is None:
            return Owner(True, me, OPENLINEAGE_SOURCE), False
        if not ours(details, me):
            return Owner(False, writer(details), details.get("source")), True
        # ol-dagster's own write: a record of the edge it overwrote the first time still holds
        return foreign or held or Owner(True, me, OPENLINEAGE_SOURCE), foreign is not None
    if foreign is not None:
        return foreign, True
    if held is not None:
        return held, False
    return Owner(False, UNKNOWN), False  # nothing read covers it: never deleted


def held_pairs(keys: Iterable[str]) -> set[tuple[str, str]]:
    """The (from id, to id) of ledger held keys ``edge|<from>|<to>``."""
    out: set[tuple[str, str]] = set()
    for key in keys:
        parts = key.split("|")
        if len(parts) == 3 and parts[0] == "edge":
            out.add((parts[1], parts[2]))
    return out
