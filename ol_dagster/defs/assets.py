"""The partitioned assets of a sync definition: one partition per batch.

``received_batch`` -> ``lineage_graph`` -> ``catalog_upload`` -> ``catalog_cleanup``, the last
two once per catalog the definition feeds (``[<definition>, <catalog>, catalog_upload]`` when it
feeds several, the keys a definition with one catalog always had otherwise). They pass
nothing through Dagster's IO managers: each reads what it needs from the event store or the
catalog, so any one of them can be re-materialized for a partition on its own (for example the
cleanup with a raised removal cap).
"""

from collections.abc import Callable, Iterator

import dagster as dg

from ol_dagster.catalog.protocol import Catalog
from ol_dagster.defs import constants as C
from ol_dagster.defs import names
from ol_dagster.defs.lineage_assets import (
    JobRunRow,
    OpenLineageTranslator,
    batch_job_runs,
    job_runs_key,
    merge_job_runs,
    prune_job_runs,
)
from ol_dagster.defs.resources import catalog_of, store_of
from ol_dagster.defs.results import (
    BATCH_CLEANUP_CHECKS,
    check_spec,
    cleanup_result,
    job_runs_metadata,
    judged,
    kept_result,
    lineage_graph_result,
    received_batch_result,
    superseded_result,
    upload_result,
)
from ol_dagster.gcpause import gc_paused
from ol_dagster.logstore_backlog import LogOutcome, log_batch
from ol_dagster.settings import SnapshotMode, SyncDefinition
from ol_dagster.store import BatchRecord, EventStore
from ol_dagster.sync import fanout
from ol_dagster.sync.batch import (
    CleanupOverrides,
    SyncBusy,
    WrongDefinition,
    begin_run,
    cleanup_batch,
    definition_batch,
    kafka_rejections,
    upload_batch,
)
from ol_dagster.sync.graph import batch_graph
from ol_dagster.sync.lineage_refresh import refresh_lineage

# How long a sync waits for another sync of its definition (its lock) before it fails and its
# batch stays pending for the sensor's retry.
LOCK_WAIT_SECONDS = 120.0
# The Kafka dead letters a stream batch's page lists (all are counted).
KAFKA_LETTERS_SHOWN = 200


class CleanupConfig(dg.Config):
    """Run config of ``catalog_cleanup``: a person may raise the removal limits for one run."""

    maxRemovalsPerRun: int | None = None
    maxRemovalShare: float | None = None


def run_alive(instance: dg.DagsterInstance) -> Callable[[str], bool]:
    """Whether a sync lock's holder (a run id) still runs: a finished or failed run's lock is
    taken over at once. A holder this instance does not know is trusted until its lease ends."""

    def alive(holder: str) -> bool:
        try:
            run = instance.get_run_by_id(holder)
        except Exception:  # a malformed id, an instance hiccup: trust the lease
            return True
        return run is None or not run.is_finished

    return alive


def requested_pending(context: dg.AssetExecutionContext) -> bool:
    """The run was requested for a batch still to sync (``C.PENDING_TAG``): it does not sync one
    another run synced since (ALREADY_SYNCED). A person's run syncs it again."""
    return context.run.tags.get(C.PENDING_TAG) == "true"


def _batch(
    context: dg.AssetExecutionContext, store: EventStore, definition: SyncDefinition
) -> BatchRecord:
    try:
        return definition_batch(store, definition, int(context.partition_key))
    except WrongDefinition as exc:
        raise dg.Failure(str(exc)) from None


def remember_job_runs(
    store: EventStore, definition: SyncDefinition, runs: list[JobRunRow], batch_id: int
) -> None:
    """The jobs' last runs for their asset pages (``lineage_assets``), shown from the next load
    of the code location, like the lineage itself."""
    key = job_runs_key(definition.name)
    store.save_lineage_state(key, merge_job_runs(store.lineage_state(key), runs, batch_id))


