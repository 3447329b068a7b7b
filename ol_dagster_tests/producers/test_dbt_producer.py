"""dbt with openlineage-dbt: a small dbt project, run by ``dbt-ol`` into ``ol-dagster serve``.

The project (``dbt_project/``, on DuckDB) has three models in a line: ``raw_orders`` ->
``stg_orders`` -> ``customer_totals``, whose ``total_amount`` sums ``stg_orders.order_amount``.
After the first run and sync, the catalog holds exactly dbt's lineage: the run's job as parent of
the three model jobs, each model's inputs and outputs, and the column flows dbt-ol derived from
the SQL. Then ``stg_orders`` renames ``order_amount`` to ``amount`` and only it is run again (as
after an edit of one model): the sync takes the new column and its flow, while ``customer_totals``
still reads ``stg_orders.order_amount``, the downstream read a rename breaks.

Slow (a venv with dbt, about a minute from a warm pip cache, and two dbt runs): marked
``producers``, run by ``make test-producers``, not by ``make test``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ol_dagster_tests.producers.harness import (
    HERE,
    TOKEN,
    Producer,
    changes_json,
    column_inputs,
    jobs,
    producer_venv,
    receiver,
    stored_events,
    sync,
    synced_state,
    write_settings,
)

pytestmark = [pytest.mark.producers, pytest.mark.timeout(1200)]

NAMESPACE = "shop"
REQUIREMENTS = ["dbt-core<1.12", "dbt-duckdb", "openlineage-dbt"]


def dbt_ol(producer: Producer, project: Path, url: str, *args: str) -> None:
    env = {
        **os.environ,
        "PATH": f"{producer.bin}{os.pathsep}{os.environ['PATH']}",  # dbt-ol starts ``dbt``
        "SHOP_DUCKDB_PATH": str(project.parent / "shop.duckdb"),
        "OPENLINEAGE_URL": url,
        "OPENLINEAGE_API_KEY": TOKEN,
        "OPENLINEAGE_NAMESPACE": NAMESPACE,
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
    }
    done = subprocess.run(
        [str(producer.bin / "dbt-ol"), "run", "--profiles-dir", ".", "--project-dir", ".", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def rename_order_amount(project: Path) -> None:
    """``stg_orders`` publishes ``order_amount`` as ``amount`` (its SQL and documented columns)."""
    model = project / "models" / "stg_orders.sql"
    model.write_text(model.read_text().replace("order_amount from", "order_amount as amount from"))
    schema = project / "models" / "schema.yml"
    head, stg, tail = schema.read_text().partition("  - name: stg_orders\n")
    stg_part, marker, rest = tail.partition("  - name: customer_totals\n")
    schema.write_text(head + stg + stg_part.replace("order_amount", "amount") + marker + rest)


def test_a_dbt_project_and_a_renamed_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    producer = producer_venv("dbt", REQUIREMENTS)
    print(f"dbt venv installed in {producer.install_seconds:.0f} s (0: already there)")
    project = tmp_path / "shop"
    shutil.copytree(HERE / "dbt_project", project)
    settings = write_settings(tmp_path, "shop", [NAMESPACE])
    with receiver(settings, monkeypatch) as served:
        dbt_ol(producer, project, served.url)
        first = sync(settings, "shop")
        state = synced_state(settings, "shop")

        assert first["status"] == "synced"
        assert all(first["checks"].values()), first["checks"]
        db = next(iter(state["datasets"]))["namespace"]  # duckdb://<the database file>
        models = {m: f"shop.main.shop.{m}" for m in ("raw_orders", "stg_orders", "customer_totals")}
        by_name = jobs(state)
        assert set(by_name) == {"dbt-run-shop", *models.values()}
        assert sorted(state["parents"]) == sorted(
            [[NAMESPACE, "dbt-run-shop"], [NAMESPACE, job]] for job in models.values()
        )
        assert by_name[models["stg_orders"]]["inputs"] == [[db, "shop.main.raw_orders"]]
        assert by_name[models["stg_orders"]]["outputs"] == [[db, "shop.main.stg_orders"]]
        assert by_name[models["customer_totals"]]["inputs"] == [[db, "shop.main.stg_orders"]]
        assert by_name[models["customer_totals"]]["outputs"] == [[db, "shop.main.customer_totals"]]
        columns = {d["name"]: [f["name"] for f in d["fields"]] for d in state["datasets"]}
        assert columns["shop.main.stg_orders"] == ["order_id", "customer", "order_amount"]
        assert columns["shop.main.customer_totals"] == ["customer", "total_amount", "orders"]
        assert column_inputs(state) == {
            ("shop.main.stg_orders", c): {("shop.main.raw_orders", c)}
            for c in ("order_id", "customer", "order_amount")
        } | {
            ("shop.main.customer_totals", "customer"): {("shop.main.stg_orders", "customer")},
            ("shop.main.customer_totals", "orders"): {("shop.main.stg_orders", "order_id")},
            ("shop.main.customer_totals", "total_amount"): {
                ("shop.main.stg_orders", "order_amount")
            },
        }

        rename_order_amount(project)
        dbt_ol(producer, project, served.url, "--select", "stg_orders")
        second = sync(settings, "shop")
        after = synced_state(settings, "shop")

    assert second["status"] == "synced" and second["batchId"] > first["batchId"]
    assert second["upload"]["graph"]["jobs"] == [
        "shop.dbt-run-shop",
        f"shop.{models['stg_orders']}",
    ]
    assert second["upload"]["updated"]["statements"] == 1  # the model's SQL
    flows = column_inputs(after)
    assert flows[("shop.main.stg_orders", "amount")] == {("shop.main.raw_orders", "order_amount")}
    # the downstream model was not run again: its total still reads the column the rename took away
    assert flows[("shop.main.customer_totals", "total_amount")] == {
        ("shop.main.stg_orders", "order_amount")
    }
    renamed = next(
        e
        for e in stored_events(settings)
        if e["job"]["name"] == models["stg_orders"]
        and e["eventType"] == "COMPLETE"
        and "amount" in str(e["outputs"][0]["facets"]["schema"]["fields"])
        and "order_amount" not in [f["name"] for f in e["outputs"][0]["facets"]["schema"]["fields"]]
    )
    assert renamed["run"]["facets"]["parent"]["job"]["name"] == "dbt-run-shop"
    # the change set names the renamed column, and downstream_intact the column still reading it
    assert second["checks"]["downstream_intact"] is False  # a warning: the sync went on
    changes = changes_json(settings, "shop", second["batchId"])
    (model,) = [i for i in changes["items"] if i["kind"] == "dataset" and i["change"] == "changed"]
    assert model["name"] == "shop.main.stg_orders"
    assert (model["fieldsAdded"], model["fieldsRemoved"]) == (["amount"], ["order_amount"])
    assert {
        (i["job"]["name"], i["dataset"]["name"], i["column"], i["reads"].get("field"))
        for i in changes["impacted"]
    } == {(models["customer_totals"], "shop.main.customer_totals", "total_amount", "order_amount")}
