"""Which OpenMetadata tables an upload's edges join, read back from OpenMetadata itself.

OpenMetadata does not say which table it resolved a dataset to: its OpenLineage answer only lists
what it could not resolve. Guessing the table FQN from the dataset name is wrong as soon as the
name has two parts (the server searches ``<service>.%.%<schema>.<table>``), a symlink names the
table, a service name holds a dot (its FQN part is quoted), or the table lives under another
service (found by an FQN suffix search). A wrong FQN then deletes nothing and reads as "already
gone". So after an accepted upload the edges are read back: the datasets are looked up the way
the server looks them up (upstream open-metadata/OpenMetadata,
``openmetadata-service/src/main/java/org/openmetadata/service/openlineage/``:
``OpenLineageEntityResolver.java``, ``OpenLineageDatasetNameNormalizer.java``,
``OpenLineageNamespaceMapping.java``, ``OpenLineageEntityCreator.java``), through the table API
where the server's search can be repeated exactly, and through the lineage API of the edge's other
end where it cannot (a search over every table of the catalog): the table at the other end of an
edge the server wrote is one of that end's neighbours, and the server's own search patterns pick
it among them.

What the server does, in its order, for each candidate name of a dataset (symlink identifiers
first, then the name itself, each with the namespace it came from):

1. the candidate's namespace mapped to a service ``S``: ``S.<db>.<schema>.<table>`` when the name
   has a database, then ``S.%.%<schema>.<table>``;
2. with a ``datasource`` facet ``D`` and a database: ``D.<db>.<schema>.<table>``;
3. with a database: any FQN ending ``<db>.<schema>.<table>``;
4. with a datasource: ``D.%.<schema>.<table>``;
5. any FQN ending ``<schema>.<table>``.

Then a bare table name (one token) in a mapped namespace matches ``S.%.<table>`` when exactly one
table does; then, for an object-storage namespace (``s3://``, ``gs://``...), the container whose
``fullPath`` is ``<namespace>/<name>``, else the one of its parent path (2.1,
``OpenLineageEntityResolver.resolveContainer``; containers are never created); then the table is
created under the first candidate's mapped service (a two-part name under the service's only
database). Every search is a SQL ``LIKE`` over the stored FQN, and takes the first table it lists.

The client repeats steps 1 and the creation with ``GET /api/v1/tables/name/{fqn}`` (and
``GET /api/v1/databases?service=`` for the ``%`` in the database place); the others are matched
against the neighbours the lineage API lists (``GET /api/v1/lineage/table/name/{fqn}``), and a
container neighbour by its ``fullPath`` (``GET /api/v1/containers/{id}``). An end that neither
finds, or that stays ambiguous, is not recorded: ol-dagster cannot name it, so it never deletes
it. Everything is read once per dataset and per upload.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from ol_dagster.catalog.http import HttpCatalogClient

log = logging.getLogger(__name__)

TABLES = "/api/v1/tables/name/"
DATABASES = "/api/v1/databases"
LINEAGE = "/api/v1/lineage/{type}/name/"
CONTAINERS = "/api/v1/containers/"
_PAGE = 1000
# OpenLineageDatasetNameNormalizer: object-storage namespaces (the name is then no table name)
_STORAGE_SCHEMES = ("gs://", "s3://", "s3a://", "abfss://", "abfs://", "wasbs://", "adl://")


def service_for(namespace: str, mapping: Mapping[str, str]) -> str | None:
    """OpenMetadata's rule (``OpenLineageNamespaceMapping``): an exact key wins, else the longest
    key the namespace starts with; entries with an empty key or value are ignored."""
    entries = {k: v for k, v in mapping.items() if k and v}
    if not namespace:
        return None
    if namespace in entries:
        return entries[namespace]
    best = max((k for k in entries if namespace.startswith(k)), key=len, default=None)
    return entries[best] if best is not None else None


# -- FQNs ------------------------------------------------------------------------------------------


def quote_name(name: str) -> str:
    """One FQN part as OpenMetadata writes it (``FullyQualifiedName.quoteName``): a name holding a
    dot is wrapped in double quotes; a quoted name without a dot loses its quotes."""
    if len(name) > 2 and name.startswith('"') and name.endswith('"') and '"' not in name[1:-1]:
        inner = name[1:-1]
        return name if "." in inner else inner
    if '"' in name:
        raise ValueError(f"invalid name {name!r}")
    return f'"{name}"' if "." in name else name


def build_fqn(*parts: str) -> str:
    return ".".join(quote_name(p) for p in parts)


def like(pattern: str, value: str, *, escape: str | None = None) -> bool:
    """SQL ``LIKE`` (``%`` any run, ``_`` one character; ``escape`` makes the next one literal),
    as the server's table searches match FQNs; case-sensitive."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if escape is not None and c == escape and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return re.fullmatch("".join(out), value, re.DOTALL) is not None


