"""A web app in a real browser (issue 50): a page served from another origin than the gateway's calls it
with ``@solana/kit`` in headless Chromium: ``getSlot`` with an API key, a subscription over ``/ws``, a
transfer sent and confirmed; a refusal is read as the documented error, not "Failed to fetch"; an origin
the operator's list leaves out cannot read the answers."""

from __future__ import annotations

import json
from pathlib import Path

from playwright.async_api import Page
from solders.keypair import Keypair

from devnode.node import Devnode
from tests.browser.conftest import browser_settings
from tests.browser.support import run
from tests.chain import airdrop
from tests.support import RunningGateway, serve_gateway

OTHER_SITE = "https://app.example.com"


async def test_get_slot_with_an_api_key(page: Page, gateway: RunningGateway, api_key: str) -> None:
    done = await run(page, "getSlot", gateway.url + "/", api_key)  # X-Api-Key: a preflighted call
    assert done["ok"], done  # before CORS: TypeError "Failed to fetch"
    assert int(done["value"]) >= 0


async def test_a_refusal_is_read_as_documented(page: Page, gateway: RunningGateway) -> None:
    refused = await run(page, "getSlot", gateway.url + "/", "srpc_live_" + "A" * 43)
    assert not refused["ok"] and refused["statusCode"] == 401, refused  # kit read the status
    init = {
        "method": "POST",
        "headers": {"content-type": "application/json"},
        "body": '{"jsonrpc":"2.0","id":1,"method":"getSlot"}',
    }
    anonymous = await run(page, "call", gateway.url + "/rpc", init)
    assert anonymous["ok"], anonymous
    answer = anonymous["value"]
    assert answer["status"] == 402 and "payment-required" in answer["headers"]  # an exposed header
    assert json.loads(answer["body"])["error"]["code"] == -32002  # the deposit terms


async def test_a_subscription_over_ws(page: Page, gateway: RunningGateway, api_key: str) -> None:
    ws_url = gateway.url.replace("http", "ws", 1) + f"/ws?api-key={api_key}"
    done = await run(page, "firstSlot", ws_url, 20_000)
    assert done["ok"], done
    assert int(done["value"]) > 0


async def test_a_transfer_is_sent_and_confirmed(
    page: Page, gateway: RunningGateway, api_key: str, devnode_url: str
) -> None:
    payer = Keypair()
    await airdrop(devnode_url, payer.pubkey(), 2_000_000_000)  # on the chain itself: the gateway denies airdrops
    url = gateway.url + f"/?api-key={api_key}"
    ws_url = gateway.url.replace("http", "ws", 1) + f"/ws?api-key={api_key}"
    done = await run(page, "transfer", url, ws_url, list(bytes(payer)), "1000000")  # signed in the page
    assert done["ok"], done
    assert done["value"]["received"] == "1000000" and len(done["value"]["signature"]) >= 86


async def test_an_origin_the_operator_leaves_out_cannot_read(
    page: Page, tmp_path: Path, database_url: str, redis_url: str, devnode: Devnode, api_key: str
) -> None:
    settings = browser_settings(tmp_path, database_url, redis_url, devnode, cors_allowed_origins=[OTHER_SITE])
    async with serve_gateway(settings, wait_ready=False) as listed_only:
        done = await run(page, "getSlot", listed_only.url + "/", api_key)
    assert not done["ok"] and "Failed to fetch" in done["message"], done  # the browser refused the answer
