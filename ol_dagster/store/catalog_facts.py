"""Each catalog's part of a batch's sync (``ol_batch_catalogs``, version 11).

A definition may feed several catalogs (``catalogs:``): each has its own upload, cleanup report
and outcome for a batch, so a retry redoes only the catalogs that did not finish. The primary
catalog's upload and report are also kept in the batch's own columns, as before version 11, and
a batch synced before then is adopted (its primary catalog's row written) before any part of it
is written again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    DateTime,
    Integer,
    and_,
    case,
    func,
    literal,
    select,
    tuple_,
    update,
)

from ol_dagster.snapshot_order import SnapshotOrder
from ol_dagster.store.base import StoreBase, aware, naive
from ol_dagster.store.schema import BatchKind, BatchStatus, batch_catalogs, batches

# what an upload result says of its outcome, as ``catalog_results`` reads it
UPLOAD_OUTCOME = (
    "succeeded",
    "skippedReason",
    "written",
    "updated",
    "removed",
    "dropped",
    "renamed",
    "failed",
)


@dataclass(frozen=True, slots=True)
class CatalogRecord:
    """One catalog's part of a batch's sync (``ol_batch_catalogs``, version 11)."""

    catalog: str
    status: BatchStatus | None  # None: uploaded, cleanup pending; SYNCED; FAILED (retry)
    run_id: str | None  # the run that recorded ``status``
    kept_in_run: str | None  # the runs (comma-joined) that leave this finished catalog alone
    cutoff: datetime | None
    upload_result: dict[str, Any] | None
    cleanup_report: dict[str, Any] | None


def _upsert_catalog(conn: Connection, batch_id: int, catalog: str, **values: Any) -> None:
    """Write a batch's row for ``catalog`` (``ol_batch_catalogs``), creating it if needed; the
    definition's sync lock of that catalog keeps two writers of one row apart."""
    bc = batch_catalogs.c
    updated = conn.execute(
        update(batch_catalogs)
        .where(bc.batch_id == batch_id, bc.catalog == catalog)
        .values(**values)
    ).rowcount
    if not updated:
        conn.execute(batch_catalogs.insert().values(batch_id=batch_id, catalog=catalog, **values))


