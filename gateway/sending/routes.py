"""The bundle relay's HTTP routes (``/relay/*``): each JSON-RPC's stages pinned to one block-engine method,
then the forwarder, answering JSON-RPC (docs/api.md, Bundle relay)."""

from __future__ import annotations

from collections.abc import Callable

from starlette.routing import BaseRoute

from gateway.pipeline.http import RPC_MAX_BODY_BYTES, mount
from gateway.pipeline.stages import Handler, ReplyStyle, Stage

#: path -> (HTTP method, JSON-RPC method). A GET has no body.
RELAY_ROUTES = {
    "/relay/sendBundle": ("POST", "sendBundle"),
    "/relay/getBundleStatuses": ("POST", "getBundleStatuses"),
    "/relay/getTipAccounts": ("GET", "getTipAccounts"),
    "/relay/tipFloor": ("GET", "getTipFloor"),
}


def relay_routes(stages: Callable[[str, bool], list[Stage]], forwarder: Handler) -> list[BaseRoute]:
    """``stages(method, from_body)``: the route's stages before ``forwarder``."""
    return [
        mount(path, verb, stages(method, verb == "POST"), forwarder, RPC_MAX_BODY_BYTES, ReplyStyle.JSONRPC)
        for path, (verb, method) in RELAY_ROUTES.items()
    ]
