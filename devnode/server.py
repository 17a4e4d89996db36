"""The JSON-RPC HTTP endpoint (aiohttp on loopback, orjson). Every JSON-RPC answer, errors
included, is HTTP 200 as on Agave; GET /health answers "ok" like a validator's health route."""

from __future__ import annotations

import socket
from typing import Any

import orjson
from aiohttp import web

from devnode.errors import PARSE_ERROR
from devnode.rpc import RpcDispatcher

MAX_BODY = 50 * 1024 * 1024


class HttpServer:
    """Binds its own socket so that port 0 works and the real port is known before serving."""

    def __init__(self, dispatcher: RpcDispatcher) -> None:
        self.dispatcher = dispatcher
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post("/", self._rpc)
        app.router.add_get("/health", self._health)
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
        return web.Response(text="ok")

    async def _rpc(self, request: web.Request) -> web.Response:
        body = await request.read()
        result: Any
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            result = {"jsonrpc": "2.0", "error": {"code": PARSE_ERROR, "message": "Parse error"}, "id": None}
        else:
            result = self.dispatcher.handle(payload)
        if result is None:
            return web.Response(status=200)
        return web.Response(body=orjson.dumps(result), content_type="application/json")
