"""``ol-dagster serve`` logs each refused post in one line: status, path, client and reason, so an
operator sees a misconfigured producer; never the token, nor a password the body quotes. The same
refusal from one address again and again is counted, not logged each time, in a table of bounded
size."""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

import httpx

from ol_dagster.receiver.app import create_app
from ol_dagster.receiver.refusal_lines import RefusalLines
from ol_dagster.receiver.server import serve_guarded_in_background
from ol_dagster.settings import parse_settings
from ol_dagster.store import EventStore
from ol_dagster_tests.conftest import run_event, settings_data
from ol_dagster_tests.receiver.test_receiver_faults import (
    BATCH,
    LINEAGE,
    SNAP,
    _write_settings,
    receivers,
)


def test_each_refused_post_is_one_log_line_with_status_path_client_and_reason(
    tmp_path: Path, tokens
) -> None:
    settings = _write_settings(tmp_path, f"sqlite:///{tmp_path / 'store.db'}")
    log = tmp_path / "serve.log"
    wrong = "not-the-token-0123456789"
    auth = {"Authorization": f"Bearer {SNAP}"}
    foreign = run_event("postgres://etl_user:hunter2@db:5432", "load")  # a namespace not allowed
    with receivers(settings, [log]) as (served,), httpx.Client(base_url=served.url) as http:
        answers = [
            http.post(LINEAGE, json=run_event("etl", "a"), headers={"Authorization": wrong}),
            http.post(LINEAGE, content=b"x", headers={**auth, "Content-Type": "text/plain"}),
            http.post(BATCH, content=b"{not json", headers=auth),
            http.post(BATCH, json={"events": [foreign]}, headers=auth),
            http.post(LINEAGE, json=run_event("etl", "accepted"), headers=auth),
        ]
        assert [a.status_code for a in answers] == [401, 415, 400, 400, 200]
        text = served.output()

    refused = [line for line in text.splitlines() if "refused" in line]
    client = r"from 127\.0\.0\.1:\d+: "
    expected = [
        rf"refused POST {LINEAGE} {client}401 missing or unknown bearer token$",
        rf"refused POST {LINEAGE} {client}415 Content-Type 'text/plain' is not supported: "
        "send application/json$",
        rf"refused POST {BATCH} {client}400 request body is not valid JSON: ",
        rf"refused POST {BATCH} {client}400 all 1 event\(s\) rejected; first: event 0: .*"
        r"postgres://etl_user:\*\*\*@db:5432",
    ]
    assert len(refused) == len(expected), text  # one line each, none for the accepted post
    for line, pattern in zip(refused, expected, strict=True):
        assert line.startswith("WARNING ol_dagster.receiver: refused "), line
        assert re.search(pattern, line), (pattern, line)
    assert wrong not in text and SNAP not in text and "hunter2" not in text


def _second_client(url: str) -> httpx.Client:
    """A client from another loopback address (Linux routes all of 127.0.0.0/8 to lo)."""
    return httpx.Client(base_url=url, transport=httpx.HTTPTransport(local_address="127.0.0.2"))


def test_a_burst_of_refusals_is_one_line_then_a_count(tmp_path: Path, tokens, caplog) -> None:
    """A client refused in a loop (no token: what a slot-holder attack sends) is logged once in
    full, then counted: a line with how many more once ``refusalLogSeconds`` is past, each
    client address apart. The counts add up to every refusal; nothing else is logged."""
    data = settings_data(tmp_path)
    data["receiver"] = {"refusalLogSeconds": 1}
    store = EventStore(data["store"]["url"])
    app = create_app(parse_settings(data), store)
    burst = 150
    body = run_event("etl", "a")
    try:
        with (
            caplog.at_level(logging.WARNING, logger="ol_dagster.receiver"),
            serve_guarded_in_background(app) as served,
            httpx.Client(base_url=served.url) as http,
            _second_client(served.url) as other,
        ):
            started = time.monotonic()
            for _ in range(burst):
                assert http.post(LINEAGE, json=body).status_code == 401
            assert other.post(LINEAGE, json=body).status_code == 401
            elapsed = time.monotonic() - started
            # the last count comes from a timer on the server's loop, with no refusal after it
            deadline = time.monotonic() + 4
            while time.monotonic() < deadline and _counted(caplog, "127.0.0.1") < burst - 1:
                time.sleep(0.05)
    finally:
        store.dispose()
    lines = [r.getMessage() for r in caplog.records if r.name == "ol_dagster.receiver"]
    full = [line for line in lines if line.startswith("refused ")]
    assert [re.sub(r":\d+:", ":", line) for line in full] == [
        f"refused POST {LINEAGE} from 127.0.0.1: 401 missing or unknown bearer token",
        f"refused POST {LINEAGE} from 127.0.0.2: 401 missing or unknown bearer token",
    ]
    assert _counted(caplog, "127.0.0.1") == burst - 1, lines
    summaries = [line for line in lines if line.startswith("... and ")]
    assert len(lines) == len(full) + len(summaries)
    # one count a second at most while the burst lasted, and the last one after it
    assert 1 <= len(summaries) <= elapsed / 1 + 2, lines
    # the window is a second, or a little more when the server's loop wakes late (a busy machine)
    assert re.search(r"in the last [12] s: 401 missing or unknown bearer token$", summaries[-1])


def _counted(caplog, address: str) -> int:
    """The refusals from ``address`` the count lines add up to."""
    found = (
        re.match(rf"\.\.\. and (\d+) more refused from {re.escape(address)} in", r.getMessage())
        for r in caplog.records
    )
    return sum(int(m.group(1)) for m in found if m)


def test_the_table_of_clients_is_bounded_and_loses_no_refusal() -> None:
    """A hostile client set larger than the table is counted together per status, its first
    refusal logged: the table never holds more, and the counts still add up."""
    logger = logging.getLogger("test_refusal_lines")
    now = [0.0]
    lines = RefusalLines(logger, 10, max_keys=5, clock=lambda: now[0])
    logged: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: logged.append(record.getMessage())  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        for i in range(100):
            lines.refused("401 no token", f"10.0.{i // 250}.{i % 250}", "401", "refused %d", i)
        assert len(lines._counts) == 6  # noqa: SLF001 - five addresses and "other clients"
        assert logged == [f"refused {i}" for i in range(6)]
        now[0] = 10
        lines.flush()
    finally:
        logger.removeHandler(handler)
    assert logged[6:] == ["... and 94 more refused from other clients in the last 10 s: 401"]
