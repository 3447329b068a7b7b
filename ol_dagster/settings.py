"""The settings file: which catalogs exist and which sync definitions feed them.

One YAML file (``ol_dagster.yaml`` at the project root, or the path in ``OL_DAGSTER_SETTINGS``)
describes the whole code location. User-facing keys use the names of the product seeds
(``snapshotMode``, ``allowedJobNamespaces``, ``maxRemovalsPerRun``...). Every model forbids unknown
keys, so a typo fails at load with the key's path instead of silently falling back to a default;
a key written twice fails too (YAML would keep the last one), with its lines. Every error is one
line: ``ol-dagster`` prints it as its only line and exits 2.

Secrets are never literal: a token is ``{env: NAME}`` and is only resolved when something needs it
(the receiver at start, a catalog client when it connects), so loading the definitions in the
Dagster UI never requires the receiver's tokens.
"""

from __future__ import annotations

import difflib
import os
import re
import uuid
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal, TypeAlias, get_args

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from ol_dagster.kafka.settings import KafkaSettings
from ol_dagster.namespaces import common_namespace, is_literal
from ol_dagster.openlineage.envelope import namespace_allowed
from ol_dagster.run_lineage_settings import RunLineageSettings
from ol_dagster.settings_cache import FileVersionCache

SETTINGS_ENV = "OL_DAGSTER_SETTINGS"
DEFAULT_SETTINGS_FILE = "ol_dagster.yaml"
DEFAULT_STORE_URL = "sqlite:///.ol_dagster/store.db"
DEFAULT_CATALOG_URL = "sqlite:///.ol_dagster/catalog.db"

# Sync definition names become Dagster asset-key prefixes, group names and partition-set names.
_DAGSTER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SettingsError(ValueError):
    """The settings file is unreadable or invalid; the message names the offending key."""


def _secret_problem(value: str) -> str | None:
    """Why a secret's value can never work, without showing it. A bearer token or an API key is
    one header word: a blank or a control character (the trailing newline of ``$(cat file)`` or
    of a Kubernetes secret made with ``echo``) makes every request fail, or match nothing."""
    if value != value.strip():
        return "has blanks or a line break around its value (a header cannot carry them)"
    if any(c.isspace() or not c.isprintable() for c in value):
        return "holds a blank or a control character (a header cannot carry them)"
    return None


class SnapshotMode(StrEnum):
    BATCH_SNAPSHOT = "BATCH_SNAPSHOT"
    ADDITIVE = "ADDITIVE"


class LineageReplacement(StrEnum):
    NONE = "NONE"
    JOB = "JOB"


class CleanupMode(StrEnum):
    CUTOFF = "CUTOFF"
    DAYS = "DAYS"
    NONE = "NONE"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class EnvSecret(_Model):
    """A secret read from the environment when it is used, never stored in the file."""

    env: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]

    def resolve(self) -> str:
        value = os.environ.get(self.env)
        if not value:
            raise SettingsError(f"environment variable {self.env} is not set (it holds a secret)")
        if problem := _secret_problem(value):
            raise SettingsError(f"environment variable {self.env} {problem}")
        return value

    def __repr__(self) -> str:  # never show a value, only where it comes from
        return f"EnvSecret(env={self.env!r})"


class StoreSettings(_Model):
    url: str = DEFAULT_STORE_URL


# -- catalogs: one model per kind, chosen by ``kind`` --------------------------------------------
# Each kind accepts only the keys its backend reads, so ``tenant`` on a Marquez catalog fails at
# load (``catalogs.main.tenant: unknown key for a marquez catalog``) instead of being ignored.


class EmbeddedCatalogSettings(_Model):
    """The embedded catalog: a database (its own, or ``databaseUrl``'s)."""

    kind: Literal["embedded"] = "embedded"
    url: str = DEFAULT_CATALOG_URL
    user: str = "ol-dagster"  # the cleanup user: the catalog checks its SYSTEMS_ADMIN permission

    def secrets(self) -> list[EnvSecret]:
        return []


