"""Catalog keys in an event: never blank, and no longer than a definition allows.

msgspec checks a ``Name``'s type and length while it decodes; what it cannot say is checked here
in Python: that no ``Name`` is blank (``names_blank`` on the fast path, ``first_blank`` naming the
field on the exact path), and, per definition, that no catalog key (the namespace or name of a
job, a dataset, the parent and root jobs, a symlink, a previous identifier, a column-lineage
input) is longer than ``limits.maxNameLength``: the envelopes are copied with those fields
bounded (``family``), so the decoder checks the bound in the same pass, and
``check_name_lengths`` names the field of an event that fails it.
"""

from __future__ import annotations

import functools
import operator
import types
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import chain
from typing import Annotated, Any, Union, get_args, get_origin

import msgspec
from msgspec import UNSET, Meta, Struct, field
from msgspec.structs import fields as struct_fields

from ol_dagster.openlineage.envelope import EventRejected
from ol_dagster.openlineage.facet_maps import is_deletion_marker
from ol_dagster.openlineage.facets import (
    NAME,
    InputField,
    JobRef,
    PreviousIdentifier,
    SymlinkIdentifier,
)
from ol_dagster.openlineage.structs import BY_KIND, DATASET, RUN, Dataset, Envelope, Job, kind_of

# -- families: the same envelopes with every catalog key bounded ----------------------------------
#
# The receiver bounds every namespace and name the catalogs key objects by (``_KEYED``: the job,
# each dataset, the parent and root jobs, symlinks, a previous identifier, column-lineage inputs)
# by a definition's ``limits.maxNameLength``: copies of the envelopes whose keyed ``Name`` fields
# carry a ``max_length``, checked by the decoder in the same pass (free for a valid event). An
# event over it fails the fast path; the exact path then names the field (``check_name_lengths``).

DEFAULT_MAX_NAME_LENGTH = 2048  # settings.Limits.maxNameLength's default

# Structs whose ``namespace`` and ``name`` are catalog keys (subclasses included)
_KEYED = (Job, Dataset, JobRef, InputField, SymlinkIdentifier, PreviousIdentifier)


@dataclass(frozen=True)
class Family:
    by_kind: Mapping[str, type[Envelope]]


def _bounded(tp: Any, bound: int, memo: dict[type, type]) -> tuple[Any, bool]:
    """``tp`` with the keyed names of every Struct in it bounded, and whether anything changed."""
    if isinstance(tp, type) and issubclass(tp, Struct):
        if tp not in memo:
            memo[tp] = tp  # while it is copied: a Struct that holds itself (SchemaField) holds
            # no keyed names (were one to, its copy would hold the original: a test catches it)
            memo[tp] = _bounded_struct(tp, bound, memo)
        return memo[tp], memo[tp] is not tp
    origin = get_origin(tp)
    if origin in (types.UnionType, Union):
        parts = [_bounded(a, bound, memo) for a in get_args(tp)]
        if not any(changed for _, changed in parts):
            return tp, False
        return functools.reduce(operator.or_, [p for p, _ in parts]), True
    if origin is list:
        (item,) = get_args(tp)
        new, changed = _bounded(item, bound, memo)
        return (list[new], True) if changed else (tp, False)
    if origin is dict:
        key, value = get_args(tp)
        new, changed = _bounded(value, bound, memo)
        return (dict[key, new], True) if changed else (tp, False)
    return tp, False


def _bounded_struct(cls: type, bound: int, memo: dict[type, type]) -> type:
    keyed = issubclass(cls, _KEYED)
    specs: list[tuple[str, Any, Any]] = []
    changed = False
    for f in struct_fields(cls):
        if keyed and f.name in ("namespace", "name"):
            tp, changed = Annotated[str, Meta(min_length=1, max_length=bound), NAME], True
        else:
            tp, was = _bounded(f.type, bound, memo)
            changed = changed or was
        spec: dict[str, Any] = {"name": f.encode_name}
        if f.default is not msgspec.NODEFAULT:
            spec["default"] = f.default
        elif f.default_factory is not msgspec.NODEFAULT:
            spec["default_factory"] = f.default_factory
        specs.append((f.name, tp, field(**spec)))
    if not changed:
        return cls
    return msgspec.defstruct(cls.__name__, specs, kw_only=True, frozen=True, gc=False)


