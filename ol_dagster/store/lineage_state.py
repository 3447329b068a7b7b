"""The lineage state of each definition (what it has synced, for the asset graph), and the other
documents kept beside it (its jobs' last runs, the log store's backlog).

A definition's state is stored as rows, not one document (shape and keys:
``ol_dagster.lineage_state``): one per job (the job, its parents, the column lineage of its field
flows), one per dataset its jobs read or write (with its fields), and the links between them.
Per job rather than columnar because a sync changes whole jobs: the catalog says which (the
signature each job row keeps, ``source``), and patching one is replacing its row and its links;
a dataset row goes when no job links to it any more. A row whose part is the one stored is not
written again, so an unchanged sync writes nothing, and a catalog that can only export whole (a
ledger catalog, a capped definition) still rewrites only the rows that differ. The code location
reads the rows one at a time (``lineage_state``) into the same state a whole export gives, never
one document of every field at once.

The definition's document (``ol_lineage_state``) keeps the state's head (``state_head``): the
jobs left out and, once a refresh brought every row up to the catalog, the batch it ended
(``signed_batch``), so that a sync that changed nothing in the catalog keeps the state without
reading it. Other keys hold other documents, stored whole. A first sync writes tens of thousands
of rows: they go to the driver's ``executemany`` as plain tuples (``schema.insert_lineage_rows``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import orjson
from sqlalchemy import Connection, Table, delete, select

from ol_dagster.gcpause import gc_paused
from ol_dagster.lineage_state import (
    LineageState,
    StateRows,
    is_state_head,
    is_whole_state,
    joined_state,
    part_digest,
    signed_batch,
    split_state,
    state_head,
    state_rows,
)
from ol_dagster.store import schema
from ol_dagster.store.base import StoreBase, naive, utcnow
from ol_dagster.store.catalog_changes import mark_is, new_catalog_change

_CHUNK = 500  # keys per IN list

_jobs, _datasets, _links = schema.lineage_jobs, schema.lineage_datasets, schema.lineage_links


@dataclass(frozen=True, slots=True)
class RowsWritten:
    """What a save or a patch wrote of a state: rows (re)written and removed."""

    jobs: int = 0
    jobs_removed: int = 0
    datasets: int = 0
    datasets_removed: int = 0

    @property
    def nothing(self) -> bool:
        return not (self.jobs or self.jobs_removed or self.datasets or self.datasets_removed)

    def __add__(self, other: RowsWritten) -> RowsWritten:
        return RowsWritten(
            self.jobs + other.jobs,
            self.jobs_removed + other.jobs_removed,
            self.datasets + other.datasets,
            self.datasets_removed + other.datasets_removed,
        )


def _chunks(keys: Collection[bytes]) -> Iterator[list[bytes]]:
    listed = list(keys)
    for i in range(0, len(listed), _CHUNK):
        yield listed[i : i + _CHUNK]


class LineageStates(StoreBase):
    """Save and read a definition's lineage state, and the documents beside it."""

    def save_lineage_state(
        self, definition: str, state: Mapping[str, Any], *, now: datetime | None = None
    ) -> None:
        """A document under ``definition``; a whole lineage state is stored as rows
        (``replace_lineage``)."""
        if is_whole_state(state):
            self.replace_lineage(definition, cast(LineageState, state), now=now)
            return
        with self.engine.begin() as conn:
            _save_doc(conn, definition, state, naive(now or utcnow()))

    def lineage_state(self, definition: str) -> dict[str, Any] | None:
        """The document under ``definition``; a lineage state as a whole export gives it."""
        with self.engine.connect() as conn:
            doc = _doc(conn, definition)
            if not is_state_head(doc):
                return doc
            assert isinstance(doc, dict)
            return cast(dict[str, Any], _read_rows(conn, definition, int(doc["jobsNotShown"])))

    def replace_lineage(
        self, definition: str, state: LineageState, *, now: datetime | None = None
    ) -> RowsWritten:
        """A whole export of the definition's state: only the rows that differ are written, the
        rows it no longer has removed."""
        rows = state_rows(*split_state(state))
        with self.engine.begin() as conn:
            written = _write(conn, definition, rows, {}, None, naive(now or utcnow()))
            _save_head(conn, definition, int(state.get("jobsNotShown") or 0), written)
        self._written()
        return written

    def lineage_not_shown(self, definition: str) -> int | None:
        """The jobs the stored state leaves out; None when no state is stored as rows."""
        with self.engine.connect() as conn:
            doc = _doc(conn, definition)
        return int(doc["jobsNotShown"]) if is_state_head(doc) and doc else None

    def lineage_sources(self, definition: str) -> dict[bytes, str | None]:
        """Each stored job row's key with the catalog signature it was exported from."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(_jobs.c.job_key, _jobs.c.source).where(_jobs.c.definition == definition)
            )
            return {key: source for key, source in rows}

    def patch_lineage(
        self,
        definition: str,
        rows: StateRows,
        sources: Mapping[bytes, str | None],
        removed: Collection[bytes],
        *,
        not_shown: int = 0,
        now: datetime | None = None,
        batch: int | None = None,
        mark: str | None = None,
    ) -> RowsWritten:
        """Some jobs exported again (``rows``: them and every dataset they reach, each job with
        its catalog signature in ``sources``) and ``removed`` ones gone; every other row kept.
        ``not_shown``: the jobs a capped definition leaves out. ``batch``: the last patch of a
        complete refresh after that batch's sync (``signed_batch``); else the head says none.
        ``mark``: the catalog change mark the refresh read before it read the catalog
        (``catalog_changes``): without it, or when it has changed since, the head says none
        either."""
        with self.engine.begin() as conn:
            written = _write(conn, definition, rows, sources, removed, naive(now or utcnow()))
            if batch is not None and (mark is None or not mark_is(conn, mark)):
                batch = None
            _save_head(conn, definition, not_shown, written, batch)
        self._written()
        return written

    def lineage_signed_batch(self, definition: str) -> int | None:
        """The batch after whose sync the stored state was brought up to the catalog whole
        (``lineage_state.signed_batch``)."""
        with self.engine.connect() as conn:
            return signed_batch(_doc(conn, definition))

    def unsign_lineage(self, definition: str | None = None) -> None:
        """The catalog changed, or is about to change other than by the definition's own sync:
        the stored state (``definition``'s, or every definition's) no longer says it is up to
        date, so the next sync compares it with the catalog again."""
        table = schema.lineage_state
        with self.engine.begin() as conn:
            new_catalog_change(conn)  # a refresh that read the catalog before signs nothing
            query = select(table.c.definition, table.c.state)
            if definition is not None:
                query = query.where(table.c.definition == definition)
            for name, doc in conn.execute(query).all():
                if signed_batch(doc) is not None:
                    _save_doc(conn, name, state_head(int(doc["jobsNotShown"])), naive(utcnow()))


def _doc(conn: Connection, key: str) -> dict[str, Any] | None:
    return conn.execute(
        select(schema.lineage_state.c.state).where(schema.lineage_state.c.definition == key)
    ).scalar()


def _save_doc(conn: Connection, key: str, doc: Mapping[str, Any], now: datetime) -> None:
    values = {"state": doc, "refreshed_at": now}
    table = schema.lineage_state
    updated = conn.execute(
        table.update().where(table.c.definition == key).values(**values)
    ).rowcount
    if not updated:
        conn.execute(table.insert().values(definition=key, **values))


def _save_head(
    conn: Connection,
    definition: str,
    not_shown: int,
    written: RowsWritten,
    batch: int | None = None,
) -> None:
    """The head, when it says something new or rows changed (its time: the last change)."""
    head = state_head(not_shown, batch)
    if written.nothing and _doc(conn, definition) == head:
        return
    _save_doc(conn, definition, head, naive(utcnow()))


def _read_rows(conn: Connection, definition: str, not_shown: int) -> LineageState:
    """The state of the stored rows, each row's JSON read as it comes."""

    def parts(table: Table) -> Iterator[Any]:
        result = conn.execution_options(yield_per=1000).execute(
            select(table.c.part).where(table.c.definition == definition)
        )
        for (part,) in result:
            yield orjson.loads(part)

    # tens of thousands of small parts, no cycles: a collection in the middle frees nothing
    with gc_paused():
        return joined_state(parts(_jobs), list(parts(_datasets)), not_shown=not_shown)