class HttpCatalogSettings(_Model):
    """What every catalog behind an HTTP API has: its base URL, and how long and how often a
    request is tried (``catalog.http``)."""

    url: str
    # bearer token: an OpenMetadata bot's JWT, a Blindata token, a proxy's in front of Marquez
    token: EnvSecret | None = None
    timeoutSeconds: Annotated[float, Field(gt=0)] = 30.0
    maxRetries: Annotated[int, Field(ge=0)] = 4

    def secrets(self) -> list[EnvSecret]:
        """Where this catalog's secrets come from (errors and logs hide their values)."""
        return [self.token] if self.token is not None else []

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"needs an http(s) URL, not {value!r}")
        return value


class OpenMetadataCatalogSettings(HttpCatalogSettings):
    """OpenMetadata: events through its OpenLineage endpoint, edges read back and deleted."""

    kind: Literal["openmetadata"] = "openmetadata"
    chunkSize: Annotated[int, Field(ge=1)] = 100  # events per batch request
    serviceMapping: dict[str, str] = {}  # OL namespace -> OM database service (for FQNs)
    # the run event types its server writes edges for (its own ``eventTypeFilter`` setting,
    # COMPLETE by default): an edge only other types carry is never there to delete
    eventTypeFilter: list[str] = ["COMPLETE"]


class MarquezCatalogSettings(HttpCatalogSettings):
    """Marquez: events through its lineage endpoint, jobs and datasets deleted by name."""

    kind: Literal["marquez"] = "marquez"
    concurrency: Annotated[int, Field(ge=1)] = 8  # parallel posts (one lane per job)


class BlindataCatalogSettings(HttpCatalogSettings):
    """Blindata: its REST API, one tenant, a bearer token or an API key with its user."""

    kind: Literal["blindata"] = "blindata"
    tenant: Annotated[str, Field(min_length=1)]  # the X-BD-Tenant header
    apiKey: EnvSecret | None = None  # instead of ``token``: an API key, sent with ``user``
    user: str = "ol-dagster"  # the API key's user
    concurrency: Annotated[int, Field(ge=1)] = 8  # parallel writes

    def secrets(self) -> list[EnvSecret]:
        return [*super().secrets(), *([self.apiKey] if self.apiKey is not None else [])]

    @model_validator(mode="after")
    def _one_credential(self) -> BlindataCatalogSettings:
        if (self.token is None) == (self.apiKey is None):
            raise ValueError(
                "a blindata catalog needs either 'token' (a bearer token) or 'apiKey' (with "
                "'user'), each as {env: NAME}" + (", not both" if self.token is not None else "")
            )
        return self


CATALOG_KINDS = ("embedded", "openmetadata", "marquez", "blindata")


def _catalog_kind(value: object) -> str | None:
    """The model a catalog's keys are read with: its ``kind``, ``embedded`` when it has none."""
    if isinstance(value, dict):
        kind = value.get("kind", "embedded")
        return kind if kind in CATALOG_KINDS else None
    # a model already built, or not a mapping at all (the embedded model says it wants one)
    return getattr(value, "kind", "embedded")


CatalogSettings: TypeAlias = Annotated[
    Annotated[EmbeddedCatalogSettings, Tag("embedded")]
    | Annotated[OpenMetadataCatalogSettings, Tag("openmetadata")]
    | Annotated[MarquezCatalogSettings, Tag("marquez")]
    | Annotated[BlindataCatalogSettings, Tag("blindata")],
    Discriminator(
        _catalog_kind,
        custom_error_type="catalog_kind",
        custom_error_message="'kind' must be one of " + ", ".join(CATALOG_KINDS),
    ),
]
_CATALOG = TypeAdapter(CatalogSettings)


def parse_catalog(data: object, name: str = "main") -> CatalogSettings:
    """One catalog's settings as they would be read under ``catalogs.<name>`` (tests and
    benchmarks build a backend's settings with it)."""
    try:
        return _CATALOG.validate_python(data)
    except ValidationError as exc:
        raise SettingsError(_format_errors(exc, f"catalog {name!r}", ("catalogs", name))) from None


class JobSystemRule(_Model):
    namespaces: Annotated[str, Field(min_length=1)]
    system: Annotated[str, Field(min_length=1)]


class DatasetSystemRule(_Model):
    namespace: Annotated[str, Field(min_length=1)]
    system: Annotated[str, Field(min_length=1)]
    cleanupMode: CleanupMode = CleanupMode.NONE
    cleanupDays: Annotated[int, Field(ge=1)] = 30


