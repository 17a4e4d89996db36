"""The JSON-RPC HTTP endpoint (aiohttp on loopback, orjson). Every JSON-RPC answer, errors
included, is HTTP 200 as on Agave; GET /health answers like a validator's health route ("ok"; a
follower says "behind" or "unknown" too). Other parts of the node add their routes through
`HttpServer(routes=...)` (the block engine's, the replication log's), and a follower answers JSON-RPC
through its own handler (`rpc=`: it forwards some methods to its leader)."""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import orjson
from aiohttp import web

from devnode.errors import PARSE_ERROR
from devnode.rpc import RpcDispatcher
from devnode.rpc.dispatch import JsonRpcEndpoint

MAX_BODY = 50 * 1024 * 1024

#: A JSON-RPC request body in, the HTTP answer out.
RpcHandler = Callable[[bytes], Awaitable[web.Response]]
ShutdownHook = Callable[[web.Application], Awaitable[None]]


def parse_error() -> dict[str, Any]:
    return {"jsonrpc": "2.0", "error": {"code": PARSE_ERROR, "message": "Parse error"}, "id": None}


def json_response(result: Any, headers: Mapping[str, str] | None = None) -> web.Response:
    """A JSON-RPC answer (None: nothing to answer, an empty HTTP 200)."""
    if result is None:
        return web.Response(status=200, headers=headers)
    return web.Response(body=orjson.dumps(result), content_type="application/json", headers=headers)


def rpc_response(endpoint: JsonRpcEndpoint, body: bytes, headers: Mapping[str, str] | None = None) -> web.Response:
    """Decode a JSON-RPC request body, answer it with `endpoint`, render the HTTP 200 reply."""
    result: Any
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        result = parse_error()
    else:
        result = endpoint.handle(payload)
    return json_response(result, headers)


class HttpServer:
    """Binds its own socket so that port 0 works and the real port is known before serving."""

    def __init__(
        self,
        dispatcher: RpcDispatcher,
        routes: Iterable[web.RouteDef] = (),
        *,
        rpc: RpcHandler | None = None,
        health: Callable[[], str] | None = None,
        on_shutdown: Iterable[ShutdownHook] = (),
    ) -> None:
        self.dispatcher = dispatcher
        self._routes = list(routes)
        self._rpc_handler = rpc
        self._health_text = health
        self._on_shutdown = list(on_shutdown)
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post("/", self._rpc)
        app.router.add_get("/health", self._health)
        app.router.add_routes(self._routes)
        app.on_shutdown.extend(self._on_shutdown)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.setblocking(False)
        await web.SockSite(self._runner, sock).start()
        self.port = int(sock.getsockname()[1])
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok" if self._health_text is None else self._health_text())

    async def _rpc(self, request: web.Request) -> web.Response:
        body = await request.read()
        if self._rpc_handler is not None:
            return await self._rpc_handler(body)
        return rpc_response(self.dispatcher, body)
