"""Our own sync runs as OpenLineage events, sent to this project's own receiver.

The receiver runs on loopback with two definitions: ``shop`` (the one synced, whose runs are
reported) and ``observer``, whose token the openlineage-python HTTP transport of ``shop``'s
``openLineage`` block uses (read from ``{env: ...}``). ``ol-dagster sync`` runs as a person runs
it, a subprocess; the observer's store must then hold the run's START and COMPLETE, valid
against the official OpenLineage schemas of the corpus, and the observer's own sync must put
the run into its catalog: the job reading the batch and writing the catalog (``ol-dagster
lineage``). A run failing in a step sends FAIL with its error and no secret; an unreachable
target leaves the sync as it was.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import httpx
import pytest
import yaml
from dagster._daemon.monitoring.run_monitoring import monitor_starting_run
from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource

from ol_dagster.definitions import build_defs
from ol_dagster.defs import constants as C
from ol_dagster.defs.run_lineage import lineage_sent
from ol_dagster.receiver.app import create_app
from ol_dagster.receiver.server import serve_in_background
from ol_dagster.settings import SettingsError, load_settings, parse_settings
from ol_dagster.store import EventStore
from ol_dagster.sync.run_lineage import catalog_namespace, run_id
from ol_dagster_tests.conftest import CORPUS, PROJECT_ROOT, events_of, run_event
from ol_dagster_tests.dagster.test_crash_safe_runs import kill_when

SECRETS = {
    "OL_RL_SHOP": "shop-receiver-secret",
    "OL_RL_OBSERVER": "observer-receiver-secret",
}
PG = "postgres://db:5432"
FACETS_SCHEMA = PROJECT_ROOT / "ol_dagster" / "openlineage" / "schemas" / "OlDagsterFacets.json"
ALL_CHECKS = {
    "received_batch.not_empty",
    "received_batch.whole_snapshot",
    "lineage_graph.no_dangling_flows",
    "catalog_upload.upload_succeeded",
    "catalog_upload.downstream_intact",
    "catalog_cleanup.removal_cap",
    "catalog_cleanup.cleanup_permitted",
    "catalog_cleanup.owned_dataset_systems",
}


# --- the official schemas --------------------------------------------------------------------


def _registry() -> Registry:
    """Every published core and facet schema of the corpus, and our own facets', by ``$id``."""
    files = [
        *sorted((CORPUS / "spec" / "published").rglob("*.json")),
        FACETS_SCHEMA,
    ]
    resources = []
    for path in files:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if "$id" in doc:
            resources.append((doc["$id"], Resource.from_contents(doc)))
    return Registry().with_resources(resources)


REGISTRY = _registry()


def schema_errors(event: dict[str, Any]) -> list[str]:
    """The event against the core schema its ``schemaURL`` names, and each facet against the
    schema its ``_schemaURL`` names (the core schema only checks a facet's envelope)."""
    targets: list[tuple[str, Any]] = [(event["schemaURL"], event)]
    for facet in event["run"].get("facets", {}).values():
        targets.append((facet["_schemaURL"], facet))
    for facet in event["job"].get("facets", {}).values():
        targets.append((facet["_schemaURL"], facet))
    for dataset in event.get("inputs", []) + event.get("outputs", []):
        for key in ("facets", "inputFacets", "outputFacets"):
            for facet in dataset.get(key, {}).values():
                targets.append((facet["_schemaURL"], facet))
    errors = []
    for url, value in targets:
        validator = Draft202012Validator(
            {"$ref": url}, registry=REGISTRY, format_checker=FormatChecker()
        )
        errors += [f"{url}: {e.json_path}: {e.message}" for e in validator.iter_errors(value)]
    return errors


def test_the_schemas_are_the_corpus_and_catch_a_wrong_facet() -> None:
    # the validator must be able to fail: a facet of the wrong shape, an event without a run id
    bad_facet = {
        "_producer": "urn:x",
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json"
        "#/$defs/ErrorMessageRunFacet",
        "message": "m",
    }
    event = run_event("etl", "j")
    event["run"]["facets"] = {"errorMessage": bad_facet}
    assert any("programmingLanguage" in e for e in schema_errors(event))
    del event["run"]["runId"]
    assert any("runId" in e for e in schema_errors(event))