class CleanupSettings(_Model):
    enabled: bool = True
    maxRemovalsPerRun: Annotated[int, Field(ge=0)] = 500
    staleJobDays: Annotated[int, Field(ge=1)] = 30
    # beyond the seed: a batch may not remove more than this share of the jobs the definition
    # holds (a partial "snapshot" is an accident to every user, whatever its absolute size)
    maxRemovalShare: Annotated[float, Field(ge=0, le=1)] = 0.5


class Limits(_Model):
    maxEventsPerRun: Annotated[int, Field(ge=1)] = 10_000
    batchWindowSeconds: Annotated[float, Field(ge=0)] = 60
    maxBodyBytes: Annotated[int, Field(ge=1024)] = 64 * 1024 * 1024
    maxEventsPerBatch: Annotated[int, Field(ge=1)] = 100_000
    # per namespace or name of a job or dataset: a catalog key, never a document
    maxNameLength: Annotated[int, Field(ge=1)] = 2048


class OutputOptions(_Model):
    dryRun: bool = False


class LogStoreSettings(_Model):
    """Egeria's file-based log store: every accepted event also kept as one JSON file."""

    folder: Annotated[str, Field(min_length=1)]


class ReceiverSettings(_Model):
    token: EnvSecret


class AssetGraphSettings(_Model):
    """How much of the synced lineage Dagster's asset graph shows. Every process that loads the code
    location (the code server at each reload, the webserver, the daemon) builds one asset per
    shown job and dataset, about 0.5 ms and 18 KB each: the newest ``maxJobs`` jobs by their last
    run are shown, with the datasets they read and write; ``ol-dagster lineage`` reads them all."""

    maxJobs: Annotated[int, Field(ge=0)] = 10_000


class SyncDefinition(_Model):
    """One sync definition: a producer (or repository of producers) and the catalog it feeds."""

    name: str
    uuid: uuid.UUID
    # the catalog it feeds, or ``catalogs``: several, each with its own upload, cutoff, cleanup
    # and report (the first is the primary: the asset graph's lineage is read from it). Read
    # both through ``catalog_keys``.
    catalog: str | None = None
    catalogs: list[str] | None = None
    snapshotMode: SnapshotMode = SnapshotMode.ADDITIVE
    lineageReplacement: LineageReplacement = LineageReplacement.NONE
    allowedJobNamespaces: Annotated[
        list[Annotated[str, Field(min_length=1)]], Field(min_length=1)
    ] = ["*"]
    # namespaces this definition writes beside others on its catalogs: nobody runs a cutoff
    # over them (days only); every other namespace has one owner per catalog (``Settings``)
    sharedJobNamespaces: list[Annotated[str, Field(min_length=1)]] = []
    openLineageSystem: str | None = None
    jobSystems: list[JobSystemRule] = []
    datasetSystems: list[DatasetSystemRule] = []
    cleanup: CleanupSettings = CleanupSettings()
    limits: Limits = Limits()
    outputOptions: OutputOptions = OutputOptions()
    receiver: ReceiverSettings
    logStore: LogStoreSettings | None = None
    assetGraph: AssetGraphSettings = AssetGraphSettings()
    openLineage: RunLineageSettings | None = None  # its own runs as OpenLineage events

    @field_validator("name")
    @classmethod
    def _dagster_name(cls, value: str) -> str:
        if not _DAGSTER_NAME.match(value):
            raise ValueError(
                "must start with a letter or '_' and hold only letters, digits and '_' "
                "(it becomes a Dagster asset-key prefix and group name)"
            )
        return value

    @model_validator(mode="after")
    def _catalog_or_catalogs(self) -> SyncDefinition:
        if (self.catalog is None) == (self.catalogs is None):
            raise ValueError("give exactly one of 'catalog' (one key) and 'catalogs' (a list)")
        keys = self.catalogs or []
        if self.catalogs is not None and not keys:
            raise ValueError("catalogs: names no catalog (give at least one key)")
        for i, key in enumerate(keys):
            if not _DAGSTER_NAME.match(key):
                raise ValueError(
                    f"catalogs.{i}: {key!r} must start with a letter or '_' and hold only "
                    "letters, digits and '_' (it becomes part of Dagster asset keys)"
                )
            if key in keys[:i]:
                raise ValueError(f"catalogs.{i}: {key!r} is listed twice")
        return self

    @property
    def catalog_keys(self) -> tuple[str, ...]:
        """The catalogs this definition feeds, the primary first (``catalog`` or ``catalogs``)."""
        return (self.catalog,) if self.catalog is not None else tuple(self.catalogs or ())

    @property
    def namespace_patterns(self) -> tuple[str, ...]:
        """Every job namespace pattern this definition admits: its own, then the shared ones."""
        return (*self.allowedJobNamespaces, *self.sharedJobNamespaces)

    def is_shared(self, namespace: str) -> bool:
        """Whether other definitions may write this namespace too (a shared pattern admits it):
        then no cutoff runs over it, only the day-based cleanup."""
        return namespace_allowed(namespace, self.sharedJobNamespaces)

    @property
    def sole_namespace(self) -> bool:
        """The definition writes exactly one namespace, alone: one allowed pattern without a glob
        character, nothing shared. Only then may it keep CUTOFF on a dataset System."""
        return (
            len(self.allowedJobNamespaces) == 1
            and is_literal(self.allowedJobNamespaces[0])
            and not self.sharedJobNamespaces
        )

    @property
    def job_system(self) -> str:
        """The default job System: ``openLineageSystem``, or one derived from the name."""
        return self.openLineageSystem or f"{self.name}_jobs"


