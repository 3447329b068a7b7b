"""``ol-dagster serve`` logs each refused post in one line: status, path, client and reason, so an
operator sees a misconfigured producer; never the token, nor a password the body quotes."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from ol_dagster_tests.conftest import run_event
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
