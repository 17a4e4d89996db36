"""The client's tests run against a running gateway, as a user's code would: nothing of the server is imported.

    GATEWAY_URL      the gateway's base URL (http://127.0.0.1:8000)
    GATEWAY_GRPC     its gRPC address (127.0.0.1:10000)
    GATEWAY_WALLET   a keypair file (64 bytes as JSON) of a wallet whose account has credits and some SOL
    GATEWAY_API_KEY  that account's API key

The gateway's own CI runs them with the wheel installed in a clean virtual environment
(tests/integration/test_client_wheel.py in the gateway's repository).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gateway_client import WalletSigner


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: these tests need a running gateway (conftest.py says what to set)")
    return value


@pytest.fixture(scope="session")
def url() -> str:
    return _env("GATEWAY_URL")


@pytest.fixture(scope="session")
def grpc_target() -> str:
    return _env("GATEWAY_GRPC")


@pytest.fixture(scope="session")
def api_key() -> str:
    return _env("GATEWAY_API_KEY")


@pytest.fixture(scope="session")
def secret() -> bytes:
    """The wallet's 64-byte secret key (seed, then public key)."""
    return bytes(json.loads(Path(_env("GATEWAY_WALLET")).read_text()))


@pytest.fixture(scope="session")
def signer(secret: bytes) -> WalletSigner:
    return WalletSigner(secret)
