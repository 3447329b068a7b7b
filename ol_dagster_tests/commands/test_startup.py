"""Start-up refuses what cannot work: ``ol-dagster`` run as a person runs it, a subprocess.

Each case ends in exactly one line on stderr, ``ol-dagster: <why>``, exit code 2, no traceback,
and no secret in the output. And ``ol-dagster sync`` says why a run failed: the step and the
error, in the batch's JSON line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ol_dagster.receiver.intake import sort_events
from ol_dagster.settings import load_settings
from ol_dagster.store import EventStore
from ol_dagster_tests.conftest import PROJECT_ROOT, TOKENS, run_event, settings_data

READS_SETTINGS = ["serve", "sync", "check", "lineage"]


def cli(
    settings: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in TOKENS}
    return subprocess.run(
        [sys.executable, "-m", "ol_dagster.commands.cli", "--settings", str(settings), *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        timeout=timeout,
    )


def refused(proc: subprocess.CompletedProcess[str]) -> str:
    """The one line of a refused start (asserted: exit 2, one line, no traceback)."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("ol-dagster: "), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    return lines[0]


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "ol_dagster.yaml"
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


# -- receiver tokens (serve) -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["s3cret\n", " s3cret", "s3cret  ", "s3c ret", "s3c\tret", "s3c\x1bret"]
)
def test_a_token_no_header_can_carry_is_refused(tmp_path: Path, value: str) -> None:
    path = _write(tmp_path, settings_data(tmp_path))
    env = {"OL_TEST_TOKEN_SNAP": value, "OL_TEST_TOKEN_ADD": "add-secret-token"}

    line = refused(cli(path, "serve", "--port", "0", env=env))

    assert "definition snap: environment variable OL_TEST_TOKEN_SNAP" in line
    assert "s3c" not in line


def test_two_definitions_with_one_token_are_refused_by_name(tmp_path: Path) -> None:
    path = _write(tmp_path, settings_data(tmp_path))
    token = "one-token-for-two-definitions"
    env = {"OL_TEST_TOKEN_SNAP": token, "OL_TEST_TOKEN_ADD": token}

    line = refused(cli(path, "serve", "--port", "0", env=env))

    assert "definitions snap and add have the same receiver token" in line
    assert "OL_TEST_TOKEN_SNAP and OL_TEST_TOKEN_ADD" in line
    assert token not in line


def test_a_token_shorter_than_16_characters_is_refused_by_name(tmp_path: Path) -> None:
    path = _write(tmp_path, settings_data(tmp_path))
    env = {"OL_TEST_TOKEN_SNAP": "fifteen-chars-x", "OL_TEST_TOKEN_ADD": "add-secret-token"}

    line = refused(cli(path, "serve", "--port", "0", env=env))

    assert line.startswith(
        "ol-dagster: definition snap: the receiver token in OL_TEST_TOKEN_SNAP is shorter than "
        "16 characters"
    ), line
    assert "fifteen" not in line


def test_every_missing_token_variable_is_named_at_once(tmp_path: Path) -> None:
    line = refused(cli(_write(tmp_path, settings_data(tmp_path)), "serve", "--port", "0"))

    assert "OL_TEST_TOKEN_SNAP is not set" in line and "OL_TEST_TOKEN_ADD is not set" in line


@pytest.mark.parametrize("content", ["", "definitions: []\n", "store: {}\n"])
def test_serve_refuses_settings_without_a_definition(tmp_path: Path, content: str) -> None:
    line = refused(cli(_write(tmp_path, content), "serve", "--port", "0"))

    assert "defines no sync definition" in line


# -- the settings file (every command that reads it) ----------------------------------------------


@pytest.mark.parametrize("command", READS_SETTINGS)
def test_a_key_written_twice_is_refused_with_its_line(tmp_path: Path, command: str) -> None:
    text = yaml.safe_dump(settings_data(tmp_path), sort_keys=False)
    text = text.replace(
        "  snapshotMode: BATCH_SNAPSHOT\n",
        "  snapshotMode: BATCH_SNAPSHOT\n  cleanup:\n    maxRemovalsPerRun: 5\n"
        "    maxRemovalsPerRun: 50000\n",
        1,
    )
    path = _write(tmp_path, text)
    lines = text.splitlines()
    first = lines.index("    maxRemovalsPerRun: 5") + 1

    line = refused(cli(path, command, *(["dataset:a:b"] if command == "lineage" else [])))

    assert f"duplicate key 'maxRemovalsPerRun' on line {first + 1} (first on line {first})" in line


@pytest.mark.parametrize("command", READS_SETTINGS)
def test_a_settings_file_that_is_not_utf8_is_refused(tmp_path: Path, command: str) -> None:
    path = tmp_path / "ol_dagster.yaml"
    path.write_bytes(b"definitions: []\n# caf\xe9\n")

    line = refused(cli(path, command, *(["dataset:a:b"] if command == "lineage" else [])))

    assert "is not UTF-8: byte 0xE9 on line 2" in line


