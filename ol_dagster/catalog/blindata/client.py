"""The Blindata transport: credentials, retries, paging, upserts and concurrent row writes.

Everything that speaks HTTP to Blindata goes through one ``BlindataClient``, so the secrets it
sends are the ones it scrubs from every error, failed row and log line, and the rules for a
paged search, a create answered ``409`` and a refused row are written once. The paths themselves
are in ``api``; the finders, the upload, the cleanup and the reads only compose them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

from ol_dagster.catalog.blindata import api
from ol_dagster.catalog.blindata.settings import BlindataCatalogSettings
from ol_dagster.catalog.blindata.shapes import json_body, uuid_of
from ol_dagster.catalog.http import (
    CatalogRefused,
    CatalogUnavailable,
    HttpCatalogClient,
    MayHaveLanded,
    server_time,
)
from ol_dagster.catalog.protocol import FailedRow, UploadResult
from ol_dagster.settings_base import SettingsError

Write = Callable[[], tuple[str, bool]]  # one row's write: its uuid, and whether it was created
CREATED, EXISTED, LANDED = "created", "existed", "landed"  # what ``BlindataClient.create`` found


class UploadStopped(Exception):
    """A failure that every later call would repeat (server down, credentials refused)."""


@dataclass(slots=True)
class Rows:
    """The outcome of one step's row writes."""

    values: dict[Any, Any] = field(default_factory=dict)
    written: int = 0
    touched: int = 0


