"""Issue 2 end to end: the whole stack started as ``gateway up`` starts it, driven with real clients."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair

from tests.chain import airdrop, mint_usdc, read_keypair, send_sol, transfer_usdc, usdc_account
from tests.integration.service import RunningService

pytestmark = pytest.mark.integration


@pytest.fixture
async def client(gateway_url: str, rpc_headers: dict[str, str]) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(gateway_url, extra_headers=rpc_headers) as c:
        yield c


async def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, object]:
    async with aiohttp.ClientSession() as s, s.post(url, data=body, headers=headers) as resp:
        return resp.status, await resp.json(content_type=None)


async def test_public_documents(gateway_url: str) -> None:
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{gateway_url}/health") as resp:
            health = await resp.json()
            assert resp.status == 200 and health["status"] == "ok", health
            assert health["agave_healthy"] is True and isinstance(health["solanaSlot"], int)
            assert "X-Credits-Remaining" not in resp.headers and "X-Request-Id" not in resp.headers
        async with s.get(f"{gateway_url}/pricing") as resp:
            pricing = await resp.json()
            assert pricing["ok"] is True and pricing["classes"]["READ_HEAVY"]["credits"] == 25
            assert "X-Request-Id" not in resp.headers
        async with s.get(f"{gateway_url}/capabilities") as resp:
            caps = await resp.json()
            assert caps["service_profile"]["services"]["archive_history"] is False
            assert caps["service_profile"]["services"]["yellowstone_grpc"] is True  # the stack serves it
            assert "X-Request-Id" not in resp.headers


async def test_one_request_id_per_response(gateway_url: str, rpc_headers: dict[str, str]) -> None:
    """Ray Serve adds an X-Request-ID of its own; the gateway's must be the only one (and the body's)."""
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{gateway_url}/account/confirm-deposit", data=b"{oops", headers=rpc_headers) as resp:
            body = await resp.json()  # a REST error body carries the request id too
            assert resp.status == 400
            assert resp.headers.getall("X-Request-Id") == [body["error"]["requestId"]]
        async with s.post(f"{gateway_url}/rpc", data=b"{oops", headers=rpc_headers) as resp:
            body = await resp.json()  # INVALID_REQUEST in the REST error body, with its JSON-RPC code
            assert resp.status == 400 and body["error"]["rpcCode"] == -32700
            (request_id,) = resp.headers.getall("X-Request-Id")
            assert len(request_id) == 32 and body["error"]["requestId"] == request_id
        ok = b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}'
        async with s.post(f"{gateway_url}/rpc", data=ok, headers=rpc_headers) as resp:
            assert resp.status == 200 and len(resp.headers.getall("X-Request-Id")) == 1


async def test_sol_transfer_lands_through_the_gateway(service: RunningService, client: AsyncClient) -> None:
    payer, receiver = Keypair(), Keypair()
    await airdrop(service.node_url, payer.pubkey())
    sig = await send_sol(client, payer, receiver.pubkey(), 1_234_567)
    assert (await client.get_balance(receiver.pubkey())).value == 1_234_567
    tx = (await client.get_transaction(sig, max_supported_transaction_version=0)).value
    assert tx is not None and tx.transaction.meta is not None and tx.transaction.meta.err is None
    statuses = (await client.get_signature_statuses([sig])).value
    assert statuses[0] is not None and statuses[0].err is None


async def test_usdc_mint_and_transfer_checked_through_the_gateway(service: RunningService, client: AsyncClient) -> None:
    authority = read_keypair(service.home / "devnode" / "usdc-mint-authority.json")
    alice, bob = Keypair(), Keypair()
    await airdrop(service.node_url, alice.pubkey())
    await airdrop(service.node_url, authority.pubkey())
    await mint_usdc(client, authority, alice, alice.pubkey(), 5_000_000)
    sig = await transfer_usdc(client, alice, bob.pubkey(), 1_250_000)
    assert (await client.get_token_account_balance(usdc_account(bob.pubkey()))).value.amount == "1250000"
    assert (await client.get_token_account_balance(usdc_account(alice.pubkey()))).value.amount == "3750000"
    tx = (await client.get_transaction(sig, max_supported_transaction_version=0)).value
    assert tx is not None and tx.transaction.meta is not None and tx.transaction.meta.err is None


@pytest.mark.parametrize(
    ("body", "status", "check"),
    [
        # 400 INVALID_REQUEST in the HTTP error body, its JSON-RPC code beside it (docs/api.md, Errors)
        (b"{oops", 400, lambda d: d["error"]["code"] == "INVALID_REQUEST" and d["error"]["rpcCode"] == -32700),
        (b'{"jsonrpc":"2.0","method":"getSlot"}', 400, lambda d: d["error"]["rpcCode"] == -32600),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"requestAirdrop","params":[]}',
            200,
            lambda d: d["error"]["code"] == -32601,
        ),
        (
            b'[{"jsonrpc":"2.0","id":1,"method":"getSlot"},{"jsonrpc":"1.0","id":2,"method":"getSlot"}]',
            200,
            lambda d: isinstance(d[0]["result"], int) and d[1]["error"]["code"] == -32600,
        ),
    ],
)
async def test_malformed_requests_get_documented_errors(
    gateway_url: str, rpc_headers: dict[str, str], body: bytes, status: int, check: object
) -> None:
    got_status, doc = await post(f"{gateway_url}/rpc", body, rpc_headers)
    assert got_status == status, doc
    assert callable(check) and check(doc), doc