def like_escape(value: str) -> str:
    """``LikeEscape.escape``: ``!`` is the escape character."""
    return value.replace("!", "!!").replace("%", "!%").replace("_", "!_")


# -- candidate names (OpenLineageDatasetNameNormalizer) ------------------------------------------


@dataclass(frozen=True, slots=True)
class Candidate:
    name: str  # dotted, at least two non-empty parts
    namespace: str  # of the identifier it came from (a symlink's own, or the dataset's)


def is_storage(namespace: str) -> bool:
    return namespace.lower().startswith(_STORAGE_SCHEMES)


def glue_catalog_id(namespace: str) -> str | None:
    """The AWS account of a Glue ARN namespace ``arn:<partition>:glue:<region>:<account>``: the
    Glue connector ingests it as the database."""
    if not namespace.lower().startswith("arn:"):
        return None
    fields = namespace.split(":")
    if len(fields) > 4 and fields[2].lower() == "glue" and fields[4]:
        return fields[4]
    return None


def bare_token(name: str) -> str | None:
    t = name.strip()
    return t if t and "." not in t and "/" not in t else None


def _normalize(name: str, allow_short_slash: bool) -> str | None:
    t = name.strip()
    if not t:
        return None
    segments = t.split("/")
    if t.startswith("table/") and len(segments) == 3 and all(segments):  # Glue: table/<db>/<t>
        return f"{segments[1]}.{segments[2]}"
    if "/" in t:
        parts = [s for s in segments if s]
        for i in range(len(parts) - 2, -1, -1):  # Hive warehouse: .../<db>.db/<table>
            if parts[i].endswith(".db") and len(parts[i]) > 3:
                return f"{parts[i][:-3]}.{parts[i + 1]}"
        if allow_short_slash and "." not in t and 2 <= len(parts) <= 3:
            return ".".join(parts)
        return None
    dotted = t.split(".")
    return t if len(dotted) >= 2 and all(dotted) else None


def candidates(namespace: str, name: str, facets: Mapping[str, Any] | None) -> list[Candidate]:
    """Every symlink identifier first (in event order), then the dataset name; de-duplicated by
    name, the first namespace kept. A storage namespace's name is no short ``db/table``."""
    found: dict[str, Candidate] = {}
    symlinks = (facets or {}).get("symlinks")
    identifiers = symlinks.get("identifiers") if isinstance(symlinks, Mapping) else None
    for ident in identifiers if isinstance(identifiers, list) else []:
        if isinstance(ident, Mapping) and isinstance(ident.get("name"), str):
            dotted = _normalize(ident["name"], True)
            if dotted is not None:
                found.setdefault(dotted, Candidate(dotted, str(ident.get("namespace") or "")))
    dotted = _normalize(name, not is_storage(namespace))
    if dotted is not None:
        found.setdefault(dotted, Candidate(dotted, namespace))
    return list(found.values())


def datasource_name(facets: Mapping[str, Any] | None) -> str | None:
    source = (facets or {}).get("datasource")
    value = source.get("name") if isinstance(source, Mapping) else None
    return value if isinstance(value, str) and value else None


# -- the server's search, step by step ------------------------------------------------------------

EXACT = "exact"  # one FQN in a mapped service: the table API answers it
IN_SERVICE = "inService"  # S.%.%schema.table: the service's databases, each asked by name
CREATED = "created"  # where the server creates the table when nothing matched
CATALOG = "catalog"  # a LIKE over every table: only the lineage of the other end can answer
CONTAINER = "container"  # a container whose fullPath is the pattern: likewise


@dataclass(frozen=True, slots=True)
class Step:
    kind: str
    pattern: str  # the LIKE pattern the server runs (CREATED: the FQN it creates)
    service: str | None = None
    database: str | None = None
    schema: str | None = None
    table: str | None = None
    escaped: bool = False  # the pattern escapes with ``!`` (the bare-token search)

    def matches(self, fqn: str) -> bool:
        """Whether the server's search would list this FQN (not for CREATED: no search)."""
        return like(self.pattern, fqn, escape="!" if self.escaped else None)