class CatalogFacts(StoreBase):
    """Writing and reading the batch's facts per catalog."""

    def record_upload(
        self,
        batch_id: int,
        *,
        cutoff: datetime | None,
        result: Mapping[str, Any],
        catalog: str | None = None,
        primary: bool = True,
    ) -> None:
        """The batch's upload to ``catalog`` (its row in ``ol_batch_catalogs``), and, for the
        primary catalog (``primary``), in the batch's own columns too, in one transaction.
        Without ``catalog``: the batch's columns only (as before version 11)."""
        cut = naive(cutoff) if cutoff else None
        with self.engine.begin() as conn:
            if catalog is not None:
                # a new upload: the catalog's outcome is open again until its cleanup ends
                _upsert_catalog(
                    conn, batch_id, catalog, cutoff=cut, upload_result=result, status=None
                )
            if primary or catalog is None:
                conn.execute(
                    batches.update()
                    .where(batches.c.id == batch_id)
                    .values(cutoff=cut, upload_result=result)
                )

    def record_cleanup(
        self,
        batch_id: int,
        report: Mapping[str, Any],
        *,
        catalog: str | None = None,
        primary: bool = True,
        status: BatchStatus | None = None,
        run_id: str | None = None,
    ) -> None:
        """The cleanup report of ``catalog`` for the batch with its outcome (``status``, by
        ``run_id``); the primary catalog's also in the batch's own column."""
        with self.engine.begin() as conn:
            if catalog is not None:
                _upsert_catalog(
                    conn,
                    batch_id,
                    catalog,
                    cleanup_report=report,
                    status=status.value if status is not None else None,
                    run_id=run_id,
                )
            if primary or catalog is None:
                conn.execute(
                    batches.update().where(batches.c.id == batch_id).values(cleanup_report=report)
                )

    def catalog_results(
        self, definition: str, catalog: str, after_id: int, up_to: int
    ) -> list[tuple[int, bool, dict[str, Any] | None, Any]]:
        """Each batch of ``definition`` after ``after_id`` up to ``up_to`` (RECEIVING ones
        left out), in id order, with whether ``catalog`` has its record, that record's upload
        result (its counts and outcome only: ``UPLOAD_OUTCOME``, not the graph's facts it also
        keeps, half a megabyte at 10,000 jobs) and its cleanup report: in one read, as checking
        the batches since the lineage state was last brought up to the catalog reads them
        after every sync."""
        bc = batch_catalogs.c
        query = (
            select(
                batches.c.id,
                bc.batch_id,
                bc.cleanup_report,
                *(bc.upload_result[k] for k in UPLOAD_OUTCOME),
            )
            .outerjoin(batch_catalogs, and_(bc.batch_id == batches.c.id, bc.catalog == catalog))
            .where(
                batches.c.definition == definition,
                batches.c.id > after_id,
                batches.c.id <= up_to,
                batches.c.status != BatchStatus.RECEIVING,
            )
            .order_by(batches.c.id)
        )
        with self.engine.connect() as conn:
            return [
                (
                    int(i),
                    held is not None,
                    {k: v for k, v in zip(UPLOAD_OUTCOME, outcome, strict=True) if v is not None}
                    or None,
                    report,
                )
                for i, held, report, *outcome in conn.execute(query)
            ]

    def catalog_records(self, batch_id: int) -> dict[str, CatalogRecord]:
        """Each catalog's part of the batch, by catalog key (none for a batch synced before
        version 11, or not uploaded yet)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(batch_catalogs).where(batch_catalogs.c.batch_id == batch_id)
            ).all()
        out = {}
        for row in rows:
            m = row._mapping
            out[m["catalog"]] = CatalogRecord(
                catalog=m["catalog"],
                status=BatchStatus(m["status"]) if m["status"] else None,
                run_id=m["run_id"],
                kept_in_run=m["kept_in_run"],
                cutoff=aware(m["cutoff"]),
                upload_result=m["upload_result"],
                cleanup_report=m["cleanup_report"],
            )
        return out

    def adopt_catalog_record(self, batch_id: int, record: CatalogRecord) -> None:
        """Write ``record`` as the batch's row for its catalog unless the batch has catalog rows
        already: a batch synced before version 11 gets its primary catalog's row (read from its
        own columns, ``sync.fanout.record``) before anything writes part of one."""
        bc = batch_catalogs.c
        with self.engine.begin() as conn:
            if conn.execute(select(bc.batch_id).where(bc.batch_id == batch_id).limit(1)).first():
                return
            conn.execute(
                batch_catalogs.insert().values(
                    batch_id=batch_id,
                    catalog=record.catalog,
                    status=record.status.value if record.status is not None else None,
                    run_id=record.run_id,
                    kept_in_run=record.kept_in_run,
                    cutoff=naive(record.cutoff) if record.cutoff else None,
                    upload_result=record.upload_result,
                    cleanup_report=record.cleanup_report,
                )
            )

    def keep_catalogs(
        self, batch_id: int, catalogs: Sequence[str], merge: Callable[[str | None], str]
    ) -> None:
        """A run leaves these catalogs alone: they finished the batch. ``merge`` turns the runs
        that keep a catalog into those that do once this run does; read and written in one
        transaction, the row locked, so two runs starting at once both stay recorded."""
        if not catalogs:
            return
        bc = batch_catalogs.c
        with self.engine.begin() as conn:
            rows = conn.execute(
                select(bc.catalog, bc.kept_in_run)
                .where(bc.batch_id == batch_id, bc.catalog.in_(list(catalogs)))
                .with_for_update()
            ).all()
            for catalog, kept in rows:
                conn.execute(
                    update(batch_catalogs)
                    .where(bc.batch_id == batch_id, bc.catalog == catalog)
                    .values(kept_in_run=merge(kept))
                )

    def newer_synced_snapshot(
        self,
        order: SnapshotOrder,
        definition: str,
        *,
        catalog: str | None = None,
        primary: bool = True,
    ) -> int | None:
        """The newest whole snapshot of the definition, newer than ``order`` by the producer's
        order (``ol_dagster.snapshot_order``), already synced (to ``catalog``: its part finished
        there; for the ``primary`` catalog a batch synced before version 11, which has no catalog
        rows, counts by its own status); None when there is none."""
        b = batches.c
        key = _order_key()
        newer = and_(
            b.definition == definition,
            b.kind == BatchKind.POSTED,
            b.whole_snapshot.is_(True),
            tuple_(*key) > tuple_(*_literal_key(order)),
        )
        if catalog is None:
            synced = b.status == BatchStatus.SYNCED
        else:
            bc = batch_catalogs.c
            in_catalog = (
                select(bc.batch_id)
                .where(
                    bc.batch_id == b.id,
                    bc.catalog == catalog,
                    bc.status == BatchStatus.SYNCED.value,
                )
                .exists()
            )
            synced = in_catalog
            if primary:
                legacy = and_(
                    b.status == BatchStatus.SYNCED,
                    ~select(bc.batch_id).where(bc.batch_id == b.id).exists(),
                )
                synced = in_catalog | legacy
        query = select(b.id).where(newer, synced).order_by(*(k.desc() for k in key)).limit(1)
        with self.engine.connect() as conn:
            return conn.execute(query).scalar()


def newest_synced_snapshot(conn: Connection, definition: str) -> int | None:
    """The definition's newest whole snapshot synced (to every catalog), by the producer's order:
    retention keeps it, so that it still supersedes an older snapshot synced after its time."""
    b = batches.c
    key = _order_key()
    query = (
        select(b.id)
        .where(
            b.definition == definition,
            b.kind == BatchKind.POSTED,
            b.whole_snapshot.is_(True),
            b.status == BatchStatus.SYNCED,
        )
        .order_by(*(k.desc() for k in key))
        .limit(1)
    )
    return conn.execute(query).scalar()


def _order_key() -> tuple[ColumnElement[Any], ...]:
    """``SnapshotOrder.key`` of a stored batch, in SQL: (carries a sequence, sequence, time, id)."""
    b = batches.c
    has = case((b.snapshot_sequence.is_(None), 0), else_=1)
    return (
        has,
        func.coalesce(b.snapshot_sequence, 0),
        func.coalesce(b.ordered_at, b.received_at),
        b.id,
    )


def _literal_key(order: SnapshotOrder) -> tuple[ColumnElement[Any], ...]:
    has, sequence, at, batch_id = order.key()
    return (
        literal(has, Integer),
        literal(sequence, BigInteger),
        literal(naive(at), DateTime),
        literal(batch_id, BigInteger),
    )
