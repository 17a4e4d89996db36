"""A second node: a replica on a machine whose data dir holds none of the service's key files.

Given the deposit and fee-payer addresses (as ``gateway up`` gives every process it starts, on any
machine) it advertises exactly those, creates no key (a new wallet there would be advertised in 402
terms and never watched; a new API-key secret would refuse every key), and its ``/health`` says the fee
payer's secret is not here. Given no address, or a fee-payer file holding another key, it does not start.
"""

from __future__ import annotations

import os
from pathlib import Path

import aiohttp
import pytest
import redis.asyncio as aioredis
from solders.keypair import Keypair

from gateway.app.replica import GatewayApp
from gateway.app.settings import Settings
from gateway.auth.store.service_keys import record_cluster_keys
from gateway.base.config import ConfigError
from gateway.base.keys import FEE_PAYER, ensure_service_keys
from tests.auth.helpers import RPC_BODY, request
from tests.support import RunningGateway, serve_gateway


def second_node(settings: Settings, home: Path, **changes: str | None) -> Settings:
    """The cluster's settings on another machine: its own home, the same addresses and API-key secret."""
    resolved = {"api_key_secret": os.urandom(32).hex(), **changes}
    return settings.model_copy(update={"home": home, **resolved})


async def health_keys(http: aiohttp.ClientSession, url: str) -> dict[str, object]:
    async with http.get(url + "/health") as resp:
        keys: dict[str, object] = (await resp.json())["keys"]
        return keys


async def test_a_second_node_without_the_key_files_serves_the_clusters_keys(
    settings: Settings, gateway: RunningGateway, redis_client: aioredis.Redis, tmp_path: Path
) -> None:
    deposit, fee_payer = settings.deposit_address, settings.fee_payer_address
    await record_cluster_keys(redis_client, {"deposit_address": deposit, "fee_payer_address": fee_payer})  # gateway up
    home = tmp_path / "other-machine"
    async with serve_gateway(second_node(settings, home)) as node, aiohttp.ClientSession() as http:
        refused = await request(http, "POST", node.url + "/", body=RPC_BODY)
        assert refused.status == 402
        terms = refused.json["error"]["data"]
        assert terms["deposit_address"] == terms["payTo"] == deposit
        assert terms["extra"]["feePayer"] == fee_payer
        settle = await request(http, "POST", node.url + "/x402/settle", body=b'{"transaction": "AA=="}')
        assert settle.status == 503  # no fee payer key on this machine: no sponsored payment, and no new one
        assert "not on this machine" in settle.json["error"]["message"]
        assert await health_keys(http, node.url) == {
            "deposit_address": deposit,
            "fee_payer_address": fee_payer,
            "fee_payer_key_here": False,
            "mismatch": None,
        }
        here = await health_keys(http, gateway.url)  # the first node, whose home holds the fee payer's file
        assert (here["deposit_address"], here["fee_payer_key_here"]) == (deposit, True)
    assert not (home / "keys").exists()


async def test_a_node_serving_other_addresses_than_the_cluster_says_so_in_health(
    settings: Settings, redis_client: aioredis.Redis, tmp_path: Path
) -> None:
    deposit, fee_payer = settings.deposit_address, settings.fee_payer_address
    await record_cluster_keys(redis_client, {"deposit_address": deposit, "fee_payer_address": fee_payer})
    stray = str(Keypair().pubkey())
    stray_node = second_node(settings, tmp_path, deposit_address=stray)
    async with serve_gateway(stray_node) as node, aiohttp.ClientSession() as http:
        keys = await health_keys(http, node.url)
    assert keys["deposit_address"] == stray
    assert isinstance(keys["mismatch"], str) and f"deposit_address is {stray} here but {deposit}" in keys["mismatch"]
    assert "fee_payer_address" not in keys["mismatch"]


@pytest.mark.parametrize(
    ("missing", "setting"), [("deposit_address", "GATEWAY_DEPOSIT_ADDRESS"), ("fee_payer_address", "GATEWAY_FEE_PAYER")]
)
def test_a_node_given_no_address_refuses_to_start_naming_the_setting(
    settings: Settings, tmp_path: Path, missing: str, setting: str
) -> None:
    with pytest.raises(ConfigError, match=setting):
        GatewayApp(second_node(settings, tmp_path, **{missing: None}))
    assert not (tmp_path / "keys").exists()  # and it created none


def test_a_node_whose_fee_payer_file_holds_another_key_refuses_to_start(settings: Settings, tmp_path: Path) -> None:
    ensure_service_keys(tmp_path)  # this machine's files are another cluster's keys
    with pytest.raises(ConfigError, match="GATEWAY_FEE_PAYER_ADDRESS") as refused:
        GatewayApp(second_node(settings, tmp_path))
    assert str(tmp_path / FEE_PAYER) in str(refused.value)
