"""``kafka.properties``: a librdkafka property that would hold a secret is never written literally
in the settings file. The keys are librdkafka's sensitive properties (``_RK_SENSITIVE`` in its
``rdkafka_conf.c``, described in its CONFIGURATION.md) and the families the names share
(``*.password``, ``*secret*``, ``*passphrase*``, ``*.pem``, ``*key``): written literally they are
refused at load, naming the key and ``{env: NAME}``; as ``{env: NAME}`` they are read from the
environment when the consumer starts, never kept in the settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ol_dagster.settings import SettingsError, parse_settings
from ol_dagster_tests.conftest import settings_data

LITERAL = "literal-secret-value"

# librdkafka's sensitive properties and those of the same families, as a user would write them
SECRET_KEYS = [
    "sasl.oauthbearer.config",  # may hold a client secret (librdkafka: sensitive)
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.client.credentials.client.secret",
    "sasl.oauthbearer.assertion.private.key.passphrase",
    "sasl.oauthbearer.assertion.private.key.pem",
    "ssl.key.pem",
    "ssl.keystore.password",
    "ssl_key",
    "plugin.api.key",
    "SSL.Key.PEM",
]
# not secrets: a URL, an id, paths, tuning
PLAIN_KEYS = {
    "sasl.oauthbearer.token.endpoint.url": "https://idp.example/oauth2/token",
    "sasl.oauthbearer.client.id": "ol-dagster",
    "sasl.oauthbearer.method": "oidc",
    "ssl.keystore.location": "/etc/kafka/client.p12",
    "fetch.max.bytes": 1048576,
}


def _settings(tmp_path: Path, properties: dict[str, Any]) -> dict[str, Any]:
    data = settings_data(tmp_path)
    data["kafka"] = {
        "bootstrapServers": "127.0.0.1:9092",
        "topics": [{"topic": "lineage", "definition": "add"}],
        "properties": properties,
    }
    return data


# librdkafka's two secrets that ``security`` holds: written there, as {env: NAME}
SECURITY_KEYS = {"sasl.password": "security.password", "ssl.key.password": "security.keyPassword"}


@pytest.mark.parametrize("key", [*SECRET_KEYS, *SECURITY_KEYS])
def test_a_secret_property_written_literally_is_refused_naming_env(tmp_path, key: str) -> None:
    with pytest.raises(SettingsError) as info:
        parse_settings(_settings(tmp_path, {key: LITERAL}))
    text = str(info.value)
    assert "kafka.properties" in text and repr(key) in text
    assert "{env: NAME}" in text
    assert LITERAL not in text and "\n" not in text


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_a_secret_property_as_env_is_read_when_the_consumer_starts(
    tmp_path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OL_KAFKA_TEST_SECRET", raising=False)
    settings = parse_settings(_settings(tmp_path, {key: {"env": "OL_KAFKA_TEST_SECRET"}}))
    kafka = settings.kafka
    assert kafka is not None
    with pytest.raises(SettingsError, match="OL_KAFKA_TEST_SECRET is not set"):
        kafka.consumer_config()
    monkeypatch.setenv("OL_KAFKA_TEST_SECRET", LITERAL)
    assert kafka.consumer_config()[key] == LITERAL
    assert LITERAL not in repr(kafka)  # the settings keep the reference, never the value


def test_properties_that_hold_no_secret_are_passed_as_written(tmp_path) -> None:
    settings = parse_settings(_settings(tmp_path, PLAIN_KEYS))
    assert settings.kafka is not None
    config = settings.kafka.consumer_config()
    assert {k: config[k] for k in PLAIN_KEYS} == PLAIN_KEYS


@pytest.mark.parametrize("key", SECURITY_KEYS)
def test_the_sasl_and_tls_key_passwords_are_securitys_even_as_env(tmp_path, key: str) -> None:
    with pytest.raises(SettingsError) as info:
        parse_settings(_settings(tmp_path, {key: {"env": "OL_KAFKA_TEST_SECRET"}}))
    assert f"{key!r} is set by ol-dagster: use {SECURITY_KEYS[key]} ({{env: NAME}})" in str(
        info.value
    )


def test_a_property_ol_dagster_sets_is_still_refused(tmp_path) -> None:
    with pytest.raises(SettingsError, match="'group.id' is set by ol-dagster: use groupId"):
        parse_settings(_settings(tmp_path, {"group.id": "g"}))


def test_kafka_secrets_are_scrubbed_from_a_failed_run_s_reason(tmp_path, monkeypatch) -> None:
    """A broker error that quotes the SASL password or an OAuth client secret (librdkafka's
    messages can) is shown by ``ol-dagster`` with both masked, like the catalogs' secrets."""
    from ol_dagster.sync.run_failure import scrub, secret_values

    monkeypatch.setenv("OL_TEST_KAFKA_PASSWORD", "kafka-pass-1")
    monkeypatch.setenv("OL_TEST_KAFKA_OAUTH", "oauth-secret-2")
    data = _settings(tmp_path, {"sasl.oauthbearer.client.secret": {"env": "OL_TEST_KAFKA_OAUTH"}})
    data["kafka"]["security"] = {
        "protocol": "SASL_SSL",
        "saslMechanism": "PLAIN",
        "username": "ol",
        "password": {"env": "OL_TEST_KAFKA_PASSWORD"},
    }
    settings = parse_settings(data)
    shown = scrub("auth failed: kafka-pass-1 / oauth-secret-2", secret_values(settings))
    assert "kafka-pass-1" not in shown and "oauth-secret-2" not in shown
    assert shown == "auth failed: *** / ***"
