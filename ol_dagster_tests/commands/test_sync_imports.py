"""A sync loads only what it runs: ``ol-dagster sync`` and a run worker (which loads
``ol_dagster.definitions``) import neither the receiver nor the Kafka consumer nor the HTTP
libraries only they and the sending commands use, nor Dagster's daemons, nor pygments, so that
every run's start-up does not pay for them; and a sync on an instance made already does not read
Dagster's migration scripts for the database files it opens, only for the new run's own. And what
a sync keeps alive (its graph, the catalog's rows) is not walked by full collections again and
again until the process ends.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import yaml

from ol_dagster.receiver.intake import sort_events
from ol_dagster.settings import load_settings
from ol_dagster.store import EventStore
from ol_dagster_tests.conftest import PROJECT_ROOT, TOKENS, run_event, settings_data

# what only the receiver (``serve``), the Kafka intake (``consume``) or ``send`` need
NOT_FOR_A_SYNC = (
    "starlette",
    "uvicorn",
    "httpx",
    "anyio",
    "h11",
    "confluent_kafka",
    "kafka",
    "ol_dagster.receiver",
    "ol_dagster.kafka.consumer",
    "ol_dagster.kafka.intake",
    "ol_dagster.commands.sender",
    "ol_dagster.commands.consume",
    # Dagster's daemons (sensors, schedules, backfills, run monitoring) and their logging
    "dagster._daemon.controller",
    "dagster._daemon.sensor",
    "structlog",
    "rich",
    # highlighting for mako's HTML error pages (alembic's templates), which a sync never renders
    "pygments",
)

# a whole sync of one batch, then what a run worker loads; the modules of NOT_FOR_A_SYNC loaded
# by then. A second sync, of a batch posted then, on the instance the first made: how often
# Dagster's migration scripts are read. Then (so that the check is seen to see them) after
# importing the receiver and asking Dagster's daemon package for one of its names.
SCRIPT = """
import json, sys
from ol_dagster.commands.cli import main

def loaded():
    return sorted(m for m in sys.modules if m.startswith(NOT_FOR_A_SYNC))

settings, event = sys.argv[1], json.loads(sys.argv[3])
NOT_FOR_A_SYNC = tuple(json.loads(sys.argv[2]))
code = main(["--settings", settings, "sync", "--definition", "add"])
import ol_dagster.definitions
after_sync = loaded()

from ol_dagster.receiver.intake import sort_events
from ol_dagster.settings import load_settings
from ol_dagster.store import EventStore
store = EventStore(load_settings(settings).store.url)
store.add_posted_batch("add", sort_events([event], ["*"]).accepted, received=1)
store.dispose()
from alembic.script import ScriptDirectory
reads = []
from_config = ScriptDirectory.from_config.__func__
ScriptDirectory.from_config = classmethod(lambda cls, c: reads.append(c) or from_config(cls, c))
second = main(["--settings", settings, "sync", "--definition", "add"])
# what a sync of thousands of jobs keeps alive (its graph, the catalog's rows), one at a time
import gc
full = []
gc.callbacks.append(lambda p, i: full.append(1) if p == "stop" and i["generation"] == 2 else None)
kept = [[i] for i in range(500_000)]
gc.callbacks.pop()

import ol_dagster.receiver.app
from dagster._daemon import DagsterDaemonController
print(json.dumps({"code": code, "after_sync": after_sync, "second": second,
                  "script_reads": len(reads), "full_collections": len(full),
                  "after_receiver": loaded()}))
"""


def test_a_sync_and_a_run_worker_import_nothing_of_the_receiver(tmp_path: Path) -> None:
    path = tmp_path / "ol_dagster.yaml"
    path.write_text(yaml.safe_dump(settings_data(tmp_path)))
    store = EventStore(load_settings(path).store.url)
    intake = sort_events([run_event()], ["*"])
    store.add_posted_batch("add", intake.accepted, received=intake.received)
    store.dispose()
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, **TOKENS, "DAGSTER_HOME": str(home)}

    done = subprocess.run(
        [
            sys.executable,
            "-c",
            SCRIPT,
            str(path),
            json.dumps(NOT_FOR_A_SYNC),
            json.dumps(run_event(run_id=str(uuid.uuid4()))),
        ],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )

    assert done.returncode == 0, done.stderr
    *lines, last = done.stdout.splitlines()
    result = json.loads(last)
    assert result["code"] == 0 and json.loads(lines[0])["status"] == "synced", done.stdout
    assert result["after_sync"] == []
    assert result["second"] == 0 and json.loads(lines[-2])["status"] == "synced", done.stdout
    # read once per process at most (the first sync read them): not for each file checked
    assert result["script_reads"] <= 1
    # the process went on keeping half a million objects: no full collection walked them (five
    # did with the collector's defaults)
    assert result["full_collections"] == 0
    assert {"starlette", "ol_dagster.receiver.app"} <= set(result["after_receiver"])
    assert "dagster._daemon.controller" in result["after_receiver"]
