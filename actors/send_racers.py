"""The ``send-racer-N`` actors: each races many sends at once over the node's RPC, the block engine and the
leaders' TPU (gateway/sending/racer_actor.py). Ray's part of the racer only: starting and stopping the pool,
and finding one racer by name for a replica's :class:`~gateway.sending.racers.PooledRacers` (the pool's
names, the round robin and the fallback are the feature's, in gateway/sending/racers.py)."""

from __future__ import annotations

from typing import Any

from actors.cluster import NAMESPACE
from actors.supervision import start_singleton, stop_actors
from gateway.sending.racer_actor import SendRacerActor
from gateway.sending.racers import PooledRacers, RaceLost, RacerHandle, send_racer_names
from gateway.sending.settings import SendingSettings


def start_send_racers(settings: dict[str, Any], count: int) -> list[Any]:
    """The pool of send-racer actors: each one named and restarted after a crash like a singleton."""
    return [start_singleton(name, SendRacerActor, settings, member=n) for n, name in enumerate(send_racer_names(count))]


def stop_send_racers(count: int) -> None:
    stop_actors(send_racer_names(count))


class RayRacer:
    """One racer actor, reached through Ray: a Ray failure during the race is a lost race."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    async def race(self, encoded: str) -> dict[str, Any]:
        from ray.exceptions import RayError

        try:
            doc: dict[str, Any] = await self.handle.race.remote(encoded)
        except RayError as exc:
            raise RaceLost(f"the send racer failed during the race: {exc}") from exc
        return doc


def find_racer(name: str) -> RacerHandle | None:
    """The racer actor ``name``, or None when it is not running (not started, being restarted)."""
    import ray

    try:
        return RayRacer(ray.get_actor(name, namespace=NAMESPACE))
    except ValueError:
        return None


def ray_racers(settings: SendingSettings) -> PooledRacers:
    """A replica's racers: the pool of send-racer actors, found by name through Ray."""
    return PooledRacers(settings, find_racer)
