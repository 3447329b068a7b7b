"""A sync run that fails before its cleanup: the batch keeps its events and is retried later."""

from __future__ import annotations

from datetime import timedelta

import dagster as dg
import yaml

from ol_dagster.definitions import build_defs
from ol_dagster.defs import constants as C
from ol_dagster.receiver.intake import sort_events
from ol_dagster.settings import load_settings
from ol_dagster.store import BatchStatus, EventStore
from ol_dagster.store.event_store import utcnow
from ol_dagster_tests.conftest import run_event


def test_a_failed_sync_run_marks_its_batch_for_a_retry(write_settings, tmp_path):
    path = write_settings()
    data = yaml.safe_load(path.read_text())
    # a catalog nobody can reach: the upload step raises, the run fails before its cleanup
    data["catalogs"]["other"]["url"] = "postgresql+psycopg://nobody@127.0.0.1:1/none"  # add's
    path.write_text(yaml.safe_dump(data))
    settings = load_settings(path)
    store = EventStore(settings.store.url)
    intake = sort_events([run_event("etl", "daily")], ["*"])
    batch_id = store.add_posted_batch("add", intake.accepted, received=1)
    defs = build_defs(str(path))
    home = tmp_path / "home"
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        instance.add_dynamic_partitions("add__batches", [str(batch_id)])
        result = defs.resolve_job_def("add__sync").execute_in_process(
            instance=instance,
            partition_key=str(batch_id),
            tags={C.DEFINITION_TAG: "add"},
            raise_on_error=False,
        )
        assert not result.success
        assert store.get_batch(batch_id).status is BatchStatus.SEALED  # nothing recorded yet

        sensor = defs.get_sensor_def("add__failed_syncs")
        context = dg.build_run_status_sensor_context(
            sensor_name="add__failed_syncs",
            dagster_event=result.get_run_failure_event(),
            dagster_instance=instance,
            dagster_run=result.dagster_run,
            resources={"ol_store": defs.resources["ol_store"]},
        )
        sensor(context.for_run_failure())

    batch = store.get_batch(batch_id)
    assert batch.status is BatchStatus.FAILED
    assert batch.attempts == 1
    assert batch.cleanup_report["skippedReason"] == "RUN_FAILED"
    assert batch.cleanup_report["runId"] == result.run_id
    # its events are kept, and it is due for a retry once the backoff has passed
    assert len(list(store.iter_events(batch_id))) == 1
    assert store.due_retries("add") == []
    assert [b.id for b in store.due_retries("add", now=utcnow() + timedelta(minutes=2))] == [
        batch_id
    ]
    store.dispose()
