"""``ol-dagster check``: what a definition's sync needs, asked of its store and catalog up front.

Without it, a wrong token, a missing permission or a disabled endpoint shows up late: after the
receiver accepted a batch, when its upload fails, or worse when its cleanup is refused and the
ledger keeps what it could not remove. ``check`` asks each question once, writes nothing, and
prints a table of what holds and what does not: the first thing to run against a real catalog.

Every kind: the settings load, the event store opens (at its schema version), the catalog answers.

* **embedded**: the database opens, every table and column of this version is there, its clock
  answers, and the cleanup user holds ``SYSTEMS_ADMIN`` (the embedded cleanup refuses without).
* **OpenMetadata**: ``GET /api/v1/system/version`` (no token needed on the real server:
  ``JwtFilter.EXCLUDED_ENDPOINTS``), so the token is checked by ``GET
  /api/v1/users/loggedInUser`` (401: the token is wrong); the ``Date`` header and its skew;
  ``EditLineage`` (needed) and ``Create`` (tables it may create) on ``table`` from ``GET
  /api/v1/permissions/table`` (``PermissionsResource``, a ``ResourcePermission``); the OpenLineage
  endpoint, with one START event without datasets, which the server authorizes (EditLineage) and
  then skips before resolving anything (``OpenLineageMapper.mapRunEvent``): 503 means it is
  disabled; and each dataset namespace of the definition's stored RunEvents: its
  ``serviceMapping`` entry and ``GET /api/v1/services/databaseServices/name/{service}``.
* **Marquez**: ``GET /api/v1/namespaces`` (the client's clock call) and its ``Date``; ``GET
  /api/v1/lineage`` answers (Marquez's own 404 for a node that does not exist counts); the job
  and dataset deletes reach Marquez (``DELETE`` of a fresh name: its 404 names it, a proxy's
  refusal does not). Marquez has no authentication of its own: said, not checked.
* **Blindata**: the client's clock call (reachable, credentials, ``Date``); ``SYSTEMS_ADMIN`` by
  the client's own dry-run flow cleanup with a cutoff nothing is older than (403: missing); and
  every call ``blindata_api.INFERRED_CALLS`` lists answers something other than 404/405: GETs
  directly, cleanups as dry runs, writes by ``OPTIONS`` (Spring MVC answers it with ``Allow``
  for a mapped path; without an ``Allow`` the call is reported as not verified).

A finding carries whether the sync needs it (``needed_by_sync``): only those decide the exit
code; the others (clock skew, an unmapped namespace, ``Create``) are warnings. Secrets are never
printed: every detail is scrubbed of the resolved token and API key, URLs lose their passwords.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx
from sqlalchemy.engine import make_url

from ol_dagster.catalog.http import CatalogRefused, CatalogUnavailable, server_time
from ol_dagster.settings import (
    BlindataCatalogSettings,
    EmbeddedCatalogSettings,
    HttpCatalogSettings,
    MarquezCatalogSettings,
    OpenMetadataCatalogSettings,
    Settings,
    SettingsError,
    SyncDefinition,
)

# OpenMetadata reads of the check (the client's own paths are imported from its module)
OM_LOGGED_IN_USER = "/api/v1/users/loggedInUser"
OM_PERMISSIONS = "/api/v1/permissions/{resource}"
OM_DATABASE_SERVICE = "/api/v1/services/databaseServices/name/{name}"
OM_EDIT_LINEAGE = "EditLineage"
OM_CREATE = "Create"
OM_GRANTED = frozenset({"allow", "conditionalAllow"})
# Marquez: the deletes of the client (by namespace and name)
MARQUEZ_JOB = "/api/v1/namespaces/{namespace}/jobs/{name}"
MARQUEZ_DATASET = "/api/v1/namespaces/{namespace}/datasets/{name}"

PROBE_NAMESPACE = "ol-dagster-check"  # a namespace no producer writes: the probes' names
PROBE_PRODUCER = "urn:ol-dagster:check"  # an absolute URI, as the schema wants; no URL to claim
PROBE_SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
NIL_UUID = "00000000-0000-0000-0000-000000000000"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)  # a cleanup cutoff nothing is older than
MAX_SKEW_SECONDS = 300.0
MAX_TIMEOUT_SECONDS = 15.0
MAX_NAMESPACES = 100  # listed one by one; more are summed up in one line


@dataclass(frozen=True, slots=True)
class Finding:
    name: str
    holds: bool
    detail: str
    needed_by_sync: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {
            "check": self.name,
            "holds": self.holds,
            "detail": self.detail,
            "neededBySync": self.needed_by_sync,
        }


@dataclass(slots=True)
class Report:
    definition: str | None
    catalog: str
    kind: str
    url: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def missing(self) -> list[Finding]:
        return [f for f in self.findings if f.needed_by_sync and not f.holds]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if not f.needed_by_sync and not f.holds]

    @property
    def ok(self) -> bool:
        return not self.missing

    def summary(self) -> str:
        warned = f", {len(self.warnings)} warning(s)" if self.warnings else ""
        if self.ok:
            needed = sum(1 for f in self.findings if f.needed_by_sync)
            return f"ready: all {needed} checks the sync needs hold{warned}"
        first = self.missing[0]
        more = f" (and {len(self.missing) - 1} more)" if len(self.missing) > 1 else ""
        return f"NOT READY: {first.name}: {first.detail}{more}{warned}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "definition": self.definition,
            "catalog": self.catalog,
            "kind": self.kind,
            "url": self.url,
            "ok": self.ok,
            "summary": self.summary(),
            "findings": [f.as_dict() for f in self.findings],
        }


def render(report: Report) -> str:
    """The table a person reads: check, holds, detail; then the summary line."""
    scope = f"definition {report.definition!r}, " if report.definition else ""
    head = f"{scope}catalog {report.catalog!r} ({report.kind} at {report.url})"
    rows = [("check", "holds", "detail")]
    for f in report.findings:
        holds = "yes" if f.holds else "no"
        rows.append(
            (f.name, holds, f.detail if f.needed_by_sync or f.holds else f"(warning) {f.detail}")
        )
    width = min(max(len(r[0]) for r in rows), 48)
    lines = [head, ""]
    lines += [f"{name:<{width}}  {holds:<5}  {detail}" for name, holds, detail in rows]
    lines += ["", report.summary()]
    return "\n".join(lines)


def safe_url(url: str) -> str:
    """A URL without its password (a database URL may hold one)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a database URL: an HTTP one, shown without userinfo
        parts = httpx.URL(url)
        return str(parts.copy_with(username=None, password=None)) if parts.userinfo else url


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _skew(server: datetime, local: datetime) -> str:
    seconds = (server - local).total_seconds()
    if abs(seconds) < 2:  # the Date header counts whole seconds
        return "in step with this machine"
    return f"{abs(seconds):.0f} s {'ahead of' if seconds > 0 else 'behind'} this machine"


