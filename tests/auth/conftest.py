"""Fixtures of the auth tests: one shared gateway in front of the devnode, fresh wallet keys."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import asyncpg
import pytest

from gateway.app.settings import Settings
from gateway.auth.api_keys import ApiKeyRotated
from gateway_client import WalletSigner
from tests.auth.helpers import create_account
from tests.support import TEST_IP_LIMITS, RunningGateway, serve_gateway, service_key_settings


@pytest.fixture(scope="session")
def auth_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("auth-home")


@pytest.fixture(scope="session")
def settings(auth_home: Path, database_url: str, redis_url: str, devnode_url: str) -> Settings:
    return Settings.model_validate(
        {
            "home": auth_home,
            **service_key_settings(auth_home),
            "database_url": database_url,
            "redis_url": redis_url,
            "upstream_rpc_url": devnode_url,
            "health_poll_s": 5.0,
            "ip_limits": TEST_IP_LIMITS,
        }
    )


@pytest.fixture(scope="session")
def rotations() -> list[ApiKeyRotated]:
    """Every ``api_key.rotated`` event the shared gateway emitted."""
    return []


@pytest.fixture(scope="session")
async def gateway(settings: Settings, rotations: list[ApiKeyRotated]) -> AsyncIterator[RunningGateway]:
    async def hook(event: ApiKeyRotated) -> None:
        rotations.append(event)

    async with serve_gateway(settings, on_api_key_rotated=hook) as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def signer() -> WalletSigner:
    """A fresh wallet per test, so tests never share accounts, nonces or keys."""
    return WalletSigner(os.urandom(32))


@pytest.fixture
async def funded(signer: WalletSigner, db: asyncpg.Connection) -> WalletSigner:
    """The test's wallet, with an account that holds credits (granted through the ledger's deposit path)."""
    await create_account(db, signer.pubkey)
    return signer
