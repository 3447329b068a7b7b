"""``ol-dagster check`` (issue 13) against each fake catalog served on loopback, and embedded.

Each fake starts as a deployment where everything the sync needs holds (``check_against_fakes``);
a test then breaks one thing the way an operator meets it (a wrong token, a role without a
permission, a namespace nobody mapped, a server that is down, a proxy refusing DELETE...) and
reads what a person reads: the exit code and the table.
"""

from __future__ import annotations

import ast
import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from ol_dagster.catalog.blindata import api as blindata_api
from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.commands import cli
from ol_dagster_tests.check_against_fakes import (
    RECEIVER_TOKEN,
    SERVICE,
    TOKENS,
    WAREHOUSE,
    Fakes,
    served_fakes,
)
from ol_dagster_tests.conftest import settings_data
from ol_dagster_tests.fakes.faults import Fault
from ol_dagster_tests.fakes.harness import ds, run
from ol_dagster_tests.fakes.openmetadata_fake import ADMIN, CREATE

KINDS = ["openmetadata", "marquez", "blindata"]


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, secret in TOKENS.items():
        monkeypatch.setenv(name, secret)
    for kind in KINDS:
        monkeypatch.setenv(f"OL_CHECK_RECEIVER_{kind.upper()}", RECEIVER_TOKEN)


@pytest.fixture
def fakes(tmp_path: Path, env: None) -> Iterator[Fakes]:
    with served_fakes(tmp_path) as served:
        yield served


def check(capsys: pytest.CaptureFixture[str], settings: Path, *args: str) -> tuple[int, str, str]:
    code = cli.main(["--settings", str(settings), "check", *args])
    out, err = capsys.readouterr()
    return code, out, err


def rows(out: str) -> dict[str, tuple[str, str]]:
    """The table: check -> (holds, detail), read by the header's columns."""
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("check "))
    holds_at = lines[head].index("holds")
    detail_at = lines[head].index("detail")
    table = {}
    for line in lines[head + 1 :]:
        if not line.strip():
            break
        table[line[:holds_at].strip()] = (line[holds_at:detail_at].strip(), line[detail_at:])
    return table


def row(out: str, name: str) -> tuple[str, str]:
    """(holds, detail) of the table row of check ``name``."""
    table = rows(out)
    assert name in table, f"no row {name!r} in:\n{out}"
    return table[name]


def summary(out: str) -> str:
    return out.strip().splitlines()[-1]


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port nothing listens on, for the whole test: bound here and never listening,
    so connections to it are refused and no other process can take it meanwhile."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


# -- everything holds ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_against_a_ready_catalog_every_check_holds_and_nothing_is_written(
    fakes: Fakes, kind: str, capsys: pytest.CaptureFixture[str]
):
    code, out, err = check(capsys, fakes.settings(), "--definition", f"check_{kind}")
    assert code == 0, out + err
    assert summary(out).startswith("ready: all ")
    assert {holds for holds, _ in rows(out).values()} == {"yes"}
    for secret in TOKENS.values():
        assert secret not in out + err
    # the probes changed nothing a user of the catalog would see
    assert fakes.openmetadata.edges == {} and fakes.openmetadata.tables == {}
    assert fakes.marquez.jobs == {} and fakes.marquez.datasets == {}
    assert fakes.marquez.namespaces == {}
    tenant = fakes.blindata.tenant("demo")
    assert not (tenant.systems or tenant.entities or tenant.flows or tenant.routines)


def test_without_definition_every_definition_is_checked_and_json_says_the_same(
    fakes: Fakes, capsys: pytest.CaptureFixture[str]
):
    code, out, _ = check(capsys, fakes.settings())
    assert code == 0
    assert out.count("ready: all ") == 3
    code, out, _ = check(capsys, fakes.settings(), "--json")
    answer = json.loads(out)
    assert code == 0 and answer["ok"] is True
    assert [r["catalog"] for r in answer["reports"]] == KINDS
    checks = {f["check"] for r in answer["reports"] for f in r["findings"]}
    assert {"token", "EditLineage on table", "OpenLineage endpoint", "SYSTEMS_ADMIN"} <= checks


