"""Dagster hooks that report a definition's sync runs as OpenLineage events (``sync.run_lineage``).

Op hooks on the sync job run in the run's own process after each step, whoever launched the run:
the daemon's run worker (sensor runs) and ``ol-dagster sync`` (the same job, in process). The
first step to finish sends START (with the run's start time); the step that completes the run's
plan sends COMPLETE; the first step that fails sends FAIL, with the failing step's error. So one
COMPLETE follows all of a run's cleanups, however many catalogs it writes, and a run failing in
any step sends FAIL. What was sent is kept in the run's tags, so no event goes twice and a person
sees in the UI what reached the target: ``ol_dagster/openlineage_sent`` (``START,COMPLETE``) and
``ol_dagster/openlineage_failed`` (the events the target did not take; the warning in the run's
log says why). A failed send never fails the sync, and a hook's own error is Dagster's to log
(Dagster never fails a run for a hook).

A run can also fail with no hook left to run: its ``ol-dagster sync`` process killed
(``defs.dead_runs`` fails it) or its run worker lost or never started (Dagster's run monitoring
fails it; the failure sensor sees it). Those paths call ``report_failed_run``: FAIL (START first if
it never went), with their reason, guarded by the same tags, so a run sends FAIL once whichever
path sees it first.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import dagster as dg

from ol_dagster.defs import names
from ol_dagster.settings import Settings, SyncDefinition
from ol_dagster.sync.run_failure import run_failure, scrub, secret_values

if TYPE_CHECKING:
    from ol_dagster.sync.run_lineage import SyncRun

SENT_TAG = "ol_dagster/openlineage_sent"
FAILED_TAG = "ol_dagster/openlineage_failed"
_TERMINAL = ("COMPLETE", "FAIL")


def run_lineage_hooks(
    definition: SyncDefinition, files: names.FileNames
) -> set[dg.HookDefinition] | None:
    """The hooks of ``definition``'s sync job, or None when it does not report its runs."""
    if definition.openLineage is None:
        return None

    @dg.success_hook(
        name=f"{definition.name}__openlineage_on_success", required_resource_keys={files.store}
    )
    def on_success(context: dg.HookContext) -> None:
        report_step(context, definition, files, failed=False)

    @dg.failure_hook(
        name=f"{definition.name}__openlineage_on_failure", required_resource_keys={files.store}
    )
    def on_failure(context: dg.HookContext) -> None:
        report_step(context, definition, files, failed=True)

    return {on_success, on_failure}


def _listed(tags: dict[str, str], key: str) -> list[str]:
    return [s for s in tags.get(key, "").split(",") if s]


def report_step(
    context: dg.HookContext, definition: SyncDefinition, files: names.FileNames, *, failed: bool
) -> None:
    """After one step: send what the run's state now calls for (START, then COMPLETE or FAIL)."""
    instance = context.instance
    run = instance.get_run_by_id(context.run_id)
    if run is None or _ended(run):
        return
    ending = "FAIL" if failed else "COMPLETE" if _plan_succeeded(instance, run) else None
    ol_store = getattr(context.resources, files.store)
    warning = _report(
        instance, lambda: (ol_store.settings(), ol_store.get()), definition, run, ending
    )
    if warning:
        context.log.warning(warning)


def report_failed_run(
    instance: dg.DagsterInstance,
    definition: SyncDefinition,
    run_id: str,
    reason: str,
    source: Callable[[], tuple[Settings, Any]],
) -> str | None:
    """For a run that failed with no hook left to run (a killed process, a lost or never started
    worker): FAIL, and START before it if it never went, unless the run's tags say FAIL or
    COMPLETE was already tried. ``reason`` is why it failed (scrubbed here), used when no step's
    failure says more; ``source`` gives the settings and the event store. Returns the warning to
    log, or None."""
    if definition.openLineage is None:
        return None
    run = instance.get_run_by_id(run_id)
    if run is None or _ended(run):
        return None
    return _report(instance, source, definition, run, "FAIL", reason=reason)


def _ended(run: dg.DagsterRun) -> bool:
    """Whether COMPLETE or FAIL was already tried for the run (sent or refused): the one guard."""
    tags = dict(run.tags)
    return bool(set(_listed(tags, SENT_TAG) + _listed(tags, FAILED_TAG)) & set(_TERMINAL))


def _report(
    instance: dg.DagsterInstance,
    source: Callable[[], tuple[Settings, Any]],
    definition: SyncDefinition,
    run: dg.DagsterRun,
    ending: str | None,
    *,
    reason: str | None = None,
) -> str | None:
    """Send START (when not tried yet) and ``ending``, and record in the run's tags what went and
    what did not; returns the warning to log, or None."""
    sent = _listed(dict(run.tags), SENT_TAG)
    undelivered = _listed(dict(run.tags), FAILED_TAG)
    states = [] if "START" in sent + undelivered else ["START"]  # a refused event is not retried
    states += [ending] if ending else []
    if not states:
        return None
    warnings = []
    try:
        settings, store = source()
        outcome = _send(instance, settings, store, definition, run, states, reason)
    except Exception as exc:  # noqa: BLE001 - reporting never fails the sync
        warnings.append(f"OpenLineage events of this run not sent ({type(exc).__name__})")
        outcome = None
    delivered = outcome.delivered if outcome else []
    refused = outcome.failed if outcome else states
    if outcome and outcome.errors:
        warnings.append(
            f"OpenLineage: {len(refused)} event(s) not taken by the target "
            f"({', '.join(refused)}): {'; '.join(outcome.errors)}"
        )
    tags = {SENT_TAG: ",".join(sent + delivered)}
    if refused or undelivered:
        tags[FAILED_TAG] = ",".join(undelivered + refused)
    instance.add_run_tags(run.run_id, tags)
    return "; ".join(warnings) or None


