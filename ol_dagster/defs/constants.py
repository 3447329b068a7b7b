"""Names other tools depend on (ARCHITECTURE.md "Fixed interfaces")."""

DEFINITION_TAG = "ol_dagster/definition"
BATCH_TAG = "ol_dagster/batch"

RECEIVED_BATCH = "received_batch"
LINEAGE_GRAPH = "lineage_graph"
CATALOG_UPLOAD = "catalog_upload"
CATALOG_CLEANUP = "catalog_cleanup"

# checks, by the asset they belong to
NOT_EMPTY = "not_empty"
WHOLE_SNAPSHOT = "whole_snapshot"
LOG_STORE_WRITTEN = "log_store_written"  # only with a logStore
NO_DANGLING_FLOWS = "no_dangling_flows"
UPLOAD_SUCCEEDED = "upload_succeeded"
REMOVAL_CAP = "removal_cap"
CLEANUP_PERMITTED = "cleanup_permitted"
OWNED_DATASET_SYSTEMS = "owned_dataset_systems"
STALE_CLEANUP = "stale_cleanup"
STALE_CLEANUP_CRON = "0 3 * * *"  # daily, after the night's batch runs

SENSOR_INTERVAL_SECONDS = 15
SENSOR_MAX_RUNS_PER_TICK = 50
