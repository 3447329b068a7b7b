"""The ``Catalog`` protocol over Blindata's REST API.

Blindata keeps what the cleanup needs itself: Systems with their properties, physical entities and
fields, system routines and data flows, each with the time the server last wrote it. So, unlike the
event-taking catalogs, nothing is kept in a sync ledger: an upload writes every object the graph
describes (changed or not, so the server stamps it), and a cleanup asks the server to delete, by
scope prefix or by System and schema, what was last updated before the cutoff, with a dry run on the
server first. The cutoff is the server's time, read from the ``Date`` header of a cheap call.

Every path is in ``api`` with its source: confirmed ``[C]`` or inferred ``[I]``.

Writes are upserts on each object's natural key (an entity's System, schema and name; a field's
entity and name; a routine's System, schema and name; a flow's scope and ends): existing objects are
read first, by page, and updated (``PUT``), new ones created (``POST``); a ``409`` on a create (a
retried request that the server had carried out) is resolved by reading the object and updating it,
so a retried chunk never duplicates. A row the server refuses (a 4xx) is a failed row and the
upload goes on; a server that stays unavailable, or refuses the credentials, stops the upload. Any
failed row blocks the cleanup.

The upload deletes nothing. A DROP is carried out by the cleanup's ``drop_datasets`` call (behind
its guards); a RENAME moves the entity in place only in a System this definition owns and may
clean. A parent job in a namespace the definition does not own (known only from a child's parent
facet) is another owner's: the orchestration flow to it is written, to its owner's job entity as
it is, or else to one created in a neutral System named after its namespace, which carries no
``openLineageOwner`` or ``openLineageJobSystem`` and so is never cleaned by any definition.

Secrets are read from the environment when the catalog opens, sent as headers, and never written
into an error, a failed row or a log line (answers from the server are scrubbed of them too).

This module is the kind's declaration; the package holds one concern a module (as
``catalog/embedded/``):

* ``settings``: the keys of a Blindata catalog;
* ``api``: every path the client calls, with its source;
* ``catalog``: ``BlindataCatalog``, the protocol facade that hands each call to a module below;
* ``client``: the transport (credentials, retries, paging, upserts, concurrent row writes);
* ``shapes``: Blindata's JSON shapes (references, ``additionalProperties``, dates);
* ``finders``: natural keys to uuids (Systems, entities, fields, routines, flows);
* ``upload``, ``flows``, ``placement``: the upload, its flows, renames and other owners' parents;
* ``quality``: quality suites, imported by the upload and disabled by the cleanup;
* ``cleanup``: the server-side cleanup calls, DROPs and job counts;
* ``reads``: Systems, job schemas and lineage for the read commands;
* ``check``: what ``ol-dagster check`` asks it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ol_dagster.catalog.blindata.settings import BlindataCatalogSettings
from ol_dagster.catalog.kind import CatalogKind, CheckContext, Opening

if TYPE_CHECKING:
    from ol_dagster.catalog.blindata.catalog import BlindataCatalog
    from ol_dagster.catalog.check.findings import Finding


def _open(cfg: BlindataCatalogSettings, at: Opening) -> BlindataCatalog:
    from ol_dagster.catalog.blindata.catalog import BlindataCatalog

    return BlindataCatalog(at.name, cfg, store_url=at.store_url, definition=at.definition)


def _check(cfg: BlindataCatalogSettings, context: CheckContext) -> list[Finding]:
    from ol_dagster.catalog.blindata.check import check_blindata

    return check_blindata(cfg, context)


# everything beyond the protocol is the server's: it rehearses nothing, exports no state
KIND = CatalogKind(
    name="blindata",
    settings=BlindataCatalogSettings,
    factory=_open,
    checker=_check,
)