CANONICAL = Family(BY_KIND)


@functools.cache
def family(max_name_length: int | None) -> Family:
    """The envelopes for a bound (built once per distinct bound, a few ms)."""
    if max_name_length is None:
        return CANONICAL
    memo: dict[type, type] = {}
    return Family({kind: _bounded(env, max_name_length, memo)[0] for kind, env in BY_KIND.items()})


# -- blank names: msgspec checks their type and length, these their content ---------------------

# what the spec's schema and pydantic's ``\S`` (Rust's regex) call white space: Unicode White_Space
_WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B)))
_WHITE_SPACE += "\u2028\u2029\u202f\u205f\u3000"


def is_blank(text: str) -> bool:
    return not text.strip(_WHITE_SPACE)


# ``str.isspace`` is true of every _WHITE_SPACE string (and of a few more: U+001C to U+001F), so a
# name it finds no blank in has none; one it flags goes to the exact path, which uses is_blank.
_isspace = str.isspace
_name = operator.attrgetter("name")
_names_of = operator.attrgetter("namespace", "name")
_input_keys = operator.attrgetter("namespace", "name", "field")
_input_fields = operator.attrgetter("inputFields")
_sub_fields = operator.attrgetter("fields")


def _any_blank(texts: Iterable[str]) -> bool:
    return any(map(_isspace, texts))


def _schema_blank(fields: list[Any]) -> bool:
    return _any_blank(map(_name, fields)) or any(
        map(_schema_blank, filter(None, map(_sub_fields, fields)))
    )


def _dataset_blank(d: Any) -> bool:
    if _isspace(d.namespace) or _isspace(d.name):
        return True
    f = d.facets
    schema = f.schema_
    if schema is not None and schema.fields and _schema_blank(schema.fields):
        return True
    lineage = f.columnLineage
    if lineage is not None:
        inputs = chain(
            chain.from_iterable(map(_input_fields, lineage.fields.values())), lineage.dataset
        )
        if _any_blank(chain.from_iterable(map(_input_keys, inputs))):
            return True
    symlinks = f.symlinks
    if symlinks is not None and _any_blank(
        chain.from_iterable(map(_names_of, symlinks.identifiers))
    ):
        return True
    change = f.lifecycleStateChange
    previous = change.previousIdentifier if change is not None else None
    if previous is not None and _any_blank(_names_of(previous)):
        return True
    owners = f.ownership
    return owners is not None and _any_blank(map(_name, owners.owners))


def names_blank(env: Any) -> bool:
    """Whether a ``Name`` of a decoded envelope may be blank: every place facets.py and this
    module type as ``Name`` (``test_openlineage_models`` puts a blank in each and checks)."""
    if _isspace(env.producer):
        return True
    run = getattr(env, "run", UNSET)
    if run is not UNSET:
        if _isspace(run.runId):
            return True
        parent = run.facets.parent
        if parent is not None:
            if _isspace(parent.run.runId) or _any_blank(_names_of(parent.job)):
                return True
            root = parent.root
            if root is not None and (_isspace(root.run.runId) or _any_blank(_names_of(root.job))):
                return True
    job = getattr(env, "job", UNSET)
    if job is not UNSET:
        if _isspace(job.namespace) or _isspace(job.name):
            return True
        owners = job.facets.ownership
        if owners is not None and _any_blank(map(_name, owners.owners)):
            return True
    dataset = getattr(env, "dataset", UNSET)
    if dataset is not UNSET and _dataset_blank(dataset):
        return True
    return any(map(_dataset_blank, getattr(env, "inputs", ()))) or any(
        map(_dataset_blank, getattr(env, "outputs", ()))
    )