def _log_events(
    store: EventStore, batch: BatchRecord, definition: SyncDefinition
) -> LogOutcome | None:
    """Egeria's file-based log store, when configured: each accepted event as one JSON file under
    ``<folder>/<namespace>/<job>/`` (names encoded so no event can write outside the folder). An
    event that cannot be written waits for the next sync; the batch goes on to the catalog."""
    if definition.logStore is None:
        return None
    with gc_paused():
        return log_batch(store, definition.name, definition.logStore.folder, batch.id)


def refresh_lineage_state(
    context: dg.AssetExecutionContext,
    catalog: Catalog,
    definition: SyncDefinition,
    store: EventStore,
    batch: int | None = None,
) -> None:
    """After a sync (of ``batch``), bring what the definition has synced up to date for the
    asset graph (only the jobs that changed: ``sync.lineage_refresh``). The UI shows new nodes
    when the code location is next loaded (a reload, or the next process start)."""
    refreshed = refresh_lineage(catalog, definition, store, batch=batch)
    if refreshed is None:
        context.log.info("catalog cannot export its lineage: the asset graph keeps its snapshot")
        return
    context.log.info(refreshed.describe())
    if not refreshed.whole and not refreshed.written.jobs_removed:
        return  # no job went: the jobs' last runs name none to drop
    key = job_runs_key(definition.name)
    pruned = prune_job_runs(store.lineage_state(key), refreshed.held)
    if pruned is not None:
        store.save_lineage_state(key, pruned)


def build_assets(
    definition: SyncDefinition,
    partitions: dg.DynamicPartitionsDefinition,
    translator: OpenLineageTranslator,
    files: names.FileNames,
) -> list[dg.AssetsDefinition]:
    """The partitioned assets of ``definition`` (its settings file's resources named by
    ``files``), each a short body over a core service
    (``sync.batch``, ``sync.graph``) whose outcome ``defs.results`` turns into metadata:
    ``received_batch`` and ``lineage_graph`` once, ``catalog_upload`` and ``catalog_cleanup``
    per catalog it feeds (``names.catalog_asset_key``)."""
    name = definition.name
    keys = {a: names.asset_key(name, a) for a in (names.RECEIVED_BATCH, names.LINEAGE_GRAPH)}
    snapshot = definition.snapshotMode is SnapshotMode.BATCH_SNAPSHOT

    def checks(asset: str, specs: list[str] | tuple[str, ...]) -> list[dg.AssetCheckSpec]:
        return [check_spec(c, keys[asset]) for c in specs]

    received_checks = [C.NOT_EMPTY, C.WHOLE_SNAPSHOT]
    if definition.logStore:
        received_checks.append(C.LOG_STORE_WRITTEN)

    @dg.asset(
        key=keys[names.RECEIVED_BATCH],
        kinds={"openlineage"},
        check_specs=checks(names.RECEIVED_BATCH, received_checks),
        group_name=names.group(name),
        partitions_def=partitions,
        required_resource_keys={files.store},
    )
    def received_batch(context: dg.AssetExecutionContext) -> Iterator[dg.MaterializeResult]:
        """The batch of OpenLineage events this partition stands for, as the receiver stored it:
        how many were received, accepted and rejected (with reasons), split by event kind, type
        and producer."""
        store = store_of(context, files).get()
        batch = _batch(context, store, definition)
        # a retry leaves alone the catalogs that finished the batch in an earlier run
        kept = begin_run(store, definition, batch.id, context.run_id)
        if kept:
            context.log.info(f"catalogs {', '.join(kept)} finished this batch earlier: kept")
        counts = store.event_counts(batch.id)
        logged = _log_events(store, batch, definition)
        kafka = kafka_rejections(store, batch, limit=KAFKA_LETTERS_SHOWN)
        result = received_batch_result(batch, counts, logged, snapshot=snapshot, kafka=kafka)
        yield judged(result, batch.partition_key)

    @dg.asset(
        key=keys[names.LINEAGE_GRAPH],
        deps=[keys[names.RECEIVED_BATCH]],
        kinds={"openlineage"},
        check_specs=checks(names.LINEAGE_GRAPH, [C.NO_DANGLING_FLOWS]),
        group_name=names.group(name),
        partitions_def=partitions,
        required_resource_keys={files.store},
    )
    def lineage_graph(context: dg.AssetExecutionContext) -> Iterator[dg.MaterializeResult]:
        """The batch normalized into jobs, datasets and the data flows between them, with the
        earlier parts of its runs kept in earlier batches: the graph ``catalog_upload`` uploads
        (stored with the batch, so the upload does not normalize again)."""
        store = store_of(context, files).get()
        batch = _batch(context, store, definition)
        # handed over to the upload when it runs in this process (``ol-dagster sync``)
        built = batch_graph(store, definition, batch, hand_over=True)
        yield judged(lineage_graph_result(built), batch.partition_key)

    per_catalog = [
        a
        for key in definition.catalog_keys
        for a in _catalog_assets(
            definition, key, partitions, translator, files, upstream=keys[names.LINEAGE_GRAPH]
        )
    ]
    return [received_batch, lineage_graph, *per_catalog]


