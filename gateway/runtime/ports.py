"""Free TCP ports for what a stack binds later: Ray's helper ports, the devnode, test and bench servers.

A port picked now and bound later can be taken in between. Asking the kernel for port 0 hands out a
port of the ephemeral range, the range every outgoing connection and every ``bind(0)`` of Ray's own
processes draws from while Ray starts; a CI run once lost Serve's fallback proxy port that way.
port-for picks outside the ephemeral range and IANA's assigned ports; Ray's worker ports (those of
``ray start``) are left out as well.

No port is handed out twice on the machine within :data:`LEASE_S`: each is leased by a file in a directory
every process shares (:data:`LEASES`), so two processes picking at once (two stacks starting side by side,
a stack and a test server) do not both get it; a CI run lost a test's replica port to a stack starting
beside it. A process that cannot write there still never hands a port out twice itself.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import port_for

# `ray start`'s default --min-worker-port / --max-worker-port: a node's workers bind these.
RAY_WORKER_PORTS = range(10002, 20000)
#: How long a port handed out stays another process's: what picks a port binds it within a start.
LEASE_S = 600.0
LEASES = Path(tempfile.gettempdir()) / "gateway-port-leases"

_handed_out: set[int] = set()


def free_port() -> int:
    """A loopback TCP port that is free now, outside the ranges others allocate from, and not handed out on
    this machine in the last :data:`LEASE_S`."""
    while True:
        port = port_for.select_random(exclude_ports=[*RAY_WORKER_PORTS, *_handed_out])
        _handed_out.add(port)
        if _lease(port):
            return port


def _lease(port: int) -> bool:
    """Whether this process may have ``port``: no other took it within the lease (or leases cannot be kept)."""
    try:
        LEASES.mkdir(mode=0o1777, exist_ok=True)
        path = LEASES / str(port)
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
            return True
        except FileExistsError:
            if time.time() - path.stat().st_mtime < LEASE_S:
                return False
            os.utime(path)  # an old lease: taken again
            return True
    except OSError:  # a directory another user owns, a full disk: this process's own record still holds
        return True
