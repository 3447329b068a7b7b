"""``ol-dagster check`` of a Marquez catalog.

``GET /api/v1/namespaces`` (the client's clock call) and its ``Date``; ``GET /api/v1/lineage``
answers (Marquez's own 404 for a node that does not exist counts); the job and dataset deletes
reach Marquez (``DELETE`` of a fresh name: its 404 names it, a proxy's refusal does not). The
dataset probe's namespace holds ``/`` (``ol-dagster-check://probe``, as ``s3://bucket`` does),
sent as ``%2F`` in one path segment: a proxy or server that decodes it, or refuses it, answers for
another path, and the datasets of such namespaces could never be cleaned. Marquez has no
authentication of its own: said, not checked.
"""

from __future__ import annotations

import uuid

from ol_dagster.catalog.check.findings import Finding
from ol_dagster.catalog.check.probe import (
    PROBE_NAMESPACE,
    Answer,
    NoAnswer,
    catalog_client,
    clock,
    reachable,
)
from ol_dagster.catalog.kind import CheckContext
from ol_dagster.catalog.marquez.catalog import LINEAGE, MarquezCatalog, segment
from ol_dagster.catalog.marquez.settings import MarquezCatalogSettings

# Marquez: the deletes of the client (by namespace and name)
MARQUEZ_JOB = "/api/v1/namespaces/{namespace}/jobs/{name}"
MARQUEZ_DATASET = "/api/v1/namespaces/{namespace}/datasets/{name}"
# a namespace with "/" (and ":"), as dataset namespaces have them: encoded whole in its segment
SLASHED_NAMESPACE = f"{PROBE_NAMESPACE}://probe"


def check_marquez(cfg: MarquezCatalogSettings, context: CheckContext) -> list[Finding]:
    at = context.opening

    def backend() -> MarquezCatalog:
        return MarquezCatalog(at.name, cfg, store_url=at.store_url, definition=at.definition)

    with catalog_client(backend, cfg, ledger=True) as client:
        if isinstance(client, Finding):
            return [client]
        prober = client.prober
        clock_path, clock_params = MarquezCatalog.clock_call  # the client's own clock call
        found, listed = reachable(prober, "GET", clock_path, params=clock_params)
        findings = [found]
        if listed is None:
            return findings
        body = listed.json()
        ok = listed.status == 200 and isinstance(body, dict) and "namespaces" in body
        findings.append(
            Finding(
                f"GET {clock_path}",
                ok,
                f"{len(body['namespaces'])} namespace(s) on the first page"
                if ok and isinstance(body, dict)
                else prober.said(listed)
                + (
                    " (a proxy in front of Marquez refuses the token)"
                    if listed.status in (401, 403)
                    else ""
                ),
            )
        )
        findings.append(clock(listed, f"GET {clock_path}"))

        probe = f"probe-{uuid.uuid4().hex}"

        def marquez_answered(answer: Answer) -> bool:
            """A 2xx, or Marquez's own 404 naming what the probe asked for (a missing route
            or a proxy answers otherwise)."""
            if 200 <= answer.status < 300:
                return True
            message = answer.message()
            return answer.status == 404 and (probe in message or PROBE_NAMESPACE in message)

        checks = [
            (
                f"GET {LINEAGE}",
                "GET",
                LINEAGE,
                {"nodeId": f"job:{PROBE_NAMESPACE}:{probe}"},
                "the lineage endpoint answers",
            ),
            (
                "job delete",
                "DELETE",
                MARQUEZ_JOB.format(namespace=segment(PROBE_NAMESPACE), name=segment(probe)),
                None,
                "DELETE reaches Marquez (a job that cannot exist: nothing removed)",
            ),
            (
                "dataset delete",
                "DELETE",
                MARQUEZ_DATASET.format(namespace=segment(SLASHED_NAMESPACE), name=segment(probe)),
                None,
                "DELETE reaches Marquez, a namespace with '/' included (a dataset that cannot "
                "exist: nothing removed)",
            ),
        ]
        for label, method, path, params, meaning in checks:
            try:
                answer = prober.ask(method, path, params=params)
            except NoAnswer as exc:
                findings.append(Finding(label, False, str(exc)))
                continue
            good = marquez_answered(answer)
            slashed = "%2F" in path
            findings.append(
                Finding(
                    label,
                    good,
                    meaning
                    if good
                    else f"{method} {path.replace(probe, '<probe>')}: {prober.said(answer)}"
                    + (
                        " (a namespace with '/' must reach Marquez as %2F in one path segment: "
                        "a proxy decoding it answers for another path)"
                        if slashed
                        else ""
                    ),
                )
            )
        findings.append(
            Finding(
                "authentication",
                True,
                "Marquez has none: whoever reaches it may write and delete"
                + ("; the token goes to the proxy in front" if cfg.token else ""),
                needed_by_sync=False,
            )
        )
        return findings
