"""The ``send-racer-N`` actors: each races many sends at once over the node's RPC, the block engine and the
leaders' TPU (gateway/sending/racer_actor.py). Replicas reach them through gateway/runtime/racers.py."""

from __future__ import annotations

from typing import Any

from actors.supervision import start_singleton, stop_actors
from gateway.runtime.cluster import send_racer_names
from gateway.sending.racer_actor import SendRacerActor


def start_send_racers(settings: dict[str, Any], count: int) -> list[Any]:
    """The pool of send-racer actors: each one named and restarted after a crash like a singleton."""
    return [start_singleton(name, SendRacerActor, settings, member=n) for n, name in enumerate(send_racer_names(count))]


def stop_send_racers(count: int) -> None:
    stop_actors(send_racer_names(count))
