"""The receiver's HTTP contract, checked against what the event store holds afterwards.

Every scenario posts real requests (in process through Starlette's TestClient, or over loopback
through uvicorn) to an app on a real store (SQLite and PostgreSQL), then reads the store back: it
must hold exactly the events the answer says were accepted, in the batch the contract names.
"""

from __future__ import annotations

import gzip
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from starlette.testclient import TestClient

from ol_dagster.receiver.app import create_app
from ol_dagster.receiver.server import serve_in_background
from ol_dagster.settings import SettingsError, load_settings
from ol_dagster.store import BatchKind, BatchRecord, BatchStatus, EventStore
from ol_dagster_tests.conftest import TOKENS, events_of, run_event

LINEAGE = "/api/v1/lineage"
BATCH = "/api/v1/lineage/batch"
ANSWER_KEYS = {"status", "message", "batchId", "summary", "failedEvents"}


# -- helpers ---------------------------------------------------------------------------------------


def assert_no_token(text_: str) -> None:
    for value in TOKENS.values():
        assert value not in text_, "an answer must never echo a token"


def check_answer(resp: httpx.Response) -> dict[str, Any]:
    """The answer body, after checking it is the documented shape and carries no secret."""
    assert_no_token(resp.text)
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    assert set(body) >= ANSWER_KEYS, body
    assert body["wholeSnapshot"] in (True, False), "every answer says whether it is a snapshot"
    assert body["status"] in ("success", "partial_success", "failure")
    assert set(body["summary"]) == {"received", "accepted", "rejected"}
    for failed in body["failedEvents"]:
        assert set(failed) == {"index", "reason", "retriable"}
    return body


def stored(store: EventStore, definition: str) -> list[tuple[BatchRecord, list[dict]]]:
    """Every batch of the definition with its events parsed back from the stored raw JSON."""
    return [
        (b, [json.loads(e.raw) for e in store.iter_events(b.id)]) for b in store.batches(definition)
    ]


def assert_store_empty(store: EventStore) -> None:
    assert store.batches() == []


