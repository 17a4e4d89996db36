"""The node failing under a running gateway: errors never show the node's address, and the charge
follows the one refund rule (not reached: refunded; reached and cut off: reads refunded, sends charged).

The node is the real devnode behind a relay this test controls (a plain HTTP forwarder that can be
told to refuse connections, to cut them after reading a request and starting its answer, or to close a
kept-alive one as the next request comes, as a server closing an idle connection does): no real node
fails on command.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import asyncpg
import orjson
import pytest
from aiohttp import web

from gateway.app.settings import Settings
from gateway.runtime.ports import free_port
from gateway_client import BackendUnavailable, GatewayClient, WalletSigner
from tests.auth.helpers import RPC_BODY, create_account, create_api_key, request
from tests.credits.helpers import signed_tx
from tests.support import TEST_IP_LIMITS, RunningGateway, serve_gateway, service_key_settings

SECRET = "sekrit-provider-token"


class Relay:
    """Forwards JSON-RPC to the devnode; ``cut`` makes it close the connection after the first bytes of
    an answer, ``idle_close`` close a connection without a byte on the request after its first; ``cut_methods``
    cut the answers of single calls of those methods only."""

    def __init__(self, node_url: str) -> None:
        self.node_url = node_url
        self.port = free_port()
        self.cut = False
        self.cut_methods: set[str] = set()
        self.idle_close = False
        self.seen = 0  # requests that reached the relay
        self.calls: Counter[str] = Counter()  # single calls by method (not the health probe's batches)
        self.served: Counter[object] = Counter()  # requests answered, by connection
        self._runner: web.AppRunner | None = None
        self._http: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/", self._relay)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        self._http = aiohttp.ClientSession()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._http is not None:
            await self._http.close()

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.seen += 1
        call = orjson.loads(body)
        if isinstance(call, dict):
            self.calls[call.get("method", "?")] += 1
        transport = request.transport
        assert transport is not None
        if self.cut or (
            isinstance(call, dict) and call.get("method") in self.cut_methods
        ):  # the request was read: it reached the "node", which began to answer
            transport.write(b"HTTP/1.1 200 OK\r\n")
            transport.close()
            return web.Response()
        if self.idle_close and self.served[transport]:
            transport.close()
            return web.Response()
        self.served[transport] += 1
        assert self._http is not None
        async with self._http.post(self.node_url, data=body, headers={"Content-Type": "application/json"}) as resp:
            return web.Response(body=await resp.read(), content_type="application/json")


@pytest.fixture
async def relay(devnode_url: str) -> AsyncIterator[Relay]:
    running = Relay(devnode_url)
    await running.start()
    yield running
    await running.stop()


@pytest.fixture
async def gateway(relay: Relay, tmp_path: Path, database_url: str, redis_url: str) -> AsyncIterator[RunningGateway]:
    settings = Settings.model_validate(
        {
            "home": tmp_path,
            **service_key_settings(tmp_path),
            "database_url": database_url,
            "redis_url": redis_url,
            "upstream_rpc_url": f"http://127.0.0.1:{relay.port}/?api-key={SECRET}",
            "ip_limits": TEST_IP_LIMITS,
        }
    )
    async with serve_gateway(settings) as running:
        yield running


async def funded_key(gateway: RunningGateway, http: aiohttp.ClientSession, db: asyncpg.Connection) -> str:
    signer = WalletSigner(os.urandom(32))
    await create_account(db, signer.pubkey)  # 10,000 credits
    return await create_api_key(http, signer, gateway.url)


def send_body() -> bytes:
    """A batch of a read and a send (a signed transaction: the gateway verifies it before billing)."""
    send = {"jsonrpc": "2.0", "id": 2, "method": "sendTransaction", "params": [signed_tx()]}
    return orjson.dumps([{"jsonrpc": "2.0", "id": 1, "method": "getSlot"}, send])


async def test_an_unreachable_node_is_502_without_its_address_and_refunded(
    gateway: RunningGateway, relay: Relay, db: asyncpg.Connection
) -> None:
    async with aiohttp.ClientSession() as http:
        key = await funded_key(gateway, http, db)
        ok = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers={"X-Api-Key": key})
        assert ok.status == 200, ok
        before = int(ok.headers["x-credits-remaining"])
        await relay.stop()
        await asyncio.sleep(0.1)
        failed = await request(http, "POST", gateway.url + "/", body=send_body(), headers={"X-Api-Key": key})
        assert failed.status == 502 and failed.json["error"]["code"] == -32003, failed
        text = failed.raw.decode()
        assert "127.0.0.1" not in text and str(relay.port) not in text and SECRET not in text, text
        assert int(failed.headers["x-credits-remaining"]) == before  # nothing reached the node: all refunded


async def test_a_node_that_cuts_the_connection_costs_the_send_not_the_read(
    gateway: RunningGateway, relay: Relay, db: asyncpg.Connection
) -> None:
    async with aiohttp.ClientSession() as http:
        key = await funded_key(gateway, http, db)
        ok = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers={"X-Api-Key": key})
        before = int(ok.headers["x-credits-remaining"])
        relay.cut = True
        failed = await request(http, "POST", gateway.url + "/", body=send_body(), headers={"X-Api-Key": key})
        assert failed.status == 502, failed
        assert SECRET not in failed.raw.decode() and str(relay.port) not in failed.raw.decode()
        # the read is refunded; the send may have been broadcast, so its 2 credits stay charged
        assert int(failed.headers["x-credits-remaining"]) == before - 2


async def test_the_client_retries_a_read_and_never_a_send(
    gateway: RunningGateway, relay: Relay, db: asyncpg.Connection
) -> None:
    """gateway_client.GatewayClient after a 502: a read is tried again with backoff; a send is not,
    since it may have been broadcast (the caller checks getSignatureStatuses first)."""
    async with aiohttp.ClientSession() as http:
        key = await funded_key(gateway, http, db)
    relay.cut = True
    async with GatewayClient(gateway.url, api_key=key, max_retries=2, backoff_s=0.01) as client:
        before = relay.calls["getSlot"]  # not relay.seen: the health probe goes there too
        with pytest.raises(BackendUnavailable) as read:
            await client.rpc("getSlot")
        assert relay.calls["getSlot"] - before == 3 and read.value.status == 502
        before = relay.calls["sendTransaction"]
        with pytest.raises(BackendUnavailable):
            await client.rpc("sendTransaction", [signed_tx()])
        assert relay.calls["sendTransaction"] - before == 1
        assert client.meter.request_id is not None and client.meter.credits_remaining is not None


async def test_a_read_lost_as_the_node_closes_an_idle_connection_is_answered_and_a_send_is_not_resent(
    gateway: RunningGateway, relay: Relay, db: asyncpg.Connection
) -> None:
    """Every connection the gateway keeps alive is closed by the node as its next request comes, with no
    byte of an answer: each read is sent once more on a new connection (docs/reliability.md); a send never."""
    async with aiohttp.ClientSession() as http:
        key = await funded_key(gateway, http, db)
        relay.idle_close = True
        before = relay.calls["getSlot"]
        for _ in range(2):  # the second surely goes out on the connection the first left idle
            read = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers={"X-Api-Key": key})
            assert read.status == 200 and isinstance(read.json["result"], int), read
        assert relay.calls["getSlot"] - before >= 3  # at least one went out twice
        charged = int(read.headers["x-credits-remaining"])
        send = orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "sendTransaction", "params": [signed_tx()]})
        before = relay.calls["sendTransaction"]  # not relay.seen: the health probe goes there too
        sent = await request(http, "POST", gateway.url + "/", body=send, headers={"X-Api-Key": key})
        assert relay.calls["sendTransaction"] - before == 1, sent  # lost on the idle connection, or answered
        assert sent.status in (200, 502), sent
        assert int(sent.headers["x-credits-remaining"]) == charged - 2  # the send's price, once
