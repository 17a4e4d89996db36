"""Who runs a replica's races: the send-racer actors (``gateway up``), or the replica itself.

A race lasts up to 30 slots; it runs in a send-racer actor so that it outlives neither more nor less
than it should: any replica hands work to the pool, a racer that crashes takes its races with it,
and their held charges are settled by the reconciler (the hold is durable before the broadcast).
Without actors (tests, ``serve run`` alone) :class:`LocalRacers` runs races in the replica.

The racer in one place: its actor class (:mod:`gateway.sending.racer_actor`), the pool's names
(:func:`send_racer_names`) and how a replica hands races to the pool (:class:`PooledRacers`) are here;
only what needs Ray, starting the actors and finding one by name, is in ``actors/send_racers.py`` (Ray
is imported only there and in the runtime).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Any, Protocol

from gateway.core.transactions import WireTx
from gateway.node.http import Upstream
from gateway.node.pool import NodePool
from gateway.sending.block_engine import BlockEngine
from gateway.sending.legs import LOCAL_RPC, RELAY, TPU_QUIC, Leg, LocalRpcLeg, RelayLeg, TpuQuicLeg
from gateway.sending.race import Racer, RaceResult
from gateway.sending.settings import SendingSettings

log = logging.getLogger(__name__)


class Racers(Protocol):
    async def race(self, tx: WireTx) -> RaceResult: ...

    async def close(self) -> None: ...


class RaceLost(Exception):
    """The racer running a send went away; the send's outcome is unknown until reconciled."""


def send_racer_names(count: int) -> list[str]:
    """The names of the pool's send-racer actors (replicas find them by name)."""
    return [f"send-racer-{n}" for n in range(count)]


class RacerHandle(Protocol):
    """One racer of the pool as a replica reaches it."""

    async def race(self, encoded: str) -> dict[str, Any]:
        """Race one signed transaction (base64); its :class:`RaceResult` as JSON. Raises :class:`RaceLost`
        when the racer fails during the race."""
        ...


class PooledRacers:
    """Races handed to the send-racer actors: how a replica reaches the pool the app's ``Service``
    deployment started.

    Round robin over the named actors. A racer that cannot be found (not started, being restarted) is
    skipped; with none reachable the race runs in the replica (:class:`LocalRacers`), since nothing has
    been sent yet. A racer that fails during the race raises :class:`RaceLost`: the transaction may
    have left, so the caller answers ``unknown`` and the reconciler settles the held charge. ``find``
    looks a racer up by name (None: not running): Ray's lookup, given by ``actors/send_racers.py``."""

    def __init__(self, settings: SendingSettings, find: Callable[[str], RacerHandle | None]) -> None:
        self.settings = settings
        self.names = send_racer_names(settings.send_racers)
        self._find = find
        self._turn = itertools.cycle(range(max(1, len(self.names))))
        self._local: LocalRacers | None = None

    def _handle(self) -> RacerHandle | None:
        for _ in self.names:
            name = self.names[next(self._turn)]
            handle = self._find(name)
            if handle is not None:
                return handle
            log.warning("send racer %s is not running; trying the next", name)
        return None

    async def race(self, tx: WireTx) -> RaceResult:
        handle = self._handle()
        if handle is None:
            if self._local is None:
                self._local = LocalRacers(self.settings)
            return await self._local.race(tx)
        return RaceResult.from_json(await handle.race(tx.base64))

    async def close(self) -> None:
        if self._local is not None:
            await self._local.close()


def build_legs(settings: SendingSettings, node: Upstream, engine: BlockEngine | None) -> list[Leg]:
    legs: list[Leg] = []
    for name in settings.send_legs:
        if name == LOCAL_RPC:
            legs.append(LocalRpcLeg(node))
        elif name == RELAY and engine is not None:
            legs.append(RelayLeg(engine))
        elif name == TPU_QUIC:
            legs.append(TpuQuicLeg(node))
    return legs


class LocalRacers:
    """Races in this process, with its own connections to the node and the block engine."""

    def __init__(self, settings: SendingSettings, poll_interval_s: float | None = None) -> None:
        self.node = NodePool.from_settings(settings, connections=32)  # a send goes to every node that serves sends
        self.engine = BlockEngine.from_settings(settings)
        interval = poll_interval_s if poll_interval_s is not None else settings.devnode_slot_ms / 2000
        self.racer = Racer(self.node, build_legs(settings, self.node, self.engine), interval)

    async def race(self, tx: WireTx) -> RaceResult:
        return await self.racer.race(tx)

    async def close(self) -> None:
        for leg in self.racer.legs:
            await leg.close()
        await self.node.close()
        if self.engine is not None:
            await self.engine.close()
