"""Tables of the event store and the migrations between their versions.

The store outlives upgrades of ol-dagster: a deployment keeps weeks of batches in it. Its schema
therefore carries a version, and opening an older store migrates it in place (each step in its own
transaction) instead of failing or silently ignoring new columns. A store written by a newer
ol-dagster is refused rather than damaged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Connection,
    DateTime,
    Engine,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.exc import DBAPIError
from sqlalchemy.schema import CreateTable

from ol_dagster.db import AUTO_ID as _Id
from ol_dagster.db import lock_schema
from ol_dagster.lineage_state import (
    StateRows,
    is_whole_state,
    part_digest,
    split_state,
    state_head,
    state_rows,
)
from ol_dagster.store import part_refs as refs

SCHEMA_VERSION = 17


class BatchKind(StrEnum):
    POSTED = "posted"  # one /lineage/batch post, stored whole
    STREAM = "stream"  # single events collected until the sensor seals the batch


class BatchStatus(StrEnum):
    OPEN = "open"  # a stream batch still collecting events; never synced
    SEALED = "sealed"  # complete and waiting for its run
    SYNCED = "synced"  # its run finished (uploaded and cleaned, or skipped on purpose)
    FAILED = "failed"  # its upload failed; the events stay for a retry
    # version 9: a large posted batch still being written, in short transactions (SQLite has one
    # writer: one long transaction made every other post wait for it). Nothing reads it; its last
    # transaction makes it SEALED; one whose receiver died mid-post is removed (``writer``).
    RECEIVING = "receiving"


metadata = MetaData()

meta = Table(
    "ol_store_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

batches = Table(
    "ol_batches",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("definition", String(200), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("status", String(16), nullable=False),
    Column("received_at", DateTime, nullable=False),
    Column("sealed_at", DateTime),
    Column("received_count", Integer, nullable=False, default=0),
    Column("accepted_count", Integer, nullable=False, default=0),
    Column("rejected_count", Integer, nullable=False, default=0),
    Column("whole_snapshot", Boolean, nullable=False, default=False),
    Column("rejections", JSON),
    Column("cutoff", DateTime),
    Column("upload_result", JSON),
    Column("cleanup_report", JSON),
    Column("synced_at", DateTime),
    # version 2: failed syncs are retried with backoff
    Column("attempts", Integer, nullable=False, default=0, server_default="0"),
    Column("next_attempt_at", DateTime),
    # version 9: the process writing a RECEIVING batch (``store.holder``), so that the batch of a
    # receiver killed mid-post is removed as soon as that process is seen gone. NULL otherwise.
    Column("writer", String(200)),
    # version 12: a snapshot's place in its producer's order (``ol_dagster.snapshot_order``):
    # the sequence its producer gave it (OL-Snapshot-Sequence), NULL when none; and the time it
    # is ordered by without one (the Kafka timestamp of its first message, else its arrival).
    Column("snapshot_sequence", BigInteger),
    Column("ordered_at", DateTime),
    Index("ix_ol_batches_definition_status", "definition", "status", "id"),
    # At most one open stream batch per definition, even with several receivers racing.
    Index(
        "ux_ol_batches_one_open_stream",
        "definition",
        unique=True,
        sqlite_where=text("status = 'open'"),
        postgresql_where=text("status = 'open'"),
    ),
    # version 12: an id is never given twice, even once retention purged the batch that had it
    # (SQLite reuses the highest rowid of a table without AUTOINCREMENT): a sensor's cursor, the
    # cleanup journal and the log store's backlog name batches by id. PostgreSQL's sequence never
    # goes back.
    sqlite_autoincrement=True,
)

events = Table(
    "ol_events",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("batch_id", _Id, ForeignKey("ol_batches.id", ondelete="CASCADE"), nullable=False),
    Column("position", Integer, nullable=False),
    Column("raw", LargeBinary, nullable=False),
    Column("kind", String(16), nullable=False),
    Column("event_type", String(16)),
    Column("event_time", DateTime, nullable=False),
    Column("producer", Text),
    Column("job_namespace", Text),
    Column("job_name", Text),
    # version 13: unbounded (PostgreSQL enforced the 200 characters of a VARCHAR(200))
    Column("run_id", Text),
    Index("ix_ol_events_batch_position", "batch_id", "position"),
    Index("ix_ol_events_time", "event_time"),
    # version 6: a run split over batches is judged whole, so its earlier events are found by run.
    # Version 13: a hash index on PostgreSQL, which refuses a btree entry over 2,704 bytes (a run
    # id of 2,048 characters that do not compress); the index is only ever asked for equality.
    Index("ix_ol_events_run", "run_id", postgresql_using="hash"),
    # version 7: SHA-256 of ``raw`` (128 bits), written with it: what a batch's graph was built
    # from is told (and a re-sent event recognized) without reading the events back. NULL on
    # rows stored before version 7: their digest is computed from ``raw`` when needed.
    Column("digest", LargeBinary),
    # version 14: the digest of what the event says about the lineage, without its run facts
    # (``openlineage.run_facts``): a job whose events' content digests are those of its last
    # synced batch is not normalized again. NULL on rows stored before, and on an event whose
    # content is never reused: such an event is normalized every time.
    Column("content", LargeBinary),
)

batch_graphs = Table(
    "ol_batch_graphs",
    metadata,
    # version 7: the graph the ``lineage_graph`` step built for a batch, packed
    # (``lineage.packed``), so the upload loads it instead of normalizing the events again.
    # ``inputs`` names what it was built from (the events' digests, the dataset System rules,
    # the normalizer's version): a graph is used only for the same inputs.
    Column("batch_id", _Id, ForeignKey("ol_batches.id", ondelete="CASCADE"), primary_key=True),
    Column("inputs", LargeBinary, nullable=False),
    Column("graph", LargeBinary, nullable=False),
    Column("built_at", DateTime, nullable=False),
    # version 14: what the next batch's graph may reuse of this one (``lineage.reuse``): the
    # rules it was built under and each job's content fingerprint. NULL: nothing.
    Column("parts", LargeBinary),
)


lineage_state = Table(
    "ol_lineage_state",
    metadata,
    # version 3: what each definition has synced, for the asset graph (read at definitions load)
    Column("definition", String(200), primary_key=True),
    Column("state", JSON, nullable=False),
    Column("refreshed_at", DateTime, nullable=False),
)

# version 14: a definition's lineage state as rows (``store.lineage_state``), so that a sync
# rewrites only what changed: one per job and per dataset its jobs reach, and the links between
# them (a dataset row goes with the last job linked to it). ``ol_lineage_state`` keeps the
# state's head ({"version": 2, "jobsNotShown": n}) and the other documents.
lineage_jobs = Table(
    "ol_lineage_jobs",
    metadata,
    Column("definition", String(200), primary_key=True),
    Column("job_key", LargeBinary(32), primary_key=True),  # ``lineage_state.job_key``
    Column("part", LargeBinary, nullable=False),  # JSON: ``lineage_state.JobPart``
    Column("digest", LargeBinary(16), nullable=False),  # of ``part``
    # the catalog's signature of what the part was exported from; NULL: compare the part
    Column("source", String(64)),
    Column("written_at", DateTime, nullable=False),
)

lineage_datasets = Table(
    "ol_lineage_datasets",
    metadata,
    Column("definition", String(200), primary_key=True),
    Column("dataset_key", LargeBinary(32), primary_key=True),  # ``lineage_state.dataset_key``
    Column("part", LargeBinary, nullable=False),  # JSON: ``lineage_state.DatasetPart``
    Column("digest", LargeBinary(16), nullable=False),
    Column("written_at", DateTime, nullable=False),
)

lineage_links = Table(
    "ol_lineage_links",
    metadata,
    Column("definition", String(200), primary_key=True),
    Column("job_key", LargeBinary(32), primary_key=True),
    Column("dataset_key", LargeBinary(32), primary_key=True),
    Index("ix_ol_lineage_links_dataset", "definition", "dataset_key"),
)

sync_locks = Table(
    "ol_sync_locks",
    metadata,
    # version 6: one sync per definition at a time, whichever process starts it (a sensor's run,
    # an operator's ``ol-dagster sync``). A lease: a holder that dies without releasing it blocks
    # the definition only until ``expires_at``, or until a liveness check says it is gone.
    Column("definition", String(200), primary_key=True),
    Column("holder", String(200), nullable=False),
    Column("acquired_at", DateTime, nullable=False),
    Column("expires_at", DateTime, nullable=False),
    # version 8: the process holding it during a step (``store.holder``): on the same machine a
    # holder whose process is gone is passed over at once. NULL between a run's steps.
    Column("process", String(200)),
)

cleanup_journal = Table(
    "ol_cleanup_journal",
    metadata,
    # version 8: intent before deletion. A row per real cleanup call, written (INTENT) before
    # the call and completed (DONE) after it; a row a killed process left INTENT is reconciled
    # by the definition's next sync against the catalog, so what was removed is always reported.
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("definition", String(200), nullable=False),
    Column("run_id", String(200), nullable=False),
    Column("batch_id", _Id),  # None: the daily stale cleanup
    Column("position", Integer, nullable=False),  # the call's place in its plan
    Column("call", JSON, nullable=False),  # what the call removes: target and parameters
    Column("planned", JSON, nullable=False),  # the rehearsal's counts by object type
    Column("status", String(16), nullable=False),  # INTENT, DONE, RECONCILED
    Column("removed", JSON),  # the real call's counts, or what reconciling found gone
    Column("created_at", DateTime, nullable=False),
    Column("finished_at", DateTime),
    Column("reported_in", _Id),  # the batch whose cleanup report listed the reconciliation
    Index("ix_ol_cleanup_journal_open", "definition", "status", "id"),
    # version 11: the catalog the call was made to (a definition may feed several). NULL on
    # entries written before: they were made to the definition's only (its primary) catalog.
    Column("catalog", String(200)),
)

batch_catalogs = Table(
    "ol_batch_catalogs",
    metadata,
    # version 11: a definition may feed several catalogs (``catalogs:``), each with its own
    # cutoff, upload, cleanup report and outcome for a batch. The primary catalog's are also
    # written to the batch's own columns (what a batch shows, as with one catalog). A batch
    # synced before version 11 has no rows here: its columns are its only catalog's, which
    # ``sync.fanout`` reads as the primary catalog's.
    Column(
        "batch_id",
        _Id,
        ForeignKey("ol_batches.id", ondelete="CASCADE"),
        primary_key=True,
        autoincrement=False,
    ),
    Column("catalog", String(200), primary_key=True),
    # NULL: uploaded, its cleanup not finished; SYNCED: finished (cleaned, or skipped on
    # purpose); FAILED: its upload or its run failed, the batch is retried for it
    Column("status", String(16)),
    Column("run_id", String(200)),  # the run that recorded ``status``
    # a retry run that leaves this catalog alone: it finished the batch in an earlier run
    Column("kept_in_run", String(200)),
    Column("cutoff", DateTime),
    Column("upload_result", JSON),
    Column("cleanup_report", JSON),
    Index("ix_ol_batch_catalogs_status", "catalog", "status", "batch_id"),
)

kafka_offsets = Table(
    "ol_kafka_offsets",
    metadata,
    # version 10: the Kafka intake (``ol_dagster/kafka``). Per partition, the offset after the
    # last message whose outcome (events, or a dead letter) is stored, written in the same
    # transaction as them: a message below it is never stored again, whatever Kafka re-delivers
    # (a crash between the store's commit and Kafka's, a rebalance, a group that lost its offsets).
    Column("topic", String(249), primary_key=True),  # Kafka's own limit on a topic's name
    Column("partition", Integer, primary_key=True),
    Column("next_offset", BigInteger, nullable=False),
    Column("updated_at", DateTime, nullable=False),
)

kafka_dead_letters = Table(
    "ol_kafka_dead_letters",
    metadata,
    # version 10: a Kafka message that is not an accepted OpenLineage event, with the reason the
    # receiver's validation gives, and its bytes up to ``kafka.deadLetterMaxBytes`` (``raw_size``:
    # all of them). No producer is there to be answered: this is where its rejections are kept.
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("definition", String(200), nullable=False),
    Column("topic", String(249), nullable=False),
    Column("partition", Integer, nullable=False),
    Column("message_offset", BigInteger, nullable=False),  # "offset" is reserved in SQL
    Column("reason", Text, nullable=False),
    Column("raw", LargeBinary),
    Column("raw_size", Integer, nullable=False),
    Column("received_at", DateTime, nullable=False),
    Index("ix_ol_kafka_dead_letters_message", "topic", "partition", "message_offset"),
)


lineage_parts = Table(
    "ol_lineage_parts",
    metadata,
    # version 14: what each definition last synced of each job (its inputs, outputs, SQL and
    # column flows) and of each dataset (its fields), per catalog: a batch's change set is each
    # written job's new part against this one (``ol_dagster.changes``). ``key`` is a digest of
    # the (namespace, name), so that names of any length fit PostgreSQL's index.
    Column("definition", String(200), primary_key=True),
    Column("catalog", String(200), primary_key=True),
    Column("kind", String(16), primary_key=True),  # job or dataset
    Column("key", String(64), primary_key=True),
    Column("namespace", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("digest", String(64), nullable=False),
    Column("part", JSON, nullable=False),
    Index("ix_ol_lineage_parts_catalog", "catalog", "kind"),
)

part_refs = Table(
    refs.TABLE,
    metadata,
    # version 17: each job part's datasets and the job itself, by ref (``store.part_refs``)
    Column("catalog", String(200), primary_key=True),
    Column("ref", BigInteger, primary_key=True),
    Column("definition", String(200), primary_key=True),
    Column("key", String(64), primary_key=True),
    Index("ix_ol_lineage_part_refs_job", "catalog", "definition", "key"),
    sqlite_with_rowid=False,
)

batch_changes = Table(
    "ol_batch_changes",
    metadata,
    # version 14: the lineage change set of a batch in one catalog (``ol-dagster changes``)
    Column(
        "batch_id",
        _Id,
        ForeignKey("ol_batches.id", ondelete="CASCADE"),
        primary_key=True,
        autoincrement=False,
    ),
    Column("catalog", String(200), primary_key=True),
    Column("change_set", JSON, nullable=False),
    Column("recorded_at", DateTime, nullable=False),
)


class StoreVersionError(RuntimeError):
    """The store's schema is newer than this ol-dagster understands."""