@pytest.mark.parametrize(
    ("url", "namespace"),
    [
        (
            "postgresql+psycopg://sync:s3cr/et@db:5432/catalog",
            "postgresql+psycopg://db:5432/catalog",
        ),
        ("postgresql://sync:s3cr?et@db/catalog", "postgresql://db/catalog"),
        ("postgresql://sync:s3cr#et@db/catalog", "postgresql://db/catalog"),
        ("postgresql://sync:s3cr@et@db/catalog?sslmode=require", "postgresql://db/catalog"),
        ("postgresql://db/catalog?password=s3cret", "postgresql://db/catalog"),
        ("sqlite:////var/lib/c.db", "sqlite:////var/lib/c.db"),
        ("http://user:s3cret@marquez:5000/api", "http://marquez:5000/api"),
    ],
)
def test_a_catalog_namespace_carries_no_credentials(url: str, namespace: str) -> None:
    # the URL as SQLAlchemy reads it (its password may hold '/', '?', '#' and '@'), less the
    # user, the password and the query: the events go to another system
    assert catalog_namespace(url) == namespace


# --- the settings ------------------------------------------------------------------------------


def _definition(**extra: Any) -> dict[str, Any]:
    return {
        "name": "shop",
        "uuid": "11111111-1111-4111-8111-111111111111",
        "catalog": "main",
        "receiver": {"token": {"env": "OL_RL_SHOP"}},
        **extra,
    }


@pytest.mark.parametrize(
    ("transport", "message"),
    [
        (
            {"type": "http", "url": "http://h", "auth": {"type": "api_key", "apiKey": "literal"}},
            "auth.apiKey: a secret is written as {env: NAME}, never literally",
        ),
        (
            {"type": "kafka", "topicName": "t", "config": {"sasl.password": "literal"}},
            "config.sasl.password: a secret is written as {env: NAME}",
        ),
        (
            {"type": "http", "url": "http://u:literal@h"},
            "url: the URL carries a password in its user part",
        ),
        (
            {"type": "http", "url": "http://h/api?api_key=literal"},
            "url: the URL query parameter 'api_key' would hold a secret",
        ),
        (
            {"type": "http", "url": "http://h", "custom_headers": {"X-Team": "literal"}},
            "custom_headers.X-Team: a header's value is written as {env: NAME}, never literally",
        ),
        ({"type": "htp"}, "type: 'htp' is not a transport of the client"),
        ({"type": "http"}, "openlineage-python refuses it: `url` key not passed to HttpConfig"),
        ({"url": "http://h"}, "'type' is required"),
        (
            {"type": "http", "url": "http://h", "auth": {"type": "api_key", "apiKey": {"env": 1}}},
            "auth.apiKey: {env: NAME} expected",
        ),
    ],
)
def test_a_wrong_transport_fails_at_load_with_its_key(transport: dict, message: str) -> None:
    data = {"definitions": [_definition(openLineage={"transport": transport})]}
    with pytest.raises(SettingsError) as info:
        parse_settings(data)
    text = str(info.value)
    assert "definitions.0.openLineage.transport" in text and message in text
    assert "\n" not in text and "literal" not in text.replace("never literally", "")


def test_custom_headers_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    transport = {
        "type": "http",
        "url": "http://h",
        "custom_headers": {"Authorization": {"env": "OL_RL_HEADER"}},
    }
    settings = parse_settings({"definitions": [_definition(openLineage={"transport": transport})]})
    block = settings.definition("shop").openLineage
    assert block is not None
    monkeypatch.setenv("OL_RL_HEADER", "Bearer the-token")  # a whole header: a space in it
    assert block.transport_config()["custom_headers"] == {"Authorization": "Bearer the-token"}
    assert block.secret_values() == ["Bearer the-token"]


def test_secrets_are_read_when_used_not_when_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OL_RL_NOT_SET", raising=False)
    transport = {
        "type": "http",
        "url": "http://h",
        "auth": {"type": "api_key", "apiKey": {"env": "OL_RL_NOT_SET"}},
    }
    settings = parse_settings({"definitions": [_definition(openLineage={"transport": transport})]})
    block = settings.definition("shop").openLineage
    assert block is not None and block.namespace == "ol-dagster"
    with pytest.raises(SettingsError, match="OL_RL_NOT_SET is not set"):
        block.transport_config()
    monkeypatch.setenv("OL_RL_NOT_SET", "the-key")
    assert block.transport_config()["auth"] == {"type": "api_key", "apiKey": "the-key"}
    assert block.transport == transport  # the settings keep the reference, never the value
    assert block.secret_values() == ["the-key"]


