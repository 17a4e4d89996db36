"""A replica given the deposit and fee-payer addresses (as ``gateway up`` gives every process it starts,
on any machine) advertises exactly those and creates no key, even on a machine whose data dir has none:
a new wallet there would be advertised in 402 terms and never watched (and a new API-key secret would
refuse every key)."""

from __future__ import annotations

import os
from pathlib import Path

import aiohttp
from solders.keypair import Keypair

from gateway.config import Settings
from tests.auth.helpers import RPC_BODY, request
from tests.support import serve_gateway


async def test_a_replica_on_a_machine_without_the_key_files_advertises_the_configured_wallet(
    settings: Settings, tmp_path: Path
) -> None:
    deposit, fee_payer = str(Keypair().pubkey()), str(Keypair().pubkey())
    resolved = {"deposit_address": deposit, "fee_payer_address": fee_payer, "api_key_secret": os.urandom(32).hex()}
    elsewhere = settings.model_copy(update={"home": tmp_path / "other-machine", **resolved})
    async with serve_gateway(elsewhere) as gateway, aiohttp.ClientSession() as http:
        refused = await request(http, "POST", gateway.url + "/", body=RPC_BODY)
        assert refused.status == 402
        terms = refused.json["error"]["data"]
        assert terms["deposit_address"] == terms["payTo"] == deposit
        assert terms["extra"]["feePayer"] == fee_payer
        settle = await request(http, "POST", gateway.url + "/x402/settle", body=b'{"transaction": "AA=="}')
        assert settle.status == 503  # no fee payer key on this machine: no sponsored payment, and no new one
    assert not (tmp_path / "other-machine" / "keys").exists()
