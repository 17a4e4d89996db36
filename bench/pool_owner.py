"""The pool owner's CPU at rest: what probing ``--nodes`` nodes costs its process, with no calls.

    python -m bench.pool_owner [--nodes 3] [--seconds 20]

One devnode in its own process stands for every node (``--nodes`` names for it, as bench.pool_exchange
does); :class:`gateway.node.health.PoolHealth` runs on this process's loop with the default health settings
(the ``upstream-health`` actor runs the same). After 3 s (the first probes), this process's CPU over
``--seconds`` is printed as a share of a core: the probes, their judging and the loop-lag timer
(gateway/node/probe.py), nothing else. Compare one revision with another alternately (bench/README.md).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from gateway.core.upstreams import UpstreamNode
from gateway.node.health import HealthSettings, PoolHealth
from gateway.runtime.devnode_proc import DevnodeProcess

SETTLE_S = 3.0


async def owner_cpu(rpc_url: str, nodes: int, seconds: float) -> float:
    """Seconds of this process's CPU a second while a pool owner probes ``nodes`` names of ``rpc_url``."""
    owner = PoolHealth([UpstreamNode(name=f"node-{i}", rpc_url=rpc_url) for i in range(nodes)], HealthSettings())
    stop = asyncio.Event()
    task = asyncio.create_task(owner.run(stop))
    try:
        await asyncio.sleep(SETTLE_S)
        before = time.process_time()
        await asyncio.sleep(seconds)
        return (time.process_time() - before) / seconds
    finally:
        stop.set()
        await task


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pool_owner", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3, help="names of the one devnode in the pool (default 3)")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds (default 20)")
    args = parser.parse_args(argv)
    node = DevnodeProcess(Path(tempfile.mkdtemp(prefix="pool-owner-")) / "devnode", 0, 0, 400, 54_000, False)
    node.start(60.0)
    try:
        share = asyncio.run(owner_cpu(node.rpc_url, args.nodes, args.seconds))
    finally:
        node.stop()
    print(f"pool owner, {args.nodes} nodes, {args.seconds:g} s at rest: {share * 100:.2f}% of a core")


if __name__ == "__main__":
    main()
