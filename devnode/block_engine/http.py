"""The block engine's HTTP routes, at Jito's paths under the node's RPC address: `{rpc}/api/v1` is
the base URL a Jito client takes.

- `POST /api/v1/bundles`: JSON-RPC (sendBundle, getBundleStatuses, getInflightBundleStatuses,
  getTipAccounts, simulateBundle).
- `POST /api/v1/transactions`: JSON-RPC sendTransaction; `?bundleOnly=true` sends it as a
  one-transaction bundle and answers its bundle id in the `x-bundle-id` header, as Jito does.
- `GET /api/v1/bundles/tip_floor`: the landed-tip percentiles, in SOL.
"""

from __future__ import annotations

import datetime

import orjson
from aiohttp import web

from devnode.block_engine.engine import BlockEngine
from devnode.block_engine.rpc import BundlesRpc, TransactionsRpc
from devnode.server import rpc_response

BASE_PATH = "/api/v1"


class BlockEngineRoutes:
    """The routes above over one `BlockEngine`; `routes()` goes to `HttpServer(routes=...)`."""

    def __init__(self, engine: BlockEngine) -> None:
        self.engine = engine
        self._bundles = BundlesRpc(engine)

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post(f"{BASE_PATH}/bundles", self._bundles_rpc),
            web.get(f"{BASE_PATH}/bundles/tip_floor", self._tip_floor),
            web.post(f"{BASE_PATH}/transactions", self._transactions_rpc),
        ]

    async def _bundles_rpc(self, request: web.Request) -> web.Response:
        return rpc_response(self._bundles, await request.read())

    async def _transactions_rpc(self, request: web.Request) -> web.Response:
        bundle_only = request.query.get("bundleOnly", "").lower() == "true"
        endpoint = TransactionsRpc(self.engine, bundle_only=bundle_only)
        body = await request.read()
        response = rpc_response(endpoint, body)
        if endpoint.bundle_ids:
            response.headers["x-bundle-id"] = endpoint.bundle_ids[-1]
        return response

    async def _tip_floor(self, request: web.Request) -> web.Response:
        floor = self.engine.tips.render(datetime.datetime.now(datetime.UTC))
        return web.Response(body=orjson.dumps(floor), content_type="application/json")