def test_without_the_package_the_settings_say_what_to_install(tmp_path: Path) -> None:
    """A venv without the ``openlineage`` extra: the package is made unimportable."""
    path = tmp_path / "ol_dagster.yaml"
    transport = {"type": "console"}
    path.write_text(
        yaml.safe_dump({"definitions": [_definition(openLineage={"transport": transport})]})
    )
    script = (
        "import sys; sys.modules['openlineage'] = None\n"
        "from ol_dagster.commands.cli import main\n"
        f"sys.argv = ['ol-dagster', '--settings', {str(path)!r}, 'sync']\n"
        "sys.exit(main())\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env={**os.environ, "DAGSTER_HOME": str(tmp_path)},
        timeout=120,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "definitions.0.openLineage.transport" in lines[0]
    assert "pip install 'ol-dagster[openlineage]'" in lines[0]


# --- the real path -----------------------------------------------------------------------------


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name in list(os.environ):
        if name.startswith("OPENLINEAGE"):  # the machine's client configuration stays out
            monkeypatch.delenv(name)
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    return SECRETS


def _settings(tmp_path: Path, target: str, *, shop_catalog: dict | None = None) -> dict:
    transport = {
        "type": "http",
        "url": target,
        "auth": {"type": "api_key", "apiKey": {"env": "OL_RL_OBSERVER"}},
        "retry": {"total": 0},
        "timeout": 10,
    }
    return {
        "store": {"url": f"sqlite:///{tmp_path / 'store.db'}"},
        "catalogs": {
            "main": shop_catalog or {"kind": "embedded", "url": f"sqlite:///{tmp_path / 'c.db'}"},
            "lineage": {"kind": "embedded", "url": f"sqlite:///{tmp_path / 'lineage.db'}"},
        },
        "definitions": [
            _definition(
                snapshotMode="BATCH_SNAPSHOT",
                allowedJobNamespaces=["etl"],
                openLineage={"transport": transport},
            ),
            {
                "name": "observer",
                "uuid": "22222222-2222-4222-8222-222222222222",
                "catalog": "lineage",
                "receiver": {"token": {"env": "OL_RL_OBSERVER"}},
            },
        ],
    }


class Env:
    def __init__(self, tmp_path: Path, url: str, store: EventStore) -> None:
        self.tmp_path, self.url, self.store = tmp_path, url, store
        self.path = tmp_path / "ol_dagster.yaml"
        self.home = tmp_path / "dagster_home"
        self.home.mkdir(exist_ok=True)

    def write(self, data: dict) -> None:
        self.path.write_text(yaml.safe_dump(data), encoding="utf-8")

    def post_snapshot(self) -> int:
        events = [
            run_event("etl", "load_orders", inputs=[(PG, "raw.orders")], outputs=[(PG, "orders")])
        ]
        answer = httpx.post(
            f"{self.url}/api/v1/lineage/batch",
            json={"events": events},
            headers={"Authorization": f"Bearer {SECRETS['OL_RL_SHOP']}"},
        )
        assert answer.status_code == 200, answer.text
        return int(answer.json()["batchId"])

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ol_dagster.commands.cli", "--settings", str(self.path), *args],
            capture_output=True,
            text=True,
            cwd=PROJECT_ROOT,
            env={**os.environ, "DAGSTER_HOME": str(self.home)},
            timeout=300,
        )

    def sync(self, definition: str) -> list[dict]:
        proc = self.cli("sync", "--definition", definition)
        for value in SECRETS.values():
            assert value not in proc.stdout + proc.stderr
        assert proc.returncode in (0, 1), proc.stderr
        return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]

    def observed(self) -> list[dict]:
        """Every event the observer's receiver stored, in order."""
        return [
            json.loads(e.raw)
            for b in self.store.batches("observer")
            for e in self.store.iter_events(b.id)
        ]


@pytest.fixture
def env(tmp_path: Path, secrets: dict[str, str]) -> Iterator[Env]:
    placeholder = _settings(tmp_path, "http://127.0.0.1:9")
    (tmp_path / "ol_dagster.yaml").write_text(yaml.safe_dump(placeholder), encoding="utf-8")
    settings = load_settings(tmp_path / "ol_dagster.yaml")
    store = EventStore(settings.store.url)
    try:
        # the receiver reads the tokens at start; the sync reads the file with its real URL
        with serve_in_background(create_app(settings, store)) as url:
            e = Env(tmp_path, url, store)
            e.write(_settings(tmp_path, url))
            yield e
    finally:
        store.dispose()


