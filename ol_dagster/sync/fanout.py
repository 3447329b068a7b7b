"""One feed, several catalogs: each catalog's part of a batch, and what the batch's status becomes.

A definition may feed several catalogs (``catalogs: [main, lineage]``), for example Marquez as a
lineage store beside the embedded catalog (Egeria's API-based log store). Each catalog gets its
own cutoff, upload, cleanup, guards and report, under its own sync lock and journal: the seed's
guard "any upload of the run failed" is read per catalog, because a row that failed in B is "not
touched" in B only, so B's cleanup is skipped and A's is not. These are the few rules that make
that so, in one place for ``sync.batch`` and the commands:

- ``CatalogTarget``: one catalog of a definition. The primary (the first) keeps every name a
  definition with one catalog always had: its sync lock is the definition's, its facts are also
  the batch's own columns. So a definition with one catalog syncs exactly as before.
- ``record``: a catalog's part of a batch; a batch synced before store version 11 (no catalog
  rows) is read as its primary catalog's, the only one it had.
- ``kept``: a retry leaves alone the catalogs that finished the batch in an earlier run, so A is
  not uploaded and cleaned again because B was down. Two runs of one batch may be in flight at
  once (a retry and a person's run): a finished catalog's row names every run that keeps it
  (``keeping``, ``kept_by``), so the later start does not take it from the earlier one.
- ``batch_status``: SYNCED once every catalog finished the batch; FAILED (retried after its
  backoff) when one failed, counted once per run.
"""

from __future__ import annotations

from dataclasses import dataclass

from ol_dagster.settings import SyncDefinition
from ol_dagster.store import BatchRecord, BatchStatus, CatalogRecord
from ol_dagster.sync.cleanup import RUN_FAILED, UPLOAD_FAILED

# a catalog whose cleanup ended for one of these keeps the batch's events for a retry
RETRY_REASONS = (UPLOAD_FAILED, RUN_FAILED)


@dataclass(frozen=True, slots=True)
class CatalogTarget:
    """One catalog a definition feeds."""

    definition: str
    key: str  # a key of the settings' ``catalogs``
    primary: bool  # the first of the definition's catalogs

    @property
    def lock(self) -> str:
        """The name of its sync lock: the definition's own for the primary catalog (the lock a
        definition with one catalog always had), ``<definition>/<catalog>`` for the others."""
        return self.definition if self.primary else f"{self.definition}/{self.key}"


def target(definition: SyncDefinition, key: str | None = None) -> CatalogTarget:
    """The catalog ``key`` of ``definition`` (its primary catalog when None)."""
    keys = definition.catalog_keys
    chosen = keys[0] if key is None else key
    if chosen not in keys:
        raise ValueError(
            f"definition {definition.name!r} feeds no catalog {chosen!r} (it feeds "
            f"{', '.join(keys)})"
        )
    return CatalogTarget(definition.name, chosen, chosen == keys[0])


def targets(definition: SyncDefinition) -> list[CatalogTarget]:
    """Every catalog of the definition, the primary first."""
    return [target(definition, k) for k in definition.catalog_keys]


def outcome(report_reason: str | None) -> BatchStatus:
    """A catalog's status once its cleanup recorded a report with this ``skippedReason``."""
    return BatchStatus.FAILED if report_reason in RETRY_REASONS else BatchStatus.SYNCED


def record(
    batch: BatchRecord, records: dict[str, CatalogRecord], where: CatalogTarget
) -> CatalogRecord | None:
    """The catalog's part of the batch (``store.catalog_records``), None before its upload."""
    found = records.get(where.key)
    if found is not None or records or not where.primary:
        return found
    if batch.upload_result is None and batch.cleanup_report is None:
        return None
    # synced before version 11: the batch's own columns are its only, primary, catalog's
    status = batch.status if batch.status in (BatchStatus.SYNCED, BatchStatus.FAILED) else None
    return CatalogRecord(
        catalog=where.key,
        status=status,
        run_id=None,
        kept_in_run=None,
        cutoff=batch.cutoff,
        upload_result=batch.upload_result,
        cleanup_report=batch.cleanup_report,
    )


def kept(
    definition: SyncDefinition, batch: BatchRecord, records: dict[str, CatalogRecord]
) -> list[str]:
    """The catalogs a run of the whole sync leaves alone: while the batch is not synced as a whole
    (a retry, or a run after one that died), those that already finished it, so only the
    catalogs that failed are uploaded and cleaned again. A batch synced everywhere and run again
    (a person re-materializing it) is synced again in every catalog, as with one catalog."""
    if batch.status is BatchStatus.SYNCED:
        return []
    out = []
    for where in targets(definition):
        found = record(batch, records, where)
        if found is not None and found.status is BatchStatus.SYNCED:
            out.append(where.key)
    return out


# the store's column naming the runs that keep a finished catalog (Dagster's run ids are 36
# characters: five fit, more than are ever in flight at once)
KEPT_LENGTH = 200


def kept_by(found: CatalogRecord) -> list[str]:
    """The runs that keep this catalog's finished part of the batch (``begin_run``)."""
    return _runs(found.kept_in_run)


def _runs(kept_in_run: str | None) -> list[str]:
    return kept_in_run.split(",") if kept_in_run else []


def keeping(kept_in_run: str | None, run_id: str) -> str:
    """What the row records once run ``run_id`` keeps it too: the latest runs that fit."""
    runs = [r for r in _runs(kept_in_run) if r != run_id] + [run_id]
    while len(runs) > 1 and len(",".join(runs)) > KEPT_LENGTH:
        runs.pop(0)  # the oldest: long over, or never to take its steps
    return ",".join(runs)


def batch_status(
    definition: SyncDefinition,
    batch: BatchRecord,
    records: dict[str, CatalogRecord],
    *,
    finished: str,
    run_id: str,
) -> BatchStatus | None:
    """What the batch's status becomes once catalog ``finished`` recorded its outcome in run
    ``run_id`` (``records`` read after that): SYNCED when every catalog finished the batch;
    FAILED when ``finished`` is the first of this run's catalogs to fail (the retry's backoff
    grows once per run, however many catalogs failed); None: left as it is (other catalogs of
    the run still to come, or already marked FAILED by this run)."""
    found = [record(batch, records, w) for w in targets(definition)]
    if all(r is not None and r.status is BatchStatus.SYNCED for r in found):
        return BatchStatus.SYNCED
    failed_now = [
        r.catalog
        for r in found
        if r is not None and r.status is BatchStatus.FAILED and r.run_id == run_id
    ]
    return BatchStatus.FAILED if failed_now == [finished] else None
