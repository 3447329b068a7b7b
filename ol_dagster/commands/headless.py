"""Syncing without the UI: seal pending batches and materialize them, in order, on an instance.

This is what ``ol-dagster sync`` and ``ol-dagster demo`` run. It goes through the same job, assets
and checks as the sensor-launched runs, on the Dagster instance in ``DAGSTER_HOME`` (so the runs
show in the UI afterwards), and prints one JSON line per batch (with a ``catalogs`` part, each
catalog's own outcome and report, for a definition that feeds several). A batch another sync
finished after this one listed it is not synced again: its line says ALREADY_SYNCED and which run
synced it, whether that was seen before its run started or, under the definition's lock, in it.
Each run is tagged with this process, so that a sync killed outright does not leave its run
blocking the definition (``defs.dead_runs``): the next sync, or the definition's sensor, fails
it.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import sqlalchemy.exc

from ol_dagster.definitions import build_defs
from ol_dagster.defs import constants as C
from ol_dagster.defs import names
from ol_dagster.defs.dagster_private import sqlite_instance
from ol_dagster.defs.dead_runs import fail_dead_runs, process_tags
from ol_dagster.defs.run_lineage import lineage_sent, report_failed_run
from ol_dagster.ownership import removal_cap
from ol_dagster.settings import Settings, SyncDefinition, load_settings, settings_path
from ol_dagster.store import BatchRecord, BatchStatus, EventStore
from ol_dagster.sync import fanout
from ol_dagster.sync.cleanup import ALREADY_SYNCED, skipped_report
from ol_dagster.sync.run_failure import run_failure, secret_values

DEFAULT_HOME = ".dagster_home"
# Headless runs print one JSON line per batch; Dagster's step-by-step log goes to the instance.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def instance_from_env(project_dir: Path) -> dg.DagsterInstance:
    """The instance in ``DAGSTER_HOME``; when unset, a persistent one next to the settings. On
    Dagster's default SQLite storage, its files are opened once per process rather than once per
    stored event (``dagster_private.sqlite_instance``)."""
    if not os.environ.get("DAGSTER_HOME"):
        home = (project_dir / DEFAULT_HOME).resolve()
        home.mkdir(parents=True, exist_ok=True)
        template = project_dir / "dagster.yaml"
        if template.exists() and not (home / "dagster.yaml").exists():
            shutil.copy(template, home / "dagster.yaml")
        print(f"DAGSTER_HOME is not set: using the instance in {home}", file=sys.stderr)
        os.environ["DAGSTER_HOME"] = str(home)
    return sqlite_instance()


# the upload record's per-job lists the cleanup reads: a line says how many, not which (at
# 10,000 jobs they made a 500 KB line)
_COUNTED = ("describedJobs", "completedJobs", "drops")


def _upload_summary(upload: dict[str, Any] | None) -> dict[str, Any] | None:
    """The batch's upload record as a sync line shows it: its graph facts' job lists counted."""
    if not upload or not isinstance(upload.get("graph"), dict):
        return upload
    graph = {k: len(v) if k in _COUNTED else v for k, v in upload["graph"].items()}
    return {**upload, "graph": graph}


def _per_catalog(definition: SyncDefinition, evaluation: dg.AssetCheckEvaluation) -> bool:
    """A check of one catalog's asset, when the definition feeds several."""
    path = evaluation.asset_key.path
    return len(definition.catalog_keys) > 1 and len(path) == 3


def _catalog_sections(
    store: EventStore,
    definition: SyncDefinition,
    batch: BatchRecord,
    evaluations: Sequence[dg.AssetCheckEvaluation],
) -> dict[str, dict[str, Any]]:
    """The ``catalogs`` part of a sync line: per catalog, its outcome (``synced``, ``failed`` for
    a retry, ``pending`` when its steps did not record one), its upload, its cleanup report and
    its checks."""
    records = store.catalog_records(batch.id)
    out: dict[str, dict[str, Any]] = {}
    for where in fanout.targets(definition):
        mine = fanout.record(batch, records, where)
        status = mine.status.value if mine is not None and mine.status is not None else "pending"
        out[where.key] = {
            "status": status,
            "upload": _upload_summary(mine.upload_result if mine else None),
            "cleanup": mine.cleanup_report if mine else None,
            "checks": {
                e.check_name: e.passed
                for e in evaluations
                if _per_catalog(definition, e) and e.asset_key.path[1] == where.key
            },
        }
    return out


def _fail_reporter(
    instance: dg.DagsterInstance, definition: SyncDefinition, settings: Settings, store: EventStore
) -> Callable[[str, str], None]:
    """``report(run_id, reason)`` for ``fail_dead_runs``: the dead run's OpenLineage FAIL (its
    hooks never sent it), a warning on stderr when the target did not take it."""

    def report(run_id: str, reason: str) -> None:
        warning = report_failed_run(instance, definition, run_id, reason, lambda: (settings, store))
        if warning:
            print(f"{definition.name}: run {run_id}: {warning}", file=sys.stderr)

    return report


