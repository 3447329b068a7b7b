"""The settings file: defaults, path anchoring, and errors that name the offending key."""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from ol_dagster.settings import (
    SETTINGS_CACHE,
    SETTINGS_ENV,
    EnvSecret,
    LineageReplacement,
    SettingsError,
    SnapshotMode,
    load_settings,
    receiver_tokens,
)
from ol_dagster.settings_cache import CacheStats
from ol_dagster_tests.conftest import TOKENS, settings_data

SNAP_UUID = "11111111-1111-4111-8111-111111111111"
ADD_UUID = "22222222-2222-4222-8222-222222222222"
MINIMAL_DEFINITION = {
    "name": "minimal",
    "uuid": "33333333-3333-4333-8333-333333333333",
    "catalog": "main",
    "receiver": {"token": {"env": "OL_TEST_TOKEN_MINIMAL"}},
}


def _write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _error(path: Path) -> str:
    with pytest.raises(SettingsError) as info:
        load_settings(path)
    return str(info.value)


@pytest.fixture
def base(tmp_path: Path) -> dict[str, Any]:
    """The conftest's two-definition settings, as a mapping the test may spoil."""
    return copy.deepcopy(settings_data(tmp_path))


@pytest.fixture
def no_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*TOKENS, "OL_TEST_TOKEN_MINIMAL"):
        monkeypatch.delenv(name, raising=False)


# -- valid files ----------------------------------------------------------------------------------


def test_minimal_definition_gets_the_safe_defaults(tmp_path: Path, no_tokens: None) -> None:
    path = _write(tmp_path / "ol_dagster.yaml", {"definitions": [MINIMAL_DEFINITION]})

    settings = load_settings(path)

    (d,) = settings.definitions
    assert d.name == "minimal"
    assert str(d.uuid) == MINIMAL_DEFINITION["uuid"]
    assert d.catalog == "main"
    assert d.snapshotMode is SnapshotMode.ADDITIVE
    assert d.lineageReplacement is LineageReplacement.NONE
    assert d.allowedJobNamespaces == ["*"]
    assert d.openLineageSystem is None
    assert d.job_system == "minimal_jobs"
    assert d.jobSystems == []
    assert d.datasetSystems == []
    assert d.cleanup.enabled is True
    assert d.cleanup.maxRemovalsPerRun == 500
    assert d.cleanup.staleJobDays == 30
    assert d.outputOptions.dryRun is False
    assert d.receiver.token.env == "OL_TEST_TOKEN_MINIMAL"
    # the default catalog "main" exists, so the minimal definition is complete
    assert set(settings.catalogs) == {"main"}
    assert settings.catalogs["main"].kind == "embedded"


def test_explicit_values_override_the_defaults(tmp_path: Path) -> None:
    definition = {
        **MINIMAL_DEFINITION,
        "snapshotMode": "BATCH_SNAPSHOT",
        "lineageReplacement": "JOB",
        "allowedJobNamespaces": ["etl", "features"],
        "openLineageSystem": "custom_jobs",
        "jobSystems": [{"namespaces": "features*", "system": "ml_jobs"}],
        "datasetSystems": [
            {
                "namespace": "s3://b",
                "system": "anomalies",
                "cleanupMode": "CUTOFF",
                "cleanupDays": 7,
            }
        ],
        "cleanup": {"enabled": False, "maxRemovalsPerRun": 0, "staleJobDays": 3},
        "limits": {"maxEventsPerRun": 10, "batchWindowSeconds": 5},
        "outputOptions": {"dryRun": True},
    }
    path = _write(tmp_path / "ol_dagster.yaml", {"definitions": [definition]})

    (d,) = load_settings(path).definitions

    assert d.snapshotMode is SnapshotMode.BATCH_SNAPSHOT
    assert d.lineageReplacement is LineageReplacement.JOB
    assert d.allowedJobNamespaces == ["etl", "features"]
    assert d.job_system == "custom_jobs"
    assert d.jobSystems[0].system == "ml_jobs"
    assert d.datasetSystems[0].cleanupMode == "CUTOFF"
    assert d.datasetSystems[0].cleanupDays == 7
    assert (d.cleanup.enabled, d.cleanup.maxRemovalsPerRun, d.cleanup.staleJobDays) == (
        False,
        0,
        3,
    )
    assert (d.limits.maxEventsPerRun, d.limits.batchWindowSeconds) == (10, 5)
    assert d.outputOptions.dryRun is True


def test_conftest_settings_load_without_the_token_variables(
    write_settings: Callable[..., Path], no_tokens: None
) -> None:
    # Loading the settings (what the Dagster UI does at import) never resolves the secrets.
    settings = load_settings(write_settings())

    assert [d.name for d in settings.definitions] == ["snap", "add"]
    assert settings.definition("snap").receiver.token.env == "OL_TEST_TOKEN_SNAP"
    with pytest.raises(SettingsError, match="OL_TEST_TOKEN_SNAP"):
        settings.definition("snap").receiver.token.resolve()