@functools.cache
def name_fields(cls: type) -> tuple[tuple[str, str, bool], ...]:
    """(attribute, JSON key, whether it is a ``Name``) of a Struct's fields."""
    return tuple(
        (f.name, f.encode_name, get_origin(f.type) is Annotated and NAME in get_args(f.type))
        for f in struct_fields(cls)
    )


def first_blank(value: Any, path: str = "") -> str | None:
    """The path of the first blank ``Name`` in a decoded value, by walking all of it: slow, for
    the exact path, and the reference ``names_blank`` is tested against."""
    if isinstance(value, Struct):
        for attr, key, is_name in name_fields(type(value)):
            item = getattr(value, attr)
            where = f"{path}.{key}" if path else key
            if is_name and is_blank(item):
                return where
            found = first_blank(item, where)
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = first_blank(item, f"{path}.{i}")
            if found is not None:
                return found
    elif isinstance(value, dict) and path.endswith(".fields"):  # columnLineage.fields
        for key, item in value.items():
            found = first_blank(item, f"{path}.{key}")
            if found is not None:
                return found
    return None


# -- naming the identifier that is too long -----------------------------------------------------


def _get(obj: object, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else None


def _facet(facets: object, key: str) -> Any:
    """A standard facet, unless absent or a deletion marker (whose content nothing reads)."""
    facet = _get(facets, key)
    return None if is_deletion_marker(facet) else facet


def _listed(prefix: str, refs: object) -> Iterator[tuple[str, object]]:
    if isinstance(refs, list):
        for m, ref in enumerate(refs):
            yield f"{prefix}.{m}", ref


def _dataset_refs(path: str, dataset: object) -> Iterator[tuple[str, object]]:
    yield path, dataset
    facets = _get(dataset, "facets")
    symlinks = _facet(facets, "symlinks")
    yield from _listed(f"{path}.facets.symlinks.identifiers", _get(symlinks, "identifiers"))
    lifecycle = _facet(facets, "lifecycleStateChange")
    previous = _get(lifecycle, "previousIdentifier")
    yield f"{path}.facets.lifecycleStateChange.previousIdentifier", previous
    lineage = _facet(facets, "columnLineage")
    fields = _get(lineage, "fields")
    if isinstance(fields, dict):
        for name, column in fields.items():
            inputs = _get(column, "inputFields")
            yield from _listed(f"{path}.facets.columnLineage.fields.{name}.inputFields", inputs)
    yield from _listed(f"{path}.facets.columnLineage.dataset", _get(lineage, "dataset"))


def _keyed_refs(event: object) -> Iterator[tuple[str, object]]:
    """(path, the object holding a ``namespace`` and a ``name``) for every catalog key of an
    event: the places of ``_KEYED`` in the Structs."""
    kind = kind_of(event)  # what is not a field of the event's kind is an extra, not a key
    if kind == DATASET:
        yield from _dataset_refs("dataset", _get(event, "dataset"))
        return
    yield "job", _get(event, "job")
    if kind == RUN:
        parent = _facet(_get(_get(event, "run"), "facets"), "parent")
        yield "run.facets.parent.job", _get(parent, "job")
        yield "run.facets.parent.root.job", _get(_get(parent, "root"), "job")
    for side in ("inputs", "outputs"):
        for path, dataset in _listed(side, _get(event, side)):
            yield from _dataset_refs(path, dataset)


def check_name_lengths(event: object, limit: int = DEFAULT_MAX_NAME_LENGTH) -> None:
    """Refuse an event any of whose catalog keys (the namespace or name of its job, a dataset,
    the parent or root job, a symlink, a previous identifier, a column-lineage input) is longer
    than ``limit`` characters, naming the first such field's path. Looks at those places only:
    the rest of the event (schemas, SQL, custom facets) may hold strings of any length. In the
    receiver this runs only for an event the bounded fast path refused (``check_event``)."""
    for path, ref in _keyed_refs(event):
        for key in ("namespace", "name"):
            value = _get(ref, key)
            if isinstance(value, str) and len(value) > limit:
                raise EventRejected(
                    f"{path}.{key}",
                    f"is {len(value)} characters long; at most {limit} are accepted "
                    "(limits.maxNameLength)",
                )
