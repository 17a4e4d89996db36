"""One replica's gateway, built from settings: the pipelines and the state they share. No Ray here.

The Serve deployment (``serve_app.py``) and the tests both build a :class:`GatewayApp` and wrap it
in the HTTP transport, so everything below the transport is tested without Ray.
"""

from __future__ import annotations

import time
from typing import Any

from gateway.auth.services import AuthServices
from gateway.auth.stage import AuthStage
from gateway.config import Settings
from gateway.credits.balances import StoreBalanceSource
from gateway.credits.meter import Meter
from gateway.credits.stage import CreditHeaders, MeteringStage
from gateway.errors import service_unavailable
from gateway.forward import Forwarder, ParseStage
from gateway.limits import Limiter
from gateway.methods import PriceTable
from gateway.pipeline import Call, Handler, Reply, Stage, compose, error_boundary
from gateway.public import ServiceProfile
from gateway.storage.connections import Connections
from gateway.upstream import HealthMonitor, HttpUpstream

DEFAULT_UPSTREAM = "http://127.0.0.1:8899"


class GatewayApp:
    """Args:
    settings: validated settings (with the embedded parts' URLs filled in by the stack).
    auth_options: extra :class:`AuthServices` options (tests pass short lifetimes and hooks).
    """

    def __init__(self, settings: Settings, **auth_options: Any) -> None:
        self.settings = settings
        self.started_at = time.time()
        self.prices = PriceTable.default().with_overrides(settings.pricing)
        self.profile = ServiceProfile()
        self.upstream = HttpUpstream(settings.upstream_rpc_url or DEFAULT_UPSTREAM, settings.fallback_rpc_url)
        self.monitor = HealthMonitor(self.upstream, settings.health_poll_s)
        self.conn = Connections()
        self.meter = Meter(
            replicas=settings.ingress_replicas,
            lease_ttl_s=settings.lease_ttl_s,
            flush_interval_s=settings.credit_flush_interval_s,
            expiry_interval_s=settings.credit_expiry_check_s,
        )
        self.limiter = Limiter(settings.rate_limit_rps, settings.concurrency_limit, replicas=settings.ingress_replicas)
        self.metering = MeteringStage(self.meter, self.limiter)
        self.auth = AuthServices(
            settings,
            api_key_secret=settings.api_key_secret_bytes,
            balance_source=StoreBalanceSource(self.meter),
            **auth_options,
        )
        self.rpc: Handler = compose([error_boundary, *self.rpc_stages()], Forwarder(self.upstream))

    def rpc_stages(self) -> list[Stage]:
        """The JSON-RPC stages between the error boundary and the forwarder, in order."""
        return [
            AuthStage(self.auth),
            CreditHeaders(self.metering),
            self._readiness_gate,
            ParseStage(self.prices),
            self.metering,
        ]

    async def startup(self) -> None:
        self.conn = await Connections.open(self.settings.database_url, self.settings.redis_url)
        await self.auth.start(self.conn)
        if self.conn.db is not None:
            self.meter.start(self.conn.db)
        self.monitor.start()

    async def shutdown(self) -> None:
        await self.meter.stop()
        await self.monitor.stop()
        await self.upstream.close()
        await self.auth.stop()
        await self.conn.close()

    @property
    def ready(self) -> bool:
        return self.upstream.primary.ever_healthy or self.upstream.use_fallback

    async def _readiness_gate(self, call: Call, next_handler: Handler) -> Reply:
        """Until a node has answered once, paid traffic gets 503 -32003 rather than a failed forward."""
        if not self.ready:
            raise service_unavailable("gateway is starting: the upstream node has not answered yet", 5)
        return await next_handler(call)
