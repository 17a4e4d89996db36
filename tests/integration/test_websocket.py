"""``/ws`` through the whole stack (HAProxy, a Serve replica, the devnode's PubSub): the upgrade is
authenticated (or closed with the spec's code), and a subscription is served by the node."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.integration.service import Customer, RunningService

pytestmark = pytest.mark.integration


def test_slot_subscription_through_the_stack(service: RunningService, customer: Customer) -> None:
    async def run() -> dict[str, object]:
        url = service.url.replace("http://", "ws://") + "/ws"
        async with connect(url, subprotocols=[f"auth.{customer.api_key}", "solana-rpc"]) as ws:  # type: ignore[list-item]
            assert ws.subprotocol == "solana-rpc"
            await ws.send(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "slotSubscribe"}))
            answer = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
            assert isinstance(answer["result"], int), answer
            note: dict[str, object] = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
            return note

    note = asyncio.run(run())
    assert note["method"] == "slotNotification"


def test_an_unknown_key_is_closed_4001_through_the_stack(service: RunningService) -> None:
    async def run() -> int | None:
        url = service.url.replace("http://", "ws://") + "/ws"
        async with connect(url, subprotocols=["auth.srpc_live_unknown", "solana-rpc"]) as ws:  # type: ignore[list-item]
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 10)
            return ws.close_code

    assert asyncio.run(run()) == 4001
