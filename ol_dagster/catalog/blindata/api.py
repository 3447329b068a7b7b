"""Every Blindata REST path, header and inferred field name ol-dagster uses, in one place.

Each entry says where it comes from:

* ``[C] confirmed``: public sources show it (a Java client, a Python quality loader, the help
  pages). See ``shared/design/catalog-apis-blindata.md`` §1 (endpoints found).
* ``[I] inferred``: no public source shows it. It follows the "recommended minimal contract" of the
  notes (§3): Blindata's conventions (``/api/v1``, the ``*`` action segment, wrapper in and wrapper
  with counts out, 201/200/409/400) applied to what the connector needs. If a real server names
  something differently, change it here; nothing else in the client spells a path.

Every ``[I]`` response field is read as optional, and unknown fields are ignored, except in the
answers of the cleanup calls: those must confirm what was asked (``answers``), or the cleanup stops.
"""

from __future__ import annotations

# -- headers (notes §1.0, "Tenant" and "Auth option A/B") ------------------------------------------
HEADER_TENANT = "X-BD-Tenant"  # [C] confirmed, §1.0 Tenant: sent on every call
HEADER_USER = "X-BD-User"  # [C] confirmed, §1.0 Auth option A (API key)
HEADER_API_KEY = "X-BD-ApiKey"  # [C] confirmed, §1.0 Auth option A (API key)
HEADER_AUTHORIZATION = "Authorization"  # [C] confirmed, §1.0 Auth options B/C ("Bearer <token>")

# -- paging (notes §1.0 "Pagination") -------------------------------------------------------------
PAGE_PARAM = "page"  # [C] confirmed, §1.0: 0-based
SIZE_PARAM = "size"  # [C] confirmed, §1.0
PAGE_SIZE = 1000  # [I] §3 "Common to every call": the fake caps size at 1000

# -- clock (notes §2 "Clock", §3 "Clock") -------------------------------------------------------
# [I] §3 Clock: no clock endpoint is documented; the server's time is the standard HTTP ``Date``
# header of this cheap authenticated call (the path itself is [C], §1.1 Search).
CLOCK_PATH = "/api/v1/systems"
CLOCK_PARAMS = {"size": 1}

# -- Systems (notes §1.1, §3 "Systems") -----------------------------------------------------------
SYSTEMS = "/api/v1/systems"  # [C] confirmed, §1.1 Search: GET ?name= (page); POST (history)
SYSTEM = "/api/v1/systems/{uuid}"  # [C] confirmed from history, §1.1 Create/read/update/delete: PUT
SYSTEM_SUBTYPE_JOB = "JOB"  # [C] confirmed from history, §1.1 System fields (SystemSubtype)
# [I] inferred, §3 "Cleanup actions": per-System cleanup at schema level, with a server dry run
SYSTEM_CLEANUP = "/api/v1/systems/{uuid}/cleanup"

# -- physical entities and fields (notes §1.2, §1.3, §3) ------------------------------------------
PHYSICAL_ENTITIES = "/api/v1/physical_entities"  # [C] GET search, §1.2; POST is [I], §3
PHYSICAL_ENTITY = (
    "/api/v1/physical_entities/{uuid}"  # [I] inferred, §3 Physical entities: PUT/DELETE
)
PHYSICAL_FIELDS = "/api/v1/physical_fields"  # [C] GET search, §1.3; POST is [I], §3
PHYSICAL_FIELD = "/api/v1/physical_fields/{uuid}"  # [I] inferred, §3 Physical fields: PUT/DELETE
JOB_TABLE_TYPE = (
    "JOB"  # [I] inferred: ``tableType`` is [C] (§1.2, TABLE/VIEW); JOB marks job entities
)

# -- system routines (notes §2 "Routines", §3 "System routines [I]") ------------------------------
SYSTEM_ROUTINES = "/api/v1/system_routines"  # [I] inferred, §3 System routines: GET/POST
SYSTEM_ROUTINE = "/api/v1/system_routines/{uuid}"  # [I] inferred, §3 System routines: PUT/DELETE
ROUTINE_TYPE = "PROCEDURE"  # [C] value in HELP (§2 Routines: PROCEDURE|FUNCTION), safest of §3's

# -- data flows (notes §2 "Data flows", §3 "Data flows [I]") --------------------------------------
DATA_FLOWS = "/api/v1/dataflows"  # [I] inferred, §3 Data flows: GET ?scope=&scopePrefix=, POST
# [I] how ``scopePrefix`` matches (literally? with case? ``_``/``%`` as wildcards?) is not
# documented: it only narrows reads; the flows cleanup names exact ``scopes`` (``cleanup.py``)
DATA_FLOW = "/api/v1/dataflows/{uuid}"  # [I] inferred, §3 Data flows: PUT/DELETE
DATA_FLOWS_CLEANUP = "/api/v1/dataflows/*/cleanup"  # [I] inferred, §3 Cleanup actions

