"""The real openlineage-python client posting to the receiver over loopback HTTP.

This is what a producer runs unchanged: ``HttpTransport`` with an ``api_key`` auth (sent as
``Authorization: Bearer``), optionally gzip-compressed, posting one event per request to
``/api/v1/lineage``. The events must land in the definition's open stream batch exactly as sent.
"""

from __future__ import annotations

import gzip
import json
import os
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import requests
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import (
    DatasetEvent,
    InputDataset,
    Job,
    JobEvent,
    OutputDataset,
    Run,
    RunEvent,
    RunState,
    StaticDataset,
)
from openlineage.client.facet_v2 import column_lineage_dataset, schema_dataset, sql_job
from openlineage.client.serde import Serde
from openlineage.client.transport.http import (
    ApiKeyTokenProvider,
    HttpCompression,
    HttpConfig,
    HttpTransport,
)

from ol_dagster.receiver.app import create_app
from ol_dagster.receiver.server import serve_in_background
from ol_dagster.settings import load_settings
from ol_dagster.store import BatchKind, BatchStatus, EventStore
from ol_dagster_tests.conftest import TOKENS

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/integration/dbt"
WAREHOUSE = "postgres://warehouse:5432"


@pytest.fixture(autouse=True)
def isolated_client_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the client from reading an openlineage.yml or OPENLINEAGE_* variables of the machine."""
    for name in list(os.environ):
        if name.startswith("OPENLINEAGE"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def receiver_url(
    write_settings: Callable[..., Path], tokens: dict[str, str], event_store: EventStore
) -> Iterator[str]:
    settings = load_settings(write_settings())
    with serve_in_background(create_app(settings, event_store)) as url:
        yield url


def ol_client(url: str, token: str, *, gzip_body: bool = False) -> OpenLineageClient:
    """A client configured the way a producer's openlineage.yml configures it."""
    transport: dict[str, Any] = {
        "type": "http",
        "url": url,
        "endpoint": "api/v1/lineage",
        "auth": {"type": "api_key", "apiKey": token},
        "retry": {"total": 2, "backoff_factor": 0},
    }
    if gzip_body:
        transport["compression"] = "gzip"
    return OpenLineageClient(config={"transport": transport})


def record_requests(client: OpenLineageClient) -> list[requests.PreparedRequest]:
    """Capture what the client really put on the wire."""
    seen: list[requests.PreparedRequest] = []
    session = client.transport.session  # type: ignore[attr-defined]
    session.hooks["response"].append(lambda resp, *a, **k: seen.append(resp.request))
    return seen


def dbt_model_events(model: str) -> list[RunEvent]:
    """START and COMPLETE of a dbt model run: schema, column lineage and SQL facets."""
    run = Run(runId=str(uuid.uuid4()))
    job = Job(
        namespace="etl",
        name=f"analytics.{model}",
        facets={
            "sql": sql_job.SQLJobFacet(
                query=f"select o.id, o.amount from raw.orders o join raw.customers c using (id)"
                f" -- {model}",
                dialect="postgres",
            )
        },
    )
    columns = ["id", "amount", "customer_id", "created_at"]
    output = OutputDataset(
        namespace=WAREHOUSE,
        name=f"analytics.{model}",
        facets={
            "schema": schema_dataset.SchemaDatasetFacet(
                fields=[
                    schema_dataset.SchemaDatasetFacetFields(name=c, type="varchar") for c in columns
                ]
            ),
            "columnLineage": column_lineage_dataset.ColumnLineageDatasetFacet(
                fields={
                    c: column_lineage_dataset.Fields(
                        inputFields=[
                            column_lineage_dataset.InputField(
                                namespace=WAREHOUSE, name="raw.orders", field=c
                            )
                        ],
                        transformationType="IDENTITY",
                    )
                    for c in columns
                }
            ),
        },
    )
    inputs = [InputDataset(namespace=WAREHOUSE, name="raw.orders")]
    now = datetime.now(UTC).isoformat()
    return [
        RunEvent(
            eventType=state,
            eventTime=now,
            run=run,
            job=job,
            inputs=inputs,
            outputs=[output] if state is RunState.COMPLETE else [],
            producer=PRODUCER,
        )
        for state in (RunState.START, RunState.COMPLETE)
    ]


def stored_events(store: EventStore, definition: str) -> list[dict]:
    [batch] = store.batches(definition)
    assert (batch.kind, batch.status) == (BatchKind.STREAM, BatchStatus.OPEN)
    events = [json.loads(e.raw) for e in store.iter_events(batch.id)]
    assert batch.accepted_count == batch.received_count == len(events)
    return events


