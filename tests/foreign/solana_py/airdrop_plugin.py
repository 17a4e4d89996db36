"""A pytest plugin for solana-py's own integration suite run through the gateway (issue 39): the one
change to its run. The gateway denies ``requestAirdrop`` (docs/api.md), so the suite's airdrops go to
the chain itself (``SOLANA_PY_AIRDROP_URL``, the devnode), as a faucet outside the gateway would; every
other call goes through the gateway. ``worker_id`` stands in for pytest-xdist's, which the suite's
fixtures ask for and this run does not use (one process)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from solana.rpc.async_api import AsyncClient

_gateway_request_airdrop = AsyncClient.request_airdrop


async def _request_airdrop_on_chain(self: AsyncClient, *args: Any, **kwargs: Any) -> Any:
    async with AsyncClient(os.environ["SOLANA_PY_AIRDROP_URL"], commitment=self._commitment) as chain:
        return await _gateway_request_airdrop(chain, *args, **kwargs)


AsyncClient.request_airdrop = _request_airdrop_on_chain  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def worker_id() -> str:
    return "master"