@dataclass
class Receiver:
    client: TestClient
    store: EventStore

    def post(
        self,
        path: str,
        body: object = None,
        *,
        token: str | None = TOKENS["OL_TEST_TOKEN_SNAP"],
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        hdrs = {"Content-Type": "application/json"}
        if token is not None:
            hdrs["Authorization"] = f"Bearer {token}"
        hdrs.update(headers or {})
        data = content if content is not None else json.dumps(body).encode()
        resp = self.client.post(path, content=data, headers=hdrs)
        assert_no_token(resp.text)
        return resp


SNAP = TOKENS["OL_TEST_TOKEN_SNAP"]
ADD = TOKENS["OL_TEST_TOKEN_ADD"]


@pytest.fixture
def receiver(
    write_settings: Callable[..., Path], tokens: dict[str, str], event_store: EventStore
) -> Callable[..., Receiver]:
    """Build a receiver on the real store; keyword arguments override the ``snap`` definition."""

    def make(**overrides: Any) -> Receiver:
        settings = load_settings(write_settings(**overrides))
        return Receiver(TestClient(create_app(settings, event_store)), event_store)

    return make


# -- good input ------------------------------------------------------------------------------------


def test_single_events_accumulate_in_the_open_stream_batch(receiver: Callable[..., Receiver]):
    r = receiver()
    first, second = run_event("etl", "load_orders"), run_event("features", "build_features")

    answers = []
    for event in (first, second):
        resp = r.post(LINEAGE, event)
        assert resp.status_code == 200, resp.text
        body = check_answer(resp)
        assert body["status"] == "success"
        assert body["summary"] == {"received": 1, "accepted": 1, "rejected": 0}
        assert body["failedEvents"] == []
        answers.append(body)
    assert isinstance(answers[0]["batchId"], int)
    assert answers[0]["batchId"] == answers[1]["batchId"], "both singles join one open batch"

    [(batch, events)] = stored(r.store, "snap")
    assert batch.id == answers[0]["batchId"]
    assert (batch.kind, batch.status) == (BatchKind.STREAM, BatchStatus.OPEN)
    assert (batch.received_count, batch.accepted_count, batch.rejected_count) == (2, 2, 0)
    assert batch.whole_snapshot is False
    assert events == [first, second]
    indexed = list(r.store.iter_events(batch.id))
    assert [e.position for e in indexed] == [0, 1]
    assert [(e.job_namespace, e.job_name, e.run_id) for e in indexed] == [
        ("etl", "load_orders", first["run"]["runId"]),
        ("features", "build_features", second["run"]["runId"]),
    ]
    assert r.store.batches("add") == [], "the token selects the definition"


def test_the_token_selects_the_definition(receiver: Callable[..., Receiver]):
    r = receiver()
    event = run_event("anything_goes", "job")  # 'add' allows every namespace, 'snap' does not
    resp = r.post(LINEAGE, event, token=ADD)
    assert resp.status_code == 200, resp.text
    [(batch, events)] = stored(r.store, "add")
    assert events == [event]
    assert r.store.batches("snap") == []


def test_good_batch_is_one_sealed_posted_batch(receiver: Callable[..., Receiver]):
    r = receiver()
    posted = events_of(3)
    resp = r.post(BATCH, {"events": posted}, token=ADD)
    assert resp.status_code == 200, resp.text
    body = check_answer(resp)
    assert body["status"] == "success"
    assert body["summary"] == {"received": 3, "accepted": 3, "rejected": 0}
    assert body["failedEvents"] == []
    assert "3" in body["message"]

    [(batch, events)] = stored(r.store, "add")
    assert batch.id == body["batchId"]
    assert (batch.kind, batch.status) == (BatchKind.POSTED, BatchStatus.SEALED)
    assert batch.sealed_at is not None
    assert (batch.received_count, batch.accepted_count, batch.rejected_count) == (3, 3, 0)
    assert batch.whole_snapshot is False, "an ADDITIVE definition never posts whole snapshots"
    assert body["wholeSnapshot"] is False and "snapshot" not in body["message"]
    assert events == posted

    # A later single event does not join the sealed posted batch: it opens a stream batch.
    single = run_event("etl", "late")
    resp = r.post(LINEAGE, single, token=ADD)
    assert resp.status_code == 200
    assert resp.json()["batchId"] != body["batchId"]
    (_, first_events), (stream, stream_events) = stored(r.store, "add")
    assert first_events == posted
    assert (stream.kind, stream.status, stream_events) == (
        BatchKind.STREAM,
        BatchStatus.OPEN,
        [single],
    )


def test_two_batch_posts_are_two_batches_in_order(receiver: Callable[..., Receiver]):
    r = receiver()
    a, b = events_of(2), events_of(1, "features")
    ids = [r.post(BATCH, {"events": batch}).json()["batchId"] for batch in (a, b)]
    assert ids == sorted(ids) and ids[0] != ids[1]
    assert [events for _, events in stored(r.store, "snap")] == [a, b]


def test_snapshot_batch_with_every_event_accepted_is_a_whole_snapshot(
    receiver: Callable[..., Receiver],
):
    r = receiver()
    posted = events_of(2) + events_of(2, "features")
    resp = r.post(BATCH, {"events": posted})
    body = check_answer(resp)
    assert resp.status_code == 200 and body["status"] == "success"
    assert body["wholeSnapshot"] is True
    assert body["message"] == (
        "4 event(s) accepted; stored as a whole snapshot of definition snap: jobs of namespaces "
        "[etl, features] that it does not describe will be removed at the next sync (within "
        "cleanup.maxRemovalsPerRun and cleanup.maxRemovalShare)"
    )
    [(batch, events)] = stored(r.store, "snap")
    assert batch.whole_snapshot is True, "the answer says what the store holds"
    assert events == posted


def test_one_event_to_a_snapshot_definition_is_told_it_is_a_whole_snapshot(
    receiver: Callable[..., Receiver],
):
    """What ``ol-dagster send`` of one event does: the producer learns the post is a snapshot."""
    r = receiver()
    body = check_answer(r.post(BATCH, {"events": [run_event("etl", "only_job")]}))
    assert body["wholeSnapshot"] is True
    assert "whole snapshot of definition snap: jobs of namespaces [etl]" in body["message"]
    [(batch, _)] = stored(r.store, "snap")
    assert batch.whole_snapshot is True


def test_a_snapshot_with_cleanup_disabled_says_nothing_is_removed(
    receiver: Callable[..., Receiver],
):
    r = receiver(cleanup={"enabled": False})
    body = check_answer(r.post(BATCH, {"events": events_of(1)}))
    assert body["wholeSnapshot"] is True
    assert body["message"].endswith("but cleanup.enabled is false: nothing is removed")


def test_a_snapshot_of_dataset_events_only_removes_no_job(receiver: Callable[..., Receiver]):
    r = receiver()
    dataset_event = {
        "eventTime": "2026-11-01T02:00:00Z",
        "producer": "https://example.com/p",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": {"namespace": "postgres://db:5432", "name": "raw.orders"},
    }
    body = check_answer(r.post(BATCH, {"events": [dataset_event]}))
    assert body["wholeSnapshot"] is True
    assert (
        "it describes no job of a namespace it alone writes, so nothing is removed"
        in body["message"]
    )


def test_an_empty_post_to_a_snapshot_definition_is_not_a_snapshot(
    receiver: Callable[..., Receiver],
):
    r = receiver()
    body = check_answer(r.post(BATCH, {"events": []}))
    assert body["wholeSnapshot"] is False
    assert "NOT treated as a snapshot" in body["message"]
    [(batch, _)] = stored(r.store, "snap")
    assert batch.whole_snapshot is False


def test_single_events_are_never_a_whole_snapshot(receiver: Callable[..., Receiver]):
    r = receiver()
    body = check_answer(r.post(LINEAGE, run_event("etl", "single")))
    assert body["wholeSnapshot"] is False and "snapshot" not in body["message"]


def test_empty_batch_is_stored_as_an_empty_batch(receiver: Callable[..., Receiver]):
    r = receiver()
    resp = r.post(BATCH, {"events": []}, token=ADD)
    assert resp.status_code == 200, resp.text
    body = check_answer(resp)
    assert body["status"] == "success"
    assert isinstance(body["batchId"], int)
    assert body["summary"] == {"received": 0, "accepted": 0, "rejected": 0}
    assert body["failedEvents"] == []
    assert "empty" in body["message"]
    [(batch, events)] = stored(r.store, "add")
    assert batch.id == body["batchId"]
    assert (batch.kind, batch.status, batch.accepted_count) == (
        BatchKind.POSTED,
        BatchStatus.SEALED,
        0,
    )
    assert events == []


def test_charset_parameter_on_content_type_is_accepted(receiver: Callable[..., Receiver]):
    r = receiver()
    event = run_event()
    resp = r.post(LINEAGE, event, headers={"Content-Type": "application/json; charset=utf-8"})
    assert resp.status_code == 200, resp.text
    [(_, events)] = stored(r.store, "snap")
    assert events == [event]


# -- gzip and size limits --------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["gzip", "x-gzip"])
def test_gzip_bodies_are_inflated(receiver: Callable[..., Receiver], encoding: str):
    r = receiver()
    batch = events_of(3)
    single = run_event("features", "gz_single")
    headers = {"Content-Encoding": encoding}

    resp = r.post(
        BATCH, content=gzip.compress(json.dumps({"events": batch}).encode()), headers=headers
    )
    assert resp.status_code == 200, resp.text
    body = check_answer(resp)
    assert body["summary"] == {"received": 3, "accepted": 3, "rejected": 0}
    resp = r.post(LINEAGE, content=gzip.compress(json.dumps(single).encode()), headers=headers)
    assert resp.status_code == 200, resp.text

    (posted, posted_events), (stream, stream_events) = stored(r.store, "snap")
    assert posted.kind is BatchKind.POSTED and posted_events == batch
    assert stream.kind is BatchKind.STREAM and stream_events == [single]


def test_multi_member_gzip_body_is_read_whole(receiver: Callable[..., Receiver]):
    """Concatenated gzip members are one body (RFC 1952): no member may be silently dropped."""
    r = receiver()
    batch = events_of(4)
    text = json.dumps({"events": batch}).encode()
    body = gzip.compress(text[: len(text) // 2]) + gzip.compress(text[len(text) // 2 :])
    resp = r.post(BATCH, content=body, headers={"Content-Encoding": "gzip"})
    assert resp.status_code == 200, resp.text
    assert check_answer(resp)["summary"]["accepted"] == 4
    [(_, events)] = stored(r.store, "snap")
    assert events == batch


def test_broken_gzip_and_unknown_encoding_are_refused(receiver: Callable[..., Receiver]):
    r = receiver()
    plain = json.dumps({"events": events_of(1)}).encode()
    resp = r.post(BATCH, content=plain, headers={"Content-Encoding": "gzip"})
    assert resp.status_code == 400
    assert "gzip" in check_answer(resp)["message"]

    truncated = gzip.compress(plain)[:-12]
    resp = r.post(BATCH, content=truncated, headers={"Content-Encoding": "gzip"})
    assert resp.status_code == 400
    assert "gzip" in check_answer(resp)["message"]

    resp = r.post(BATCH, content=plain, headers={"Content-Encoding": "br"})
    assert resp.status_code == 415
    assert "Content-Encoding" in check_answer(resp)["message"]
    assert_store_empty(r.store)


def _bomb(inflated_size: int) -> bytes:
    """A small gzip body that inflates to ``inflated_size`` bytes of (valid-looking) JSON."""
    payload = b'{"events": [], "padding": "' + b"A" * inflated_size + b'"}'
    return gzip.compress(payload, compresslevel=9)


SMALL_LIMITS = {"maxBodyBytes": 2048, "maxEventsPerBatch": 3}


def test_gzip_bomb_is_refused_with_413(receiver: Callable[..., Receiver]):
    r = receiver(limits=SMALL_LIMITS)
    bomb = _bomb(2_000_000)
    assert len(bomb) < 2048, "the compressed body itself is within the limit"
    for path in (BATCH, LINEAGE):
        resp = r.post(path, content=bomb, headers={"Content-Encoding": "gzip"})
        assert resp.status_code == 413, resp.text
        body = check_answer(resp)
        assert body["status"] == "failure"
        assert "maxBodyBytes" in body["message"]
    assert_store_empty(r.store)

    # The limit is on size, not on gzip: a small gzip batch still goes through.
    small = events_of(1)
    resp = r.post(
        BATCH,
        content=gzip.compress(json.dumps({"events": small}).encode()),
        headers={"Content-Encoding": "gzip"},
    )
    assert resp.status_code == 200, resp.text
    [(_, events)] = stored(r.store, "snap")
    assert events == small


def test_oversize_plain_body_is_refused_with_413(receiver: Callable[..., Receiver]):
    r = receiver(limits=SMALL_LIMITS)
    event = run_event()
    event["run"]["facets"] = {"padding": {"text": "x" * 3000}}
    for path, body in ((LINEAGE, event), (BATCH, {"events": [event]})):
        resp = r.post(path, body)
        assert resp.status_code == 413, resp.text
        assert "maxBodyBytes" in check_answer(resp)["message"]
    assert_store_empty(r.store)


def test_too_many_events_is_refused_with_413(receiver: Callable[..., Receiver]):
    r = receiver(limits=SMALL_LIMITS)
    tiny = [
        {
            "eventTime": "2026-11-01T02:00:00Z",
            "producer": "p",
            "run": {"runId": f"r{i}"},
            "job": {"namespace": "etl", "name": f"j{i}"},
        }
        for i in range(4)
    ]
    resp = r.post(BATCH, {"events": tiny})
    assert resp.status_code == 413, resp.text
    body = check_answer(resp)
    assert "maxEventsPerBatch" in body["message"] and "4" in body["message"]
    assert_store_empty(r.store)

    resp = r.post(BATCH, {"events": tiny[:3]})
    assert resp.status_code == 200, resp.text
    [(_, events)] = stored(r.store, "snap")
    assert events == tiny[:3]


# -- bad input -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [b'{"events": [', b"not json at all", b"{'events': []}", b"", b"   \n", b"\xff\xfe{}"],
    ids=["truncated", "text", "single-quotes", "empty", "blank", "bad-utf8"],
)
@pytest.mark.parametrize("path", [LINEAGE, BATCH])
def test_malformed_json_is_a_400(receiver: Callable[..., Receiver], path: str, content: bytes):
    r = receiver()
    resp = r.post(path, content=content)
    assert resp.status_code == 400, resp.text
    body = check_answer(resp)
    assert body["status"] == "failure"
    assert body["batchId"] is None
    assert_store_empty(r.store)


@pytest.mark.parametrize(
    "body",
    [[], {"events": {}}, {"event": []}, 42, None],
    ids=["array", "obj", "key", "num", "null"],
)
def test_batch_endpoint_needs_an_events_array(receiver: Callable[..., Receiver], body: object):
    r = receiver()
    resp = r.post(BATCH, body)
    assert resp.status_code == 400, resp.text
    assert "events" in check_answer(resp)["message"]
    assert_store_empty(r.store)


def test_single_endpoint_points_batches_to_the_batch_endpoint(receiver: Callable[..., Receiver]):
    r = receiver()
    resp = r.post(LINEAGE, {"events": events_of(2)})
    assert resp.status_code == 400
    assert "/batch" in check_answer(resp)["message"]
    assert_store_empty(r.store)


def test_non_object_events_are_rejected_by_index(receiver: Callable[..., Receiver]):
    r = receiver()
    good = events_of(2)
    posted: list[object] = [good[0], 42, "x", None, [], True, good[1]]
    resp = r.post(BATCH, {"events": posted}, token=ADD)
    assert resp.status_code == 200, resp.text
    body = check_answer(resp)
    assert body["status"] == "partial_success"
    assert body["summary"] == {"received": 7, "accepted": 2, "rejected": 5}
    failed = body["failedEvents"]
    assert [f["index"] for f in failed] == [1, 2, 3, 4, 5]
    kinds = ["a number", "a string", "null", "an array", "a boolean"]
    for f, kind in zip(failed, kinds, strict=True):
        assert f["reason"].startswith(f"event {f['index']}: "), f
        assert "JSON object" in f["reason"] and kind in f["reason"], f
        assert f["retriable"] is False

    [(batch, events)] = stored(r.store, "add")
    assert batch.id == body["batchId"]
    assert events == good
    assert (batch.received_count, batch.accepted_count, batch.rejected_count) == (7, 2, 5)
    assert batch.rejections == failed, "the stored batch records why events were left out"


def test_an_event_serialized_into_a_string_is_not_stored_as_a_string(
    receiver: Callable[..., Receiver],
):
    """A batch element that is a JSON *string* holding an event is not an event object."""
    r = receiver()
    good, wrapped = events_of(2)
    resp = r.post(BATCH, {"events": [good, json.dumps(wrapped)]}, token=ADD)
    assert resp.status_code == 200, resp.text
    body = check_answer(resp)
    [failed] = body["failedEvents"]
    assert failed["index"] == 1 and "JSON object" in failed["reason"]
    [(_, events)] = stored(r.store, "add")
    assert events == [good]
    assert all(isinstance(e, dict) for e in events)


def _without(event: dict[str, Any], path: str) -> dict[str, Any]:
    event = json.loads(json.dumps(event))
    *parents, leaf = path.split(".")
    target = event
    for p in parents:
        target = target[p]
    del target[leaf]
    return event


@pytest.mark.parametrize(
    "path", ["eventTime", "producer", "run.runId", "job.name", "job.namespace", "job"]
)
def test_missing_required_field_is_rejected_naming_the_field(
    receiver: Callable[..., Receiver], path: str
):
    r = receiver()
    good, other = events_of(2)
    bad = _without(other, path)

    resp = r.post(BATCH, {"events": [good, bad]}, token=ADD)
    assert resp.status_code == 200, resp.text
    body = check_answer(resp)
    assert body["status"] == "partial_success"
    [failed] = body["failedEvents"]
    assert failed["index"] == 1
    assert path in failed["reason"], failed
    assert failed["retriable"] is False
    [(_, events)] = stored(r.store, "add")
    assert events == [good]

    # The same event alone on the single endpoint: nothing accepted, so a 400 and nothing stored.
    resp = r.post(LINEAGE, bad, token=ADD)
    assert resp.status_code == 400, resp.text
    body = check_answer(resp)
    assert body["status"] == "failure" and body["batchId"] is None
    assert body["summary"] == {"received": 1, "accepted": 0, "rejected": 1}
    assert path in body["failedEvents"][0]["reason"]
    assert [b.kind for b in r.store.batches("add")] == [BatchKind.POSTED]


def test_bad_field_values_are_rejected_with_the_reason(receiver: Callable[..., Receiver]):
    r = receiver()
    bad_time, bad_type, blank_run, blank_name = events_of(4)
    bad_time["eventTime"] = "yesterday"
    bad_type["eventType"] = "FINISHED"
    blank_run["run"]["runId"] = ""
    blank_name["job"]["name"] = "   "
    ok = run_event()
    resp = r.post(BATCH, {"events": [bad_time, ok, bad_type, blank_run, blank_name]}, token=ADD)
    body = check_answer(resp)
    reasons = {f["index"]: f["reason"] for f in body["failedEvents"]}
    assert set(reasons) == {0, 2, 3, 4}
    assert "eventTime" in reasons[0] and "yesterday" in reasons[0]
    assert "eventType" in reasons[2] and "COMPLETE" in reasons[2], "names the allowed values"
    assert "FINISHED" in reasons[2], "echoes the value it refused"
    assert "run.runId" in reasons[3]
    assert "job.name" in reasons[4] and "blank" in reasons[4]
    [(_, events)] = stored(r.store, "add")
    assert events == [ok]


def test_job_namespace_outside_allowed_namespaces_is_rejected(receiver: Callable[..., Receiver]):
    r = receiver()  # snap allows etl and features only
    stray = run_event("marketing", "campaign_sync")
    resp = r.post(LINEAGE, stray)
    assert resp.status_code == 400
    body = check_answer(resp)
    [failed] = body["failedEvents"]
    assert "allowedJobNamespaces" in failed["reason"] and "marketing" in failed["reason"]
    assert "job.namespace" in failed["reason"]
    assert_store_empty(r.store)


def test_allowed_namespaces_are_shell_patterns(receiver: Callable[..., Receiver]):
    r = receiver(allowedJobNamespaces=["etl", "features*"])
    posted = [run_event("features_v2", "a"), run_event("etl_extra", "b"), run_event("etl", "c")]
    body = check_answer(r.post(BATCH, {"events": posted}))
    assert [f["index"] for f in body["failedEvents"]] == [1]
    [(_, events)] = stored(r.store, "snap")
    assert events == [posted[0], posted[2]]


def test_partial_snapshot_batch_is_not_a_whole_snapshot(receiver: Callable[..., Receiver]):
    r = receiver()
    posted = [run_event("etl", "a"), run_event("marketing", "b"), run_event("features", "c")]
    resp = r.post(BATCH, {"events": posted})
    assert resp.status_code == 200, resp.text
    body = check_answer(resp)
    assert body["status"] == "partial_success"
    assert body["summary"] == {"received": 3, "accepted": 2, "rejected": 1}
    assert [f["index"] for f in body["failedEvents"]] == [1]
    assert "allowedJobNamespaces" in body["failedEvents"][0]["reason"]
    assert body["wholeSnapshot"] is False
    assert "not a whole snapshot: 1 event(s) rejected" in body["message"]
    assert "definition snap does NOT treat this post as a snapshot" in body["message"]

    [(batch, events)] = stored(r.store, "snap")
    assert batch.id == body["batchId"]
    assert batch.whole_snapshot is False
    assert events == [posted[0], posted[2]]


def test_batch_with_every_event_rejected_is_a_400_and_stores_nothing(
    receiver: Callable[..., Receiver],
):
    r = receiver()
    posted = [run_event("marketing", "a"), {"producer": "p"}, 7]
    resp = r.post(BATCH, {"events": posted})
    assert resp.status_code == 400, resp.text
    body = check_answer(resp)
    assert body["status"] == "failure" and body["batchId"] is None
    assert body["wholeSnapshot"] is False
    assert body["summary"] == {"received": 3, "accepted": 0, "rejected": 3}
    assert [f["index"] for f in body["failedEvents"]] == [0, 1, 2]
    assert_store_empty(r.store)


@pytest.mark.parametrize(
    "header",
    [None, "", "Bearer", "Bearer wrong-token", f"Basic {SNAP}", f"Bearer {SNAP}x", f"Token {ADD}"],
    ids=["none", "empty", "no-token", "wrong", "basic", "prefix", "scheme"],
)
@pytest.mark.parametrize("path", [LINEAGE, BATCH])
def test_missing_or_wrong_token_is_a_401_and_stores_nothing(
    receiver: Callable[..., Receiver], path: str, header: str | None
):
    r = receiver()
    body = run_event() if path == LINEAGE else {"events": events_of(2)}
    headers = {} if header is None else {"Authorization": header}
    resp = r.post(path, body, token=None, headers=headers)
    assert resp.status_code == 401, resp.text
    answer = check_answer(resp)
    assert answer["status"] == "failure" and answer["batchId"] is None
    assert_store_empty(r.store)


@pytest.mark.parametrize("ctype", ["text/plain", "application/xml", "multipart/form-data"])
@pytest.mark.parametrize("path", [LINEAGE, BATCH])
def test_wrong_content_type_is_a_415(receiver: Callable[..., Receiver], path: str, ctype: str):
    r = receiver()
    body = run_event() if path == LINEAGE else {"events": events_of(1)}
    resp = r.post(path, body, headers={"Content-Type": ctype})
    assert resp.status_code == 415, resp.text
    assert ctype in check_answer(resp)["message"]
    assert_store_empty(r.store)


# -- the store going away --------------------------------------------------------------------------


@dataclass
class Outage:
    store: EventStore
    down: Callable[[], None]
    up: Callable[[], None]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def outage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Outage]:
    """A store whose database can be made unreachable and brought back."""
    if request.param == "sqlite":
        home, away = tmp_path / "store_dir", tmp_path / "store_dir_away"
        store = EventStore(f"sqlite:///{home / 'store.db'}")

        def down() -> None:
            store.dispose()
            home.rename(away)  # the file is gone: connecting fails, as on a lost volume

        def up() -> None:
            away.rename(home)

        yield Outage(store, down, up)
        store.dispose()
        return

    url = request.getfixturevalue("pg_url")
    server = request.getfixturevalue("pg_server")
    name = make_url(url).database
    store = EventStore(url)
    admin = create_engine(server.url, isolation_level="AUTOCOMMIT")

    def pg_down() -> None:
        with admin.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false'))
            conn.execute(
                text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :n"),
                {"n": name},
            )

    def pg_up() -> None:
        with admin.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))

    yield Outage(store, pg_down, pg_up)
    pg_up()
    store.dispose()
    admin.dispose()


