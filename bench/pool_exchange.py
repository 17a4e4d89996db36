"""What reading the pool's health costs each process: its exchange with the ``upstream-health`` actor (its
tallies of three nodes sent, the pool's view back), in CPU of the calling process, as each replica and
actor does every 0.25 s.

    python -m bench.pool_exchange [--exchanges 400] [--rounds 5]

A local Ray with the actor (gateway/upstreams/health_actor.py) probing a pool of three nodes (three names for
one devnode in this process); the calls go through the replicas' own client (actors/pool_health.py).
Each round times ``--exchanges`` back-to-back exchanges that take the whole view each time (as a process
whose view is one judgement old does); the figure is the median of the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from devnode.config import DevnodeConfig
from devnode.node import Devnode
from gateway.app.settings import Settings
from gateway.base.keys import service_key_addresses
from gateway.core.node_health import Tally
from gateway.node.health import HealthSettings


async def measure(exchanges: int, rounds: int) -> list[float]:
    from actors.pool_health import ClusterHealth
    from actors.upstream_health import start_upstream_health

    home = Path(tempfile.mkdtemp(prefix="gw-exchange-"))
    node = Devnode(DevnodeConfig(data_dir=home / "devnode", rpc_port=0, ws_port=0))
    await node.start()
    try:
        nodes = [{"name": f"node-{i}", "rpc_url": node.rpc_url} for i in range(1, 4)]
        settings = Settings(**service_key_addresses(home), home=home, upstreams=nodes)
        start_upstream_health(settings.model_dump(mode="json"))
        source = ClusterHealth(settings.pool_nodes(), HealthSettings())
        report = {}
        for n in nodes:
            tally = Tally()
            for _ in range(50):  # a quarter second of a replica's calls to a node
                tally.record(0.002)
            report[n["name"]] = tally
        for _ in range(100):  # the actor's first judgement
            first = await source.exchange(report, -1)
            if first is not None and first.nodes:
                break
            await asyncio.sleep(0.1)
        figures = []
        for _ in range(rounds):
            started = time.process_time()
            for _ in range(exchanges):
                await source.exchange(report, -1)  # -1: the whole view back each time
            figures.append((time.process_time() - started) / exchanges * 1e6)
        return figures
    finally:
        await node.stop()
        shutil.rmtree(home, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pool_exchange", description=__doc__.splitlines()[0])
    parser.add_argument("--exchanges", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    import ray

    ray.init(
        address="local",
        include_dashboard=False,
        logging_level=logging.ERROR,
        _node_ip_address="127.0.0.1",
        namespace="gateway",
    )
    try:
        figures = asyncio.run(measure(args.exchanges, args.rounds))
    finally:
        ray.shutdown()
    median = statistics.median(figures)
    rounds = ", ".join(f"{f:.0f}" for f in figures)
    print(f"exchange: {median:.0f} µs of the process's CPU (median of {args.rounds} rounds: {rounds});")
    print(f"at 4 a second: {4 * median / 1000:.1f} ms of CPU a second")


if __name__ == "__main__":
    main()
