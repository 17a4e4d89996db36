"""Slice exchanges one account-shard actor answers a second, and what each costs on both sides.

The shard is the real actor (``start_account_shards``: the class, options and metrics wrapper ``gateway
up`` uses) on a Ray instance of this process's own. Three ways of loading it:

- ``book``: :class:`ShardBook.exchange` in this process, no actor: the pure book's cost, the floor of
  what an actor call could be brought down to by carrying many accounts per call;
- ``raw``: :meth:`RayShards.exchange` (a replica's client) with 1, 16 and 64 exchanges in flight, over
  many accounts, each a fill (5 tokens, 3 slots) followed by its give-back, as a replica does for an
  account it sees less often than every 0.25 s;
- ``limiters``: 1, 4 and 16 replicas' :class:`SlicedLimiter` in this process, 64 clients calling over
  many accounts (each call a different account, so each asks the shard and later gives back): calls
  admitted a second and exchanges per call, the pattern of 50,000 accounts at 2 requests/s each.

The actor's CPU is read inside it (``__ray_call__``), the caller's is this process's.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
import uuid
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any

import ray

from actors.account_shards import start_account_shards, stop_account_shards
from actors.cluster import NAMESPACE
from actors.shard_client import RayShards
from bench.capacity import Figure, load_average
from gateway.limits.rules import Allowed
from gateway.limits.shards import ShardBook, SliceGrant, SliceRequest, shard_name
from gateway.limits.slices import ShardUnavailable, SlicedLimiter

SECTION = "account shard"
RPS, CONCURRENCY = 50, 32  # the default limits: a slice is 5 tokens, a fill asks 3 slots
ACCOUNTS = 20_000


def _process_cpu(_actor: Any) -> float:
    return time.process_time()


@dataclass
class _Pair:
    """One account as one holder saw it: the lease of its last grant."""

    epoch: str = ""
    lease: int = 0


def fill(pubkey: str, holder: str, pair: _Pair) -> SliceRequest:
    return SliceRequest(pubkey, holder, pair.epoch, pair.lease, RPS, RPS, CONCURRENCY, want_tokens=5, want_slots=3)


def give_back(pubkey: str, holder: str, pair: _Pair) -> SliceRequest:
    """One call's token spent, the other four and the slots returned (the tick after 0.25 s idle)."""
    return SliceRequest(pubkey, holder, pair.epoch, pair.lease, RPS, RPS, CONCURRENCY, spent=1, returned=4)


class Traffic:
    """Fills and give-backs over ``accounts`` accounts and ``holders`` replicas: every other request
    gives back a slice filled ``lag`` requests before (more than are ever in flight), as the tick does
    0.25 s after an account's last call on that replica."""

    def __init__(self, accounts: int, holders: int, lag: int = 256) -> None:
        self.keys = [os.urandom(16).hex() for _ in range(accounts)]
        self.holders = [uuid.uuid4().hex for _ in range(holders)]
        self.lag = lag
        self.pairs: dict[tuple[int, int], _Pair] = {}
        self.held: deque[tuple[int, int]] = deque()
        self._steps = itertools.count()
        self._fills = itertools.count()

    def next_request(self) -> tuple[tuple[int, int], SliceRequest]:
        if next(self._steps) % 2 and len(self.held) > self.lag:
            key = self.held.popleft()
            make = give_back
        else:
            q = next(self._fills)
            key, make = (q % len(self.keys), (q // len(self.keys)) % len(self.holders)), fill
        pair = self.pairs.setdefault(key, _Pair())
        return key, make(self.keys[key[0]], self.holders[key[1]], pair)

    def answered(self, key: tuple[int, int], request: SliceRequest, grant: SliceGrant) -> None:
        pair = self.pairs[key]
        pair.epoch, pair.lease = grant.epoch, grant.lease
        if request.want_tokens > 0:
            self.held.append(key)


def book_figure(seconds: float) -> Figure:
    """The pure book, in this process: exchanges a second and CPU per exchange."""
    book, traffic = ShardBook("bench"), Traffic(ACCOUNTS, 4)
    count, cpu0, start = 0, time.process_time(), time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(1_000):
            key, request = traffic.next_request()
            traffic.answered(key, request, book.exchange(request, time.monotonic()))
        count += 1_000
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu0
    return Figure(SECTION, "ShardBook.exchange in process (no actor)", count, elapsed, cpu, None, load_average())


async def raw_figure(client: RayShards, actor: Any, in_flight: int, seconds: float) -> Figure:
    """Exchanges a second with ``in_flight`` awaited at once from this process, over many accounts."""
    traffic, done = Traffic(ACCOUNTS, 16), [0]

    async def worker(deadline: float) -> None:
        while time.perf_counter() < deadline:
            key, request = traffic.next_request()
            traffic.answered(key, request, await client.exchange(0, request))
            done[0] += 1

    actor0, cpu0, start = await actor.__ray_call__.remote(_process_cpu), time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker(start + seconds) for _ in range(in_flight)))
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu0
    actor_cpu = await actor.__ray_call__.remote(_process_cpu) - actor0
    name = f"RayShards.exchange, {in_flight} in flight"
    return Figure(SECTION, name, done[0], elapsed, cpu, actor_cpu, load_average())