def test_unreachable_store_is_a_retriable_503_and_the_receiver_recovers(
    write_settings: Callable[..., Path], tokens: dict[str, str], outage: Outage
):
    settings = load_settings(write_settings())
    client = TestClient(create_app(settings, outage.store))
    r = Receiver(client, outage.store)
    before = run_event("etl", "before_outage")
    assert r.post(LINEAGE, before).status_code == 200

    outage.down()
    lost_single, lost_batch = run_event("etl", "during"), events_of(2)
    for path, body in ((LINEAGE, lost_single), (BATCH, {"events": lost_batch})):
        resp = r.post(path, body)
        assert resp.status_code == 503, resp.text
        answer = check_answer(resp)
        assert answer["status"] == "failure"
        assert answer["retriable"] is True
        assert answer["batchId"] is None
        assert "retry" in answer["message"]
    health = client.get("/healthz")
    assert health.status_code == 503
    assert health.json()["status"] != "ok"

    outage.up()
    assert client.get("/healthz").status_code == 200
    # Nothing of the refused posts was stored; the stream batch holds only the earlier event.
    [(batch, events)] = stored(outage.store, "snap")
    assert events == [before]
    assert batch.accepted_count == 1
    # And the producer's retry now succeeds.
    resp = r.post(BATCH, {"events": lost_batch})
    assert resp.status_code == 200, resp.text
    assert stored(outage.store, "snap")[-1][1] == lost_batch