class BlindataClient:
    """One Blindata tenant over HTTP, with the credentials read from the environment at open."""

    def __init__(
        self,
        name: str,
        cfg: BlindataCatalogSettings,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.name = name
        self.secrets: list[str] = []
        self.http = HttpCatalogClient.for_catalog(
            cfg, self.headers(cfg), transport=transport, sleep=sleep
        )
        self.workers = max(1, cfg.concurrency)
        # cleanup endpoints whose answers confirmed a dry run (``cleanup._cleanup_call``)
        self.dry_runs_confirmed: set[str] = set()

    def close(self) -> None:
        self.http.close()

    def headers(self, cfg: BlindataCatalogSettings) -> dict[str, str]:
        """Tenant and credentials; secrets come from the environment, here, when it opens."""
        headers = {"Accept": "application/json", api.HEADER_TENANT: cfg.tenant or ""}
        if cfg.token is not None:
            token = cfg.token.resolve()
            self.secrets.append(token)
            headers[api.HEADER_AUTHORIZATION] = f"Bearer {token}"
        elif cfg.apiKey is not None:
            key = cfg.apiKey.resolve()
            self.secrets.append(key)
            headers[api.HEADER_USER] = cfg.user
            headers[api.HEADER_API_KEY] = key
        else:
            raise SettingsError(
                f"catalog {self.name!r}: a blindata catalog needs 'token' (a bearer token) or "
                "'apiKey' (with 'user'), each as {env: NAME}"
            )
        return headers

    def scrub(self, text: str) -> str:
        for secret in self.secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

    def reason(self, exc: Exception) -> str:
        """What went wrong, for a failed row: the call and status, and the server's message."""
        text = str(exc)
        if isinstance(exc, CatalogRefused) and exc.body:
            try:
                body = json.loads(exc.body)
            except ValueError:
                body = None
            if isinstance(body, dict):
                detail = " ".join(
                    str(body[k]) for k in ("errorName", "message") if body.get(k) is not None
                )
                if detail:
                    text = f"{text}: {detail}"
        return self.scrub(text)[:500]

    def get(self, path: str, params: Mapping[str, Any] | None = None) -> httpx.Response:
        return self.http.request("GET", path, params=params)

    def pages(self, path: str, params: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        """Every item of a paged search (Spring Data pages: ``content``, ``last``, ...)."""
        page = 0
        previous_first: Any = None
        while True:
            body = json_body(
                self.get(path, {**params, api.PAGE_PARAM: page, api.SIZE_PARAM: api.PAGE_SIZE})
            )
            content = body.get("content") if isinstance(body, dict) else body
            if not isinstance(content, list) or not content:
                return
            first = content[0].get("uuid") if isinstance(content[0], dict) else None
            if page and first is not None and first == previous_first:
                return  # the server ignores paging: this page was already read
            previous_first = first
            yield from (c for c in content if isinstance(c, dict))
            if not isinstance(body, dict):
                return
            if body.get("last") is True:
                return
            total_pages = body.get("totalPages")
            if isinstance(total_pages, int) and page + 1 >= total_pages:
                return
            if "last" not in body and total_pages is None and len(content) < api.PAGE_SIZE:
                return
            page += 1

    def clock(self) -> datetime:
        """The server's time: the ``Date`` header of an authenticated cheap call (whole seconds,
        rounded down, so everything the server stamps after the call is at or after it)."""
        # a run starts by reading the clock: each run has the server confirm its dry runs again
        self.dry_runs_confirmed.clear()
        response = self.get(api.CLOCK_PATH, api.CLOCK_PARAMS)
        now = server_time(response)
        if now is None:
            raise CatalogUnavailable(f"GET {api.CLOCK_PATH}: the answer has no Date header")
        return now

    def create(
        self, collection: str, body: dict[str, Any], find: Callable[[], str | None]
    ) -> tuple[str, str]:
        """POST one object, created by its natural key: its uuid and ``CREATED``, ``EXISTED``
        (409: read back) or ``LANDED`` (the answer was lost and the object found).

        A create whose answer was lost may have landed, or may still be running: it is never
        sent again before the object was looked for (``find``). Found, the lost attempt made it;
        not found, it is sent again, and if the lost attempt lands first the new one is a 409,
        read back."""
        where = f"POST {collection}"
        retries = self.http.policy.max_retries
        for lost in range(retries + 1):
            try:
                response = self.http.request(
                    "POST", collection, json=body, ok=frozenset({409}), resend_after_timeout=False
                )
            except MayHaveLanded as exc:
                if lost == retries:
                    raise CatalogUnavailable(f"{exc} ({lost + 1} attempt(s))") from None
                self.http.pause(lost)
                uid = find()
                if uid is not None:
                    return uid, LANDED
                continue
            if response.status_code == 409:
                uid = find()
                if uid is None:
                    raise CatalogRefused(
                        f"{where}: HTTP 409 for an object that cannot be found", 409
                    )
                return uid, EXISTED
            uid = uuid_of(json_body(response)) or find()
            if uid is None:
                raise CatalogRefused(
                    f"{where}: created, but the object cannot be found", response.status_code
                )
            return uid, CREATED
        raise AssertionError("unreachable")  # pragma: no cover

    def upsert(
        self,
        collection: str,
        item: str,
        body: dict[str, Any],
        existing: str | None,
        find: Callable[[], str | None],
    ) -> tuple[str, bool]:
        """Create or update one object; returns its uuid and whether this call created it. A
        create found after its answer was lost is written once more by ``PUT`` (idempotent), so
        what the server holds is this body whoever made it."""
        for _ in range(3):
            created = False
            if existing is None:
                existing, how = self.create(collection, body, find)
                if how == CREATED:
                    return existing, True
                created = how == LANDED
            response = self.http.request(
                "PUT",
                item.format(uuid=existing),
                json={**body, "uuid": existing},
                ok=frozenset({404}),
            )
            if response.status_code != 404:
                return existing, created
            existing = None  # deleted in the meantime: create it again
        raise CatalogRefused(f"POST {collection}: the object keeps disappearing", 404)

    def rows(
        self,
        object_type: str,
        items: Sequence[tuple[Any, str, Write]],
        result: UploadResult,
    ) -> Rows:
        """Write rows concurrently: ``(key, label, write)``; a refused row is a failed row, a
        failure every later row would repeat stops the upload (``UploadStopped``)."""
        out = Rows()
        stop = threading.Event()
        lock = threading.Lock()
        fatal: list[str] = []

        def one(entry: tuple[Any, str, Write]) -> None:
            key, label, write = entry
            if stop.is_set():
                return
            try:
                uid, created = write()
            except CatalogUnavailable as exc:
                stop.set()
                with lock:
                    fatal.append(label)
                    result.failed.append(FailedRow(object_type, label, self.reason(exc)))
                return
            except CatalogRefused as exc:
                if exc.status in (401, 403):
                    stop.set()
                    with lock:
                        fatal.append(label)
                with lock:
                    result.failed.append(FailedRow(object_type, label, self.reason(exc)))
                return
            with lock:
                out.values[key] = uid
                if created:
                    out.written += 1
                else:
                    out.touched += 1

        if self.workers == 1 or len(items) <= 1:
            for entry in items:
                one(entry)
        else:
            with ThreadPoolExecutor(self.workers, thread_name_prefix="blindata") as pool:
                list(pool.map(one, items))
        result.written[object_type] = result.written.get(object_type, 0) + out.written
        result.touched[object_type] = result.touched.get(object_type, 0) + out.touched
        if fatal:
            raise UploadStopped(object_type)
        return out
