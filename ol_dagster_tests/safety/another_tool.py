"""Another tool writing to the catalog beside ol-dagster, through the server's own public API.

A catalog is shared: people, connectors and other OpenLineage producers write to it too, and a
cleanup may remove only what ol-dagster wrote. Each class here is such a writer for one HTTP
catalog's fake, for the lineage safety model test over HTTP: it draws what to write, sends it
with credentials of its own, and keeps only what the server accepted, and (``ours``) what the
uploads of ol-dagster sent to the same objects since, as the test driver tells it from the events
it synced. ``missing`` says which of its objects the server no longer shows that no cleanup may
take away; ``kept`` which objects a cleanup report says it kept because this tool wrote them.

* **OpenMetadata**: other users (``dbt-bot``, a person) ``PUT /api/v1/lineage`` edges between the
  warehouse's tables, with a ``source`` of OpenLineage too (another OpenLineage producer with its
  own bot). The server keeps one edge per pair, the last writer's. An edge this tool wrote since
  the last upload of ol-dagster that sent the pair, and one it wrote on a pair before ol-dagster
  ever sent that pair, must stay on the server.
* **Marquez**: a producer with jobs in namespaces no definition admits posts COMPLETE run events
  writing and reading datasets, ol-dagster's among them. Its jobs must stay visible, and so must
  a dataset whose current version it wrote (an output of its COMPLETE since the last upload of
  ol-dagster naming the dataset).
* **Blindata**: a user of its own creates a System with entities, and data flows between its
  entities and ol-dagster's dataset entities, in scopes that are not ol-dagster's: a tool's own
  (``lineage-tool:...``), or an OpenLineage scope of a job namespace no definition admits (a case
  variant of one, among others: a server matching scope prefixes without case finds them for a
  definition's prefix). None may go; a flow goes only with an entity it touches.

The tool knows nothing of ol-dagster's code or ledger, only its own requests, the server's
answers, and what the driver says the syncs sent (the model's events).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any, ClassVar
from urllib.parse import quote

import httpx
from hypothesis import note
from hypothesis import strategies as st

from ol_dagster_tests.model.generate import DATASETS, FOREIGN, to_json
from ol_dagster_tests.model.reference import Dataset, DefinitionSpec, Event

Pair = tuple[str, str]
Key = tuple[str, str]


def _client(url: str, headers: dict[str, str]) -> httpx.Client:
    return httpx.Client(base_url=url, headers=headers, timeout=10)


class AnotherTool:
    """What every catalog's other writer offers the driver."""

    name: ClassVar[str]

    def __init__(self, url: str) -> None:
        self.url = url

    def write(self, data: st.DataObject, universe: tuple[DefinitionSpec, ...]) -> None:
        raise NotImplementedError

    def ours(self, events: Iterable[Event]) -> None:
        """An upload of ol-dagster ran with these events (it may have written each of them)."""

    def kept(self, call: dict[str, Any]) -> dict[str, int]:
        """Of a cleanup call's kept objects, those kept because this tool wrote them."""
        return {}


# -- OpenMetadata ---------------------------------------------------------------------------------

OM_USERS = {"om-other-jwt-0001": "dbt-bot", "om-other-jwt-0002": "jane.doe"}  # token -> user
OM_SOURCES = ("OpenLineage", "Manual", "DbtLineage")


class OpenMetadataTool(AnotherTool):
    name = "openmetadata"

    def __init__(self, url: str, namespace: str, tables: dict[str, str]) -> None:
        super().__init__(url)
        self.namespace = namespace
        self.tables = tables  # dataset name -> table FQN
        self.touched: set[Pair] = set()  # every pair it wrote
        self.last: set[Pair] = set()  # pairs it wrote since ol-dagster last sent them
        self.first: set[Pair] = set()  # pairs it wrote before ol-dagster ever sent them
        self.sent: set[Pair] = set()  # pairs ol-dagster may have written

    def write(self, data: st.DataObject, universe: tuple[DefinitionSpec, ...]) -> None:
        token = data.draw(st.sampled_from(sorted(OM_USERS)), label="another user")
        fqns = sorted(self.tables.values())
        pairs = [(s, t) for s in fqns for t in fqns if s != t]
        if self.sent and data.draw(st.booleans(), label="a pair ol-dagster sent"):
            pairs = sorted(self.sent)
        src, dst = data.draw(st.sampled_from(pairs), label="edge")
        source = data.draw(st.sampled_from(OM_SOURCES), label="source")
        with _client(self.url, {"Authorization": f"Bearer {token}"}) as c:
            ids = [
                c.get(f"/api/v1/tables/name/{quote(fqn, safe='')}").json()["id"]
                for fqn in (src, dst)
            ]
            body = {
                "edge": {
                    "fromEntity": {"id": ids[0], "type": "table"},
                    "toEntity": {"id": ids[1], "type": "table"},
                    "lineageDetails": {"source": source},
                }
            }
            status = c.put("/api/v1/lineage", json=body).status_code
        note(f"{OM_USERS[token]} puts the edge {src} -> {dst} ({source}): {status}")
        if status != 200:
            return
        pair = (src, dst)
        self.touched.add(pair)
        self.last.add(pair)
        if pair not in self.sent:
            self.first.add(pair)

    def ours(self, events: Iterable[Event]) -> None:
        """OpenMetadata writes each run event's inputs x outputs it resolves."""
        pairs: set[Pair] = set()
        for e in events:
            if e.kind != "run":
                continue
            ins = [self.tables[d.name] for d in e.inputs if self._table(d)]
            outs = [self.tables[d.name] for d in e.outputs if self._table(d)]
            pairs |= {(s, t) for s in ins for t in outs if s != t}
        self.sent |= pairs
        self.last -= pairs

    def _table(self, d: Dataset) -> bool:
        return d.namespace == self.namespace and d.name in self.tables

    def missing(self, held: set[Pair]) -> set[Pair]:
        return (self.last | self.first) - held

    def kept(self, call: dict[str, Any]) -> dict[str, int]:
        n = sum((call.get("keptBy") or {}).get(user, 0) for user in OM_USERS.values())
        return {"dataFlows": n} if n else {}