def search_steps(
    namespace: str, name: str, facets: Mapping[str, Any] | None, mapping: Mapping[str, str]
) -> list[Step]:
    """The searches OpenMetadata 2.1 runs for one dataset, in its order, ending with where it
    would create the table."""
    steps: list[Step] = []
    found = candidates(namespace, name, facets)
    source = datasource_name(facets)
    for c in found:
        parts = c.name.split(".")
        db = parts[-3] if len(parts) >= 3 else glue_catalog_id(c.namespace)
        schema, table = parts[-2], parts[-1]
        service = service_for(c.namespace, mapping)
        if service is not None:
            if db is not None:
                steps.append(
                    Step(EXACT, f"{service}.{db}.{schema}.{table}", service, db, schema, table)
                )
            steps.append(
                Step(IN_SERVICE, f"{service}.%.%{schema}.{table}", service, None, schema, table)
            )
        if source is not None and db is not None:
            steps.append(Step(CATALOG, f"{source}.{db}.{schema}.{table}"))
        if db is not None:
            steps.append(Step(CATALOG, f"%{db}.{schema}.{table}"))
        if source is not None:
            steps.append(Step(CATALOG, f"{source}.%.{schema}.{table}"))
        steps.append(Step(CATALOG, f"%{schema}.{table}"))
    token = bare_token(name)
    service = service_for(namespace, mapping)
    if token is not None and service is not None:
        pattern = f"{like_escape(service)}.%.{like_escape(token)}"
        # the server takes it only when it is the only match; among neighbours, as every step
        steps.append(Step(CATALOG, pattern, escaped=True))
    steps += [Step(CONTAINER, path) for path in container_paths(namespace, name)]
    for c in found:
        service = service_for(c.namespace, mapping)
        if service is not None:
            parts = c.name.split(".")
            db = parts[-3] if len(parts) >= 3 else glue_catalog_id(c.namespace)
            steps.append(Step(CREATED, "", service, db, parts[-2], parts[-1]))
            break
    return steps


def container_paths(namespace: str, name: str) -> list[str]:
    """The ``fullPath`` values the server looks a storage dataset's container up by, in its order
    (``OpenLineageEntityResolver.resolveContainer``): the path, then its parent."""
    if not is_storage(namespace) or not namespace or not name:
        return []
    full = namespace + name if namespace.endswith("/") else f"{namespace}/{name}"
    slash = full.rfind("/")
    parent = full[:slash] if slash > 0 else None
    return [full] if parent is None or parent == full else [full, parent]


# -- reading back -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Table:
    id: str
    fqn: str
    type: str = "table"


@dataclass(slots=True)
class Found:
    """What the table API found for a dataset (several: the server took one of them), or the
    searches left to match against the neighbours of the edge's other end."""

    tables: list[Table] = field(default_factory=list)
    rest: list[Step] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Sent:
    """A dataset as an event sent it: what the server resolved."""

    namespace: str
    name: str
    facets: Mapping[str, Any] | None = None