def _stored(
    conn: Connection, table: Table, key: str, definition: str, keys: Collection[bytes] | None
) -> dict[bytes, tuple[bytes, Any]]:
    """Key -> (digest, source or None) of stored rows: every one, or those of ``keys``."""
    c = table.c
    source = c.source if "source" in c else None
    columns = [c[key], c.digest, source] if source is not None else [c[key], c.digest]
    where = c.definition == definition
    statements = (
        [select(*columns).where(where)]
        if keys is None
        else [select(*columns).where(where, c[key].in_(chunk)) for chunk in _chunks(keys)]
    )
    return {
        row[0]: (row[1], row[2] if source is not None else None)
        for s in statements
        for row in conn.execute(s)
    }


def _stored_links(
    conn: Connection, definition: str, jobs: Collection[bytes] | None
) -> dict[bytes, set[bytes]]:
    c = _links.c
    where = c.definition == definition
    statements = (
        [select(c.job_key, c.dataset_key).where(where)]
        if jobs is None
        else [
            select(c.job_key, c.dataset_key).where(where, c.job_key.in_(k)) for k in _chunks(jobs)
        ]
    )
    out: dict[bytes, set[bytes]] = {}
    for s in statements:
        for job, ds in conn.execute(s):
            out.setdefault(job, set()).add(ds)
    return out


