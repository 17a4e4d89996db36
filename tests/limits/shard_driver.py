"""A Ray driver for tests/limits/test_shard_actors.py: real account-shard actors (as ``gateway up``
starts them) and several replicas' limiters in this one process (a :class:`SlicedLimiter` each, reaching
the actors through :class:`RayShards`, as an ingress replica does). Run in a process of its own, on a
Ray instance of its own (``address="local"``); prints one JSON document of what each scenario saw.

Each call is what the metering stage does for a one-item call: ``ready`` (awaited when it must ask the
shard), a concurrency slot, one rate unit, the release. Times are monotonic seconds from the scenario's
start; the test compares the admitted calls in every window with ``burst + rps * window``.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from typing import Any

import ray

from actors.account_shards import start_account_shards, stop_account_shards
from actors.cluster import NAMESPACE
from actors.shard_client import RayShards
from gateway.limits.rules import Allowed
from gateway.limits.shards import shard_name, shard_of
from gateway.limits.slices import ShardUnavailable, SlicedLimiter

SHARDS = 2
RPS, CONCURRENCY = 100, 8


def pubkey_on(shard: int) -> str:
    while True:
        key = os.urandom(16).hex()
        if shard_of(key, SHARDS) == shard:
            return key


async def call(limiter: SlicedLimiter, pubkey: str, rps: int = RPS, hold_s: float = 0.0) -> str:
    now = time.monotonic()
    pending = limiter.ready(pubkey, 1, now, rps=rps, concurrency=CONCURRENCY)
    if pending is not None:
        try:
            await pending
        except ShardUnavailable:
            return "unavailable"
        now = time.monotonic()
    if limiter.acquire(pubkey, now, rps=rps, concurrency=CONCURRENCY) is not None:
        return "concurrency"
    try:
        if not isinstance(limiter.take(pubkey, now, time.time(), rps), Allowed):
            return "rate"
        if hold_s:
            await asyncio.sleep(hold_s)
        return "ok"
    finally:
        limiter.release(pubkey)


def pick(limiters: list[SlicedLimiter], n: int, spread: str) -> SlicedLimiter:
    if spread == "skewed" and n % 10:  # nine calls in ten through the first replica
        return limiters[0]
    return limiters[n % len(limiters)]


async def rate_run(
    limiters: list[SlicedLimiter], pubkey: str, spread: str, seconds: float, kill_at: float | None = None
) -> dict[str, Any]:
    """One client calling as fast as it can; with ``kill_at``, the account's shard is killed then and
    the run goes on until calls are admitted again after the refusals."""
    start, n, killed, refused_since_kill = time.monotonic(), 0, False, False
    admitted: list[float] = []
    outcomes: list[tuple[float, str]] = []
    while True:
        t = time.monotonic() - start
        if kill_at is not None and not killed and t >= kill_at:
            ray.kill(ray.get_actor(shard_name(shard_of(pubkey, SHARDS)), namespace=NAMESPACE), no_restart=False)
            killed = True
            outcomes.append((t, "killed"))
        if t >= seconds and (kill_at is None or (refused_since_kill and outcomes[-1][1] == "ok") or t > 60):
            break
        outcome = await call(pick(limiters, n, spread), pubkey)
        n += 1
        t = time.monotonic() - start
        if outcome == "ok":
            admitted.append(t)
        if killed and outcome == "unavailable":
            refused_since_kill = True
        if outcome != "ok" or not outcomes or outcomes[-1][1] != "ok":
            outcomes.append((t, outcome))
        elif outcome == "ok":
            outcomes[-1] = (t, "ok")
        await asyncio.sleep(0 if outcome == "ok" else 0.002)  # a refused client backs off a little
    return {"admitted": admitted, "duration": time.monotonic() - start, "outcomes": outcomes, "calls": n}


async def many_callers(limiters: list[SlicedLimiter], pubkey: str, callers: int, seconds: float) -> dict[str, Any]:
    """``callers`` clients at once, each call held a few milliseconds, spread at random over the replicas."""
    start = time.monotonic()
    inflight, most, admitted = 0, 0, []

    async def client(seed: int) -> None:
        nonlocal inflight, most
        rnd = random.Random(seed)
        while time.monotonic() - start < seconds:
            limiter = rnd.choice(limiters)
            now = time.monotonic()
            pending = limiter.ready(pubkey, 1, now, rps=400, concurrency=CONCURRENCY)
            if pending is not None:
                await pending
                now = time.monotonic()
            if limiter.acquire(pubkey, now, rps=400, concurrency=CONCURRENCY) is not None:
                await asyncio.sleep(0.002)
                continue
            inflight += 1
            most = max(most, inflight)
            try:
                if isinstance(limiter.take(pubkey, now, time.time(), 400), Allowed):
                    admitted.append(time.monotonic() - start)
                await asyncio.sleep(rnd.uniform(0.0, 0.005))
            finally:
                inflight -= 1
                limiter.release(pubkey)

    await asyncio.gather(*(client(n) for n in range(callers)))
    return {"most_in_flight": most, "admitted": sorted(admitted), "duration": time.monotonic() - start}


async def burst(limiters: list[SlicedLimiter], pubkey: str, calls: int) -> dict[str, Any]:
    """``calls`` calls at once on each replica of an account none of them has asked about yet."""
    start = time.monotonic()
    outcomes = await asyncio.gather(*(call(r, pubkey) for r in limiters for _ in range(calls)))
    return {"ok": outcomes.count("ok"), "outcomes": sorted(set(outcomes)), "duration": time.monotonic() - start}


async def hold(limiter: SlicedLimiter, pubkey: str, slots: int) -> int:
    """Take up to ``slots`` slots on one replica and keep them; how many were taken."""
    taken = 0
    for _ in range(slots):
        pending = limiter.ready(pubkey, 1, time.monotonic(), rps=RPS, concurrency=CONCURRENCY)
        if pending is not None:
            await pending
        taken += limiter.acquire(pubkey, time.monotonic(), rps=RPS, concurrency=CONCURRENCY) is None
    return taken


async def one_slot(limiter: SlicedLimiter, pubkey: str) -> str:
    """Try one slot and give it straight back."""
    now = time.monotonic()
    pending = limiter.ready(pubkey, 1, now, rps=RPS, concurrency=CONCURRENCY)
    if pending is not None:
        try:
            await pending
        except ShardUnavailable:
            return "unavailable"
    if limiter.acquire(pubkey, time.monotonic(), rps=RPS, concurrency=CONCURRENCY) is not None:
        return "concurrency"
    limiter.release(pubkey)
    return "ok"


async def concurrency_scenarios(limiters: list[SlicedLimiter]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    one = os.urandom(16).hex()
    out["one_replica_holds"] = await hold(limiters[0], one, CONCURRENCY + 2)
    out["one_replica_others"] = [await one_slot(r, one) for r in limiters[1:]]
    for _ in range(CONCURRENCY):
        limiters[0].release(one)
    spread = os.urandom(16).hex()
    out["spread_holds"] = sum([await hold(r, spread, 1) for _ in range(2) for r in limiters])
    out["spread_more"] = [await one_slot(r, spread) for r in limiters]
    for r in limiters:
        for _ in range(2):
            r.release(spread)
    out["many"] = await many_callers(limiters, os.urandom(16).hex(), 40, 2.0)
    return out


async def kill_with_slots_held(limiters: list[SlicedLimiter]) -> dict[str, Any]:
    """Replica 0 holds every slot of an account when its shard is killed: once the shard is back (and past
    its young period) replica 1 still gets none, until replica 0 lets them go."""
    shard = 1
    pubkey = pubkey_on(shard)
    held = await hold(limiters[0], pubkey, CONCURRENCY)
    ray.kill(ray.get_actor(shard_name(shard), namespace=NAMESPACE), no_restart=False)
    seen: list[str] = []
    start = time.monotonic()
    while time.monotonic() - start < 60:
        await asyncio.sleep(0.1)
        try:
            status = await ray.get_actor(shard_name(shard), namespace=NAMESPACE).status.remote()
        except Exception:
            continue
        if not status["young"] and time.monotonic() - start > 1.5:
            break
    for _ in range(10):  # the shard is back and no longer young: replica 1 asks, for a second
        seen.append(await one_slot(limiters[1], pubkey))
        await asyncio.sleep(0.1)
    for _ in range(held):
        limiters[0].release(pubkey)
    after = "never"
    for _ in range(50):
        await asyncio.sleep(0.1)
        if await one_slot(limiters[1], pubkey) == "ok":
            after = "ok"
            break
    return {"held": held, "while_held": seen, "after_release": after}


async def scenarios() -> dict[str, Any]:
    results: dict[str, Any] = {"rps": RPS, "concurrency": CONCURRENCY}
    limiters = [SlicedLimiter(RayShards(SHARDS), RPS, CONCURRENCY) for _ in range(4)]
    try:
        for replicas in (1, 2, 4):
            for spread in ("even", "skewed"):
                key = f"rate-{replicas}-{spread}"
                results[key] = await rate_run(limiters[:replicas], os.urandom(16).hex(), spread, 1.5)
        results["burst-1"] = await burst(limiters[:1], os.urandom(16).hex(), 2 * RPS)
        results["burst-4"] = await burst(limiters, os.urandom(16).hex(), RPS)
        results["concurrency"] = await concurrency_scenarios(limiters)
        results["kill"] = await rate_run(limiters[:2], pubkey_on(0), "even", 3.0, kill_at=1.0)
        results["kill_slots"] = await kill_with_slots_held(limiters)
        results["exchanges"] = sum(r.exchanges for r in limiters)
    finally:
        for r in limiters:
            await r.close()
    return results


def main() -> None:
    ray.init(address="local", namespace=NAMESPACE, include_dashboard=False, _node_ip_address="127.0.0.1", num_cpus=2)
    try:
        start_account_shards(SHARDS)
        for n in range(SHARDS):  # both answer before the replicas start
            ray.get(ray.get_actor(shard_name(n), namespace=NAMESPACE).status.remote(), timeout=60)
        print(json.dumps(asyncio.run(scenarios())), flush=True)
    finally:
        stop_account_shards(SHARDS)
        ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())