def _add_column(conn: Connection, table: Table, column: str, ddl_type: str) -> None:
    """``ALTER TABLE ... ADD COLUMN`` unless the column is there already (a test may have turned
    a newer store back to an older version)."""
    if column not in {c["name"] for c in inspect(conn).get_columns(table.name)}:
        conn.exec_driver_sql(f"ALTER TABLE {table.name} ADD COLUMN {column} {ddl_type}")


def _v1_to_v2(conn: Connection) -> None:
    """Retry bookkeeping: how often a batch's sync failed and when to try it again."""
    conn.exec_driver_sql("ALTER TABLE ol_batches ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0")
    datetime_type = "TIMESTAMP" if conn.dialect.name == "postgresql" else "DATETIME"
    conn.exec_driver_sql(f"ALTER TABLE ol_batches ADD COLUMN next_attempt_at {datetime_type}")


def _v2_to_v3(conn: Connection) -> None:
    """The synced-lineage state the asset graph is built from, and an index on eventTime for the
    analyses' windows."""
    lineage_state.create(conn, checkfirst=True)
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_ol_events_time ON ol_events (event_time)")


def _v3_to_v4(conn: Connection) -> None:
    """No index on (job_namespace, job_name): no query used it, and PostgreSQL refuses btree index
    rows over 2,704 bytes, so an event with a long job name could never be stored there (a 503
    the producer retried forever)."""
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_ol_events_job")


