"""CPU per call of the node client (``HttpUpstream.post``) against the constant upstream, in one process.

    python -m bench.node_client [--calls 20000] [--rounds 5] [--inflight 64] [--batch 0]

Every call a replica forwards is one ``post``; this measures that part alone, on uvloop as in a
replica, against ``bench.const_upstream`` in a child process. ``--batch N`` posts an N-item batch of
``getSlot`` instead of one call. Prints each round's µs of this process's CPU per call and calls per
second, then the medians. To compare two commits, run it from each checkout in turn (alternated).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import orjson
import uvloop

from bench._proc import spawn_server
from gateway.node.http import HttpUpstream
from gateway.runtime.ports import free_port


async def one_round(node: HttpUpstream, body: bytes, calls: int, inflight: int) -> tuple[float, float]:
    """(µs of CPU a call, calls a second) of ``calls`` posts, ``inflight`` at a time."""
    left = calls

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await node.post(body, 15.0)

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(inflight)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu / calls * 1e6, calls / wall


async def run(calls: int, rounds: int, inflight: int, batch: int) -> None:
    port = free_port()
    async with spawn_server("upstream", "bench.const_upstream", ["--port", str(port)], port) as upstream:
        node = HttpUpstream(upstream.url)
        one = {"jsonrpc": "2.0", "id": 1, "method": "getSlot"}
        body = orjson.dumps([{**one, "id": i} for i in range(batch)] if batch else one)
        await one_round(node, body, min(calls, 2_000), inflight)  # connections opened, code warm
        cpus, rates = [], []
        for n in range(rounds):
            cpu, rate = await one_round(node, body, calls, inflight)
            cpus.append(cpu)
            rates.append(rate)
            print(f"round {n + 1}: {cpu:7.1f} µs CPU a call  {rate:9,.0f} calls/s")
        await node.close()
    what = f"{batch}-item batch" if batch else "getSlot"
    print(
        f"median of {rounds} rounds, {what}, {inflight} in flight: {statistics.median(cpus):.1f} µs CPU a call, "
        f"{statistics.median(rates):,.0f} calls/s"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--inflight", type=int, default=64)
    parser.add_argument("--batch", type=int, default=0, help="items of a batch body (0: one call)")
    args = parser.parse_args(argv)
    uvloop.run(run(args.calls, args.rounds, args.inflight, args.batch))


if __name__ == "__main__":
    main()
