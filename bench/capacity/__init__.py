"""`python -m bench.capacity`: the capacity of each shared component, measured one at a time, for
``docs/scaling.md``'s model (how many shards, replicas and database resources a deployment needs).

Each figure is a rate (operations a second, as measured on this machine with the load generator in
the same process) with the CPU it cost on each side: the caller's (this process: what a replica
spends) and the server's (the actor, PostgreSQL or Redis process: what the component spends). The
server's CPU per operation is the figure that scales: ``1e6 / µs`` is what one core of it answers
when the caller is elsewhere, which on a 2-core machine shared with the caller it cannot show.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    """One measured run: ``count`` operations in ``seconds``, and the CPU seconds each side used."""

    section: str
    name: str
    count: int
    seconds: float
    caller_cpu_s: float
    server_cpu_s: float | None
    load: float  # the 1-minute load average at the end of the run
    note: str = ""

    @property
    def rate(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else 0.0

    @property
    def caller_us(self) -> float:
        return 1e6 * self.caller_cpu_s / max(1, self.count)

    @property
    def server_us(self) -> float | None:
        return None if self.server_cpu_s is None else 1e6 * self.server_cpu_s / max(1, self.count)

    @property
    def per_server_core(self) -> float | None:
        """Operations a second one core of the server would answer at this CPU per operation."""
        us = self.server_us
        return None if not us else 1e6 / us

    def line(self) -> str:
        server = "-" if self.server_us is None else f"{self.server_us:,.0f}"
        core = "-" if self.per_server_core is None else f"{self.per_server_core:,.0f}"
        return (
            f"| {self.section} | {self.name} | {self.rate:,.0f} | {self.caller_us:,.0f} | {server} | {core} "
            f"| {self.load:.2f} | {self.note} |"
        )


TABLE_HEADER = (
    "| component | run | ops/s | caller CPU µs/op | server CPU µs/op | ops/s per server core | load (1 min) | note |\n"
    "|---|---|---:|---:|---:|---:|---:|---|"
)


def load_average() -> float:
    return os.getloadavg()[0]


def machine() -> str:
    one, five, fifteen = os.getloadavg()
    return (
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}, {os.cpu_count()} cores, "
        f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min)"
    )