# -- HTTP probes -----------------------------------------------------------------------------------


class NoAnswer(Exception):
    """The server gave no HTTP answer (connection refused, timeout...): one line why."""


@dataclass(frozen=True, slots=True)
class Answer:
    response: httpx.Response
    local: datetime  # this machine's time in the middle of the exchange

    @property
    def status(self) -> int:
        return self.response.status_code

    def json(self) -> Any:
        try:
            return self.response.json() if self.response.content else None
        except ValueError:
            return None

    def message(self) -> str:
        """The server's own words (OpenMetadata/Marquez ``message``, Blindata ``message``)."""
        body = self.json()
        if isinstance(body, dict):
            for key in ("message", "error", "errors"):
                if body.get(key):
                    return _one_line(str(body[key]))
        return _one_line(self.response.text) if self.response.text else ""


class Prober:
    """Sends one request at a time, without retries (a check is asked once), through the
    client's own ``httpx.Client`` (its base URL, auth headers and tenant); scrubs secrets."""

    def __init__(self, client: httpx.Client, timeout: float, secrets: list[str]) -> None:
        self.client = client
        self.timeout = min(timeout, MAX_TIMEOUT_SECONDS)
        self.secrets = [s for s in secrets if s]

    def scrub(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text

    def ask(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json_body: Any = None,
    ) -> Answer:
        started = time.time()
        try:
            response = self.client.request(
                method, path, params=params, json=json_body, timeout=self.timeout
            )
        except httpx.HTTPError as exc:
            reason = str(exc) or "no answer"
            raise NoAnswer(self.scrub(_one_line(f"{type(exc).__name__}: {reason}"))) from None
        middle = (started + time.time()) / 2
        return Answer(response, datetime.fromtimestamp(middle, UTC))

    def said(self, answer: Answer) -> str:
        """``HTTP <status>`` and the server's message, scrubbed."""
        message = answer.message()
        return self.scrub(f"HTTP {answer.status}" + (f": {message}" if message else ""))


def _clock(answer: Answer, where: str) -> Finding:
    """The sync reads the catalog's time from ``Date``: without it the upload fails; a skew is
    only a warning (cutoffs are the catalog's own time)."""
    when = server_time(answer.response)
    if when is None:
        return Finding("clock", False, f"{where} answered without a Date header")
    skew = abs((when - answer.local).total_seconds())
    return Finding(
        "clock",
        skew <= MAX_SKEW_SECONDS,
        f"Date {when:%Y-%m-%d %H:%M:%S}Z, {_skew(when, answer.local)}",
        needed_by_sync=skew <= MAX_SKEW_SECONDS,
    )


def _reachable(prober: Prober, method: str, path: str, **kw: Any) -> tuple[Finding, Answer | None]:
    """Any answer but a 5xx: a proxy's 502 or a server's 503 is a catalog that is down (the
    client's retries would not outlast it either); nothing else is asked then."""
    try:
        answer = prober.ask(method, path, **kw)
    except NoAnswer as exc:
        return Finding("reachable", False, f"{method} {path}: {exc}"), None
    if answer.status >= 500:
        return Finding("reachable", False, f"{method} {path}: {prober.said(answer)}"), None
    return Finding("reachable", True, f"{method} {path} answered HTTP {answer.status}"), answer


def _secrets(cfg: HttpCatalogSettings) -> list[str]:
    out = []
    for secret in cfg.secrets():
        with suppress(SettingsError):  # a missing secret is reported where it is used
            out.append(secret.resolve())
    return out


# -- the event store -------------------------------------------------------------------------------


def _store(settings: Settings) -> tuple[Finding, Any]:
    from ol_dagster.store import EventStore

    where = safe_url(settings.store.url)
    try:
        store = EventStore(settings.store.url)
        store.ping()
    except Exception as exc:  # noqa: BLE001 - any failure to open it is the finding
        return Finding("event store", False, f"{where}: {_one_line(str(exc))}"), None
    return Finding("event store", True, f"{where}, schema version {store.schema_version}"), store


def stored_dataset_namespaces(store: Any, definition: str) -> Counter[str]:
    """How often each dataset namespace appears in the definition's stored RunEvents (the only
    events OpenMetadata takes), as the producer wrote it."""
    counts: Counter[str] = Counter()
    far = datetime(9999, 12, 31, tzinfo=UTC)
    for raw in store.iter_events_between(datetime(1, 1, 2, tzinfo=UTC), far, definition=definition):
        try:
            doc = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("run"), dict):
            continue
        for key in ("inputs", "outputs"):
            for ds in doc.get(key) or []:
                if isinstance(ds, dict) and isinstance(ds.get("namespace"), str):
                    counts[ds["namespace"]] += 1
    return counts


