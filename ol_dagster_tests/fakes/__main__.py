"""Run one of the in-process fake catalogs in the foreground, to point ``make demo`` at it.

    .venv/bin/python -m ol_dagster_tests.fakes marquez --port 5001
    .venv/bin/python -m ol_dagster_tests.fakes openmetadata --port 8585 --token demo-jwt
    .venv/bin/python -m ol_dagster_tests.fakes blindata --port 8686 --token demo-token

The fakes follow the documented contracts (see docs/catalogs.md); they keep everything in memory.
"""

from __future__ import annotations

import argparse

import uvicorn


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m ol_dagster_tests.fakes")
    parser.add_argument("kind", choices=["marquez", "openmetadata", "blindata"])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token", default="demo-token", help="the bearer token the fake accepts")
    parser.add_argument("--tenant", default="demo", help="blindata: the X-BD-Tenant it serves")
    args = parser.parse_args()
    if args.kind == "marquez":
        from ol_dagster_tests.fakes.marquez_fake import MarquezFake

        app = MarquezFake().server
    elif args.kind == "openmetadata":
        from ol_dagster_tests.fakes.openmetadata_fake import OpenMetadataFake

        # the demo's warehouse namespace mapped to a service, as an OpenMetadata admin would
        app = OpenMetadataFake(
            tokens={args.token: {"EditLineage", "Create"}},
            users={args.token: "ol-dagster-bot"},  # a bot of its own
            mapping={"postgres://warehouse-db:5432": "warehouse"},
            services={"warehouse": ["warehouse"]},
        ).server
    else:
        from ol_dagster_tests.fakes.blindata_fake import BlindataFake

        fake = BlindataFake()
        fake.add_user("ol-dagster", tenant=args.tenant, token=args.token)
        app = fake.app
    uvicorn.run(app, host=args.host, port=args.port, log_level="info", date_header=False)


if __name__ == "__main__":
    main()
