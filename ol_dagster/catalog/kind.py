"""What a catalog kind declares, once: the keys it reads, how its backend opens, what ``ol-dagster
check`` asks it, and what its backend can do beyond the ``Catalog`` protocol.

Everything ol-dagster does with a catalog goes through its kind's declaration (``catalog.registry``
holds them): the settings file reads a catalog's keys with the kind's model, a sync opens the
backend with the kind's factory, ``check`` runs the kind's checker, and a failed run hides the
secrets the kind's model holds (every ``{env: NAME}`` key, found by type). So adding a kind is
writing its package and one registration; nothing else names it (docs/adding-a-catalog-kind.md).

The factory and the checker are typed with the kind's own settings model, so pyright checks that
the backend a factory returns is a ``Catalog`` and that each takes the keys its kind declares.
Both import their backend when called: reading the settings file never loads a catalog client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ol_dagster.catalog.protocol import CAPABILITIES
from ol_dagster.catalog.settings import CatalogSettings
from ol_dagster.settings_base import EnvSecret, SettingsError

if TYPE_CHECKING:  # named in signatures only: reading the settings file loads no client
    from ol_dagster.catalog.check.findings import Finding
    from ol_dagster.catalog.protocol import Catalog
    from ol_dagster.sync_definition import SyncDefinition

CfgT = TypeVar("CfgT", bound=CatalogSettings)


@dataclass(frozen=True, slots=True)
class Opening:
    """Where a backend opens, beyond its own keys."""

    name: str  # the catalog's key under ``catalogs``
    store_url: str  # the event store's database (a sync ledger is kept there)
    definition: str = ""  # the definition whose part of the sync ledger it reads ("": none)


@dataclass(frozen=True, slots=True)
class CheckContext:
    """What ``ol-dagster check`` knows when it asks a catalog."""

    opening: Opening
    definition: SyncDefinition | None  # the definition whose sync is checked (None: the catalog)
    # the definition's stored events (None: no definition, or the event store does not open)
    stored_events: Callable[[], Iterable[bytes]] | None = None


@dataclass(frozen=True, kw_only=True)
class CatalogKind(Generic[CfgT]):
    """One kind of catalog, as the settings name it (``kind: <name>``)."""

    name: str
    settings: type[CfgT]  # the keys a catalog of this kind reads (``kind`` fixed by a Literal)
    factory: Callable[[CfgT, Opening], Catalog]  # the backend of one catalog
    checker: Callable[[CfgT, CheckContext], list[Finding]]  # what ``ol-dagster check`` asks it
    # what its backend can do beyond the protocol (``Rehearsing``, ``TakesEvents``,
    # ``ExportsState``, ``Annotating``): each backend is held to it when it opens
    capabilities: frozenset[type[Any]] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        named = self.settings.model_fields["kind"].default
        if named != self.name:
            raise TypeError(
                f"catalog kind {self.name!r}: its settings model {self.settings.__name__} must "
                f"default 'kind' to {self.name!r}, not {named!r}"
            )
        unknown = self.capabilities - set(CAPABILITIES)
        if unknown:
            names = ", ".join(sorted(c.__name__ for c in unknown))
            raise TypeError(f"catalog kind {self.name!r}: {names} is not a catalog capability")

    @property
    def secret_fields(self) -> tuple[str, ...]:
        """The keys that hold a secret (``{env: NAME}``), by their declared type."""
        return tuple(
            name
            for name, info in self.settings.model_fields.items()
            if info.annotation is not None and EnvSecret in _members(info.annotation)
        )

    def open(self, cfg: CatalogSettings, at: Opening) -> Catalog:
        """The backend of ``cfg``, held to the capabilities this kind declares."""
        backend = self.factory(self._own(cfg), at)
        found = {c for c in CAPABILITIES if isinstance(backend, c)}
        if found != self.capabilities:
            backend.close()
            declared = ", ".join(sorted(c.__name__ for c in self.capabilities)) or "none"
            has = ", ".join(sorted(c.__name__ for c in found)) or "none"
            raise TypeError(
                f"catalog kind {self.name!r} declares the capabilities {declared}, but its "
                f"backend {type(backend).__name__} has {has}"
            )
        return backend

    def check(self, cfg: CatalogSettings, context: CheckContext) -> list[Finding]:
        return self.checker(self._own(cfg), context)

    def _own(self, cfg: CatalogSettings) -> CfgT:
        if not isinstance(cfg, self.settings):
            raise SettingsError(
                f"catalog kind {self.name!r} opens only the settings its own model read: "
                f"{type(cfg).__name__}, not {self.settings.__name__}"
            )
        return cfg


def _members(annotation: Any) -> tuple[Any, ...]:
    """``X | None`` as ``(X, None)``; any other type as itself."""
    return getattr(annotation, "__args__", None) or (annotation,)
