"""Access rules on the gRPC stream: the client address at each call (``PERMISSION_DENIED`` "ACCESS_DENIED"),
a method rule without ``GRPC``, and an open stream a change forbids ended at once (a stream server of
this module's home beside its HTTP gateway, sharing PostgreSQL and Redis; the generated Yellowstone client)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import grpc
import pytest

from devnode.node import Devnode
from gateway.grpc.server import GrpcStreamServer
from gateway.settings import Settings
from tests.access.conftest import Owner
from tests.grpc.client import Subscription, eventually, kind
from tests.grpc.conftest import GeyserClient, geyser

__all__ = ["geyser"]


@pytest.fixture
async def stream_port(settings: Settings, devnode: Devnode) -> AsyncIterator[int]:
    server = GrpcStreamServer(settings.model_copy(update={"upstream_grpc_url": devnode.grpc_url}), port=0)
    await server.start()
    try:
        yield server.port
    finally:
        await server.stop()


async def _get_slot(geyser: GeyserClient, channel: grpc.aio.Channel, key: str) -> grpc.StatusCode:
    try:
        await geyser.grpc.GeyserStub(channel).GetSlot(geyser.pb2.GetSlotRequest(), metadata=(("x-token", key),))
    except grpc.aio.AioRpcError as exc:
        assert "ACCESS_DENIED" in (exc.details() or ""), exc.details()
        return exc.code()
    return grpc.StatusCode.OK


async def _until(geyser: GeyserClient, channel: grpc.aio.Channel, key: str, wanted: grpc.StatusCode) -> None:
    """The change reaches the stream server on the channel: call until it answers ``wanted`` ."""

    async def answers() -> bool:
        return await _get_slot(geyser, channel, key) == wanted

    await eventually(answers, f"GetSlot answers {wanted}")


async def test_the_address_and_method_rules_bind_grpc_and_end_an_open_stream(
    geyser: GeyserClient, stream_port: int, http: aiohttp.ClientSession, owner: Owner
) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{stream_port}") as channel:
        assert await _get_slot(geyser, channel, owner.key) == grpc.StatusCode.OK
        sub = Subscription(geyser, channel, owner.key)
        await sub.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
        await sub.until(lambda u: kind(u) == "slot")

        assert (await owner.put_rules(http, {"addresses": ["127.0.0.2"]})).status == 200
        ended = await asyncio.wait_for(sub.error(), 5)
        assert ended.code() == grpc.StatusCode.PERMISSION_DENIED, ended
        assert (ended.details() or "").startswith("ACCESS_DENIED"), ended.details()
        assert await _get_slot(geyser, channel, owner.key) == grpc.StatusCode.PERMISSION_DENIED

        assert (await owner.put_rules(http, {"addresses": ["127.0.0.1"], "methods": ["getSlot"]})).status == 200
        await _until(geyser, channel, owner.key, grpc.StatusCode.PERMISSION_DENIED)  # no GRPC class: refused
        assert (await owner.put_rules(http, {"addresses": ["127.0.0.1"], "methods": ["GRPC"]})).status == 200
        await _until(geyser, channel, owner.key, grpc.StatusCode.OK)