def _write(
    conn: Connection,
    definition: str,
    rows: StateRows,
    sources: Mapping[bytes, str | None],
    removed: Collection[bytes] | None,
    now: datetime,
) -> RowsWritten:
    """Write the rows that differ from the stored ones. ``removed`` None: ``rows`` is the whole
    state (every other row goes); else the jobs removed, and the datasets no job links to go.
    Only rows stored are deleted before their new ones go in (a first sync deletes nothing)."""
    whole = removed is None
    held = _holds(conn, definition)
    stored = (
        _stored(conn, _jobs, "job_key", definition, None if whole else rows["jobs"]) if held else {}
    )
    gone = [k for k in stored if k not in rows["jobs"]] if whole else list(removed or ())
    links = (
        _stored_links(conn, definition, None if whole else [*rows["jobs"], *gone]) if held else {}
    )
    changed: StateRows = {"jobs": {}, "datasets": {}, "links": {}}
    signed: dict[bytes, str | None] = {}
    for key, part in rows["jobs"].items():
        known = stored.get(key)
        if (
            known is None
            or known[0] != part_digest(part)
            or links.get(key, set()) != rows["links"][key]
        ):
            changed["jobs"][key] = part
            changed["links"][key] = rows["links"][key]
        elif not whole and known[1] != sources.get(key):
            # the same part from a new signature: only the signature, so that the next sync
            # does not export it again (a whole export says nothing of signatures)
            signed[key] = sources.get(key)
    for key, source in signed.items():
        conn.execute(
            _jobs.update()
            .where(_jobs.c.definition == definition, _jobs.c.job_key == key)
            .values(source=source)
        )
    _delete(
        conn, _jobs, "job_key", definition, [*gone, *(k for k in changed["jobs"] if k in stored)]
    )
    _delete(
        conn, _links, "job_key", definition, [*gone, *(k for k in changed["jobs"] if k in links)]
    )
    kept = (
        _stored(conn, _datasets, "dataset_key", definition, None if whole else rows["datasets"])
        if held
        else {}
    )
    changed["datasets"] = {
        k: p for k, p in rows["datasets"].items() if kept.get(k, (None,))[0] != part_digest(p)
    }
    _delete(
        conn, _datasets, "dataset_key", definition, [k for k in changed["datasets"] if k in kept]
    )
    schema.insert_lineage_rows(conn, definition, changed, now, sources)
    if whole:
        orphans = [k for k in kept if k not in rows["datasets"]]
        _delete(conn, _datasets, "dataset_key", definition, orphans)
    else:
        unlinked = {k for job in [*gone, *changed["jobs"]] for k in links.get(job, ())}
        orphans = sorted(unlinked - _linked(conn, definition, unlinked))
        _delete(conn, _datasets, "dataset_key", definition, orphans)
    return RowsWritten(len(changed["jobs"]), len(gone), len(changed["datasets"]), len(orphans))


def _holds(conn: Connection, definition: str) -> bool:
    """Whether any row of the definition's state is stored (none before its first sync)."""
    return any(
        conn.execute(select(t.c.definition).where(t.c.definition == definition).limit(1)).first()
        for t in (_jobs, _datasets)
    )


def _delete(
    conn: Connection, table: Table, key: str, definition: str, keys: Iterable[bytes]
) -> None:
    listed = list(keys)
    for chunk in _chunks(listed):
        conn.execute(delete(table).where(table.c.definition == definition, table.c[key].in_(chunk)))


def _linked(conn: Connection, definition: str, datasets: Collection[bytes]) -> set[bytes]:
    """Those of ``datasets`` a job still links to."""
    c = _links.c
    return {
        k
        for chunk in _chunks(datasets)
        for k in conn.scalars(
            select(c.dataset_key).where(c.definition == definition, c.dataset_key.in_(chunk))
        )
    }
