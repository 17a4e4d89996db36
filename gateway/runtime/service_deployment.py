"""The Serve application's ``Service`` deployment: one replica that starts every actor of the service
(actors/service.py) on the cluster it is deployed to, so that the application alone is the whole service.

Each actor is named in namespace ``gateway``, detached and started get-or-create (actors/supervision.py):
a redeploy, a second app replica or ``gateway up`` (which starts the replicas' groups before Serve deploys)
finds those that run and starts only the missing ones. Detached, the actors outlive this replica: a
redeploy, a crash of this replica or ``serve shutdown`` leaves them running with their state (the pool's
health, the shards' books, claimed webhook jobs, gRPC subscribers); ``gateway actors stop`` ends them
(``gateway up``'s stop does, after Serve's). Found, an actor keeps the settings it was started with: a
redeploy that changes an actor's settings needs ``gateway actors stop`` first (docs/operations.md).

The ingress replicas are bound to this deployment and wait for :meth:`Service.started` before serving:
they call the racers, the shards and the pool's health owner from their first request.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from ray import serve
from ray.serve.schema import LoggingConfig

from actors.service import start_groups
from gateway.app.settings import Settings
from gateway.runtime.exposure import serve_internal_grpc_on_loopback
from gateway.runtime.serving import refuse_unless_ready


# One replica: it only starts actors (each get-or-create, so a second one would be harmless, just idle).
# num_cpus=0: it waits on nothing once they are started.
@serve.deployment(
    name="Service",
    num_replicas=1,
    max_ongoing_requests=16,
    logging_config=LoggingConfig(enable_access_log=False, log_level="WARNING"),
    ray_actor_options={"num_cpus": 0},
)
class Service:
    """Starts (or finds) every actor group, after the checks every serving process makes."""

    async def __init__(self, settings: dict[str, Any]) -> None:  # type: ignore[misc]  # Serve awaits an async one
        validated = Settings.model_validate(settings)
        await refuse_unless_ready(validated, os.environ)
        serve_internal_grpc_on_loopback()  # the replica's handle server, on a loopback-only local Ray
        # Ray's calls to its GCS block: off the replica's event loop
        self.lines = await asyncio.to_thread(start_groups, validated, validated)

    async def started(self) -> list[tuple[str, str]]:
        """What was started, as ``gateway up`` reports it: ``(part, line)``. Answers once all are."""
        return self.lines
