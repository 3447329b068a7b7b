"""Facet maps: deletion markers and custom facets taken out before decoding, put back after.

A standard facet may delete itself (``_deleted: true``), and any facet the spec does not define is
a custom facet: neither is a field of the typed facet maps. Both are taken out of an event's facet
maps before msgspec decodes it (``split_facets``) and put back on the typed maps it built
(``attach_facets``: their ``deleted`` and ``custom``), so the decoder only sees what it types.
"""

from __future__ import annotations

from typing import Any

from msgspec.structs import fields as struct_fields

from ol_dagster.openlineage.facets import (
    FACET_MAPS,
    DatasetFacets,
    InputFacets,
    JobFacets,
    OutputFacets,
    RunFacets,
    _FacetMap,
    facet_keys,
)
from ol_dagster.openlineage.structs import BY_KIND, Event

_KNOWN: dict[type, frozenset[str]] = {
    cls: frozenset(key for _, key in facet_keys(cls)) for cls in FACET_MAPS
}
# facet map keys of a node of each kind of place in an event
_RUN_MAPS = (("facets", _KNOWN[RunFacets]),)
_JOB_MAPS = (("facets", _KNOWN[JobFacets]),)
_DATASET_MAPS = (("facets", _KNOWN[DatasetFacets]),)
_INPUT_MAPS = (*_DATASET_MAPS, ("inputFacets", _KNOWN[InputFacets]))
_OUTPUT_MAPS = (*_DATASET_MAPS, ("outputFacets", _KNOWN[OutputFacets]))
_FIELDS = {kind: tuple(f.encode_name for f in struct_fields(env)) for kind, env in BY_KIND.items()}

Extras = tuple[tuple[str | int, ...], frozenset[str], dict[str, Any]]  # (path, deleted, custom)


def is_deletion_marker(facet: Any) -> bool:
    """A standard facet that deletes itself: ``_deleted`` true (``1`` and ``1.0`` too, as the
    earlier pydantic models read it: what was stored under them reads the same)."""
    if type(facet) is not dict or "_deleted" not in facet:
        return False
    flag = facet["_deleted"]
    return type(flag) in (bool, int, float) and flag == 1


def split_facets(obj: dict[str, Any], kind: str) -> tuple[dict[str, Any], list[Extras]]:
    """The event with its kind's fields only and, in each facet map, no deletion marker and no
    other ``_deleted`` but ``false`` (they mark nothing); the deleted and custom facets by map.
    Custom facets stay where they are (the decoder passes over unknown keys); a node is copied
    only when a map of it changes, so the caller's object is never modified."""
    clean = {key: obj[key] for key in _FIELDS[kind] if key in obj}
    extras: list[Extras] = []

    def maps(path: tuple[str | int, ...], node: Any, keys: tuple[tuple[str, frozenset[str]], ...]):
        if type(node) is not dict:
            return node
        copied = False
        for key, known in keys:
            facets = node.get(key)
            if type(facets) is not dict:
                continue
            custom: dict[str, Any] = {}
            deleted: set[str] = set()
            rewrite = False
            for name, facet in facets.items():
                if name not in known:
                    custom[name] = facet
                    if type(facet) is dict and facet.get("_deleted") is True:
                        deleted.add(name)
                elif type(facet) is dict and facet.get("_deleted", False) is not False:
                    rewrite = True
            if rewrite:
                typed: dict[str, Any] = {}
                for name, facet in facets.items():
                    if name not in known:
                        continue
                    if is_deletion_marker(facet):
                        deleted.add(name)
                    elif type(facet) is dict and facet.get("_deleted", False) is not False:
                        typed[name] = {k: v for k, v in facet.items() if k != "_deleted"}
                    else:
                        typed[name] = facet
                if not copied:
                    node, copied = dict(node), True
                node[key] = typed
            if custom or deleted:
                extras.append(((*path, key), frozenset(deleted), custom))
        return node

    for key, keys in (("run", _RUN_MAPS), ("job", _JOB_MAPS), ("dataset", _DATASET_MAPS)):
        if key in clean:
            clean[key] = maps((key,), clean[key], keys)
    for key, keys in (("inputs", _INPUT_MAPS), ("outputs", _OUTPUT_MAPS)):
        nodes = clean.get(key)
        if type(nodes) is list:
            new = [maps((key, i), d, keys) for i, d in enumerate(nodes)]
            if any(a is not b for a, b in zip(new, nodes, strict=True)):
                clean[key] = new
    return clean, extras


def attach_facets(event: Event, extras: list[Extras], custom_facets: bool) -> None:
    """Put the deleted and custom facets on the typed maps the decoder built for them (fresh
    instances, not yet seen by anyone: ``custom`` and ``deleted`` are not fields by design)."""
    for path, deleted, custom in extras:
        target: Any = event
        for part in path:
            target = target[part] if isinstance(part, int) else getattr(target, part)
        assert isinstance(target, _FacetMap)
        if deleted:
            vars(target)["deleted"] = deleted
        if custom and custom_facets:
            vars(target)["custom"] = custom