class TableReader:
    """The reads of one upload, each made once."""

    def __init__(self, http: HttpCatalogClient, mapping: Mapping[str, str]) -> None:
        self.http = http
        self.mapping = mapping
        self._tables: dict[str, Table | None] = {}
        self._databases: dict[str, list[str]] = {}
        self._lineage: dict[str, dict[str, Any]] = {}
        self._found: dict[tuple[str, str, str], Found] = {}
        self._paths: dict[str, str | None] = {}

    def carry(self) -> TableReader:
        """A reader for after an upload: the tables found before it are still there (an upload
        creates tables, never removes them), the rest (databases, tables not found, every
        lineage) is read again."""
        out = TableReader(self.http, self.mapping)
        out._tables = {fqn: t for fqn, t in self._tables.items() if t is not None}
        out._paths = dict(self._paths)
        return out

    def absent(self) -> set[str]:
        """The FQNs the table API did not find."""
        return {fqn for fqn, t in self._tables.items() if t is None}

    def container_path(self, container_id: str) -> str | None:
        """A container's ``fullPath``, what the server matches a storage dataset against."""
        if container_id not in self._paths:
            response = self.http.request(
                "GET", CONTAINERS + quote(container_id, safe=""), ok=frozenset({404})
            )
            body = response.json() if response.status_code == 200 else None
            path = body.get("fullPath") if isinstance(body, dict) else None
            self._paths[container_id] = path if isinstance(path, str) else None
        return self._paths[container_id]

    def table(self, fqn: str) -> Table | None:
        if fqn not in self._tables:
            response = self.http.request("GET", TABLES + quote(fqn, safe=""), ok=frozenset({404}))
            body = response.json() if response.status_code == 200 else None
            self._tables[fqn] = (
                Table(str(body["id"]), str(body["fullyQualifiedName"]))
                if isinstance(body, dict) and body.get("id") and body.get("fullyQualifiedName")
                else None
            )
        return self._tables[fqn]

    def databases(self, service: str) -> list[str]:
        """The names of a database service's databases (every page)."""
        if service not in self._databases:
            names: list[str] = []
            after: str | None = None
            while True:
                params: dict[str, Any] = {"service": quote_name(service), "limit": _PAGE}
                if after:
                    params["after"] = after
                body = self.http.request("GET", DATABASES, params=params).json()
                names += [str(d["name"]) for d in body.get("data") or [] if d.get("name")]
                after = (body.get("paging") or {}).get("after")
                if not after:
                    break
            self._databases[service] = names
        return self._databases[service]

    def _lineage_of(self, table: Table) -> dict[str, Any]:
        if table.fqn not in self._lineage:
            response = self.http.request(
                "GET",
                LINEAGE.format(type=table.type) + quote(table.fqn, safe=""),
                params={"upstreamDepth": 1, "downstreamDepth": 1},
                ok=frozenset({404}),  # gone since it was found: no neighbours to tell by
            )
            self._lineage[table.fqn] = response.json() if response.status_code == 200 else {}
        return self._lineage[table.fqn]

    def edges_around(self, table: Table) -> tuple[dict[str, Any], dict[str, Any]]:
        """The lineageDetails of every edge out of ``table`` and into it, by the other end's id."""
        lineage = self._lineage_of(table)
        down = {
            str(e.get("toEntity")): e.get("lineageDetails") or {}
            for e in lineage.get("downstreamEdges") or []
            if str(e.get("fromEntity")) == table.id
        }
        up = {
            str(e.get("fromEntity")): e.get("lineageDetails") or {}
            for e in lineage.get("upstreamEdges") or []
            if str(e.get("toEntity")) == table.id
        }
        return down, up

    def neighbours(self, table: Table, *, upstream: bool) -> list[Table]:
        """The entities with an edge into ``table`` (upstream) or out of it."""
        lineage = self._lineage_of(table)
        edges = lineage.get("upstreamEdges" if upstream else "downstreamEdges") or []
        ends = {
            str(e.get("fromEntity") if upstream else e.get("toEntity"))
            for e in edges
            if str(e.get("toEntity") if upstream else e.get("fromEntity")) == table.id
        }
        return [
            Table(str(n["id"]), str(n["fullyQualifiedName"]), str(n.get("type") or "table"))
            for n in lineage.get("nodes") or []
            if str(n.get("id")) in ends and n.get("fullyQualifiedName")
        ]

    # -- one dataset ------------------------------------------------------------------------

    def find(self, sent: Sent) -> Found:
        key = (sent.namespace, sent.name, repr(_search_facets(sent.facets)))
        if key not in self._found:
            self._found[key] = self._walk(
                search_steps(sent.namespace, sent.name, sent.facets, self.mapping)
            )
        return self._found[key]

    def _walk(self, steps: list[Step]) -> Found:
        for i, step in enumerate(steps):
            if step.kind in (CATALOG, CONTAINER):
                return Found([], steps[i:])
            assert step.service is not None and step.schema is not None and step.table is not None
            if step.kind != CREATED and ("." in step.service or '"' in step.service):
                # the stored FQN quotes this service name: the server's unquoted pattern never
                # matches it (it creates under the quoted name, though)
                continue
            if step.kind == EXACT:
                assert step.database is not None
                t = self.table(build_fqn(step.service, step.database, step.schema, step.table))
                if t is not None:
                    return Found([t])
            elif step.kind == IN_SERVICE:
                found = [
                    t
                    for d in self.databases(step.service)
                    if (t := self.table(build_fqn(step.service, d, step.schema, step.table)))
                ]
                if found:
                    return Found(found)
            else:  # CREATED: a two-part name goes to the service's only database
                db = step.database
                if db is None:
                    names = self.databases(step.service)
                    db = names[0] if len(names) == 1 else None
                if db is not None:
                    t = self.table(build_fqn(step.service, db, step.schema, step.table))
                    if t is not None:
                        return Found([t])
        return Found()

    def find_all(self, sent: Sequence[Sent]) -> Found:
        """A graph node the events named in several ways (symlinks): the tables of them all."""
        tables: dict[str, Table] = {}
        rest: list[Step] = []
        for s in sent:
            found = self.find(s)
            for t in found.tables:
                tables.setdefault(t.id, t)
            rest += found.rest
        return Found(list(tables.values()), [] if tables else rest)

    # -- one edge ---------------------------------------------------------------------------

    def edge(self, source: Found, target: Found) -> tuple[Table, Table] | None:
        """The two tables of the edge the server wrote for a flow, or None when they cannot be
        told: an end the reads do not find, or that stays ambiguous.

        An end the table API found is the anchor, and the other end is picked among its
        neighbours by the server's remaining searches. With no anchor (both ends left to
        searches over the whole catalog, as under a service whose name holds a dot), the table
        at the source's mapped place is tried: kept only when the target picked among its
        neighbours picks it back among the target's."""
        src = source.tables[0] if len(source.tables) == 1 else None
        dst = target.tables[0] if len(target.tables) == 1 else None
        if src is None and dst is not None:
            src = self._among(source, self.neighbours(dst, upstream=True))
        elif dst is None and src is not None:
            dst = self._among(target, self.neighbours(src, upstream=False))
        elif src is None and dst is None and not source.tables and not target.tables:
            probe = self.mapped_place(source)
            dst = self._among(target, self.neighbours(probe, upstream=False)) if probe else None
            back = self._among(source, self.neighbours(dst, upstream=True)) if dst else None
            src = probe if back is not None and probe is not None and back.id == probe.id else None
        if src is None or dst is None or src.id == dst.id:
            return None
        return src, dst

    def _place(self, step: Step) -> str | None:
        """The FQN a CREATED step creates (a two-part name: in the service's only database)."""
        assert step.service is not None and step.schema is not None and step.table is not None
        db = step.database
        if db is None:
            names = self.databases(step.service)
            db = names[0] if len(names) == 1 else None
        return build_fqn(step.service, db, step.schema, step.table) if db is not None else None

    def mapped_place(self, end: Found) -> Table | None:
        """The table where the server would have created the dataset, if it is there."""
        for step in end.rest:
            if step.kind == CREATED:
                place = self._place(step)
                return self.table(place) if place is not None else None
        return None

    def _among(self, end: Found, neighbours: list[Table]) -> Table | None:
        """The neighbour the server's searches for ``end`` pick first (None: none, or several
        at once, when the server's pick among them cannot be told)."""
        if end.tables:
            ids = {t.id for t in end.tables}
            picked = [n for n in neighbours if n.id in ids]
            return picked[0] if len(picked) == 1 else None
        for step in end.rest:
            tables = [n for n in neighbours if n.type == "table"]
            if step.kind == CREATED:
                place = self._place(step)
                picked = [n for n in tables if n.fqn == place]
            elif step.kind == CONTAINER:
                picked = [
                    n
                    for n in neighbours
                    if n.type == "container" and self.container_path(n.id) == step.pattern
                ]
            else:
                picked = [n for n in tables if step.matches(n.fqn)]
            if picked:
                return picked[0] if len(picked) == 1 else None
        return None


def _search_facets(facets: Mapping[str, Any] | None) -> tuple[Any, Any]:
    """The facets a search reads (symlinks, datasource): two events naming a dataset with the
    same of these are one search."""
    return (
        (facets or {}).get("symlinks"),
        datasource_name(facets),
    )


def sent_datasets(
    events: Iterable[Mapping[str, Any]], key_of: Callable[[str, str], Any]
) -> dict[Any, list[Sent]]:
    """The datasets of the events' inputs and outputs as the server got them, by
    ``key_of(namespace, name)`` (the graph node they landed on); one per distinct (namespace,
    name, searched facets)."""
    out: dict[Any, dict[tuple[str, str, str], Sent]] = {}
    for doc in events:
        for side in ("inputs", "outputs"):
            for d in doc.get(side) or []:
                if not isinstance(d, Mapping):
                    continue
                ns, name = d.get("namespace"), d.get("name")
                if not isinstance(ns, str) or not isinstance(name, str):
                    continue
                facets = d.get("facets") if isinstance(d.get("facets"), Mapping) else None
                out.setdefault(key_of(ns, name), {}).setdefault(
                    (ns, name, repr(_search_facets(facets))), Sent(ns, name, facets)
                )
    return {k: list(v.values()) for k, v in out.items()}
