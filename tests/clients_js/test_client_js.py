"""The TypeScript client installed from its ``npm pack`` tarball into a clean project (conftest.py), tested
as a user would run it: its Node tests against the gateway with signals, a page on another origin in
Debian's Chromium subscribing to signals with a key and making signed calls, and the example of
``examples/js``. The webhook check is proved against the server's own signing function."""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import os
import subprocess
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import asyncpg
import pytest
from playwright.async_api import BrowserContext
from solders.keypair import Keypair

from devnode.node import Devnode
from gateway.webhooks.rules import signature as server_signature
from tests.auth.helpers import create_account
from tests.browser.conftest import ESBUILD, INDEX, _Quiet, browser, chromium
from tests.chain import airdrop, signed_transfer
from tests.clients_js.conftest import Relay, run_node
from tests.support import RunningGateway

__all__ = ["browser", "chromium"]


async def funded_seed(gateway: RunningGateway, db: asyncpg.Connection) -> bytes:
    """A new wallet's 32-byte secret, its account holding credits (the ledger's own deposit path)."""
    seed = os.urandom(32)
    pubkey = str(Keypair.from_seed(seed).pubkey())
    await create_account(db, pubkey)
    gateway.app.meter.invalidate(pubkey)
    return seed


def webhook_vectors() -> list[dict[str, object]]:
    """Deliveries as the dispatcher signs them (gateway/webhooks/rules.py), one a signal's raw body with
    non-ASCII bytes: the client must hash the bytes received, not a re-encoding."""
    bodies = [
        b'{"event_id":"evt_42_7","type":"api_key.rotated","created_at":1767607200,"webhook_id":42,"data":{}}',
        '{"kind":"newPair","mint":"M\u00e9\u2603","slot":5}'.encode(),
    ]
    vectors = []
    for n, body in enumerate(bodies):
        secret = "whsec_" + base64.urlsafe_b64encode(os.urandom(24)).decode()
        event_id, timestamp = f"evt_42_{n + 7}", 1767607200 + n
        vectors.append(
            {
                "secret": secret,
                "event_id": event_id,
                "timestamp": timestamp,
                "body_b64": base64.b64encode(body).decode(),
                "signature": server_signature(secret, event_id, timestamp, body),
            }
        )
    return vectors


async def test_the_node_tests_of_the_installed_package(
    installed: Path,
    node: Path,
    signal_gateway: RunningGateway,
    db: asyncpg.Connection,
    proxy: tuple[str, str, Relay],
    chain: Devnode,
) -> None:
    relay_url, control_url, relay = proxy
    payer = Keypair()
    await airdrop(chain.rpc_url, payer.pubkey())
    transfer = await signed_transfer(chain.rpc_url, payer, Keypair().pubkey(), 1_000_000)
    env = {
        "GATEWAY_URL": signal_gateway.url,
        "RELAY_URL": relay_url,
        "RELAY_CONTROL": control_url,
        "SEED": (await funded_seed(signal_gateway, db)).hex(),
        "WEBHOOK_VECTORS": json.dumps(webhook_vectors()),
        "TRANSFER": transfer,  # a signed transfer (base64) for sendAndConfirm
    }
    out = await run_node(node, installed, ["--test", "--test-reporter=tap", "client.test.mjs"], env)
    assert "# fail 0" in out and "# pass 13" in out, out
    assert relay.cuts == 1, "the stream's connection was cut once"


async def test_the_example_makes_a_first_call(installed: Path, node: Path, signal_gateway: RunningGateway) -> None:
    env = {"GATEWAY_URL": signal_gateway.url}
    out = await run_node(
        node,
        installed,
        ["--input-type=module", "-e", KEY_SCRIPT],
        {**env, "SEED": os.urandom(32).hex()},
    )
    unfunded_key = out.strip()
    refused = await run_node_expect(node, installed, ["first_call.mjs"], {**env, "GATEWAY_API_KEY": unfunded_key}, 2)
    assert "no credits: send USDC to " in refused, refused  # the 402's terms, typed