def test_unknown_definition_name_lists_the_known_ones(write_settings: Callable[..., Path]) -> None:
    settings = load_settings(write_settings())
    with pytest.raises(SettingsError, match="nope") as info:
        settings.definition("nope")
    assert "snap" in str(info.value) and "add" in str(info.value)


def test_settings_path_comes_from_the_environment(
    write_settings: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = write_settings()
    monkeypatch.chdir(tmp_path.parent)  # no ol_dagster.yaml here
    monkeypatch.setenv(SETTINGS_ENV, str(path))

    assert [d.name for d in load_settings().definitions] == ["snap", "add"]


# -- relative SQLite paths ------------------------------------------------------------------------


def test_relative_sqlite_urls_are_anchored_to_the_settings_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf_dir = tmp_path / "conf"
    path = _write(
        conf_dir / "ol_dagster.yaml",
        {
            "store": {"url": "sqlite:///.ol_dagster/store.db"},
            "catalogs": {
                "main": {"kind": "embedded", "url": "sqlite+pysqlite:///data/catalog.db"},
                "abs": {"kind": "embedded", "url": f"sqlite:///{tmp_path / 'abs.db'}"},
                "mem": {"kind": "embedded", "url": "sqlite:///:memory:"},
            },
            "definitions": [MINIMAL_DEFINITION],
        },
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    settings = load_settings(Path("..") / "conf" / "ol_dagster.yaml")

    real_conf = conf_dir.resolve()
    assert settings.store.url == f"sqlite:///{real_conf / '.ol_dagster' / 'store.db'}"
    assert (
        settings.catalogs["main"].url == f"sqlite+pysqlite:///{real_conf / 'data' / 'catalog.db'}"
    )
    # absolute paths and in-memory databases are left as written
    assert settings.catalogs["abs"].url == f"sqlite:///{tmp_path / 'abs.db'}"
    assert settings.catalogs["mem"].url == "sqlite:///:memory:"
    assert path.exists()


def test_non_sqlite_urls_are_left_alone(tmp_path: Path) -> None:
    url = "postgresql+psycopg://user@db.example.com:5432/ol"
    path = _write(
        tmp_path / "ol_dagster.yaml",
        {"store": {"url": url}, "definitions": [MINIMAL_DEFINITION]},
    )
    assert load_settings(path).store.url == url


# -- invalid files: every error names the key -----------------------------------------------------


def _spoil_snap(data: dict[str, Any], **changes: Any) -> dict[str, Any]:
    data["definitions"][0].update(changes)
    return data


@pytest.mark.parametrize(
    ("spoil", "key_path", "hint"),
    [
        pytest.param(lambda d: d.update(stor={"url": "x"}), "stor", "unknown key", id="top-level"),
        pytest.param(
            lambda d: d["store"].update(uri="sqlite:///x.db"),
            "store.uri",
            "unknown key",
            id="store",
        ),
        pytest.param(
            lambda d: _spoil_snap(d, cleanup={"maxRemovalz": 5}),
            "definitions.0.cleanup.maxRemovalz",
            "unknown key",
            id="nested-cleanup",
        ),
        pytest.param(
            lambda d: d["definitions"][1].update(snapshotmode="ADDITIVE"),
            "definitions.1.snapshotmode",
            "unknown key",
            id="second-definition",
        ),
        pytest.param(
            lambda d: _spoil_snap(d, limits={"batchWindow": 5}),
            "definitions.0.limits.batchWindow",
            "unknown key",
            id="nested-limits",
        ),
    ],
)
def test_unknown_keys_are_rejected_with_their_path(
    tmp_path: Path,
    base: dict[str, Any],
    spoil: Callable[[dict[str, Any]], object],
    key_path: str,
    hint: str,
) -> None:
    spoil(base)
    path = _write(tmp_path / "ol_dagster.yaml", base)

    message = _error(path)

    assert f"{key_path}: {hint}" in message
    assert str(path) in message


@pytest.mark.parametrize(
    ("changes", "key_path", "hint"),
    [
        pytest.param({"snapshotMode": "SNAPSHOT"}, "definitions.0.snapshotMode", "BATCH_SNAPSHOT"),
        pytest.param({"lineageReplacement": "ALL"}, "definitions.0.lineageReplacement", "JOB"),
        pytest.param(
            {"cleanup": {"maxRemovalsPerRun": -1}},
            "definitions.0.cleanup.maxRemovalsPerRun",
            "greater than or equal to 0",
        ),
        pytest.param(
            {"cleanup": {"staleJobDays": 0}},
            "definitions.0.cleanup.staleJobDays",
            "greater than or equal to 1",
        ),
        pytest.param(
            {"limits": {"maxEventsPerRun": 0}},
            "definitions.0.limits.maxEventsPerRun",
            "greater than or equal to 1",
        ),
        pytest.param({"uuid": "not-a-uuid"}, "definitions.0.uuid", "UUID"),
        pytest.param({"name": "my-repo"}, "definitions.0.name", "letters, digits and '_'"),
        pytest.param({"name": "my repo"}, "definitions.0.name", "letters, digits and '_'"),
        pytest.param({"name": "1repo"}, "definitions.0.name", "must start with a letter"),
        pytest.param({"allowedJobNamespaces": []}, "definitions.0.allowedJobNamespaces", "1 item"),
        pytest.param(
            {"receiver": {"token": {"env": "NOT A NAME"}}},
            "definitions.0.receiver.token.env",
            "pattern",
        ),
        pytest.param(
            {"outputOptions": {"dryRun": "maybe"}},
            "definitions.0.outputOptions.dryRun",
            "boolean",
        ),
    ],
)
def test_wrong_values_are_rejected_with_their_path(
    tmp_path: Path, base: dict[str, Any], changes: dict[str, Any], key_path: str, hint: str
) -> None:
    path = _write(tmp_path / "ol_dagster.yaml", _spoil_snap(base, **changes))

    message = _error(path)

    assert "\n" not in message  # one line, every error in it
    assert f" {key_path}: " in message, message
    assert hint in message.split(f" {key_path}: ", 1)[1].split("; ")[0]  # in that key's error


@pytest.mark.parametrize(
    ("remove", "key_path"),
    [
        (("receiver", "token"), "definitions.0.receiver.token"),
        (("receiver",), "definitions.0.receiver"),
        (("uuid",), "definitions.0.uuid"),
        (("name",), "definitions.0.name"),
    ],
)
def test_missing_required_keys_are_named(
    tmp_path: Path, base: dict[str, Any], remove: tuple[str, ...], key_path: str
) -> None:
    node = base["definitions"][0]
    for part in remove[:-1]:
        node = node[part]
    del node[remove[-1]]
    path = _write(tmp_path / "ol_dagster.yaml", base)

    assert f"{key_path}: Field required" in _error(path)


def test_a_definition_without_a_catalog_is_named(tmp_path: Path, base: dict[str, Any]) -> None:
    del base["definitions"][0]["catalog"]
    path = _write(tmp_path / "ol_dagster.yaml", base)

    message = _error(path)

    assert " definitions.0: " in message
    assert "'catalog'" in message.split(" definitions.0: ", 1)[1]


def test_literal_token_is_refused_and_not_echoed(tmp_path: Path, base: dict[str, Any]) -> None:
    secret = "s3cr3t-literal-token-value"
    path = _write(tmp_path / "ol_dagster.yaml", _spoil_snap(base, receiver={"token": secret}))

    message = _error(path)

    assert "definitions.0.receiver.token" in message
    assert secret not in message


def test_literal_catalog_token_is_refused(tmp_path: Path, base: dict[str, Any]) -> None:
    base["catalogs"]["main"]["token"] = "literal"
    path = _write(tmp_path / "ol_dagster.yaml", base)

    assert "catalogs.main.token" in _error(path)


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"name": "snap"}, "definitions.1.name"),
        ({"uuid": "11111111-1111-4111-8111-111111111111"}, "definitions.1.uuid"),
        (
            {"receiver": {"token": {"env": "OL_TEST_TOKEN_SNAP"}}},
            "definitions.1.receiver.token.env",
        ),
    ],
)
def test_definitions_must_not_share_identity(
    tmp_path: Path, base: dict[str, Any], changes: dict[str, Any], key: str
) -> None:
    base["definitions"][1].update(changes)
    path = _write(tmp_path / "ol_dagster.yaml", base)

    message = _error(path)

    assert key in message
    assert "definitions.0" in message
    assert "already used" in message


