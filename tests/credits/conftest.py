"""Fixtures of the credit tests: a pool on the session's real PostgreSQL, fresh accounts, funding."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import asyncpg
import base58
import pytest

from gateway.credits.model import CreditPolicy, DepositCredit
from gateway.credits.store import credit_deposit

#: One credit per base unit, no minimum: lets a test fund an account with exactly N credits.
EXACT = CreditPolicy(credits_per_usdc=10**6, credit_expiry_seconds=3600, minimum_base_units=1)


def new_pubkey() -> str:
    return str(base58.b58encode(os.urandom(32)).decode())


def new_signature() -> str:
    return str(base58.b58encode(os.urandom(64)).decode())


async def fund(pool: asyncpg.Pool, pubkey: str, credits: int, expiry_s: int = 3600) -> None:
    """Deposit exactly ``credits`` credits (creating the account)."""
    policy = CreditPolicy(credits_per_usdc=10**6, credit_expiry_seconds=expiry_s, minimum_base_units=1)
    outcome = await credit_deposit(pool, DepositCredit(new_signature(), pubkey, credits), policy)
    assert outcome.credited


@pytest.fixture(scope="session")
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    p = await asyncpg.create_pool(database_url, min_size=2, max_size=10)
    yield p
    await p.close()


@pytest.fixture
def pubkey() -> str:
    return new_pubkey()
