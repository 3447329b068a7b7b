"""Rows the catalog's database refuses for what they hold, set apart from the rows beside them.

An upload writes thousands of rows a statement. A row the database refuses for its content (a
number beyond its column's range, a key longer than PostgreSQL's btree index takes, a string
the driver cannot encode) failed the whole statement, so the whole object type: nothing of the
batch after it was written, and every retry failed the same way. Now a statement that fails so
is split in halves, each under a savepoint, until the refused rows stand alone: those are the
upload's failed rows (code ``DATABASE_REFUSED``, blocking nothing: the rest of the batch is
written, its cleanup runs and it is synced, not retried), the others are written. What needs a
refused row's id is left out with it (an entity's fields and flows), said in its reason. Any
other error (a lost connection, a locked database) still fails the object type, for a retry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Connection
from sqlalchemy.exc import DataError, DBAPIError

from ol_dagster.catalog.protocol import FailedRow, ObjectType

# the code of a refused row: it blocks nothing (the catalog would refuse it on every run), so the
# batch's cleanup runs and the batch is synced, as for any catalog that refuses an event's content
DATABASE_REFUSED = "DATABASE_REFUSED"
# SQLSTATE classes of a refusal: data exception (22: out of range, bad encoding, too long) and
# program limit exceeded (54: an index entry over the btree's maximum)
_REFUSING_CLASSES = ("22", "54")
_REASON_LENGTH = 300  # a reason quotes no more of the database's message than this
_KEY_LENGTH = 300  # nor of the refused object's key

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Refused:
    """One refused row: its table, its key in the upload, the row and the database's reason."""

    table: str
    key: Any
    row: Any
    reason: str


def refusal(exc: BaseException) -> str | None:
    """The reason, when ``exc`` is the database (or its driver) refusing a row's content."""
    if isinstance(exc, OverflowError | UnicodeError):  # the driver could not send the value
        return _short(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, DataError):
        return _short(str(exc.orig))
    if isinstance(exc, DBAPIError):
        state = getattr(exc.orig, "sqlstate", None) or ""
        if state[:2] in _REFUSING_CLASSES:
            return _short(str(exc.orig))
    return None


def _short(message: str) -> str:
    first = message.strip().splitlines()[0] if message.strip() else message
    return first if len(first) <= _REASON_LENGTH else first[: _REASON_LENGTH - 3] + "..."


def label(text: str) -> str:
    """An object's key as a failed row shows it: a very long name cut, with its length."""
    if len(text) <= _KEY_LENGTH:
        return text
    return f"{text[: _KEY_LENGTH - 40]}... ({len(text)} characters)"


def isolated(
    conn: Connection,
    items: Sequence[T],
    write: Callable[[Sequence[T]], list[R]],
    refused: Callable[[T, str], None] | None,
) -> list[R]:
    """``write(items)`` under a savepoint; when the database refuses a row of them, the halves
    again, down to single items, each refused one given to ``refused`` (with its reason) and
    left out. Without ``refused``, a refusal fails as any error does."""
    if refused is None or not items:
        return write(items)
    try:
        with conn.begin_nested():
            return write(items)
    except Exception as exc:
        reason = refusal(exc)
        if reason is None:
            raise
        if len(items) == 1:
            refused(items[0], reason)
            return []
    half = len(items) // 2
    return isolated(conn, items[:half], write, refused) + isolated(
        conn, items[half:], write, refused
    )


# the object type a refused row of each table is reported under
_OBJECT_TYPES = {
    "cat_physical_entities": ObjectType.PHYSICAL_ENTITIES,
    "cat_physical_fields": ObjectType.PHYSICAL_FIELDS,
    "cat_routines": ObjectType.ROUTINES,
    "cat_statements": ObjectType.STATEMENTS,
    "cat_data_flows": ObjectType.DATA_FLOWS,
    "cat_field_flows": ObjectType.FIELD_FLOWS,
    "cat_quality_suites": "qualityChecks",
    "cat_quality_checks": "qualityChecks",
    "cat_run_metrics": "runMetrics",
}
# what is left out with a refused row of these tables, said in its reason
_WITH_IT = {
    "cat_physical_entities": "its fields, flows and run metrics are not written either",
    "cat_physical_fields": "its field flows are not written either",
    "cat_routines": "its statement is not written either",
    "cat_quality_suites": "its checks are not written either",
}


def failed_rows(
    refused: Sequence[Refused], entities: Callable[[], dict[int, str]]
) -> list[FailedRow]:
    """The upload's failed rows for ``refused``; ``entities`` gives the OpenLineage identity
    (``namespace:name``) of the entities by id, asked only when a row needs it."""
    if not refused:
        return []
    names: dict[int, str] = {}

    def entity(eid: int) -> str:
        if not names:
            names.update(entities())
        return names.get(eid, f"entity {eid}")

    out = []
    for r in refused:
        row = r.row
        match r.table:
            case "cat_physical_entities":
                key = f"{row['ol_namespace']}:{row['ol_name']}"
            case "cat_physical_fields":
                key = f"{entity(row['entity_id'])}, field {row['name']}"
            case "cat_routines":
                key = f"{row['schema']}:{row['name']}"
            case "cat_data_flows":
                key = f"{row['scope']}: {entity(row['from_entity'])} -> {entity(row['to_entity'])}"
            case "cat_run_metrics":
                key = entity(row["entity_id"])
            case "cat_quality_suites" | "cat_quality_checks" | "cat_field_flows":
                key = str(row.get("code") or row.get("scope"))
            case _:
                key = ", ".join(str(k) for k in r.key) if isinstance(r.key, tuple) else str(r.key)
        reason = r.reason if r.table not in _WITH_IT else f"{r.reason}; {_WITH_IT[r.table]}"
        object_type = _OBJECT_TYPES.get(r.table, r.table)
        out.append(FailedRow(object_type, label(key), reason, code=DATABASE_REFUSED, blocks=False))
    return out