def _catalog_assets(
    definition: SyncDefinition,
    catalog_key: str,
    partitions: dg.DynamicPartitionsDefinition,
    translator: OpenLineageTranslator,
    files: names.FileNames,
    *,
    upstream: dg.AssetKey,
) -> list[dg.AssetsDefinition]:
    """``catalog_upload`` and ``catalog_cleanup`` of one catalog the definition feeds: each
    catalog its own cutoff, upload, cleanup, guards, checks and report (``sync.fanout``), so a
    catalog that fails blocks only its own cleanup. The primary catalog (the first) also keeps
    the jobs' runs and the lineage state the asset graph is built from."""
    keys = {
        a: names.catalog_asset_key(definition.name, definition.catalog_keys, catalog_key, a)
        for a in (names.CATALOG_UPLOAD, names.CATALOG_CLEANUP)
    }
    return [
        _upload_asset(
            definition, catalog_key, partitions, translator, keys, files, upstream=upstream
        ),
        _cleanup_asset(definition, catalog_key, partitions, keys, files),
    ]


def _upload_asset(
    definition: SyncDefinition,
    catalog_key: str,
    partitions: dg.DynamicPartitionsDefinition,
    translator: OpenLineageTranslator,
    keys: dict[str, dg.AssetKey],
    files: names.FileNames,
    *,
    upstream: dg.AssetKey,
) -> dg.AssetsDefinition:
    """``catalog_upload`` of one catalog; the primary one also keeps the jobs' runs."""
    name = definition.name
    where = fanout.target(definition, catalog_key)
    several = len(definition.catalog_keys) > 1
    which = f" (catalog {catalog_key!r})" if several else ""

    @dg.asset(
        key=keys[names.CATALOG_UPLOAD],
        deps=[upstream],
        kinds={"catalog"},
        check_specs=[
            check_spec(c, keys[names.CATALOG_UPLOAD])
            for c in (C.UPLOAD_SUCCEEDED, C.DOWNSTREAM_INTACT)
        ],
        group_name=names.group(name),
        partitions_def=partitions,
        description=names.catalog_asset_description(
            definition.catalog_keys, catalog_key, "the batch uploaded to it."
        ),
        tags=names.catalog_tags(catalog_key),
        required_resource_keys={files.store, files.catalog},
    )
    def catalog_upload(context: dg.AssetExecutionContext) -> Iterator[dg.MaterializeResult]:
        """Everything the batch describes, written to the catalog. The cutoff is read from the
        catalog's clock before the first write; every object sent is touched, changed or not."""
        store = store_of(context, files).get()
        batch = _batch(context, store, definition)
        with catalog_of(context, files).open(name, catalog_key) as catalog:
            try:
                done = upload_batch(
                    store,
                    catalog,
                    definition,
                    batch.id,
                    run_id=context.run_id,
                    is_alive=run_alive(context.instance),
                    wait_seconds=LOCK_WAIT_SECONDS,
                    catalog_key=catalog_key,
                    pending_only=requested_pending(context),
                )
            except SyncBusy as exc:
                raise dg.Failure(str(exc)) from None
        if done.kept_from is not None:
            # this catalog finished the batch in an earlier run (a retry is for the others), or
            # another run synced it since this one was requested
            yield judged(kept_result(done.kept_from), batch.partition_key)
            return
        if done.graph is None or done.result is None:
            # an older snapshot must not bring back what a newer one removed
            yield judged(superseded_result(done.superseded_by), batch.partition_key)
            return
        if not done.result.succeeded:
            context.log.error(
                "upload of batch %s%s failed for %d row(s)",
                batch.id,
                which,
                len(done.result.failed),
            )
        runs = batch_job_runs(done.graph, translator) if done.result.succeeded else []
        if runs and where.primary:
            remember_job_runs(store, definition, runs, batch.id)
        result = upload_result(done, job_runs_metadata(runs), definition.changes.downstreamIntact)
        yield judged(result, batch.partition_key)

    return catalog_upload


