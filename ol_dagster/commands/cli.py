"""The ``ol-dagster`` command: serve, send, sync, inspect, lineage, changes, check, demo, consume.

Every sub-command takes ``--settings PATH`` (default: ``OL_DAGSTER_SETTINGS`` or
``./ol_dagster.yaml``). Errors a person can fix (bad settings, a missing secret, an unreachable
receiver) end with a one-line message and exit code 2, not a traceback.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import secrets
import sys
from pathlib import Path

from ol_dagster.gcpause import gc_paused, one_sync_process
from ol_dagster.settings import SettingsError, SyncDefinition, load_settings, settings_path

# ``sync``'s line for a definition with no open, sealed or failed batch (exit 0)
NOTHING_PENDING = "nothing_pending"

# ``serve``'s default host and port, so ``send`` reaches a receiver started without options
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 5000


def _cmd_serve(args: argparse.Namespace) -> int:
    from ol_dagster.commands.startup import open_store, refuse_unservable
    from ol_dagster.receiver.app import create_app
    from ol_dagster.receiver.server import listen, serve, url_of

    path = settings_path(args.settings)
    settings = load_settings(path)
    refuse_unservable(settings, str(path))
    sock = listen(args.host, args.port)  # a busy port: one line, before any banner
    try:
        store = open_store(settings, background_checkpoints=True)
        app = create_app(settings, store)
    except BaseException:
        sock.close()
        raise
    names = ", ".join(d.name for d in settings.definitions)
    print(f"ol-dagster receiver on {url_of(sock)} for: {names}", file=sys.stderr)
    # stopped, the receiver copies what it wrote into a SQLite store's file itself: left in the
    # write-ahead log, the next process to open the store (a sync) would copy it
    try:
        serve(app, sock, on_stop=store.dispose)
    except KeyboardInterrupt:  # Ctrl-C, raised again by uvicorn once every answer is sent
        return 130
    return 0


def _cmd_send(args: argparse.Namespace) -> int:
    import httpx

    from ol_dagster.commands.sender import (
        UnreadableFile,
        batch_url,
        post_batch,
        read_batch,
        snapshot_notice,
    )

    token = _send_token(args)
    worst = 0
    with httpx.Client(timeout=60) as client:
        for name in args.files:
            try:
                batch = read_batch(Path(name))
            except (OSError, UnreadableFile) as exc:
                print(json.dumps({"file": name, "error": str(exc)}))
                worst = 1
                continue
            try:
                response = post_batch(client, args.url, token, batch)
            except httpx.TransportError as exc:
                from ol_dagster.catalog.check.findings import safe_url

                # where it went and why, never the token (it is in a header, not in the URL)
                target = safe_url(batch_url(args.url))
                raise SettingsError(
                    f"cannot post {name} to {target}: {type(exc).__name__}: {exc or 'no answer'} "
                    "(is ol-dagster serve running there? --url names the receiver)"
                ) from None
            try:
                answer = response.json()
            except ValueError:
                answer = {"body": response.text[:500]}
            print(json.dumps({"file": name, "httpStatus": response.status_code, **answer}))
            if notice := snapshot_notice(name, answer):
                print(notice, file=sys.stderr)  # stdout stays one JSON answer per file
            if response.status_code >= 400:
                worst = 1
    return worst


# where ``send`` reads its token by default
TOKEN_ENV = "OL_DAGSTER_TOKEN"


def _send_token(args: argparse.Namespace) -> str:
    """``send``'s token: from the environment variable ``--token-env`` names; ``--token`` works
    but warns, since a command line is visible to the machine's other users (``ps``)."""
    if args.token:
        print(
            "ol-dagster: warning: --token is visible to other users of this machine (ps); "
            f"set {args.token_env} instead",
            file=sys.stderr,
        )
        return args.token
    token = os.environ.get(args.token_env, "")
    if not token:
        raise SettingsError(
            f"set {args.token_env} to the receiver token (or name another "
            "variable with --token-env)"
        )
    return token


def _cmd_sync(args: argparse.Namespace) -> int:
    # Importing the store and Dagster and opening its instance make ~150,000 container objects
    # that live as long as the process: with the collector paused they are not walked again and
    # again while they are made (a fifth of the import's CPU time, and a full collection).
    one_sync_process()
    with gc_paused():
        from ol_dagster.commands.startup import open_store

        # what cannot work stops here, in one line, before Dagster is imported
        settings = load_settings(args.settings)
        if args.definition:
            settings.definition(args.definition)
        open_store(settings).dispose()
        from ol_dagster.commands.headless import instance_from_env, sync_batches

        project_dir = settings_path(args.settings).resolve().parent
        instance = instance_from_env(project_dir)
    code = 0
    synced_any = False
    try:
        for line in sync_batches(args.settings, definition=args.definition, instance=instance):
            synced_any = True
            print(json.dumps(line, default=str))
            if line["status"] != "synced":
                code = 1
    finally:
        instance.dispose()  # closes the instance's database files, which it keeps open
    if not synced_any:
        # an empty run still answers, one line per definition asked (the batch lines' keys
        # "definition" and "status"), so a person or a script can tell it from a silent failure
        chosen = [args.definition] if args.definition else [d.name for d in settings.definitions]
        for name in chosen:
            print(json.dumps({"definition": name, "status": NOTHING_PENDING}))
    # The process ends next: frozen, the objects are not walked by the interpreter's last
    # collection at exit (~0.2 s of CPU); refcounting still finalizes them.
    gc.freeze()
    return code


