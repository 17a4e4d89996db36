"""Fixtures of the credit tests: a pool on the session's real PostgreSQL and a fresh account key."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.credits.helpers import new_pubkey


@pytest.fixture(scope="session")
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    p = await asyncpg.create_pool(database_url, min_size=2, max_size=10)
    yield p
    await p.close()


@pytest.fixture
def pubkey() -> str:
    return new_pubkey()
