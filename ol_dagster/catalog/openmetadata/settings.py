"""The keys of an OpenMetadata catalog."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ol_dagster.catalog.settings import HttpCatalogSettings


class OpenMetadataCatalogSettings(HttpCatalogSettings):
    """OpenMetadata: events through its OpenLineage endpoint, edges read back and deleted."""

    kind: str = "openmetadata"
    # events per batch request: OpenMetadata resolves each dataset of each event with its own
    # searches before it answers, so a big batch can outlast any timeout
    chunkSize: Annotated[int, Field(ge=1)] = 20
    # how long one batch request may take (the reads keep ``timeoutSeconds``); a batch without an
    # answer in time is read back, and what it did not write is sent again in halves
    batchTimeoutSeconds: Annotated[float, Field(gt=0)] = 120.0
    serviceMapping: dict[str, str] = {}  # OL namespace -> OM database service (for FQNs)
    # the run event types its server writes edges for (its own ``eventTypeFilter`` setting,
    # COMPLETE by default): an edge only other types carry is never there to delete
    eventTypeFilter: list[str] = ["COMPLETE"]
    # the server's ``defaultPipelineService``: where OpenMetadata 2.0 made a pipeline per job
    pipelineService: str = "openlineage"
