"""The ``openLineage:`` block of a sync definition: where its own sync runs are reported.

A definition with this block reports each of its sync runs as OpenLineage START / COMPLETE / FAIL
events (``ol_dagster/sync/run_lineage.py``). ``transport`` is an openlineage-python transport
configuration exactly as that client's ``openlineage.yml`` takes it under ``transport:`` (``{type:
http, url: ..., auth: {type: api_key, apiKey: ...}}``, ``{type: kafka, ...}``, ``{type:
console}``, ``{type: file, ...}``): the transport is built by the client's own factory, so every
option it documents works, and none is copied here.

Per definition, not once for the whole file: each definition is its own job, may report to its
own place (a team's Marquez, the receiver's ``observer`` definition), and the definition that
receives these events must not report its own runs to itself (each of its syncs would post a new
batch, synced by the next run, for ever). Several definitions share one block with a YAML anchor.

Secrets are never literal. Any value may be ``{env: NAME}``, resolved from the environment when
an event is sent (never when the settings load: the Dagster UI loads them without the secrets);
a value under a key that names a secret (``apiKey``, ``token``, ``password``, ``sasl.password``,
``clientSecret``...) must be one, and so must every value of ``custom_headers`` (an
``Authorization`` or ``X-Api-Key`` header); no URL may carry a password or a query parameter
named like a credential (``?token=``, ``?api_key=``...). The transport is checked at
load with placeholders in place of the secrets, so a wrong option fails there, with its key.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable, Iterator
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ol_dagster.settings_base import EnvSecret, url_secret_problem

INSTALL_HINT = "pip install 'ol-dagster[openlineage]'"
DEFAULT_NAMESPACE = "ol-dagster"

# a key whose value is a credential (matched on the whole key, case-insensitive): the client's
# ``apiKey``, Kafka's ``sasl.password`` / ``ssl.key.password``, an OAuth ``clientSecret``; not
# ``messageKey`` (a Kafka message key) nor ``ssl.key.location`` (a file's path)
_SECRET_KEY = re.compile(r"(api_?key|token|password|passwd|secret|credentials?)$", re.IGNORECASE)
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# the HTTP transport's extra headers: every value is {env: NAME}
_HEADERS = "custom_headers"
_PLACEHOLDER = "ol-dagster-placeholder"


def openlineage_available() -> bool:
    """Whether openlineage-python (the ``openlineage`` extra) is installed."""
    try:
        return importlib.util.find_spec("openlineage.client") is not None
    except (ImportError, ValueError):  # a parent package that cannot be imported
        return False


def _is_env_ref(value: object) -> bool:
    return isinstance(value, dict) and "env" in value


def _walk(value: Any, path: str = "") -> Iterator[tuple[str, str, Any]]:
    """Every leaf of ``value`` (an ``{env: NAME}`` is one) with its dotted path and its key."""
    if isinstance(value, dict) and not _is_env_ref(value):
        for key, item in value.items():
            yield from _walk(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, f"{path}.{i}" if path else str(i))
    else:
        yield path, path.rsplit(".", 1)[-1], value


def _substitute(
    value: Any, leaf: Callable[[dict[str, Any], bool], str], header: bool = False
) -> Any:
    """``value`` with every ``{env: NAME}`` replaced by ``leaf(ref, header)``; ``header``: the
    reference is a value of ``custom_headers`` (a whole header's value, spaces allowed)."""
    if _is_env_ref(value):
        return leaf(value, header)
    if isinstance(value, dict):
        return {k: _substitute(v, leaf, header or k == _HEADERS) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, leaf, header) for v in value]
    return value


def _env_secret(ref: dict[str, Any]) -> EnvSecret:
    return EnvSecret.model_validate(ref)


class RunLineageSettings(BaseModel):
    """``definitions[].openLineage``: the transport the definition's sync runs are reported with,
    and the namespace of their job and batch datasets."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    transport: dict[str, Any]
    namespace: Annotated[str, Field(min_length=1)] = DEFAULT_NAMESPACE

    @field_validator("transport")
    @classmethod
    def _transport(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not openlineage_available():
            raise ValueError(f"needs the openlineage-python package: {INSTALL_HINT}")
        kind = value.get("type")
        if not isinstance(kind, str) or not kind:
            raise ValueError("'type' is required (http, kafka, console, file...)")
        for path, key, leaf in _walk(value):
            if _is_env_ref(leaf):
                try:
                    _env_secret(leaf)
                except ValidationError as exc:
                    reason = "; ".join(e["msg"] for e in exc.errors())
                    raise ValueError(f"{path}: {{env: NAME}} expected ({reason})") from None
            elif _SECRET_KEY.search(key) and isinstance(leaf, str):
                raise ValueError(f"{path}: a secret is written as {{env: NAME}}, never literally")
            elif _HEADERS in path.split(".")[:-1]:
                # a header's value is a credential more often than not (Authorization, X-Api-Key)
                raise ValueError(
                    f"{path}: a header's value is written as {{env: NAME}}, never literally"
                )
            elif (
                isinstance(leaf, str) and _URL.match(leaf) and (problem := url_secret_problem(leaf))
            ):
                raise ValueError(f"{path}: the URL {problem}")
        _check_transport(value)
        return value

    def transport_config(self) -> dict[str, Any]:
        """The transport configuration with its secrets read from the environment, for the
        client's factory (raises ``SettingsError`` naming the variable that is not set)."""
        return _substitute(
            self.transport, lambda ref, header: _env_secret(ref).resolve(spaces=header)
        )

    def secret_values(self) -> list[str]:
        """The values of the transport's secrets that are set: a message quoting one is scrubbed
        before it is logged or sent (``commands.run_failure.scrub``)."""
        values: list[str] = []
        for _, _, leaf in _walk(self.transport):
            if _is_env_ref(leaf):
                try:
                    values.append(_env_secret(leaf).resolve(spaces=True))
                except ValueError:  # not set: it hides nothing
                    continue
        return values


def _check_transport(value: dict[str, Any]) -> None:
    """The client's own factory reads the configuration (placeholders for the secrets), so an
    unknown type or option fails at load rather than at the first run. The transport itself is
    not created: that would connect (Kafka) or open files."""
    import inspect

    from openlineage.client.transport import get_default_factory
    from openlineage.client.transport.transport import Config, Transport
    from openlineage.client.utils import import_from_string

    kind = value["type"]
    registered = get_default_factory().transports
    if kind not in registered and "." not in kind:
        known = ", ".join(sorted(registered))
        raise ValueError(f"type: {kind!r} is not a transport of the client ({known})")
    try:
        found = registered.get(kind) or kind
        transport = import_from_string(found) if isinstance(found, str) else found
        config_class = transport.config_class
        if isinstance(config_class, str):
            config_class = import_from_string(config_class)
        if not (inspect.isclass(transport) and issubclass(transport, Transport)):
            raise TypeError(f"{kind} is not a Transport class")
        if not (inspect.isclass(config_class) and issubclass(config_class, Config)):
            raise TypeError(f"{kind} has no Config class")
        config = _substitute(value, lambda _ref, _header: _PLACEHOLDER)
        config = {k: v for k, v in config.items() if k not in ("name", "priority")}
        config_class.from_dict(config)
    except Exception as exc:  # the client's own words: the option and why
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ValueError(f"openlineage-python refuses it: {reason}") from None
