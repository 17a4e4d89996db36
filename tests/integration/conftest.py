"""Fixtures of the integration tests: one running service for the package and a funded customer.

The service is the package's, not the session's: idle, a stack still takes about a third of a core (322 ms
of CPU a second, its processes summed during a CI run on 2 cores: its actors' probes and polls, Ray's own
timers), which the rest of the session would pay for. Tests that
start stacks of their own are in tests/stacks, so that no two stacks run at once; a test that needs only settings
this stack can take joins it (test_prometheus_scrape.py: Ray's metrics reported every second;
test_solana_py_suite.py: every block kept). A purged block's refund is tested on tests/stacks/edge's stack."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.service import (
    Customer,
    RunningService,
    funded_customer,
    service_env,
    stale_ray_tmpdir,
    start_service,
    stop_service,
)


@pytest.fixture(scope="package")
def service_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("service")


@pytest.fixture(scope="package")
def ray_tmpdir() -> Iterator[Path]:
    """Ray's temp dir for the package's stack: its last-cluster file names a cluster that is gone, which
    ``gateway up`` must not try to join (test_ray_start.py). The machine's own file is never touched."""
    root = stale_ray_tmpdir()
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="package")
def service(service_home: Path, ray_tmpdir: Path) -> Iterator[RunningService]:
    env = service_env(
        service_home,
        RAY_TMPDIR=str(ray_tmpdir),
        RAY_metrics_report_interval_ms="1000",  # Ray's processes report every second (default 10 s): the scrape test
        GATEWAY_DEVNODE_RETENTION_SLOTS="1000000",  # every block kept: solana-py's suite reads blocks 2 to 10
    )
    running = start_service(service_home, env)
    yield running
    if running.process.poll() is None:
        stop_service(running)


@pytest.fixture(scope="package")
def gateway_url(service: RunningService) -> str:
    return service.url


@pytest.fixture(scope="package")
def customer(service: RunningService) -> Customer:
    """A wallet with an API key and 1 USDC of credits bought with a real on-chain deposit."""
    return funded_customer(service)


@pytest.fixture(scope="package")
def rpc_headers(customer: Customer) -> dict[str, str]:
    return customer.headers
