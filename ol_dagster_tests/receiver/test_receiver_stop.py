"""A receiver stopped the way a deployment stops it (SIGTERM, or Ctrl-C) leaves its SQLite store
whole in the database file: nothing it accepted waits in the write-ahead log for the next process
that opens the store (a sync would copy it there, 100 MB after a 10,000-event snapshot)."""

from __future__ import annotations

import signal
import sqlite3
from pathlib import Path

import httpx
import pytest
import yaml

from ol_dagster.store import EventStore
from ol_dagster_tests.conftest import TOKENS, events_of, settings_data
from ol_dagster_tests.receiver.test_receiver_faults import receivers

BATCH = "/api/v1/lineage/batch"
HEADERS = {"Authorization": f"Bearer {TOKENS['OL_TEST_TOKEN_SNAP']}"}


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_receiver_leaves_nothing_in_the_write_ahead_log(
    tmp_path: Path, tokens: dict[str, str], stop: signal.Signals
) -> None:
    store_file = tmp_path / "store.db"
    data = settings_data(tmp_path)
    data["store"]["url"] = f"sqlite:///{store_file}"
    settings = tmp_path / "ol_dagster.yaml"
    settings.write_text(yaml.safe_dump(data))
    posted = events_of(200, tag="stop")
    with receivers(settings, [tmp_path / "serve.log"]) as [served]:
        answer = httpx.post(f"{served.url}{BATCH}", json={"events": posted}, headers=HEADERS)
        assert answer.status_code == 200, answer.text
        wal = Path(f"{store_file}-wal")
        assert wal.exists() and wal.stat().st_size > 0  # the post is in the log meanwhile
        served.proc.send_signal(stop)
        ended = served.proc.wait(timeout=60)
    # SIGTERM ends it by the signal, as uvicorn does; Ctrl-C with the shell's 130, no traceback
    assert ended == (-stop if stop == signal.SIGTERM else 130), served.output()
    assert "Traceback" not in served.output()
    # SQLite removes the log when the last connection closes after copying it in: a process
    # that exits without closing its connections leaves it as it was
    assert not wal.exists(), f"{wal.stat().st_size} bytes left in the write-ahead log"
    # what the receiver answered for is in the database file alone
    with sqlite3.connect(f"file:{store_file}?mode=ro", uri=True) as conn:
        stored = conn.execute("SELECT count(*) FROM ol_events").fetchone()[0]
    assert stored == len(posted)
    store = EventStore(f"sqlite:///{store_file}")
    try:
        [batch] = store.batches()
        assert batch.received_count == len(posted)
    finally:
        store.dispose()
