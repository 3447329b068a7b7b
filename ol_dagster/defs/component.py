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
from pydantic import BaseModel, Field

from ol_dagster.defs.build import build_defs
from ol_dagster.defs.dagster_private import serves_asset_graph
from ol_dagster.defs.lineage_assets import OpenLineageTranslator

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
    One component per settings file (the analyses and resources are the file's)."""

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
        default=False,
        description="Synced lineage keys as [namespace, *name parts] (readable graph labels) "
        "instead of [namespace, name]: OpenLineageTranslator(split_names=True).",
    )

    @classmethod
    def get_spec(cls) -> dg.ComponentTypeSpec:
        return dg.ComponentTypeSpec(
            description="Keeps data catalogs in sync with OpenLineage (ol-dagster).",
            tags=["openlineage", "lineage", "catalog"],
            produces=["asset", "asset_check", "job", "sensor", "schedule", "resource"],
        )

    def settings_file(self, context: dg.ComponentLoadContext) -> Path:
        path = Path(self.settings)
        return path if path.is_absolute() else (context.path / path).resolve()

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        return build_defs(
            str(self.settings_file(context)),
            definitions=self.definitions,
            translator=OpenLineageTranslator(split_names=self.split_names),
            synced_lineage=serves_asset_graph(),
        )