def _v4_to_v5(conn: Connection) -> None:
    """Raw events compressed with lz4 instead of pglz on PostgreSQL (new rows): the same size
    for JSON events, and a 1,000-event post stored ~20% faster. Nothing on SQLite."""
    prefer_lz4(conn)


def prefer_lz4(conn: Connection) -> None:
    """lz4 for ``ol_events.raw`` where the server has it (PostgreSQL 14+ built with lz4); a
    server without it keeps pglz, which only costs speed."""
    if conn.dialect.name != "postgresql":
        return
    major = (conn.dialect.server_version_info or (0,))[0]
    if int(major) < 14:
        return
    try:
        with conn.begin_nested():
            conn.exec_driver_sql("ALTER TABLE ol_events ALTER COLUMN raw SET COMPRESSION lz4")
    except DBAPIError:
        pass  # compression method lz4 not supported by this server's build


def _v5_to_v6(conn: Connection) -> None:
    """The sync locks: a lease per definition, so two syncs of it never run at once."""
    sync_locks.create(conn, checkfirst=True)
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_ol_events_run ON ol_events (run_id)")


def _v6_to_v7(conn: Connection) -> None:
    """Each event's digest (NULL for the events already stored: computed from ``raw`` when
    read) and the batches' packed graphs. Either may exist already when a test turned a newer
    store back, so each step checks first."""
    _add_column(conn, events, "digest", "BYTEA" if conn.dialect.name == "postgresql" else "BLOB")
    batch_graphs.create(conn, checkfirst=True)


