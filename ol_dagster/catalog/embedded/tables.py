"""Tables of the embedded catalog: the Blindata object model, in SQLAlchemy.

Systems hold physical entities (jobs and datasets) with their fields, and system routines with
their statements. Data flows (entity to entity, data or orchestration) and field flows (field to
field) are owned by a scope: its job's namespace and name, stored as parts that every cleanup
matches with equality, and the seed's scope string. Quality checks belong to a job's suite and are
disabled, never deleted.
Each unique key over names is over a digest of them (``catalog.name_keys``): PostgreSQL's btree
refuses an entry over ~2,704 bytes, and a name may be 2,048 characters of up to four bytes.

Every object carries ``last_update``, written from the database server's clock at each upload that
sends it, changed or not, or the time of an earlier upload that a later one confirmed
(``confirm``, ``partial``, ``cat_confirmations``), or a time set aside that reads as the one the
row had: what a row's last update is for every reader (the cutoff cleanup above all) is its
confirmed time, else its own.

Deleting an entity removes its fields and every flow that touches it; deleting a routine removes its
statements and the flows they carry (seed: "a routine is deleted together with its statements and
their flows").
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)

from ol_dagster.catalog.name_keys import key_column

Id = BigInteger().with_variant(Integer(), "sqlite")
# a namespace or a name (up to ``limits.maxNameLength``, 2,048 characters by default), or a string
# made of them (a scope, a quality suite's code): unbounded, so that PostgreSQL takes the longest
# name the receiver accepts (``schema.prepare`` widens the columns of an earlier version)
Name = Text
# what an event says in its own words (a field's type, a statement's dialect, a column lineage's
# transformation, a quality assertion): unbounded too, whatever its length
Said = Text

JOB = "job"  # entity type of jobs; datasets carry table / file / folder / topic / other
DATA = "data"
ORCHESTRATION = "orchestration"
SYSTEMS_ADMIN = "SYSTEMS_ADMIN"
# the ``kind`` of a neutral System holding stubs of jobs another definition owns, known here only
# as a parent: no ``openLineageOwner``, no ``openLineageJobSystem``, so no cleanup visits it
JOB_REFERENCE = "jobReference"

metadata = MetaData()


def _fk(table: str) -> ForeignKey:
    return ForeignKey(f"{table}.id", ondelete="CASCADE")


systems = Table(
    "cat_systems",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("name", Name, nullable=False),
    Column("properties", JSON, nullable=False, default=dict),
    key_column("name_key", "name"),
    Index("ux_cat_system_key", "name_key", unique=True),
)

users = Table(
    "cat_users",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("permissions", JSON, nullable=False, default=list),
)

entities = Table(
    "cat_physical_entities",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("system_id", Id, _fk("cat_systems"), nullable=False),
    Column("schema", Name, nullable=False),
    Column("name", Name, nullable=False),
    Column("type", String(32), nullable=False),
    Column("ol_namespace", Name, nullable=False),  # OpenLineage identity, for lookups
    Column("ol_name", Name, nullable=False),
    Column("description", Text),
    Column("properties", JSON, nullable=False, default=dict),
    Column("last_update", DateTime, nullable=False),
    Column("created_by", String(36)),  # the upload that inserted the row: written vs touched
    Column("changed_by", String(36)),  # the last upload that changed it: updated vs unchanged
    Column("fields_update", DateTime),  # last upload that carried the whole field list
    Column("analysis", JSON),  # results of the daily analyses, kept apart from what uploads write
    # digest of what the upload that last stamped the row wrote for the object (``changes``): the
    # next upload with the same digest only stamps the object's rows of that time
    Column("content_hash", String(32)),
    key_column("identity_key", "schema", "name"),
    Index("ux_cat_entity_key", "system_id", "identity_key", unique=True),
    Index("ix_cat_entities_system_kind", "system_id", "type"),
    # found by OpenLineage name with equality only: a hash index on PostgreSQL, which takes any size
    Index("ix_cat_entities_ol_name", "ol_name", postgresql_using="hash"),
)

fields = Table(
    "cat_physical_fields",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("entity_id", Id, _fk("cat_physical_entities"), nullable=False),
    Column("name", Name, nullable=False),
    Column("type", Said),
    Column("description", Text),
    Column("ordinal_position", Integer),
    Column("last_update", DateTime, nullable=False),
    Column("created_by", String(36)),  # the upload that inserted the row: written vs touched
    Column("changed_by", String(36)),  # the last upload that changed it: updated vs unchanged
    key_column("name_key", "name"),
    Index("ux_cat_field_key", "entity_id", "name_key", unique=True),
)

routines = Table(
    "cat_routines",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("system_id", Id, _fk("cat_systems"), nullable=False),
    Column("schema", Name, nullable=False),
    Column("name", Name, nullable=False),
    Column("last_update", DateTime, nullable=False),
    Column("created_by", String(36)),  # the upload that inserted the row: written vs touched
    Column("changed_by", String(36)),  # the last upload that changed it: updated vs unchanged
    key_column("identity_key", "schema", "name"),
    Index("ux_cat_routine_key", "system_id", "identity_key", unique=True),
)

statements = Table(
    "cat_statements",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("routine_id", Id, _fk("cat_routines"), nullable=False, unique=True),
    Column("text", Text, nullable=False),
    Column("dialect", Said),
    Column("last_update", DateTime, nullable=False),
    Column("created_by", String(36)),  # the upload that inserted the row: written vs touched
    Column("changed_by", String(36)),  # the last upload that changed it: updated vs unchanged
)

data_flows = Table(
    "cat_data_flows",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("scope", Name, nullable=False),  # ``FlowOwner.scope``: the owner, as one string
    Column("kind", String(16), nullable=False),  # data | orchestration
    # the owner's job: what every cleanup matches, with equality (``cleanup.flows``)
    Column("scope_namespace", Name, nullable=False),
    Column("scope_job", Name, nullable=False),
    Column("from_entity", Id, _fk("cat_physical_entities"), nullable=False),
    Column("to_entity", Id, _fk("cat_physical_entities"), nullable=False),
    Column("statement_id", Id, _fk("cat_statements")),
    Column("last_update", DateTime, nullable=False),
    Column("created_by", String(36)),  # the upload that inserted the row: written vs touched
    Column("changed_by", String(36)),  # the last upload that changed it: updated vs unchanged
    key_column("scope_key", "scope"),
    Index("ux_cat_flow_key", "scope_key", "from_entity", "to_entity", unique=True),
    Index("ix_cat_flows_to", "to_entity"),
    # deletes cascade through these: without them every removed entity scans the flows
    Index("ix_cat_flows_from", "from_entity"),
    Index("ix_cat_flows_statement", "statement_id"),
)

field_flows = Table(
    "cat_field_flows",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("scope", Name, nullable=False),  # ``FlowOwner.scope`` (always a data scope)
    Column("scope_namespace", Name, nullable=False),  # the owner's job, as for data flows
    Column("scope_job", Name, nullable=False),
    Column("from_field", Id, _fk("cat_physical_fields"), nullable=False),
    Column("to_field", Id, _fk("cat_physical_fields"), nullable=False),
    Column("transformation", Said),
    Column("subtype", Said),
    Column("statement_id", Id, _fk("cat_statements")),
    Column("last_update", DateTime, nullable=False),
    Column("created_by", String(36)),  # the upload that inserted the row: written vs touched
    Column("changed_by", String(36)),  # the last upload that changed it: updated vs unchanged
    key_column("scope_key", "scope"),
    Index("ux_cat_field_flow_key", "scope_key", "from_field", "to_field", unique=True),
    Index("ix_cat_field_flows_from", "from_field"),
    Index("ix_cat_field_flows_to", "to_field"),
    Index("ix_cat_field_flows_statement", "statement_id"),
)

quality_suites = Table(
    "cat_quality_suites",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("code", Name, nullable=False),  # the job: "<namespace>.<name>"
    key_column("code_key", "code"),
    Index("ux_cat_quality_suite_key", "code_key", unique=True),
)

quality_checks = Table(
    "cat_quality_checks",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("suite_id", Id, _fk("cat_quality_suites"), nullable=False),
    Column("code", Name, nullable=False),  # dataset | assertion | column
    Column("dataset", Name, nullable=False),
    Column("assertion", Said, nullable=False),
    Column("column_name", Name),
    Column("enabled", Boolean, nullable=False, default=True),
    Column("last_success", Boolean),
    Column("last_checked", DateTime),
    Column("last_update", DateTime, nullable=False),
    Column("created_by", String(36)),  # the upload that inserted the row: written vs touched
    Column("changed_by", String(36)),  # the last upload that changed it: updated vs unchanged
    key_column("code_key", "code"),
    Index("ux_cat_quality_check_key", "suite_id", "code_key", unique=True),
)

# one row: the time of the last upload. Each upload takes a later one (``_claim_stamp``), so the
# rows of one time are those of one upload, whatever the database clock's resolution (SQLite's
# counts milliseconds) and even if it goes back
clock = Table(
    "cat_clock",
    metadata,
    Column("id", Integer, primary_key=True),  # always 1
    Column("last_stamp", DateTime, nullable=False),
)

run_metrics = Table(
    "cat_run_metrics",
    metadata,
    Column("entity_id", Id, _fk("cat_physical_entities"), primary_key=True),
    Column("runs", Integer, nullable=False, default=0),
    Column("failures", Integer, nullable=False, default=0),
    Column("first_run", DateTime),
    Column("last_run", DateTime),
    Column("last_duration_seconds", Float),
    Column("last_status", String(16)),
    Column("rows_read", BigInteger, nullable=False, default=0),
    Column("rows_written", BigInteger, nullable=False, default=0),
    Column("bytes_read", BigInteger, nullable=False, default=0),
    Column("bytes_written", BigInteger, nullable=False, default=0),
)

# an earlier upload's time, per table, and the latest upload that found that table's rows of that
# time to be exactly what it describes and wrote none of them (``confirm``): those rows' last
# update is that upload's time, for every reader that compares it. Also a time an edited upload set
# rows aside with, and the time they read as (``partial``)
confirmations = Table(
    "cat_confirmations",
    metadata,
    Column("stamp", DateTime, primary_key=True),
    Column("of_table", String(64), primary_key=True),
    Column("confirmed", DateTime, nullable=False),
)

# per definition, the digests its last upload computed (``changes.Contents``) and what names
# them (``memo.memo_key``): the graph's lineage, its placement and the definition's job Systems.
# An upload of the same lineage (an unchanged snapshot) takes them instead of hashing it again
content_memo = Table(
    "cat_content_memo",
    metadata,
    Column("definition", String(200), primary_key=True),
    Column("memo_key", String(64), nullable=False),
    Column("contents", LargeBinary, nullable=False),  # zlib of the digests' JSON
)

# the unique constraints over the names themselves an earlier version made (``schema.prepare``
# drops them where it can: ``name_keys.drop_constraints``)
RETIRED_CONSTRAINTS = {
    systems.name: ("cat_systems_name_key",),
    entities.name: ("ux_cat_entity_identity",),
    fields.name: ("ux_cat_field_identity",),
    routines.name: ("ux_cat_routine_identity",),
    data_flows.name: ("ux_cat_flow_identity",),
    field_flows.name: ("ux_cat_field_flow_identity",),
    quality_suites.name: ("cat_quality_suites_code_key",),
    quality_checks.name: ("ux_cat_quality_check_identity",),
}