class RetentionSettings(_Model):
    """How long synced batches (their events and their Dagster partitions) are kept."""

    keepDays: Annotated[int, Field(ge=1)] | None = None  # None: kept forever


class ReceiverLimits(_Model):
    """The receiver process's limits, applied before any token is read (issue 15): what one
    client, authenticated or not, can hold of its memory, connections and time."""

    maxHeaderBytes: Annotated[int, Field(ge=1024)] = 16 * 1024  # request line + headers: 431
    maxHeaderCount: Annotated[int, Field(ge=8)] = 100  # header fields: 431 beyond
    headerTimeoutSeconds: Annotated[float, Field(gt=0)] = 10  # connect (or last answer) to headers
    bodyTimeoutSeconds: Annotated[float, Field(gt=0)] = 120  # headers to the body's last byte
    keepAliveSeconds: Annotated[int, Field(ge=1)] = 5  # an idle keep-alive connection is closed
    maxConnections: Annotated[int, Field(ge=1)] = 500  # open at once: 503 and closed beyond
    maxConcurrentRequests: Annotated[int, Field(ge=1)] = 100  # in progress: 503 beyond
    largePostBytes: Annotated[int, Field(ge=1024)] = 1024 * 1024  # a body this big is "large"
    maxConcurrentLargePosts: Annotated[int, Field(ge=1)] = 1  # parsed at once: 503 beyond
    retryAfterSeconds: Annotated[int, Field(ge=1)] = 5  # the Retry-After of every 503 above
    backlog: Annotated[int, Field(ge=1)] = 2048  # connections the kernel queues before accept


