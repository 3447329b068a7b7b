"""``ol-dagster check`` against each fake catalog, served in process on loopback.

``make demo`` runs it after the demo when the checkout has the tests (the installed package never
imports them): it shows what ``check`` prints for OpenMetadata, Marquez and Blindata without any
of them installed. The tests start the same fakes here, then break one thing at a time.

    .venv/bin/python -m ol_dagster_tests.check_against_fakes
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ol_dagster.commands import cli
from ol_dagster.receiver.intake import sort_events
from ol_dagster.store import EventStore
from ol_dagster_tests.fakes.blindata_fake import BlindataFake, FakeClock
from ol_dagster_tests.fakes.faults import serve
from ol_dagster_tests.fakes.harness import ds, run
from ol_dagster_tests.fakes.marquez_fake import MarquezFake
from ol_dagster_tests.fakes.openmetadata_fake import CREATE, EDIT_LINEAGE, OpenMetadataFake

WAREHOUSE = "postgres://warehouse-db:5432"  # the namespace the OpenMetadata admin mapped
SERVICE = "warehouse"
EXPORTS = "s3://exports"  # a namespace with no serviceMapping entry
JOB_NAMESPACE = "repo"
TENANT = "demo"
TOKENS = {  # env variable -> the secret each fake accepts (made up, test-only)
    "OL_CHECK_OM_TOKEN": "om-check-jwt-0123456789",
    "OL_CHECK_BD_TOKEN": "bd-check-token-0123456789",
}
RECEIVER_TOKEN = "receiver-check-token-0123"  # what a producer would send (unused by check)


@dataclass
class Fakes:
    """The three fakes, served, and a settings file with one definition per catalog."""

    openmetadata: OpenMetadataFake
    marquez: MarquezFake
    blindata: BlindataFake
    urls: dict[str, str]
    workdir: Path
    store_url: str = ""
    catalogs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def settings(self, **catalog_overrides: dict[str, Any]) -> Path:
        """Write the settings file (a catalog's keys replaced by ``catalog_overrides[kind]``)."""
        catalogs = {k: {**v, **catalog_overrides.get(k, {})} for k, v in self.catalogs.items()}
        definitions = [
            {
                "name": f"check_{kind}",
                "uuid": f"00000000-0000-4000-8000-00000000000{i}",
                "catalog": kind,
                "allowedJobNamespaces": [JOB_NAMESPACE],
                "receiver": {"token": {"env": f"OL_CHECK_RECEIVER_{kind.upper()}"}},
            }
            for i, kind in enumerate(catalogs, start=1)
        ]
        path = self.workdir / "ol_dagster.yaml"
        data = {"store": {"url": self.store_url}, "catalogs": catalogs, "definitions": definitions}
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        return path

    def store(self, definition: str, events: list[dict[str, Any]]) -> None:
        """One posted batch of ``events`` in the event store, as the receiver stores it."""
        intake = sort_events(list(events), [JOB_NAMESPACE])
        assert not intake.rejected, intake.rejected
        store = EventStore(self.store_url)
        try:
            store.add_posted_batch(definition, intake.accepted, received=intake.received)
        finally:
            store.dispose()


@contextmanager
def served_fakes(workdir: Path) -> Iterator[Fakes]:
    """Each fake as a deployment that passes every check: a bot with EditLineage and Create and
    the warehouse namespace mapped to an existing service; Marquez as it comes; a Blindata user
    with SYSTEMS_ADMIN. Their clocks are the real time."""
    om = OpenMetadataFake(
        tokens={TOKENS["OL_CHECK_OM_TOKEN"]: {EDIT_LINEAGE, CREATE}},
        users={TOKENS["OL_CHECK_OM_TOKEN"]: "ol-dagster-bot"},
        mapping={WAREHOUSE: SERVICE},
        services={SERVICE: ["shop"]},
    )
    marquez = MarquezFake()
    blindata = BlindataFake(clock=FakeClock(start=None))
    blindata.add_user("ol-dagster", tenant=TENANT, token=TOKENS["OL_CHECK_BD_TOKEN"])
    with ExitStack() as stack:
        urls = {
            "openmetadata": stack.enter_context(serve(om.server)),
            "marquez": stack.enter_context(serve(marquez.server)),
            "blindata": stack.enter_context(serve(blindata.app)),  # type: ignore[arg-type]
        }
        fakes = Fakes(om, marquez, blindata, urls, workdir)
        fakes.store_url = f"sqlite:///{workdir / 'store.db'}"
        fakes.catalogs = {
            "openmetadata": {
                "kind": "openmetadata",
                "url": urls["openmetadata"],
                "token": {"env": "OL_CHECK_OM_TOKEN"},
                "serviceMapping": {WAREHOUSE: SERVICE},
                "maxRetries": 0,
            },
            "marquez": {"kind": "marquez", "url": urls["marquez"], "maxRetries": 0},
            "blindata": {
                "kind": "blindata",
                "url": urls["blindata"],
                "tenant": TENANT,
                "token": {"env": "OL_CHECK_BD_TOKEN"},
                "maxRetries": 0,
            },
        }
        yield fakes


def main() -> int:
    for env, secret in TOKENS.items():
        os.environ.setdefault(env, secret)
    for kind in ("OPENMETADATA", "MARQUEZ", "BLINDATA"):
        os.environ.setdefault(f"OL_CHECK_RECEIVER_{kind}", RECEIVER_TOKEN)
    worst = 0
    with (
        tempfile.TemporaryDirectory(prefix="ol-dagster-check-") as tmp,
        served_fakes(Path(tmp)) as fakes,
    ):
        path = fakes.settings()
        # what OpenMetadata's namespace check reads: one mapped namespace, one nobody mapped
        loaded = run("etl.load", [ds(WAREHOUSE, "shop.public.orders")], [ds(EXPORTS, "orders")])
        fakes.store("check_openmetadata", [loaded])
        print("ol-dagster check against each fake catalog (in process, on loopback)\n")
        for kind in fakes.catalogs:
            code = cli.main(["--settings", str(path), "check", "--definition", f"check_{kind}"])
            worst = max(worst, code)
            print()
    return worst


if __name__ == "__main__":
    raise SystemExit(main())
