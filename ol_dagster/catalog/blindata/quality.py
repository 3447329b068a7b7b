"""Blindata data-quality suites: imported by the upload, disabled (never deleted) by the cleanup.

One suite per job (code ``<namespace>.<name>``) holds that job's assertions; both directions go
through the suite bulk import, so a job that comes back gets its checks enabled again and a job
that is gone has its checks disabled, with ``PUT checks/{uuid}`` as the fallback for a server
that refuses an import without checks. An import too large for the server is halved, and one
whose answer was lost is read back (the suite's checks) before anything is sent again
(``catalog.bounded``).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from ol_dagster.catalog.blindata import api
from ol_dagster.catalog.blindata.client import BlindataClient, Write
from ol_dagster.catalog.blindata.shapes import (
    EntityRefs,
    iso,
    json_body,
    prop_list,
    to_int,
    uuid_of,
)
from ol_dagster.catalog.bounded import post_bounded
from ol_dagster.catalog.http import CatalogRefused, CatalogUnavailable
from ol_dagster.catalog.protocol import FailedRow, UploadResult
from ol_dagster.lineage import LineageGraph

# the logger keeps the name it had before the package (one module), so log filters still match
log = logging.getLogger("ol_dagster.catalog.blindata")

QUALITY = "qualityChecks"


def upload_quality(
    client: BlindataClient, graph: LineageGraph, refs: EntityRefs, result: UploadResult
) -> None:
    """One suite per job (code ``<namespace>.<name>``), imported with its checks (enabled:
    a job that comes back gets its checks back)."""
    suites: dict[str, list[dict[str, Any]]] = {}
    for q in graph.quality_checks.values():
        suite = f"{q.job[0]}.{q.job[1]}"
        ek, eid = refs.entity("dataset", q.dataset)
        check: dict[str, Any] = {
            "code": f"{suite}|{q.dataset[0]}:{q.dataset[1]}|{q.name}|{q.column or ''}",
            "name": f"{q.name} {q.column}" if q.column else q.name,
            "enabled": True,
            "physicalEntities": [{"uuid": eid, "schema": ek[1], "name": ek[2]}],
            "additionalProperties": prop_list(
                {
                    "assertion": q.name,
                    "column": q.column,
                    "lastSuccess": str(q.success).lower(),
                    "severity": q.severity,
                    "lastChecked": iso(q.checked_at) if q.checked_at else None,
                }
            ),
        }
        fid = refs.field_uuid.get((eid, q.column)) if q.column else None
        if fid:
            check["physicalFields"] = [{"uuid": fid}]
        suites.setdefault(suite, []).append(check)

    def write(suite: str, checks: list[dict[str, Any]]) -> Write:
        def post(part: list[dict[str, Any]]) -> dict[str, Any]:
            body = {
                "qualitySuite": {"code": suite, "name": suite, "published": True},
                "qualityChecks": part,
                "issuePoliciesByCheckCodes": {},
            }
            answer = json_body(
                client.http.request(
                    "POST", api.QUALITY_IMPORT, json=body, resend_after_timeout=False
                )
            )
            discarded = to_int(answer.get("rowDiscarded"))
            if discarded:
                message = client.scrub(str(answer.get("message") or ""))[:300]
                raise CatalogRefused(
                    f"POST {api.QUALITY_IMPORT}: {discarded} check(s) discarded {message}",
                    422,
                )
            return answer

        def run() -> tuple[str, bool]:
            # too large for the server: halved; an answer lost: read back before anything is
            # sent again (``catalog.bounded``)
            sent = post_bounded(
                checks,
                post,
                read_back=lambda part: imported(client, suite, part),
                pause=client.http.pause,
                max_lost=client.http.policy.max_retries,
            )
            created = sum(to_int(answer.get("rowCreated")) for _, answer in sent.answers)
            with counts_lock:
                counts["written"] += created
                counts["touched"] += max(len(checks) - len(sent.failed) - created, 0)
                result.failed.extend(
                    FailedRow(QUALITY, str(check["code"]), client.scrub(why)[:500])
                    for check, why in sent.failed
                )
            suite_uuid = next(
                (a.get("qualitySuiteUuid") for _, a in sent.answers if a.get("qualitySuiteUuid")),
                None,
            )
            return str(suite_uuid or suite), False

        return run

    counts = {"written": 0, "touched": 0}
    counts_lock = threading.Lock()
    client.rows(
        "qualitySuites",
        [(s, s, write(s, c)) for s, c in sorted(suites.items())],
        result,
    )
    result.written.pop("qualitySuites", None)
    result.touched.pop("qualitySuites", None)
    result.written[QUALITY] = counts["written"]
    result.touched[QUALITY] = counts["touched"]


def _same(sent: dict[str, Any], held: dict[str, Any]) -> bool:
    """A check the server holds as it was sent (what a user reads of it)."""

    def props(check: dict[str, Any]) -> list[tuple[str, str]]:
        listed = check.get("additionalProperties") or []
        return sorted((str(p.get("name")), str(p.get("value"))) for p in listed)

    return (
        held.get("name") == sent.get("name")
        and held.get("enabled", True) == sent.get("enabled", True)
        and props(held) == props(sent)
    )


def imported(client: BlindataClient, suite: str, checks: list[dict[str, Any]]) -> list[bool]:
    """Which of ``checks`` the suite ``suite`` (a code) holds as sent: the read-back of an
    import whose answer was lost."""
    found = [s for s in client.pages(api.QUALITY_SUITES, {}) if s.get("code") == suite]
    suite_uuid = uuid_of(found[0]) if found else None
    if suite_uuid is None:
        return [False] * len(checks)
    held = {
        c.get("code"): c
        for c in client.pages(api.QUALITY_CHECKS, {api.QUALITY_SUITE_FILTER: suite_uuid})
        if uuid_of(c.get("qualitySuite")) in (suite_uuid, None)
    }
    return [c["code"] in held and _same(c, held[c["code"]]) for c in checks]


def disable_quality_checks(client: BlindataClient, jobs: list[str]) -> int:
    """The suites of removed jobs are imported again with ``cleanup=true`` and no checks: the
    server disables (never deletes) every check missing from the payload, so all of them. A
    server that refuses an import without checks gets ``PUT checks/{uuid}`` enabled=false.
    A failure here (after the deletions) is logged and the other suites are still done."""
    if not jobs:
        return 0
    wanted = set(jobs)
    suites = {
        s["code"]: s
        for s in client.pages(api.QUALITY_SUITES, {})
        if s.get("code") in wanted and uuid_of(s)
    }
    disabled = 0
    for job in sorted(wanted & set(suites)):
        suite = suites[job]
        suite_uuid = uuid_of(suite)
        try:
            enabled = [
                c
                for c in client.pages(api.QUALITY_CHECKS, {api.QUALITY_SUITE_FILTER: suite_uuid})
                if uuid_of(c.get("qualitySuite")) in (suite_uuid, None)
                and c.get("enabled", True) is not False
            ]
            if not enabled:
                continue
            try:
                # sent again after a lost answer: disabling what the payload lacks is the same
                # however often it is done
                client.http.request(
                    "POST",
                    api.QUALITY_IMPORT,
                    params={"cleanup": "true"},
                    json={
                        "qualitySuite": {"code": job, "name": suite.get("name") or job},
                        "qualityChecks": [],
                        "issuePoliciesByCheckCodes": {},
                    },
                )
            except CatalogRefused as exc:
                if exc.status in (401, 403):
                    raise
                # an import without checks refused: disable them one by one instead
                for check in enabled:
                    uid = uuid_of(check)
                    client.http.request(
                        "PUT",
                        api.QUALITY_CHECK.format(uuid=uid),
                        json={**check, "uuid": uid, "enabled": False},
                    )
        except (CatalogRefused, CatalogUnavailable) as exc:
            log.warning("could not disable the quality checks of %s: %s", job, client.reason(exc))
            continue
        disabled += len(enabled)
    return disabled
