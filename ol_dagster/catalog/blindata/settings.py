"""The keys of a Blindata catalog: its REST API, one tenant, one credential."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from ol_dagster.catalog.settings import HttpCatalogSettings
from ol_dagster.settings_base import EnvSecret


class BlindataCatalogSettings(HttpCatalogSettings):
    """Blindata: its REST API, one tenant, a bearer token or an API key with its user."""

    kind: str = "blindata"
    tenant: Annotated[str, Field(min_length=1)]  # the X-BD-Tenant header
    apiKey: EnvSecret | None = None  # instead of ``token``: an API key, sent with ``user``
    user: str = "ol-dagster"  # the API key's user
    concurrency: Annotated[int, Field(ge=1)] = 8  # parallel writes
    # ``ol-dagster check`` blocks when a write or cleanup call marked inferred cannot be verified
    # without writing; true turns that into a warning, for a server known to have them
    assumeEndpoints: bool = False

    def place(self) -> tuple[str, ...]:
        return (*super().place(), self.tenant)  # one server holds one catalog per tenant

    @model_validator(mode="after")
    def _one_credential(self) -> BlindataCatalogSettings:
        if (self.token is None) == (self.apiKey is None):
            raise ValueError(
                "a blindata catalog needs either 'token' (a bearer token) or 'apiKey' (with "
                "'user'), each as {env: NAME}" + (", not both" if self.token is not None else "")
            )
        return self