def _by_type(events: list[dict]) -> dict[str, dict]:
    found = {e["eventType"]: e for e in events}
    assert len(found) == len(events), [e["eventType"] for e in events]
    return found


def test_a_sync_run_reaches_the_observer_and_its_catalog(env: Env, tmp_path: Path) -> None:
    batch_id = env.post_snapshot()
    (line,) = env.sync("shop")
    assert line["status"] == "synced"
    assert line["openLineage"] == {"sent": ["START", "COMPLETE"], "failed": []}

    events = env.observed()
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    for event in events:
        assert schema_errors(event) == []
        assert event["job"] == {**event["job"], "namespace": "ol-dagster"}
        assert event["job"]["name"] == "ol-dagster.shop.sync"
        assert event["run"]["runId"] == run_id(line["runId"])
        assert [(i["namespace"], i["name"]) for i in event["inputs"]] == [
            ("ol-dagster", f"shop/batches/{batch_id}")
        ]
        catalog = f"sqlite:///{tmp_path / 'c.db'}"
        assert [(o["namespace"], o["name"]) for o in event["outputs"]] == [
            (catalog_namespace(catalog), "main")
        ]
        counts = event["inputs"][0]["inputFacets"]["olDagster_batch"]
        assert counts | {"batchId": batch_id, "received": 1, "accepted": 1, "rejected": 0} == counts
        assert event["run"]["facets"]["olDagster_sync"]["dagsterRunId"] == line["runId"]
    start, complete = _by_type(events).values()
    assert uuid.UUID(start["run"]["runId"]).version == 5
    assert start["eventTime"] <= complete["eventTime"]
    assert "dataQualityAssertions" not in start["inputs"][0]["inputFacets"]
    assertions = complete["inputs"][0]["inputFacets"]["dataQualityAssertions"]["assertions"]
    assert {a["name"] for a in assertions} == ALL_CHECKS
    assert all(a["success"] for a in assertions)
    assert {a["name"]: a["success"] for a in assertions} == {
        f"{asset}.{check}": passed
        for asset, check, passed in (
            (name.split(".")[0], name.split(".")[1], line["checks"][name.split(".")[1]])
            for name in ALL_CHECKS
        )
    }
    (cleanup,) = complete["run"]["facets"]["olDagster_sync"]["cleanups"]
    assert cleanup["catalog"] == "main"
    assert cleanup["mode"] == line["cleanup"]["mode"] == "CUTOFF"
    assert cleanup["cutoff"] == line["cleanup"]["cutoff"]
    assert cleanup["removedJobs"] == 0

    # the observer syncs them into its own catalog: the run is a job there
    (observed,) = env.sync("observer")
    assert observed["status"] == "synced"
    assert "openLineage" not in observed  # the observer does not report its own runs
    assert env.observed() == events  # ... so nothing new arrived
    job = "job:ol-dagster:ol-dagster.shop.sync"
    proc = env.cli("lineage", job, "--definition", "observer", "--depth", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    graph = json.loads(proc.stdout)
    batch = f"dataset:ol-dagster:shop/batches/{batch_id}"
    catalog = catalog_namespace(f"sqlite:///{tmp_path / 'c.db'}")
    target = f"dataset:{catalog}:main"
    assert {(e["from"], e["to"]) for e in graph["edges"]} == {(batch, job), (job, target)}


def test_a_second_batch_is_a_second_run_of_the_same_job(env: Env) -> None:
    first, second = env.post_snapshot(), env.post_snapshot()
    lines = env.sync("shop")
    assert [line["batchId"] for line in lines] == [first, second]
    events = env.observed()
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"] * 2
    assert {e["job"]["name"] for e in events} == {"ol-dagster.shop.sync"}
    runs = [e["run"]["runId"] for e in events]
    assert runs[0] == runs[1] != runs[2] == runs[3]
    assert [e["inputs"][0]["name"] for e in events[::2]] == [
        f"shop/batches/{first}",
        f"shop/batches/{second}",
    ]


def test_a_failing_run_sends_fail_with_its_error_and_no_secret(env: Env, tmp_path: Path) -> None:
    # the catalog's database cannot be reached: the upload step fails
    password = "catalog-db-password"
    unreachable = f"postgresql+psycopg://sync:{password}@127.0.0.1:1/catalog?connect_timeout=5"
    env.write(_settings(tmp_path, env.url, shop_catalog={"kind": "embedded", "url": unreachable}))
    batch_id = env.post_snapshot()
    (line,) = env.sync("shop")
    assert line["status"] == "run_failed"
    assert line["openLineage"] == {"sent": ["START", "FAIL"], "failed": []}

    events = env.observed()
    assert [e["eventType"] for e in events] == ["START", "FAIL"]
    text = json.dumps(events)
    for secret in [password, *SECRETS.values()]:
        assert secret not in text
    fail = events[1]
    assert schema_errors(fail) == []
    message = fail["run"]["facets"]["errorMessage"]["message"]
    assert message.startswith("step ") and "catalog_upload" in message
    assert "127.0.0.1" in message  # the driver's own words, where it could not connect
    assert fail["run"]["facets"]["errorMessage"]["programmingLanguage"] == "python"
    assert [o["namespace"] for o in fail["outputs"]] == ["postgresql+psycopg://127.0.0.1:1/catalog"]
    assertions = fail["inputs"][0]["inputFacets"]["dataQualityAssertions"]["assertions"]
    assert {a["name"] for a in assertions} == {
        "received_batch.not_empty",
        "received_batch.whole_snapshot",
        "lineage_graph.no_dangling_flows",
    }
    assert fail["run"]["facets"]["olDagster_sync"]["cleanups"] == []
    assert fail["inputs"][0]["name"] == f"shop/batches/{batch_id}"


def test_an_unreachable_target_does_not_fail_the_sync(env: Env, tmp_path: Path) -> None:
    data = _settings(tmp_path, "http://127.0.0.1:1")
    env.write(data)
    env.post_snapshot()
    proc = env.cli("sync", "--definition", "shop")
    assert proc.returncode == 0, proc.stderr
    (line,) = [json.loads(x) for x in proc.stdout.splitlines() if x.strip()]
    assert line["status"] == "synced"
    assert line["openLineage"] == {"sent": [], "failed": ["START", "COMPLETE"]}
    assert all(line["checks"].values())
    assert "OpenLineage: 1 event(s) not taken by the target" in proc.stderr
    assert "ConnectionError" in proc.stderr
    for value in SECRETS.values():
        assert value not in proc.stdout + proc.stderr
    assert env.observed() == []


# --- runs that fail without their hooks ----------------------------------------------------------


def _fail_of(events: list[dict], dagster_run_id: str) -> dict:
    """The one FAIL event of a run (and its START before it), checked."""
    mine = [e for e in events if e["run"]["runId"] == run_id(dagster_run_id)]
    assert [e["eventType"] for e in mine] == ["START", "FAIL"]
    fail = mine[1]
    assert schema_errors(fail) == []
    text = json.dumps(fail)
    for secret in SECRETS.values():
        assert secret not in text
    return fail


def test_a_sync_killed_mid_way_sends_fail_once_and_its_retry_completes(env: Env) -> None:
    """``ol-dagster sync`` SIGKILLed after START went (its hooks never run again); the next sync
    fails the dead run and sends its FAIL, once, then syncs the batch again as a new run."""
    answer = httpx.post(
        f"{env.url}/api/v1/lineage/batch",
        json={"events": events_of(1500, "etl")},
        headers={"Authorization": f"Bearer {SECRETS['OL_RL_SHOP']}"},
        timeout=120,
    )
    assert answer.status_code == 200, answer.text
    batch_id = int(answer.json()["batchId"])

    def midway(instance: dg.DagsterInstance) -> bool:
        """START sent and recorded in the run's tags, the batch not uploaded yet."""
        started = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
        return any(lineage_sent(instance, r.run_id)["sent"] for r in started) and (
            env.store.get_batch(batch_id).upload_result is None
        )

    with dg.DagsterInstance.from_config(str(env.home)) as instance:
        # ``ol-dagster sync`` SIGKILLed at that point, as the crash tests kill it
        kill_when({"path": str(env.path), "home": env.home}, lambda: midway(instance))
        (dead,) = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
    assert [e["eventType"] for e in env.observed()] == ["START"]

    lines = env.sync("shop")

    (line,) = [x for x in lines if x["definition"] == "shop"]
    assert line["batchId"] == batch_id and line["status"] == "synced"
    assert line["openLineage"] == {"sent": ["START", "COMPLETE"], "failed": []}
    events = env.observed()
    assert [e["eventType"] for e in events] == ["START", "FAIL", "START", "COMPLETE"]
    fail = _fail_of(events, dead.run_id)
    message = fail["run"]["facets"]["errorMessage"]["message"]
    assert "the process that executed this run" in message and "is gone" in message
    assert fail["inputs"][0]["name"] == f"shop/batches/{batch_id}"
    assert [e["run"]["runId"] for e in events[2:]] == [run_id(line["runId"])] * 2
    with dg.DagsterInstance.from_config(str(env.home)) as instance:
        assert lineage_sent(instance, dead.run_id) == {"sent": ["START", "FAIL"], "failed": []}
        # the failure sensor sees the dead run's failure too: the tags say FAIL went
        (failed,) = instance.all_logs(dead.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
        _failure_sensor(env, instance, failed)
    # and a later sync fails nothing more
    assert env.sync("shop") == [{"definition": "shop", "status": "nothing_pending"}]
    assert env.observed() == events


def _failure_sensor(env: Env, instance: dg.DagsterInstance, failure: Any) -> None:
    """One evaluation of shop's failure sensor on the run whose RUN_FAILURE is ``failure``."""
    defs = build_defs(str(env.path))
    run = instance.get_run_by_id(failure.run_id)
    context = dg.build_run_status_sensor_context(
        sensor_name="shop__failed_syncs",
        dagster_event=failure.dagster_event,
        dagster_instance=instance,
        dagster_run=run,
        resources={"ol_store": defs.resources["ol_store"]},
    )
    defs.get_sensor_def("shop__failed_syncs")(context.for_run_failure())


def test_the_failure_sensor_sends_fail_once(env: Env, tmp_path: Path) -> None:
    """A run whose step failed (its hook sent FAIL) and a run Dagster failed before it started
    (run monitoring's start timeout: no hook ever ran): after the failure sensor, each run has
    exactly one FAIL, the second with Dagster's reason."""
    unreachable = "postgresql+psycopg://sync:pw@127.0.0.1:1/catalog?connect_timeout=5"
    env.write(_settings(tmp_path, env.url, shop_catalog={"kind": "embedded", "url": unreachable}))
    first, second = env.post_snapshot(), env.post_snapshot()
    defs = build_defs(str(env.path))
    job = defs.resolve_job_def("shop__sync")
    overrides = {"run_monitoring": {"enabled": True, "start_timeout_seconds": 0}}
    with dg.instance_for_test(temp_dir=str(env.home), overrides=overrides) as instance:
        instance.add_dynamic_partitions("shop__batches", [str(first), str(second)])
        result = job.execute_in_process(
            instance=instance, partition_key=str(first), raise_on_error=False
        )
        assert not result.success
        (failed,) = instance.all_logs(result.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
        _failure_sensor(env, instance, failed)
        _failure_sensor(env, instance, failed)
        events = env.observed()
        assert [e["eventType"] for e in events] == ["START", "FAIL"]
        assert (
            "catalog_upload"
            in _fail_of(events, result.run_id)["run"]["facets"]["errorMessage"]["message"]
        )

        # never started: Dagster's run monitoring fails it, no step and no hook ran
        never = instance.create_run_for_job(
            job,
            status=dg.DagsterRunStatus.NOT_STARTED,
            tags={C.DEFINITION_TAG: "shop", "dagster/partition": str(second)},
        )
        record = instance.get_run_record_by_id(never.run_id)
        assert record is not None
        monitor_starting_run(instance, record, logging.getLogger(__name__))
        (failed,) = instance.all_logs(never.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
        _failure_sensor(env, instance, failed)
        _failure_sensor(env, instance, failed)  # a second look sends nothing more
        events = env.observed()
        assert [e["eventType"] for e in events] == ["START", "FAIL", "START", "FAIL"]
        fail = _fail_of(events, never.run_id)
        assert fail["run"]["facets"]["errorMessage"]["message"].startswith(
            "Run timed out due to taking longer than 0 seconds to start"
        )
        assert fail["inputs"][0]["name"] == f"shop/batches/{second}"
        assert lineage_sent(instance, never.run_id) == {"sent": ["START", "FAIL"], "failed": []}
