"""What a definition last synced of each job and dataset, and each batch's change set.

A batch's change set (``ol_dagster.changes``) compares each job the upload wrote with the part of
it synced before, kept here per definition and catalog, and is kept with the batch. The parts are
JSON the store does not read; their digest tells an unchanged part without reading it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import select

from ol_dagster.store import schema
from ol_dagster.store.base import StoreBase, naive, utcnow

_CHUNK = 500  # keys per IN list


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

    def part_names(self, definition: str, catalog: str, kind: str) -> set[tuple[str, str]]:
        """The (namespace, name) of every part of ``kind`` the definition synced to ``catalog``."""
        t = schema.lineage_parts
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(t.c.namespace, t.c.name).where(
                    t.c.definition == definition, t.c.catalog == catalog, t.c.kind == kind
                )
            ).all()
            return {(ns, name) for ns, name in rows}

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

    def catalog_parts(self, catalog: str, kind: str) -> Iterator[StoredPart]:
        """Every part of ``kind`` synced to ``catalog``, whichever definition synced it."""
        t = schema.lineage_parts
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(t.c.definition, t.c.namespace, t.c.name, t.c.digest, t.c.part).where(
                    t.c.catalog == catalog, t.c.kind == kind
                )
            ).all()
        for definition, ns, name, digest, part in rows:
            yield StoredPart(definition, ns, name, digest, part)

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
        with self.engine.begin() as conn:
            for i in range(0, len(keys), _CHUNK):
                conn.execute(t.delete().where(*where, t.c.key.in_(keys[i : i + _CHUNK])))
            rows = [
                {
                    "definition": definition,
                    "catalog": catalog,
                    "kind": kind,
                    "key": part_key(ns, name),
                    "namespace": ns,
                    "name": name,
                    "digest": digest,
                    "part": part,
                }
                for ns, name, digest, part in written
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
