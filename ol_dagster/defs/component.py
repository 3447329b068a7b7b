"""ol-dagster as a Dagster Component, for YAML-first (``dg``) projects.

A ``dg`` project declares its definitions in ``defs/<folder>/defs.yaml`` files instead of a
``definitions.py``. This component lets such a project add the sync definitions of an
``ol_dagster.yaml`` there::

    type: ol_dagster.OpenLineageSyncComponent
    attributes:
      settings: "{{ context.project_root }}/ol_dagster.yaml"
      definitions: [analytics_repo]      # optional: default every definition of the file

and get what ``ol_dagster.definitions`` builds for them: the sync assets and their checks, the
sync job, the sensors, the schedules, the analyses and the synced lineage. It only calls
``build_defs``; there is one builder. The settings stay in the settings file, which the receiver
and the ``ol-dagster`` commands read too, so the component names the file rather than repeating it.

``dg scaffold defs ol_dagster.OpenLineageSyncComponent <folder>`` writes the ``defs.yaml`` and,
when the project has none, a starter ``ol_dagster.yaml`` at the project root (with fresh UUIDs).
"""

from __future__ import annotations

import uuid
from importlib import resources
from pathlib import Path

import dagster as dg
from dagster.components.component_scaffolding import scaffold_component
from pydantic import BaseModel, Field, PrivateAttr

from ol_dagster.defs.build import build_defs, chosen_definitions, synced_lineage_specs
from ol_dagster.defs.dagster_private import serves_asset_graph
from ol_dagster.defs.lineage_assets import OpenLineageTranslator
from ol_dagster.defs.names import CODE_LOCATION_FILE, file_names
from ol_dagster.settings import SettingsError, load_settings

SETTINGS_FILE = "ol_dagster.yaml"
# the template's definition UUIDs: a scaffolded file gets its own (they name the catalog owner)
_TEMPLATE_UUIDS = (
    "6f1c2d9e-4b7a-4c1e-9d2f-0a1b2c3d4e5f",
    "0b7e0c52-2d8f-4f58-8a71-3c5e9e2b6d10",
)


class ScaffoldParams(BaseModel):
    """``dg scaffold defs ol_dagster.OpenLineageSyncComponent <folder> --settings PATH``: use an
    existing settings file instead of the project root's ``ol_dagster.yaml``."""

    settings: str | None = None


class OpenLineageSyncScaffolder(dg.Scaffolder[ScaffoldParams]):
    @classmethod
    def get_scaffold_params(cls) -> type[ScaffoldParams]:
        return ScaffoldParams

    def scaffold(self, request: dg.ScaffoldRequest[ScaffoldParams]) -> None:
        settings = request.params.settings if request.params else None
        if settings is None:
            root = request.project_root or request.target_path
            target = root / SETTINGS_FILE
            if not target.exists():
                target.write_text(starter_settings(), encoding="utf-8")
            settings = (
                f"{{{{ context.project_root }}}}/{SETTINGS_FILE}"
                if request.project_root
                else SETTINGS_FILE
            )
        scaffold_component(request, {"settings": settings})


def starter_settings() -> str:
    """The packaged ``ol_dagster.yaml`` (the checkout's), with fresh definition UUIDs."""
    text = (resources.files("ol_dagster") / "templates" / SETTINGS_FILE).read_text("utf-8")
    for old in _TEMPLATE_UUIDS:
        text = text.replace(old, str(uuid.uuid4()))
    return text


