"""Nonce claims a second on the embedded Redis (``SET NX EX`` through the gateway's ``NonceStore``, the
claim of ``bench/nonces.py``), and session-token lookups (``GETEX`` through ``SessionStore.resolve``):
the two Redis commands a request can make on the hot path (a signed request claims its nonce, a
session-token request slides its token; an API-key request makes none). One at a time and 64 in
flight from this process; Redis's CPU is its server process's (one thread serves every command).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable

import redis.asyncio as aioredis

from bench._proc import process_cpu_s
from bench.capacity import Figure, load_average
from bench.nonces import rate, redis_claimer
from gateway.auth.store.nonces import NonceStore
from gateway.auth.store.sessions import SessionStore

SECTION = "Redis"
SESSIONS = 1_000


async def _figure(name: str, pid: int, claim: Callable[[int], Awaitable[object]], count: int, depth: int) -> Figure:
    redis0, cpu0, start = process_cpu_s([pid]), time.process_time(), time.perf_counter()
    await rate(claim, count, depth)  # count // depth calls by each of depth callers
    elapsed, cpu, server = time.perf_counter() - start, time.process_time() - cpu0, process_cpu_s([pid]) - redis0
    return Figure(SECTION, f"{name}, {depth} in flight", count // depth * depth, elapsed, cpu, server, load_average())


async def session_lookup(client: aioredis.Redis) -> Callable[[int], Awaitable[object]]:
    """A lookup of one of ``SESSIONS`` live session tokens per call, in turn."""
    store = SessionStore(client)
    tokens = [await store.issue_token(f"bench-{n}") for n in range(SESSIONS)]
    turn = itertools.cycle(tokens)

    async def lookup(_n: int) -> object:
        pubkey = await store.resolve(next(turn))
        assert pubkey is not None
        return pubkey

    return lookup


async def measure(redis_url: str, pid: int, seconds: float) -> list[Figure]:
    """Every Redis figure, against the server of ``redis_url`` whose process is ``pid``."""
    client = aioredis.from_url(redis_url)
    try:
        claim, lookup = redis_claimer(NonceStore(client)), await session_lookup(client)
        figures = []
        for name, call in (("nonce claim (SET NX EX)", claim), ("session token lookup (GETEX)", lookup)):
            for depth, per_s in ((1, 10_000), (64, 15_000)):  # about `seconds` each on this machine
                figures.append(await _figure(name, pid, call, int(per_s * seconds), depth))
        return figures
    finally:
        await client.aclose()
