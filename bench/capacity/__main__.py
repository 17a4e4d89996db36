"""`python -m bench.capacity`: each shared component's capacity, then the model of docs/scaling.md.

    python -m bench.capacity [--seconds 3] [--only shards,ledger,redis,upstream]

Sections, each in this one process, one after the other (about 90 s in all at 3 s a run):
``shards`` (bench/capacity/shards.py: a real account-shard actor on a Ray instance of its own),
``ledger`` (bench/capacity/ledger.py: lease and settle on the embedded PostgreSQL), ``redis``
(bench/capacity/redis_ops.py: nonce claims and session lookups on the embedded Redis) and ``upstream``
(bench/capacity/upstream.py: the node client against the constant upstream). With every section run,
the model (bench/capacity/model.py) is printed from the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

import ray
import uvloop

from actors.cluster import NAMESPACE
from bench.capacity import TABLE_HEADER, Figure, machine, model
from bench.inprocess import embedded_stores

SECTIONS = ("shards", "ledger", "redis", "upstream")
T = TypeVar("T")


def on_uvloop(coro: Coroutine[Any, Any, T]) -> T:
    """Run as a replica's event loop does (uvloop)."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


def shard_figures(seconds: float) -> list[Figure]:
    from bench.capacity import shards

    ray.init(address="local", namespace=NAMESPACE, include_dashboard=False, _node_ip_address="127.0.0.1", num_cpus=2)
    try:
        return shards.measure(seconds)
    finally:
        ray.shutdown()


def store_figures(sections: set[str], seconds: float) -> tuple[list[Figure], list[str]]:
    from bench.capacity import ledger, redis_ops

    figures: list[Figure] = []
    notes: list[str] = []
    with embedded_stores("bench-capacity-") as stores:
        if "ledger" in sections:
            found, note = on_uvloop(ledger.measure(stores.database_url, stores.home / "postgres", seconds))
            figures += found
            notes.append(note)
        if "redis" in sections:
            pid = int((stores.home / "redis" / "redis.pid").read_text().strip())
            figures += on_uvloop(redis_ops.measure(stores.redis_url, pid, seconds))
    return figures, notes


def pick(figures: list[Figure], section: str, name: str) -> Figure:
    return next(f for f in figures if f.section == section and f.name.startswith(name))


def costs(figures: list[Figure]) -> model.Costs:
    """The model's inputs: each operation at the highest concurrency measured (the component busiest)."""
    exchange = pick(figures, "account shard", "RayShards.exchange, 64")
    lease = pick(figures, "PostgreSQL ledger", "lease grant, 16")
    settle = pick(figures, "PostgreSQL ledger", "settle of 2 usage rows, 16")
    settle10 = pick(figures, "PostgreSQL ledger", "settle of 10 usage rows, 16")
    release = pick(figures, "PostgreSQL ledger", "settle releasing")
    claim = pick(figures, "Redis", "nonce claim (SET NX EX), 64")
    lookup = pick(figures, "Redis", "session token lookup (GETEX), 64")
    return model.Costs(
        exchange_us=exchange.server_us or 0.0,
        exchange_caller_us=exchange.caller_us,
        lease_us=lease.server_us or 0.0,
        lease_caller_us=lease.caller_us,
        settle_us=settle.server_us or 0.0,
        settle_caller_us=settle.caller_us,
        settle10_us=settle10.server_us or 0.0,
        settle10_caller_us=settle10.caller_us,
        release_us=release.server_us or 0.0,
        release_caller_us=release.caller_us,
        claim_us=claim.server_us or 0.0,
        lookup_us=lookup.server_us or 0.0,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.capacity", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per run (default 3)")
    parser.add_argument("--only", default=",".join(SECTIONS), help="sections to run (default all)")
    args = parser.parse_args(argv)
    sections = {s.strip() for s in args.only.split(",") if s.strip()}
    if unknown := sections - set(SECTIONS):
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    print(f"python -m bench.capacity {' '.join(argv if argv is not None else sys.argv[1:])}".rstrip())
    print(f"start: {machine()}", flush=True)
    figures: list[Figure] = []
    notes: list[str] = []
    if "shards" in sections:
        figures += shard_figures(args.seconds)
    if sections & {"ledger", "redis"}:
        found, notes = store_figures(sections, args.seconds)
        figures += found
    if "upstream" in sections:
        from bench.capacity import upstream

        figures += on_uvloop(upstream.measure(args.seconds))
    print(f"end: {machine()}")
    print("\n".join(notes))
    print()
    print(TABLE_HEADER)
    print("\n".join(f.line() for f in figures))
    if sections == set(SECTIONS):
        print()
        print(model.report(model.Workload(), costs(figures)))


if __name__ == "__main__":
    main()
