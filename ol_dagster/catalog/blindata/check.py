"""``ol-dagster check`` of a Blindata catalog.

The client's clock call (reachable, credentials, ``Date``); ``SYSTEMS_ADMIN`` by the client's own
dry-run flow cleanup with a cutoff nothing is older than (403: missing); and every call
``api.INFERRED_CALLS`` lists answers something other than 404/405: GETs directly,
cleanups as dry runs, writes by ``OPTIONS`` (Spring MVC answers it with ``Allow`` for a mapped
path). A dry run whose answer does not confirm it (``answers``) is not ready: the server may
delete when asked for a dry run. A write that cannot be verified without writing (``OPTIONS``
without ``Allow``) is not ready either, unless the catalog's ``assumeEndpoints`` is true: then it
is a warning.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from ol_dagster.catalog.blindata import api
from ol_dagster.catalog.blindata.catalog import BlindataCatalog
from ol_dagster.catalog.blindata.settings import BlindataCatalogSettings
from ol_dagster.catalog.check.findings import Finding, one_line
from ol_dagster.catalog.check.probe import (
    PROBE_NAMESPACE,
    NoAnswer,
    Prober,
    catalog_client,
    clock,
    reachable,
)
from ol_dagster.catalog.http import CatalogRefused, CatalogUnavailable
from ol_dagster.catalog.kind import CheckContext
from ol_dagster.catalog.protocol import CleanupNotConfirmed, CleanupPermissionDenied
from ol_dagster.namespaces import is_literal
from ol_dagster.sync_definition import SyncDefinition

NIL_UUID = "00000000-0000-0000-0000-000000000000"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)  # a cleanup cutoff nothing is older than
PROBE_JOB = "ol-dagster-check"  # the job whose flows the dry-run cleanup names


def check_blindata(cfg: BlindataCatalogSettings, context: CheckContext) -> list[Finding]:
    at, definition = context.opening, context.definition

    def backend() -> BlindataCatalog:
        return BlindataCatalog(at.name, cfg, store_url=at.store_url, definition=at.definition)

    with catalog_client(backend, cfg, ledger=False) as client:
        if isinstance(client, Finding):
            return [client]
        prober = client.prober
        catalog = client.catalog
        found, first = reachable(prober, "GET", api.CLOCK_PATH, params=api.CLOCK_PARAMS)
        findings = [found]
        if first is None:
            return findings
        token = 200 <= first.status < 300
        kind = "token" if cfg.token is not None else "API key"
        what = {401: f"the {kind} is wrong", 403: "refused (tenant or permission)"}
        findings.append(
            Finding(
                kind,
                token,
                f"accepted for tenant {cfg.tenant!r}"
                if token
                else f"GET {api.CLOCK_PATH}: {what.get(first.status, 'refused')} "
                f"({prober.said(first)})",
            )
        )
        findings.append(clock(first, f"GET {api.CLOCK_PATH}"))
        if not token:
            findings.append(Finding("SYSTEMS_ADMIN", False, f"not checked: the {kind} is refused"))
            return findings

        results: dict[tuple[str, str], Finding] = {}
        label = {call: f"{call[0]} {call[1]} [I]" for call in api.INFERRED_CALLS}

        # the client's own dry-run flow cleanup: the path, and SYSTEMS_ADMIN (403 without it)
        namespaces = [  # a namespace of its own: a pattern's glob characters are not a name
            n for n in (definition.allowedJobNamespaces if definition else []) if is_literal(n)
        ]
        # a job's scopes are always named in the call (a namespace's only when it has old flows)
        probe = (namespaces[0] if namespaces else PROBE_NAMESPACE, PROBE_JOB)
        flows = ("POST", api.DATA_FLOWS_CLEANUP)
        try:
            catalog.cleanup_flows(jobs=[probe], before=EPOCH, dry_run=True)
        except CleanupPermissionDenied as exc:
            findings.append(Finding("SYSTEMS_ADMIN", False, prober.scrub(one_line(str(exc)))))
            results[flows] = Finding(
                label[flows], False, "not verified: 403 (SYSTEMS_ADMIN)", False
            )
        except CleanupNotConfirmed as exc:
            results[flows] = Finding(label[flows], False, prober.scrub(one_line(str(exc))))
            findings.append(
                Finding("SYSTEMS_ADMIN", False, "not verified: the dry run was not confirmed")
            )
        except CatalogRefused as exc:
            results[flows] = Finding(label[flows], False, prober.scrub(_refused(exc)))
            findings.append(
                Finding("SYSTEMS_ADMIN", False, "not verified: the dry-run cleanup failed")
            )
        except CatalogUnavailable as exc:
            results[flows] = Finding(label[flows], False, prober.scrub(str(exc)))
            findings.append(
                Finding("SYSTEMS_ADMIN", False, "not verified: the dry-run cleanup failed")
            )
        else:
            findings.append(Finding("SYSTEMS_ADMIN", True, "a dry-run cleanup is allowed"))
            results[flows] = Finding(
                label[flows], True, "a dry run answers, confirmed (dryRun: true, nothing matched)"
            )

        system = _some_system(prober, definition)
        cleanup = ("POST", api.SYSTEM_CLEANUP)
        if system is not None and cleanup in label:
            try:
                catalog.cleanup_dataset_system(system, before=EPOCH, dry_run=True)
            except CleanupPermissionDenied:
                results[cleanup] = Finding(
                    label[cleanup], False, "not verified: 403 (SYSTEMS_ADMIN)", False
                )
            except CleanupNotConfirmed as exc:
                results[cleanup] = Finding(label[cleanup], False, prober.scrub(one_line(str(exc))))
            except (CatalogRefused, CatalogUnavailable) as exc:
                detail = _refused(exc) if isinstance(exc, CatalogRefused) else str(exc)
                results[cleanup] = Finding(label[cleanup], False, prober.scrub(detail))
            else:
                results[cleanup] = Finding(
                    label[cleanup], True, f"a dry run on System {system!r} answers, confirmed"
                )

        for call in api.INFERRED_CALLS:
            if call not in results:
                results[call] = _inferred_call(prober, call, label[call], cfg.assumeEndpoints)
        findings += [results[call] for call in api.INFERRED_CALLS]
        return findings


def _refused(exc: CatalogRefused) -> str:
    body = exc.body
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    message = parsed.get("message") if isinstance(parsed, dict) else None
    gone = exc.status in (404, 405)
    return (
        f"{exc}"
        + (f": {one_line(str(message))}" if message else "")
        + (" (no such call on this server)" if gone else "")
    )


def _some_system(prober: Prober, definition: SyncDefinition | None) -> str | None:
    """A System to ask for a dry-run cleanup: the definition's job System, else any."""
    wanted = [{"name": definition.job_system}] if definition else []
    for params in [*wanted, {}]:
        try:
            answer = prober.ask("GET", api.SYSTEMS, params={**params, api.SIZE_PARAM: 1})
        except NoAnswer:
            return None
        body = answer.json()
        content = body.get("content") if isinstance(body, dict) else None
        for system in content or []:
            named = isinstance(system, dict) and system.get("name")
            if named and (not params or system["name"] == params["name"]):
                return str(system["name"])
    return None


