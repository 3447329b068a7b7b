"""What every part of the settings file shares: its error, its strict model, a secret's rule.

The settings file is read by models that live beside what they configure (a sync definition, a
catalog kind, the Kafka intake, the run lineage); each needs the same three things, and none may
import the file as a whole (``ol_dagster.settings``), which imports them all. They are here, below
every one of them, with the one rule for a path in the file (relative to the file, not to the
process's working directory).

Secrets are never literal: a token is ``{env: NAME}`` and is only resolved when something needs it
(the receiver at start, a catalog client when it connects), so loading the definitions in the
Dagster UI never requires the receiver's tokens.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel, ConfigDict, Field


class SettingsError(ValueError):
    """The settings file is unreadable or invalid; the message names the offending key."""


class StrictModel(BaseModel):
    """A part of the settings file: unknown keys fail at load (a typo must not silently fall back
    to a default), and nothing changes it once read."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def secret_problem(value: str, *, spaces: bool = False) -> str | None:
    """Why a secret's value can never work, without showing it. A bearer token or an API key is
    one header word: a blank or a control character (the trailing newline of ``$(cat file)`` or
    of a Kubernetes secret made with ``echo``) makes every request fail, or match nothing.
    ``spaces``: a whole header's value (``Bearer <token>``), which may hold single spaces."""
    if value != value.strip():
        return "has blanks or a line break around its value (a header cannot carry them)"
    if any((c.isspace() and not (spaces and c == " ")) or not c.isprintable() for c in value):
        return "holds a blank or a control character (a header cannot carry them)"
    return None


# a query parameter whose name says it holds a credential (matched anywhere in the name,
# case-insensitive): ?token=, ?api_key=, ?apikey=, ?access_token=, ?password=, ?client_secret=,
# ?sig= (a signed URL's signature), ?auth=...
_SECRET_PARAMETER = re.compile(
    r"token|key|pass(word|wd)?|pwd|secret|auth|credential|signature|^sig$|^code$", re.IGNORECASE
)


def url_secret_problem(url: str) -> str | None:
    """Why a URL written in the settings file would hold a secret, naming the part, never its
    value: a password in its user part (``https://user:pass@host``), or a query parameter named
    like a credential. None when it holds none."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None  # not a URL: its own check says why
    if parts.password is not None:
        return (
            "carries a password in its user part (user:password@): a secret is read from the "
            "environment, never written in the file"
        )
    for name, _ in parse_qsl(parts.query, keep_blank_values=True):
        if _SECRET_PARAMETER.search(name):
            return (
                f"query parameter {name[:50]!r} would hold a secret in the file: a secret is "
                "read from the environment ({env: NAME}), never written in the file"
            )
    return None


class EnvSecret(StrictModel):
    """A secret read from the environment when it is used, never stored in the file."""

    env: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]

    def resolve(self, *, spaces: bool = False) -> str:
        """The value; ``spaces``: a whole header's value, which may hold single spaces."""
        value = os.environ.get(self.env)
        if not value:
            raise SettingsError(f"environment variable {self.env} is not set (it holds a secret)")
        if problem := secret_problem(value, spaces=spaces):
            raise SettingsError(f"environment variable {self.env} {problem}")
        return value

    def __repr__(self) -> str:  # never show a value, only where it comes from
        return f"EnvSecret(env={self.env!r})"


def anchor_sqlite(url: str, base: Path) -> str:
    """A relative SQLite path made relative to ``base`` (the settings file's folder), not to the
    process's working directory; any other URL as given."""
    prefix, sep, rest = url.partition(":///")
    if (
        not sep
        or not prefix.startswith("sqlite")
        or rest.startswith("/")
        or rest in ("", ":memory:")
    ):
        return url
    return f"{prefix}:///{(base / rest).resolve()}"