# -- Marquez --------------------------------------------------------------------------------------

MARQUEZ_JOBS = ("load", "dag", "ingest")
# event times: before every upload of a sequence (a late event), or after all of them
MARQUEZ_TIMES = (0, 30, 7200)


class MarquezTool(AnotherTool):
    name = "marquez"

    def __init__(self, url: str, can_name: Any) -> None:
        super().__init__(url)
        self.datasets = [Dataset(ns, n) for ns, n in DATASETS if can_name(ns)]
        self.named: set[Dataset] = set()  # datasets ol-dagster's syncs named
        self.jobs: set[Key] = set()  # its jobs Marquez stored
        self.touched: set[Key] = set()  # every dataset its events named
        self.last: set[Key] = set()  # its outputs since ol-dagster's last event naming them
        self.runs = 0

    def write(self, data: st.DataObject, universe: tuple[DefinitionSpec, ...]) -> None:
        namespaces = [ns for ns in FOREIGN if not any(s.admits(ns) for s in universe)]
        namespaces = [ns for ns in namespaces if len(ns) < 64]
        job = (
            data.draw(st.sampled_from(namespaces), label="its job namespace"),
            data.draw(st.sampled_from(MARQUEZ_JOBS), label="its job"),
        )
        # it writes datasets ol-dagster named, mostly (once there are some), and reads any
        pool = self.datasets
        if self.named and data.draw(st.integers(0, 3), label="datasets ol-dagster named"):
            pool = sorted(self.named, key=lambda d: (d.namespace, d.name))
        writes = st.lists(st.sampled_from(pool), min_size=1, max_size=2, unique=True)
        outputs = tuple(data.draw(writes, label="it writes"))
        reads = st.lists(st.sampled_from(self.datasets), max_size=2, unique=True)
        inputs = tuple(d for d in data.draw(reads, label="it reads") if d not in outputs)
        self.runs += 1
        event = Event(
            "run",
            *job,
            run_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"another-tool/{self.runs}")),
            event_type="COMPLETE",
            inputs=inputs,
            outputs=outputs,
            time=data.draw(st.sampled_from(MARQUEZ_TIMES), label="event time"),
        )
        body = {**to_json(event), "producer": "https://example.com/another-tool"}
        with _client(self.url, {}) as c:
            status = c.post("/api/v1/lineage", json=body).status_code
        note(f"another producer, job {job}: writes {outputs}, reads {inputs}: {status}")
        if status not in (200, 201):
            return
        self.jobs.add(job)
        self.touched |= {(d.namespace, d.name) for d in (*inputs, *outputs)}
        self.last |= {(d.namespace, d.name) for d in outputs}

    def ours(self, events: Iterable[Event]) -> None:
        """What may make a version of ol-dagster's current: a DatasetEvent, an output of a
        COMPLETE (or of any event of a streaming job). Reading a dataset keeps the current
        version, which this tool's COMPLETE made."""
        for e in events:
            named = (*e.inputs, *e.outputs, *([e.dataset] if e.dataset else []))
            versioned = [e.dataset] if e.dataset else []
            if e.kind == "run" and (e.event_type in (None, "COMPLETE") or e.processing != "BATCH"):
                versioned = list(e.outputs)
            self.last -= {(d.namespace, d.name) for d in versioned}
            plain = {Dataset(d.namespace, d.name) for d in named}
            self.named |= plain & set(self.datasets)

    def missing(self, jobs: set[Key], datasets: set[Key]) -> set[Key]:
        return (self.jobs - jobs) | (self.last - datasets)

    def kept(self, call: dict[str, Any]) -> dict[str, int]:
        """A dataset kept because one of its jobs wrote the current version, or because its
        event changed it after ol-dagster's last upload."""
        by_job = [
            f"written by job {ns}:{name}{after}"
            for ns, name in self.jobs
            for after in (" (run ", ", which")
        ]
        changed = [f"dataset {ns}:{name}: changed at " for ns, name in self.touched]
        n = sum(
            1
            for why in call.get("keptObjects") or []
            if any(w in why for w in by_job) or any(why.startswith(c) for c in changed)
        )
        return {"physicalEntities": n} if n else {}