@pytest.mark.parametrize("command", ["serve", "sync"])
def test_a_directory_or_an_unreadable_path_is_refused(tmp_path: Path, command: str) -> None:
    line = refused(cli(tmp_path, command))
    assert f"settings file {tmp_path} is a directory" in line

    (tmp_path / "a_file").write_text("")
    line = refused(cli(tmp_path / "a_file" / "ol_dagster.yaml", command))
    assert "cannot be read: Not a directory" in line


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_a_settings_file_without_read_permission_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, settings_data(tmp_path))
    path.chmod(0)

    assert "cannot be read: Permission denied" in refused(cli(path, "sync"))


# -- the event store -------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["serve", "sync"])
def test_an_unreachable_store_is_refused_without_its_password(tmp_path: Path, command: str) -> None:
    data = settings_data(tmp_path)
    # port 1 on loopback: nothing listens there
    data["store"]["url"] = "postgresql+psycopg://ol:pw-never-shown@127.0.0.1:1/ol"
    env = {"OL_TEST_TOKEN_SNAP": "snap-secret-token", "OL_TEST_TOKEN_ADD": "add-secret-token"}

    args = ["--port", "0"] if command == "serve" else []

    line = refused(cli(_write(tmp_path, data), command, *args, env=env))

    assert "event store postgresql+psycopg://ol:***@127.0.0.1:1/ol cannot be opened" in line
    assert "pw-never-shown" not in line


@pytest.mark.postgres
def test_a_wrong_store_password_is_refused_without_it(tmp_path: Path, pg_url: str) -> None:
    from sqlalchemy.engine import make_url

    url = make_url(pg_url).set(password="wrong-password-42", database="no_such_db")
    data = settings_data(tmp_path)
    data["store"]["url"] = url.render_as_string(hide_password=False)

    line = refused(cli(_write(tmp_path, data), "sync"))

    assert "cannot be opened" in line and "wrong-password-42" not in line


def test_a_store_url_that_is_no_url_is_refused_without_quoting_it(tmp_path: Path) -> None:
    data = settings_data(tmp_path)
    data["store"]["url"] = "postgresql://ol:secret-in-a-bad-url@host:notaport/db"

    line = refused(cli(_write(tmp_path, data), "sync"))

    assert "is not a database URL" in line and "secret-in-a-bad-url" not in line


# -- a failed run says why -------------------------------------------------------------------------


def test_sync_prints_the_failing_step_and_its_error(tmp_path: Path) -> None:
    data = settings_data(tmp_path)
    data["catalogs"]["om"] = {
        "kind": "openmetadata",
        "url": "http://127.0.0.1:1",
        "token": {"env": "OL_TEST_OM_TOKEN"},
    }
    data["definitions"][1]["catalog"] = "om"
    path = _write(tmp_path, data)
    store = EventStore(load_settings(path).store.url)
    intake = sort_events([run_event()], ["*"])
    store.add_posted_batch("add", intake.accepted, received=intake.received)
    store.dispose()
    home = tmp_path / "home"
    home.mkdir()
    secret = "receiver-secret-value"
    env = {"DAGSTER_HOME": str(home), "OL_TEST_TOKEN_ADD": secret, "OL_TEST_OM_TOKEN": "om\n"}

    proc = cli(path, "sync", "--definition", "add", env=env, timeout=300)

    assert proc.returncode == 1, proc.stderr
    (line,) = [json.loads(x) for x in proc.stdout.splitlines() if x.strip()]
    assert line["status"] == "run_failed"
    assert line["failure"] == {
        "step": "add__catalog_upload",
        "error": "SettingsError: environment variable OL_TEST_OM_TOKEN has blanks or a line "
        "break around its value (a header cannot carry them)",
    }
    assert secret not in proc.stdout + proc.stderr


def test_a_failure_reason_is_the_innermost_error_without_secrets() -> None:
    import dagster as dg

    from ol_dagster.sync.run_failure import run_failure

    secret = "catalog-token-value"

    @dg.op
    def upload() -> None:
        raise ConnectionError(
            f"postgresql+psycopg://ol:db-password@db:5432/ol refused\nBearer {secret}, retry"
        )

    @dg.job
    def sync() -> None:
        upload()

    with dg.instance_for_test() as instance:
        result = sync.execute_in_process(instance=instance, raise_on_error=False)
        records = instance.all_logs(
            result.run_id,
            of_type={dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.RUN_FAILURE},
        )

    assert run_failure(records, [secret]) == {
        "step": "upload",
        "error": "ConnectionError: postgresql+psycopg://ol:***@db:5432/ol refused "
        "Bearer ***, retry",
    }
    assert run_failure([], [secret]) is None