def _inspected_definition(args: argparse.Namespace) -> SyncDefinition | None:
    """The definition ``inspect`` judges the events for: ``--definition``, else the only one of
    the settings file when there is a file with one, else none (any job namespace)."""
    if args.definition:
        return load_settings(args.settings).definition(args.definition)
    if not settings_path(args.settings).exists():
        return None
    definitions = load_settings(args.settings).definitions
    return definitions[0] if len(definitions) == 1 else None


def _cmd_inspect(args: argparse.Namespace) -> int:
    from ol_dagster.commands.inspection import inspect_files, render_table

    definition = _inspected_definition(args)
    if definition is None:
        result = inspect_files(args.files, lenient=args.lenient)
    else:
        result = inspect_files(
            args.files,
            lenient=args.lenient,
            max_name_length=definition.limits.maxNameLength,
            job_namespaces=definition.namespace_patterns,
        )
    result["definition"] = definition.name if definition else None
    print(json.dumps(result, indent=2) if args.json else render_table(result))
    return 0 if all(r["accepted"] for r in result["events"]) else 1


def _cmd_lineage(args: argparse.Namespace) -> int:
    from ol_dagster.catalog.lineage_reads import NodeNotFound

    settings = load_settings(args.settings)
    if args.definition:
        definition = settings.definition(args.definition)
    elif len(settings.definitions) == 1:
        definition = settings.definitions[0]
    else:
        names = ", ".join(d.name for d in settings.definitions)
        raise SettingsError(f"several definitions ({names}): choose one with --definition")
    both = not (args.upstream or args.downstream)
    catalog = settings.open_catalog(definition.catalog_keys[0], definition=definition.name)
    try:
        result = catalog.lineage(
            args.node,
            depth=args.depth,
            upstream=args.upstream or both,
            downstream=args.downstream or both,
        )
    except (NodeNotFound, ValueError) as exc:
        print(f"ol-dagster: {exc}", file=sys.stderr)
        return 1
    finally:
        catalog.close()
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for edge in result["edges"]:
            print(f"{edge['from']}  ->  {edge['to']}")
        print(f"{len(result['nodes'])} node(s), {len(result['edges'])} edge(s)")
    return 0


def _cmd_changes(args: argparse.Namespace) -> int:
    from ol_dagster.commands.changes import show_changes

    settings = load_settings(args.settings)
    return show_changes(
        settings,
        settings.definition(args.definition),
        batch=args.batch,
        catalog=args.catalog,
        # a program reading the output gets JSON unless it asks for lines
        as_json=args.json or (not args.text and not sys.stdout.isatty()),
    )


def _cmd_check(args: argparse.Namespace) -> int:
    from ol_dagster.commands.check import check, render

    path = settings_path(args.settings)
    settings = load_settings(path)
    if args.definition:
        definitions = [settings.definition(args.definition)]
    else:
        definitions = list(settings.definitions)
    reports = check(settings, definitions, source=str(path))
    if args.json:
        print(
            json.dumps(
                {"ok": all(r.ok for r in reports), "reports": [r.as_dict() for r in reports]},
                indent=2,
            )
        )
    else:
        print("\n\n".join(render(r) for r in reports))
    return 0 if all(r.ok for r in reports) else 1


def _cmd_demo(args: argparse.Namespace) -> int:
    from ol_dagster.commands.demo import demo_settings, run_demo

    settings_file = demo_settings(args.settings)
    for d in load_settings(settings_file).definitions:
        # The demo's own receiver needs every definition's token; invent any that is not set.
        os.environ.setdefault(d.receiver.token.env, secrets.token_urlsafe(24))
    return run_demo(str(settings_file))


def _cmd_consume(args: argparse.Namespace) -> int:
    from ol_dagster.commands.consume import consume

    return consume(args.settings, idle_exit=args.idle_exit)


DESCRIPTION = (
    "Keeps data catalogs in sync with OpenLineage: receives the events producers send, syncs "
    "them into the catalogs, and removes what producers no longer describe."
)
DEFINITION_HELP = "a sync definition of the settings file, by name"