# -- per kind --------------------------------------------------------------------------------------


def check_embedded(cfg: EmbeddedCatalogSettings) -> list[Finding]:
    from sqlalchemy import inspect, select

    from ol_dagster.catalog.embedded import EmbeddedCatalog
    from ol_dagster.catalog.embedded.tables import SYSTEMS_ADMIN, metadata, users

    where = safe_url(cfg.url)
    try:
        catalog = EmbeddedCatalog(cfg.url, user=cfg.user)
    except Exception as exc:  # noqa: BLE001 - the database that does not open is the finding
        return [Finding("database", False, f"{where}: {_one_line(str(exc))}")]
    findings = [Finding("database", True, f"{where} opens ({catalog.engine.dialect.name})")]
    try:
        with catalog.engine.connect() as conn:
            found = inspect(conn)
            missing = []
            for table in metadata.sorted_tables:
                if not found.has_table(table.name):
                    missing.append(table.name)
                    continue
                present = {c["name"] for c in found.get_columns(table.name)}
                missing += [
                    f"{table.name}.{c.name}" for c in table.columns if c.name not in present
                ]
            perms = conn.execute(
                select(users.c.permissions).where(users.c.name == cfg.user)
            ).scalar()
        findings.append(
            Finding(
                "schema current",
                not missing,
                f"missing: {', '.join(missing[:10])}"
                if missing
                else f"all {len(metadata.sorted_tables)} tables of this version, every column",
            )
        )
        local = datetime.now(UTC)
        when = catalog.clock()
        findings.append(Finding("clock", True, f"the database's time, {_skew(when, local)}", False))
        admin = SYSTEMS_ADMIN in (perms or [])
        findings.append(
            Finding(
                f"{SYSTEMS_ADMIN} ({cfg.user})",
                admin,
                "the cleanup user may clean"
                if admin
                else f"user {cfg.user!r} lacks {SYSTEMS_ADMIN}: every cleanup is refused",
            )
        )
    finally:
        catalog.close()
    return findings


