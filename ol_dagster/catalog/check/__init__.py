"""``ol-dagster check``: what a definition's sync needs, asked of its store and catalog up front.

Without it, a wrong token, a missing permission or a disabled endpoint shows up late: after the
receiver accepted a batch, when its upload fails, or worse when its cleanup is refused and the
ledger keeps what it could not remove. ``check`` asks each question once, writes nothing, and
prints a table of what holds and what does not: the first thing to run against a real catalog.

Every kind: the settings load, the event store opens (at its schema version), the catalog
answers. What is asked of each kind is in its own module, which says it first:

* ``embedded``: the database, its schema, its clock, the cleanup user's ``SYSTEMS_ADMIN``;
* ``openmetadata``: version, token, clock, ``EditLineage``/``Create``, the OpenLineage endpoint,
  the stored namespaces' database services;
* ``marquez``: namespaces (clock), the lineage endpoint, the job and dataset deletes;
* ``blindata``: clock and credentials, ``SYSTEMS_ADMIN`` by a dry-run cleanup, every call the
  client makes.

``runner`` (``check``) makes one report per definition's catalog; ``findings`` holds the report
and its table (``render``); ``probe`` asks the HTTP catalogs through their own clients.

A finding carries whether the sync needs it (``needed_by_sync``): only those decide the exit
code; the others (clock skew, an unmapped namespace, ``Create``) are warnings. Secrets are never
printed: every detail is scrubbed of the resolved token and API key, URLs lose their passwords.

The checks live here, one folder for the command, rather than beside each backend: they ask the
catalog with raw probes (not the client's methods), so a backend module keeps only what the sync
calls, and what ``check`` asks any kind is found in one place.
"""

from __future__ import annotations

from ol_dagster.catalog.check.findings import Finding, Report, render, safe_url
from ol_dagster.catalog.check.runner import check

__all__ = ["Finding", "Report", "check", "render", "safe_url"]
