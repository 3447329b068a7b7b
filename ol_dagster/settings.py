"""The settings file: which catalogs exist and which sync definitions feed them.

One YAML file (``ol_dagster.yaml`` at the project root, or the path in ``OL_DAGSTER_SETTINGS``)
describes the whole code location. User-facing keys use the names of the product seeds
(``snapshotMode``, ``allowedJobNamespaces``, ``maxRemovalsPerRun``...). Every model forbids unknown
keys, so a typo fails at load with the key's path instead of silently falling back to a default;
a key written twice fails too (YAML would keep the last one), with its lines. Every error is one
line: ``ol-dagster`` prints it as its only line and exits 2.

The file's parts are read by models that live beside what they configure: a sync definition
(``sync_definition``), each catalog kind's keys (``catalog/<kind>/settings.py``, chosen by the
``kind`` key through ``catalog.registry``), the Kafka intake (``kafka.settings``) and the run
lineage (``run_lineage_settings``); what they share is ``settings_base``. This module puts them
together and checks what only the whole file can (names, tokens, one owner per namespace).

Secrets are never literal: a token is ``{env: NAME}`` and is only resolved when something needs it
(the receiver at start, a catalog client when it connects), so loading the definitions in the
Dagster UI never requires the receiver's tokens.
"""

from __future__ import annotations

import difflib
import importlib
import os
from pathlib import Path
from typing import Annotated, Any, get_args

import yaml
from pydantic import BaseModel, Field, PlainValidator, ValidationError, model_validator

from ol_dagster.catalog import registry
from ol_dagster.catalog.kind import Opening
from ol_dagster.catalog.protocol import Catalog
from ol_dagster.catalog.settings import CatalogSettings
from ol_dagster.kafka.settings import KafkaSettings
from ol_dagster.namespaces import common_namespace
from ol_dagster.openlineage.envelope import namespace_allowed
from ol_dagster.settings_base import EnvSecret, SettingsError, StrictModel, anchor_sqlite
from ol_dagster.settings_cache import FileVersionCache
from ol_dagster.sync_definition import (
    DAGSTER_NAME,
    AssetGraphSettings,
    CleanupMode,
    CleanupSettings,
    DatasetSystemRule,
    JobSystemRule,
    Limits,
    LineageReplacement,
    LogStoreSettings,
    OutputOptions,
    ReceiverSettings,
    SnapshotMode,
    SyncDefinition,
)

# the parts of the file, read where they are defined, also found here by the file's name
__all__ = [
    "DAGSTER_NAME",
    "AssetGraphSettings",
    "CatalogSettings",
    "CleanupMode",
    "CleanupSettings",
    "DatasetSystemRule",
    "EnvSecret",
    "JobSystemRule",
    "LineageReplacement",
    "Limits",
    "LogStoreSettings",
    "OutputOptions",
    "ReceiverLimits",
    "ReceiverSettings",
    "RetentionSettings",
    "Settings",
    "SettingsError",
    "SnapshotMode",
    "StoreSettings",
    "SyncDefinition",
    "load_settings",
    "parse_catalog",
    "parse_settings",
    "receiver_tokens",
    "settings_path",
]

SETTINGS_ENV = "OL_DAGSTER_SETTINGS"
DEFAULT_SETTINGS_FILE = "ol_dagster.yaml"
DEFAULT_STORE_URL = "sqlite:///.ol_dagster/store.db"


class StoreSettings(StrictModel):
    url: str = DEFAULT_STORE_URL


# a catalog's keys, read with the model of its ``kind`` (``catalog.registry``)
Catalog_ = Annotated[CatalogSettings, PlainValidator(registry.read_catalog)]


def parse_catalog(data: object, name: str = "main") -> CatalogSettings:
    """One catalog's settings as they would be read under ``catalogs.<name>`` (tests and
    benchmarks build a backend's settings with it)."""
    try:
        return registry.read_catalog(data)
    except ValidationError as exc:
        raise SettingsError(_format_errors(exc, f"catalog {name!r}", ("catalogs", name))) from None


def _default_catalogs() -> dict[str, CatalogSettings]:
    return {"main": registry.read_catalog({})}


class RetentionSettings(StrictModel):
    """How long synced batches (their events and their Dagster partitions) are kept."""

    keepDays: Annotated[int, Field(ge=1)] | None = None  # None: kept forever


class ReceiverLimits(StrictModel):
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
    largePostEvents: Annotated[int, Field(ge=1)] = 10_000  # and a batch of this many events
    maxConcurrentLargePosts: Annotated[int, Field(ge=1)] = 1  # parsed at once: 503 beyond
    retryAfterSeconds: Annotated[int, Field(ge=1)] = 5  # the Retry-After of every 503 above
    backlog: Annotated[int, Field(ge=1)] = 2048  # connections the kernel queues before accept
    # one client address (a producer, or whoever holds sockets open)
    maxConnectionsPerClient: Annotated[int, Field(ge=1)] = 100  # 503 and closed beyond
    maxConcurrentRequestsPerClient: Annotated[int, Field(ge=1)] = 50  # 503 beyond
    minBodyBytesPerSecond: Annotated[int, Field(ge=0)] = 10_000  # a slower body is closed; 0: off
    sendTimeoutSeconds: Annotated[float, Field(gt=0)] = 30  # an answer left unread is dropped
    maxFailedEventsListed: Annotated[int, Field(ge=1)] = 100  # per answer; the rest counted
    # the same refusal from one address: logged once, then counted in a line per this; 0: each
    refusalLogSeconds: Annotated[float, Field(ge=0)] = 10


