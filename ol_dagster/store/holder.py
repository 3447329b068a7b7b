"""Which process holds a sync lock, told so that the same machine can see it is gone.

A sync killed outright (SIGKILL, OOM, a closed terminal) releases nothing: its lock stays until
its lease runs out, and its Dagster run stays STARTED. On the machine it ran on, though, whether
its process still exists is a fact: a lock records its holder's process as the kernel's boot, the
PID namespace, the PID and the process's start time, and a process on the same boot and in the
same namespace can check that this process still runs. The start time defeats PID reuse. Any
other machine (another pod, another container with its own namespace) cannot tell, and the
lease decides, as before. Linux only: elsewhere ``this_process`` is None and the lease decides.
"""

from __future__ import annotations

import os
from functools import cache

_PROC = "/proc"


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as f:
            return f.read()
    except OSError:
        return None


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22); None
    when it does not run (no such process, or a zombie: dead, not yet reaped by its parent)."""
    stat = _read(f"{_PROC}/{pid}/stat")
    if stat is None:
        return None
    # the command name (field 2) is in parentheses and may hold spaces: split after it
    fields = stat[stat.rfind(")") + 2 :].split()
    if len(fields) <= 19 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


@cache
def _machine() -> str | None:
    boot = _read(f"{_PROC}/sys/kernel/random/boot_id")
    try:
        namespace = os.stat(f"{_PROC}/self/ns/pid").st_ino
    except OSError:
        return None
    return f"{boot.strip()}:{namespace}" if boot else None


def this_process() -> str | None:
    """``<boot id>:<pid namespace>:<pid>:<start time>`` of the calling process, or None where
    that cannot be told (not Linux, no /proc)."""
    machine = _machine()
    pid = os.getpid()
    start = _start_time(pid)
    if machine is None or start is None:
        return None
    return f"{machine}:{pid}:{start}"


def process_gone(recorded: str | None) -> bool:
    """True only when ``recorded`` names a process of this boot and PID namespace that no longer
    runs (its PID is free, or now another process's). False whenever it cannot be told."""
    if not recorded:
        return False
    machine, _, rest = recorded.rpartition(":")  # rest: the start time
    machine, _, pid = machine.rpartition(":")
    if not machine or machine != _machine() or not pid.isdigit():
        return False
    return _start_time(int(pid)) != rest
