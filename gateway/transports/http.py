"""The HTTP transport: Starlette routes that turn requests into pipeline calls and replies back.

Plain Starlette, not FastAPI: faster under Serve's direct ingress (bench/README.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp
from swagger_ui_bundle import swagger_ui_path

from gateway.app.features import feature_routes
from gateway.app.replica import GatewayApp
from gateway.core.errors import ProxyError
from gateway.mcp.server import MCP_PATH, McpTransport, own_origins
from gateway.pipeline.http import RPC_MAX_BODY_BYTES, RpcFirst, WebSocketFirst, mount, to_response
from gateway.pipeline.stages import ReplyStyle, json_reply
from gateway.pubsub.ws import WS_PATH, WsTransport
from gateway.rpc.api_doc import RPC_PATHS
from gateway.transports.access_log import with_access_log
from gateway.transports.cors import Cors, OriginPolicy
from gateway.transports.deadline import BodyDeadline
from gateway.transports.openapi import openapi_document

#: /docs: the vendored Swagger UI (the swagger-ui-bundle package) rendering /openapi.json, with no
#: request leaving the machine.
DOCS_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Solana credit gateway API</title>
<link rel="stylesheet" href="/docs/static/swagger-ui.css"></head>
<body><div id="ui"></div>
<script src="/docs/static/swagger-ui-bundle.js"></script>
<script>SwaggerUIBundle({url: "/openapi.json", dom_id: "#ui"});</script>
</body></html>
"""


def build_http_app(gw: GatewayApp) -> ASGIApp:
    """The gateway over HTTP: JSON-RPC ``POST``s straight to the pipeline, ``/ws`` straight to its
    transport, everything else by Starlette; every body under one deadline; every answer with CORS's headers."""
    s = gw.settings
    routed = RpcFirst(WebSocketFirst(build_starlette_app(gw), WS_PATH, WsTransport(gw)), RPC_PATHS, gw.rpc)
    mcp_policy = OriginPolicy.parse([*s.mcp_allowed_origins, *own_origins(s.port)])
    app = Cors(
        BodyDeadline(routed, s.request_body_timeout_s),
        OriginPolicy.parse(s.cors_allowed_origins),
        {MCP_PATH: mcp_policy},
    )
    return with_access_log(app, s.access_log, s.trusted_proxies)  # off: app itself


def build_starlette_app(gw: GatewayApp) -> Starlette:
    openapi_body = json_reply(200, openapi_document())  # the same document for the replica's lifetime

    async def openapi(request: Request) -> Response:
        return to_response(openapi_body)

    async def docs(request: Request) -> Response:
        return HTMLResponse(DOCS_PAGE)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        constant = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(exc.status_code, "INVALID_REQUEST")
        err = ProxyError(exc.status_code, constant, str(exc.detail))
        return to_response(json_reply(exc.status_code, err.http_body(None), dict(exc.headers or {})))

    mcp = McpTransport(gw)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await gw.startup()
        try:
            async with mcp.run():  # the MCP SDK's session manager: its task group lives as long as the app
                yield
        finally:
            await gw.shutdown()

    routes: list[BaseRoute] = [  # the JSON-RPC routes are served by RpcFirst; declared here for the 405s
        *(mount(path, "POST", [], gw.rpc, RPC_MAX_BODY_BYTES, ReplyStyle.JSONRPC) for path in RPC_PATHS),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/docs", docs, methods=["GET"]),
        Route(MCP_PATH, mcp, methods=["GET", "POST", "DELETE"]),
        Mount("/docs/static", StaticFiles(directory=swagger_ui_path), name="docs-static"),
        *feature_routes(gw),  # gateway/app/features.py: the public documents' first (gateway/public/)
    ]
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: http_error})
