"""One factory builds everything a sync definition has in Dagster."""

from __future__ import annotations

import dagster as dg

from ol_dagster.defs import constants as C
from ol_dagster.defs import names
from ol_dagster.defs.assets import build_assets
from ol_dagster.defs.lineage_assets import OpenLineageTranslator
from ol_dagster.defs.run_lineage import run_lineage_hooks
from ol_dagster.defs.sensors import build_failure_sensor, build_sensor
from ol_dagster.defs.stale import build_stale_cleanup
from ol_dagster.settings import SyncDefinition


def build_definition_defs(
    definition: SyncDefinition,
    *,
    translator: OpenLineageTranslator,
    files: names.FileNames = names.CODE_LOCATION_FILE,
) -> dg.Definitions:
    """``files``: the names of the settings file's resources (``names.file_names``)."""
    partitions = dg.DynamicPartitionsDefinition(name=names.partitions(definition.name))
    assets = build_assets(definition, partitions, translator, files)
    job = dg.define_asset_job(
        name=names.job(definition.name),
        selection=dg.AssetSelection.assets(*assets),
        partitions_def=partitions,
        tags={C.DEFINITION_TAG: definition.name},
        hooks=run_lineage_hooks(
            definition, files
        ),  # its runs as OpenLineage events, when configured
        description=f"Sync one batch of {definition.name} into its catalog.",
    )
    stale_cleanups, stale_schedule = build_stale_cleanup(definition, files)
    return dg.Definitions(
        assets=[*assets, *stale_cleanups],
        jobs=[job],
        sensors=[
            build_sensor(definition, partitions, job, files),
            build_failure_sensor(definition, job, files),
        ],
        schedules=[stale_schedule],
    )
