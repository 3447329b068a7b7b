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
requested here QUEUED, until run monitoring's ``max_runtime_seconds``.
"""

from datetime import timedelta

import dagster as dg

from ol_dagster.defs import constants as C
from ol_dagster.defs.dead_runs import fail_dead_runs
from ol_dagster.defs.resources import StoreResource
from ol_dagster.settings import Definition
from ol_dagster.store import BatchStatus
from ol_dagster.store.event_store import utcnow
from ol_dagster.sync.cleanup import RUN_FAILED, skipped_report


def build_sensor(
    definition: Definition,
    partitions: dg.DynamicPartitionsDefinition,
    job: dg.JobDefinition | object,
) -> dg.SensorDefinition:
    @dg.sensor(
        name=definition.sensor_name,
        job=job,
        minimum_interval_seconds=C.SENSOR_INTERVAL_SECONDS,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Seals and syncs new OpenLineage batches of {definition.name}, in order.",
    )
    def new_batches(context: dg.SensorEvaluationContext, ol_store: StoreResource):
        for run_id in fail_dead_runs(context.instance, definition.name):
            context.log.warning(f"failed run {run_id}: its ol-dagster sync process is gone")
        store = ol_store.get()
        purged = _retention(store, ol_store.settings().retention.keepDays)
        sealed = store.seal_due(
            definition.name,
            window_seconds=definition.limits.batchWindowSeconds,
            max_events=definition.limits.maxEventsPerRun,
        )
        after = int(context.cursor) if context.cursor else 0
        # A stream batch keeps the id it got with its first event, so one sealed this tick can lie
        # behind the cursor (a post made during its window was requested first): request it too.
        late = [str(i) for i in sealed if i <= after]
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
                    tags={C.DEFINITION_TAG: definition.name, C.BATCH_TAG: key},
                )
                for key, run_key in requests
            ],
            dynamic_partitions_requests=[partitions.build_add_request(keys), *removals],
            cursor=str(pending[-1].id) if pending else str(after),
        )

    def _retention(store, keep_days: int | None) -> list[str]:
        """``retention.keepDays``: synced batches older than that go, events and partitions."""
        if keep_days is None:
            return []
        before = utcnow() - timedelta(days=keep_days)
        return [str(i) for i in store.purge_synced(definition.name, before=before)]

    return new_batches


def build_failure_sensor(definition: Definition, job: object) -> dg.SensorDefinition:
    """A sync run that failed before its cleanup (a crash, a killed worker) must not leave its
    batch waiting for nothing: the batch becomes FAILED, keeps its events, gets a RUN_FAILED
    report, and the new-batches sensor retries it after its backoff."""

    @dg.run_failure_sensor(
        name=f"{definition.name}__failed_syncs",
        monitored_jobs=[job],  # type: ignore[list-item]
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Marks batches of {definition.name} whose sync run failed for a retry.",
    )
    def failed_syncs(context: dg.RunFailureSensorContext, ol_store: StoreResource):
        key = context.dagster_run.tags.get("dagster/partition")
        if not key or not key.isdigit():
            return
        store = ol_store.get()
        batch = store.get_batch(int(key))
        if batch.definition != definition.name or batch.status is BatchStatus.SYNCED:
            return
        if batch.status is BatchStatus.FAILED and batch.cleanup_report is not None:
            return  # the cleanup step already recorded why (UPLOAD_FAILED, RUN_FAILED)
        store.record_cleanup(
            batch.id,
            skipped_report(RUN_FAILED, batch.cutoff, definition.cleanup.maxRemovalsPerRun)
            | {"runId": context.dagster_run.run_id},
        )
        store.set_status(batch.id, BatchStatus.FAILED)

    return failed_syncs
