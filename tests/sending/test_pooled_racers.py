"""How a replica hands races to the send-racer pool (gateway/sending/racers.py), without Ray: the lookup
``actors/send_racers.py`` gives is stood in for by a table of racers. Ray's part runs in
test_racer_actors.py."""

from __future__ import annotations

from typing import Any, cast

import pytest

from gateway.core.transactions import WireTx
from gateway.sending.race import Outcome, RaceResult
from gateway.sending.racers import PooledRacers, RaceLost, RacerHandle, send_racer_names
from gateway.sending.settings import SendingSettings


class Tx:
    base64 = "AQID"


class Racer:
    def __init__(self, lost: bool = False) -> None:
        self.lost = lost
        self.raced: list[str] = []

    async def race(self, encoded: str) -> dict[str, Any]:
        self.raced.append(encoded)
        if self.lost:
            raise RaceLost("gone")
        return RaceResult(Outcome.CONFIRMED, "sig", slot=7).to_json()


def pooled(racers: dict[str, Racer | None]) -> PooledRacers:
    settings = SendingSettings.model_validate({"send_racers": len(racers)})

    def find(name: str) -> RacerHandle | None:
        return racers[name]

    return PooledRacers(settings, find)


def test_the_pools_names() -> None:
    assert send_racer_names(3) == ["send-racer-0", "send-racer-1", "send-racer-2"]


async def test_races_go_round_the_racers_that_run() -> None:
    first, third = Racer(), Racer()
    pool = pooled({"send-racer-0": first, "send-racer-1": None, "send-racer-2": third})
    tx = cast(WireTx, Tx())
    results = [await pool.race(tx) for _ in range(4)]
    assert [r.outcome for r in results] == [Outcome.CONFIRMED] * 4 and results[0].slot == 7
    assert (len(first.raced), len(third.raced)) == (2, 2)  # the missing one skipped


async def test_a_racer_lost_during_the_race_is_a_lost_race() -> None:
    pool = pooled({"send-racer-0": Racer(lost=True)})
    with pytest.raises(RaceLost):
        await pool.race(cast(WireTx, Tx()))
