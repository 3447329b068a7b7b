"""A throwaway PostgreSQL server for the tests, on a loopback port.

The machines carry the PostgreSQL binaries but no running server; the server refuses to run as
root, and CI runs as root, so it is started as the ``postgres`` system user there.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import create_engine, text


def free_port() -> int:
    """A port free now (see ``PostgresServer.start`` for the race with another process)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_postgres(cmd: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *cmd]
    return cmd


class PostgresServer:
    def __init__(self) -> None:
        self.initdb = shutil.which("initdb")
        self.pg_ctl = shutil.which("pg_ctl")
        if not (self.initdb and self.pg_ctl):
            raise FileNotFoundError("initdb/pg_ctl not found on PATH")
        self.dir = Path(tempfile.mkdtemp(prefix="ol_dagster_pg_"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.stopped = False

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def database_url(self, name: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"

    def fresh_database(self, prefix: str = "t") -> str:
        """The URL of a new, empty database (a unique name starting with ``prefix``)."""
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        admin = create_engine(self.url, isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
        finally:
            admin.dispose()
        return self.database_url(name)

    def start(self) -> PostgresServer:
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        subprocess.run(
            _as_postgres(
                [self.initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"]
            ),
            check=True,
            capture_output=True,
        )
        # PostgreSQL cannot be told to bind port 0 and report it: the port is picked free first,
        # and if another process takes it before the server binds, the start fails and is tried
        # again on another one (not a test failure).
        for attempt in range(5):
            try:
                self._ctl("start")
                return self
            except subprocess.CalledProcessError:
                log = self.dir / "log"
                in_use = log.exists() and "already in use" in log.read_text(errors="replace")
                if not in_use or attempt == 4:
                    raise
                self.port = free_port()
        return self

    def _ctl(self, action: str) -> None:
        opts = f"-p {self.port} -h 127.0.0.1 -k {self.dir} -c fsync=off -c full_page_writes=off"
        cmd = [self.pg_ctl, "-D", str(self.data), "-o", opts, "-w", "-t", "60"]
        if action != "stop":
            # the server's output goes to the log: left on pg_ctl's captured stdout, the server
            # would hold that pipe open and subprocess.run would wait for it forever
            cmd += ["-l", str(self.dir / "log")]
        if action != "start":
            cmd += ["-m", "fast"]
        subprocess.run(_as_postgres([*cmd, action]), check=True, capture_output=True)
        if action != "stop":
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", self.port)) == 0:
                        return
                time.sleep(0.1)

    def restart(self) -> None:
        self._ctl("restart")

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            subprocess.run(
                _as_postgres([self.pg_ctl, "-D", str(self.data), "-m", "immediate", "-w", "stop"]),
                capture_output=True,
            )
            shutil.rmtree(self.dir, ignore_errors=True)