def test_uuid_duplicates_are_found_whatever_their_spelling(
    tmp_path: Path, base: dict[str, Any]
) -> None:
    # the same identity in upper case is still the same owner value in the catalog
    base["definitions"][1]["uuid"] = "11111111-1111-4111-8111-111111111111".upper()
    path = _write(tmp_path / "ol_dagster.yaml", base)

    assert "definitions.1.uuid" in _error(path)


def test_definition_must_name_a_known_catalog(tmp_path: Path, base: dict[str, Any]) -> None:
    base["definitions"][1]["catalog"] = "warehouse"
    path = _write(tmp_path / "ol_dagster.yaml", base)

    message = _error(path)

    assert "definitions.1.catalog" in message
    assert "'warehouse'" in message
    assert "main" in message  # the known catalogs are listed


def test_invalid_yaml(tmp_path: Path) -> None:
    path = tmp_path / "ol_dagster.yaml"
    path.write_text("definitions:\n  - name: [unclosed\n", encoding="utf-8")

    message = _error(path)

    assert "not valid YAML" in message
    assert str(path) in message


@pytest.mark.parametrize("content", ["- a\n- b\n", "just a string\n", "42\n"])
def test_file_must_hold_a_mapping(tmp_path: Path, content: str) -> None:
    path = tmp_path / "ol_dagster.yaml"
    path.write_text(content, encoding="utf-8")

    message = _error(path)

    assert "mapping" in message
    assert str(path) in message


def test_missing_file_points_at_the_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nowhere" / "ol_dagster.yaml"

    message = _error(missing)
    assert str(missing) in message
    assert SETTINGS_ENV in message

    monkeypatch.setenv(SETTINGS_ENV, str(missing))
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert str(missing) in str(info.value)
    assert SETTINGS_ENV in str(info.value)


