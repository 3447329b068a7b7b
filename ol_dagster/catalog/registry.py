"""The catalog kinds ol-dagster knows: one registration per kind, found by ``kind``.

The kinds it ships are registered here, one line each; a kind of your own registers itself with
``register`` from a module the settings file lists under ``catalogKinds`` (imported before the
catalogs are read, in every process that reads the file). A kind no registration names is an
error wherever it turns up: in the settings file (with the kinds there are), when a backend is
opened, when ``check`` asks it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Union

from pydantic import Discriminator, Tag, TypeAdapter

from ol_dagster.catalog import blindata, embedded, marquez, openmetadata
from ol_dagster.catalog.kind import CatalogKind, CheckContext, Opening
from ol_dagster.catalog.settings import CatalogSettings
from ol_dagster.settings_base import SettingsError

if TYPE_CHECKING:
    from ol_dagster.catalog.check.findings import Finding
    from ol_dagster.catalog.protocol import Catalog

DEFAULT_KIND = embedded.KIND.name  # a catalog that names no kind

_KINDS: dict[str, CatalogKind[Any]] = {}
_adapter: TypeAdapter[CatalogSettings] | None = None


def register(kind: CatalogKind[Any]) -> CatalogKind[Any]:
    """Make ``kind`` known. Registering it again is harmless (a module read twice); another kind
    under a known name is refused: a settings file would not say which it means."""
    global _adapter
    known = _KINDS.get(kind.name)
    if known is not None and _where(known) != _where(kind):
        raise SettingsError(
            f"catalog kind {kind.name!r} is already registered by {_where(known)}; "
            f"{_where(kind)} needs a name of its own"
        )
    _KINDS[kind.name] = kind
    _adapter = None
    return kind


for _kind in (embedded.KIND, openmetadata.KIND, marquez.KIND, blindata.KIND):
    register(_kind)


def _where(kind: CatalogKind[Any]) -> str:
    return f"{kind.settings.__module__}.{kind.settings.__qualname__}"


def kind_names() -> list[str]:
    return list(_KINDS)


def catalog_kind(name: str) -> CatalogKind[Any]:
    """The kind registered as ``name``; any other name is an error that lists the known ones."""
    try:
        return _KINDS[name]
    except KeyError:
        raise SettingsError(unknown_kind(name)) from None


def unknown_kind(name: object) -> str:
    return (
        f"kind {name!r} is not one of {', '.join(_KINDS)} (a kind of your own: list the module "
        "that registers it under catalogKinds)"
    )


def open_catalog(cfg: CatalogSettings, at: Opening) -> Catalog:
    """The backend of one catalog, by its kind."""
    return catalog_kind(cfg.kind).open(cfg, at)


def check_catalog(cfg: CatalogSettings, context: CheckContext) -> list[Finding]:
    """What ``ol-dagster check`` finds asking one catalog, by its kind."""
    return catalog_kind(cfg.kind).check(cfg, context)


def read_catalog(value: object) -> CatalogSettings:
    """A catalog's keys read with the model of its kind (``embedded`` when it names none). A
    pydantic validator: its errors carry the kind in their path, as a tagged union's do."""
    if isinstance(value, CatalogSettings):
        return value
    return _catalog_adapter().validate_python(value)


def _kind_of(value: object) -> str | None:
    if isinstance(value, dict):
        kind = value.get("kind", DEFAULT_KIND)
        return kind if isinstance(kind, str) and kind in _KINDS else None
    # a model already built, or not a mapping at all (the default kind says it wants one)
    return getattr(value, "kind", DEFAULT_KIND)


def _catalog_adapter() -> TypeAdapter[CatalogSettings]:
    global _adapter
    if _adapter is None:
        # a tagged union of the registered kinds' models, made at run time
        members = tuple(Annotated[k.settings, Tag(name)] for name, k in _KINDS.items())
        union: Any = Union[members]  # noqa: UP007
        by_kind = Discriminator(
            _kind_of,
            custom_error_type="catalog_kind",
            custom_error_message="'kind' must be one of " + ", ".join(_KINDS),
        )
        tagged: Any = Annotated[union, by_kind]  # pyright: ignore[reportInvalidTypeForm]
        _adapter = TypeAdapter(tagged)
    return _adapter
