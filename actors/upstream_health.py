"""The ``upstream-health`` actor: the cluster's one owner of the nodes' health, which every replica and actor
reads the pool's view from (gateway/upstreams/health_actor.py, docs/architecture.md#the-pool-of-nodes)."""

from __future__ import annotations

from typing import Any

from actors.supervision import start_singleton, stop_singleton
from gateway.upstreams.health_actor import UPSTREAM_HEALTH, UpstreamHealthActor


def start_upstream_health(settings: dict[str, Any]) -> Any:
    return start_singleton(UPSTREAM_HEALTH, UpstreamHealthActor, settings)


def stop_upstream_health() -> None:
    stop_singleton(UPSTREAM_HEALTH)
