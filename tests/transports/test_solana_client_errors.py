"""Issue 6: the refusals a Solana client meets, as solana-py and solders surface them.

A body that is not JSON and a batch over 100 answer HTTP 400 ``{error: {code: "INVALID_REQUEST", message,
requestId, rpcCode}}`` (the interface's table; issue 39), which solana-py raises as ``SolanaRpcException``
and the gateway's client types as ``InvalidRequest``; an unknown method names the closest known ones and ``/pricing``;
a wrong API key says how to get the current one (``gateway fund`` on a devnode gateway).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import asyncpg
import httpx2
import orjson
import pytest
from solana.exceptions import SolanaRpcException
from solana.rpc.core import RPCException
from solders.keypair import Keypair
from solders.rpc.errors import MethodNotFoundMessage
from solders.rpc.requests import GetSlot, batch_to_json
from solders.rpc.responses import GetSlotResp

from gateway.app.settings import Settings
from gateway.auth.api_keys import generate_api_key
from gateway.base.config import DEVNODE
from gateway_client import AuthFailed, InvalidRequest, WalletSigner, gateway_error, solana_client
from tests.auth.helpers import create_account, create_api_key
from tests.support import TEST_IP_LIMITS, RunningGateway, serve_gateway, service_key_settings


class RawBody:
    """What solana-py's provider sends (``to_json``): here any text, as a client with a bug would."""

    def __init__(self, text: str) -> None:
        self.text = text

    def to_json(self) -> str:
        return self.text


@pytest.fixture(scope="module")
async def gateway(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, redis_url: str, devnode_url: str
) -> AsyncIterator[RunningGateway]:
    home = tmp_path_factory.mktemp("client-errors")
    settings = Settings.model_validate(
        {
            "home": home,
            **service_key_settings(home),
            "database_url": database_url,
            "redis_url": redis_url,
            "upstream_rpc_url": devnode_url,
            "network": DEVNODE,  # a dev gateway: the embedded devnode's network
            "ip_limits": TEST_IP_LIMITS,
        }
    )
    async with serve_gateway(settings) as running:
        yield running


@pytest.fixture(scope="module")
async def api_key(gateway: RunningGateway, database_url: str) -> str:
    signer = WalletSigner(bytes(Keypair()))
    db = await asyncpg.connect(database_url)
    try:
        await create_account(db, signer.pubkey)
    finally:
        await db.close()
    async with aiohttp.ClientSession() as http:
        return await create_api_key(http, signer, gateway.url)


async def refused(gateway: RunningGateway, api_key: str, text: str) -> SolanaRpcException:
    async with solana_client(gateway.url, api_key=api_key) as client:
        with pytest.raises(SolanaRpcException) as info:
            await client._provider.make_request(RawBody(text), GetSlotResp)  # type: ignore[arg-type]
    return info.value


async def test_a_body_that_is_not_json_is_an_invalid_request(gateway: RunningGateway, api_key: str) -> None:
    exc = await refused(gateway, api_key, '{"jsonrpc": "2.0", "id": 1, "method": "getSlot"')
    cause = exc.__cause__
    assert isinstance(cause, httpx2.HTTPStatusError) and cause.response.status_code == 400
    error = orjson.loads(cause.response.content)["error"]
    assert error["rpcCode"] == -32700 and "not valid JSON" in error["message"], error
    typed = gateway_error(exc)  # the gateway's client library, on top of solana-py
    assert isinstance(typed, InvalidRequest) and typed.code == "INVALID_REQUEST", typed
    assert typed.request_id == error["requestId"], typed


async def test_a_batch_over_100_is_an_invalid_request(gateway: RunningGateway, api_key: str) -> None:
    exc = await refused(gateway, api_key, batch_to_json([GetSlot(id=i) for i in range(101)]))
    cause = exc.__cause__
    assert isinstance(cause, httpx2.HTTPStatusError) and cause.response.status_code == 400
    error = orjson.loads(cause.response.content)["error"]
    assert error["rpcCode"] == -32600 and "batch of 101 exceeds the maximum of 100" in error["message"], error
    typed = gateway_error(exc)
    assert isinstance(typed, InvalidRequest) and typed.code == "INVALID_REQUEST", typed


async def test_the_rest_routes_keep_the_spec_constant(gateway: RunningGateway, api_key: str) -> None:
    async with httpx2.AsyncClient() as http:
        answer = await http.post(f"{gateway.url}/bulk/getBalances", content=b"{oops", headers={"X-Api-Key": api_key})
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "INVALID_REQUEST", answer.text


async def test_an_unknown_method_names_the_closest_ones_and_pricing(gateway: RunningGateway, api_key: str) -> None:
    async with solana_client(gateway.url, api_key=api_key) as client:
        with pytest.raises(RPCException) as info:
            body = RawBody('{"jsonrpc": "2.0", "id": 1, "method": "getSlott"}')
            await client._provider.make_request(body, GetSlotResp)  # type: ignore[arg-type]
    error = info.value.args[0]
    assert isinstance(error, MethodNotFoundMessage), error
    assert error.message == (
        "Method not found: getSlott. Did you mean getSlot? The methods and their prices: GET /pricing"
    )


async def test_a_wrong_api_key_says_how_to_get_the_current_one(gateway: RunningGateway) -> None:
    async with solana_client(gateway.url, api_key=generate_api_key()) as client:
        with pytest.raises(SolanaRpcException) as info:
            await client.get_slot()
    typed = gateway_error(info.value)
    assert isinstance(typed, AuthFailed) and typed.status == 401, typed
    assert "invalid or revoked API key" in typed.message
    assert "`gateway fund` prints its wallet's current key" in typed.message, typed.message
    assert "POST /account/api-key" in typed.message
