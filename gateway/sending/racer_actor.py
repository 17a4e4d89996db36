"""The send-racer actor: races ``sendAndConfirm`` transactions for any replica.

A plain class around :class:`gateway.sending.racers.LocalRacers`, testable without Ray;
:mod:`actors` starts a pool of them as named, restarting Ray actors, and
:class:`gateway.sending.racers.PooledRacers` hands each race to one. Its methods are coroutines, so Ray
runs it as an async actor: one racer runs many races at once, each mostly waiting on the node.

A racer that dies takes its races with it; the replica's call answers ``unknown`` and the held
charge, written before the broadcast, is settled by the reconciler (:mod:`gateway.sending.reconciler_actor`).
"""

from __future__ import annotations

from typing import Any

from gateway.core.transactions import decode_transaction
from gateway.sending.racers import LocalRacers
from gateway.sending.settings import SendingSettings


class SendRacerActor:
    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = SendingSettings.model_validate(settings)
        self.racers: LocalRacers | None = None  # built on the actor's event loop, at the first race
        self.races = 0

    async def race(self, encoded: str) -> dict[str, Any]:
        """Race one signed transaction (base64, already verified by the replica); the result as JSON."""
        tx = decode_transaction(encoded, "base64")
        if isinstance(tx, str):
            raise ValueError(f"not a signed transaction: {tx}")
        if self.racers is None:
            self.racers = LocalRacers(self.settings)
        self.races += 1
        result = await self.racers.race(tx)
        return result.to_json()

    async def status(self) -> dict[str, Any]:
        legs = [leg.name for leg in self.racers.racer.legs] if self.racers is not None else []
        return {"races": self.races, "legs": legs}

    async def shutdown(self) -> None:
        if self.racers is not None:
            await self.racers.close()
            self.racers = None
