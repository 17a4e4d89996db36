"""What must hold across replicas and restarts: two GatewayApps on two ports share Redis and PostgreSQL.

Two in-process GatewayApps stand for two Serve replicas: each has its own connections, caches and
pub/sub subscription, exactly what a replica has; only Ray's routing in front of them is missing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import asyncpg
import pytest

from gateway.app.settings import Settings
from gateway_client import WalletSigner
from tests.auth.helpers import RPC_BODY, create_account, create_api_key, request
from tests.grpc.client import eventually
from tests.support import RunningGateway, serve_gateway


@pytest.fixture(scope="module")
async def replica_b(settings: Settings) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(settings) as running:
        yield running


async def test_replay_on_another_replica_is_refused(
    gateway: RunningGateway,
    replica_b: RunningGateway,
    http: aiohttp.ClientSession,
    signer: WalletSigner,
    db: asyncpg.Connection,
) -> None:
    await create_account(db, signer.pubkey)
    headers = signer.headers("POST", "/", RPC_BODY)
    first = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers=headers)
    assert first.status == 200, first
    replay = await request(http, "POST", replica_b.url + "/", body=RPC_BODY, headers=headers)
    assert (replay.status, replay.code) == (403, "NONCE_REUSED"), replay


@pytest.mark.usefixtures("funded")
async def test_rotation_on_one_replica_is_refused_by_the_other_at_once(
    gateway: RunningGateway, replica_b: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    old = await create_api_key(http, signer, gateway.url)
    for _ in range(2):  # the second answer comes from replica B's cache
        warm = await request(http, "POST", replica_b.url + "/", body=RPC_BODY, headers={"X-Api-Key": old})
        assert warm.status == 200, warm
    assert replica_b.app.auth.api_keys.cache_live  # type: ignore[attr-defined]

    heard = replica_b.app.auth.revocations.generation
    new = await create_api_key(http, signer, gateway.url)  # rotated through replica A
    # the revocation reaches B on the Redis channel, not with A's answer: wait for B to hear it (not for
    # any cache to expire) before asking B, or the test races the channel's delivery
    await eventually(lambda: replica_b.app.auth.revocations.generation != heard, "B heard the revocation")
    refused = await request(http, "POST", replica_b.url + "/", body=RPC_BODY, headers={"X-Api-Key": old})
    assert (refused.status, refused.code) == (401, "AUTH_FAILED"), refused
    accepted = await request(http, "POST", replica_b.url + "/", body=RPC_BODY, headers={"X-Api-Key": new})
    assert accepted.status == 200, accepted


async def test_nonce_survives_a_gateway_restart(
    settings: Settings, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection
) -> None:
    await create_account(db, signer.pubkey)
    headers = signer.headers("POST", "/", RPC_BODY)
    async with serve_gateway(settings) as before:
        assert (await request(http, "POST", before.url + "/", body=RPC_BODY, headers=headers)).status == 200
    async with serve_gateway(settings) as after:
        replay = await request(http, "POST", after.url + "/", body=RPC_BODY, headers=headers)
    assert (replay.status, replay.code) == (403, "NONCE_REUSED"), replay
