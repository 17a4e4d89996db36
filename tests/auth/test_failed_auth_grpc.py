"""Failed authentications on the gRPC stream count against the client's address as on HTTP: the
stream server authenticates through the same authenticator (a server of this test's own, with a small
``auth_failures`` bucket; the generated Yellowstone client)."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from devnode.node import Devnode
from gateway.app.settings import Settings
from gateway.auth.api_keys import generate_api_key
from gateway.grpc.server import GrpcStreamServer
from tests.grpc.conftest import GeyserClient, geyser
from tests.support import TEST_IP_LIMITS, service_key_settings

__all__ = ["geyser"]

BURST = 5


async def test_unknown_keys_on_grpc_are_refused_resource_exhausted_past_the_bound(
    geyser: GeyserClient, tmp_path: Path, database_url: str, redis_url: str, devnode: Devnode
) -> None:
    settings = Settings(
        **service_key_settings(tmp_path),
        home=tmp_path,
        database_url=database_url,
        redis_url=redis_url,
        upstream_rpc_url=devnode.rpc_url,
        upstream_grpc_url=devnode.grpc_url,
        ip_limits={**TEST_IP_LIMITS, "auth_failures": {"rps": 0.01, "burst": BURST}},
    )
    server = GrpcStreamServer(settings, port=0)
    await server.start()
    codes = []
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = geyser.grpc.GeyserStub(channel)
            for _ in range(BURST + 10):
                metadata = (("x-token", generate_api_key()),)
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await stub.GetSlot(geyser.pb2.GetSlotRequest(), metadata=metadata)
                codes.append(refused.value.code())
    finally:
        await server.stop()
    assert codes[:BURST] == [grpc.StatusCode.UNAUTHENTICATED] * BURST
    assert codes[BURST + 1 :] == [grpc.StatusCode.RESOURCE_EXHAUSTED] * 9
    assert "failed authentications" in (refused.value.details() or "")


async def test_behind_a_trusted_proxy_failed_authentications_count_against_the_forwarded_address(
    geyser: GeyserClient, tmp_path: Path, database_url: str, redis_url: str, devnode: Devnode
) -> None:
    """Behind a proxy listed in ``trusted_proxies`` (the peer 127.0.0.1, the grpcio client standing for it),
    the address is its ``x-forwarded-for`` metadata's, as for the access rules: one client spraying keys
    through the proxy uses up its own budget, never that of the others behind the same proxy."""
    settings = Settings(
        **service_key_settings(tmp_path),
        home=tmp_path,
        database_url=database_url,
        redis_url=redis_url,
        upstream_rpc_url=devnode.rpc_url,
        upstream_grpc_url=devnode.grpc_url,
        ip_limits={**TEST_IP_LIMITS, "auth_failures": {"rps": 0.01, "burst": BURST}},
        trusted_proxies=["127.0.0.1"],
    )
    server = GrpcStreamServer(settings, port=0)
    await server.start()

    async def refused(forwarded: str) -> grpc.StatusCode:
        metadata = (("x-token", generate_api_key()), ("x-forwarded-for", forwarded))
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await stub.GetSlot(geyser.pb2.GetSlotRequest(), metadata=metadata)
        code: grpc.StatusCode = error.value.code()
        return code

    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = geyser.grpc.GeyserStub(channel)
            sprayer = [await refused("198.51.100.7") for _ in range(BURST + 2)]
            assert sprayer[-1] == grpc.StatusCode.RESOURCE_EXHAUSTED, sprayer
            assert await refused("198.51.100.8") == grpc.StatusCode.UNAUTHENTICATED  # another client: its own budget
    finally:
        await server.stop()
