"""What every catalog's settings have, whatever its kind: the base of each kind's settings model.

A catalog under ``catalogs:`` is read with the model of its ``kind`` (``catalog.registry``); each
kind accepts only the keys its backend reads, so ``tenant`` on a Marquez catalog fails at load
(``catalogs.main.tenant: unknown key for a marquez catalog``) instead of being ignored. What the
settings file does with any catalog (hide its secrets, anchor a relative path, put it on
``databaseUrl``, tell whether two keys name one catalog) is asked of this base, so the file never
names a kind.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Self

from pydantic import Field, field_validator

from ol_dagster.settings_base import EnvSecret, StrictModel, url_secret_problem


class CatalogSettings(StrictModel):
    """One catalog: its ``kind`` and its URL."""

    kind: str  # each kind's model gives its own name as the default: the only value it reads
    url: str

    @field_validator("kind")
    @classmethod
    def _own_kind(cls, value: str) -> str:
        own = cls.model_fields["kind"].default
        if isinstance(own, str) and value != own:
            raise ValueError(f"these keys are read as a {own} catalog, not {value!r}")
        return value

    def secrets(self) -> list[EnvSecret]:
        """Where this catalog's secrets come from: every key that holds an ``{env: NAME}``, found
        by its type, so a kind cannot leave one out; errors and logs hide their values."""
        found = (getattr(self, name) for name in type(self).model_fields)
        return [value for value in found if isinstance(value, EnvSecret)]

    def anchored(self, base: Path) -> Self:
        """These settings read from a file in ``base``: a path in them is relative to it."""
        return self

    def on_database(self, url: str) -> Self:
        """These settings under the file's ``databaseUrl`` (a catalog that is a database and
        names none of its own goes there)."""
        return self

    def place(self) -> tuple[str, ...]:
        """Where the catalog's objects live, spelled one way: two keys at one place are one
        catalog (the driver does not change the database: postgresql+psycopg is postgresql)."""
        url = self.url.rstrip("/")
        scheme, sep, rest = url.partition("://")
        if sep:
            scheme = scheme.split("+", 1)[0].lower()
            if scheme == "sqlite" and rest.startswith("/") and rest != "/":
                rest = "/" + os.path.normpath(rest[1:])  # ./a.db is a.db, /x//a.db is /x/a.db
            url = f"{scheme}://{rest}"
        return (self.kind, url)


class HttpCatalogSettings(CatalogSettings):
    """What every catalog behind an HTTP API has: its base URL, and how long and how often a
    request is tried (``catalog.http``)."""

    url: str
    # bearer token: an OpenMetadata bot's JWT, a Blindata token, a proxy's in front of Marquez
    token: EnvSecret | None = None
    timeoutSeconds: Annotated[float, Field(gt=0)] = 30.0
    maxRetries: Annotated[int, Field(ge=0)] = 4
    # the longest a server's ``Retry-After`` is honoured; a longer one is waited this long
    maxRetryAfterSeconds: Annotated[float, Field(ge=0)] = 30.0

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if problem := url_secret_problem(value):
            raise ValueError(f"{problem}; give the catalog's credential as token: {{env: NAME}}")
        if not value.startswith(("http://", "https://")):
            scheme = value.partition("://")[0] if "://" in value else value[:20]
            raise ValueError(f"needs an http(s) URL, not one starting {scheme!r}")
        return value
