"""Where the machine's CPU went during a measured run, by the role of each process, per request.

A saturated replica shares the machine's cores with HAProxy, the upstream, PostgreSQL and Ray's own
processes, so what they spend per request is CPU the replica did not get. Ray's metrics agent is its
own role: in Ray 2.60 it turns each histogram observation of every process on the node back into one
Python record (bench/README.md, "Where the replica's and the machine's time goes"), tens of µs per
Serve request. The load
generator (wrk) is not in these sums: its CPU is the run's client column.
"""

from __future__ import annotations

import psutil

#: (substring of the process's name or command line, role); the first match wins.
ROLES: tuple[tuple[str, str], ...] = (
    ("ServeReplica", "replica"),
    ("haproxy", "HAProxy"),
    ("DashboardAgent", "Ray metrics agent"),
    ("postgres", "PostgreSQL"),
    ("redis-server", "Redis"),
    ("bench.const_upstream", "upstream"),
    ("bench.forwarder", "forwarder (b)"),
    ("ray::", "Ray (other)"),
    ("raylet", "Ray (other)"),
    ("gcs_server", "Ray (other)"),
)
OTHER = "other"


def role(name: str, cmdline: str) -> str:
    for marker, named in ROLES:
        if marker in name or marker in cmdline:
            return named
    return OTHER


class NodeCpu:
    """CPU seconds of every process on the machine, taken at :meth:`start` and again at :meth:`per_request`."""

    def __init__(self) -> None:
        self._before: dict[int, tuple[str, float]] = {}

    @staticmethod
    def _snapshot() -> dict[int, tuple[str, float]]:
        taken: dict[int, tuple[str, float]] = {}
        for process in psutil.process_iter(["name", "cmdline", "cpu_times"]):
            times = process.info.get("cpu_times")
            if times is None:  # gone, or not ours to read
                continue
            command = " ".join(process.info.get("cmdline") or [])
            taken[process.pid] = (role(process.info.get("name") or "", command), times.user + times.system)
        return taken

    def start(self) -> None:
        self._before = self._snapshot()

    def per_request(self, requests: int, exclude: set[int]) -> dict[str, float]:
        """µs of CPU per request by role since :meth:`start`, most first; ``exclude``: pids left out
        (this process, the load generator). A process that ended in between is not counted."""
        spent: dict[str, float] = {}
        for pid, (named, cpu_s) in self._snapshot().items():
            if pid in exclude:
                continue
            used = cpu_s - self._before.get(pid, (named, 0.0))[1]
            spent[named] = spent.get(named, 0.0) + used
        us = {named: s / max(requests, 1) * 1e6 for named, s in spent.items()}
        return dict(sorted(us.items(), key=lambda kv: -kv[1]))


def format_node(us: dict[str, float], least_us: float = 1.0) -> str:
    """One line: each role's µs per request (those under ``least_us`` folded into ``other``) and the sum."""
    shown = {named: v for named, v in us.items() if v >= least_us and named != OTHER}
    other = sum(v for named, v in us.items() if named not in shown)
    parts = [f"{named} {v:.0f}" for named, v in shown.items()] + [f"{OTHER} {other:.0f}"]
    return f"{', '.join(parts)}; machine {sum(us.values()):.0f} µs per request"