@dg.scaffold_with(OpenLineageSyncScaffolder)
class OpenLineageSyncComponent(dg.Component, dg.Model, dg.Resolvable):
    """The sync definitions of an ol-dagster settings file: per definition its sync assets and
    checks, job, sensors and stale-cleanup schedule, plus the analyses and the synced lineage.
    Components of several settings files load side by side: the project root's
    ``ol_dagster.yaml`` (or the project's only file) keeps the plain resource keys (``ol_store``,
    ``ol_catalog``) and analysis keys, another file's carry its path (``ol_store__teams_sales``
    for ``teams/sales.yaml``). Components of one file (each choosing other ``definitions`` of
    it) share its resources and analyses. The synced lineage of all of them is one graph."""

    settings: str = Field(
        default=SETTINGS_FILE,
        description="The ol-dagster settings file: absolute, or relative to this defs.yaml's "
        "folder; '{{ context.project_root }}/ol_dagster.yaml' for the project root's.",
    )
    definitions: list[str] | None = Field(
        default=None,
        description="The sync definitions of the file to build (default: every one).",
    )
    split_names: bool = Field(
        default=True,
        description="Synced lineage keys as [namespace, *name parts], labelled by the table, "
        "file or task in the graph; false: [namespace, name], whole names cut in the middle "
        "(OpenLineageTranslator(split_names=...)).",
    )

    @classmethod
    def get_spec(cls) -> dg.ComponentTypeSpec:
        return dg.ComponentTypeSpec(
            description="Keeps data catalogs in sync with OpenLineage (ol-dagster).",
            tags=["openlineage", "lineage", "catalog"],
            produces=["asset", "asset_check", "job", "sensor", "schedule", "resource"],
        )

    # set when Dagster loads the component: the other components of the project read them
    _settings_file: Path | None = PrivateAttr(default=None)
    _folder: str = PrivateAttr(default=".")

    @classmethod
    def load(
        cls, attributes: BaseModel | None, context: dg.ComponentLoadContext
    ) -> OpenLineageSyncComponent:
        component = super().load(attributes, context)
        component._settings_file = component.settings_file(context)
        component._folder = _relative(context.path, context.project_root)
        return component

    def settings_file(self, context: dg.ComponentLoadContext) -> Path:
        path = Path(self.settings)
        return path if path.is_absolute() else (context.path / path).resolve()

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        settings_file = self.settings_file(context)
        project = [
            c
            for c in context.component_tree.get_all_components(of_type=OpenLineageSyncComponent)
            if c._settings_file is not None
        ] or [self]
        same_file = [c for c in project if c._settings_file == settings_file] or [self]
        _refuse_overlaps(same_file, settings_file)
        translator = OpenLineageTranslator(split_names=self.split_names)
        defs = build_defs(
            str(settings_file),
            definitions=self.definitions,
            translator=translator,
            synced_lineage=False,
            # one settings file in the project: its plain names, wherever it is
            files=CODE_LOCATION_FILE
            if len({c._settings_file for c in project}) == 1
            else file_names(settings_file, context.project_root),
            # a file's analyses and resources are the file's: its first component has them
            analyses=same_file[0] is self,
        )
        if project[0] is not self or not serves_asset_graph():
            return defs
        # The synced lineage of every component is one graph (a dataset two of them touch is
        # one asset): the project's first component shows it.
        _refuse_other_split_names(project, self)
        sources = [
            chosen_definitions(load_settings(f), c.definitions, str(f))
            for c in project
            if (f := c._settings_file) is not None
        ]
        return dg.Definitions.merge(
            defs, dg.Definitions(assets=synced_lineage_specs(sources, translator))
        )


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve())) or "."
    except ValueError:
        return str(path)


def _refuse_overlaps(same_file: list[OpenLineageSyncComponent], settings_file: Path) -> None:
    """Components of one settings file build different definitions of it."""
    if len(same_file) < 2:
        return
    known = [d.name for d in load_settings(settings_file).definitions]
    built: dict[str, str] = {}
    for c in same_file:
        for name in c.definitions if c.definitions is not None else known:
            if name in built:
                raise SettingsError(
                    f"definition {name!r} of {settings_file} is built by two components "
                    f"({built[name]} and {c._folder}): give each its own 'definitions'"
                )
            built[name] = c._folder


def _refuse_other_split_names(
    project: list[OpenLineageSyncComponent], first: OpenLineageSyncComponent
) -> None:
    for c in project:
        if c.split_names != first.split_names:
            raise SettingsError(
                f"split_names is {first.split_names} in {first._folder} but "
                f"{c.split_names} in {c._folder}: the synced lineage of the project's "
                "components is one graph, with one kind of keys"
            )