def _depth(text: str) -> int:
    """``--depth``: how many steps from the node, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def _add_reading_commands(sub: argparse._SubParsersAction) -> None:
    """The commands that read the catalogs, the store and the broker: ``lineage``, ``changes``,
    ``check``, ``demo`` and ``consume``."""
    p = sub.add_parser("lineage", help="the lineage of a dataset or job, read from the catalog")
    p.add_argument("node", help="dataset:<namespace>:<name> or job:<namespace>:<name>")
    p.add_argument(
        "--definition",
        help=f"{DEFINITION_HELP}, whose primary catalog is read (default: the only one)",
    )
    p.add_argument(
        "--depth",
        type=_depth,
        default=2,
        help="how many steps from the node, 0 or more (default: %(default)s)",
    )
    direction = p.add_mutually_exclusive_group()
    direction.add_argument("--upstream", action="store_true", help="only what leads to the node")
    direction.add_argument("--downstream", action="store_true", help="only what the node leads to")
    p.add_argument("--json", action="store_true", help="print JSON instead of edge lines")
    p.set_defaults(func=_cmd_lineage)

    p = sub.add_parser(
        "changes",
        help="what a batch added, removed and changed in the lineage, and what it left broken",
    )
    p.add_argument("--definition", required=True, help=DEFINITION_HELP)
    p.add_argument(
        "--batch", type=int, metavar="N", help="the batch (default: the newest with changes)"
    )
    p.add_argument("--catalog", help="one of the definition's catalogs (default: its first)")
    form = p.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print JSON (default when piped)")
    form.add_argument("--text", action="store_true", help="print lines (default on a terminal)")
    p.set_defaults(func=_cmd_changes)

    p = sub.add_parser(
        "check",
        help="what the sync needs, asked of the store and each catalog (writes nothing)",
    )
    p.add_argument("--definition", help=f"{DEFINITION_HELP} (default: every definition)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a report")
    p.set_defaults(func=_cmd_check)

    p = sub.add_parser("demo", help="the whole path once, on embedded catalogs with sample events")
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser(
        "consume", help="read OpenLineage events from the Kafka topics of the settings"
    )
    p.add_argument(
        "--idle-exit",
        type=float,
        metavar="SECONDS",
        help="stop after this long without a message, counted from start (a broker that "
        "answers gets up to a minute more for the group's first join; none answering: exit 2) "
        "(default: run until SIGTERM or SIGINT)",
    )
    p.set_defaults(func=_cmd_consume)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ol-dagster", description=DESCRIPTION)
    parser.add_argument(
        "--settings", help="settings file (default: $OL_DAGSTER_SETTINGS or ./ol_dagster.yaml)"
    )
    sub = parser.add_subparsers(dest="command", required=True, title="commands", metavar="COMMAND")

    p = sub.add_parser("serve", help="run the OpenLineage receiver producers post events to")
    p.add_argument(
        "--host", default=DEFAULT_HOST, help="address to listen on (default: %(default)s)"
    )
    p.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help="port to listen on; 0 for any free one (default: %(default)s)",
    )
    p.set_defaults(func=_cmd_serve)

    p = sub.add_parser("send", help="post event files to a receiver, one batch per file")
    p.add_argument(
        "files", nargs="+", metavar="FILE", help="a JSON event, a JSON list or NDJSON file"
    )
    p.add_argument(
        "--url",
        default=f"http://{DEFAULT_HOST}:{DEFAULT_PORT}",
        help="the receiver: its base URL or its /api/v1/lineage[/batch] endpoint "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--token-env",
        default=TOKEN_ENV,
        metavar="NAME",
        help="the environment variable holding the bearer token (default: %(default)s)",
    )
    p.add_argument(
        "--token", help="the bearer token itself (visible to other users: prefer --token-env)"
    )
    p.set_defaults(func=_cmd_send)

    p = sub.add_parser(
        "sync", help="seal the pending batches and sync them in order, without the UI"
    )
    p.add_argument("--definition", help=f"{DEFINITION_HELP} (default: every definition)")
    p.set_defaults(func=_cmd_sync)

    p = sub.add_parser(
        "inspect",
        help="what ol-dagster makes of event files, as the receiver judges them (nothing stored)",
    )
    p.add_argument(
        "files", nargs="+", metavar="FILE", help="a JSON event, a JSON list or NDJSON file"
    )
    p.add_argument(
        "--definition",
        help=f"{DEFINITION_HELP}: its job namespaces and limits judged too (default: the only "
        "definition of the settings file, when there is a file with one)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument(
        "--lenient",
        action="store_true",
        help="read templates: fill a missing envelope, drop broken facets",
    )
    p.set_defaults(func=_cmd_inspect)

    _add_reading_commands(sub)

    for p in sub.choices.values():
        p.add_argument("--settings", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("ol_dagster").setLevel(logging.INFO)
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except SettingsError as exc:
        print(f"ol-dagster: {' '.join(str(exc).split())}", file=sys.stderr)  # one line
        return 2
    except Exception as exc:
        # httpx is imported by the commands that talk HTTP only: an error of it means it is loaded
        httpx = sys.modules.get("httpx")
        if httpx is None or not isinstance(exc, httpx.HTTPError):
            raise
        print(f"ol-dagster: HTTP error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