def _v7_to_v8(conn: Connection) -> None:
    """The sync lock's holder process and the cleanup journal (intent before deletion)."""
    _add_column(conn, sync_locks, "process", "VARCHAR(200)")
    cleanup_journal.create(conn, checkfirst=True)


def _v8_to_v9(conn: Connection) -> None:
    """The writer of a batch being received (the RECEIVING status needs no DDL: a string)."""
    _add_column(conn, batches, "writer", "VARCHAR(200)")


def _v9_to_v10(conn: Connection) -> None:
    """The Kafka intake's stored offsets and dead letters."""
    kafka_offsets.create(conn, checkfirst=True)
    kafka_dead_letters.create(conn, checkfirst=True)


def _v10_to_v11(conn: Connection) -> None:
    """One feed, several catalogs: each catalog's part of a batch, and the catalog of each
    journal entry (NULL: the definition's only catalog then). Nothing is copied: a batch
    without rows keeps its facts in its own columns, read as its primary catalog's."""
    batch_catalogs.create(conn, checkfirst=True)
    _add_column(conn, cleanup_journal, "catalog", "VARCHAR(200)")


def _v11_to_v12(conn: Connection) -> None:
    """Each batch's snapshot order (its producer's sequence, the time it is ordered by: its
    arrival for the batches stored before), and batch ids that are never given twice. On
    SQLite the latter takes rebuilding ``ol_batches`` with AUTOINCREMENT (SQLite cannot add it
    to a table), so this step runs with foreign keys off (``WITHOUT_FOREIGN_KEYS``): dropping
    the old table must not cascade to the events. The id sequence starts above every batch id
    the store still names, purged batches' included (the cleanup journal keeps them)."""
    dt = "TIMESTAMP" if conn.dialect.name == "postgresql" else "DATETIME"
    _add_column(conn, batches, "snapshot_sequence", "BIGINT")
    _add_column(conn, batches, "ordered_at", dt)
    conn.execute(
        batches.update()
        .where(batches.c.ordered_at.is_(None))
        .values(ordered_at=batches.c.received_at)
    )
    if conn.dialect.name == "sqlite":
        _autoincrement_batch_ids(conn)


