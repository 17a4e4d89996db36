"""The bundle relay: ``sendBundle``, bundle statuses, tip accounts, the tip floor and ``simulateBundle``,
passed to the block engine (Jito's JSON-RPC API) and answered in its shapes.

Planning already refused, free, a bundle that is malformed, holds an unsigned or oversized
transaction, or does not tip a tip account (the engine would drop it). ``sendBundle`` re-encodes the
transactions as base64 (what planning decoded), so the engine sees exactly what was verified.
``simulateBundle`` takes docs/api.md's ``[{transactions: [...]}]`` and asks the engine with Jito's
``encodedTransactions``. A bundle id is no promise of inclusion: ``getBundleStatuses`` tells.
The ``/relay/*`` routes are the same methods over HTTP (:class:`RelayRoute`).
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.core.errors import invalid_rpc_request
from gateway.core.jsonrpc import RpcItem
from gateway.node.http import ChainError, UpstreamTimeout, UpstreamUnavailable
from gateway.pipeline.stages import Call, Handler, Reply
from gateway.rpc.answers import answer, config, node_error, transport_failure
from gateway.sending.block_engine import BlockEngine
from gateway.sending.bundles import Bundle


class BundleRelay:
    """One handler per method name (``handlers``), all through one block engine."""

    def __init__(self, engine: BlockEngine) -> None:
        self.engine = engine

    @property
    def handlers(self) -> dict[str, Any]:
        return {
            "sendBundle": self.send_bundle,
            "simulateBundle": self.simulate_bundle,
            "getBundleStatuses": self.passed_on,
            "getInflightBundleStatuses": self.passed_on,
            "getTipAccounts": self.passed_on,
            "getTipFloor": self.tip_floor,
        }

    async def send_bundle(self, item: RpcItem, call: Call) -> None:
        bundle = item.parsed(Bundle)
        await self._engine_call(item, "sendBundle", [[tx.base64 for tx in bundle.txs], {"encoding": "base64"}])

    async def simulate_bundle(self, item: RpcItem, call: Call) -> None:
        spec = item.params[0]
        engine_params: list[Any] = [{"encodedTransactions": spec["transactions"]}]
        options = config(item)
        if options:
            engine_params.append(options)
        await self._engine_call(item, "simulateBundle", engine_params)

    async def passed_on(self, item: RpcItem, call: Call) -> None:
        await self._engine_call(item, item.method, list(item.params))

    async def tip_floor(self, item: RpcItem, call: Call) -> None:
        item.sent = True
        try:
            answer(item, await self.engine.tip_floor())
        except ChainError as exc:
            node_error(item, exc)
        except (UpstreamUnavailable, UpstreamTimeout) as exc:
            transport_failure(item, exc, "block engine")

    async def _engine_call(self, item: RpcItem, method: str, params: list[Any]) -> None:
        item.sent = True
        try:
            answer(item, await self.engine.call(method, params))
        except ChainError as exc:
            node_error(item, exc)
        except (UpstreamUnavailable, UpstreamTimeout) as exc:
            transport_failure(item, exc, "block engine")


class RelayRoute:
    """The stage of a ``/relay/*`` route, right after auth: the route is its one method.

    A ``POST`` route takes a JSON-RPC request for exactly that method (anything else is refused, free,
    before parsing); a ``GET`` route has no body, so the request is made here (``params: []``, id 1).
    The rest of the JSON-RPC pipeline (prices, limits, billing, the answer's shape) is the same.
    """

    def __init__(self, method: str, from_body: bool) -> None:
        self.method = method
        self.from_body = from_body
        self._request = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": []})

    async def __call__(self, call: Call, next_handler: Handler) -> Reply:
        if not self.from_body:
            call.body = self._request
            return await next_handler(call)
        try:
            request = orjson.loads(call.body)
        except orjson.JSONDecodeError:
            request = None  # the parse stage answers it
        if isinstance(request, list) or (isinstance(request, dict) and request.get("method") != self.method):
            raise invalid_rpc_request(f"{call.path} takes one request with method {self.method}")
        return await next_handler(call)
