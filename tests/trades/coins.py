"""The pump.fun coins on a chain, read from the node itself (not through the gateway): every bonding curve
account of the pump program, and its mint (the mint of the curve's own token account, its associated
bonding curve). Also the small reads the trade tests check results against."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import aiohttp
from solders.pubkey import Pubkey

from pumpfun import pda
from pumpfun.accounts import BONDING_CURVE_ACCOUNT_SIZE, BondingCurve, Global, decode_bonding_curve, decode_global
from pumpfun.ids import PUMP_PROGRAM_ID, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID, USDC_MINT

TOKEN_PROGRAMS = (TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID)


@dataclass(frozen=True)
class Coin:
    mint: Pubkey
    address: Pubkey  # the bonding curve
    curve: BondingCurve
    token_program: Pubkey

    @property
    def live(self) -> bool:
        return not self.curve.complete and self.curve.virtual_token_reserves > 0

    @property
    def sol_quoted(self) -> bool:
        return self.curve.is_sol_quoted

    @property
    def usdc_quoted(self) -> bool:
        return self.curve.quote_mint == USDC_MINT


async def rpc(url: str, body: Any) -> Any:
    async with aiohttp.ClientSession() as http, http.post(url, json=body) as resp:
        return await resp.json()


async def call(url: str, method: str, params: list[Any]) -> Any:
    doc = await rpc(url, {"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    assert "result" in doc, doc
    return doc["result"]


async def coins(url: str) -> list[Coin]:
    """Every coin with a bonding curve on the chain at ``url``."""
    config = {"encoding": "base64", "filters": [{"dataSize": BONDING_CURVE_ACCOUNT_SIZE}], "commitment": "processed"}
    listed = await call(url, "getProgramAccounts", [str(PUMP_PROGRAM_ID), config])
    curves = {
        Pubkey.from_string(a["pubkey"]): decode_bonding_curve(base64.b64decode(a["account"]["data"][0])) for a in listed
    }
    batch = [
        {
            "jsonrpc": "2.0",
            "id": i,
            "method": "getTokenAccountsByOwner",
            "params": [str(address), {"programId": str(program)}, {"encoding": "jsonParsed"}],
        }
        for i, (address, program) in enumerate((a, p) for a in curves for p in TOKEN_PROGRAMS)
    ]
    answers = {a["id"]: a.get("result") for a in await rpc(url, batch)} if batch else {}
    out: list[Coin] = []
    for i, address in enumerate(curves):
        for j, program in enumerate(TOKEN_PROGRAMS):
            for entry in (answers.get(2 * i + j) or {}).get("value", []):
                mint = Pubkey.from_string(entry["account"]["data"]["parsed"]["info"]["mint"])
                if pda.bonding_curve_pda(mint) == address:
                    out.append(Coin(mint, address, curves[address], program))
    return out


async def account_bytes(url: str, address: Pubkey) -> bytes | None:
    found = await call(url, "getAccountInfo", [str(address), {"encoding": "base64", "commitment": "processed"}])
    value = found["value"]
    return None if value is None else base64.b64decode(value["data"][0])


async def curve_of(url: str, mint: Pubkey) -> BondingCurve:
    data = await account_bytes(url, pda.bonding_curve_pda(mint))
    assert data is not None
    return decode_bonding_curve(data)


async def pump_global(url: str) -> Global:
    data = await account_bytes(url, pda.global_pda())
    assert data is not None
    return decode_global(data)


async def token_amount(url: str, owner: Pubkey, mint: Pubkey, program: Pubkey) -> int:
    """Raw units in ``owner``'s associated token account for ``mint`` (0 without one)."""
    data = await account_bytes(url, pda.associated_token_address(owner, mint, program))
    return 0 if data is None else int.from_bytes(data[64:72], "little")
