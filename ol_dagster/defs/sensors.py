"""The ``<definition>__new_batches`` sensor: sealed batches become partitions and runs, in order.

Each tick seals the stream batches that are due (older than ``limits.batchWindowSeconds`` or
holding ``limits.maxEventsPerRun`` events), adds a dynamic partition per new batch and requests one
run per batch in batch order, with ``run_key`` = batch id so the daemon never launches a batch
twice.
The cursor is the last batch id requested. A batch whose sync failed (its upload failed, or the
run did) keeps its events and is requested again once its backoff has passed (1, 2, 4... minutes,
at most an hour), with run key ``<batch id>:retry<attempts>``.
Each tick first fails the definition's runs whose ``ol-dagster sync`` process is gone on this
machine (``defs.dead_runs``): such a run would hold the definition's only slot, and keep the runs
requested here QUEUED, until run monitoring's ``max_runtime_seconds``. Such a run, and one the
failure sensor sees (a worker lost or never started), sends its OpenLineage FAIL from here when
its definition reports its runs and no hook sent it (``defs.run_lineage.report_failed_run``).
Each tick reads the settings file once: a change of the definition's limits or of the retention
applies from the next tick on.
"""

from __future__ import annotations

from collections.abc import Callable

import dagster as dg

from ol_dagster.defs import constants as C
from ol_dagster.defs import names
from ol_dagster.defs.dagster_private import SyncJob
from ol_dagster.defs.dead_runs import fail_dead_runs
from ol_dagster.defs.resources import StoreResource, store_of
from ol_dagster.defs.run_lineage import report_failed_run
from ol_dagster.settings import SyncDefinition
from ol_dagster.store import BatchStatus
from ol_dagster.sync.batch import fail_run, purge_expired


def _fail_reporter(
    context: dg.SensorEvaluationContext | dg.RunFailureSensorContext,
    definition: SyncDefinition,
    ol_store: StoreResource,
) -> Callable[[str, str], None]:
    """``report(run_id, reason)``: a failed run's OpenLineage FAIL, a warning in the tick's log
    when the target did not take it."""

    def report(run_id: str, reason: str) -> None:
        warning = report_failed_run(
            context.instance,
            definition,
            run_id,
            reason,
            lambda: (ol_store.settings(), ol_store.get()),
        )
        if warning:
            context.log.warning(f"run {run_id}: {warning}")

    return report


def build_sensor(
    definition: SyncDefinition,
    partitions: dg.DynamicPartitionsDefinition,
    job: SyncJob,
    files: names.FileNames,
) -> dg.SensorDefinition:
    @dg.sensor(
        name=names.new_batches_sensor(definition.name),
        job=job,
        minimum_interval_seconds=C.SENSOR_INTERVAL_SECONDS,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Seals and syncs new OpenLineage batches of {definition.name}, in order.",
        required_resource_keys={files.store},
    )
    def new_batches(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        ol_store = store_of(context, files)
        report = _fail_reporter(context, definition, ol_store)
        for run_id in fail_dead_runs(context.instance, definition.name, report=report):
            context.log.warning(f"failed run {run_id}: its ol-dagster sync process is gone")
        # this tick's version of the settings file, read once (``defs.resources``): its limits
        # and retention apply from this tick on, as in the runs it requests, which load the file
        settings = ol_store.settings()
        current = next((d for d in settings.definitions if d.name == definition.name), None)
        if current is None:
            return dg.SensorResult(
                skip_reason=f"{definition.name} is no longer in the settings file: nothing "
                "sealed or requested until the code location is reloaded without it"
            )
        store = ol_store.get()
        purged = [str(i) for i in purge_expired(store, current, settings.retention.keepDays)]
        sealed = store.seal_due(
            definition.name,
            window_seconds=current.limits.batchWindowSeconds,
            max_events=current.limits.maxEventsPerRun,
        )
        after = int(context.cursor) if context.cursor else 0
        # A stream batch keeps the id it got with its first event, so one sealed this tick can lie
        # behind the cursor (a post made during its window was requested first): request it too.
        late = [str(i) for i in sealed if i <= after]
        store.remove_abandoned(definition.name)  # of a receiver killed mid-post
        pending = store.batches(
            definition.name,
            statuses=[BatchStatus.SEALED],
            after_id=after,
            limit=C.SENSOR_MAX_RUNS_PER_TICK,
        )
        # a failed sync keeps its events: retried once its backoff passed, under a new run key
        retries = store.due_retries(definition.name)
        removals = [partitions.build_delete_request(purged)] if purged else []
        if not pending and not late and not retries:
            return dg.SensorResult(
                skip_reason=f"no new batch (sealed {len(sealed)} stream batch(es) this tick)",
                dynamic_partitions_requests=removals or None,
            )
        keys = late + [b.partition_key for b in pending]
        requests = [(b.partition_key, f"{b.id}:retry{b.attempts}") for b in retries]
        requests += [(key, key) for key in keys]
        return dg.SensorResult(
            run_requests=[
                dg.RunRequest(
                    run_key=run_key,
                    partition_key=key,
                    tags={
                        C.DEFINITION_TAG: definition.name,
                        C.BATCH_TAG: key,
                        C.PENDING_TAG: "true",
                    },
                )
                for key, run_key in requests
            ],
            dynamic_partitions_requests=[partitions.build_add_request(keys), *removals],
            cursor=str(_cursor(store, after, pending)),
        )

    def _cursor(store, after: int, pending: list) -> int:
        """The last batch requested, but below any batch still being received (store:
        RECEIVING): a large post is sealed after batches with higher ids, and must be requested
        then; run keys keep the batches above it from running twice. Read after ``pending``: a
        batch that starts being received later has a higher id than all of them."""
        if not pending:
            return after
        receiving = store.receiving_floor(definition.name)
        if receiving is None:
            return pending[-1].id
        return max(after, min(pending[-1].id, receiving - 1))

    return new_batches


def build_failure_sensor(
    definition: SyncDefinition, job: SyncJob, files: names.FileNames
) -> dg.SensorDefinition:
    """A sync run that failed before its cleanup (a crash, a killed worker) must not leave its
    batch waiting for nothing: the batch becomes FAILED, keeps its events, gets a RUN_FAILED
    report, and the new-batches sensor retries it after its backoff (``sync.batch.fail_run``).
    A run that failed with no hook left to run sends its OpenLineage FAIL here, with Dagster's
    failure message (once: a FAIL its hook or ``defs.dead_runs`` sent is not sent again)."""

    def failed_syncs(status: dg.RunStatusSensorContext, **_resources: object) -> None:
        # (a direct call, as in a test, also passes the resources by key: read from the context)
        context = status.for_run_failure()
        ol_store = store_of(context, files)
        key = context.dagster_run.tags.get("dagster/partition")
        run_id = context.dagster_run.run_id
        if key and key.isdigit():
            fail_run(ol_store.get(), definition, int(key), run_id)
        reason = context.failure_event.message or "the sync run failed"
        _fail_reporter(context, definition, ol_store)(run_id, reason)

    # ``dg.run_failure_sensor`` with the file's resource key (the decorator takes resources by
    # parameter name only)
    return dg.RunStatusSensorDefinition(
        name=names.failed_syncs_sensor(definition.name),
        run_status=dg.DagsterRunStatus.FAILURE,
        run_status_sensor_fn=failed_syncs,
        monitored_jobs=[job],
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Marks batches of {definition.name} whose sync run failed for a retry.",
        required_resource_keys={files.store},
    )
