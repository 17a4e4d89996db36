"""Access rules on the gRPC stream: the client address at each call (``PERMISSION_DENIED`` "ACCESS_DENIED"),
behind a trusted proxy the one its ``x-forwarded-for`` metadata names, a method rule without ``GRPC``, and
an open stream a change forbids ended at once (a stream server of this module's home beside its HTTP
gateway, sharing PostgreSQL and Redis; the generated Yellowstone client)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import grpc
import pytest

from devnode.node import Devnode
from gateway.app.settings import Settings
from gateway.grpc.server import GrpcStreamServer
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


@asynccontextmanager
async def _stream_server(settings: Settings, devnode: Devnode, trusted: list[str]) -> AsyncIterator[int]:
    """A stream server whose ``trusted_proxies`` are ``trusted``: its port."""
    update = {"upstream_grpc_url": devnode.grpc_url, "trusted_proxies": trusted}
    server = GrpcStreamServer(settings.model_copy(update=update), port=0)
    await server.start()
    try:
        yield server.port
    finally:
        await server.stop()


async def _get_slot(geyser: GeyserClient, channel: grpc.aio.Channel, key: str, *forwarded: str) -> grpc.StatusCode:
    """``forwarded``: ``x-forwarded-for`` metadata sent with the call, one entry each, as a proxy sends it."""
    metadata = (("x-token", key), *(("x-forwarded-for", value) for value in forwarded))
    try:
        await geyser.grpc.GeyserStub(channel).GetSlot(geyser.pb2.GetSlotRequest(), metadata=metadata)
    except grpc.aio.AioRpcError as exc:
        assert "ACCESS_DENIED" in (exc.details() or ""), exc.details()
        return exc.code()
    return grpc.StatusCode.OK


async def _until(
    geyser: GeyserClient, channel: grpc.aio.Channel, key: str, wanted: grpc.StatusCode, *forwarded: str
) -> None:
    """The change reaches the stream server on the channel: call until it answers ``wanted`` ."""

    async def answers() -> bool:
        return bool(await _get_slot(geyser, channel, key, *forwarded) == wanted)

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


OK, DENIED = grpc.StatusCode.OK, grpc.StatusCode.PERMISSION_DENIED


async def test_behind_a_trusted_proxy_the_address_rule_reads_x_forwarded_for(
    geyser: GeyserClient, settings: Settings, devnode: Devnode, http: aiohttp.ClientSession, owner: Owner
) -> None:
    """The peer (127.0.0.1, the grpcio client standing for Envoy or nginx's ``grpc_pass``) is a trusted proxy:
    the client is the right-most ``x-forwarded-for`` entry that is not one, as on HTTP; entries left of it
    are the client's own claims."""
    async with (
        _stream_server(settings, devnode, ["127.0.0.1"]) as port,
        grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel,
    ):
        assert (await owner.put_rules(http, {"addresses": ["198.51.100.7"]})).status == 200
        await _until(geyser, channel, owner.key, OK, "198.51.100.7")
        assert await _get_slot(geyser, channel, owner.key) == DENIED  # the proxy's own address
        assert await _get_slot(geyser, channel, owner.key, "203.0.113.9") == DENIED
        assert await _get_slot(geyser, channel, owner.key, "198.51.100.7, 203.0.113.9") == DENIED  # a claim
        assert await _get_slot(geyser, channel, owner.key, "198.51.100.7, 127.0.0.1") == OK  # a trusted hop
        # Two metadata entries read as one field, in order (RFC 9110, 5.3): the last proxy's is the right-most.
        assert await _get_slot(geyser, channel, owner.key, "203.0.113.9", "198.51.100.7") == OK
        assert await _get_slot(geyser, channel, owner.key, "198.51.100.7", "203.0.113.9") == DENIED

        assert (await owner.put_rules(http, {"addresses": ["127.0.0.1"]})).status == 200
        await _until(geyser, channel, owner.key, OK)
        assert await _get_slot(geyser, channel, owner.key, "127.0.0.1") == OK
        assert await _get_slot(geyser, channel, owner.key, "198.51.100.7") == DENIED  # the proxy's rule: not theirs


async def test_from_a_peer_not_trusted_x_forwarded_for_is_ignored(
    geyser: GeyserClient, settings: Settings, devnode: Devnode, http: aiohttp.ClientSession, owner: Owner
) -> None:
    """A client reaching the server itself (127.0.0.1; only 127.0.0.2 is a trusted proxy) cannot name another
    address: its ``x-forwarded-for`` is not believed and the rules see the peer."""
    async with (
        _stream_server(settings, devnode, ["127.0.0.2"]) as port,
        grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel,
    ):
        assert (await owner.put_rules(http, {"addresses": ["198.51.100.7"]})).status == 200
        await _until(geyser, channel, owner.key, DENIED, "198.51.100.7")
        assert (await owner.put_rules(http, {"addresses": ["127.0.0.1"]})).status == 200
        await _until(geyser, channel, owner.key, OK, "198.51.100.7")