# -- Blindata -------------------------------------------------------------------------------------

BLINDATA_USER = "lineage-tool"
BLINDATA_KEY = "bd-apikey-other-0001"
BLINDATA_SYSTEM = "lineage-tool"
# job namespaces for OpenLineage scopes of no definition: case variants of the universes'
# namespaces (a prefix matched without case meets them), and nobody's
SCOPE_NAMESPACES = ("EtL", "ETL", "etl", "Etl", "etl_", "a", "A", "x", "X", "ps", "airflow")


class BlindataTool(AnotherTool):
    name = "blindata"

    def __init__(self, url: str, tenant: str) -> None:
        super().__init__(url)
        self.headers = {
            "X-BD-Tenant": tenant,
            "X-BD-User": BLINDATA_USER,
            "X-BD-ApiKey": BLINDATA_KEY,
        }
        self.system: str | None = None
        self.entities: set[str] = set()  # uuids of its entities
        self.flows: dict[str, Pair] = {}  # uuid -> (from entity, to entity)

    @property
    def created(self) -> set[str]:
        return self.entities | set(self.flows)

    def write(self, data: st.DataObject, universe: tuple[DefinitionSpec, ...]) -> None:
        """An entity of its own now and then (always the first time), and one to three flows
        between any two entities but jobs, each in a scope that is not ol-dagster's."""
        with _client(self.url, self.headers) as c:
            if self.system is None:
                answer = c.post("/api/v1/systems", json={"name": BLINDATA_SYSTEM})
                if answer.status_code != 201:
                    note(f"another tool's System: {answer.status_code}")
                    return
                self.system = answer.json()["uuid"]
            if not self.entities or data.draw(st.integers(0, 3), label="an entity") == 0:
                self._entity(c)
            found = c.get("/api/v1/physical_entities", params={"size": 1000}).json()["content"]
            ends = sorted(
                (e["uuid"], e["system"]["uuid"]) for e in found if e.get("tableType") != "JOB"
            )
            if len(ends) < 2:
                return
            scopes = st.lists(st.sampled_from(self._scopes(universe)), min_size=1, max_size=3)
            for scope in data.draw(scopes, label="scopes"):
                a = data.draw(st.sampled_from(ends), label="flow from")
                b = data.draw(st.sampled_from([e for e in ends if e != a]), label="flow to")
                self._flow(c, scope, a, b)

    def _flow(self, c: httpx.Client, scope: str, a: Pair, b: Pair) -> None:
        body = {
            "name": f"another tool's flow {len(self.flows)}",
            "scope": scope,
            "fromSystem": {"uuid": a[1]},
            "toSystem": {"uuid": b[1]},
            "fromPhysicalEntity": {"uuid": a[0]},
            "toPhysicalEntity": {"uuid": b[0]},
        }
        answer = c.post("/api/v1/dataflows", json=body)
        note(f"another tool's flow {a[0]} -> {b[0]} in scope {scope!r}: {answer.status_code}")
        if answer.status_code == 201:
            self.flows[answer.json()["uuid"]] = (a[0], b[0])

    def _entity(self, c: httpx.Client) -> None:
        name = f"table_{len(self.entities)}"
        body = {"name": name, "schema": "ops", "system": {"uuid": self.system}}
        answer = c.post("/api/v1/physical_entities", json=body)
        note(f"another tool's entity ops.{name}: {answer.status_code}")
        if answer.status_code == 201:
            self.entities.add(answer.json()["uuid"])

    @staticmethod
    def _scopes(universe: tuple[DefinitionSpec, ...]) -> list[str]:
        """A tool's own scope, and OpenLineage scopes of job namespaces no definition admits,
        those that differ from an admitted one by case first (twice as likely)."""
        admitted = [p for s in universe for p in s.patterns]
        foreign = [ns for ns in SCOPE_NAMESPACES if not any(s.admits(ns) for s in universe)]
        close = [ns for ns in foreign if any(ns.lower() == p.lower() for p in admitted)]
        return [
            "lineage-tool:manual",
            *(f"ol:{ns}|load" for ns in foreign + close),
            *(f"ol:{ns}|dag#orchestration" for ns in foreign + close),
        ]

    def missing(self, entities: set[str], flows: set[str]) -> set[str]:
        """Its entities gone, and its flows gone while both their entities are still there
        (removing an entity removes every flow that touches it)."""
        gone = self.entities - entities
        for uid, ends in self.flows.items():
            if uid not in flows and all(e in entities for e in ends):
                gone.add(uid)
        return gone
