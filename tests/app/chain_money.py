"""Money for the page's wallet, the way a person gets it: SOL and test USDC on the devnode, a real USDC transfer
to the deposit address, then ``POST /account/confirm-deposit``; and spending it with the API key."""

from __future__ import annotations

from typing import Any

import aiohttp
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair
from solders.pubkey import Pubkey

from devnode.node import Devnode
from tests.chain import airdrop, mint_usdc, send, transfer_usdc_instruction


async def deposit(devnode: Devnode, wallet: Keypair, deposit_address: str, base_units: int) -> str:
    """Fund ``wallet`` with SOL and test USDC and send ``base_units`` to the deposit wallet; finalized."""
    await airdrop(devnode.rpc_url, wallet.pubkey())
    async with AsyncClient(devnode.rpc_url) as node:
        await mint_usdc(node, devnode.usdc_mint_authority, wallet, wallet.pubkey(), base_units)
        instruction = transfer_usdc_instruction(wallet.pubkey(), Pubkey.from_string(deposit_address), base_units)
        sig = await send(node, wallet, [instruction], v0=True, finalized=True)
    return str(sig)


async def confirm_deposit(http: aiohttp.ClientSession, base: str, api_key: str, signature: str) -> Any:
    async with http.post(
        f"{base}/account/confirm-deposit", json={"signature": signature}, headers={"X-Api-Key": api_key}
    ) as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json()


async def rpc(http: aiohttp.ClientSession, base: str, headers: dict[str, str], method: str = "getSlot") -> int:
    """One JSON-RPC call; its HTTP status."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": []}
    async with http.post(f"{base}/", json=body, headers=headers) as resp:
        await resp.read()
        return resp.status


async def account_status(http: aiohttp.ClientSession, base: str, headers: dict[str, str]) -> int:
    async with http.get(f"{base}/account/info", headers=headers) as resp:
        await resp.read()
        return resp.status