class Settings(StrictModel):
    # One switch for PostgreSQL: the event store and every embedded catalog that names no URL of
    # its own go to this database (their tables do not clash).
    databaseUrl: str | None = None
    store: StoreSettings = StoreSettings()
    # modules that register catalog kinds of one's own (``catalog.registry.register``), imported
    # before ``catalogs`` is read
    catalogKinds: list[Annotated[str, Field(min_length=1)]] = []
    catalogs: dict[str, Catalog_] = Field(default_factory=_default_catalogs)
    definitions: list[SyncDefinition] = []
    analysisWindowDays: Annotated[int, Field(ge=1)] = 30
    retention: RetentionSettings = RetentionSettings()
    receiver: ReceiverLimits = ReceiverLimits()
    kafka: KafkaSettings | None = None  # ``ol-dagster consume`` (ol_dagster/kafka/)

    @model_validator(mode="before")
    @classmethod
    def _register_kinds(cls, data: Any) -> Any:
        modules = data.get("catalogKinds") if isinstance(data, dict) else None
        for i, module in enumerate(modules if isinstance(modules, list) else []):
            if not isinstance(module, str) or not module:
                continue  # the field's own validation says why
            try:
                importlib.import_module(module)
            except Exception as exc:  # noqa: BLE001 - any failure: the key that named it
                raise ValueError(
                    f"catalogKinds.{i}: module {module!r} cannot be imported "
                    f"({type(exc).__name__}: {exc})"
                ) from None
        return data

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
        catalogs = {k: c.on_database(self.databaseUrl) for k, c in self.catalogs.items()}
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

    def open_catalog(self, name: str, *, definition: str | None = None) -> Catalog:
        """The backend of catalog ``name``, opened by its kind; ``definition`` scopes what an
        HTTP catalog's sync ledger reads."""
        try:
            cfg = self.catalogs[name]
        except KeyError:
            raise SettingsError(f"no catalog named {name!r} in 'catalogs'") from None
        return registry.open_catalog(cfg, Opening(name, self.store.url, definition or ""))

    def definition(self, name: str) -> SyncDefinition:
        for d in self.definitions:
            if d.name == name:
                return d
        known = ", ".join(d.name for d in self.definitions) or "none"
        raise SettingsError(f"no definition named {name!r} (known: {known})")


def _same_catalogs(catalogs: dict[str, CatalogSettings]) -> set[tuple[str, str]]:
    """Pairs of catalog keys that name one catalog: the same key, or the same kind at the same
    place (URL, and tenant for Blindata) once ``databaseUrl`` is applied."""
    place = {key: c.place() for key, c in catalogs.items()}
    return {(k1, k2) for k1 in catalogs for k2 in catalogs if place[k1] == place[k2]}


def _common_catalog(b: SyncDefinition, a: SyncDefinition, same: set[tuple[str, str]]) -> str | None:
    """The catalog both definitions feed, as the message names it, or None."""
    for kb in b.catalog_keys:
        for ka in a.catalog_keys:
            if (kb, ka) in same:
                return repr(kb) if ka == kb else f"{kb!r} ({a.name} names it {ka!r})"
    return None


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


# the shortest receiver token ``serve`` takes
MIN_TOKEN_LENGTH = 16


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
            continue
        if len(tokens[d.name]) < MIN_TOKEN_LENGTH:  # a short token is guessed by trying
            problems.append(
                f"definition {d.name}: the receiver token in {d.receiver.token.env} is shorter "
                f"than {MIN_TOKEN_LENGTH} characters; use a random one, e.g. "
                "python3 -c 'import secrets; print(secrets.token_urlsafe(24))'"
            )
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
        if len(loc) >= 3 and loc[0] == "catalogs" and loc[2] in registry.kind_names():
            kind, loc = loc[2], (*loc[:2], *loc[3:])
        path = ".".join(str(p) for p in loc) or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = (
                f"unknown key for a{'n' if kind[0] in 'aeiou' else ''} {kind} catalog"
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
            msg = registry.unknown_kind(given)
        elif err["type"] == "value_error":
            msg = msg.removeprefix("Value error, ")
            if not loc:  # a check across keys: its message names them
                parts.append(msg)
                continue
        parts.append(f"{path}: {msg}")
    return f"invalid settings in {source}: " + "; ".join(parts)


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
            "store": StoreSettings(url=anchor_sqlite(settings.store.url, base)),
            "catalogs": {k: c.anchored(base) for k, c in settings.catalogs.items()},
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