# -- cleanup bodies and answers (notes §3 "Cleanup actions") --------------------------------------
CLEANUP_LEVEL_SCHEMA = "SCHEMA"  # [I] inferred, §3 Cleanup actions
CLEANUP_LEVEL_SYSTEM = "SYSTEM"  # [I] inferred: the whole System (no ``schemas``)
RESOURCE_PHYSICAL_ENTITY = "PHYSICAL_ENTITY"  # [C] value of BDResourceType, §2 Routines
RESOURCE_PHYSICAL_FIELD = "PHYSICAL_FIELD"  # [C] value of BDResourceType, §2 Routines
RESOURCE_SYSTEM_ROUTINE = "SYSTEM_ROUTINE"  # [C] value of BDResourceType, §2 Routines
# [I] inferred: keys of a cleanup answer's ``results`` for what went with the requested types
# (an entity's fields, the flows touching removed entities, a routine's statements)
RESOURCE_DATA_FLOW = "DATA_FLOW"
RESOURCE_STATEMENT = "STATEMENT"
JOB_SYSTEM_RESOURCES = [RESOURCE_PHYSICAL_ENTITY, RESOURCE_SYSTEM_ROUTINE]  # [I] §3 Cleanup actions
# [I] inferred, §3 "Dataset-system cleanup uses the same call with PHYSICAL_ENTITY"; PHYSICAL_FIELD
# asks, in the same call, for the fields a re-sent field list no longer has: fields last updated
# before the cutoff, of kept entities that had other fields updated after it.
DATASET_SYSTEM_RESOURCES = [RESOURCE_PHYSICAL_ENTITY, RESOURCE_PHYSICAL_FIELD]

# -- data quality (notes §1.5, §3 "Quality") ------------------------------------------------------
QUALITY_SUITES = "/api/v1/data-quality/suites"  # [C] confirmed, §1.5 Suites: GET (page)
QUALITY_CHECKS = "/api/v1/data-quality/checks"  # [C] confirmed, §1.5 Checks: GET (page)
QUALITY_CHECK = "/api/v1/data-quality/checks/{uuid}"  # [C] confirmed, §1.5 Checks: GET/PUT
# [C] confirmed, §1.5 Bulk import: ``?cleanup=true`` disables (never deletes) the suite's checks
# missing from the payload
QUALITY_IMPORT = "/api/v1/data-quality/suites/*/import-objects"
QUALITY_SUITE_FILTER = "qualitySuiteUuid"  # [I] inferred filter of GET checks (also checked here)

# -- the calls above whose path or method is [I], as the client makes them -------------------------
# ``ol-dagster check`` asks a real server about each one before the first sync (GETs directly,
# cleanups as dry runs, writes by OPTIONS): a call listed here that the server does not have is
# reported before it can fail an upload or a cleanup. Keep it in step with the paths above.
INFERRED_CALLS: list[tuple[str, str]] = [
    ("POST", SYSTEM_CLEANUP),
    ("POST", PHYSICAL_ENTITIES),
    ("PUT", PHYSICAL_ENTITY),
    ("DELETE", PHYSICAL_ENTITY),
    ("POST", PHYSICAL_FIELDS),
    ("PUT", PHYSICAL_FIELD),
    ("GET", SYSTEM_ROUTINES),
    ("POST", SYSTEM_ROUTINES),
    ("PUT", SYSTEM_ROUTINE),
    ("DELETE", SYSTEM_ROUTINE),
    ("GET", DATA_FLOWS),
    ("POST", DATA_FLOWS),
    ("PUT", DATA_FLOW),
    ("DELETE", DATA_FLOW),
    ("POST", DATA_FLOWS_CLEANUP),
]

# -- additionalProperties names ol-dagster writes (notes §1.1: the mechanism is [C], names are ours)
PROP_OWNER = "openLineageOwner"
PROP_JOB_SYSTEM = "openLineageJobSystem"  # may repeat: one entry per definition using the System
PROP_CLEANUP_MODE = "cleanupMode"
PROP_CLEANUP_DAYS = "cleanupDays"
PROP_NAMESPACE = "openLineageNamespace"  # an entity's OpenLineage identity, for lineage reads
PROP_NAME = "openLineageName"
PROP_FROM = "openLineageFrom"  # a flow's ends as lineage node ids (dataset:<ns>:<name>, job:...)
PROP_TO = "openLineageTo"
PROP_KIND = "openLineageFlowKind"  # data | orchestration | field
PROP_DIALECT = "dialect"
