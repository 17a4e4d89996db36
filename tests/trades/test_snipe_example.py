"""examples/snipe_and_sell.py, run as a user runs it (its own process, an API key and the wallet file),
against a gateway in front of a devnode whose launch feed is trading: it finds a coin, snipes it, signs
and sends the buy, then sells what it bought."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from tests.support import RunningGateway
from tests.trades.conftest import Trader

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "snipe_and_sell.py"


async def test_the_example_snipes_and_sells(trader: Trader, trade_gateway: RunningGateway, tmp_path: Path) -> None:
    wallet = tmp_path / "wallet.json"
    wallet.write_text(json.dumps(list(bytes(trader.keypair))))
    env = {
        **os.environ,
        "GATEWAY_URL": trade_gateway.url,
        "GATEWAY_API_KEY": trader.caller.headers["X-Api-Key"],
        "GATEWAY_WALLET": str(wallet),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(EXAMPLE), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    output, _ = await asyncio.wait_for(process.communicate(), timeout=120)
    text = output.decode()
    assert process.returncode == 0, text
    for line in ("snipe ", "fee_credits ", "landed: ", "sell ", "net of the transaction fee"):
        assert line in text, text