# -- health, secrets -------------------------------------------------------------------------------


def test_healthz_answers_without_a_token(receiver: Callable[..., Receiver]):
    r = receiver()
    resp = r.client.get("/healthz")
    assert resp.status_code == 200
    assert resp.json() == {"status": "ok", "definitions": 2}
    assert_no_token(resp.text)


def test_only_the_documented_methods_are_served(receiver: Callable[..., Receiver]):
    r = receiver()
    assert r.client.get(LINEAGE).status_code == 405
    assert r.client.post("/healthz").status_code == 405
    assert r.client.post("/api/v1/other", content=b"{}").status_code == 404


def test_missing_token_env_var_stops_the_start(
    write_settings: Callable[..., Path],
    tokens: dict[str, str],
    event_store: EventStore,
    monkeypatch: pytest.MonkeyPatch,
):
    settings = load_settings(write_settings())  # loading does not need the secrets
    monkeypatch.delenv("OL_TEST_TOKEN_ADD")
    with pytest.raises(SettingsError, match="OL_TEST_TOKEN_ADD") as info:
        create_app(settings, event_store)
    assert_no_token(str(info.value))
    monkeypatch.setenv("OL_TEST_TOKEN_ADD", "")
    with pytest.raises(SettingsError, match="OL_TEST_TOKEN_ADD"):
        create_app(settings, event_store)


