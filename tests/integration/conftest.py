"""Fixtures of the integration tests: one running service for the session and a funded customer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from solders.keypair import Keypair

from tests.integration.service import (
    Customer,
    RunningService,
    confirm_deposit,
    create_api_key,
    deposit_usdc,
    service_env,
    start_service,
    stop_service,
)


@pytest.fixture(scope="session")
def service_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("service")


@pytest.fixture(scope="session")
def service(service_home: Path) -> Iterator[RunningService]:
    running = start_service(service_home, service_env(service_home))
    yield running
    if running.process.poll() is None:
        stop_service(running)


@pytest.fixture(scope="session")
def gateway_url(service: RunningService) -> str:
    return service.url


@pytest.fixture(scope="session")
def customer(service: RunningService) -> Customer:
    """A wallet with an API key and 1 USDC of credits bought with a real on-chain deposit."""
    wallet = Keypair()
    customer = Customer(wallet, create_api_key(service.url, wallet))
    confirm_deposit(service, deposit_usdc(service, wallet, 1_000_000), customer.headers)
    return customer


@pytest.fixture(scope="session")
def rpc_headers(customer: Customer) -> dict[str, str]:
    return customer.headers
