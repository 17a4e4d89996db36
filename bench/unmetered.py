"""The gateway's own Serve ingress with authentication and metering taken out: the baseline that
isolates what metering costs. Benchmarks only; nothing in the service imports this.
"""

from __future__ import annotations

from typing import Any

from ray import serve
from ray.serve.schema import LoggingConfig
from starlette.applications import Starlette

from gateway.app import GatewayApp
from gateway.config import Settings
from gateway.forward import Forwarder, ParseStage
from gateway.pipeline import compose, error_boundary
from gateway.runtime.replica_process import tune_gc
from gateway.transports.http import build_http_app


@serve.deployment(
    name="UnmeteredIngress",
    logging_config=LoggingConfig(enable_access_log=False),
    ray_actor_options={"num_cpus": 0},
)
@serve.ingress()
class UnmeteredIngress:
    """Same app, same transport, same forwarding; the pipeline is only boundary → parse → forward."""

    def __init__(self, settings: dict[str, Any]) -> None:
        validated = Settings.model_validate(settings)
        tune_gc(validated.gc_young_threshold)
        self.gateway = GatewayApp(validated)
        self.gateway.rpc = compose([error_boundary, ParseStage(self.gateway.prices)], Forwarder(self.gateway.upstream))

    def __serve_build_asgi_app__(self) -> Starlette:
        return build_http_app(self.gateway)
