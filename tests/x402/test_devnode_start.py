"""``gateway up`` on the embedded devnode funds the fee payer and creates the deposit account, once."""

from __future__ import annotations

import asyncio
from pathlib import Path

from solana.rpc.async_api import AsyncClient

from gateway.base.config import USDC_MAINNET_MINT
from gateway.base.keys import DEPOSIT_WALLET, FEE_PAYER, load_or_create_keypair
from gateway.x402.devnode_settlement import FEE_PAYER_LAMPORTS, prepare_sponsored_settlement
from tests.chain import usdc_account


async def test_the_fee_payer_is_funded_and_the_deposit_account_made_once(
    tmp_path: Path, devnode_url: str, node: AsyncClient
) -> None:
    fee_payer = load_or_create_keypair(tmp_path / FEE_PAYER).pubkey()
    deposit = usdc_account(load_or_create_keypair(tmp_path / DEPOSIT_WALLET).pubkey())
    # blocking JSON-RPC, as the stack makes it; the session devnode answers on this test's loop
    report = await asyncio.to_thread(prepare_sponsored_settlement, devnode_url, tmp_path, USDC_MAINNET_MINT)
    assert "funded" in report, report
    funded = (await node.get_balance(fee_payer)).value
    assert FEE_PAYER_LAMPORTS // 2 < funded <= FEE_PAYER_LAMPORTS  # less the account's rent and fee
    assert (await node.get_account_info(deposit)).value is not None

    again = await asyncio.to_thread(prepare_sponsored_settlement, devnode_url, tmp_path, USDC_MAINNET_MINT)
    assert again == report and (await node.get_balance(fee_payer)).value == funded


async def test_a_devnode_that_cannot_be_reached_is_reported_not_raised(tmp_path: Path) -> None:
    report = await asyncio.to_thread(prepare_sponsored_settlement, "http://127.0.0.1:9", tmp_path, USDC_MAINNET_MINT)
    assert report.startswith("sponsored settlement not ready"), report
