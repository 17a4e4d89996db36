"""A follower's JSON-RPC: its own chain answers, except what only the leader can do.

`sendTransaction` and `requestAirdrop` are forwarded to the leader as they came and the leader's answer is
returned as it is (its preflight runs there); in a batch only those items are forwarded and the rest are
answered here, in the batch's order. Without an answer from the leader: Agave's -32005 NodeUnhealthy.
Everything else reads the follower's own chain, `simulateTransaction` included, so a lagging follower shows
its older state. What differs from the leader's own methods: getHealth (the follower's health, Agave's
errors), getMaxShredInsertSlot and getMaxRetransmitSlot (the newest leader slot received, past the
follower's slot when it lags) and getClusterNodes (the leader's answer, whose TPU address a sender uses).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import orjson
from aiohttp import web

from devnode.chain import Chain
from devnode.errors import node_unhealthy
from devnode.replication.follower import Follower, LeaderUnreachable
from devnode.rpc import NodeInfo, RpcDispatcher
from devnode.server import json_response, parse_error

FORWARDED = frozenset({"sendTransaction", "requestAirdrop"})


class FollowerDispatcher(RpcDispatcher):
    """The node's methods over the follower's chain, with the follower's health and leader's view."""

    def __init__(self, chain: Chain, info: NodeInfo, follower: Follower) -> None:
        super().__init__(chain, info)
        self.follower = follower

    def m_getHealth(self, params: list[Any]) -> Any:
        health = self.follower.health()
        if health.status == "ok":
            return "ok"
        raise node_unhealthy(health.slots_behind)

    def m_getMaxShredInsertSlot(self, params: list[Any]) -> Any:
        return self.follower.max_slot

    def m_getMaxRetransmitSlot(self, params: list[Any]) -> Any:
        return self.follower.max_slot

    def m_getClusterNodes(self, params: list[Any]) -> Any:
        nodes = self.follower.cluster_nodes
        return nodes if nodes is not None else super().m_getClusterNodes(params)


def _forwarded(request: Any) -> bool:
    return isinstance(request, dict) and request.get("method") in FORWARDED


class FollowerRpc:
    """The follower's `HttpServer` handler: forwards to the leader what only the leader does."""

    def __init__(self, dispatcher: FollowerDispatcher) -> None:
        self.dispatcher = dispatcher
        self.follower = dispatcher.follower

    def health_text(self) -> str:
        """GET /health, as Agave's: ok, behind or unknown."""
        return self.follower.health().status

    async def respond(self, body: bytes) -> web.Response:
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            return json_response(parse_error())
        if _forwarded(payload):
            try:
                answer = await self.follower.forward(body)
            except LeaderUnreachable:
                return json_response(_unreachable(payload))
            return web.Response(body=answer, content_type="application/json") if answer else json_response(None)
        if isinstance(payload, list) and any(_forwarded(item) for item in payload):
            answers = await asyncio.gather(*(self._one(item) for item in payload))
            return json_response([a for a in answers if a is not None] or None)
        return json_response(self.dispatcher.handle(payload))

    def _one(self, item: Any) -> Awaitable[Any]:
        if _forwarded(item):
            return self._forward_item(item)
        local = self.dispatcher.handle([item])
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.set_result(local[0] if local else None)
        return future

    async def _forward_item(self, item: dict[str, Any]) -> Any:
        try:
            answer = await self.follower.forward(orjson.dumps(item))
            return orjson.loads(answer) if answer else None
        except (LeaderUnreachable, orjson.JSONDecodeError):
            return _unreachable(item)


def _unreachable(request: dict[str, Any]) -> dict[str, Any] | None:
    if "id" not in request:
        return None  # a notification is not answered
    return {"jsonrpc": "2.0", "error": node_unhealthy(None).to_json(), "id": request.get("id")}
