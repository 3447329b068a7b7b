"""``ol-dagster demo``: the whole path once, on embedded defaults, with a summary to read.

It starts with ``ol-dagster check`` for the demo definition (the first thing to run against any
catalog), then serves the real receiver on a loopback port, posts two snapshot batches of a small
warehouse (the second one without the Spark export), syncs each through the Dagster job on the local
instance and prints what happened: what was uploaded, what the cleanup removed, what the catalog
holds now. The demo definition feeds two catalogs (``catalogs: [main, lineage_store]``, both
embedded, so it runs offline): each batch is uploaded to and cleaned in each, on its own, and the
summary shows each catalog's part.

Run where there are no settings (a plain ``pip install``, an empty directory), it first writes the
checkout's own ``ol_dagster.yaml`` and ``dagster.yaml``, shipped in the package, so the demo from a
wheel is the demo from the checkout.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from importlib import resources
from pathlib import Path

import httpx

from ol_dagster.commands.check import check as check_catalog
from ol_dagster.commands.check import render
from ol_dagster.commands.demo_events import FOCUS as DEMO_FOCUS
from ol_dagster.commands.demo_events import demo_batches, history
from ol_dagster.commands.headless import instance_from_env, sync_batches
from ol_dagster.commands.sender import post_batch
from ol_dagster.receiver.app import create_app
from ol_dagster.receiver.server import serve_in_background
from ol_dagster.settings import (
    SETTINGS_ENV,
    SettingsError,
    SnapshotMode,
    load_settings,
    settings_path,
)
from ol_dagster.store import EventStore

# The checkout's ol_dagster.yaml and dagster.yaml, copied into the package (package data); a test
# keeps them identical to the checkout's.
TEMPLATES = ("ol_dagster.yaml", "dagster.yaml")


def demo_settings(explicit: str | None) -> Path:
    """The settings file the demo runs on; when none was named and none is here, the packaged
    defaults are written here first (never over an existing file)."""
    path = settings_path(explicit)
    if explicit or os.environ.get(SETTINGS_ENV) or path.exists():
        return path
    written = []
    for name in TEMPLATES:
        target = path.parent / name
        if not target.exists():
            text = (resources.files("ol_dagster") / "templates" / name).read_text("utf-8")
            target.write_text(text, encoding="utf-8")
            written.append(name)
    print(f"no {path}: wrote the demo defaults ({', '.join(written)}) in {path.parent.resolve()}\n")
    return path


def runnable(script: str, module: str) -> str:
    """How a person types ``script`` of this install where the demo ran: its name when the
    shell finds this install's one (an activated venv), else its absolute path, which works
    without activating anything; ``python -m module`` when the install has no such script."""
    beside = Path(sys.executable).parent / script
    if not beside.exists():
        return f"{shlex.quote(sys.executable)} -m {module}"
    found = shutil.which(script)
    if found and Path(found).resolve() == beside.resolve():
        return script
    return shlex.quote(str(beside))


def ui_hint(path: str) -> str:
    """How to open the UI on the demo's instance: ``make dev`` in the checkout, else the commands
    the Makefile runs (a wheel has no Makefile)."""
    settings_file = settings_path(path).resolve()
    if (settings_file.parent / "Makefile").exists():
        return "make dev  (then open http://127.0.0.1:3000)"
    home = shlex.quote(os.environ.get("DAGSTER_HOME", ""))
    # from DAGSTER_HOME: run where the demo wrote a dagster.yaml, dagster dev warns it is unused
    env = f"DAGSTER_HOME={home} {SETTINGS_ENV}={shlex.quote(str(settings_file))}"
    return (
        f"cd {home} && {env} {runnable('dagster', 'dagster')} dev -m ol_dagster.definitions"
        "  (then open http://127.0.0.1:3000)"
    )


def lineage_command(path: str, definition: str, node: str) -> str:
    """The ``ol-dagster lineage`` command that prints the demo's upstream lineage, as a person
    types it where the demo ran: with ``--definition`` (the demo settings hold several), and with
    ``--settings`` when the demo did not read the file ``lineage`` reads by default."""
    settings = ""
    if settings_path(path).resolve() != settings_path(None).resolve():
        settings = f" --settings {shlex.quote(str(settings_path(path)))}"
    command = runnable("ol-dagster", "ol_dagster.commands.cli")
    return (
        f"{command}{settings} lineage {shlex.quote(node)} --definition {shlex.quote(definition)}"
        " --upstream --depth 4"
    )


def _run_analyses(path: str, instance) -> list[str]:
    """Materialize the daily analyses once, on the same instance, and summarize them."""
    import dagster as dg

    from ol_dagster.commands.headless import QUIET
    from ol_dagster.defs.analysis import JOBS_ON_SCHEDULE, RUN_PROFILES, analyses
    from ol_dagster.defs.resources import StoreResource

    result = dg.materialize(
        [analyses],
        instance=instance,
        resources={"ol_store": StoreResource(settings_path=str(settings_path(path).resolve()))},
        run_config=QUIET,
    )
    meta = instance.get_latest_materialization_event(RUN_PROFILES).asset_materialization.metadata
    out = [f"run profiles of {meta['jobs'].value} job(s)"]
    for check in result.get_asset_check_evaluations():
        if check.check_name == JOBS_ON_SCHEDULE:
            verdict = "passed" if check.passed else f"WARN: {check.description}"
            out.append(f"jobs_on_schedule: {verdict}")
    return out


def run_demo(path: str) -> int:
    settings = load_settings(path)
    snapshot_defs = [
        d for d in settings.definitions if d.snapshotMode is SnapshotMode.BATCH_SNAPSHOT
    ]
    if not snapshot_defs:
        raise SettingsError("the demo needs a definition with snapshotMode BATCH_SNAPSHOT")
    definition = snapshot_defs[0]
    instance = instance_from_env(settings_path(path).resolve().parent)
    store = EventStore(settings.store.url)
    lines = []
    keys = definition.catalog_keys
    print(f"ol-dagster demo: definition {definition.name!r}, catalogs {', '.join(keys)}\n")
    print(f"ol-dagster check --definition {definition.name}:")
    reports = check_catalog(settings, [definition], source=path)
    for report in reports:
        print("  " + render(report).replace("\n", "\n  ") + "\n")
    with serve_in_background(create_app(settings, store)) as url, httpx.Client(timeout=60) as http:
        for title, batch in demo_batches():
            answer = post_batch(http, url, definition.receiver.token.resolve(), batch).json()
            print(
                f"posted {title}: {answer['summary']['accepted']} events accepted "
                f"(batch {answer['batchId']}, {answer['status']})"
            )
            for line in sync_batches(path, definition=definition.name, instance=instance):
                lines.append((title, line))
        additive = [
            d for d in settings.definitions if d.snapshotMode is not SnapshotMode.BATCH_SNAPSHOT
        ]
        if additive:
            # a history of runs for the analyses, from another (additive) producer
            ops = additive[0]
            answer = post_batch(http, url, ops.receiver.token.resolve(), history()).json()
            accepted = answer["summary"]["accepted"]
            print(f"posted two days of run history to {ops.name!r}: {accepted} events")
            for _line in sync_batches(path, definition=ops.name, instance=instance):
                pass
    store.dispose()
    analysis = _run_analyses(path, instance)

    print("\nsynced batches")
    for title, line in lines:
        print(f"  batch {line['batchId']} ({title}): {line['status']}")
        # a definition feeding several catalogs: each catalog's part, on its own
        parts = line.get("catalogs") or {keys[0]: line}
        for key, part in parts.items():
            if len(parts) > 1:
                print(f"    catalog {key}: {part['status']}")
            for text in _part_summary(part):
                print(("      " if len(parts) > 1 else "    ") + text)
        failed_checks = [k for k, ok in line["checks"].items() if not ok]
        failed_checks += [
            f"{key}/{k}"
            for key, part in (line.get("catalogs") or {}).items()
            for k, ok in part["checks"].items()
            if not ok
        ]
        print(f"    checks : failed: {failed_checks or 'none'}")

    node = f"dataset:{DEMO_FOCUS[0]}:{DEMO_FOCUS[1]}"
    upstream: dict = {"edges": []}
    for key in keys:
        catalog = settings.open_catalog(key, definition=definition.name)
        try:
            counts = getattr(catalog, "counts", lambda: {})()
            jobs = getattr(catalog, "job_names", lambda: [])()
            if key == keys[0]:  # the primary: what ``ol-dagster lineage`` reads
                upstream = catalog.lineage(node, depth=4, upstream=True, downstream=False)
        finally:
            catalog.close()
        if counts:
            print(f"\ncatalog {key!r} now holds:")
            print("  " + ", ".join(f"{k} {v}" for k, v in counts.items()))
            for job in jobs:
                print(f"  job {job}")
        else:
            kind = settings.catalogs[key].kind
            print(f"\ncatalog {key!r} is a {kind} server: its own UI shows what it holds")
    print(f"\nupstream of {node} ({lineage_command(path, definition.name, node)}):")
    for edge in upstream["edges"]:
        print(f"  {edge['from']}  ->  {edge['to']}")
    print("\nanalyses (run_profiles, dataset_scopes, quality_summaries):")
    for line in analysis:
        print(f"  {line}")
    print(f"\nSee the runs, assets and checks in the UI: {ui_hint(path)}")
    synced = all(line["status"] == "synced" for _, line in lines)
    return 0 if synced and all(r.ok for r in reports) else 1


def _part_summary(part: dict) -> list[str]:
    """What one catalog's part of a sync line says: its upload, its cleanup, what it removed."""
    upload = part["upload"] or {}
    cleanup = part["cleanup"] or {}
    written = sum((upload.get("written") or {}).values())
    touched = sum((upload.get("touched") or {}).values())
    removed = ", ".join(cleanup.get("removedJobs") or []) or "none"
    totals: dict[str, int] = {}
    for call in cleanup.get("calls") or []:
        for kind, n in (call.get("real") or {}).items():
            totals[kind] = totals.get(kind, 0) + n
    removed_objects = ", ".join(f"{k} {v}" for k, v in totals.items() if v) or "nothing"
    return [
        f"upload : {written} new object(s), {touched} re-sent and touched",
        f"cleanup: mode {cleanup.get('mode')}, skipped: {cleanup.get('skippedReason') or 'no'}, "
        f"removed jobs: {removed}",
        f"removed: {removed_objects}",
    ]
