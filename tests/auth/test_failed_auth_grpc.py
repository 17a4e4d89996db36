"""Failed authentications on the gRPC stream count against the client's address as on HTTP: the
stream server authenticates through the same authenticator (a server of this test's own, with a small
``auth_failures`` bucket; the generated Yellowstone client)."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from devnode.node import Devnode
from gateway.auth.api_keys import generate_api_key
from gateway.grpc.server import GrpcStreamServer
from gateway.settings import Settings
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