# -- secrets --------------------------------------------------------------------------------------


def test_env_secret_resolves_at_use(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = EnvSecret(env="OL_TEST_SECRET_X")
    monkeypatch.setenv("OL_TEST_SECRET_X", "first")
    assert secret.resolve() == "first"
    monkeypatch.setenv("OL_TEST_SECRET_X", "second")
    assert secret.resolve() == "second"


@pytest.mark.parametrize("value", [None, ""])
def test_env_secret_unset_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("OL_TEST_SECRET_X", raising=False)
    else:
        monkeypatch.setenv("OL_TEST_SECRET_X", value)

    with pytest.raises(SettingsError, match="OL_TEST_SECRET_X"):
        EnvSecret(env="OL_TEST_SECRET_X").resolve()


def test_secret_value_never_appears_in_reprs(
    write_settings: Callable[..., Path], tokens: dict[str, str]
) -> None:
    settings = load_settings(write_settings())
    token = settings.definition("snap").receiver.token

    assert token.resolve() == tokens["snap"]
    for text in (
        repr(token),
        str(token),
        repr(settings),
        str(settings),
        repr(settings.definitions),
    ):
        assert tokens["snap"] not in text
        assert tokens["add"] not in text
    assert "OL_TEST_TOKEN_SNAP" in repr(token)


def test_settings_are_frozen(write_settings: Callable[..., Path]) -> None:
    d = load_settings(write_settings()).definition("snap")
    with pytest.raises(ValueError):
        d.name = "other"  # type: ignore[misc]


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SETTINGS_ENV, raising=False)


# -- what can never work --------------------------------------------------------------------------


def _with_line(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "key", "lines"),
    [
        pytest.param(
            "definitions:\n"
            "  - name: snap\n"
            "    cleanup:\n"
            "      maxRemovalsPerRun: 5\n"
            "      enabled: true\n"
            "      maxRemovalsPerRun: 50000\n",
            "'maxRemovalsPerRun'",
            "line 6 (first on line 4)",
            id="nested",
        ),
        pytest.param(
            "store: {url: 'sqlite:///a.db'}\nstore: {url: 'sqlite:///b.db'}\n",
            "'store'",
            "line 2 (first on line 1)",
            id="top-level",
        ),
        pytest.param(
            "catalogs: {main: {kind: embedded, kind: marquez}}\n", "'kind'", "line 1", id="flow"
        ),
    ],
)
def test_a_key_written_twice_is_refused_with_its_lines(
    tmp_path: Path, text: str, key: str, lines: str
) -> None:
    message = _error(_with_line(tmp_path / "ol_dagster.yaml", text))

    assert f"duplicate key {key} on {lines}" in message
    assert str(tmp_path / "ol_dagster.yaml") in message


def test_a_merged_key_may_still_be_overridden(tmp_path: Path) -> None:
    """``<<: *anchor`` brings keys in to be overridden: that is not a key written twice."""
    path = _with_line(
        tmp_path / "ol_dagster.yaml",
        "definitions:\n"
        "  - name: first\n"
        "    uuid: 11111111-1111-4111-8111-111111111111\n"
        "    catalog: main\n"
        "    allowedJobNamespaces: [etl]\n"
        "    receiver: {token: {env: OL_TEST_TOKEN_SNAP}}\n"
        "    cleanup: &strict {maxRemovalsPerRun: 5, staleJobDays: 7}\n"
        "  - name: second\n"
        "    uuid: 22222222-2222-4222-8222-222222222222\n"
        "    catalog: main\n"
        "    allowedJobNamespaces: [ml]\n"
        "    receiver: {token: {env: OL_TEST_TOKEN_ADD}}\n"
        "    cleanup:\n"
        "      <<: *strict\n"
        "      maxRemovalsPerRun: 9\n",
    )

    cleanup = load_settings(path).definition("second").cleanup

    assert (cleanup.maxRemovalsPerRun, cleanup.staleJobDays) == (9, 7)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"definitions: []\nstore: {url: '\xff'}\n", "is not UTF-8: byte 0xFF on line 2"),
        (b"\xfe\xff", "is not UTF-8"),
    ],
)
def test_a_file_that_is_not_utf8_is_named(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "ol_dagster.yaml"
    path.write_bytes(content)

    assert expected in _error(path)


def test_a_directory_is_not_a_settings_file(tmp_path: Path) -> None:
    assert f"settings file {tmp_path} is a directory" in _error(tmp_path)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("abc\n", "around its value"),
        (" abc", "around its value"),
        ("abc ", "around its value"),
        ("ab c", "holds a blank or a control character"),
        ("ab\x1bc", "holds a blank or a control character"),
        ("ab\x7fc", "holds a blank or a control character"),
    ],
)
def test_a_secret_that_no_header_can_carry_is_refused_unshown(
    monkeypatch: pytest.MonkeyPatch, value: str, problem: str
) -> None:
    monkeypatch.setenv("OL_TEST_SECRET_X", value)

    with pytest.raises(SettingsError) as info:
        EnvSecret(env="OL_TEST_SECRET_X").resolve()

    assert "OL_TEST_SECRET_X" in str(info.value) and problem in str(info.value)
    assert value.strip() not in str(info.value)


