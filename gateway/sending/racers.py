"""Who runs a replica's races: the send-racer actors (``gateway up``), or the replica itself.

A race lasts up to 30 slots; it runs in a send-racer actor so that it outlives neither more nor less
than it should: any replica hands work to the pool, a racer that crashes takes its races with it,
and their held charges are settled by the reconciler (the hold is durable before the broadcast).
Without actors (tests, ``serve run`` alone) :class:`LocalRacers` runs races in the replica.
"""

from __future__ import annotations

from typing import Protocol

from gateway.core.transactions import WireTx
from gateway.node.http import Upstream
from gateway.node.pool import NodePool
from gateway.sending.block_engine import BlockEngine
from gateway.sending.legs import LOCAL_RPC, RELAY, TPU_QUIC, Leg, LocalRpcLeg, RelayLeg, TpuQuicLeg
from gateway.sending.race import Racer, RaceResult
from gateway.sending.settings import SendingSettings


class Racers(Protocol):
    async def race(self, tx: WireTx) -> RaceResult: ...

    async def close(self) -> None: ...


class RaceLost(Exception):
    """The racer running a send went away; the send's outcome is unknown until reconciled."""


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
