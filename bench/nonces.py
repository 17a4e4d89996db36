"""Nonce claims: Redis ``SET NX EX`` (the gateway's NonceStore, on the embedded Redis) against one Ray actor
call per request (what a nonce-set actor would cost), one at a time and with many in flight.

    python -m bench.nonces [--claims 20000] [--rounds 3] [--in-flight 64]

Both from one asyncio process, as a replica would make them. The actor is the account-shard actor (a
plain method that returns at once: the cheapest call any actor could answer), so the actor figure is
an upper bound of what a nonce-set actor could do. Each target keeps its best round's rate, and the
median of its rounds' CPU per claim in this process (what a replica pays, robust to a busy machine). The decision it
informs is in docs/architecture.md (Where state lives).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import ray
import redis.asyncio as aioredis

from gateway.auth.store.nonces import Claim, NonceStore
from gateway.limits.shard_actor import AccountShard
from gateway.limits.shards import SliceRequest
from gateway.runtime.embedded import EmbeddedRedis


async def rate(claim: Callable[[int], Awaitable[object]], claims: int, in_flight: int) -> tuple[float, float]:
    """Claims per second with ``in_flight`` callers, each making its share one after the other, and this
    process's CPU per claim in µs (what a replica pays per claim, whatever else the machine runs)."""
    per = claims // in_flight

    async def caller(base: int) -> None:
        for n in range(per):
            await claim(base + n)

    start, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(caller(i * per) for i in range(in_flight)))
    done = per * in_flight
    return done / (time.perf_counter() - start), (time.process_time() - cpu) / done * 1e6


def redis_claimer(store: NonceStore) -> Callable[[int], Awaitable[object]]:
    """A claim of a fresh nonce per call, as a signed request makes it (also used by bench/capacity)."""
    prefix = os.urandom(8).hex()
    now = int(time.time()) + 60

    async def redis_claim(n: int) -> object:
        outcome = await store.claim(prefix, f"{n}-{time.perf_counter_ns()}", now)
        assert outcome is Claim.ACCEPTED
        return outcome

    return redis_claim


async def measure(redis_url: str, claims: int, rounds: int, in_flight: int) -> dict[str, tuple[float, float]]:
    """Each target's best rate of its rounds, and the median of its rounds' CPU per claim."""
    client = aioredis.from_url(redis_url)
    redis_claim = redis_claimer(NonceStore(client))

    remote_cls: Any = ray.remote(num_cpus=0)(AccountShard)
    actor = remote_cls.remote(0)
    ray.get(actor.status.remote())
    request = SliceRequest(os.urandom(8).hex(), "bench", "", 0, 100, 100, 8)

    async def actor_call(n: int) -> object:
        return await actor.exchange.remote(request)

    targets = {"redis SET NX EX": redis_claim, "actor call": actor_call}
    best: dict[str, float] = {}
    cpu: dict[str, list[float]] = {}
    try:
        for _ in range(rounds):
            for name, claim in targets.items():
                for depth in (1, in_flight):
                    key = f"{name}, {depth} in flight"
                    count = claims if depth > 1 else claims // 4
                    per_s, cpu_us = await rate(claim, count, depth)
                    best[key] = max(best.get(key, 0.0), per_s)
                    cpu.setdefault(key, []).append(cpu_us)
    finally:
        await client.aclose()
        ray.kill(actor)
    return {key: (per_s, statistics.median(cpu[key])) for key, per_s in best.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.nonces", description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--in-flight", type=int, default=64)
    args = parser.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="gw-nonces-"))
    redis = EmbeddedRedis(home)
    ray.init(address="local", include_dashboard=False, _node_ip_address="127.0.0.1", num_cpus=1)
    try:
        best = asyncio.run(measure(redis.start(), args.claims, args.rounds, args.in_flight))
    finally:
        ray.shutdown()
        redis.stop()
        shutil.rmtree(home, ignore_errors=True)
    for name, (per_s, cpu_us) in best.items():
        print(
            f"{name:<32} {per_s:10,.0f} /s   {1e6 / per_s:8.1f} µs of wall time per claim"
            f"   {cpu_us:6.1f} µs of this process's CPU per claim (median of rounds)"
        )


if __name__ == "__main__":
    main()