def test_receiver_tokens_name_every_problem_at_once(
    write_settings: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = settings_data(tmp_path)
    data["definitions"].append({**MINIMAL_DEFINITION, "allowedJobNamespaces": ["minimal"]})
    data["definitions"].append(
        {
            **MINIMAL_DEFINITION,
            "name": "fourth",
            "uuid": "44444444-4444-4444-8444-444444444444",
            "allowedJobNamespaces": ["fourth"],
            "receiver": {"token": {"env": "OL_TEST_TOKEN_FOURTH"}},
        }
    )
    settings = load_settings(write_settings(data))
    monkeypatch.setenv("OL_TEST_TOKEN_SNAP", "shared-token-value")
    monkeypatch.setenv("OL_TEST_TOKEN_ADD", "other\n")
    monkeypatch.delenv("OL_TEST_TOKEN_MINIMAL", raising=False)
    monkeypatch.setenv("OL_TEST_TOKEN_FOURTH", "shared-token-value")

    with pytest.raises(SettingsError) as info:
        receiver_tokens(settings)
    message = str(info.value)

    assert "definition add: environment variable OL_TEST_TOKEN_ADD has blanks" in message
    assert "definition minimal: environment variable OL_TEST_TOKEN_MINIMAL is not set" in message
    assert "definitions snap and fourth have the same receiver token" in message
    assert "OL_TEST_TOKEN_SNAP and OL_TEST_TOKEN_FOURTH" in message
    assert "shared-token-value" not in message and "other" not in message

    for name in ("ADD", "MINIMAL", "FOURTH"):
        monkeypatch.setenv(f"OL_TEST_TOKEN_{name}", f"token-of-{name.lower()}-0123456")
    assert receiver_tokens(settings) == {
        "snap": "shared-token-value",
        "add": "token-of-add-0123456",
        "minimal": "token-of-minimal-0123456",
        "fourth": "token-of-fourth-0123456",
    }


# -- catalogs: one model per kind -----------------------------------------------------------------


def _catalog_error(tmp_path: Path, base: dict[str, Any], catalog: dict[str, Any]) -> str:
    base["catalogs"]["main"] = catalog
    return _error(_write(tmp_path / "ol_dagster.yaml", base))


@pytest.mark.parametrize(
    ("catalog", "key", "kind"),
    [
        ({"kind": "marquez", "url": "http://m:5000", "tenant": "t"}, "tenant", "marquez"),
        ({"kind": "marquez", "url": "http://m:5000", "chunkSize": 10}, "chunkSize", "marquez"),
        (
            {"kind": "openmetadata", "url": "http://om", "apiKey": {"env": "K"}},
            "apiKey",
            "openmetadata",
        ),
        (
            {"kind": "openmetadata", "url": "http://om", "concurrency": 2},
            "concurrency",
            "openmetadata",
        ),
        (
            {
                "kind": "blindata",
                "url": "http://bd",
                "tenant": "t",
                "token": {"env": "T"},
                "serviceMapping": {},
            },
            "serviceMapping",
            "blindata",
        ),  # fmt: skip
        (
            {"url": "sqlite:///x.db", "token": {"env": "T"}},
            "token",
            "embedded",
        ),  # no kind: embedded
        ({"kind": "embedded", "maxRetries": 2}, "maxRetries", "embedded"),
    ],
)
def test_a_key_of_another_catalog_kind_is_named_with_the_kind(
    tmp_path: Path, base: dict[str, Any], catalog: dict[str, Any], key: str, kind: str
) -> None:
    message = _catalog_error(tmp_path, base, catalog)

    article = "an" if kind[0] in "aeiou" else "a"
    assert f"catalogs.main.{key}: unknown key for {article} {kind} catalog" in message
    assert message.count(": unknown key") == 1  # the kind's own keys are accepted


def test_each_catalog_kind_reads_its_own_keys(tmp_path: Path, no_tokens: None) -> None:
    from ol_dagster.catalog.blindata.settings import BlindataCatalogSettings
    from ol_dagster.catalog.embedded.settings import EmbeddedCatalogSettings
    from ol_dagster.catalog.marquez.settings import MarquezCatalogSettings
    from ol_dagster.catalog.openmetadata.settings import OpenMetadataCatalogSettings

    data = {
        "catalogs": {
            "plain": {"url": "sqlite:///plain.db", "user": "cleaner"},
            "om": {
                "kind": "openmetadata",
                "url": "https://om.example.com",
                "token": {"env": "OM_JWT"},
                "chunkSize": 50,
                "serviceMapping": {"postgres://db:5432": "warehouse"},
                "eventTypeFilter": ["COMPLETE", "FAIL"],
                "timeoutSeconds": 5,
            },
            "mq": {"kind": "marquez", "url": "http://mq:5000", "concurrency": 2, "maxRetries": 0},
            "bd": {
                "kind": "blindata",
                "url": "https://bd.example.com",
                "tenant": "acme",
                "apiKey": {"env": "BD_KEY"},
                "user": "svc",
            },
        }
    }
    catalogs = load_settings(_write(tmp_path / "ol_dagster.yaml", data)).catalogs

    plain, om, mq, bd = (catalogs[k] for k in ("plain", "om", "mq", "bd"))
    assert isinstance(plain, EmbeddedCatalogSettings) and plain.user == "cleaner"
    assert plain.url == f"sqlite:///{tmp_path / 'plain.db'}"  # anchored, embedded only
    assert isinstance(om, OpenMetadataCatalogSettings)
    assert (om.chunkSize, om.eventTypeFilter, om.timeoutSeconds) == (50, ["COMPLETE", "FAIL"], 5)
    assert om.serviceMapping == {"postgres://db:5432": "warehouse"}
    assert [s.env for s in om.secrets()] == ["OM_JWT"]
    assert isinstance(mq, MarquezCatalogSettings) and (mq.concurrency, mq.maxRetries) == (2, 0)
    assert mq.secrets() == []
    assert isinstance(bd, BlindataCatalogSettings)
    assert (bd.tenant, bd.user, [s.env for s in bd.secrets()]) == ("acme", "svc", ["BD_KEY"])


@pytest.mark.parametrize(
    ("catalog", "key_path", "hint"),
    [
        pytest.param(
            {"kind": "marquz", "url": "http://m"},
            "catalogs.main",
            "kind 'marquz' is not one of embedded, openmetadata, marquez, blindata",
            id="kind",
        ),  # fmt: skip
        pytest.param({"kind": "marquez"}, "catalogs.main.url", "Field required", id="http-url"),
        pytest.param(
            {"kind": "marquez", "url": "sqlite:///x.db"},
            "catalogs.main.url",
            "needs an http(s) URL",
            id="not-http",
        ),  # fmt: skip
        pytest.param(
            {"kind": "blindata", "url": "http://b", "token": {"env": "T"}},
            "catalogs.main.tenant",
            "Field required",
            id="tenant",
        ),  # fmt: skip
        pytest.param(
            {"kind": "blindata", "url": "http://b", "tenant": "t"},
            "catalogs.main",
            "needs either 'token'",
            id="no-credential",
        ),  # fmt: skip
        pytest.param(
            {
                "kind": "blindata",
                "url": "http://b",
                "tenant": "t",
                "token": {"env": "T"},
                "apiKey": {"env": "K"},
            },
            "catalogs.main",
            "not both",
            id="two-credentials",
        ),  # fmt: skip
    ],
)
def test_a_catalog_that_cannot_work_is_named(
    tmp_path: Path, base: dict[str, Any], catalog: dict[str, Any], key_path: str, hint: str
) -> None:
    message = _catalog_error(tmp_path, base, catalog)

    assert "\n" not in message
    assert f" {key_path}: " in message, message
    assert hint in message.split(f" {key_path}: ", 1)[1].split("; ")[0]


# -- one owner per namespace per catalog ----------------------------------------------------------


def _two(first: dict[str, Any], second: dict[str, Any], **top: Any) -> dict[str, Any]:
    """Settings with two definitions, ``fin`` and ``rest``, on catalog ``main`` unless told."""
    return {
        "catalogs": {"main": {"kind": "embedded", "url": "sqlite:///catalog.db"}},
        **top,
        "definitions": [
            {**MINIMAL_DEFINITION, "name": "fin", "uuid": SNAP_UUID, **first},
            {
                **MINIMAL_DEFINITION,
                "name": "rest",
                "uuid": ADD_UUID,
                "receiver": {"token": {"env": "OL_TEST_TOKEN_ADD"}},
                **second,
            },
        ],
    }


@pytest.mark.parametrize(
    ("first", "second", "common"),
    [
        ({"allowedJobNamespaces": ["fin"]}, {}, "fin"),  # the default ["*"] admits every one
        ({"allowedJobNamespaces": ["fin"]}, {"allowedJobNamespaces": ["fin"]}, "fin"),
        ({"allowedJobNamespaces": ["spark?"]}, {"allowedJobNamespaces": ["spark1"]}, "spark1"),
        ({"allowedJobNamespaces": ["[a-c]x"]}, {"allowedJobNamespaces": ["ml", "bx"]}, "bx"),
        # owned by one, shared by the other: the owner's cutoff would take the other's lineage
        (
            {"allowedJobNamespaces": ["etl*"]},
            {"allowedJobNamespaces": ["ml"], "sharedJobNamespaces": ["etl_shared"]},
            "etl_shared",
        ),
        (
            {"allowedJobNamespaces": ["ops"], "sharedJobNamespaces": ["common*"]},
            {"allowedJobNamespaces": ["common_ml"]},
            "common_ml",
        ),
    ],
    ids=[
        "star-beside-fin",
        "fin-twice",
        "question-mark",
        "class",
        "owned-vs-shared",
        "shared-vs-owned",
    ],
)
def test_two_definitions_that_can_own_one_namespace_on_one_catalog_are_refused(
    tmp_path: Path, first: dict[str, Any], second: dict[str, Any], common: str
) -> None:
    message = _error(_write(tmp_path / "ol_dagster.yaml", _two(first, second)))

    assert "\n" not in message
    assert "definitions fin and rest both feed catalog 'main'" in message
    assert f"both admit job namespace {common!r}" in message
    assert "one owner per namespace per catalog" in message
    assert "sharedJobNamespaces" in message  # the way out


@pytest.mark.parametrize(
    ("fin", "rest"),
    [
        (["etl"], ["ETL"]),  # case counts
        (["a*b"], ["*c"]),
        (["etl"], ["etl_x", "etl|x", "etl.*"]),  # no prefix is a namespace
        (["\u00e9tl"], ["e\u0301tl"]),  # NFC and NFD are different namespaces
        (["[!f]*"], ["f*"]),
    ],
    ids=["case", "ends", "prefixes", "nfc-nfd", "negated-class"],
)
def test_disjoint_patterns_on_one_catalog_load(
    tmp_path: Path, fin: list[str], rest: list[str]
) -> None:
    data = _two({"allowedJobNamespaces": fin}, {"allowedJobNamespaces": rest})

    settings = load_settings(_write(tmp_path / "ol_dagster.yaml", data))

    assert settings.definition("fin").allowedJobNamespaces == fin


def test_a_namespace_both_declare_shared_loads_and_is_shared_by_both(tmp_path: Path) -> None:
    data = _two(
        {"allowedJobNamespaces": ["fin"], "sharedJobNamespaces": ["common"]},
        {"allowedJobNamespaces": ["ops*"], "sharedJobNamespaces": ["comm?n"]},
    )

    settings = load_settings(_write(tmp_path / "ol_dagster.yaml", data))

    fin, rest = settings.definition("fin"), settings.definition("rest")
    assert fin.namespace_patterns == ("fin", "common")
    assert rest.namespace_patterns == ("ops*", "comm?n")
    assert fin.is_shared("common") and rest.is_shared("common")
    assert not fin.is_shared("fin") and not fin.is_shared("Common")
    assert not fin.sole_namespace  # a shared namespace: no CUTOFF dataset System


@pytest.mark.parametrize(
    ("allowed", "shared", "sole"),
    [
        (["warehouse"], [], True),
        (["spark?"], [], False),  # a glob character: several namespaces
        (["spark[12]"], [], False),
        (["spark["], [], False),  # fnmatch reads it literally, yet it is not written as one name
        (["etl", "features"], [], False),
        (["warehouse"], ["common"], False),
    ],
    ids=["literal", "question-mark", "class", "open-bracket", "two", "shared"],
)
def test_a_sole_namespace_is_one_literal_pattern_and_nothing_shared(
    tmp_path: Path, allowed: list[str], shared: list[str], sole: bool
) -> None:
    data = {
        "definitions": [
            {
                **MINIMAL_DEFINITION,
                "allowedJobNamespaces": allowed,
                "sharedJobNamespaces": shared,
            }
        ]
    }

    (d,) = load_settings(_write(tmp_path / "ol_dagster.yaml", data)).definitions

    assert d.sole_namespace is sole


@pytest.mark.parametrize(
    ("catalogs", "where"),
    [
        # one database under two keys, however its URL is spelled
        (
            {
                "main": {"url": "sqlite:///data/catalog.db"},
                "other": {"kind": "embedded", "url": "sqlite:///./data//catalog.db"},
            },
            "other",
        ),
        (
            {
                "main": {"url": "postgresql+psycopg://u@db:5432/cat"},
                "other": {"url": "postgresql://u@db:5432/cat"},
            },
            "other",
        ),
        # no URL of their own: both on databaseUrl
        ({"main": {"kind": "embedded"}, "other": {"kind": "embedded"}}, "other"),
        (
            {
                "main": {"kind": "marquez", "url": "http://marquez:5000"},
                "other": {"kind": "marquez", "url": "http://marquez:5000/"},
            },
            "other",
        ),
    ],
    ids=["sqlite-path-spelling", "postgresql-driver", "database-url", "marquez-trailing-slash"],
)
def test_one_catalog_under_two_keys_is_one_catalog(
    tmp_path: Path, catalogs: dict[str, Any], where: str
) -> None:
    data = _two(
        {"allowedJobNamespaces": ["fin"]},
        {"catalog": where},
        databaseUrl="postgresql+psycopg://u@db:5432/cat",
    )
    data["catalogs"] = catalogs

    message = _error(_write(tmp_path / "ol_dagster.yaml", data))

    assert "definitions fin and rest both feed catalog 'main' (rest names it 'other')" in message
    assert "both admit job namespace 'fin'" in message


def test_different_catalogs_may_hold_the_same_namespaces(tmp_path: Path) -> None:
    data = _two({"allowedJobNamespaces": ["fin"]}, {"catalog": "other"})
    data["catalogs"] = {
        "main": {"url": "sqlite:///catalog.db"},
        "other": {"url": "sqlite:///other.db"},
        # one Blindata server, two tenants: two catalogs
        "bd1": {"kind": "blindata", "url": "http://bd", "tenant": "a", "token": {"env": "T"}},
        "bd2": {"kind": "blindata", "url": "http://bd", "tenant": "b", "token": {"env": "T"}},
    }
    data["definitions"].append(
        {
            **MINIMAL_DEFINITION,
            "name": "third",
            "uuid": "33333333-3333-4333-8333-333333333333",
            "catalogs": ["bd1"],
            "allowedJobNamespaces": ["fin"],
            "receiver": {"token": {"env": "OL_TEST_TOKEN_THIRD"}},
        }
    )
    data["definitions"].append(
        {
            **MINIMAL_DEFINITION,
            "name": "fourth",
            "uuid": "44444444-4444-4444-8444-444444444444",
            "catalog": "bd2",
            "receiver": {"token": {"env": "OL_TEST_TOKEN_FOURTH"}},
        }
    )
    del data["definitions"][2]["catalog"]

    settings = load_settings(_write(tmp_path / "ol_dagster.yaml", data))

    assert [d.name for d in settings.definitions] == ["fin", "rest", "third", "fourth"]


def test_a_definition_feeding_several_catalogs_is_checked_on_each(tmp_path: Path) -> None:
    data = _two(
        {"catalogs": ["main", "lineage"], "allowedJobNamespaces": ["fin"]},
        {"catalog": "lineage"},
    )
    data["catalogs"]["lineage"] = {"kind": "marquez", "url": "http://marquez:5000"}
    del data["definitions"][0]["catalog"]

    message = _error(_write(tmp_path / "ol_dagster.yaml", data))

    assert "definitions fin and rest both feed catalog 'lineage'" in message


# -- read once per version of the file, per sensor tick, per run ----------------------------------


def _settle(path: Path, age_seconds: float) -> None:
    """Date the file back, as a file edited a while ago is (a fresh write's time can be shared
    with the next write: the cache re-reads such a file until it is older)."""
    when = time.time() - age_seconds
    os.utime(path, (when, when))


def _loads(before: CacheStats) -> tuple[int, int]:
    """(loads, parses) of the settings since ``before``."""
    after = SETTINGS_CACHE.stats()
    parses = after.parses - before.parses
    return after.hits - before.hits + parses, parses


def test_an_unchanged_file_is_parsed_once_and_an_edited_one_again(tmp_path: Path) -> None:
    path = _write(tmp_path / "ol_dagster.yaml", {"analysisWindowDays": 7})
    _settle(path, 60)
    before = SETTINGS_CACHE.stats()

    first = load_settings(path)
    assert load_settings(path) is first
    assert _loads(before) == (2, 1)

    _write(path, {"analysisWindowDays": 9})  # same size, new time
    _settle(path, 30)
    assert load_settings(path).analysisWindowDays == 9
    assert _loads(before) == (3, 2)


def test_a_file_written_just_now_is_read_again(tmp_path: Path) -> None:
    """Two writes within the file system's time granularity may share a time and a size: a file
    this young is never answered from the cache."""
    path = _write(tmp_path / "ol_dagster.yaml", {"analysisWindowDays": 7})
    assert load_settings(path).analysisWindowDays == 7
    path.write_text(yaml.safe_dump({"analysisWindowDays": 8}), encoding="utf-8")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns))  # no time change

    assert load_settings(path).analysisWindowDays == 8


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


