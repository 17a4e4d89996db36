"""examples/x402_pay.py, run as a user runs it, against a gateway in this process and the session devnode
(tests/integration/test_first_hour.py runs it against `gateway up` too)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from urllib.parse import urlparse

from devnode.node import Devnode
from tests.x402.helpers import Settle

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "x402_pay.py"


async def test_the_example_pays_settles_confirms_and_calls(x402: Settle, devnode: Devnode, data_home: Path) -> None:
    env = {
        **os.environ,
        "GATEWAY_URL": x402.url,
        "GATEWAY_HOME": str(data_home),  # the session devnode keeps its mint authority in <home>/devnode
        "GATEWAY_DEVNODE_RPC_PORT": str(urlparse(devnode.rpc_url).port),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(EXAMPLE), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    text = out.decode()
    assert process.returncode == 0, text + err.decode()
    for line in (
        "x402 terms: 10000 base units of",
        "settled ",
        "sponsored",
        ": 5000 credits",
        "paid call: slot",
    ):
        assert line in text, text
