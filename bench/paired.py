"""The paired app, without Ray: the gateway's HTTP app with ``POST /unmetered`` in front, boundary → parse →
forward with authentication and metering taken out (baseline (a), bench/unmetered.py). Kept apart from
bench/unmetered.py, which imports Ray, so that bench/app_uvicorn.py runs the same app in a process without it."""

from __future__ import annotations

from starlette.types import ASGIApp

from gateway.app.replica import GatewayApp
from gateway.pipeline.http import RpcFirst
from gateway.pipeline.stages import compose, error_boundary
from gateway.rpc.forward import Forwarder, ParseStage

UNMETERED_PATH = "/unmetered"


def paired_app(gw: GatewayApp, app: ASGIApp) -> RpcFirst:
    """``app`` (the gateway's own, built from ``gw``) with the unmetered path in front of it."""
    unmetered = compose([error_boundary, ParseStage(gw.methods, gw.prices)], Forwarder(gw.upstream))
    return RpcFirst(app, [UNMETERED_PATH], unmetered)