def test_a_sensor_tick_reads_the_settings_once_and_sees_an_edit_at_the_next(
    write_settings: Callable[..., Path], instance: dg.DagsterInstance
) -> None:
    from ol_dagster_tests.dagster.test_sensor import Harness, ev, keys_of

    path = write_settings(limits={"batchWindowSeconds": 3600, "maxEventsPerRun": 1000})
    _settle(path, 60)
    h = Harness(path, instance)
    try:
        batch = h.store.add_stream_events("snap", [ev(0), ev(1)], received=2)

        before = SETTINGS_CACHE.stats()
        first = h.tick()
        assert first.run_requests == []  # an hour's window: still open
        assert _loads(before)[0] == 1  # one read of the file (here from the cache) per tick

        write_settings(limits={"batchWindowSeconds": 0, "maxEventsPerRun": 1000})
        _settle(path, 30)
        before = SETTINGS_CACHE.stats()
        second = h.tick()

        assert _loads(before) == (1, 1)  # read once, and parsed: the file changed
        assert keys_of(second) == [str(batch)]  # sealed by the window of the edited file
    finally:
        h.close()


def test_a_sync_run_reads_the_settings_once(
    write_settings: Callable[..., Path], instance: dg.DagsterInstance
) -> None:
    from ol_dagster.defs import names
    from ol_dagster_tests.dagster.test_sensor import Harness, ev

    path = write_settings()
    _settle(path, 60)
    h = Harness(path, instance)
    try:
        batch = h.store.add_posted_batch("add", [ev(0)], received=1)
        instance.add_dynamic_partitions(names.partitions("add"), [str(batch)])
        before = SETTINGS_CACHE.stats()

        result = h.defs.resolve_job_def(names.job("add")).execute_in_process(
            instance=instance, partition_key=str(batch), raise_on_error=False
        )

        assert result.success
        # the store and the catalog resource of the run share one read
        assert _loads(before) == (1, 0)
    finally:
        h.close()
