"""The Serve application (:func:`build_app`): the ``Ingress`` deployment, each replica of which builds a
:class:`gateway.app.replica.GatewayApp` from the settings it is given and serves it through the HTTP transport,
bound to the ``Service`` deployment that starts every actor (gateway/runtime/service_deployment.py).
``serve_app.py`` (``serve run``, ``serve deploy`` of ops/serve/gateway.yaml, KubeRay) and ``gateway up``
all deploy :func:`build_app`.
"""

from __future__ import annotations

import os
from typing import Any

from ray import serve
from ray.serve import Application
from ray.serve.handle import DeploymentHandle
from ray.serve.schema import LoggingConfig
from starlette.types import ASGIApp

from actors.metrics import install_ray_metrics
from actors.pool_health import read_pool_from_cluster
from actors.send_racers import ray_racers
from actors.shard_client import RayShards
from gateway.app.replica import GatewayApp
from gateway.app.settings import Settings
from gateway.base.process_gc import tune_gc
from gateway.pubsub.ws import UVICORN_WS_OPTIONS
from gateway.runtime.cluster import STOP_GRACE_S
from gateway.runtime.exposure import serve_internal_grpc_on_loopback
from gateway.runtime.haproxy_edge import EdgeLimits
from gateway.runtime.lean_ingress import install as install_lean_ingress
from gateway.runtime.serve_metrics import count_serve_latencies
from gateway.runtime.service_deployment import Service
from gateway.runtime.serving import refuse_unless_ready
from gateway.runtime.shared_port import SharedPort
from gateway.runtime.shared_port import install as install_shared_port
from gateway.transports.http import build_http_app


def ping_websockets_as_the_spec_says() -> None:
    """Make the uvicorn server Serve starts in this replica ping WebSockets every 25 s (docs/api.md's).

    Serve builds ``uvicorn.Config`` itself, after the replica's class is constructed, and has no
    WebSocket ping option; uvicorn's default is 20 s. The rest of :data:`UVICORN_WS_OPTIONS` comes
    with it (the message limit, and the protocol that writes a socket's queued frames together).
    Idempotent; only this process is affected.
    """
    import uvicorn

    if getattr(uvicorn.Config, "gateway_ws_pings", False):
        return
    base = uvicorn.Config

    class Config(base):  # type: ignore[valid-type,misc]
        gateway_ws_pings = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            for name, value in UVICORN_WS_OPTIONS.items():
                kwargs.setdefault(name, value)
            super().__init__(*args, **kwargs)

    uvicorn.Config = Config  # type: ignore[misc]


# num_cpus=0: ingress replicas wait on I/O; reserving a core each would cap replicas at the core count.
# log_level WARNING: Serve builds a log record for its access-log line on every request even with the
# access log off; at WARNING the call stops at the level check.
@serve.deployment(
    name="Ingress",
    logging_config=LoggingConfig(enable_access_log=False, log_level="WARNING"),
    ray_actor_options={"num_cpus": 0},
)
@serve.ingress()
class Ingress:
    """One HTTP ingress replica. Refuses to start on a missing setting or a pending migration
    (gateway/runtime/serving.py); serves once the ``Service`` deployment has started the actors."""

    async def __init__(self, settings: dict[str, Any], service: DeploymentHandle[Any] | None = None) -> None:  # type: ignore[misc]  # Serve awaits it
        validated = Settings.model_validate(settings)
        await refuse_unless_ready(validated, os.environ)
        if service is not None:  # None: deployed alone (bench/unmetered.py), the actors started by whoever did
            await service.started.remote()  # the racers, shards and the pool's health owner: called from here on
        backend = install_ray_metrics()
        if backend is not None:
            count_serve_latencies(backend)  # Serve's two latency histograms, counted as the gateway's are
        tune_gc(validated.gc_young_threshold)
        read_pool_from_cluster()  # the nodes' health from the upstream-health actor
        if validated.lean_ingress:
            install_lean_ingress()  # before Serve starts this replica's HTTP server, which binds the path
        ping_websockets_as_the_spec_says()
        if validated.ingress_mode == "reuseport":  # before Serve starts this replica's servers, as above
            limits = EdgeLimits.from_env(os.environ)
            shared = SharedPort(
                validated.host,
                validated.port,
                limits.connections_per_source,
                limits.keepalive_s,
                write_timeout_s=limits.client_s,
                body_timeout_s=validated.request_body_timeout_s,
                cors_allowed_origins=tuple(validated.cors_allowed_origins),
            )
            if not install_shared_port(shared):
                raise RuntimeError("ingress_mode reuseport: this Ray's Serve replica is not the one it was written for")
        serve_internal_grpc_on_loopback()
        racers = ray_racers(validated) if validated.send_racers > 0 else None  # None: races run here
        shards = RayShards(validated.account_shards) if validated.account_shards > 0 else None  # None: own share
        self.gateway = GatewayApp(validated, racers=racers, shards=shards)

    def __serve_build_asgi_app__(self) -> ASGIApp:
        return build_http_app(self.gateway)


#: How often Serve looks whether a stopping replica's requests have finished (its default is 2 s).
DRAIN_POLL_S = 0.2


def scaling_options(settings: Settings) -> dict[str, Any]:
    """Serve's replica count: fixed (``ingress_replicas``), or autoscaled (``ingress_autoscaling``)."""
    autoscaling = settings.ingress_autoscaling
    if autoscaling is None:
        return {"num_replicas": settings.ingress_replicas}
    return {"autoscaling_config": autoscaling.model_dump()}


def build_app(settings: Settings) -> Application:
    """The Serve application: the whole service. ``Service`` (one replica) starts every actor of
    actors/service.py; the ``Ingress`` replicas, bound to it, serve HTTP once it has. A replica Serve stops
    (scaled in, redeployed, Serve shut down) is first taken out of HAProxy, serves what reaches it for
    ``drain_s``, then closes its port (its WebSockets close 1012) and waits for its requests to finish; then
    the app's shutdown settles usage and gives back credit leases and rate and concurrency slices
    (:meth:`gateway.app.replica.GatewayApp.shutdown`). The actors outlive the app (service_deployment.py says why)."""
    options = scaling_options(settings)
    if settings.ingress_replicas_per_node is not None:  # None is no bound: Serve's schema wants the key absent
        options["max_replicas_per_node"] = settings.ingress_replicas_per_node
    deployment = Ingress.options(  # type: ignore[attr-defined]
        **options,
        max_ongoing_requests=settings.max_ongoing_requests,
        graceful_shutdown_timeout_s=settings.drain_s + STOP_GRACE_S,
        graceful_shutdown_wait_loop_s=DRAIN_POLL_S,
        # A hung replica (a stuck loop, a stopped process) is killed and replaced within about period + 3 x
        # timeout + Ray's 5 s exit grace; in reuseport mode its listener, which the kernel keeps handing
        # connections, goes with it.
        health_check_period_s=settings.ingress_health_check_period_s,
        health_check_timeout_s=settings.ingress_health_check_timeout_s,
    )
    given = settings.model_dump(mode="json")
    application: Application = deployment.bind(given, Service.bind(given))  # type: ignore[attr-defined]
    return application
