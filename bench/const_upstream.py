"""A constant-answer JSON-RPC upstream: the fastest thing a gateway could forward to.

It answers every POST with a well-formed JSON-RPC 2.0 response that echoes the request's `id`
(batches item by item): `getSlot` -> 123456, `getHealth` -> "ok", a few other read methods get
plausible constants (`getTransaction`: a finalized transfer), anything else gets `null`. A body that
is not JSON gets the -32700 parse error, a request that is not an object with a string `method` gets
-32600. Non-POST gets 405.

Two implementations are kept so the choice can be re-measured: raw ASGI on uvicorn (uvloop,
httptools, no access log, explicit content-length) and `aiohttp.web`. Measured with wrk (1 thread,
POST getSlot, 6 s, one server process) on the 2-core project machine:

    implementation        64 conn req/s  p50 / p99 ms    1 conn req/s  p50 / p99 ms
    raw ASGI on uvicorn        35,700    1.69 / 3.68          11,700   0.08 / 1.09
    aiohttp.web                23,200    2.50 / 6.02           8,700   0.12 / 0.39

so raw ASGI is the default (`DEFAULT_IMPL`).

    python -m bench.const_upstream --port 8899 [--host 127.0.0.1] [--impl asgi|aiohttp]
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any, Final

import orjson

from bench._proc import LOOPBACK, require_loopback_host, serving, uvicorn_config

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

IMPLS: Final = ("asgi", "aiohttp")
DEFAULT_IMPL: Final = "asgi"

RESULTS: Final[dict[str, object]] = {
    "getSlot": 123456,
    "getBlockHeight": 123400,
    "getHealth": "ok",
    "getBalance": {"context": {"apiVersion": "2.0.0", "slot": 123456}, "value": 1_000_000_000},
    "getLatestBlockhash": {
        "context": {"apiVersion": "2.0.0", "slot": 123456},
        "value": {"blockhash": "EkSnNWid2cvwEVnVx9aBqawnmiCNiDgp3gUdkDPTKN1N", "lastValidBlockHeight": 123550},
    },
    "getVersion": {"solana-core": "2.0.0", "feature-set": 1},
    "getTransaction": {  # a finalized SOL transfer, as a node renders it at encoding json
        "blockTime": 1_700_000_000,
        "meta": {
            "computeUnitsConsumed": 150,
            "err": None,
            "fee": 5000,
            "innerInstructions": [],
            "logMessages": [
                "Program 11111111111111111111111111111111 invoke [1]",
                "Program 11111111111111111111111111111111 success",
            ],
            "postBalances": [998_995_000, 1_000_000, 1],
            "postTokenBalances": [],
            "preBalances": [1_000_000_000, 0, 1],
            "preTokenBalances": [],
            "rewards": [],
            "status": {"Ok": None},
        },
        "slot": 123400,
        "transaction": {
            "message": {
                "accountKeys": [
                    "7xLk17EQQ5KLDLDe44wCmupJKJjTGd8hs3eSVVhCx932",
                    "9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM",
                    "11111111111111111111111111111111",
                ],
                "header": {
                    "numReadonlySignedAccounts": 0,
                    "numReadonlyUnsignedAccounts": 1,
                    "numRequiredSignatures": 1,
                },
                "instructions": [{"accounts": [0, 1], "data": "3Bxs4h24hBtQy9rw", "programIdIndex": 2}],
                "recentBlockhash": "EkSnNWid2cvwEVnVx9aBqawnmiCNiDgp3gUdkDPTKN1N",
            },
            "signatures": ["5VERv8NMvzbJMEkV8xnrLkEaWRtSz9CosKDYjCJjBRnbJLgp8uirBgmQpjKhoR4tjF3ZpRzrFmBV6UjKdiSZkQUW"],
        },
        "version": "legacy",
    },
    "getEpochInfo": {
        "absoluteSlot": 123456,
        "blockHeight": 123400,
        "epoch": 0,
        "slotIndex": 123456,
        "slotsInEpoch": 432000,
        "transactionCount": 1000,
    },
}
# Pre-encoded `"result":...` fragments, so an answer is two concatenations and one id encoding.
_RESULT_FRAGMENTS: Final[dict[str, bytes]] = {m: b'"result":' + orjson.dumps(r) for m, r in RESULTS.items()}
_NULL_RESULT: Final = b'"result":null'
_PARSE_ERROR: Final = b'{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}'
_INVALID_FRAGMENT: Final = b'"error":{"code":-32600,"message":"Invalid Request"}'
_JSON_HEADERS: Final = [(b"content-type", b"application/json")]


def _answer_one(item: object) -> bytes:
    if not isinstance(item, dict):
        return b'{"jsonrpc":"2.0",' + _INVALID_FRAGMENT + b',"id":null}'
    method = item.get("method")
    fragment = _RESULT_FRAGMENTS.get(method, _NULL_RESULT) if isinstance(method, str) and method else _INVALID_FRAGMENT
    return b'{"jsonrpc":"2.0",' + fragment + b',"id":' + orjson.dumps(item.get("id")) + b"}"


def answer(body: bytes) -> bytes:
    """The constant JSON-RPC answer to a request body (a single request or a batch)."""
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError:
        return _PARSE_ERROR
    if isinstance(request, list):
        if not request:
            return b'{"jsonrpc":"2.0",' + _INVALID_FRAGMENT + b',"id":null}'
        return b"[" + b",".join(_answer_one(item) for item in request) + b"]"
    return _answer_one(request)


# ----------------------------------------------------------------------------------------- raw ASGI


async def read_body(receive: Receive) -> bytes:
    """The whole request body of an ASGI HTTP request (shared with :mod:`bench.forwarder`)."""
    message = await receive()
    body: bytes = message.get("body", b"")
    if message.get("more_body", False):
        chunks = [body]
        while message.get("more_body", False):
            message = await receive()
            chunks.append(message.get("body", b""))
        body = b"".join(chunks)
    return body


async def asgi_app(scope: Scope, receive: Receive, send: Send) -> None:
    """The raw ASGI implementation."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    body = await read_body(receive)
    if scope["method"] != "POST":
        await send(
            {"type": "http.response.start", "status": 405, "headers": [(b"allow", b"POST"), (b"content-length", b"0")]}
        )
        await send({"type": "http.response.body", "body": b""})
        return
    payload = answer(body)
    headers = [*_JSON_HEADERS, (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


# ------------------------------------------------------------------------------------- aiohttp.web


def make_aiohttp_app() -> Any:
    from aiohttp import web

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.method != "POST":
            return web.Response(status=405, headers={"Allow": "POST"})
        return web.Response(body=answer(await request.read()), content_type="application/json")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


# -------------------------------------------------------------------------------------- launchers


@contextlib.asynccontextmanager
async def serve_const_upstream(host: str = LOOPBACK, port: int = 0, impl: str = DEFAULT_IMPL) -> AsyncIterator[str]:
    """Serve in the current event loop (tests, quick probes); yields the base URL.

    For measurements run it as a subprocess instead (`python -m bench.const_upstream`), so the
    server does not share a core's event loop with the load generator.
    """
    require_loopback_host(host)
    if impl == "asgi":
        async with serving(uvicorn_config(asgi_app, host, port), "const upstream") as url:
            yield url
    elif impl == "aiohttp":
        from aiohttp import web

        runner = web.AppRunner(make_aiohttp_app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port, backlog=4096)
        await site.start()
        assert site._server is not None
        sockets = getattr(site._server, "sockets", None) or []
        bound = sockets[0].getsockname()[1] if sockets else port
        try:
            yield f"http://{host}:{bound}/"
        finally:
            await runner.cleanup()
    else:
        raise ValueError(f"unknown implementation {impl!r}; choose from {IMPLS}")


def run(host: str = LOOPBACK, port: int = 8899, impl: str = DEFAULT_IMPL) -> None:
    """Serve until SIGINT/SIGTERM (the subprocess entry point)."""
    require_loopback_host(host)
    if impl == "asgi":
        import uvicorn

        uvicorn.Server(uvicorn_config(asgi_app, host, port)).run()
    elif impl == "aiohttp":
        import uvloop
        from aiohttp import web

        web.run_app(
            make_aiohttp_app(),
            host=host,
            port=port,
            access_log=None,
            print=None,
            backlog=4096,
            loop=uvloop.new_event_loop(),
        )
    else:
        raise ValueError(f"unknown implementation {impl!r}; choose from {IMPLS}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.const_upstream", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=LOOPBACK, help="loopback address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8899)
    parser.add_argument("--impl", choices=IMPLS, default=DEFAULT_IMPL)
    args = parser.parse_args(argv)
    run(args.host, args.port, args.impl)


if __name__ == "__main__":
    main()