def check_openmetadata(
    name: str,
    cfg: OpenMetadataCatalogSettings,
    settings: Settings,
    definition: SyncDefinition | None,
    store: Any,
) -> list[Finding]:
    from ol_dagster.catalog.openmetadata import BATCH, VERSION, OpenMetadataCatalog, service_for

    with _client(OpenMetadataCatalog, name, cfg, settings, definition) as client:
        if isinstance(client, Finding):
            return [client]
        prober = client.prober
        found, version = _reachable(prober, "GET", VERSION)
        findings = [found]
        if version is None:
            return findings
        body = version.json()
        if version.status == 200 and isinstance(body, dict) and body.get("version"):
            findings[0] = Finding("reachable", True, f"OpenMetadata {body['version']}")

        try:
            me = prober.ask("GET", OM_LOGGED_IN_USER)
        except NoAnswer as exc:
            return [*findings, Finding("token", False, str(exc))]
        if me.status == 200 and isinstance(me.json(), dict):
            user = me.json()
            bot = " (bot)" if user.get("isBot") else ""
            findings.append(Finding("token", True, f"authenticates {user.get('name')!r}{bot}"))
        else:
            what = {401: "the token is wrong or expired", 403: "refused"}.get(me.status, "answered")
            findings.append(
                Finding("token", False, f"GET {OM_LOGGED_IN_USER}: {what} ({prober.said(me)})")
            )
        token_holds = findings[-1].holds
        # the client's clock is the Date of its authenticated read (the version needs no token)
        dated = (me, OM_LOGGED_IN_USER) if token_holds else (version, VERSION)
        findings.append(_clock(dated[0], f"GET {dated[1]}"))
        if not token_holds:
            untested = "not checked: the token is refused"
            findings += [
                Finding(f"{OM_EDIT_LINEAGE} on table", False, untested),
                Finding("OpenLineage endpoint", False, untested),
            ]
            return findings

        findings += _om_permissions(prober)
        findings.append(_om_openlineage_endpoint(prober, BATCH))
        if definition is not None and store is not None:
            findings += _om_namespaces(
                prober, stored_dataset_namespaces(store, definition.name), cfg, service_for
            )
        elif definition is not None:
            findings.append(
                Finding("namespaces", False, "not checked: the event store does not open", False)
            )
        return findings


