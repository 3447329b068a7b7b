"""The keys of an OpenMetadata catalog."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ol_dagster.catalog.settings import HttpCatalogSettings


class OpenMetadataCatalogSettings(HttpCatalogSettings):
    """OpenMetadata: events through its OpenLineage endpoint, edges read back and deleted."""

    kind: str = "openmetadata"
    chunkSize: Annotated[int, Field(ge=1)] = 100  # events per batch request
    serviceMapping: dict[str, str] = {}  # OL namespace -> OM database service (for FQNs)
    # the run event types its server writes edges for (its own ``eventTypeFilter`` setting,
    # COMPLETE by default): an edge only other types carry is never there to delete
    eventTypeFilter: list[str] = ["COMPLETE"]
