"""Upstream fan-out: JSON-RPC forwards a second one replica's node client sustains, against the constant
upstream (``bench/const_upstream.py``, its own process): the gateway's ``HttpUpstream.post`` (one
shared aiohttp session, as each replica's forwarder sends to the node), ``getSlot``, one at a time
and 64 in flight. The caller's CPU per forward is what the upstream call costs a replica (the
whole metered path is ``python -m bench.metered``); the server's is the constant upstream's, a
stand-in for a node that answers at once (a real node's own capacity is not measured here).
"""

from __future__ import annotations

import asyncio
import time

from bench._proc import process_cpu_s, spawn_server
from bench.capacity import Figure, load_average
from bench.loadgen import DEFAULT_BODY
from gateway.node.http import HttpUpstream
from gateway.runtime.ports import free_port

SECTION = "upstream"


async def _figure(node: HttpUpstream, pid: int, in_flight: int, seconds: float) -> Figure:
    done = [0]

    async def caller(deadline: float) -> None:
        while time.perf_counter() < deadline:
            await node.post(DEFAULT_BODY, 15.0)
            done[0] += 1

    up0, cpu0, start = process_cpu_s([pid]), time.process_time(), time.perf_counter()
    await asyncio.gather(*(caller(start + seconds) for _ in range(in_flight)))
    elapsed, cpu, up = time.perf_counter() - start, time.process_time() - cpu0, process_cpu_s([pid]) - up0
    name = f"HttpUpstream.post getSlot, {in_flight} in flight"
    return Figure(SECTION, name, done[0], elapsed, cpu, up, load_average())


async def measure(seconds: float) -> list[Figure]:
    """Both upstream figures, against a constant upstream started (and stopped) here."""
    port = free_port()
    async with spawn_server("const_upstream", "bench.const_upstream", ["--port", str(port)], port) as upstream:
        node = HttpUpstream(upstream.url)
        try:
            await _figure(node, upstream.pid, 8, 0.5)  # warm: connections open, code paths run once
            return [await _figure(node, upstream.pid, depth, seconds) for depth in (1, 64)]
        finally:
            await node.close()
