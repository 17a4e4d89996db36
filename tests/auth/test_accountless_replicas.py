"""A replica's remembered "no account" never outlives the account: created through another replica's
``POST /account/api-key``, the account is served by this one within a second (the creation is announced
on the ``CREDITED`` channel every process follows), and a channel lost and found again forgets every
"no" it holds, since a notice may have been missed meanwhile.

Two in-process GatewayApps on two ports share PostgreSQL and Redis, as two Serve replicas do
(tests/auth/test_replicas.py). Replica B's "no" is kept 600 s here, so that only the announcement or
the channel's loss can end it within the test: its 5 s bound is not what is being shown."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import aiohttp
import asyncpg
import pytest
import redis.asyncio as aioredis

from gateway.app.settings import Settings
from gateway_client import WalletSigner
from tests.auth.helpers import RPC_BODY, Answer, create_account, create_api_key, open_session, request, signed
from tests.grpc.client import eventually
from tests.support import RunningGateway, serve_gateway

#: How soon replica B must serve the new account: well under the 5 s a "no" is kept.
WITHIN_S = 1.0


async def pubsub_connections(redis_client: aioredis.Redis) -> set[int]:
    """The ids of the Redis connections subscribed to a channel (every process's followers)."""
    return {int(c["id"]) for c in await redis_client.client_list() if int(c.get("sub", 0)) > 0}


@pytest.fixture
async def replica_b(
    settings: Settings, gateway: RunningGateway, redis_client: aioredis.Redis
) -> AsyncIterator[tuple[RunningGateway, set[int]]]:
    """Replica B (A is the shared ``gateway``), following its channels, with its own subscriptions' ids."""
    others = await pubsub_connections(redis_client)
    async with serve_gateway(settings) as running:
        await eventually(lambda: running.app.callers.meter.hears_credits, "B follows the CREDITED channel")
        running.app.auth.no_accounts.ttl_s = 600.0
        yield running, await pubsub_connections(redis_client) - others


async def webhooks(http: aiohttp.ClientSession, signer: WalletSigner, replica: RunningGateway) -> Answer:
    """``GET /webhooks`` signed by the wallet: a route that needs an account and no credits."""
    return await signed(http, signer, "GET", replica.url, "/webhooks")


async def served_within(http: aiohttp.ClientSession, signer: WalletSigner, replica: RunningGateway) -> Answer:
    """The wallet's ``GET /webhooks`` on ``replica``, asked again until it is served or ``WITHIN_S`` passed."""
    started = time.monotonic()
    answer = await webhooks(http, signer, replica)
    while answer.status != 200 and time.monotonic() - started < WITHIN_S:
        await asyncio.sleep(0.02)
        answer = await webhooks(http, signer, replica)
    return answer


async def test_an_account_created_on_one_replica_is_served_by_another_at_once(
    gateway: RunningGateway,
    replica_b: tuple[RunningGateway, set[int]],
    http: aiohttp.ClientSession,
    signer: WalletSigner,
) -> None:
    b, _ = replica_b
    token = await open_session(http, signer, gateway.url)
    bearer = {"Authorization": f"Bearer {token}"}
    before = await webhooks(http, signer, b)
    assert (before.status, before.code) == (402, -32002), before  # no account: the deposit terms
    assert b.app.auth.no_accounts.known(signer.pubkey)  # B remembers it

    key = await create_api_key(http, signer, gateway.url)  # creates the account, on replica A

    after = await served_within(http, signer, b)
    assert after.status == 200 and after.json["webhooks"] == [], after
    assert not b.app.auth.no_accounts.known(signer.pubkey)
    # the same account on B's other credentials: known to exist, and short of credits on a paid route
    unfunded = await request(http, "POST", b.url + "/", body=RPC_BODY, headers=signer.headers("POST", "/", RPC_BODY))
    assert (unfunded.status, unfunded.code) == (402, -32010), unfunded
    session = await request(http, "POST", b.url + "/", body=RPC_BODY, headers=bearer)
    assert (session.status, session.code) == (402, -32010), session
    by_key = await request(http, "GET", b.url + "/webhooks", headers={"X-Api-Key": key})
    assert by_key.status == 200, by_key


async def test_a_lost_channel_forgets_every_no_it_holds(
    replica_b: tuple[RunningGateway, set[int]],
    http: aiohttp.ClientSession,
    signer: WalletSigner,
    db: asyncpg.Connection,
    redis_client: aioredis.Redis,
) -> None:
    b, followers = replica_b
    before = await webhooks(http, signer, b)
    assert (before.status, before.code) == (402, -32002), before
    assert b.app.auth.no_accounts.known(signer.pubkey) and followers

    for connection in followers:  # B's subscriptions end, as in a Redis restart or a network cut
        await redis_client.client_kill_filter(_id=str(connection))
    # the account appears while B is away: no notice of it reaches B (none is sent, as if it were lost)
    await create_account(db, signer.pubkey, usdc_base_units=0)

    after = await served_within(http, signer, b)
    assert after.status == 200 and after.json["webhooks"] == [], after
    await eventually(lambda: b.app.callers.meter.hears_credits, "B follows the CREDITED channel again")
    assert not followers & await pubsub_connections(redis_client)  # B follows over new connections