class Settings(_Model):
    # One switch for PostgreSQL: the event store and every embedded catalog that names no URL of
    # its own go to this database (their tables do not clash).
    databaseUrl: str | None = None
    store: StoreSettings = StoreSettings()
    catalogs: dict[str, CatalogSettings] = {"main": EmbeddedCatalogSettings()}
    definitions: list[SyncDefinition] = []
    analysisWindowDays: Annotated[int, Field(ge=1)] = 30
    retention: RetentionSettings = RetentionSettings()
    receiver: ReceiverLimits = ReceiverLimits()
    kafka: KafkaSettings | None = None  # ``ol-dagster consume`` (ol_dagster/kafka/)

    @model_validator(mode="after")
    def _kafka_topics(self) -> Settings:
        if self.kafka is not None:
            self.kafka.check_definitions({d.name: d.snapshotMode for d in self.definitions})
        return self

    @model_validator(mode="after")
    def _one_database(self) -> Settings:
        if not self.databaseUrl:
            return self
        if "url" not in self.store.model_fields_set:
            object.__setattr__(self, "store", StoreSettings(url=self.databaseUrl))
        catalogs = {
            k: c.model_copy(update={"url": self.databaseUrl})
            if isinstance(c, EmbeddedCatalogSettings) and "url" not in c.model_fields_set
            else c
            for k, c in self.catalogs.items()
        }
        object.__setattr__(self, "catalogs", catalogs)
        return self

    @model_validator(mode="after")
    def _cross_checks(self) -> Settings:
        seen: dict[str, dict[str, int]] = {"name": {}, "uuid": {}, "receiver.token.env": {}}
        for i, d in enumerate(self.definitions):
            for key, value in (
                ("name", d.name),
                ("uuid", str(d.uuid)),
                ("receiver.token.env", d.receiver.token.env),
            ):
                if value in seen[key]:
                    first = seen[key][value]
                    raise ValueError(
                        f"definitions.{i}.{key}: {value!r} is already used by definitions.{first}; "
                        f"each definition needs its own {key.split('.')[0]}"
                    )
                seen[key][value] = i
            for j, key in enumerate(d.catalog_keys):
                if key not in self.catalogs:
                    known = ", ".join(sorted(self.catalogs)) or "none"
                    where = "catalog" if d.catalog is not None else f"catalogs.{j}"
                    raise ValueError(
                        f"definitions.{i}.{where}: {key!r} is not a key of 'catalogs' "
                        f"(known: {known})"
                    )
        return self

    @model_validator(mode="after")
    def _one_owner_per_namespace(self) -> Settings:
        """Two definitions on one catalog never both own a namespace: one's snapshot would
        remove the other's lineage. A namespace both write is declared shared by both (in
        ``sharedJobNamespaces``, in neither's ``allowedJobNamespaces``): days only there."""
        same = _same_catalogs(self.catalogs)
        for i, a in enumerate(self.definitions):
            for b in self.definitions[:i]:
                catalog = _common_catalog(b, a, same)
                if catalog is None:
                    continue
                if overlap := _overlap(a, b) or _overlap(b, a):
                    raise ValueError(
                        f"definitions {b.name} and {a.name} both feed catalog {catalog} and "
                        f"both admit job namespace {overlap!r} ({b.name} by "
                        f"{_admitting(b, overlap)}, {a.name} by {_admitting(a, overlap)}): one "
                        "owner per namespace per catalog; give them disjoint "
                        "allowedJobNamespaces, or list a namespace both write in the "
                        "sharedJobNamespaces of both (days only there)"
                    )
        return self

    def definition(self, name: str) -> SyncDefinition:
        for d in self.definitions:
            if d.name == name:
                return d
        known = ", ".join(d.name for d in self.definitions) or "none"
        raise SettingsError(f"no definition named {name!r} (known: {known})")


def _same_catalogs(catalogs: dict[str, CatalogSettings]) -> set[tuple[str, str]]:
    """Pairs of catalog keys that name one catalog: the same key, or the same kind at the same
    place (URL, and tenant for Blindata) once ``databaseUrl`` is applied."""
    place = {key: _catalog_place(c) for key, c in catalogs.items()}
    return {(k1, k2) for k1 in catalogs for k2 in catalogs if place[k1] == place[k2]}


def _common_catalog(b: SyncDefinition, a: SyncDefinition, same: set[tuple[str, str]]) -> str | None:
    """The catalog both definitions feed, as the message names it, or None."""
    for kb in b.catalog_keys:
        for ka in a.catalog_keys:
            if (kb, ka) in same:
                return repr(kb) if ka == kb else f"{kb!r} ({a.name} names it {ka!r})"
    return None


def _catalog_place(catalog: CatalogSettings) -> tuple[str, ...]:
    """Where a catalog's objects live, spelled one way: two keys at one place are one catalog."""
    url = catalog.url.rstrip("/")
    scheme, sep, rest = url.partition("://")
    if sep:  # the driver does not change the database: postgresql+psycopg is postgresql
        scheme = scheme.split("+", 1)[0].lower()
        if scheme == "sqlite" and rest.startswith("/") and rest != "/":
            rest = "/" + os.path.normpath(rest[1:])  # ./a.db is a.db, /x//a.db is /x/a.db
        url = f"{scheme}://{rest}"
    tenant = catalog.tenant if isinstance(catalog, BlindataCatalogSettings) else ""
    return (catalog.kind, url, tenant)