def _found_synced(result: dg.ExecuteInProcessResult) -> bool:
    """Every catalog's cleanup of the run said ALREADY_SYNCED: another run synced the batch
    after this one was requested, and this one synced nothing."""
    reasons = []
    for event in result.get_asset_materialization_events():
        key, metadata = event.asset_key, event.materialization.metadata
        if key is not None and key.path[-1] == names.CATALOG_CLEANUP:
            reason = metadata.get("skippedReason")
            reasons.append(reason.value if reason is not None else None)
    return bool(reasons) and all(r == ALREADY_SYNCED for r in reasons)


def _already_synced_line(
    store: EventStore,
    definition: SyncDefinition,
    batch: BatchRecord,
    run_id: str | None,
    checks: dict[str, bool],
) -> dict[str, Any]:
    """The line of a batch another sync finished after this one listed it: ALREADY_SYNCED, with
    the run that synced it, and nothing of its upload or removals (that run's own line, or its
    run in Dagster, says them: counted once). ``run_id``: this process's run that found it
    synced, None when it was seen synced before a run was started."""
    where = fanout.target(definition)
    mine = fanout.record(batch, store.catalog_records(batch.id), where)
    synced_in = (mine.run_id if mine is not None else None) or ""
    cleanup = skipped_report(ALREADY_SYNCED, None, removal_cap(definition))
    cleanup["syncedInRun"] = synced_in
    return {
        "definition": definition.name,
        "batchId": batch.id,
        "status": batch.status.value,
        "skippedReason": ALREADY_SYNCED,
        "syncedInRun": synced_in,
        "runId": run_id,
        "upload": {"skippedReason": ALREADY_SYNCED, "syncedInRun": synced_in},
        "cleanup": cleanup,
        "checks": checks,
    }


def _add_partition(instance: dg.DagsterInstance, partitions: str, key: str) -> None:
    """Add a batch's partition, which a second sync started at the same time may add first.

    Dagster checks for the key and then inserts it, not atomically: the loser of the race gets
    the storage's unique-key error, which only means the partition is there.
    """
    if instance.has_dynamic_partition(partitions, key):
        return
    try:
        instance.add_dynamic_partitions(partitions, [key])
    except sqlalchemy.exc.IntegrityError:
        if not instance.has_dynamic_partition(partitions, key):
            raise


def sync_batches(
    path: str | None = None,
    *,
    definition: str | None = None,
    instance: dg.DagsterInstance,
    run_config: dict[str, Any] | None = None,
) -> Iterator[dict[str, Any]]:
    """Seal every open batch, then run the sync job for each pending batch in batch order."""
    settings = load_settings(path)
    # the sync jobs of the definitions synced only: the synced lineage's external assets are for
    # the UI's asset graph, the analyses for their own schedule
    defs = build_defs(
        str(settings_path(path)),
        synced_lineage=False,
        definitions=[definition] if definition else None,
        analyses=False,
    )
    store = EventStore(settings.store.url)
    chosen = [settings.definition(definition)] if definition else settings.definitions
    try:
        for d in chosen:
            # a killed earlier sync's run must not stay STARTED, holding the definition's slot
            report = _fail_reporter(instance, d, settings, store)
            for run_id in fail_dead_runs(instance, d.name, report=report):
                print(f"{d.name}: failed run {run_id}, whose process is gone", file=sys.stderr)
            store.seal_due(d.name, window_seconds=0, max_events=1, force=True)
            job = defs.resolve_job_def(names.job(d.name))
            for batch in store.batches(d.name, statuses=[BatchStatus.SEALED, BatchStatus.FAILED]):
                key = batch.partition_key
                # another sync (a sensor run, another ``ol-dagster sync``) may have synced it
                # since it was listed: not run again
                current = store.get_batch(batch.id)
                if current.status is BatchStatus.SYNCED:
                    yield _already_synced_line(store, d, current, None, {})
                    continue
                _add_partition(instance, names.partitions(d.name), key)
                result = job.execute_in_process(
                    instance=instance,
                    partition_key=key,
                    tags={
                        C.DEFINITION_TAG: d.name,
                        C.BATCH_TAG: key,
                        C.PENDING_TAG: "true",
                        **process_tags(),
                    },
                    run_config={**QUIET, **(run_config or {})},
                    raise_on_error=False,
                )
                evaluations = result.get_asset_check_evaluations()
                checks = {e.check_name: e.passed for e in evaluations if not _per_catalog(d, e)}
                done = store.get_batch(batch.id)
                if result.success and _found_synced(result):
                    # it was synced by another run while this one waited for the lock
                    yield _already_synced_line(store, d, done, result.run_id, checks)
                    continue
                line = {
                    "definition": d.name,
                    "batchId": batch.id,
                    "status": done.status.value if result.success else "run_failed",
                    "runId": result.run_id,
                    "upload": _upload_summary(done.upload_result),
                    "cleanup": done.cleanup_report,
                    "checks": checks,
                }
                if len(d.catalog_keys) > 1:  # each catalog's own outcome, upload, cleanup, checks
                    line["catalogs"] = _catalog_sections(store, d, done, evaluations)
                if not result.success:  # the failing step and its error, from the run's events
                    line["failure"] = run_failure(result.all_events, secret_values(settings))
                if d.openLineage is not None:  # what the run's hooks sent (defs.run_lineage)
                    line["openLineage"] = lineage_sent(instance, result.run_id)
                yield line
    finally:
        store.dispose()
