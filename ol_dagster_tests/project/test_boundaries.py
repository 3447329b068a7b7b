"""The exact edges of documented rules, where an off-by-one would pass the wider tests: the
documented defaults, the retry backoff's one-hour cap, the longest run id stored, and the cleanup's
cutoff (what was last updated *at* the cutoff stays), on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import create_engine, select

from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog
from ol_dagster.catalog.embedded.tables import clock
from ol_dagster.catalog.ledger.entries import Ledger, LedgerItem
from ol_dagster.receiver.intake import sort_events
from ol_dagster.settings import load_settings
from ol_dagster.store import BatchStatus, EventStore
from ol_dagster.sync.cleanup import BatchFacts, run_cleanup
from ol_dagster.sync.upload import build_graph
from ol_dagster_tests.conftest import PROJECT_ROOT, run_event, settings_data
from ol_dagster_tests.fakes.harness import definition

# -- documented defaults ---------------------------------------------------------------------------


def _documented_default(key: str) -> str:
    """The default column of ``key``'s row in the settings reference (docs/configuration.md)."""
    readme = (PROJECT_ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    row = re.search(rf"^\| `{re.escape(key)}`[^|]*\| ([^|]+) \|", readme, re.MULTILINE)
    assert row, f"the settings reference has no row for {key}"
    return row.group(1).strip()


def test_retention_and_the_batch_window_have_their_documented_defaults(tmp_path: Path) -> None:
    """Settings that leave them out keep every synced batch (no ``retention.keepDays``) and seal
    a stream batch after 60 seconds (``limits.batchWindowSeconds``), as docs/configuration.md
    says."""
    path = tmp_path / "ol_dagster.yaml"
    data = settings_data(tmp_path)
    assert "retention" not in data and all("limits" not in d for d in data["definitions"])
    path.write_text(yaml.safe_dump(data))
    settings = load_settings(path)

    assert settings.retention.keepDays is None
    assert _documented_default("retention.keepDays") == "none (keep)"
    for d in settings.definitions:
        assert d.limits.batchWindowSeconds == 60
    assert _documented_default("definitions[].limits.batchWindowSeconds") == "`60`"


# -- the retry backoff -----------------------------------------------------------------------------


def test_the_retry_backoff_doubles_up_to_one_hour_and_stays_there(event_store: EventStore) -> None:
    """1, 2, 4 ... minutes after each failed sync, at most an hour: after the 7th failure (64
    minutes uncapped) and the 20th, the batch is due again exactly one hour later."""
    batch_id = event_store.add_posted_batch("snap", [], received=0)
    t0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    waits = []
    for attempt in range(1, 21):
        event_store.set_status(batch_id, BatchStatus.FAILED, now=t0)
        assert event_store.get_batch(batch_id).attempts == attempt
        minutes = next(m for m in range(0, 24 * 60) if _due(event_store, t0, m))
        waits.append(minutes)
    assert waits[:7] == [1, 2, 4, 8, 16, 32, 60]
    assert set(waits[6:]) == {60}


def _due(store: EventStore, t0: datetime, minutes: int) -> bool:
    return bool(store.due_retries("snap", now=t0 + timedelta(minutes=minutes)))


# -- the run id's length ---------------------------------------------------------------------------


def test_a_run_id_as_long_as_a_name_is_stored_and_one_longer_is_refused(
    event_store: EventStore,
) -> None:
    """A run id is bounded like a name (``limits.maxNameLength``, 2,048 by default): the longest
    accepted run id goes through whole (PostgreSQL's column is unbounded since store version
    13); one character more is refused by name, never truncated."""
    longest, too_long = "r" * 2048, "s" * 2049
    intake = sort_events([run_event(run_id=longest), run_event(run_id=too_long)], ["*"])

    assert [r.reason for r in intake.rejected] == [
        "event 1: run.runId: is 2049 characters long; at most 2048 are accepted "
        "(limits.maxNameLength, never under 2048)"
    ]
    batch_id = event_store.add_posted_batch("snap", intake.accepted, received=intake.received)
    (stored,) = event_store.iter_events(batch_id)
    assert stored.run_id == longest
    assert json.loads(stored.raw)["run"]["runId"] == longest


# -- the cleanup's cutoff --------------------------------------------------------------------------

EXPORTS = "s3://exports"


def _snapshot(*jobs: str) -> list[bytes]:
    """Each job reads a warehouse table and writes its own export file (with a column)."""
    events = []
    for job in jobs:
        e = run_event("etl", job, inputs=[("postgres://db:5432", "shop.public.orders")], outputs=[])
        e["outputs"] = [
            {
                "namespace": EXPORTS,
                "name": f"{job}.csv",
                "facets": {
                    "schema": {
                        "_producer": "https://example.com/t",
                        "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json",
                        "fields": [{"name": "id", "type": "integer"}],
                    }
                },
            }
        ]
        e["job"]["facets"] = {
            "sql": {
                "_producer": "https://example.com/t",
                "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/SQLJobFacet.json",
                "query": f"select id from orders -- {job}",
            }
        }
        events.append(json.dumps(e).encode())
    return events


@pytest.fixture
def catalog(store_url: str) -> Iterator[EmbeddedCatalog]:
    c = EmbeddedCatalog(store_url)  # a fresh SQLite file or PostgreSQL database
    yield c
    c.close()


@pytest.mark.parametrize("mode", ["CUTOFF", "DAYS"])
def test_what_was_updated_exactly_at_the_cutoff_stays(catalog: EmbeddedCatalog, mode: str) -> None:
    """The cleanup removes what was last updated strictly before its limit. With the limit set
    to the very time of the last upload (a clock that did not move between the cutoff read and
    the upload, as PostgreSQL's may not within a transaction), that upload's job, routine, flows,
    export file and its field all stay; the job only the first upload described goes.

    CUTOFF: a whole snapshot, limit = the cutoff. DAYS: additive, limit = the cutoff minus
    staleJobDays (and the export System's cleanupDays), so the cutoff is set that much later;
    there a routine goes by its own age alone (no living job keeps it)."""
    snapshot = mode == "CUTOFF"
    d = definition(
        allowedJobNamespaces=["etl"],
        snapshotMode="BATCH_SNAPSHOT" if snapshot else "ADDITIVE",
        datasetSystems=[
            {"namespace": EXPORTS, "system": "exports", "cleanupMode": mode, "cleanupDays": 7}
        ],
        cleanup={"staleJobDays": 7},
    )
    assert catalog.upload(build_graph(_snapshot("kept", "retired"), d), d).succeeded
    assert catalog.upload(build_graph(_snapshot("kept"), d), d).succeeded
    with catalog.engine.connect() as conn:
        stamp = conn.execute(select(clock.c.last_stamp)).scalar_one()  # the 2nd upload's time
    cutoff = stamp.replace(tzinfo=UTC) + (timedelta(0) if snapshot else timedelta(days=7))
    before = {"counts": catalog.counts(), "lineage": _lineage(catalog, "kept")}

    report = run_cleanup(
        catalog,
        d,
        BatchFacts(
            posted=snapshot,
            whole_snapshot=snapshot,
            accepted=1,
            job_namespaces=["etl"],
            upload_succeeded=True,
            dataset_systems=["exports"],
            jobs=["etl.kept"],
        ),
        cutoff=cutoff,
        max_removals=1000,
        max_share=1.0,
    )

    assert (report["mode"], report["skippedReason"]) == (mode, None), report
    assert report["removedJobs"] == ["etl.retired"]
    assert catalog.job_names() == ["etl.kept"]
    assert _lineage(catalog, "kept") == before["lineage"]  # job, flows, export file: all there
    removed = {k: n - catalog.counts()[k] for k, n in before["counts"].items()}
    # the retired job, its routine, its export file and that file's field, its data flow (input
    # to output, in the job's scope); nothing the second upload stamped, nor the shared table
    assert removed == {
        "systems": 0,
        "jobs": 1,
        "datasets": 1,
        "fields": 1,
        "routines": 1,
        "dataFlows": 1,
        "orchestrationFlows": 0,
        "fieldFlows": 0,
        "qualityChecks": 0,
        "disabledQualityChecks": 0,
    }


def _lineage(catalog: EmbeddedCatalog, job: str) -> dict[str, Any]:
    return catalog.lineage(f"job:etl:{job}", depth=2, upstream=True, downstream=True)


@pytest.fixture
def ledger(store_url: str) -> Iterator[Ledger]:
    engine = create_engine(store_url)
    yield Ledger(engine, "marquez")
    engine.dispose()


def test_a_ledger_entry_touched_exactly_at_the_cutoff_is_not_stale(ledger: Ledger) -> None:
    """The HTTP catalogs clean by the ledger: "last touched before the cutoff", strictly."""
    t1 = datetime(2026, 11, 1, 12, 0, 0, 123456, tzinfo=UTC)
    t2 = t1 + timedelta(microseconds=1)
    scope = "ol:etl|"
    ledger.touch("snap", [LedgerItem("job", "etl.retired", scope=scope + "retired")], t1)
    ledger.touch("snap", [LedgerItem("job", "etl.kept", scope=scope + "kept")], t2)

    stale = ledger.stale("snap", "job", before=t2, namespaces=["etl"])

    assert [e.item.identity for e in stale] == ["etl.retired"]
    assert ledger.stale("snap", "job", before=t1, namespaces=["etl"]) == []
