"""What the real-producer tests share: producer venvs, a receiver, a sync, the synced lineage.

Each producer is installed once into its own venv under ``.venv-producers/`` in the checkout (left
out of git), pinned by the constraints file beside this module, and installed again only when that
file changes. A producer that the package registry cannot give skips its test with pip's reason.

``sync`` and ``synced_state`` are where a test reads what a user would see after the producer
ran: the sync's JSON line (upload, cleanup, checks) and the definition's lineage as the catalog
holds it (jobs with their inputs and outputs, parents, datasets with their columns, column lineage).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.lineage_state import LineageState
from ol_dagster.settings import load_settings
from ol_dagster_tests.conftest import PROJECT_ROOT, stored_raws
from ol_dagster_tests.receiver.test_receiver_faults import Served, receivers

HERE = Path(__file__).resolve().parent
VENVS = PROJECT_ROOT / ".venv-producers"
TOKEN_ENV = "OL_PRODUCER_TOKEN"
TOKEN = "producer-test-token-0123456789"
INSTALL_TIMEOUT = 900  # seconds; a warm pip cache takes under a minute for either producer


@dataclass(frozen=True)
class Producer:
    """A producer's venv: ``bin`` holds its commands; ``install_seconds`` is 0 when it was there."""

    bin: Path
    install_seconds: float


def producer_venv(name: str, requirements: list[str]) -> Producer:
    """``.venv-producers/<name>`` with ``requirements`` under ``constraints-<name>.txt``."""
    constraints = HERE / f"constraints-{name}.txt"
    wanted = hashlib.sha256(
        constraints.read_bytes() + "\n".join(requirements).encode() + sys.version.encode()
    ).hexdigest()
    venv = VENVS / name
    marker = venv / ".installed"
    if marker.exists() and marker.read_text() == wanted:
        return Producer(venv / "bin", 0.0)
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    pip = [
        str(venv / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ]
    done = subprocess.run(
        [*pip, "-c", str(constraints), *requirements],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
    )
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        pytest.skip(f"pip could not install {' '.join(requirements)}: {' | '.join(lines[-3:])}")
    marker.write_text(wanted)
    return Producer(venv / "bin", time.monotonic() - started)


def free_port() -> int:
    """A loopback port free now, for a server that cannot be told to pick its own."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_settings(directory: Path, name: str, namespaces: list[str], **definition: Any) -> Path:
    """One definition ``name`` owning ``namespaces`` (more of its settings in ``definition``), on
    SQLite files in ``directory``."""
    data: dict[str, Any] = {
        "store": {"url": f"sqlite:///{directory / 'store.db'}"},
        "catalogs": {"main": {"kind": "embedded", "url": f"sqlite:///{directory / 'catalog.db'}"}},
        "definitions": [
            {
                "name": name,
                "uuid": "33333333-3333-4333-8333-333333333333",
                "catalog": "main",
                "allowedJobNamespaces": namespaces,
                "receiver": {"token": {"env": TOKEN_ENV}},
                **definition,
            }
        ],
    }
    path = directory / "ol_dagster.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@contextmanager
def receiver(settings: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    """``ol-dagster serve`` on a free loopback port, with the producers' token."""
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    with receivers(settings, [settings.parent / "serve.log"]) as started:
        yield started[0]


def sync(settings: Path, definition: str) -> dict[str, Any]:
    """``ol-dagster sync --definition``: the JSON line of the one batch it synced."""
    home = settings.parent / "dagster_home"
    home.mkdir(exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "ol_dagster.commands.cli", "--settings", str(settings)]
        + ["sync", "--definition", definition],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "DAGSTER_HOME": str(home), TOKEN_ENV: TOKEN},
    )
    lines = [json.loads(ln) for ln in done.stdout.splitlines() if ln.startswith("{")]
    assert done.returncode == 0 and len(lines) == 1, (done.stdout, done.stderr[-3000:])
    return lines[0]


def changes_json(settings: Path, definition: str, batch: int) -> dict[str, Any]:
    """``ol-dagster changes --json`` of one batch: its change set as the command prints it."""
    done = subprocess.run(
        [sys.executable, "-m", "ol_dagster.commands.cli", "--settings", str(settings)]
        + ["changes", "--definition", definition, "--batch", str(batch), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, TOKEN_ENV: TOKEN},
    )
    assert done.returncode == 0, (done.stdout, done.stderr[-3000:])
    return json.loads(done.stdout)


def synced_state(settings: Path, definition: str) -> LineageState:
    """The definition's lineage as its catalog holds it after the syncs."""
    loaded = load_settings(settings)
    catalog = EmbeddedCatalog(f"sqlite:///{settings.parent / 'catalog.db'}")
    try:
        return catalog.export_state(loaded.definition(definition))
    finally:
        catalog.close()


def stored_events(settings: Path) -> list[dict[str, Any]]:
    """Every event the receiver stored, in arrival order."""
    return [json.loads(raw) for raw in stored_raws(f"sqlite:///{settings.parent / 'store.db'}")]


def jobs(state: LineageState) -> dict[str, dict[str, Any]]:
    """The state's jobs by name."""
    return {j["name"]: dict(j) for j in state["jobs"]}


def column_inputs(state: LineageState) -> dict[tuple[str, str], set[tuple[str, str]]]:
    """(dataset name, column) -> the (dataset name, column) pairs it is computed from."""
    return {
        (c["dataset"][1], c["field"]): {(i[1], i[2]) for i in c["inputs"]}
        for c in state["columnLineage"]
    }