def _om_permissions(prober: Prober) -> list[Finding]:
    path = OM_PERMISSIONS.format(resource="table")
    try:
        answer = prober.ask("GET", path)
    except NoAnswer as exc:
        return [Finding(f"{OM_EDIT_LINEAGE} on table", False, str(exc))]
    body = answer.json()
    if answer.status != 200 or not isinstance(body, dict):
        return [Finding(f"{OM_EDIT_LINEAGE} on table", False, f"GET {path}: {prober.said(answer)}")]
    access = {
        str(p.get("operation")): str(p.get("access"))
        for p in body.get("permissions") or []
        if isinstance(p, dict)
    }
    edit = access.get(OM_EDIT_LINEAGE, "not listed")
    create = access.get(OM_CREATE, "not listed")
    return [
        Finding(
            f"{OM_EDIT_LINEAGE} on table",
            edit in OM_GRANTED,
            f"{edit}: the upload and every edge delete need it"
            + (" (conditional: each table's conditions decide)" if edit.startswith("cond") else ""),
        ),
        Finding(
            f"{OM_CREATE} on table",
            create in OM_GRANTED,
            f"{create}: "
            + (
                "OpenMetadata may create the tables it cannot find"
                if create in OM_GRANTED
                else "tables OpenMetadata cannot find are not created (their datasets are dropped)"
            ),
            needed_by_sync=False,
        ),
    ]


def _om_openlineage_endpoint(prober: Prober, batch: str) -> Finding:
    """One START event without datasets: authorized like every upload, then skipped by the
    mapper before it resolves or writes anything."""
    probe = {
        "eventType": "START",
        "eventTime": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "producer": PROBE_PRODUCER,
        "schemaURL": PROBE_SCHEMA_URL,
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": PROBE_NAMESPACE, "name": "probe"},
    }
    name = "OpenLineage endpoint"
    try:
        answer = prober.ask("POST", batch, json_body={"events": [probe]})
    except NoAnswer as exc:
        return Finding(name, False, str(exc))
    body = answer.json()
    summary = body.get("summary") if isinstance(body, dict) else None
    if answer.status == 200 and isinstance(summary, dict):
        return Finding(
            name, True, f"POST {batch} enabled (a START probe without datasets, skipped)"
        )
    reasons = {
        503: "disabled in OpenMetadata's OpenLineage settings",
        403: f"{OM_EDIT_LINEAGE} refused on it",
        404: "not there (an OpenMetadata without the OpenLineage API)",
        405: "not there (an OpenMetadata without the OpenLineage API)",
    }
    why = reasons.get(answer.status, "answered")
    return Finding(name, False, f"POST {batch}: {why} ({prober.said(answer)})")


def _om_namespaces(
    prober: Prober, namespaces: Counter[str], cfg: OpenMetadataCatalogSettings, service_for: Any
) -> list[Finding]:
    if not namespaces:
        return [
            Finding(
                "namespaces",
                True,
                "no stored RunEvents with datasets yet: run check again after the first batch",
                needed_by_sync=False,
            )
        ]
    exists: dict[str, tuple[bool, str]] = {}

    def service_exists(service: str) -> tuple[bool, str]:
        if service not in exists:
            # a service's FQN is its name, quoted when it holds a dot (FullyQualifiedName)
            fqn = f'"{service}"' if "." in service and not service.startswith('"') else service
            path = OM_DATABASE_SERVICE.format(name=quote(fqn, safe=""))
            try:
                answer = prober.ask("GET", path)
            except NoAnswer as exc:
                exists[service] = (False, str(exc))
            else:
                found = answer.status == 200
                exists[service] = (
                    found,
                    "exists" if found else f"GET {path}: {prober.said(answer)}",
                )
        return exists[service]

    findings = []
    ordered = sorted(namespaces.items(), key=lambda kv: (-kv[1], kv[0]))
    for namespace, count in ordered[:MAX_NAMESPACES]:
        label = f"namespace {namespace}"
        service = service_for(namespace, cfg.serviceMapping)
        if service is None:
            findings.append(
                Finding(
                    label,
                    False,
                    f"{count} dataset(s), no serviceMapping entry: OpenMetadata can only match "
                    "tables that already exist for it (its namespaceToServiceMapping must agree)",
                    needed_by_sync=False,
                )
            )
            continue
        found, detail = service_exists(service)
        findings.append(
            Finding(
                label,
                found,
                f"-> database service {service!r}: {detail}"
                if found
                else f"-> database service {service!r}, not in OpenMetadata ({detail})",
            )
        )
    rest = ordered[MAX_NAMESPACES:]
    if rest:
        unmapped = sum(1 for ns, _ in rest if service_for(ns, cfg.serviceMapping) is None)
        findings.append(
            Finding(
                f"{len(rest)} more namespace(s)",
                unmapped == 0,
                f"{unmapped} of them without a serviceMapping entry (not listed one by one)",
                needed_by_sync=False,
            )
        )
    return findings