# -- the token -------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["openmetadata", "blindata"])
def test_a_wrong_token_fails_the_token_check_and_is_never_printed(
    fakes: Fakes, kind: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    wrong = "wrong-token-that-must-not-be-printed"
    monkeypatch.setenv(
        "OL_CHECK_OM_TOKEN" if kind == "openmetadata" else "OL_CHECK_BD_TOKEN", wrong
    )
    code, out, err = check(capsys, fakes.settings(), "--definition", f"check_{kind}")
    assert code == 1
    assert summary(out).startswith("NOT READY: token: ")
    holds, detail = row(out, "token")
    assert holds == "no" and "401" in detail
    assert wrong not in out + err
    assert "Traceback" not in err


def test_a_token_missing_from_the_environment_is_named_not_a_traceback(
    fakes: Fakes, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("OL_CHECK_OM_TOKEN")
    code, out, err = check(capsys, fakes.settings(), "--definition", "check_openmetadata")
    assert code == 1
    assert "OL_CHECK_OM_TOKEN" in row(out, "credentials")[1]
    assert "Traceback" not in err


def test_openmetadata_version_answers_without_a_token_so_only_the_token_check_fails(
    fakes: Fakes, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("OL_CHECK_OM_TOKEN", "expired-jwt")
    _, out, _ = check(capsys, fakes.settings(), "--definition", "check_openmetadata")
    assert row(out, "reachable")[0] == "yes"  # GET /api/v1/system/version needs no token
    assert row(out, "token")[0] == "no"
    assert row(out, "EditLineage on table") == ("no", "not checked: the token is refused")


# -- permissions -----------------------------------------------------------------------------------


def test_an_openmetadata_bot_without_edit_lineage_is_not_ready(
    fakes: Fakes, capsys: pytest.CaptureFixture[str]
):
    fakes.openmetadata.tokens[TOKENS["OL_CHECK_OM_TOKEN"]] = {CREATE}
    code, out, _ = check(capsys, fakes.settings(), "--definition", "check_openmetadata")
    assert code == 1
    assert row(out, "token")[0] == "yes"
    holds, detail = row(out, "EditLineage on table")
    assert holds == "no" and detail.startswith("notAllow")
    assert summary(out).startswith("NOT READY: EditLineage on table: ")


def test_an_openmetadata_bot_without_create_is_a_warning_only(
    fakes: Fakes, capsys: pytest.CaptureFixture[str]
):
    fakes.openmetadata.tokens[TOKENS["OL_CHECK_OM_TOKEN"]] = {"EditLineage"}
    code, out, _ = check(capsys, fakes.settings(), "--definition", "check_openmetadata")
    assert code == 0
    holds, detail = row(out, "Create on table")
    assert holds == "no" and detail.startswith("(warning) ")
    assert "1 warning(s)" in summary(out)


def test_an_openmetadata_token_of_ingestion_bot_is_a_warning(
    fakes: Fakes, capsys: pytest.CaptureFixture[str]
):
    """ol-dagster deletes only what OpenMetadata says its user wrote last: with the user
    OpenMetadata's connectors write as, their edges would read as its own."""
    fakes.openmetadata.users.clear()  # the fake's default: ingestion-bot
    code, out, _ = check(capsys, fakes.settings(), "--definition", "check_openmetadata")
    assert code == 0, out
    holds, detail = row(out, "own user")
    assert holds == "no" and "'ingestion-bot'" in detail and "a bot of its own" in detail


def test_openmetadata_settings_differing_from_the_servers_are_a_warning(
    fakes: Fakes, capsys: pytest.CaptureFixture[str]
):
    """An admin's token reads the server's OpenLineage settings; another's leaves them."""
    name = "server's OpenLineage settings"
    _, out, _ = check(capsys, fakes.settings(), "--definition", "check_openmetadata")
    holds, detail = row(out, name)
    assert holds == "yes" and "not compared" in detail and "403" in detail

    fakes.openmetadata.tokens[TOKENS["OL_CHECK_OM_TOKEN"]] |= {ADMIN}
    _, out, _ = check(capsys, fakes.settings(), "--definition", "check_openmetadata")
    assert row(out, name)[0] == "yes"

    fakes.openmetadata.mapping = {WAREHOUSE: "other-service"}
    fakes.openmetadata.event_type_filter = ["COMPLETE", "FAIL"]
    code, out, _ = check(capsys, fakes.settings(), "--definition", "check_openmetadata")
    assert code == 0
    holds, detail = row(out, name)
    assert holds == "no"
    assert f"serviceMapping[{WAREHOUSE!r}] is {SERVICE!r}, the server's 'other-service'" in detail
    assert "eventTypeFilter is ['COMPLETE'], the server's ['COMPLETE', 'FAIL']" in detail


def test_a_blindata_user_without_systems_admin_is_not_ready(
    fakes: Fakes, capsys: pytest.CaptureFixture[str]
):
    fakes.blindata.set_permissions("ol-dagster", {"SYSTEMS_EDITOR", "QUALITY_ADMIN"})
    code, out, _ = check(capsys, fakes.settings(), "--definition", "check_blindata")
    assert code == 1
    holds, detail = row(out, "SYSTEMS_ADMIN")
    assert holds == "no" and "SYSTEMS_ADMIN" in detail
    assert summary(out).startswith("NOT READY: SYSTEMS_ADMIN: ")
    # the writes an editor may make are still found
    assert row(out, "POST /api/v1/physical_entities [I]")[0] == "yes"


def test_the_embedded_cleanup_user_without_systems_admin_is_not_ready(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    data = settings_data(tmp_path)
    path = tmp_path / "ol_dagster.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    catalog_url = data["catalogs"]["main"]["url"]
    assert check(capsys, path)[0] == 0
    catalog = EmbeddedCatalog(catalog_url)
    catalog.set_permissions("ol-dagster", ["SYSTEMS_EDITOR"])
    catalog.close()
    code, out, _ = check(capsys, path)
    assert code == 1
    assert row(out, "SYSTEMS_ADMIN (ol-dagster)")[0] == "no"


# -- endpoints -------------------------------------------------------------------------------------


def test_a_disabled_openlineage_api_is_not_ready(fakes: Fakes, capsys: pytest.CaptureFixture[str]):
    fakes.openmetadata.enabled = False
    code, out, _ = check(capsys, fakes.settings(), "--definition", "check_openmetadata")
    assert code == 1
    holds, detail = row(out, "OpenLineage endpoint")
    assert holds == "no" and "disabled" in detail and "503" in detail


def test_a_proxy_refusing_deletes_in_front_of_marquez_is_not_ready(
    fakes: Fakes, capsys: pytest.CaptureFixture[str]
):
    fakes.marquez.server.inject(*(Fault(status=403, method="DELETE") for _ in range(2)))
    code, out, _ = check(capsys, fakes.settings(), "--definition", "check_marquez")
    assert code == 1
    assert row(out, "job delete")[0] == "no" and row(out, "dataset delete")[0] == "no"
    assert row(out, "GET /api/v1/lineage")[0] == "yes"


def test_a_marquez_delete_that_reaches_marquez_answers_its_own_404_for_the_probe(
    fakes: Fakes, capsys: pytest.CaptureFixture[str]
):
    """A 404 that is not Marquez's answer about the probe (a route missing behind a proxy)
    does not count as the delete being possible."""
    fakes.marquez.server.inject(Fault(status=404, method="DELETE", body=b'{"code":404}'))
    code, out, _ = check(capsys, fakes.settings(), "--definition", "check_marquez")
    assert code == 1
    assert row(out, "job delete")[0] == "no"


def test_the_marquez_dataset_probe_sends_a_namespace_with_a_slash_encoded_in_one_segment(
    fakes: Fakes, capsys: pytest.CaptureFixture[str]
):
    """Dataset namespaces hold ``/`` (``s3://bucket``): the probe sends one, as ``%2F``. A proxy
    that decodes it answers for another path (Jersey's bare 404): the check says so."""
    code, out, _ = check(capsys, fakes.settings(), "--definition", "check_marquez")
    assert code == 0 and row(out, "dataset delete")[0] == "yes"
    (probe,) = [r.path for r in fakes.marquez.server.seen("DELETE") if "/datasets/" in r.path]
    assert probe.startswith("/api/v1/namespaces/ol-dagster-check%3A%2F%2Fprobe/datasets/probe-")

    decoded = b'{"code":404,"message":"HTTP 404 Not Found"}'
    fakes.marquez.server.inject(
        Fault(
            status=404, method="DELETE", path="/api/v1/namespaces/ol-dagster-check%3A", body=decoded
        )
    )
    code, out, _ = check(capsys, fakes.settings(), "--definition", "check_marquez")
    assert code == 1
    holds, detail = row(out, "dataset delete")
    assert holds == "no" and "%2F" in detail
    assert row(out, "job delete")[0] == "yes"


def test_a_blindata_server_without_an_inferred_call_is_not_ready(
    fakes: Fakes, capsys: pytest.CaptureFixture[str]
):
    """A server that has no PUT for data flows (the path exists, the method not): OPTIONS lists
    what it has, and the check names the call the client would make."""
    fakes.blindata._routes[:] = [
        r for r in fakes.blindata._routes if not (r[0] == "PUT" and "dataflows" in r[1].pattern)
    ]
    code, out, _ = check(capsys, fakes.settings(), "--definition", "check_blindata")
    assert code == 1
    holds, detail = row(out, "PUT /api/v1/dataflows/{uuid} [I]")
    assert holds == "no" and "no PUT" in detail
    assert row(out, "DELETE /api/v1/dataflows/{uuid} [I]")[0] == "yes"


def test_a_blindata_write_that_cannot_be_verified_is_not_ready_unless_assumed(
    fakes: Fakes, capsys: pytest.CaptureFixture[str]
):
    """Not every server answers OPTIONS as Spring MVC does: a write that cannot be seen without
    writing is never reported as holding, and blocks the sync, unless the catalog's settings
    say ``assumeEndpoints: true``: then it is a warning."""
    from ol_dagster_tests.fakes.blindata_fake import Fault as BlindataFault

    fakes.blindata.inject(BlindataFault(status=200, method="OPTIONS", path=r"/system_routines$"))
    code, out, _ = check(capsys, fakes.settings(), "--definition", "check_blindata")
    assert code == 1
    holds, detail = row(out, "POST /api/v1/system_routines [I]")
    assert holds == "no" and detail.startswith("not verified without writing")
    assert "assumeEndpoints: true" in detail
    assert summary(out).startswith("NOT READY: POST /api/v1/system_routines [I]: ")

    fakes.blindata.inject(BlindataFault(status=200, method="OPTIONS", path=r"/system_routines$"))
    assumed = fakes.settings(blindata={"assumeEndpoints": True})
    code, out, _ = check(capsys, assumed, "--definition", "check_blindata")
    assert code == 0
    holds, detail = row(out, "POST /api/v1/system_routines [I]")
    assert holds == "no" and detail.startswith("(warning) not verified without writing")
    assert "assumed (assumeEndpoints: true)" in detail


def test_a_blindata_server_that_ignores_dry_run_is_not_ready_and_loses_nothing(
    fakes: Fakes, capsys: pytest.CaptureFixture[str]
):
    """A server that does not know ``dryRun`` carries a dry run out for real: check's dry run
    (a cutoff nothing is older than) deletes nothing, and its answer, which does not confirm the
    dry run, makes the catalog not ready, whatever ``assumeEndpoints`` says."""
    fakes.blindata.ignore_dry_run()
    settings = fakes.settings(blindata={"assumeEndpoints": True})
    code, out, _ = check(capsys, settings, "--definition", "check_blindata")
    assert code == 1
    holds, detail = row(out, "POST /api/v1/dataflows/*/cleanup [I]")
    assert holds == "no" and "does not confirm dryRun true" in detail
    assert "no 'dryRun' field" in detail
    assert row(out, "SYSTEMS_ADMIN") == ("no", "not verified: the dry run was not confirmed")


def test_every_blindata_path_marked_inferred_is_probed():
    """A path added to ``blindata/api.py`` as ``[I]`` and forgotten in INFERRED_CALLS would go
    unchecked: every path constant whose assignment, or the comment line right above it, says
    [I] is listed (the clock's path is [C]: only its Date header is inferred)."""
    source = Path(blindata_api.__file__).read_text(encoding="utf-8")
    lines = source.splitlines()
    inferred = set()
    for node in ast.parse(source).body:
        value = node.value if isinstance(node, ast.Assign) else None
        if not (isinstance(value, ast.Constant) and str(value.value).startswith("/api/")):
            continue
        text = lines[node.lineno - 1 : node.end_lineno]
        above = lines[node.lineno - 2]
        if any("[I]" in line for line in text) or (above.startswith("#") and "[I]" in above):
            inferred.add(value.value)
    probed = {path for _, path in blindata_api.INFERRED_CALLS}
    assert len(inferred) >= 8, "the parse found too few [I] paths"
    assert inferred - {blindata_api.CLOCK_PATH} == probed


# -- namespaces (OpenMetadata) ---------------------------------------------------------------------


def test_an_unmapped_namespace_in_the_store_is_reported_and_a_mapped_one_found(
    fakes: Fakes, capsys: pytest.CaptureFixture[str]
):
    bucket = "s3://nobody-mapped-this"
    fakes.store(
        "check_openmetadata",
        [run("etl.load", [ds(WAREHOUSE, "shop.public.orders")], [ds(bucket, "exports/orders")])],
    )
    code, out, _ = check(capsys, fakes.settings(), "--definition", "check_openmetadata")
    assert code == 0  # OpenMetadata still takes the events: a warning
    holds, detail = row(out, f"namespace {bucket}")
    assert holds == "no" and "no serviceMapping entry" in detail and detail.startswith("(warning)")
    holds, detail = row(out, f"namespace {WAREHOUSE}")
    assert holds == "yes" and SERVICE in detail


def test_a_namespace_mapped_to_a_service_openmetadata_does_not_have_is_not_ready(
    fakes: Fakes, capsys: pytest.CaptureFixture[str]
):
    fakes.store(
        "check_openmetadata",
        [
            run(
                "etl.load",
                [ds(WAREHOUSE, "shop.public.orders")],
                [ds(WAREHOUSE, "shop.public.kpi")],
            )
        ],
    )
    path = fakes.settings(openmetadata={"serviceMapping": {WAREHOUSE: "prod.warehouse"}})
    code, out, _ = check(capsys, path, "--definition", "check_openmetadata")
    assert code == 1
    holds, detail = row(out, f"namespace {WAREHOUSE}")
    assert holds == "no" and "'prod.warehouse', not in OpenMetadata" in detail
    assert "404" in detail


# -- a catalog or store that is not there ----------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_catalog_that_is_down_fails_with_one_line_and_no_traceback(
    fakes: Fakes, kind: str, capsys: pytest.CaptureFixture[str], closed_port: int
):
    down = f"http://127.0.0.1:{closed_port}"
    path = fakes.settings(**{kind: {"url": down}})
    code, out, err = check(capsys, path, "--definition", f"check_{kind}")
    assert code == 1
    assert "Traceback" not in out + err and err == ""
    last = summary(out)
    assert last.startswith("NOT READY: reachable: GET ") and "ConnectError" in last
    assert row(out, "reachable")[0] == "no"


def test_a_proxy_answering_502_for_a_catalog_behind_it_is_down(
    fakes: Fakes, capsys: pytest.CaptureFixture[str]
):
    fakes.marquez.server.inject(Fault(status=502, body=b"Bad Gateway"))
    code, out, err = check(capsys, fakes.settings(), "--definition", "check_marquez")
    assert code == 1 and "Traceback" not in err
    assert summary(out) == "NOT READY: reachable: GET /api/v1/namespaces: HTTP 502: Bad Gateway"
    assert "job delete" not in rows(out)  # nothing else is asked of a catalog that is down


def test_an_unreachable_store_is_not_ready(
    fakes: Fakes, capsys: pytest.CaptureFixture[str], tmp_path: Path, closed_port: int
):
    fakes.store_url = f"postgresql+psycopg://ol@127.0.0.1:{closed_port}/ol"
    code, out, err = check(capsys, fakes.settings(), "--definition", "check_marquez")
    assert code == 1
    assert row(out, "event store")[0] == "no"
    assert "Traceback" not in err


def test_a_large_clock_skew_is_a_warning(fakes: Fakes, capsys: pytest.CaptureFixture[str]):
    fakes.marquez.clock.advance(hours=2)
    code, out, _ = check(capsys, fakes.settings(), "--definition", "check_marquez")
    assert code == 0
    holds, detail = row(out, "clock")
    found = re.search(r"(\d+) s ahead of this machine", detail)
    assert holds == "no" and found and abs(int(found.group(1)) - 7200) <= 2  # whole seconds


def test_an_unknown_definition_is_a_settings_error(
    fakes: Fakes, capsys: pytest.CaptureFixture[str]
):
    code, out, err = check(capsys, fakes.settings(), "--definition", "nope")
    assert code == 2 and out == ""
    assert "no definition named 'nope'" in err


def test_urls_are_printed_without_their_secrets(
    fakes: Fakes, capsys: pytest.CaptureFixture[str], closed_port: int
):
    """A database URL may carry a password, in its user part or its query (libpq's
    ``sslpassword``, ``password``): ``check`` masks both, in the table and in ``--json``."""
    fakes.store_url = (
        f"postgresql+psycopg://ol:pw-in-user@127.0.0.1:{closed_port}/ol"
        "?sslpassword=pw-in-query&application_name=check"
    )
    for args in ((), ("--json",)):
        code, out, err = check(capsys, fakes.settings(), "--definition", "check_marquez", *args)
        assert code == 1
        assert "pw-in-user" not in out + err and "pw-in-query" not in out + err
        assert f"ol:***@127.0.0.1:{closed_port}/ol?sslpassword=***&application_name=***" in out
