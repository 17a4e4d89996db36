"""A revoked credential ends the gRPC streams it opened: the key rotated or the session logged out
through an HTTP gateway (another process on the same PostgreSQL and Redis, as a replica is), and the
stream ends UNAUTHENTICATED within seconds. Real grpcio client, real stores, the devnode's geyser."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import aiohttp
import asyncpg
import grpc
import pytest

from devnode.node import Devnode
from tests.auth.helpers import request
from tests.grpc.client import Subscription
from tests.grpc.conftest import GeyserClient, RunningStream, stream_settings
from tests.support import RunningGateway, serve_gateway

pytestmark = pytest.mark.asyncio


@pytest.fixture
async def http_replica(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, redis_url: str, devnode: Devnode
) -> AsyncIterator[RunningGateway]:
    settings = stream_settings(tmp_path_factory.mktemp("replica"), database_url, redis_url, devnode)
    async with serve_gateway(settings) as gw:
        yield gw


async def slots(geyser: GeyserClient, sub: Subscription) -> None:
    await sub.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
    await sub.until(lambda u: u.WhichOneof("update_oneof") == "slot")


async def test_a_key_rotated_on_another_process_ends_the_stream_unauthenticated(
    geyser: GeyserClient, stream: RunningStream, http_replica: RunningGateway, db: asyncpg.Connection
) -> None:
    pubkey, key = await stream.customer(db, 1_000)
    async with grpc.aio.insecure_channel(stream.address) as channel:
        sub = Subscription(geyser, channel, key)
        await slots(geyser, sub)
        started = time.monotonic()
        assert http_replica.app.auth.api_keys is not None
        await http_replica.app.auth.api_keys.rotate(pubkey, None)  # what POST /account/api-key does
        error = await sub.error()
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED, error
        assert "revoked" in (error.details() or "")
        assert time.monotonic() - started < 3
    assert stream.server.auth.revocations.held == 0


async def test_a_logout_ends_the_sessions_stream_and_leaves_another_session_streaming(
    geyser: GeyserClient, stream: RunningStream, http_replica: RunningGateway, db: asyncpg.Connection
) -> None:
    pubkey, _ = await stream.customer(db, 1_000)
    sessions = stream.server.auth.sessions
    assert sessions is not None
    token, other = await sessions.issue_token(pubkey), await sessions.issue_token(pubkey)
    async with grpc.aio.insecure_channel(stream.address) as channel:
        ended, kept = Subscription(geyser, channel, token), Subscription(geyser, channel, other)
        await slots(geyser, ended)
        await slots(geyser, kept)
        async with aiohttp.ClientSession() as http:
            headers = {"Authorization": f"Bearer {token}"}
            answer = await request(http, "POST", http_replica.url + "/auth/logout", body=b"{}", headers=headers)
            assert answer.status == 200, answer
        error = await ended.error()
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED, error
        assert "logged out" in (error.details() or "")
        await kept.until(lambda u: u.WhichOneof("update_oneof") == "slot")
