"""Helpers of the credit tests: fresh public keys and signatures, exact funding, a scripted node."""

from __future__ import annotations

import asyncio
import base64
import os
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import base58
import orjson
from solders.hash import Hash
from solders.keypair import Keypair
from solders.message import Message
from solders.system_program import TransferParams, transfer
from solders.transaction import Transaction

from gateway.core.credits import CreditPolicy, DepositCredit
from gateway.credits.store import credit_deposit

#: One credit per base unit, no minimum: lets a test fund an account with exactly N credits.
EXACT = CreditPolicy(credits_per_usdc=10**6, credit_expiry_seconds=3600, minimum_base_units=1)


def new_pubkey() -> str:
    return str(base58.b58encode(os.urandom(32)).decode())


def new_signature() -> str:
    return str(base58.b58encode(os.urandom(64)).decode())


def signed_tx(encoding: str = "base58") -> str:
    """A real signed transfer (base58 by default, sendTransaction's default encoding): the gateway
    verifies a send's signatures before billing it, whatever node is behind it."""
    payer = Keypair()
    ix = transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=Keypair().pubkey(), lamports=1))
    raw = bytes(Transaction([payer], Message.new_with_blockhash([ix], payer.pubkey(), Hash.default()), Hash.default()))
    return base58.b58encode(raw).decode() if encoding == "base58" else base64.b64encode(raw).decode()


async def fund(pool: asyncpg.Pool, pubkey: str, credits: int, expiry_s: int = 3600) -> None:
    """Deposit exactly ``credits`` credits (creating the account)."""
    policy = CreditPolicy(credits_per_usdc=10**6, credit_expiry_seconds=expiry_s, minimum_base_units=1)
    outcome = await credit_deposit(pool, DepositCredit(new_signature(), pubkey, credits), policy)
    assert outcome.credited


@dataclass
class ScriptedNode:
    """Answers each call with ``result: 1`` unless ``errors`` names the method; can fail whole requests."""

    errors: dict[str, dict[str, Any]] = field(default_factory=dict)
    fail: Exception | None = None
    gate: asyncio.Event | None = None
    arrived: asyncio.Event | None = None
    seen: list[str] = field(default_factory=list)

    async def post(self, body: bytes, timeout_s: float, *, replayable: bool = False) -> bytes:
        request = orjson.loads(body)
        calls = request if isinstance(request, list) else [request]
        self.seen.extend(c["method"] for c in calls)
        if self.arrived is not None:
            self.arrived.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        answers = [self._answer(c) for c in calls]
        return orjson.dumps(answers if isinstance(request, list) else answers[0])

    def _answer(self, call: dict[str, Any]) -> dict[str, Any]:
        error = self.errors.get(call["method"])
        if error is not None:
            return {"jsonrpc": "2.0", "id": call["id"], "error": error}
        return {"jsonrpc": "2.0", "id": call["id"], "result": 1}