def _autoincrement_batch_ids(conn: Connection) -> None:
    """SQLite's documented way to change a table: a new one, the rows copied, the old one
    dropped, the new one renamed, its indexes made again. Nothing to do when a test turned a
    version-12 store back to an older version."""
    created = conn.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'ol_batches'"
    ).scalar_one()
    if "AUTOINCREMENT" in str(created).upper():
        return
    floor = conn.execute(
        select(
            func.max(batches.c.id),
            select(func.max(cleanup_journal.c.batch_id)).scalar_subquery(),
            select(func.max(cleanup_journal.c.reported_in)).scalar_subquery(),
        )
    ).one()
    high = max((int(v) for v in floor if v is not None), default=0)
    rebuilt = batches.to_metadata(MetaData(), name="ol_batches_v12")
    conn.execute(CreateTable(rebuilt))
    columns = ", ".join(c.name for c in batches.columns)
    conn.exec_driver_sql(
        f"INSERT INTO ol_batches_v12 ({columns}) SELECT {columns} FROM ol_batches ORDER BY id"
    )
    conn.exec_driver_sql("DROP TABLE ol_batches")
    conn.exec_driver_sql("ALTER TABLE ol_batches_v12 RENAME TO ol_batches")
    for index in batches.indexes:
        index.create(conn)
    conn.exec_driver_sql("DELETE FROM sqlite_sequence WHERE name = 'ol_batches'")
    conn.exec_driver_sql(
        f"INSERT INTO sqlite_sequence (name, seq) VALUES ('ol_batches', {int(high)})"
    )


