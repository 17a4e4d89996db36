"""Requests the auth tests make over and over."""

from __future__ import annotations

import secrets
from typing import Any

import aiohttp
import asyncpg
import orjson

from gateway.core.credits import CreditPolicy, DepositCredit
from gateway.credits.store import credit_deposit_on
from gateway_client import WalletSigner
from tests.support import RunningGateway

RPC_BODY = b'{"jsonrpc":"2.0","id":7,"method":"getSlot"}'


class Answer:
    """Status, headers and parsed body of one HTTP answer."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.raw = body
        self.json: Any = orjson.loads(body) if body else None

    @property
    def code(self) -> Any:
        """The HTTP error body's constant, or the JSON-RPC error code."""
        error = self.json.get("error") if isinstance(self.json, dict) else None
        return error.get("code") if isinstance(error, dict) else None

    def __repr__(self) -> str:
        return f"<{self.status} {self.raw[:300]!r}>"


async def request(
    http: aiohttp.ClientSession,
    method: str,
    url: str,
    *,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    params: dict[str, str] | None = None,
) -> Answer:
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    async with http.request(method, url, data=body, headers=all_headers, params=params) as resp:
        return Answer(resp.status, {k.lower(): v for k, v in resp.headers.items()}, await resp.read())


async def signed(
    http: aiohttp.ClientSession,
    signer: WalletSigner,
    method: str,
    base: str,
    path: str,
    body: bytes = b"",
    **sign_options: Any,
) -> Answer:
    headers = signer.headers(method, path, body, **sign_options)
    return await request(http, method, base + path, body=body, headers=headers)


async def create_api_key(http: aiohttp.ClientSession, signer: WalletSigner, base: str, body: bytes = b"{}") -> str:
    answer = await signed(http, signer, "POST", base, "/account/api-key", body)
    assert answer.status == 200, answer
    key = answer.json["api_key"]
    assert isinstance(key, str)
    return key


async def open_session(http: aiohttp.ClientSession, signer: WalletSigner, base: str) -> str:
    challenge = await request(http, "POST", base + "/auth/challenge", body=orjson.dumps({"pubkey": signer.pubkey}))
    assert challenge.status == 200, challenge
    text = challenge.json["challenge"]
    verify = {"pubkey": signer.pubkey, "challenge": text, "signature": signer.sign_challenge(text)}
    answer = await request(http, "POST", base + "/auth/verify", body=orjson.dumps(verify))
    assert answer.status == 200, answer
    token = answer.json["token"]
    assert isinstance(token, str)
    return token


async def create_account(db: asyncpg.Connection, pubkey: str, usdc_base_units: int = 100_000) -> None:
    """An account holding credits, granted through the ledger's own deposit path.

    The deposit is not an on-chain transfer (tests/credits covers those); auth tests need only an
    account that can pay for its calls. ``usdc_base_units=0`` makes a bare account with no credits.
    """
    if usdc_base_units == 0:
        await db.execute("INSERT INTO accounts (pubkey) VALUES ($1) ON CONFLICT DO NOTHING", pubkey)
        return
    deposit = DepositCredit(
        signature=f"test-deposit-{secrets.token_hex(16)}", pubkey=pubkey, amount_base_units=usdc_base_units
    )
    outcome = await credit_deposit_on(db, deposit, CreditPolicy(credits_per_usdc=100_000, credit_expiry_seconds=86_400))
    assert outcome.credited, outcome


async def deposit_credited(gateway: RunningGateway, pubkey: str) -> None:
    """What the deposit path does once it has credited ``pubkey`` (:func:`create_account` writes the ledger
    itself): tell this replica's meter and auth, and every other process on the ``CREDITED`` channel."""
    await gateway.app.callers.notices.credited(pubkey)
