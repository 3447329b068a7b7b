"""Where a dataset lives in a catalog: its System, schema, name and type, from OpenLineage naming.

OpenLineage identifies a dataset by (namespace, name) with per-store conventions (naming.md):
``postgres://host:5432`` + ``db.schema.table``, ``s3://bucket`` + object key,
``kafka://host:9092`` +
topic... A catalog wants a System (the data source), a schema (database/schema, or folder) and an
object name. Namespaces are normalized conservatively: a trailing ``/`` is trimmed, case, scheme and
port are kept as sent (never invented), so ids stay joinable with what other tools record.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache

TABLE = "table"
FILE = "file"
FOLDER = "folder"
TOPIC = "topic"
OTHER = "other"

# scheme -> how many leading dotted parts of the name form the schema ("db.schema" of db.schema.t)
_DOTTED_STORES = {
    "postgres": 2,
    "postgresql": 2,
    "mssql": 2,
    "sqlserver": 1,
    "db2": 2,
    "crate": 2,
    "oracle": 2,
    "redshift": 2,
    "snowflake": 2,
    "bigquery": 2,
    "awsathena": 2,
    "trino": 2,
    "spanner": 2,
    "unitycatalog": 2,
    "databricks": 2,
    "mysql": 1,
    "hive": 1,
    "teradata": 1,
    "oceanbase": 1,
    "cassandra": 1,
    "duckdb": 2,
    "sqlite": 1,
    "clickhouse": 1,
}
_FILE_STORES = {
    "s3",
    "s3a",
    "s3n",
    "gs",
    "gcs",
    "abfss",
    "abfs",
    "wasbs",
    "wasb",
    "hdfs",
    "dbfs",
    "file",
    "adl",
}
_TOPIC_STORES = {"kafka", "pubsub", "kinesis", "pulsar"}
_TYPE_FACET = {
    "TABLE": TABLE,
    "VIEW": TABLE,
    "MATERIALIZED_VIEW": TABLE,
    "TOPIC": TOPIC,
    "STREAM": TOPIC,
    "FILE": FILE,
    "FOLDER": FOLDER,
    "DIRECTORY": FOLDER,
}


@dataclass(frozen=True, slots=True)
class Placement:
    system: str
    schema: str
    name: str
    type: str


@lru_cache(maxsize=4096)  # a batch names few namespaces, each thousands of times
def normalize_namespace(namespace: str) -> str:
    ns = namespace.strip()
    return ns.rstrip("/") if len(ns.rstrip("/")) > len(ns.split(":", 1)[0]) + 1 else ns


def scheme_of(namespace: str) -> str:
    head = namespace.split(":", 1)[0] if ":" in namespace else namespace
    return head.lower()


def _split_path(name: str) -> tuple[str, str]:
    path = name.strip("/")
    if "/" not in path:
        return "", path
    folder, _, leaf = path.rpartition("/")
    return folder, leaf


def place_dataset(
    namespace: str,
    name: str,
    *,
    dataset_type: str | None = None,
    system_rules: list[tuple[str, str]] = (),  # type: ignore[assignment]
) -> Placement:
    """System, schema, object name and type of a dataset; ``system_rules`` are (pattern, System)."""
    ns = normalize_namespace(namespace)
    system = ns
    for pattern, rule_system in system_rules:
        if fnmatchcase(ns, pattern) or ns == normalize_namespace(pattern):
            system = rule_system
            break
    scheme = scheme_of(ns)
    kind = _TYPE_FACET.get((dataset_type or "").upper())

    if scheme in _FILE_STORES:
        folder, leaf = _split_path(name)
        if kind is None:
            kind = FILE if "." in leaf else FOLDER
        return Placement(system, folder, leaf or name, kind)
    if scheme in _TOPIC_STORES:
        return Placement(system, "", name, kind or TOPIC)
    depth = _DOTTED_STORES.get(scheme)
    if depth is not None:
        parts = name.split(".")
        if len(parts) > depth:
            return Placement(
                system, ".".join(parts[:depth]), ".".join(parts[depth:]), kind or TABLE
            )
        if len(parts) > 1:
            return Placement(system, ".".join(parts[:-1]), parts[-1], kind or TABLE)
        return Placement(system, "", name, kind or TABLE)
    return Placement(system, "", name, kind or OTHER)