def _inferred_call(prober: Prober, call: tuple[str, str], label: str, assume: bool) -> Finding:
    """One call ``api.INFERRED_CALLS`` lists: a GET asked, another method by ``OPTIONS``. A write
    ``OPTIONS`` cannot show blocks the sync unless ``assume`` (``assumeEndpoints``)."""
    method, template = call
    path = template.format(uuid=NIL_UUID)
    try:
        if method == "GET":
            answer = prober.ask("GET", path, params={api.PAGE_PARAM: 0, api.SIZE_PARAM: 1})
            ok = 200 <= answer.status < 300
            return Finding(
                label,
                ok,
                f"GET answers HTTP {answer.status}"
                if ok
                else prober.said(answer)
                + (" (no such call on this server)" if answer.status in (404, 405) else ""),
            )
        answer = prober.ask("OPTIONS", path)
    except NoAnswer as exc:
        return Finding(label, False, str(exc))
    allow = answer.response.headers.get("allow")
    if allow is not None:
        methods = {m.strip().upper() for m in allow.split(",") if m.strip()}
        return Finding(
            label,
            method in methods,
            f"OPTIONS: Allow {', '.join(sorted(methods))}"
            + ("" if method in methods else f": no {method} (the client's call would be refused)"),
        )
    if answer.status == 404:
        return Finding(label, False, f"OPTIONS {path}: {prober.said(answer)} (no such path)")
    said = f"not verified without writing: OPTIONS answered {prober.said(answer)} without Allow"
    if assume:
        return Finding(label, False, f"{said}; assumed (assumeEndpoints: true)", False)
    return Finding(
        label,
        False,
        f"{said}; set assumeEndpoints: true on this catalog if the server has it",
    )
