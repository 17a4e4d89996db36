"""What a ``gateway up`` killed with SIGKILL leaves running, found again by the next start.

Two processes it starts outlive it by design: the devnode, in a session of its own so that a terminal's
Ctrl-C reaches ``gateway up`` alone, and Serve's HAProxy, which Serve's manager actor starts in a
session of its own and which keeps the gateway's port. (PostgreSQL is taken over by the next start and
Redis is stopped by it: :mod:`gateway.runtime.embedded`.) Each is recorded in a file under the data dir
naming it and the process that started it; a record whose starter is gone names a leftover, which the
next start stops before it checks its ports. A record whose starter still runs is left alone: a second
``gateway up`` on the same home then finds the ports in use and says so.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

import psutil


def record(path: Path, what: str) -> None:
    """Record ``what`` (a pid, a marker) as started by this process."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{what}\n{os.getpid()}\n")


def left_behind(path: Path) -> str | None:
    """What the record at ``path`` names when its starter is gone (the record is then removed: the caller
    stops it), else None: no record, or a starter still running."""
    try:
        what, starter = path.read_text().split("\n")[:2]
        starter_pid = int(starter)
    except (FileNotFoundError, ValueError):
        path.unlink(missing_ok=True)
        return None
    if running(starter_pid):
        return None
    path.unlink(missing_ok=True)
    return what


def running(pid: int) -> bool:
    """Not gone and not a zombie (an exited orphan waits unreaped where init does not reap)."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def stop_processes(processes: Iterable[psutil.Process], grace_s: float = 5.0) -> int:
    """SIGTERM each, SIGKILL those still running ``grace_s`` later; how many were signalled."""
    found = []
    for proc in processes:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
            found.append(proc)
    _, alive = psutil.wait_procs(found, timeout=grace_s)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    return len(found)
