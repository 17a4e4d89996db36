"""Races handed to the send-racer actors: how a replica reaches the pool the app's ``Service`` deployment started.

Round robin over the named actors. A racer that cannot be found (not started, being restarted) is
skipped; with none reachable the race runs in the replica (:class:`LocalRacers`), since nothing has
been sent yet. A racer that fails during the race raises :class:`RaceLost`: the transaction may
have left, so the caller answers ``unknown`` and the reconciler settles the held charge.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import ray
from ray.exceptions import RayError

from gateway.core.transactions import WireTx
from gateway.runtime.cluster import NAMESPACE, send_racer_names
from gateway.sending.race import RaceResult
from gateway.sending.racers import LocalRacers, RaceLost
from gateway.settings import Settings

log = logging.getLogger(__name__)


class RayRacers:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.names = send_racer_names(settings.send_racers)
        self._turn = itertools.cycle(range(max(1, len(self.names))))
        self._local: LocalRacers | None = None

    def _handle(self) -> Any | None:
        for _ in self.names:
            name = self.names[next(self._turn)]
            try:
                return ray.get_actor(name, namespace=NAMESPACE)
            except ValueError:
                log.warning("send racer %s is not running; trying the next", name)
        return None

    async def race(self, tx: WireTx) -> RaceResult:
        handle = self._handle()
        if handle is None:
            if self._local is None:
                self._local = LocalRacers(self.settings)
            return await self._local.race(tx)
        try:
            doc = await handle.race.remote(tx.base64)
        except RayError as exc:
            raise RaceLost(f"the send racer failed during the race: {exc}") from exc
        return RaceResult.from_json(doc)

    async def close(self) -> None:
        if self._local is not None:
            await self._local.close()