@pytest.mark.parametrize("gzip_body", [False, True], ids=["plain", "gzip"])
def test_client_events_land_in_the_open_stream_batch(
    receiver_url: str, event_store: EventStore, gzip_body: bool
):
    client = ol_client(receiver_url, TOKENS["OL_TEST_TOKEN_SNAP"], gzip_body=gzip_body)
    wire = record_requests(client)
    sent = dbt_model_events("orders") + dbt_model_events("customers")
    for event in sent:
        client.emit(event)  # raises on any non-2xx answer
    client.close()

    assert len(wire) == len(sent), "one request per event, no retries"
    for req in wire:
        assert req.url == receiver_url + "/api/v1/lineage"
        assert req.headers["Authorization"] == f"Bearer {TOKENS['OL_TEST_TOKEN_SNAP']}"
        if gzip_body:
            assert req.headers["Content-Encoding"] == "gzip"
            assert isinstance(req.body, bytes) and req.body[:2] == b"\x1f\x8b"
            json.loads(gzip.decompress(req.body))
        else:
            assert "Content-Encoding" not in req.headers

    # emit() adds facets in place (environment, source location), so serialize after it ran.
    assert stored_events(event_store, "snap") == [Serde.to_dict(e) for e in sent]
    assert event_store.batches("add") == []
    stored = list(event_store.iter_events(event_store.batches("snap")[0].id))
    assert [(e.kind, e.event_type, e.job_name) for e in stored] == [
        ("RunEvent", "START", "analytics.orders"),
        ("RunEvent", "COMPLETE", "analytics.orders"),
        ("RunEvent", "START", "analytics.customers"),
        ("RunEvent", "COMPLETE", "analytics.customers"),
    ]


def test_explicit_http_transport_with_gzip(receiver_url: str, event_store: EventStore):
    config = HttpConfig(
        url=receiver_url,
        auth=ApiKeyTokenProvider({"apiKey": TOKENS["OL_TEST_TOKEN_ADD"]}),
        compression=HttpCompression.GZIP,
        timeout=10,
    )
    client = OpenLineageClient(transport=HttpTransport(config))
    sent = dbt_model_events("payments")
    for event in sent:
        client.emit(event)
    client.close()
    assert stored_events(event_store, "add") == [Serde.to_dict(e) for e in sent]
    assert event_store.batches("snap") == []


def test_job_and_dataset_events_from_the_client(receiver_url: str, event_store: EventStore):
    client = ol_client(receiver_url, TOKENS["OL_TEST_TOKEN_ADD"], gzip_body=True)
    now = datetime.now(UTC).isoformat()
    job_event = JobEvent(
        eventTime=now,
        job=Job(namespace="airflow", name="dag.task"),
        inputs=[InputDataset(namespace=WAREHOUSE, name="raw.a")],
        outputs=[OutputDataset(namespace=WAREHOUSE, name="mart.b")],
        producer=PRODUCER,
    )
    dataset_event = DatasetEvent(
        eventTime=now,
        dataset=StaticDataset(namespace=WAREHOUSE, name="mart.b"),
        producer=PRODUCER,
    )
    for event in (job_event, dataset_event):
        client.emit(event)
    client.close()
    assert stored_events(event_store, "add") == [
        Serde.to_dict(job_event),
        Serde.to_dict(dataset_event),
    ]
    kinds = [e.kind for e in event_store.iter_events(event_store.batches("add")[0].id)]
    assert kinds == ["JobEvent", "DatasetEvent"]


def test_client_with_a_wrong_token_is_refused(receiver_url: str, event_store: EventStore):
    client = ol_client(receiver_url, "not-a-known-token")
    with pytest.raises(requests.HTTPError) as info:
        client.emit(dbt_model_events("orders")[0])
    assert info.value.response.status_code == 401
    for value in TOKENS.values():
        assert value not in info.value.response.text
    assert event_store.batches() == []


def test_client_event_outside_allowed_namespaces_is_refused_with_the_reason(
    receiver_url: str, event_store: EventStore
):
    client = ol_client(receiver_url, TOKENS["OL_TEST_TOKEN_SNAP"])
    event = dbt_model_events("orders")[0]
    event.job.namespace = "marketing"  # snap allows etl and features only
    with pytest.raises(requests.HTTPError) as info:
        client.emit(event)
    answer = info.value.response.json()
    assert info.value.response.status_code == 400
    assert "allowedJobNamespaces" in answer["failedEvents"][0]["reason"]
    assert event_store.batches() == []


def test_client_retries_then_fails_while_the_store_is_down(
    write_settings: Callable[..., Path], tokens: dict[str, str], tmp_path: Path
):
    home, away = tmp_path / "store_dir", tmp_path / "store_dir_away"
    store = EventStore(f"sqlite:///{home / 'store.db'}")
    settings = load_settings(write_settings())
    try:
        with serve_in_background(create_app(settings, store)) as url:
            client = ol_client(url, tokens["snap"])  # retry: total 2 on 5xx
            lost, kept = dbt_model_events("orders")
            store.dispose()
            home.rename(away)
            # The receiver answers 503 (retriable): the client retries, then gives up loudly.
            with pytest.raises(requests.exceptions.RetryError, match="503"):
                client.emit(lost)
            away.rename(home)
            client.emit(kept)
            client.close()
        assert stored_events(store, "snap") == [Serde.to_dict(kept)]
    finally:
        store.dispose()
