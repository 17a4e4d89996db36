"""Free TCP ports for what a stack binds later: Ray's helper ports, the devnode, test and bench servers.

A port picked now and bound later can be taken in between. Asking the kernel for port 0 hands out a
port of the ephemeral range, the range every outgoing connection and every ``bind(0)`` of Ray's own
processes draws from while Ray starts; a CI run once lost Serve's fallback proxy port that way.
port-for picks outside the ephemeral range and IANA's assigned ports; Ray's worker ports (those of
``ray start``) are left out as well, and no port is handed out twice by one process.
"""

from __future__ import annotations

import port_for

# `ray start`'s default --min-worker-port / --max-worker-port: a node's workers bind these.
RAY_WORKER_PORTS = range(10002, 20000)

_handed_out: set[int] = set()


def free_port() -> int:
    """A loopback TCP port that is free now and outside the ranges others allocate from."""
    port = port_for.select_random(exclude_ports=[*RAY_WORKER_PORTS, *_handed_out])
    _handed_out.add(port)
    return port
