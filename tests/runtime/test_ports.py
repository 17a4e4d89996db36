"""``free_port`` picks where nothing else on the machine allocates: not the kernel's ephemeral range
(outgoing connections, ``bind(0)``) and not Ray's worker ports."""

from __future__ import annotations

import socket
from pathlib import Path

from gateway.runtime.ports import RAY_WORKER_PORTS, free_port


def ephemeral_range() -> range:
    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    return range(low, high + 1)


def test_free_ports_are_bindable_distinct_and_outside_the_ranges_others_allocate_from() -> None:
    ports = [free_port() for _ in range(20)]
    assert len(set(ports)) == len(ports)
    for port in ports:
        assert port not in ephemeral_range()
        assert port not in RAY_WORKER_PORTS
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_another_process_leased_is_not_handed_out() -> None:
    """Two processes picking at once do not get the same port: each one leased is left to its process."""
    import subprocess
    import sys

    code = "from gateway.runtime.ports import free_port\nprint(*[free_port() for _ in range(200)])"
    theirs = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    leased = set(map(int, theirs.stdout.split()))
    assert len(leased) == 200
    mine = {free_port() for _ in range(200)}
    assert not mine & leased