def _v12_to_v13(conn: Connection) -> None:
    """Run ids of any length on PostgreSQL: ``run_id`` becomes TEXT (no table rewrite) and its
    index a hash index (a btree refuses long entries). SQLite enforces neither."""
    if conn.dialect.name != "postgresql":
        return
    conn.exec_driver_sql("ALTER TABLE ol_events ALTER COLUMN run_id TYPE TEXT")
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_ol_events_run")
    conn.exec_driver_sql("CREATE INDEX ix_ol_events_run ON ol_events USING hash (run_id)")


def insert_lineage_rows(
    conn: Connection,
    definition: str,
    rows: StateRows,
    now: datetime,
    sources: Mapping[bytes, str | None] | None = None,
) -> None:
    """Insert a state's rows (none of them stored yet), each job with its catalog signature.

    A first sync inserts tens of thousands of rows: each table's are handed to the driver's
    ``executemany`` as plain tuples (one statement, prepared once), not through the SQL layer's
    per-row parameter processing."""
    sources = sources or {}
    # the time as the SQL layer stores it on this database (SQLite: its text form)
    bind = lineage_jobs.c.written_at.type.bind_processor(conn.dialect)
    at = bind(now) if bind is not None else now
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"

    def insert(table: Table, columns: str, values: list[tuple[Any, ...]]) -> None:
        if values:
            marks = ", ".join([mark] * len(values[0]))
            conn.exec_driver_sql(f"INSERT INTO {table.name} ({columns}) VALUES ({marks})", values)

    insert(
        lineage_jobs,
        "definition, job_key, part, digest, source, written_at",
        [
            (definition, key, part, part_digest(part), sources.get(key), at)
            for key, part in rows["jobs"].items()
        ],
    )
    insert(
        lineage_datasets,
        "definition, dataset_key, part, digest, written_at",
        [(definition, key, part, part_digest(part), at) for key, part in rows["datasets"].items()],
    )
    insert(
        lineage_links,
        "definition, job_key, dataset_key",
        [(definition, job, ds) for job, keys in rows["links"].items() for ds in keys],
    )


def _v13_to_v14(conn: Connection) -> None:
    """Each definition's lineage state, one document until now, as rows per job and dataset
    (the document keeps its head); the other documents stay as they are."""
    for table in (lineage_jobs, lineage_datasets, lineage_links):
        table.create(conn, checkfirst=True)
    now = datetime.now(UTC).replace(tzinfo=None)
    for key, doc in conn.execute(select(lineage_state.c.definition, lineage_state.c.state)).all():
        if not is_whole_state(doc):
            continue
        insert_lineage_rows(conn, key, state_rows(*split_state(doc)), now)
        conn.execute(
            lineage_state.update()
            .where(lineage_state.c.definition == key)
            .values(state=state_head(int(doc.get("jobsNotShown") or 0)))
        )


def _v14_to_v15(conn: Connection) -> None:
    """Each event's content digest and each graph's reusable parts: NULL for what is stored
    already, so the first sync after the upgrade normalizes every job, as before."""
    blob = "BYTEA" if conn.dialect.name == "postgresql" else "BLOB"
    _add_column(conn, events, "content", blob)
    _add_column(conn, batch_graphs, "parts", blob)


def _v15_to_v16(conn: Connection) -> None:
    """Lineage change sets: each job's and dataset's last synced part, and each batch's changes."""
    lineage_parts.create(conn, checkfirst=True)
    batch_changes.create(conn, checkfirst=True)