def _cleanup_asset(
    definition: SyncDefinition,
    catalog_key: str,
    partitions: dg.DynamicPartitionsDefinition,
    keys: dict[str, dg.AssetKey],
    files: names.FileNames,
) -> dg.AssetsDefinition:
    """``catalog_cleanup`` of one catalog; the primary one also refreshes the lineage state the
    asset graph is built from."""
    name = definition.name
    where = fanout.target(definition, catalog_key)

    @dg.asset(
        key=keys[names.CATALOG_CLEANUP],
        deps=[keys[names.CATALOG_UPLOAD]],
        kinds={"catalog"},
        check_specs=[check_spec(c, keys[names.CATALOG_CLEANUP]) for c in BATCH_CLEANUP_CHECKS],
        group_name=names.group(name),
        partitions_def=partitions,
        description=names.catalog_asset_description(
            definition.catalog_keys,
            catalog_key,
            "what the batch's producers no longer describe, removed from it.",
        ),
        tags=names.catalog_tags(catalog_key),
        required_resource_keys={files.store, files.catalog},
    )
    def catalog_cleanup(
        context: dg.AssetExecutionContext, config: CleanupConfig
    ) -> Iterator[dg.MaterializeResult]:
        """What producers no longer describe, removed from the catalog, with the guards of the
        seed (empty batch, failed upload, removal cap, permission, dry run). The ``report``
        metadata is the seed's cleanup report."""
        store = store_of(context, files).get()
        batch = _batch(context, store, definition)
        selection = context.run.asset_selection
        with catalog_of(context, files).open(name, catalog_key) as catalog:
            try:
                report = cleanup_batch(
                    store,
                    catalog,
                    definition,
                    batch.id,
                    run_id=context.run_id,
                    uploaded_in_this_run=(
                        selection is None or keys[names.CATALOG_UPLOAD] in selection
                    ),
                    overrides=CleanupOverrides(config.maxRemovalsPerRun, config.maxRemovalShare),
                    requested_by={"tags": dict(context.run.tags)},
                    is_alive=run_alive(context.instance),
                    wait_seconds=LOCK_WAIT_SECONDS,
                    catalog_key=catalog_key,
                    pending_only=requested_pending(context),
                )
            except SyncBusy as exc:
                raise dg.Failure(str(exc)) from None
            if report["mode"] is not None and where.primary:
                refresh_lineage_state(context, catalog, definition, store, batch.id)
        yield judged(cleanup_result(report, BATCH_CLEANUP_CHECKS), batch.partition_key)

    return catalog_cleanup
