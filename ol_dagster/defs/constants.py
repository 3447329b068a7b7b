"""Names other tools depend on (ARCHITECTURE.md "Fixed interfaces"): run tags, check names, the
sensor's pace and the stale cleanup's cron. The names a sync definition gets in Dagster (asset
keys, job, partitions, sensors, schedule) are built in ``defs.names``."""

DEFINITION_TAG = "ol_dagster/definition"
CATALOG_TAG = "ol_dagster/catalog"  # on the assets a definition has once per catalog
BATCH_TAG = "ol_dagster/batch"
# "true" on the runs the sensor and ``ol-dagster sync`` request for a batch still to sync: one
# that finds it synced by another run since skips it (ALREADY_SYNCED). A person's run has none.
PENDING_TAG = "ol_dagster/pending"

# checks, by the asset they belong to
NOT_EMPTY = "not_empty"
WHOLE_SNAPSHOT = "whole_snapshot"
LOG_STORE_WRITTEN = "log_store_written"  # only with a logStore
NO_DANGLING_FLOWS = "no_dangling_flows"
UPLOAD_SUCCEEDED = "upload_succeeded"
DOWNSTREAM_INTACT = "downstream_intact"
REMOVAL_CAP = "removal_cap"
CLEANUP_PERMITTED = "cleanup_permitted"
OWNED_DATASET_SYSTEMS = "owned_dataset_systems"

# What each check guards and what its failure means, shown with the check in the UI (one
# sentence each; the result's own description says what happened in that run).
CHECK_DESCRIPTIONS = {
    NOT_EMPTY: "The batch holds at least one accepted event; a failure means it holds none, so "
    "its cleanup is skipped (EMPTY_BATCH) and nothing is removed from the catalog.",
    WHOLE_SNAPSHOT: "A snapshot definition's batch had every event accepted; a warning means "
    "some were rejected, so the batch is not taken as a snapshot and only the day-based "
    "cleanup applies to it.",
    LOG_STORE_WRITTEN: "Every accepted event was written to the definition's log store; a "
    "warning means some wait in its backlog for the next sync (or were purged before they "
    "could be written), while the catalog has them all.",
    NO_DANGLING_FLOWS: "Every flow of the lineage graph joins a job and a dataset the graph "
    "holds; a warning means some flows were left out of the upload (counted by reason in the "
    "metadata).",
    UPLOAD_SUCCEEDED: "Every object of the batch was written to the catalog; a failure means "
    "some rows failed, so the cleanup is skipped (UPLOAD_FAILED) and the batch keeps its "
    "events for a retry.",
    DOWNSTREAM_INTACT: "Nothing the batch took away (a dataset or column removed, renamed or no "
    "longer written) is still read by another job on the catalog, of any definition; a failure "
    "means some job still reads it, and lists each downstream job, dataset and column (a "
    "warning, or an error with changes.downstreamIntact: ERROR).",
    REMOVAL_CAP: "The planned removals stay within maxRemovalsPerRun (and, for a batch, "
    "maxRemovalShare); a failure means the cleanup would have removed more, so nothing was "
    "deleted until the limit is raised for a run.",
    CLEANUP_PERMITTED: "The catalog lets this definition's cleanup delete; a warning means it "
    "refused (CLEANUP_PERMISSION_DENIED) and nothing was removed; an error means a cleanup "
    "answer did not confirm what was asked, a dry run above all (CLEANUP_NOT_CONFIRMED), and no "
    "further call was made.",
    OWNED_DATASET_SYSTEMS: "Each CUTOFF dataset System the batch cleaned belongs to this "
    "definition alone; a warning means a shared System was cleaned by age (DAYS) instead "
    "(SHARED_SYSTEM_DOWNGRADED).",
}
STALE_CLEANUP_CRON = "0 3 * * *"  # daily, after the night's batch runs

SENSOR_INTERVAL_SECONDS = 15
SENSOR_MAX_RUNS_PER_TICK = 50