def check_marquez(
    name: str, cfg: MarquezCatalogSettings, settings: Settings, definition: SyncDefinition | None
) -> list[Finding]:
    from ol_dagster.catalog.marquez import LINEAGE, MarquezCatalog, segment

    with _client(MarquezCatalog, name, cfg, settings, definition) as client:
        if isinstance(client, Finding):
            return [client]
        prober = client.prober
        clock_path, clock_params = MarquezCatalog.clock_call  # the client's own clock call
        found, listed = _reachable(prober, "GET", clock_path, params=clock_params)
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
        findings.append(_clock(listed, f"GET {clock_path}"))

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
                MARQUEZ_DATASET.format(namespace=segment(PROBE_NAMESPACE), name=segment(probe)),
                None,
                "DELETE reaches Marquez (a dataset that cannot exist: nothing removed)",
            ),
        ]
        for label, method, path, params, meaning in checks:
            try:
                answer = prober.ask(method, path, params=params)
            except NoAnswer as exc:
                findings.append(Finding(label, False, str(exc)))
                continue
            good = marquez_answered(answer)
            findings.append(
                Finding(
                    label,
                    good,
                    meaning
                    if good
                    else f"{method} {path.replace(probe, '<probe>')}: {prober.said(answer)}",
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


def check_blindata(
    name: str, cfg: BlindataCatalogSettings, settings: Settings, definition: SyncDefinition | None
) -> list[Finding]:
    from ol_dagster.catalog import blindata_api as api
    from ol_dagster.catalog.blindata import BlindataCatalog
    from ol_dagster.catalog.protocol import CleanupPermissionDenied
    from ol_dagster.lineage.graph import scope_prefix

    with _client(BlindataCatalog, name, cfg, settings, definition) as client:
        if isinstance(client, Finding):
            return [client]
        prober = client.prober
        catalog = client.catalog
        found, first = _reachable(prober, "GET", api.CLOCK_PATH, params=api.CLOCK_PARAMS)
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
        findings.append(_clock(first, f"GET {api.CLOCK_PATH}"))
        if not token:
            findings.append(Finding("SYSTEMS_ADMIN", False, f"not checked: the {kind} is refused"))
            return findings

        results: dict[tuple[str, str], Finding] = {}
        label = {call: f"{call[0]} {call[1]} [I]" for call in api.INFERRED_CALLS}

        # the client's own dry-run flow cleanup: the path, and SYSTEMS_ADMIN (403 without it)
        namespaces = [
            n for n in (definition.allowedJobNamespaces if definition else []) if n != "*"
        ]
        prefix = scope_prefix(namespaces[0] if namespaces else PROBE_NAMESPACE)
        flows = ("POST", api.DATA_FLOWS_CLEANUP)
        try:
            catalog.cleanup_flows(scope_prefixes=[prefix], before=EPOCH, dry_run=True)
        except CleanupPermissionDenied as exc:
            findings.append(Finding("SYSTEMS_ADMIN", False, prober.scrub(_one_line(str(exc)))))
            results[flows] = Finding(
                label[flows], False, "not verified: 403 (SYSTEMS_ADMIN)", False
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
            results[flows] = Finding(label[flows], True, "a dry run answers (nothing matched)")

        system = _some_system(prober, api, definition)
        cleanup = ("POST", api.SYSTEM_CLEANUP)
        if system is not None and cleanup in label:
            try:
                catalog.cleanup_dataset_system(system, before=EPOCH, dry_run=True)
            except CleanupPermissionDenied:
                results[cleanup] = Finding(
                    label[cleanup], False, "not verified: 403 (SYSTEMS_ADMIN)", False
                )
            except (CatalogRefused, CatalogUnavailable) as exc:
                detail = _refused(exc) if isinstance(exc, CatalogRefused) else str(exc)
                results[cleanup] = Finding(label[cleanup], False, prober.scrub(detail))
            else:
                results[cleanup] = Finding(
                    label[cleanup], True, f"a dry run on System {system!r} answers"
                )

        for call in api.INFERRED_CALLS:
            if call not in results:
                results[call] = _blindata_path(
                    prober, call, label[call], api.PAGE_PARAM, api.SIZE_PARAM
                )
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
        + (f": {_one_line(str(message))}" if message else "")
        + (" (no such call on this server)" if gone else "")
    )


def _some_system(prober: Prober, api: Any, definition: SyncDefinition | None) -> str | None:
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


def _blindata_path(
    prober: Prober, call: tuple[str, str], label: str, page: str, size: str
) -> Finding:
    method, template = call
    path = template.format(uuid=NIL_UUID)
    try:
        if method == "GET":
            answer = prober.ask("GET", path, params={page: 0, size: 1})
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
    return Finding(
        label,
        False,
        f"not verified without writing: OPTIONS answered {prober.said(answer)} without Allow",
        needed_by_sync=False,
    )


@dataclass(frozen=True, slots=True)
class _Client:
    prober: Prober
    catalog: Any  # the backend itself, for the calls the check makes its own way (dry runs)


@contextmanager
def _client(
    backend: Any,
    name: str,
    cfg: HttpCatalogSettings,
    settings: Settings,
    definition: SyncDefinition | None,
) -> Iterator[_Client | Finding]:
    """The catalog's own client (its URL, headers and timeout), or the finding why it cannot be
    opened (a secret not in the environment...)."""
    try:
        catalog = backend(
            name,
            cfg,
            store_url=settings.store.url,
            definition=definition.name if definition else "",
        )
    except SettingsError as exc:
        yield Finding("credentials", False, str(exc))
        return
    except Exception as exc:  # noqa: BLE001 - e.g. the ledger's tables in an unreachable store
        ledger = not isinstance(cfg, BlindataCatalogSettings)  # Blindata cleans by scope itself
        where = "its sync ledger is in the event store: " if ledger else ""
        yield Finding("catalog client", False, f"cannot open ({where}{_one_line(str(exc))})")
        return
    try:
        yield _Client(Prober(catalog.http.client, cfg.timeoutSeconds, _secrets(cfg)), catalog)
    finally:
        catalog.close()


# -- the whole check -------------------------------------------------------------------------------


def check(settings: Settings, definitions: list[SyncDefinition], *, source: str) -> list[Report]:
    """One report per definition (its catalog), or per catalog when there is no definition."""
    targets: list[tuple[SyncDefinition | None, str]] = (
        [(d, key) for d in definitions for key in d.catalog_keys]
        if definitions
        else [(None, name) for name in settings.catalogs]
    )
    store_finding, store = _store(settings)
    try:
        reports = []
        for definition, name in targets:
            cfg = settings.catalogs[name]
            report = Report(
                definition.name if definition else None,
                name,
                cfg.kind,
                safe_url(cfg.url),
                [Finding("settings", True, f"{source} loads"), store_finding],
            )
            if cfg.kind == "embedded":
                report.findings += check_embedded(cfg)
            elif cfg.kind == "openmetadata":
                report.findings += check_openmetadata(name, cfg, settings, definition, store)
            elif cfg.kind == "marquez":
                report.findings += check_marquez(name, cfg, settings, definition)
            else:
                report.findings += check_blindata(name, cfg, settings, definition)
            reports.append(report)
        return reports
    finally:
        if store is not None:
            store.dispose()
