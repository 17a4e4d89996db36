"""A rules change made on one replica holds on another within a second (docs/api.md, "Access rules"): its
calls are refused and its open sockets the new rules forbid close 4004, as a rotated key's do (two
GatewayApps on two ports share PostgreSQL and Redis, as two Serve replicas do)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest

from gateway.access.rules import ACCESS_DENIED_CLOSE, ACCESS_DENIED_RPC
from gateway.app.settings import Settings
from tests.access.conftest import Owner, rpc
from tests.pubsub.test_ws import ask, close_code, socket
from tests.support import RunningGateway, serve_gateway

#: The documented bound (docs/api.md, "Access rules"): a change holds everywhere within a second.
WITHIN_S = 1.0


@pytest.fixture
async def replica_b(settings: Settings) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(settings) as running:
        yield running


async def test_a_change_on_one_replica_refuses_calls_and_closes_sockets_on_another(
    gateway: RunningGateway, replica_b: RunningGateway, http: aiohttp.ClientSession, owner: Owner
) -> None:
    key = {"X-Api-Key": owner.key}
    assert (await rpc(http, replica_b.url, key)).status == 200  # B has the account's rules (none) cached
    assert replica_b.app.access.cached(owner.signer.pubkey) is not None
    wallet = owner.wallet("GET", "/ws", b"")
    async with socket(replica_b, owner.key) as by_key, socket(replica_b, additional_headers=wallet) as by_wallet:
        for ws in (by_key, by_wallet):
            assert isinstance((await ask(ws, "getSlot"))["result"], int)
        ended = asyncio.ensure_future(close_code(by_key))
        put = await owner.put_rules(http, {"addresses": ["127.0.0.2"]}, base=gateway.url)  # on replica A
        changed_at = time.monotonic()
        assert put.status == 200, put
        refused = await rpc(http, replica_b.url, key)
        while refused.status == 200 and time.monotonic() - changed_at < WITHIN_S:
            await asyncio.sleep(0.01)
            refused = await rpc(http, replica_b.url, key)
        assert (refused.status, refused.code) == (403, ACCESS_DENIED_RPC), refused
        code, reason = await asyncio.wait_for(ended, WITHIN_S)
        assert code == ACCESS_DENIED_CLOSE and reason is not None and reason.startswith("ACCESS_DENIED"), (code, reason)
        assert isinstance((await ask(by_wallet, "getSlot", req_id=2))["result"], int)  # the owner's socket stays
    lifted = await owner.put_rules(http, {}, base=gateway.url)
    assert lifted.status == 200
    lifted_at = time.monotonic()
    allowed = await rpc(http, replica_b.url, key)
    while allowed.status != 200 and time.monotonic() - lifted_at < WITHIN_S:
        await asyncio.sleep(0.01)
        allowed = await rpc(http, replica_b.url, key)
    assert allowed.status == 200, allowed
