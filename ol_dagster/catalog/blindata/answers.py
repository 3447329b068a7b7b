"""Blindata's cleanup answers, read strictly: an answer the client does not recognise stops the
cleanup instead of counting as nothing to remove.

The cleanup calls and their ``dryRun`` field are not in Blindata's public documentation (``api``
marks them inferred). A server without them could answer a dry run in another shape, or carry it
out for real and answer as for a real call; read leniently, such an answer counts 0 removals,
passes ``maxRemovalsPerRun``, and the plan's real calls follow. So every answer must:

* be a JSON object that echoes ``dryRun`` as sent (``true`` for a dry run, ``false`` for a real
  call): this is the only proof that the server read the field;
* carry its counts in the shape ``api`` names: ``matched`` (and ``deleted``) as whole numbers, for
  the flows call at the top, for a System call under ``results`` by resource type, each type one
  the client knows (``api.RESOURCE_*``) unless it counts nothing;
* for a dry run, report no deletion.

Anything else raises ``CleanupNotConfirmed`` with what the answer said (never a secret: the
answer is the server's, and is scrubbed all the same).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ol_dagster.catalog.blindata import api
from ol_dagster.catalog.protocol import CleanupNotConfirmed, ObjectType

RESULT_TYPES: Mapping[str, ObjectType] = {
    api.RESOURCE_PHYSICAL_ENTITY: ObjectType.PHYSICAL_ENTITIES,
    api.RESOURCE_PHYSICAL_FIELD: ObjectType.PHYSICAL_FIELDS,
    api.RESOURCE_SYSTEM_ROUTINE: ObjectType.ROUTINES,
    api.RESOURCE_STATEMENT: ObjectType.STATEMENTS,
    api.RESOURCE_DATA_FLOW: ObjectType.DATA_FLOWS,
}


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _said(value: Any, scrub: Callable[[str], str]) -> str:
    text = value if isinstance(value, str) else repr(value)
    return scrub(text)[:200]


class _Reader:
    def __init__(self, where: str, dry_run: bool, scrub: Callable[[str], str]) -> None:
        self.where, self.dry_run, self.scrub = where, dry_run, scrub

    def refuse(self, why: str) -> CleanupNotConfirmed:
        kind = "dry run" if self.dry_run else "real call"
        return CleanupNotConfirmed(f"{self.where} ({kind}): {why}; nothing more is deleted")

    def part(self, part: Any, name: str) -> int:
        """One count block: ``matched`` for a dry run, ``deleted`` (else ``matched``) for a real
        call."""
        if not isinstance(part, dict) or not _whole(part.get("matched")):
            raise self.refuse(f"{name}: no count 'matched' in {_said(part, self.scrub)}")
        deleted = part.get("deleted")
        if deleted is not None and not _whole(deleted):
            raise self.refuse(f"{name}: 'deleted' is not a count: {_said(deleted, self.scrub)}")
        items = part.get("items")
        if items is not None and not isinstance(items, list):
            raise self.refuse(f"{name}: 'items' is not a list")
        if self.dry_run and deleted:
            raise self.refuse(f"{name}: the server reports {deleted} deletion(s) for a dry run")
        return part["matched"] if self.dry_run or deleted is None else deleted

    def echo(self, answer: Any) -> dict[str, Any]:
        if not isinstance(answer, dict):
            raise self.refuse(f"the answer is not a JSON object: {_said(answer, self.scrub)}")
        echoed = answer.get("dryRun", "missing")
        if echoed is not self.dry_run:
            said = "no 'dryRun' field" if echoed == "missing" else f"dryRun {echoed!r}"
            expected = "true" if self.dry_run else "false"
            may = " (the server may have deleted for real)" if self.dry_run else ""
            raise self.refuse(f"the answer does not confirm dryRun {expected}: {said}{may}")
        return answer


def flows_count(answer: Any, *, where: str, dry_run: bool, scrub: Callable[[str], str]) -> int:
    """The flows call's count (``{dryRun, cutoff, matched, deleted, items}``)."""
    reader = _Reader(where, dry_run, scrub)
    return reader.part(reader.echo(answer), "flows")


def system_counts(
    answer: Any, *, where: str, dry_run: bool, scrub: Callable[[str], str]
) -> tuple[dict[str, int], dict[str, list[dict[str, Any]]]]:
    """A System call's counts by object type, and the items it lists by resource type
    (``{dryRun, cutoff, results: {PHYSICAL_ENTITY: {matched, deleted, items}, ...}}``)."""
    reader = _Reader(where, dry_run, scrub)
    results = reader.echo(answer).get("results")
    if not isinstance(results, dict):
        raise reader.refuse(f"no 'results' by resource type: {_said(results, scrub)}")
    counts: dict[str, int] = {}
    items: dict[str, list[dict[str, Any]]] = {}
    for resource, part in results.items():
        n = reader.part(part, str(resource))
        object_type = RESULT_TYPES.get(str(resource))
        if object_type is None:
            if n or part.get("matched"):
                raise reader.refuse(f"it counts {part['matched']} of an unknown type {resource!r}")
            continue
        counts[object_type.value] = counts.get(object_type.value, 0) + n
        listed = part.get("items")
        items[str(resource)] = [i for i in listed or [] if isinstance(i, dict)]
    return counts, items
