"""The gateway's own Serve ingress with authentication and metering taken out: the baseline that
isolates what metering costs. Benchmarks only; nothing in the service imports this.

It is the ``Ingress`` deployment of ``serve_app.py`` itself (same class, settings, process tuning
and Serve options), with only the JSON-RPC pipeline swapped before the HTTP app is built.
"""

from __future__ import annotations

from gateway.forward import Forwarder, ParseStage
from gateway.pipeline import compose, error_boundary
from gateway.transports.routing import RpcFirst
from serve_app import Ingress


class _Unmetered(Ingress.func_or_class):  # type: ignore[misc,name-defined]  # the class Serve wrapped
    """Same app, same transport, same forwarding; the pipeline is only boundary → parse → forward."""

    def __serve_build_asgi_app__(self) -> RpcFirst:
        gw = self.gateway
        gw.rpc = compose([error_boundary, ParseStage(gw.prices)], Forwarder(gw.upstream))
        app: RpcFirst = super().__serve_build_asgi_app__()
        return app


UnmeteredIngress = Ingress.options(func_or_class=_Unmetered, name="UnmeteredIngress")  # type: ignore[attr-defined]
