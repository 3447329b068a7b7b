"""The keys of a Marquez catalog (or any server with the OpenLineage API)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ol_dagster.catalog.settings import HttpCatalogSettings


class MarquezCatalogSettings(HttpCatalogSettings):
    """Marquez: events through its lineage endpoint, jobs and datasets deleted by name."""

    kind: str = "marquez"
    concurrency: Annotated[int, Field(ge=1)] = 8  # parallel posts (one lane per job)