KEY_SCRIPT = """
import { createKeyPairSignerFromPrivateKeyBytes } from "@solana/kit";
import { GatewayClient } from "solana-credit-gateway-client";
const signer = await createKeyPairSignerFromPrivateKeyBytes(Uint8Array.from(Buffer.from(process.env.SEED, "hex")));
console.log((await new GatewayClient({ url: process.env.GATEWAY_URL, signer }).createApiKey()).api_key);
"""


async def run_node_expect(node: Path, cwd: Path, args: list[str], env: dict[str, str], code: int) -> str:
    process = await asyncio.create_subprocess_exec(
        str(node), *args, cwd=cwd, env={"PATH": os.environ["PATH"], **env}, stdout=-1, stderr=-2
    )
    async with asyncio.timeout(60):
        out, _ = await process.communicate()
    assert process.returncode == code, out.decode()
    return out.decode()


async def test_the_example_with_credits(
    installed: Path, node: Path, signal_gateway: RunningGateway, db: asyncpg.Connection
) -> None:
    seed = await funded_seed(signal_gateway, db)
    env = {"GATEWAY_URL": signal_gateway.url, "SEED": seed.hex()}
    key = (await run_node(node, installed, ["--input-type=module", "-e", KEY_SCRIPT], env)).strip()
    out = await run_node(node, installed, ["first_call.mjs"], {**env, "GATEWAY_API_KEY": key})
    first = out.splitlines()[0]
    assert first.startswith("slot ") and first.endswith(" credits left"), out
    assert any(line.startswith("signal ") for line in out.splitlines()), out  # the feed makes signals


# -- in Chromium -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client_page(installed: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The page bundled from the installed package (esbuild, for a browser: a Node-only import would fail
    the build), served from an origin of its own."""
    out = tmp_path_factory.mktemp("client-page")
    command = [str(ESBUILD), "page.mjs", "--bundle", "--format=iife", "--platform=browser", "--target=chrome120"]
    subprocess.run([*command, f"--outfile={out / 'bundle.js'}", "--log-level=warning"], cwd=installed, check=True)
    (out / "index.html").write_bytes(INDEX)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(out)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


async def test_a_page_on_another_origin_subscribes_with_a_key_and_signs_its_calls(
    browser: BrowserContext,
    client_page: str,
    signal_gateway: RunningGateway,
    db: asyncpg.Connection,
    node: Path,
    installed: Path,
) -> None:
    seed = await funded_seed(signal_gateway, db)
    env = {"GATEWAY_URL": signal_gateway.url, "SEED": seed.hex()}
    key = (await run_node(node, installed, ["--input-type=module", "-e", KEY_SCRIPT], env)).strip()
    tab = await browser.new_page()
    sockets: list[str] = []
    tab.on("websocket", lambda ws: sockets.append(ws.url))
    try:
        await tab.goto(client_page + "/index.html")
        await tab.wait_for_function("window.app !== undefined")
        streamed = await tab.evaluate("([u, k]) => window.app.signals(u, k, ['newPair'], 2)", [signal_gateway.url, key])
        assert streamed["ok"], streamed
        events = streamed["value"]["events"]
        assert [e["kind"] for e in events] == ["newPair", "newPair"] and streamed["value"]["connects"] == 1
        assert streamed["value"]["subscription"].startswith("sig_sub_")
        assert sockets and all(key not in url and "api-key" not in url for url in sockets), sockets  # no key in a URL
        signed = await tab.evaluate("([u, s]) => window.app.signedCalls(u, s)", [signal_gateway.url, list(seed)])
        assert signed["ok"], signed
        value = signed["value"]
        assert value["slot"] > 0 and value["pubkey"] == value["address"] and value["session"] is None
        assert value["meter"]["creditsRemaining"] > 0 and value["meter"]["rateLimit"]["limit"] > 0  # exposed headers
    finally:
        await tab.close()