def _overlap(a: SyncDefinition, b: SyncDefinition) -> str | None:
    """A namespace ``a`` owns that ``b`` may write too (its own or shared): shared by both is
    fine, owned by either and written by the other is not."""
    return common_namespace(a.allowedJobNamespaces, b.namespace_patterns)


def _admitting(definition: SyncDefinition, namespace: str) -> str:
    """The key and pattern by which a definition admits a namespace, as the message shows it."""
    for key in ("allowedJobNamespaces", "sharedJobNamespaces"):
        for pattern in getattr(definition, key):
            if namespace_allowed(namespace, [pattern]):
                return f"{key} {pattern!r}"
    raise AssertionError(f"{definition.name} does not admit {namespace!r}")


def receiver_tokens(settings: Settings) -> dict[str, str]:
    """Every definition's receiver token (definition name -> token), as the receiver needs them
    at start. Everything wrong is said at once: each missing or malformed variable, and each pair
    of definitions whose tokens are equal (posts would all go to one of them), by the
    definitions' names and variables, never by the value."""
    tokens: dict[str, str] = {}
    problems: list[str] = []
    for d in settings.definitions:
        try:
            tokens[d.name] = d.receiver.token.resolve()
        except SettingsError as exc:
            problems.append(f"definition {d.name}: {exc}")
    by_value: dict[str, str] = {}
    for name, token in tokens.items():
        if token in by_value:
            first = settings.definition(by_value[token])
            problems.append(
                f"definitions {first.name} and {name} have the same receiver token "
                f"({first.receiver.token.env} and {settings.definition(name).receiver.token.env} "
                "hold equal values): each definition needs its own"
            )
        else:
            by_value[token] = name
    if problems:
        raise SettingsError("; ".join(problems))
    return tokens


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models an annotation holds (through Optional, lists, mappings and unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def _close_key(loc: tuple[str | int, ...]) -> str | None:
    """The known key an unknown one (the last of ``loc``) is probably a misspelling of, from the
    keys of the model at that place (a catalog's: its kind's, named in ``loc``)."""
    models: list[type[BaseModel]] = [Settings]
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        if len(models) > 1:  # a union of models: pydantic names the member it read, by kind
            chosen = [
                m for m in models if getattr(m.model_fields.get("kind"), "default", None) == part
            ]
            if chosen:
                models = chosen
                continue
        fields = {n: f for m in models for n, f in m.model_fields.items()}
        fields.update({f.alias: f for m in models for f in m.model_fields.values() if f.alias})
        field = fields.get(part)
        if field is None:  # a mapping's key (a catalog's name): the same models below it
            continue
        models = _models_in(field.annotation)
        if not models:
            return None
    known = {name for m in models for name in m.model_fields}
    known |= {f.alias for m in models for f in m.model_fields.values() if f.alias}
    found = difflib.get_close_matches(str(loc[-1]), sorted(known), n=1, cutoff=0.7)
    return found[0] if found else None


def _format_errors(exc: ValidationError, source: str, prefix: tuple[str | int, ...] = ()) -> str:
    """One line (``ol-dagster`` prints it as its only line), every error in it."""
    parts = []
    for err in exc.errors():
        loc = (*prefix, *err["loc"])
        kind = None
        # pydantic puts the kind whose model read a catalog into the path: say it in the message
        if len(loc) >= 3 and loc[0] == "catalogs" and loc[2] in CATALOG_KINDS:
            kind, loc = loc[2], (*loc[:2], *loc[3:])
        path = ".".join(str(p) for p in loc) or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = (
                f"unknown key for a{'n' if kind == 'embedded' else ''} {kind} catalog"
                if kind
                else "unknown key"
            )
            if guess := _close_key(err["loc"]):
                msg += f" (did you mean {guess!r}?)"
            elif len(loc) == 1 and loc[0] in SyncDefinition.model_fields:
                msg += f" (it is a key of each definition: definitions[].{loc[0]})"
        elif err["type"] == "model_type" and (err.get("ctx") or {}).get("class_name") in (
            "EnvSecret",
            "KafkaSecret",
        ):
            # never the value: it is probably the secret itself
            msg = (
                "a secret is read from the environment, never written in the file: "
                "write {env: NAME} and set the variable NAME"
            )
        elif err["type"] == "catalog_kind":
            given = err["input"].get("kind") if isinstance(err["input"], dict) else None
            msg = f"kind {given!r} is not one of {', '.join(CATALOG_KINDS)}"
        elif err["type"] == "value_error":
            msg = msg.removeprefix("Value error, ")
            if not loc:  # a check across keys: its message names them
                parts.append(msg)
                continue
        parts.append(f"{path}: {msg}")
    return f"invalid settings in {source}: " + "; ".join(parts)


def _anchor_sqlite(url: str, base: Path) -> str:
    """Make a relative SQLite path relative to the settings file, not to the process's cwd."""
    prefix, sep, rest = url.partition(":///")
    if (
        not sep
        or not prefix.startswith("sqlite")
        or rest.startswith("/")
        or rest in ("", ":memory:")
    ):
        return url
    return f"{prefix}:///{(base / rest).resolve()}"


def parse_settings(data: object, source: str = "<settings>", base: Path | None = None) -> Settings:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SettingsError(f"invalid settings in {source}: the file must hold a mapping")
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise SettingsError(_format_errors(exc, source)) from None
    if base is None:
        return settings
    return settings.model_copy(
        update={
            "definitions": [
                d.model_copy(
                    update={
                        "logStore": LogStoreSettings(
                            folder=str((base / d.logStore.folder).resolve())
                        )
                    }
                )
                if d.logStore is not None
                else d
                for d in settings.definitions
            ],
            "store": StoreSettings(url=_anchor_sqlite(settings.store.url, base)),
            "catalogs": {
                k: c.model_copy(update={"url": _anchor_sqlite(c.url, base)})
                if isinstance(c, EmbeddedCatalogSettings)
                else c
                for k, c in settings.catalogs.items()
            },
        }
    )


def settings_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    if explicit:
        return Path(explicit)
    return Path(os.environ.get(SETTINGS_ENV) or DEFAULT_SETTINGS_FILE)


# the parsed settings, by version of the file
SETTINGS_CACHE: FileVersionCache[Settings] = FileVersionCache()


def load_settings(path: str | os.PathLike[str] | None = None) -> Settings:
    """Load and validate the settings file; every error names the key it is about. An unchanged
    file is parsed once (``settings_cache``): the same ``Settings`` object is returned."""
    return SETTINGS_CACHE.get(settings_path(path), _read_settings)


def _read_settings(p: Path) -> Settings:
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SettingsError(
            f"settings file {p} not found (set {SETTINGS_ENV} or pass --settings)"
        ) from None
    except IsADirectoryError:
        raise SettingsError(f"settings file {p} is a directory, not a file") from None
    except OSError as exc:
        raise SettingsError(f"settings file {p} cannot be read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        line = exc.object.count(b"\n", 0, exc.start) + 1
        raise SettingsError(
            f"settings file {p} is not UTF-8: byte 0x{exc.object[exc.start]:02X} on line {line}"
        ) from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except _DuplicateKey as exc:
        raise SettingsError(f"invalid settings in {p}: {exc}") from None
    except yaml.YAMLError as exc:
        reason = " ".join(str(exc).split())
        raise SettingsError(f"invalid settings in {p}: not valid YAML: {reason}") from None
    return parse_settings(data, str(p), base=p.resolve().parent)


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key written twice in one mapping. Plain YAML keeps the last
    one silently: ``maxRemovalsPerRun: 5`` and, further down, ``maxRemovalsPerRun: 50000`` would
    give 50,000. Keys brought in by a merge (``<<: *defaults``) may still be overridden."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:  # type: ignore[override]
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the constructor says why below
                continue
            seen.setdefault(key, line)
            if first is not None:
                raise _DuplicateKey(
                    f"duplicate key {key!r} on line {line} (first on line {first}): YAML "
                    "would silently keep the last one"
                )
        return super().construct_mapping(node, deep=deep)


class _DuplicateKey(yaml.YAMLError):
    """A key written twice in one mapping (its message says which, on which lines)."""
