"""Where the machine's CPU went during a measured run, by the role of each process, per request.

A saturated replica shares the machine's cores with HAProxy, the upstream, PostgreSQL and Ray's own
processes, so what they spend per request is CPU the replica did not get. Ray's metrics agent is its
own role: in Ray 2.60 it turns each histogram observation of every process on the node back into one
Python record (bench/README.md, "Where the replica's and the machine's time goes"), tens of µs per
Serve request. The load
generator (wrk) is not in these sums: its CPU is the run's client column.
"""

from __future__ import annotations

import time

import psutil

#: (substring of the process's name or command line, role); the first match wins. Ray's own processes
#: are split by what they are: Serve's control plane, the gateway's actors (each a Ray worker process, as
#: the replica is) and Ray's node processes (GCS, raylet, log monitor, dashboard), so that what each costs
#: at rest (:meth:`NodeCpu.at_rest`) can be told from what a request costs.
ROLES: tuple[tuple[str, str], ...] = (
    ("ServeReplica:gateway:Service", "gateway actors"),  # the app's deployment that starts the actors
    ("ServeReplica", "replica"),
    ("haproxy", "HAProxy"),
    ("DashboardAgent", "Ray metrics agent"),
    ("postgres", "PostgreSQL"),
    ("redis-server", "Redis"),
    ("bench.const_upstream", "upstream"),
    ("bench.forwarder", "forwarder (b)"),
    ("bench.app_uvicorn", "app on uvicorn"),
    ("ServeController", "Serve controller"),
    ("ProxyActor", "Serve proxy actors"),
    ("HAProxyManager", "Serve proxy actors"),
    ("ray::", "gateway actors"),
    ("raylet", "Ray node"),
    ("gcs_server", "Ray node"),
    ("log_monitor", "Ray node"),
    ("ray/dashboard", "Ray node"),
    ("ray/autoscaler", "Ray node"),
)
#: The roles that are Ray's and Serve's own processes (what issue 53 calls "Ray's other processes").
RAY_ROLES = ("Serve controller", "Serve proxy actors", "gateway actors", "Ray node")
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

    def at_rest(self, seconds: float, exclude: set[int]) -> dict[str, float]:
        """ms of CPU a second by role over ``seconds`` of no load (most first): what each role spends
        whether or not requests come, which a run's per-request figures spread over its requests."""
        self.start()
        time.sleep(seconds)
        return {named: us / 1e3 for named, us in self.per_request(1, exclude, seconds).items()}

    def per_request(self, requests: int, exclude: set[int], per: float = 1.0) -> dict[str, float]:
        """µs of CPU per request by role since :meth:`start`, most first; ``exclude``: pids left out
        (this process, the load generator). A process that ended in between is not counted."""
        spent: dict[str, float] = {}
        for pid, (named, cpu_s) in self._snapshot().items():
            if pid in exclude:
                continue
            used = cpu_s - self._before.get(pid, (named, 0.0))[1]
            spent[named] = spent.get(named, 0.0) + used
        us = {named: s / max(requests, 1) / per * 1e6 for named, s in spent.items()}
        return dict(sorted(us.items(), key=lambda kv: -kv[1]))


def format_rest(ms_per_s: dict[str, float], rps: float | None = None) -> str:
    """One line of :meth:`NodeCpu.at_rest`'s figures (Ray's roles summed too); with a run's ``rps``,
    what that background comes to per request at that rate."""
    ray = sum(v for named, v in ms_per_s.items() if named in RAY_ROLES)
    parts = [f"{named} {v:.1f}" for named, v in ms_per_s.items() if v >= 0.5]
    line = f"{', '.join(parts)} ms/s; Ray's and Serve's processes {ray:.0f} ms of CPU a second"
    if rps:
        line += f" ({ray * 1e3 / rps:.0f} µs a request at {rps:,.0f} req/s)"
    return line


def format_node(us: dict[str, float], least_us: float = 1.0) -> str:
    """One line: each role's µs per request (those under ``least_us`` folded into ``other``) and the sum."""
    shown = {named: v for named, v in us.items() if v >= least_us and named != OTHER}
    other = sum(v for named, v in us.items() if named not in shown)
    parts = [f"{named} {v:.0f}" for named, v in shown.items()] + [f"{OTHER} {other:.0f}"]
    return f"{', '.join(parts)}; machine {sum(us.values()):.0f} µs per request"
