"""The set of (pubkey, nonce) pairs already accepted, shared by every replica through Redis.

``SET nonce:{pubkey}:{nonce} 1 NX EX 180``: one atomic round trip that both checks and records, so
two replicas racing on the same replay cannot both win. Redis (append-only file) keeps the set across
gateway restarts.

Why 180 s: a signed request passes the timestamp check while server time is within ±60 s of its
timestamp, i.e. during a 120 s span. A nonce first accepted at the start of that span must still be
remembered at its end: 120 s. Another 60 s covers clock skew between replicas (each checks the window
against its own clock). After that the pair may be forgotten: a replay of the old request would fail
the timestamp window anyway, so the set stays bounded to about three minutes of traffic.

A crash can lose the last second of writes (``appendfsync everysec``), and a failover can lose what
the replica had not yet received, so after such a restart a nonce accepted just before it may be
forgotten while its request is still inside the timestamp window. What closes that window: the
store notices when the Redis instance it talks to changes (``INFO server``: its ``run_id`` and
uptime, read again whenever the client opens a new connection, which it must after a restart), and
then refuses signatures whose timestamp is not later than the new instance's start, for as long as
they are inside the window. A request refused so was signed before the restart; its client signs
again with the current time. Left open: the whole machine crashing and the stack coming back within
a minute (the instance a replica first meets is not treated as restarted, so that clients whose
clocks lag are not refused at every start).

Claims made in the same event-loop pass go to Redis as one command: a script that runs each claim's
``SET NX EX`` in turn and answers each on its own (1 recorded now, 0 accepted before), so a replay within
the pass is refused as across passes. redis-py has no automatic pipelining, and in a pipeline it still packs
and parses each command on its own; one script call packs the keys as one command's arguments and parses one
array: with 64 claims in flight, 11-14 µs of this process's CPU a claim against 35-42 in a pipeline
(bench/README.md, ``bench.nonces``). Its writes are all or none: a full Redis (``noeviction``) refuses a
script's first write, so a refused batch recorded nothing and each of its requests gets 503.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from enum import StrEnum

import redis.asyncio as aioredis

from gateway.storage.errors import StoreUnavailable, redis_errors

NONCE_TTL_S = 180
WHAT = "the nonce store"
#: KEYS: the pass's nonce keys; ARGV[1]: their TTL. Each key's answer: 1 recorded now, 0 recorded before.
CLAIM_ALL = """
local created = {}
for i, key in ipairs(KEYS) do
  created[i] = redis.call('SET', key, '1', 'NX', 'EX', ARGV[1]) and 1 or 0
end
return created
"""


def nonce_key(pubkey: str, nonce: str) -> str:
    """The Redis key that records the pair."""
    return f"nonce:{pubkey}:{nonce}"


class Claim(StrEnum):
    ACCEPTED = "accepted"
    REPLAYED = "replayed"  # the pair was accepted before
    BEFORE_RESTART = "before_restart"  # signed before the store last started: its nonce may be lost


class NonceStore:
    def __init__(
        self,
        redis: aioredis.Redis,
        connects: Callable[[], int] = lambda: 0,
        ttl_s: int = NONCE_TTL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``connects`` counts the connections the Redis client has opened (see
        :class:`gateway.storage.connections.Connections`); a new one means Redis may have restarted."""
        self._redis = redis
        self._connects = connects
        self._clock = clock
        self.ttl_s = ttl_s
        self._checked_at_connects = -1
        self._run_id: str | None = None
        self.started_at = 0.0  # wall-clock start of the Redis instance, as far as this replica knows
        self._pending: list[tuple[str, asyncio.Future[bool]]] = []  # claims of this loop pass, not yet sent
        self._claim_all = redis.register_script(CLAIM_ALL)
        self._writes: set[asyncio.Task[None]] = set()

    async def claim(self, pubkey: str, nonce: str, timestamp: int) -> Claim:
        """Record the pair signed at ``timestamp``.

        Fails closed: if Redis cannot be reached this raises ``StoreUnavailable`` (the request gets 503),
        because accepting it unrecorded would open a replay window.
        """
        if self._connects() != self._checked_at_connects:
            await self._learn_start()
        created = await self._record(nonce_key(pubkey, nonce))
        if not created:
            return Claim.REPLAYED
        return Claim.ACCEPTED if timestamp > self.started_at else Claim.BEFORE_RESTART

    def _record(self, key: str) -> asyncio.Future[bool]:
        """``SET key NX EX``, sent with the other claims of this loop pass; whether it was created."""
        loop = asyncio.get_running_loop()
        created: asyncio.Future[bool] = loop.create_future()
        self._pending.append((key, created))
        if len(self._pending) == 1:
            loop.call_soon(self._send)
        return created

    def _send(self) -> None:
        batch, self._pending = self._pending, []
        task = asyncio.get_running_loop().create_task(self._write(batch))
        self._writes.add(task)  # kept until done: the loop holds tasks weakly
        task.add_done_callback(self._writes.discard)

    async def _write(self, batch: list[tuple[str, asyncio.Future[bool]]]) -> None:
        """One command for the batch's claims; each claim gets its answer, or ``StoreUnavailable`` when the
        command failed. A claimer gone away leaves its answer unread."""
        try:
            async with redis_errors(WHAT):
                created_now = await self._set_all([key for key, _ in batch])
        except BaseException as exc:
            for _, created in batch:
                if not created.done():
                    created.set_exception(_unavailable(exc))
            if not isinstance(exc, Exception):
                raise  # cancelled: the claimers were told
            return
        for (_, created), answer in zip(batch, created_now, strict=True):
            if not created.done():
                created.set_result(answer)

    async def _set_all(self, keys: list[str]) -> list[bool]:
        """Whether each key was recorded now, not before: a lone key's ``SET NX EX``, else :data:`CLAIM_ALL`."""
        if len(keys) == 1:
            return [bool(await self._redis.set(keys[0], b"1", nx=True, ex=self.ttl_s))]
        return [bool(answer) for answer in await self._claim_all(keys=keys, args=[self.ttl_s])]

    async def _learn_start(self) -> None:
        connects = self._connects()
        async with redis_errors(WHAT):
            info = await self._redis.info("server")
        run_id = str(info.get("run_id"))
        if self._run_id is not None and run_id != self._run_id:
            # A second more: uptime is whole seconds, and a request signed in Redis's first second is refused.
            self.started_at = self._clock() - float(info.get("uptime_in_seconds", 0)) - 1.0
        self._run_id = run_id
        self._checked_at_connects = connects


def _unavailable(cause: BaseException) -> StoreUnavailable:
    """A claim's own failure (one exception per claimer: a raise adds to its traceback)."""
    failure = StoreUnavailable(WHAT)
    failure.__cause__ = cause.__cause__ if isinstance(cause, StoreUnavailable) else cause
    return failure
