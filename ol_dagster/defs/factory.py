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
    definition: SyncDefinition, *, translator: OpenLineageTranslator
) -> dg.Definitions:
    partitions = dg.DynamicPartitionsDefinition(name=names.partitions(definition.name))
    assets = build_assets(definition, partitions, translator)
    job = dg.define_asset_job(
        name=names.job(definition.name),
        selection=dg.AssetSelection.assets(*assets),
        partitions_def=partitions,
        tags={C.DEFINITION_TAG: definition.name},
        hooks=run_lineage_hooks(definition),  # its runs as OpenLineage events, when configured
        description=f"Sync one batch of {definition.name} into its catalog.",
    )
    stale_cleanups, stale_schedule = build_stale_cleanup(definition)
    return dg.Definitions(
        assets=[*assets, *stale_cleanups],
        jobs=[job],
        sensors=[build_sensor(definition, partitions, job), build_failure_sensor(definition, job)],
        schedules=[stale_schedule],
    )
