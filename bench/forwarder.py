"""The no-Ray reference: plain uvicorn forwarding each POST body to one upstream URL.

Raw ASGI on uvicorn (uvloop, httptools, no access log), one shared `aiohttp.ClientSession` whose
`TCPConnector` keeps up to `--connector-limit` keep-alive connections to the upstream (default
256: enough for the 64-connection load with headroom). The upstream's status, content type and
body are returned as they are; an upstream failure is a 502 with a JSON-RPC error body.
Whatever the request path, the body goes to the upstream URL given.

``--client gateway`` forwards through the gateway's own node client instead (``gateway.node.http.HttpUpstream``
over ``gateway/node/wire.py``, 512 kept-alive connections): the same forwarder with the gateway's HTTP client, so
that a ratio against it rises only when the gateway's own code gets faster, not when its node client does
(bench.metered reports both; docs/performance.md).

    python -m bench.forwarder --port 8898 --upstream http://127.0.0.1:8899/ [--client gateway]
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator
from typing import Final

import aiohttp

from bench._proc import LOOPBACK, require_loopback_host, require_loopback_url, serving, uvicorn_config
from bench.const_upstream import Message, Receive, Scope, Send, read_body

DEFAULT_CONNECTOR_LIMIT: Final = 256
_BAD_GATEWAY: Final = b'{"jsonrpc":"2.0","error":{"code":-32603,"message":"upstream unavailable"},"id":null}'


CLIENTS: Final = ("aiohttp", "gateway")


class Forwarder:
    """A raw ASGI app forwarding POST bodies to `upstream_url` over one shared session."""

    def __init__(self, upstream_url: str, connector_limit: int = DEFAULT_CONNECTOR_LIMIT) -> None:
        require_loopback_url(upstream_url)
        self.upstream_url = upstream_url
        self.connector_limit = connector_limit
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self.connector_limit,
                limit_per_host=self.connector_limit,
                keepalive_timeout=60.0,
                ttl_dns_cache=None,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=30.0),
                auto_decompress=False,
                skip_auto_headers=("User-Agent", "Accept-Encoding"),
            )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        if scope["method"] != "POST":
            await _respond(send, 405, b"", b"text/plain")
            return
        if self._session is None:
            await self.start()
        assert self._session is not None
        try:
            async with self._session.post(
                self.upstream_url, data=body, headers={"Content-Type": "application/json"}
            ) as upstream:
                payload = await upstream.read()
                status = upstream.status
                content_type = upstream.headers.get("Content-Type", "application/json").encode()
        except (aiohttp.ClientError, TimeoutError):
            await _respond(send, 502, _BAD_GATEWAY, b"application/json")
            return
        await _respond(send, status, payload, content_type)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message: Message = await receive()
            if message["type"] == "lifespan.startup":
                await self.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


class GatewayClientForwarder(Forwarder):
    """The same forwarder through the gateway's node client (`HttpUpstream`): what the gateway's replica uses
    to reach the node, with nothing of the gateway around it."""

    def __init__(self, upstream_url: str, connector_limit: int = DEFAULT_CONNECTOR_LIMIT) -> None:
        from gateway.node.http import HttpUpstream

        super().__init__(upstream_url, connector_limit)
        self._upstream = HttpUpstream(upstream_url)

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        await self._upstream.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from gateway.node.http import UpstreamTimeout, UpstreamUnavailable

        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        body = await read_body(receive)
        if scope["method"] != "POST":
            await _respond(send, 405, b"", b"text/plain")
            return
        try:
            payload = await self._upstream.post(body, 30.0)
        except (UpstreamUnavailable, UpstreamTimeout):
            await _respond(send, 502, _BAD_GATEWAY, b"application/json")
            return
        await _respond(send, 200, payload, b"application/json")


def forwarder(upstream_url: str, connector_limit: int = DEFAULT_CONNECTOR_LIMIT, client: str = "aiohttp") -> Forwarder:
    if client not in CLIENTS:
        raise ValueError(f"client {client!r}: one of {', '.join(CLIENTS)}")
    cls = GatewayClientForwarder if client == "gateway" else Forwarder
    return cls(upstream_url, connector_limit)


async def _respond(send: Send, status: int, body: bytes, content_type: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@contextlib.asynccontextmanager
async def serve_forwarder(
    upstream_url: str,
    host: str = LOOPBACK,
    port: int = 0,
    connector_limit: int = DEFAULT_CONNECTOR_LIMIT,
    client: str = "aiohttp",
) -> AsyncIterator[str]:
    """Serve in the current event loop; yields the forwarder's base URL (use a subprocess to measure)."""
    require_loopback_host(host)
    app = forwarder(upstream_url, connector_limit, client)
    async with serving(uvicorn_config(app, host, port, lifespan="on"), "forwarder") as url:
        yield url


def run(
    host: str = LOOPBACK,
    port: int = 8898,
    upstream: str = "",
    connector_limit: int = DEFAULT_CONNECTOR_LIMIT,
    client: str = "aiohttp",
) -> None:
    """Serve until SIGINT/SIGTERM (the subprocess entry point)."""
    import uvicorn

    require_loopback_host(host)
    app = forwarder(upstream, connector_limit, client)
    uvicorn.Server(uvicorn_config(app, host, port, lifespan="on")).run()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.forwarder", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=LOOPBACK, help="loopback address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8898)
    parser.add_argument("--upstream", required=True, help="upstream URL, e.g. http://127.0.0.1:8899/")
    parser.add_argument("--connector-limit", type=int, default=DEFAULT_CONNECTOR_LIMIT)
    parser.add_argument(
        "--client", choices=CLIENTS, default="aiohttp", help="aiohttp (default) or the gateway's own node client"
    )
    args = parser.parse_args(argv)
    run(args.host, args.port, args.upstream, args.connector_limit, args.client)


if __name__ == "__main__":
    main()
