"""The Marquez fake's dataset versions and column lineage: who wrote a dataset, and what it keeps.

Re-expressed from MarquezProject/marquez at a89b89cad27f87c90dd964c40dae8dfb3f64031f (Java under
``api/src/main/java/marquez/``):

* every dataset an event names gets a version row (``db/OpenLineageDao.java``
  ``upsertLineageDataset``, ``db/DatasetVersionDao.java`` ``upsert``): an output of a RunEvent
  one of that run (its uuid is a hash of the dataset, its fields and the run: the same run and
  fields write the same row), an output of a JobEvent one without a run; an input reuses the
  dataset's current version, and only when it has none is one made (without a run), made current
  for a RunEvent's input;
* the current version: a DatasetEvent makes its own current (``updateMarquezModel(DatasetEvent)``);
  a RunEvent of type COMPLETE, or any typed event of a streaming job, makes every output version
  of its run current (``service/OpenLineageService.java`` ``createAsync`` then
  ``buildJobOutput``). ``lastModifiedAt`` is only written by the legacy runs API
  (``db/RunStateDao.java`` ``updateRunStateFor``): events leave it null;
* ``GET .../datasets/{name}/versions/{version}`` finds a version by its row uuid (the dataset's
  ``currentVersion``) with the run that made it (``findByWithRun``); the run names its job as
  ``jobVersion`` only once the run has a job version (``service/models/Run.java``
  ``getJobVersion``: a done run, or a streaming job's version);
* column lineage (``OpenLineageDao.upsertColumnLineage``, ``db/ColumnLineageDao.java``): an
  output's ``columnLineage`` facet writes a row for each output field the event's own schema facet
  has and each input field of a dataset the run read with that field; rows are kept across
  versions, and a dataset's ``columnLineage`` shows every row into it while the dataset itself is
  visible, whatever became of the job (``getLineageRowsForDatasets`` joins datasets only; its
  inputs are read from ``dataset_versions``, so a hidden input still shows).

Not modelled: the version of an input read from the run's own version fields (the input
dataset's latest fields are used), several versions of one dataset in one run.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

Key = tuple[str, str]
Field = tuple[str, str, str]  # (namespace, dataset, field)


@dataclass
class DatasetVersion:
    uuid: uuid.UUID
    key: Key
    created_at: datetime  # the event's time, as Marquez stores it
    fields: tuple[str, ...]
    run: uuid.UUID | None


class Versions:
    def __init__(self) -> None:
        self.rows: dict[tuple[Key, uuid.UUID | None, tuple[str, ...]], DatasetVersion] = {}
        self.by_uuid: dict[uuid.UUID, DatasetVersion] = {}
        self.current: dict[Key, uuid.UUID] = {}
        self.column_lineage: dict[tuple[Key, str], set[Field]] = {}

    def write(
        self, key: Key, fields: tuple[str, ...], run: uuid.UUID | None, when: datetime
    ) -> DatasetVersion:
        found = self.rows.get((key, run, fields))
        if found is None:
            found = DatasetVersion(uuid.uuid4(), key, when, fields, run)
            self.rows[(key, run, fields)] = found
            self.by_uuid[found.uuid] = found
        return found

    def read(
        self, key: Key, fields: tuple[str, ...], run: uuid.UUID | None, when: datetime
    ) -> None:
        if key in self.current:
            return
        version = self.write(key, fields, None, when)
        if run is not None:
            self.current[key] = version.uuid

    def dataset_event(self, key: Key, fields: tuple[str, ...], when: datetime) -> None:
        self.current[key] = self.write(key, fields, None, when).uuid

    def complete(self, run: uuid.UUID) -> None:
        for version in self.rows.values():
            if version.run == run:
                self.current[version.key] = version.uuid

    def add_column_lineage(
        self,
        output: Key,
        facets: Any,
        output_fields: tuple[str, ...],
        read_fields: dict[Key, list[str]],
    ) -> None:
        """Rows of an output's ``columnLineage`` facet, for the fields the run read."""
        lineage = facets.get("columnLineage") if isinstance(facets, dict) else None
        columns = lineage.get("fields") if isinstance(lineage, dict) else None
        if not isinstance(columns, dict):
            return
        for column, spec in columns.items():
            if column not in output_fields or not isinstance(spec, dict):
                continue
            for f in spec.get("inputFields") or []:
                if not isinstance(f, dict):
                    continue
                source = (str(f.get("namespace")), str(f.get("name")))
                if str(f.get("field")) in read_fields.get(source, []):
                    rows = self.column_lineage.setdefault((output, column), set())
                    rows.add((*source, str(f.get("field"))))

    def column_lineage_json(self, key: Key) -> list[dict[str, Any]] | None:
        """The dataset's ``columnLineage`` (``ColumnLineageService.enrichWithColumnLineage``)."""
        out = [
            {
                "name": column,
                "inputFields": [
                    {"namespace": ns, "dataset": name, "field": f}
                    for ns, name, f in sorted(sources)
                ],
            }
            for (output, column), sources in sorted(self.column_lineage.items())
            if output == key and sources
        ]
        return out or None