def lineage_sent(instance: dg.DagsterInstance, run_id: str) -> dict[str, list[str]]:
    """``{"sent": [...], "failed": [...]}``: the events a run's hooks sent, and those the target
    did not take (from the run's tags)."""
    run = instance.get_run_by_id(run_id)
    tags = dict(run.tags) if run else {}
    return {"sent": _listed(tags, SENT_TAG), "failed": _listed(tags, FAILED_TAG)}


def _plan_succeeded(instance: dg.DagsterInstance, run: dg.DagsterRun) -> bool:
    """Whether every step the run executes has succeeded (this hook's step included)."""
    snapshot_id = run.execution_plan_snapshot_id
    if snapshot_id is None:
        return False
    plan = instance.get_execution_plan_snapshot(snapshot_id)
    steps = set(run.step_keys_to_execute or [s.key for s in plan.steps])
    records = instance.get_records_for_run(
        run.run_id, of_type=dg.DagsterEventType.STEP_SUCCESS
    ).records
    return steps <= {r.event_log_entry.step_key for r in records}


def _send(
    instance: dg.DagsterInstance,
    settings: Settings,
    store: Any,
    definition: SyncDefinition,
    run: dg.DagsterRun,
    states: list[str],
    reason: str | None,
) -> Any:
    from openlineage.client.event_v2 import RunState

    from ol_dagster.sync import run_lineage

    assert definition.openLineage is not None
    secrets = secret_values(settings) + definition.openLineage.secret_values()
    facts = _gather(instance, store, settings, definition, run, states, secrets, reason)
    now = datetime.now(UTC)
    events = [
        run_lineage.build_event(
            RunState(state),
            facts,
            definition.openLineage.namespace,
            facts.started_at if state == "START" else now,
        )
        for state in states
    ]
    return run_lineage.send(definition.openLineage.transport_config(), events, secrets)


def _gather(
    instance: dg.DagsterInstance,
    store: Any,
    settings: Settings,
    definition: SyncDefinition,
    run: dg.DagsterRun,
    states: list[str],
    secrets: list[str],
    reason: str | None = None,
) -> SyncRun:
    """The plain values of the run's events, from the store and the run's own event log."""
    from ol_dagster.sync import run_lineage

    record = instance.get_run_record_by_id(run.run_id)
    started = record.start_time if record and record.start_time else None
    key = run.tags.get("dagster/partition", "")
    batch = store.get_batch(int(key)) if key.isdigit() else None
    facts: dict[str, Any] = {
        "definition": definition.name,
        "dagster_run_id": run.run_id,
        "started_at": datetime.fromtimestamp(started, UTC) if started else datetime.now(UTC),
        "catalogs": [(k, settings.catalogs[k].url) for k in definition.catalog_keys],
    }
    if batch is not None:
        facts["batch"] = run_lineage.BatchFacts(
            id=batch.id,
            kind=str(batch.kind.value),
            received=batch.received_count,
            accepted=batch.accepted_count,
            rejected=batch.rejected_count,
            whole_snapshot=batch.whole_snapshot,
        )
    if any(s in _TERMINAL for s in states):
        facts["checks"] = _checks(instance, run.run_id, definition.name)
        facts["cleanups"] = _cleanups(instance, run.run_id, definition)
    if "FAIL" in states:
        # a failed step says most; else the caller's reason (a killed process, Dagster's message)
        failure = run_failure(instance.all_logs(run.run_id), secrets)
        if failure and failure["step"]:
            facts["error"] = f"step {failure['step']}: {failure['error']}"
        elif reason:
            facts["error"] = scrub(reason, secrets)
        elif failure:
            facts["error"] = failure["error"]
    return run_lineage.SyncRun(**facts)


def _asset_name(key: dg.AssetKey, definition: str) -> str:
    path = key.path[1:] if key.path[:1] == [definition] else key.path
    return "/".join(path)


def _checks(instance: dg.DagsterInstance, run_id: str, definition: str) -> list:
    from ol_dagster.sync.run_lineage import CheckOutcome

    records = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
    ).records
    found = []
    for r in records:
        event = r.event_log_entry.dagster_event
        data = event.event_specific_data if event else None
        if not isinstance(data, dg.AssetCheckEvaluation):
            continue
        severity = data.severity
        found.append(
            CheckOutcome(
                asset=_asset_name(data.asset_key, definition),
                check=data.check_name,
                passed=bool(data.passed),
                severity=getattr(severity, "value", None),
            )
        )
    return found


def _cleanups(instance: dg.DagsterInstance, run_id: str, definition: SyncDefinition) -> list[dict]:
    """The ``report`` of every batch cleanup this run materialized (one per catalog), named by
    its catalog: the definition's only one, else the report's or its asset's."""
    from ol_dagster.sync.run_lineage import cleanup_summary

    only = definition.catalog_keys[0] if len(definition.catalog_keys) == 1 else None
    records = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
    ).records
    found = []
    for r in records:
        materialization = r.event_log_entry.asset_materialization
        if materialization is None or not any(
            part.startswith(names.CATALOG_CLEANUP) for part in materialization.asset_key.path
        ):
            continue
        key = materialization.asset_key
        report = materialization.metadata.get("report")
        data = getattr(report, "data", None)
        if isinstance(data, dict):
            # ``<definition>/<catalog>/catalog_cleanup`` when the definition feeds several
            label = only or (
                key.path[1] if len(key.path) == 3 else _asset_name(key, definition.name)
            )
            found.append(cleanup_summary(label, data))
    return found
