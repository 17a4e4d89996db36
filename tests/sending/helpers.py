"""Building what a sender sends: real signed transactions on the devnode (solders), and the gateway
calls a client makes with them."""

from __future__ import annotations

import base64
import os
from typing import Any

import aiohttp
from solana.rpc.async_api import AsyncClient
from solders.compute_budget import set_compute_unit_price
from solders.hash import Hash
from solders.instruction import Instruction
from solders.keypair import Keypair
from solders.message import Message
from solders.pubkey import Pubkey
from solders.system_program import TransferParams, transfer
from solders.transaction import Transaction

from gateway.sending.bundles import TIP_ACCOUNTS
from gateway_client import WalletSigner

TIP_ACCOUNT = Pubkey.from_string(sorted(TIP_ACCOUNTS)[0])


async def latest_blockhash(node_url: str) -> Hash:
    async with AsyncClient(node_url) as client:
        return (await client.get_latest_blockhash()).value.blockhash


def transfer_ix(payer: Keypair, to: Pubkey, lamports: int) -> Instruction:
    return transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=to, lamports=lamports))


def signed(payer: Keypair, instructions: list[Instruction], blockhash: Hash) -> Transaction:
    return Transaction([payer], Message.new_with_blockhash(instructions, payer.pubkey(), blockhash), blockhash)


def b64(tx: Transaction) -> str:
    return base64.b64encode(bytes(tx)).decode()


def pay(payer: Keypair, lamports: int, blockhash: Hash, *, tip: int = 0, cu_price: int | None = None) -> Transaction:
    """A transfer to a fresh address (so every transaction differs), with a tip and a priority fee if asked."""
    ixs = [] if cu_price is None else [set_compute_unit_price(cu_price)]
    ixs.append(transfer_ix(payer, Keypair().pubkey(), lamports))
    if tip:
        ixs.append(transfer_ix(payer, TIP_ACCOUNT, tip))
    return signed(payer, ixs, blockhash)


async def node_simulation(node_url: str, tx: Transaction) -> dict[str, Any]:
    """The node's own ``simulateTransaction`` of ``tx`` (its ``value``): what 5 credits buy."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "simulateTransaction", "params": [b64(tx), {"encoding": "base64"}]}
    async with aiohttp.ClientSession() as http, http.post(node_url, json=body) as resp:
        value: dict[str, Any] = (await resp.json())["result"]["value"]
    return value


def unknown_blockhash() -> Hash:
    return Hash(os.urandom(32))


class Caller:
    """A paying caller of the gateway, with an API key."""

    def __init__(self, http: aiohttp.ClientSession, url: str, signer: WalletSigner, key: str) -> None:
        self.http = http
        self.url = url
        self.signer = signer
        self.headers = {"X-Api-Key": key}

    async def rpc(self, method: str, params: list[Any]) -> tuple[int, dict[str, Any], int]:
        """(HTTP status, JSON-RPC answer, X-Credits-Remaining)."""
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        async with self.http.post(self.url + "/", json=body, headers=self.headers) as resp:
            return resp.status, await resp.json(), int(resp.headers.get("X-Credits-Remaining", "-1"))

    async def result(self, method: str, params: list[Any]) -> Any:
        status, doc, _ = await self.rpc(method, params)
        assert status == 200 and "result" in doc, doc
        return doc["result"]
