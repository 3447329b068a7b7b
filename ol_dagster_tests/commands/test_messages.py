"""What ``ol-dagster`` says to a person, as a person runs it (a subprocess): the command list, the
options' help, the one-line errors of common mistakes, and the cleanup report's counts."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from ol_dagster.commands.cli import build_parser
from ol_dagster.receiver.app import create_app
from ol_dagster.receiver.server import serve_in_background
from ol_dagster.settings import load_settings
from ol_dagster.store import EventStore
from ol_dagster_tests.commands.test_newcomer_commands import cli, json_lines
from ol_dagster_tests.conftest import TOKENS, run_event, settings_data

COMMANDS = (
    "serve",
    "send",
    "sync",
    "inspect",
    "lineage",
    "changes",
    "check",
    "demo",
    "consume",
)


def _write(tmp_path: Path, data: dict[str, Any], name: str = "ol_dagster.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def test_help_lists_every_command_in_plain_words() -> None:
    proc = cli("--help")

    assert proc.returncode == 0
    listed = re.findall(r"^    (\w+)\s+\S", proc.stdout, re.MULTILINE)
    assert tuple(listed) == COMMANDS, proc.stdout  # was: 5 of 8, in the description
    assert "``" not in proc.stdout and "`" not in proc.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_of_every_command_has_help(command: str) -> None:
    proc = cli(command, "--help")
    assert proc.returncode == 0
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]  # type: ignore[union-attr]
    for action in sub._actions:
        if action.dest in ("help", "settings"):  # argparse's own; --settings is the top level's
            continue
        assert action.help, f"{command} {action.option_strings or action.dest} has no help"
        shown = (
            action.option_strings[-1] if action.option_strings else (action.metavar or action.dest)
        )
        assert shown and shown in proc.stdout


def test_a_secret_written_literally_is_told_to_be_env_without_quoting_it(tmp_path: Path) -> None:
    data = settings_data(tmp_path)
    data["definitions"][0]["receiver"] = {"token": "s3cr3t-written-in-the-file"}

    proc = cli("--settings", str(_write(tmp_path, data)), "check")

    assert proc.returncode == 2
    assert proc.stderr.strip().endswith(
        "definitions.0.receiver.token: a secret is read from the environment, never written in "
        "the file: write {env: NAME} and set the variable NAME"
    )  # was: "Input should be a valid dictionary or instance of EnvSecret"
    assert "s3cr3t" not in proc.stderr + proc.stdout


def test_an_unknown_key_gets_the_key_it_probably_means(tmp_path: Path) -> None:
    data = settings_data(tmp_path)
    data["definitions"][0]["allowedJobNamespace"] = data["definitions"][0].pop(
        "allowedJobNamespaces"
    )
    data["catalogs"]["main"]["ur"] = data["catalogs"]["main"].pop("url")
    data["cleanup"] = {"maxRemovalsPerRun": 5}  # a key of each definition, not of the file

    proc = cli("--settings", str(_write(tmp_path, data)), "check")

    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert (
        "definitions.0.allowedJobNamespace: unknown key (did you mean 'allowedJobNamespaces'?)"
        in line
    )
    assert "catalogs.main.ur: unknown key for an embedded catalog (did you mean 'url'?)" in line
    assert "cleanup: unknown key (it is a key of each definition: definitions[].cleanup)" in line


def test_serve_on_a_busy_port_says_so_in_one_line_and_exits_2(tmp_path: Path) -> None:
    path = _write(tmp_path, settings_data(tmp_path))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        proc = cli("--settings", str(path), "serve", "--port", str(port), env=TOKENS, timeout=60)

    assert proc.returncode == 2, proc.stderr
    # was: the banner, then uvicorn's "[Errno 98] ... address already in use", exit 3
    assert proc.stderr.strip() == (
        f"ol-dagster: cannot listen on port {port} of 127.0.0.1 (Address already in use): "
        "another process listens there; stop it or choose another --port"
    )


def test_inspect_refuses_an_event_the_definitions_namespaces_refuse(tmp_path: Path) -> None:
    data = settings_data(tmp_path)
    path = _write(tmp_path, data)
    events = tmp_path / "events.ndjson"
    events.write_text(
        "\n".join(json.dumps(run_event(ns, "load")) for ns in ("etl", "elsewhere")) + "\n"
    )

    judged = cli("--settings", str(path), "inspect", str(events), "--definition", "snap")
    alone = cli("--settings", str(path), "inspect", str(events))  # two definitions: none chosen

    assert judged.returncode == 1
    assert re.search(r"#0\s+accepted", judged.stdout)
    assert re.search(
        r"#1\s+REJECTED  job\.namespace: 'elsewhere' is not in this definition's "
        r"allowedJobNamespaces or sharedJobNamespaces \(etl, features\)",
        judged.stdout,
    ), judged.stdout  # was: accepted
    assert "1 of 2 event(s) accepted by definition snap" in judged.stdout
    assert alone.returncode == 0
    assert "no definition judged their job namespaces: --definition NAME" in alone.stdout


def test_lineage_refuses_a_negative_depth(tmp_path: Path) -> None:
    proc = cli("lineage", "dataset:pg:t", "--depth", "-1")
    assert proc.returncode == 2
    assert "argument --depth: must be 0 or more, not -1" in proc.stderr


def _with_column_lineage(event: dict[str, Any]) -> dict[str, Any]:
    out = event["outputs"][0]
    out["facets"] = {
        "schema": {"fields": [{"name": "total", "type": "INT"}]},
        "columnLineage": {
            "fields": {
                "total": {
                    "inputFields": [
                        {"namespace": "postgres://db:5432", "name": "raw.orders", "field": "amount"}
                    ]
                }
            }
        },
    }
    event["inputs"][0]["facets"] = {"schema": {"fields": [{"name": "amount", "type": "INT"}]}}
    return event


def test_the_cleanup_report_counts_column_flows_apart_and_judges_their_share(
    tmp_path: Path, tokens: dict[str, str]
) -> None:
    pg = "postgres://db:5432"
    path = _write(tmp_path, settings_data(tmp_path, allowedJobNamespaces=["etl"]))
    env = {**TOKENS, "DAGSTER_HOME": str(tmp_path / "home")}
    (tmp_path / "home").mkdir()

    def job() -> dict[str, Any]:  # a run of the job (each its own run id)
        return run_event(
            "etl", "orders", inputs=[(pg, "raw.orders")], outputs=[(pg, "mart.orders")]
        )

    first, second = tmp_path / "first.json", tmp_path / "second.json"
    first.write_text(json.dumps({"events": [_with_column_lineage(job())]}))
    second.write_text(json.dumps({"events": [job()]}))  # the job's next run: no column lineage
    store = EventStore(load_settings(path).store.url)

    def send_and_sync(file: Path, url: str) -> dict[str, Any]:
        sent = cli(
            "--settings",
            str(path),
            "send",
            str(file),
            "--url",
            url,
            env={"OL_DAGSTER_TOKEN": tokens["snap"]},
        )
        assert sent.returncode == 0, sent.stdout + sent.stderr
        synced = cli("--settings", str(path), "sync", "--definition", "snap", env=env, timeout=300)
        assert synced.returncode == 0, synced.stdout + synced.stderr
        (line,) = json_lines(synced.stdout)
        return line["cleanup"]

    try:
        with serve_in_background(create_app(load_settings(path), store)) as url:
            send_and_sync(first, url)
            report = send_and_sync(second, url)
    finally:
        store.dispose()

    (flows,) = [c for c in report["calls"] if c["target"] == "flows"]
    # the data flow is sent again, its column flow is not: counted as a field flow, apart
    assert flows["dryRun"] == {"dataFlows": 0, "fieldFlows": 1}  # was: {"dataFlows": 1}
    # every column flow of the definition would go: the share guard judges field flows alone
    assert report["plannedByKind"]["fieldFlows"] == 1
    assert report["heldByKind"]["fieldFlows"] == 1
    assert report["shareExceeded"] == ["fieldFlows"]
    assert report["skippedReason"] == "REMOVAL_SHARE_EXCEEDED"