def _v16_to_v17(conn: Connection) -> None:
    """The refs of each job part stored already (``store.part_refs``), built again whole."""
    part_refs.create(conn, checkfirst=True)
    conn.execute(part_refs.delete())  # a store turned back to an older version holds some
    p = lineage_parts
    jobs = select(p.c.catalog, p.c.definition, p.c.key, p.c.namespace, p.c.name, p.c.part)
    rows = conn.execute(jobs.where(p.c.kind == "job")).all()
    refs.insert_refs(conn, [(c, r, d, k) for c, d, k, *job in rows for r in refs.job_refs(*job)])


# steps that change a table other tables refer to: on SQLite they run with foreign keys off
WITHOUT_FOREIGN_KEYS = {11}

# version -> function bringing a store at that version to version + 1
MIGRATIONS: dict[int, Callable[[Connection], None]] = {
    1: _v1_to_v2,
    2: _v2_to_v3,
    3: _v3_to_v4,
    4: _v4_to_v5,
    5: _v5_to_v6,
    6: _v6_to_v7,
    7: _v7_to_v8,
    8: _v8_to_v9,
    9: _v9_to_v10,
    10: _v10_to_v11,
    11: _v11_to_v12,
    12: _v12_to_v13,
    13: _v13_to_v14,
    14: _v14_to_v15,
    15: _v15_to_v16,
    16: _v16_to_v17,
}


def _read_version(conn: Connection) -> int | None:
    if not inspect(conn).has_table(meta.name):
        return None
    row = conn.execute(select(meta.c.value).where(meta.c.key == "schema_version")).first()
    return int(row[0]) if row else None


def _write_version(conn: Connection, version: int) -> None:
    updated = conn.execute(
        meta.update().where(meta.c.key == "schema_version").values(value=str(version))
    )
    if updated.rowcount == 0:
        conn.execute(meta.insert().values(key="schema_version", value=str(version)))


# Any constant: the key of the PostgreSQL advisory lock that serializes the store's schema changes.
_MIGRATION_LOCK = 0x6F6C5F73746F7265  # "ol_store"


@contextmanager
def _step(engine: Engine, version: int) -> Iterator[Connection]:
    """The transaction of one migration step. A step of ``WITHOUT_FOREIGN_KEYS`` on SQLite runs
    with foreign keys off (a pragma SQLite ignores inside a transaction: set on the connection
    before it begins, and set back after), and must leave none broken."""
    if version not in WITHOUT_FOREIGN_KEYS or engine.dialect.name != "sqlite":
        with engine.begin() as conn:
            yield conn
        return
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        assert raw is not None
        raw.execute("PRAGMA foreign_keys=OFF")
        try:
            with conn.begin():
                yield conn
                broken = conn.exec_driver_sql("PRAGMA foreign_key_check").all()
                if broken:
                    raise RuntimeError(f"migration step {version} broke foreign keys: {broken[:5]}")
        finally:
            raw.execute("PRAGMA foreign_keys=ON")


def migrate(engine: Engine) -> int:
    """Create or upgrade the schema; returns the version the store is at afterwards."""
    with engine.begin() as conn:
        lock_schema(conn, _MIGRATION_LOCK)
        version = _read_version(conn)
        if version is None:
            metadata.create_all(conn)
            prefer_lz4(conn)
            _write_version(conn, SCHEMA_VERSION)
            return SCHEMA_VERSION
    while True:
        if version > SCHEMA_VERSION:
            raise StoreVersionError(
                f"the event store is at schema version {version}, newer than this ol-dagster "
                f"({SCHEMA_VERSION}); upgrade ol-dagster instead of opening it with an old one"
            )
        if version == SCHEMA_VERSION:
            return version
        with _step(engine, version) as conn:
            lock_schema(conn, _MIGRATION_LOCK)
            # another process may have taken this step while we waited for the lock
            current = _read_version(conn)
            assert current is not None, "the store's schema version disappeared during a migration"
            if current == version:
                MIGRATIONS[version](conn)
                current = version + 1
                _write_version(conn, current)
        version = current
