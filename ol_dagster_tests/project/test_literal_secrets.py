"""A secret is never written in the settings file, wherever it would go: the user part or a
query parameter of an HTTP catalog's URL is refused at load, in one line that names the key and
never shows the value (the token goes in ``token: {env: NAME}``). A database URL keeps its
password (it is masked wherever it is shown)."""

from __future__ import annotations

import pytest

from ol_dagster.settings import SettingsError, parse_settings
from ol_dagster_tests.conftest import settings_data

SECRET = "s3cr3t-literal"


def _with_catalog(tmp_path, catalog: dict) -> dict:
    data = settings_data(tmp_path)
    data["catalogs"]["om"] = catalog
    return data


@pytest.mark.parametrize("kind", ["openmetadata", "marquez", "blindata"])
@pytest.mark.parametrize(
    ("url", "said"),
    [
        (f"https://ol:{SECRET}@catalog.example.com/api", "carries a password in its user part"),
        (f"https://catalog.example.com/api?token={SECRET}", "query parameter 'token'"),
        (f"https://catalog.example.com/api?x=1&api_key={SECRET}", "query parameter 'api_key'"),
        (f"https://catalog.example.com/api?apikey={SECRET}", "query parameter 'apikey'"),
        (f"https://catalog.example.com/api?Password={SECRET}", "query parameter 'Password'"),
        (f"https://catalog.example.com/api?client_secret={SECRET}", "'client_secret'"),
        (f"https://catalog.example.com/api?access_token={SECRET}", "'access_token'"),
        (f"https://catalog.example.com/api?sig={SECRET}", "query parameter 'sig'"),
    ],
)
def test_a_literal_secret_in_an_http_catalog_url_is_refused(tmp_path, kind, url, said):
    catalog = {"kind": kind, "url": url}
    if kind == "blindata":
        catalog["tenant"] = "7a1e2c44-0d4b-4c4e-9a55-3f6f1b0c2d10"
    with pytest.raises(SettingsError) as info:
        parse_settings(_with_catalog(tmp_path, catalog))
    message = str(info.value)
    assert "catalogs.om.url:" in message and said in message
    assert "token: {env: NAME}" in message
    assert SECRET not in message and "\n" not in message


def test_an_http_catalog_url_without_secrets_loads(tmp_path):
    url = "https://catalog.example.com/api?region=eu&page_size=50"
    settings = parse_settings(_with_catalog(tmp_path, {"kind": "marquez", "url": url}))
    assert settings.catalogs["om"].url == url


def test_a_database_url_keeps_its_password(tmp_path):
    url = f"postgresql+psycopg://ol:{SECRET}@db.example.com:5432/catalog"
    settings = parse_settings(_with_catalog(tmp_path, {"kind": "embedded", "url": url}))
    assert settings.catalogs["om"].url == url
