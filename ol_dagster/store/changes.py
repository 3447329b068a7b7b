"""What a definition last synced of each job and dataset, and each batch's change set.

A batch's change set (``ol_dagster.changes``) compares each job the upload wrote with the part of
it synced before, kept here per definition and catalog, and is kept with the batch. The parts are
JSON the store does not read; their digest tells an unchanged part without reading it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import Connection, select

from ol_dagster.store import schema
from ol_dagster.store.base import StoreBase, naive, utcnow
from ol_dagster.store.part_refs import insert_refs, ref_rows

_CHUNK = 500  # keys per IN list
JOB = "job"  # the kind of part whose datasets the store indexes (``part_refs``)
# the one row of this kind per definition and catalog names what the parts were last recorded
# from (``recorded_from``); any other write of the parts takes it away
RECORDED = "recorded"


def part_key(namespace: str, name: str) -> str:
    """The key a (namespace, name) is stored under: short whatever the names' length."""
    return hashlib.blake2b(orjson.dumps([namespace, name]), digest_size=16).hexdigest()


@dataclass(frozen=True, slots=True)
class StoredPart:
    definition: str
    namespace: str
    name: str
    digest: str
    part: dict[str, Any]


class LineageChanges(StoreBase):
    """The synced parts of jobs and datasets, and the change set of each batch and catalog."""

    def all_part_digests(self, definition: str, catalog: str) -> dict[str, dict[str, str]]:
        """Kind -> key -> digest of every part the definition synced to ``catalog``."""
        t = schema.lineage_parts
        out: dict[str, dict[str, str]] = {}
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(t.c.kind, t.c.key, t.c.digest).where(
                    t.c.definition == definition, t.c.catalog == catalog
                )
            ).all()  # fetched at once: tens of thousands of rows, one by one cost ten times more
            for kind, key, digest in rows:
                out.setdefault(kind, {})[key] = digest
        return out

    def parts(
        self, definition: str, catalog: str, kind: str, keys: Iterable[str]
    ) -> dict[str, StoredPart]:
        """The parts of these keys (those the definition synced)."""
        t = schema.lineage_parts
        wanted = sorted(set(keys))
        out: dict[str, StoredPart] = {}
        if not wanted:
            return out
        with self.engine.connect() as conn:
            for i in range(0, len(wanted), _CHUNK):
                rows = conn.execute(
                    select(t.c.key, t.c.namespace, t.c.name, t.c.digest, t.c.part).where(
                        t.c.definition == definition,
                        t.c.catalog == catalog,
                        t.c.kind == kind,
                        t.c.key.in_(wanted[i : i + _CHUNK]),
                    )
                )
                for key, ns, name, digest, part in rows:
                    out[key] = StoredPart(definition, ns, name, digest, part)
        return out

    def parts_of_any(self, catalog: str, kind: str, keys: Iterable[str]) -> list[StoredPart]:
        """The parts of these keys on ``catalog``, whichever definition synced them."""
        t = schema.lineage_parts
        wanted = sorted(set(keys))
        out: list[StoredPart] = []
        with self.engine.connect() as conn:
            for i in range(0, len(wanted), _CHUNK):
                rows = conn.execute(
                    select(t.c.definition, t.c.namespace, t.c.name, t.c.digest, t.c.part).where(
                        t.c.catalog == catalog,
                        t.c.kind == kind,
                        t.c.key.in_(wanted[i : i + _CHUNK]),
                    )
                )
                out.extend(StoredPart(*row) for row in rows)
        return out

    def jobs_naming(
        self, catalog: str, refs: Iterable[int], definition: str | None = None
    ) -> list[StoredPart]:
        """The job parts on ``catalog`` (of ``definition``, or of any) that name one of these
        ``refs`` (``part_refs.ref``: the job itself or a dataset it names); may hold a few
        more (``part_refs``), never fewer."""
        r = schema.part_refs
        wanted = sorted(set(refs))
        found: dict[str, set[str]] = {}  # definition -> keys
        with self.engine.connect() as conn:
            for i in range(0, len(wanted), _CHUNK):
                where = [r.c.catalog == catalog, r.c.ref.in_(wanted[i : i + _CHUNK])]
                if definition is not None:
                    where.append(r.c.definition == definition)
                for d, key in conn.execute(select(r.c.definition, r.c.key).where(*where)):
                    found.setdefault(d, set()).add(key)
        return [p for d, keys in found.items() for p in self.parts(d, catalog, JOB, keys).values()]

    def recorded_from(self, definition: str, catalog: str) -> str | None:
        """What the parts were last recorded from (``record_parts_from``), if nothing wrote
        them since."""
        t = schema.lineage_parts
        with self.engine.connect() as conn:
            return conn.execute(
                select(t.c.digest).where(
                    t.c.definition == definition, t.c.catalog == catalog, t.c.kind == RECORDED
                )
            ).scalar()

    def record_parts_from(self, definition: str, catalog: str, source: str) -> None:
        """The parts are now those recorded from ``source`` (a digest of what they were made
        of): kept until any write of the parts (``replace_parts``)."""
        t = schema.lineage_parts
        with self.engine.begin() as conn:
            _forget_recorded(conn, definition, catalog)
            conn.execute(
                t.insert().values(
                    definition=definition,
                    catalog=catalog,
                    kind=RECORDED,
                    key="",
                    namespace="",
                    name="",
                    digest=source,
                    part={},
                )
            )
        self._written()

    def replace_parts(
        self,
        definition: str,
        catalog: str,
        kind: str,
        written: Sequence[tuple[str, str, str, Mapping[str, Any]]],
        removed: Iterable[tuple[str, str]] = (),
    ) -> None:
        """Store ``written`` parts ((namespace, name, digest, part), replacing what was there)
        and forget the ``removed`` (namespace, name), in one transaction."""
        t = schema.lineage_parts
        keys = [part_key(ns, name) for ns, name, _, _ in written]
        keys += [part_key(ns, name) for ns, name in removed]
        if not keys:
            return
        where = (t.c.definition == definition, t.c.catalog == catalog, t.c.kind == kind)
        r = schema.part_refs
        with self.engine.begin() as conn:
            _forget_recorded(conn, definition, catalog)
            for i in range(0, len(keys), _CHUNK):
                chunk = keys[i : i + _CHUNK]
                conn.execute(t.delete().where(*where, t.c.key.in_(chunk)))
                if kind == JOB:
                    mine = (r.c.catalog == catalog, r.c.definition == definition)
                    conn.execute(r.delete().where(*mine, r.c.key.in_(chunk)))
            if kind == JOB:  # the refs of a job part go and come with it
                jobs = [(k, ns, n, p) for k, (ns, n, _, p) in zip(keys, written, strict=False)]
                insert_refs(conn, ref_rows(catalog, definition, jobs))
            rows = [
                {
                    "definition": definition,
                    "catalog": catalog,
                    "kind": kind,
                    "key": key,
                    "namespace": ns,
                    "name": name,
                    "digest": digest,
                    "part": part,
                }
                for key, (ns, name, digest, part) in zip(keys, written, strict=False)
            ]
            if rows:
                conn.execute(t.insert(), rows)
        self._written()

    def save_change_set(
        self,
        batch_id: int,
        catalog: str,
        change_set: Mapping[str, Any],
        *,
        now: datetime | None = None,
    ) -> None:
        """Keep the change set of a batch in a catalog (replacing an earlier one)."""
        t = schema.batch_changes
        values = {"change_set": change_set, "recorded_at": naive(now or utcnow())}
        with self.engine.begin() as conn:
            updated = conn.execute(
                t.update().where(t.c.batch_id == batch_id, t.c.catalog == catalog).values(**values)
            ).rowcount
            if not updated:
                conn.execute(t.insert().values(batch_id=batch_id, catalog=catalog, **values))
        self._written()

    def change_set(self, batch_id: int, catalog: str) -> dict[str, Any] | None:
        """The change set recorded for a batch in a catalog, if any."""
        t = schema.batch_changes
        with self.engine.connect() as conn:
            return conn.execute(
                select(t.c.change_set).where(t.c.batch_id == batch_id, t.c.catalog == catalog)
            ).scalar()

    def latest_change_batch(self, definition: str, catalog: str) -> int | None:
        """The newest batch of ``definition`` with a change set in ``catalog``."""
        t, b = schema.batch_changes, schema.batches
        with self.engine.connect() as conn:
            return conn.execute(
                select(t.c.batch_id)
                .join(b, b.c.id == t.c.batch_id)
                .where(b.c.definition == definition, t.c.catalog == catalog)
                .order_by(t.c.batch_id.desc())
                .limit(1)
            ).scalar()


def _forget_recorded(conn: Connection, definition: str, catalog: str) -> None:
    t = schema.lineage_parts
    conn.execute(
        t.delete().where(t.c.definition == definition, t.c.catalog == catalog, t.c.kind == RECORDED)
    )