# -- over real HTTP (uvicorn on loopback) ----------------------------------------------------------


@pytest.fixture
def served(
    write_settings: Callable[..., Path], tokens: dict[str, str], event_store: EventStore
) -> Iterator[tuple[httpx.Client, EventStore]]:
    settings = load_settings(write_settings(limits={"maxBodyBytes": 64 * 1024}))
    with (
        serve_in_background(create_app(settings, event_store)) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        yield client, event_store


def test_streamed_gzip_bomb_is_cut_off_over_http(served: tuple[httpx.Client, EventStore]):
    client, store = served
    bomb = _bomb(50_000_000)
    assert len(bomb) < 64 * 1024

    def chunks() -> Iterator[bytes]:  # a chunked upload, as a streaming producer sends it
        for i in range(0, len(bomb), 1000):
            yield bomb[i : i + 1000]

    resp = client.post(
        BATCH,
        content=chunks(),
        headers={
            "Authorization": f"Bearer {SNAP}",
            "Content-Type": "application/json",
            "Content-Encoding": "gzip",
        },
    )
    assert resp.status_code == 413, resp.text
    assert "maxBodyBytes" in check_answer(resp)["message"]
    assert_store_empty(store)
    assert client.get("/healthz").status_code == 200, "the receiver is still serving"


def test_concurrent_single_events_all_land_in_one_open_batch(
    served: tuple[httpx.Client, EventStore],
):
    client, store = served
    sent: list[dict] = []
    errors: list[str] = []
    lock = threading.Lock()

    def producer(n: int) -> None:
        for i in range(5):
            event = run_event("etl", f"worker_{n}", run_id=str(uuid.uuid4()))
            event["run"]["facets"] = {"seq": {"i": i}}
            resp = client.post(LINEAGE, json=event, headers={"Authorization": f"Bearer {SNAP}"})
            with lock:
                if resp.status_code == 200:
                    sent.append(event)
                else:
                    errors.append(resp.text)

    threads = [threading.Thread(target=producer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    [(batch, events)] = stored(store, "snap")
    assert batch.status is BatchStatus.OPEN
    assert batch.accepted_count == len(sent) == 40
    key = lambda e: e["run"]["runId"]  # noqa: E731
    assert sorted(events, key=key) == sorted(sent, key=key)
    assert [e.position for e in store.iter_events(batch.id)] == list(range(40))


def test_send_prints_each_answer_and_says_when_a_post_is_a_whole_snapshot(
    served: tuple[httpx.Client, EventStore],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
):
    """``ol-dagster send``: one JSON answer per file on stdout (as before), and a
    ``whole snapshot:`` line on stderr for the file stored as a whole snapshot only."""
    from ol_dagster.commands.cli import main

    client, store = served
    whole, partial = tmp_path / "one_event.json", tmp_path / "partial.ndjson"
    whole.write_text(json.dumps(run_event("etl", "only_job")))
    partial.write_text(
        "\n".join(json.dumps(e) for e in (run_event("etl", "a"), run_event("marketing", "b")))
    )
    monkeypatch.setenv("OL_DAGSTER_TOKEN", SNAP)
    code = main(["send", str(whole), str(partial), "--url", str(client.base_url)])
    out, err = capsys.readouterr()
    assert code == 0
    first, second = (json.loads(line) for line in out.splitlines())
    assert (first["file"], first["httpStatus"], first["wholeSnapshot"]) == (str(whole), 200, True)
    assert set(first) >= ANSWER_KEYS
    assert (second["file"], second["status"], second["wholeSnapshot"]) == (
        str(partial),
        "partial_success",
        False,
    )
    [line] = [x for x in err.splitlines() if x.startswith("whole snapshot:")]
    assert line == (
        f"whole snapshot: {whole}: stored as a whole snapshot of definition snap: jobs of "
        "namespaces [etl] that it does not describe will be removed at the next sync (within "
        "cleanup.maxRemovalsPerRun and cleanup.maxRemovalShare)"
    )
    assert [b.whole_snapshot for b in store.batches("snap")] == [True, False]


def test_send_to_a_receiver_that_is_not_there_ends_with_one_line_and_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    """The CLI imports httpx only for the commands that talk HTTP; its errors still end as one
    line, not a traceback, and the token is not in it."""
    import socket

    from ol_dagster.commands.cli import main

    with socket.socket() as s:  # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        batch = tmp_path / "one_event.json"
        batch.write_text(json.dumps(run_event("etl", "only_job")))
        monkeypatch.setenv("OL_SEND_TOKEN", SNAP)
        code = main(
            [
                "send",
                str(batch),
                "--url",
                f"http://127.0.0.1:{port}",
                "--token-env",
                "OL_SEND_TOKEN",
            ]
        )
    out, err = capsys.readouterr()
    assert code == 2
    assert err.startswith("ol-dagster: cannot post ") and len(err.splitlines()) == 1
    assert f"http://127.0.0.1:{port}/api/v1/lineage/batch" in err  # where it tried
    assert SNAP not in out + err