async def _call(limiter: SlicedLimiter, pubkey: str) -> str:
    """One one-item call as the metering stage makes it: ready, a slot, a rate unit, the release;
    ``ok``, ``refused`` (429) or ``unavailable`` (503: the shard did not answer within 0.5 s)."""
    now = time.monotonic()
    pending = limiter.ready(pubkey, 1, now, rps=RPS, concurrency=CONCURRENCY)
    if pending is not None:
        try:
            await pending
        except ShardUnavailable:
            return "unavailable"
        now = time.monotonic()
    if limiter.acquire(pubkey, now, rps=RPS, concurrency=CONCURRENCY) is not None:
        return "refused"
    try:
        return "ok" if isinstance(limiter.take(pubkey, now, time.time(), RPS), Allowed) else "refused"
    finally:
        limiter.release(pubkey)


async def limiters_figure(actor: Any, replicas: int, seconds: float, clients: int = 64) -> Figure:
    """Calls admitted a second through ``replicas`` limiters, each call a different account; the CPU
    per call on both sides includes the give-backs that follow the calls (0.25 s idle, then a tick).
    Calls refused 503 (an exchange that took over 0.5 s: the shard's queue) are counted in the note."""
    limiters = [SlicedLimiter(RayShards(1), RPS, CONCURRENCY) for _ in range(replicas)]
    keys = [os.urandom(16).hex() for _ in range(ACCOUNTS)]
    order, outcomes = itertools.count(), Counter[str]()

    async def client(deadline: float) -> None:
        while time.perf_counter() < deadline:
            n = next(order)
            outcome = await _call(limiters[n % replicas], keys[n % len(keys)])
            outcomes[outcome] += 1
            if outcome == "unavailable":
                await asyncio.sleep(0.01)  # a refused client backs off a little

    try:
        actor0, cpu0, start = await actor.__ray_call__.remote(_process_cpu), time.process_time(), time.perf_counter()
        await asyncio.gather(*(client(start + seconds) for _ in range(clients)))
        elapsed = time.perf_counter() - start
        await asyncio.sleep(0.6)  # the give-backs of the last calls
        cpu, actor_cpu = time.process_time() - cpu0, await actor.__ray_call__.remote(_process_cpu) - actor0
        exchanges = sum(r.exchanges for r in limiters)
    finally:
        for r in limiters:
            await r.close()
    admitted = outcomes["ok"]
    note = f"{exchanges / max(1, admitted):.2f} exchanges per call ({exchanges / elapsed:,.0f}/s)"
    if refused := sum(outcomes.values()) - admitted:
        note += f"; {refused:,} calls refused ({', '.join(f'{k} {v:,}' for k, v in outcomes.items() if k != 'ok')})"
    name = f"calls through {replicas} SlicedLimiter(s), {clients} clients, one account per call"
    return Figure(SECTION, name, admitted, elapsed, cpu, actor_cpu, load_average(), note)


async def _measure(seconds: float) -> list[Figure]:
    actor = ray.get_actor(shard_name(0), namespace=NAMESPACE)
    client = RayShards(1)
    figures = []
    for in_flight in (1, 16, 64):
        figures.append(await raw_figure(client, actor, in_flight, seconds))
    for replicas in (1, 4, 16):
        figures.append(await limiters_figure(actor, replicas, seconds))
    return figures


def measure(seconds: float) -> list[Figure]:
    """Every shard figure; needs ``ray.init`` done (the actor is started and stopped here)."""
    figures = [book_figure(min(seconds, 1.0))]
    start_account_shards(1)
    try:
        ray.get(ray.get_actor(shard_name(0), namespace=NAMESPACE).status.remote(), timeout=60)
        figures.extend(asyncio.run(_measure(seconds)))
    finally:
        stop_account_shards(1)
    return figures
