"""The commands as a newcomer types them: ``ol-dagster send``, ``sync`` with nothing to do and
with a batch that did not sync, and the ``lineage`` command the demo prints, each run as a person
runs it (a subprocess in the project) against a real receiver, store and catalog.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.commands.demo import lineage_command, ui_hint
from ol_dagster.receiver.app import create_app
from ol_dagster.receiver.intake import sort_events
from ol_dagster.receiver.server import serve_in_background
from ol_dagster.settings import load_settings
from ol_dagster.store import EventStore
from ol_dagster.sync.upload import build_graph
from ol_dagster_tests.conftest import PROJECT_ROOT, TOKENS, events_of, run_event, settings_data
from ol_dagster_tests.fakes.faults import serve
from ol_dagster_tests.fakes.harness import pg, run
from ol_dagster_tests.fakes.marquez_fake import MarquezFake

SNAP_TOKEN = TOKENS["OL_TEST_TOKEN_SNAP"]


def cli(
    *args: str, cwd: Path = PROJECT_ROOT, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``ol-dagster ARGS`` in a process of its own, without the test tokens in its environment."""
    base = {k: v for k, v in os.environ.items() if k not in TOKENS and k != "OL_DAGSTER_SETTINGS"}
    return subprocess.run(
        [sys.executable, "-m", "ol_dagster.commands.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        timeout=timeout,
    )


def json_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


# -- send ------------------------------------------------------------------------------------------


@pytest.fixture
def receiver(tmp_path: Path, tokens: dict[str, str]) -> Iterator[tuple[str, EventStore]]:
    """The real receiver on a loopback port it bound itself; yields its base URL and store."""
    path = tmp_path / "ol_dagster.yaml"
    path.write_text(yaml.safe_dump(settings_data(tmp_path)))
    store = EventStore(load_settings(path).store.url)
    try:
        with serve_in_background(create_app(load_settings(path), store)) as url:
            yield url, store
    finally:
        store.dispose()


def _event_file(tmp_path: Path, name: str, events: list[dict[str, Any]]) -> Path:
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n")  # NDJSON
    return path


@pytest.mark.parametrize("suffix", ["", "/", "/api/v1/lineage", "/api/v1/lineage/batch"])
def test_send_takes_the_base_url_or_the_endpoint_producers_are_given(
    receiver: tuple[str, EventStore], tmp_path: Path, suffix: str
) -> None:
    url, store = receiver
    file = _event_file(tmp_path, "snapshot.ndjson", events_of(3))

    proc = cli("send", str(file), "--url", url + suffix, env={"OL_DAGSTER_TOKEN": SNAP_TOKEN})

    assert proc.returncode == 0, proc.stdout + proc.stderr
    (answer,) = json_lines(proc.stdout)
    assert answer["file"] == str(file) and answer["httpStatus"] == 200
    assert answer["summary"]["accepted"] == 3
    # stored whole as one batch of the token's definition, a snapshot (the batch endpoint)
    (batch,) = store.batches("snap")
    assert batch.id == answer["batchId"] and batch.accepted_count == 3
    assert f"whole snapshot: {file}: " in proc.stderr
    assert SNAP_TOKEN not in proc.stdout + proc.stderr


def test_send_answers_each_file_and_exits_1_when_one_is_refused(
    receiver: tuple[str, EventStore], tmp_path: Path
) -> None:
    url, store = receiver
    good = _event_file(tmp_path, "good.ndjson", events_of(2))
    foreign = _event_file(tmp_path, "foreign.ndjson", [run_event("elsewhere", "j")])
    missing = tmp_path / "missing.json"

    proc = cli(
        "send",
        str(good),
        str(foreign),
        str(missing),
        "--url",
        url,
        env={"OL_DAGSTER_TOKEN": SNAP_TOKEN},
    )

    assert proc.returncode == 1, proc.stdout + proc.stderr
    first, second, third = json_lines(proc.stdout)
    assert (first["httpStatus"], first["summary"]["accepted"]) == (200, 2)
    assert second["httpStatus"] == 400  # no event accepted: the job namespace is not allowed
    assert "allowedJobNamespaces" in json.dumps(second)
    assert third["file"] == str(missing) and "error" in third
    assert [b.accepted_count for b in store.batches("snap")] == [2]


def test_send_with_a_wrong_token_prints_the_401_and_exits_1(
    receiver: tuple[str, EventStore], tmp_path: Path
) -> None:
    url, store = receiver
    file = _event_file(tmp_path, "f.ndjson", events_of(1))
    proc = cli("send", str(file), "--url", url, env={"OL_DAGSTER_TOKEN": "not-the-token"})
    assert proc.returncode == 1
    (answer,) = json_lines(proc.stdout)
    assert answer["httpStatus"] == 401
    assert store.batches() == []


def test_send_reads_the_variable_token_env_names_and_warns_of_a_token_on_the_command_line(
    receiver: tuple[str, EventStore], tmp_path: Path
) -> None:
    """A token on the command line is visible to every user of the machine (``ps``): ``send``
    reads it from an environment variable, and ``--token`` still works but says so."""
    url, store = receiver
    file = _event_file(tmp_path, "f.ndjson", events_of(1))
    named = cli(
        "send", str(file), "--url", url, "--token-env", "MY_TOKEN", env={"MY_TOKEN": SNAP_TOKEN}
    )
    assert named.returncode == 0, named.stdout + named.stderr
    assert "warning" not in named.stderr
    given = cli("send", str(file), "--url", url, "--token", SNAP_TOKEN)
    assert given.returncode == 0, given.stdout + given.stderr
    assert (
        "ol-dagster: warning: --token is visible to other users of this machine (ps); "
        "set OL_DAGSTER_TOKEN instead"
    ) in given.stderr
    assert SNAP_TOKEN not in given.stdout + given.stderr
    assert [b.accepted_count for b in store.batches("snap")] == [1, 1]


def test_send_without_a_token_says_how_to_give_one(tmp_path: Path) -> None:
    file = _event_file(tmp_path, "f.ndjson", events_of(1))
    proc = cli("send", str(file))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == (
        "ol-dagster: set OL_DAGSTER_TOKEN to the receiver token (or name another variable with "
        "--token-env)"
    )


def test_send_to_an_unreachable_receiver_names_the_url_and_never_the_token(tmp_path: Path) -> None:
    file = _event_file(tmp_path, "f.ndjson", events_of(1))
    secret = "a-token-that-must-not-show"
    with socket.socket() as held:  # bound, never listening: connections to it are refused
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        proc = cli(
            "send",
            str(file),
            "--url",
            f"http://user:url-password@127.0.0.1:{port}",
            env={"OL_DAGSTER_TOKEN": secret},
        )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith(
        f"ol-dagster: cannot post {file} to http://user:***@127.0.0.1:{port}/api/v1/lineage/batch: "
        "ConnectError: "
    ), line
    assert "Traceback" not in proc.stderr
    assert secret not in proc.stdout + proc.stderr
    assert "url-password" not in proc.stdout + proc.stderr


def test_send_help_shows_the_default_receiver_url() -> None:
    proc = cli("send", "--help")
    assert proc.returncode == 0
    assert "(default: http://127.0.0.1:5000)" in " ".join(proc.stdout.split())


# -- sync ------------------------------------------------------------------------------------------


def _settings(tmp_path: Path, data: dict[str, Any] | None = None) -> Path:
    path = tmp_path / "ol_dagster.yaml"
    path.write_text(yaml.safe_dump(data or settings_data(tmp_path)))
    return path


@pytest.mark.parametrize("definition", [None, "add"])
def test_sync_with_nothing_pending_says_so_per_definition_and_exits_0(
    tmp_path: Path, definition: str | None
) -> None:
    path = _settings(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    args = ["--settings", str(path), "sync", *(["--definition", definition] if definition else [])]

    proc = cli(*args, env={"DAGSTER_HOME": str(home)}, timeout=300)

    assert proc.returncode == 0, proc.stderr[-3000:]
    asked = [definition] if definition else ["snap", "add"]
    assert json_lines(proc.stdout) == [
        {"definition": name, "status": "nothing_pending"} for name in asked
    ]


def test_sync_exits_1_when_a_batch_upload_failed_though_its_run_succeeded(tmp_path: Path) -> None:
    """The catalog cannot take one event (a proxy in front of Marquez refuses its body, 413,
    even alone): the batch's upload fails, its cleanup is skipped (UPLOAD_FAILED), the run itself
    succeeds and the batch is FAILED. ``ol-dagster sync`` must say so with exit 1, not 0."""
    marquez = MarquezFake()
    marquez.server.limit_body(20_000)
    with serve(marquez.server) as url:
        data = settings_data(tmp_path)
        data["catalogs"]["main"] = {"kind": "marquez", "url": url, "maxRetries": 0}
        # "add" alone (every job namespace), on the Marquez catalog
        data["definitions"] = [{**data["definitions"][1], "catalog": "main"}]
        path = _settings(tmp_path, data)
        store = EventStore(load_settings(path).store.url)
        events = [
            run("etl.good", [pg("a")], [pg("b")]),
            run("etl.large", [pg("x")], [pg("c")]),
        ]
        events[1]["job"]["facets"] = {
            "documentation": {
                "_producer": "https://example.com/tests",
                "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DocumentationJobFacet.json",
                "description": "x" * 40_000,
            }
        }
        intake = sort_events(events, ["*"])
        assert not intake.rejected
        batch_id = store.add_posted_batch("add", intake.accepted, received=intake.received)
        home = tmp_path / "home"
        home.mkdir()

        proc = cli("--settings", str(path), "sync", env={"DAGSTER_HOME": str(home)}, timeout=300)

        (line,) = json_lines(proc.stdout)
        assert (line["batchId"], line["status"]) == (batch_id, "failed"), line
        assert line["cleanup"]["skippedReason"] == "UPLOAD_FAILED"
        assert proc.returncode == 1, proc.stderr[-3000:]
        assert len(list(store.iter_events(batch_id))) == 2  # kept for the retry
        store.dispose()


# -- the lineage command the demo prints -----------------------------------------------------------

WH = "postgres://db:5432"
ORDERS = f"dataset:{WH}:shop.public.orders"


def _filled_catalog(tmp_path: Path, data: dict[str, Any], where: Path) -> Path:
    """Settings at ``where`` whose definition ``snap`` uploaded orders_raw -> load -> orders."""
    where.write_text(yaml.safe_dump(data))
    settings = load_settings(where)
    event = run_event(
        "etl",
        "load_orders",
        inputs=[(WH, "shop.public.orders_raw")],
        outputs=[(WH, "shop.public.orders")],
    )
    graph = build_graph([json.dumps(event).encode()], settings.definition("snap"))
    catalog = EmbeddedCatalog(settings.catalogs["main"].url)
    try:
        assert catalog.upload(graph, settings.definition("snap")).succeeded
    finally:
        catalog.close()
    return where


@pytest.mark.parametrize(
    "settings_here", [True, False], ids=["settings-here", "settings-elsewhere"]
)
def test_the_lineage_command_the_demo_prints_works_as_printed(
    tmp_path: Path, settings_here: bool
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    where = workdir / "ol_dagster.yaml" if settings_here else tmp_path / "elsewhere.yaml"
    path = _filled_catalog(tmp_path, settings_data(tmp_path), where)  # two definitions
    old_cwd = Path.cwd()
    os.chdir(workdir)  # the demo's settings_path(None) is relative to where it runs
    try:
        printed = lineage_command(str(path), "snap", ORDERS)
    finally:
        os.chdir(old_cwd)
    assert ("--settings" in printed) is not settings_here
    program, *args = shlex.split(printed)
    # this install's ol-dagster, as the shell finds it or by its path (no activated venv)
    assert program in ("ol-dagster", str(Path(sys.executable).parent / "ol-dagster"))

    proc = cli(*args, cwd=workdir)

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"dataset:{WH}:shop.public.orders_raw  ->  job:etl:load_orders" in proc.stdout
    assert f"job:etl:load_orders  ->  {ORDERS}" in proc.stdout


def test_the_ui_command_the_demo_prints_runs_without_an_activated_venv(
    tmp_path: Path, write_settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = write_settings()  # no Makefile beside it: not the checkout, as after a plain install
    home = tmp_path / "dagster_home"
    home.mkdir()
    bare = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    monkeypatch.setenv("PATH", bare["PATH"])  # the venv's bin is not on it
    monkeypatch.setenv("DAGSTER_HOME", str(home))

    printed = ui_hint(str(settings))

    command, _, after = printed.partition("  (then open ")
    assert after == "http://127.0.0.1:3000)"
    assert " dagster dev " not in command  # was: "dagster: command not found"
    # the same command with the code location checked instead of served, in a plain shell
    validate = command.replace(" dev -m ", " definitions validate -m ")
    assert validate != command
    proc = subprocess.run(
        ["/bin/sh", "-c", validate], capture_output=True, text=True, env=bare, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Validation successful" in proc.stdout + proc.stderr


def test_lineage_without_definition_names_the_choices_or_takes_the_only_one(
    tmp_path: Path,
) -> None:
    data = settings_data(tmp_path)
    two = _filled_catalog(tmp_path, data, tmp_path / "two.yaml")
    proc = cli("--settings", str(two), "lineage", ORDERS)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "ol-dagster: several definitions (snap, add): choose one with --definition"
    )

    data["definitions"] = data["definitions"][:1]
    one = tmp_path / "one.yaml"
    one.write_text(yaml.safe_dump(data))
    proc = cli("--settings", str(one), "lineage", ORDERS, "--upstream")
    assert proc.returncode == 0, proc.stderr
    assert f"job:etl:load_orders  ->  {ORDERS}" in proc.stdout
