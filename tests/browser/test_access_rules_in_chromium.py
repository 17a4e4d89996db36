"""An account's origin rule in a real browser (docs/api.md, "Access rules"): a page from an origin the
rules leave out is refused, and reads the documented refusal (403, -32030) rather than "Failed to
fetch"; a page from an origin they list calls as before; an ``<img>`` or ``<script>`` on another site's
page, whose GET carries the key in its URL and no ``Origin``, spends nothing (headless Chromium,
``@solana/kit`` and ``fetch`` in the page: tests/browser/conftest.py)."""

from __future__ import annotations

import json
import os

import aiohttp
import asyncpg
import orjson
from playwright.async_api import Page

from gateway.access.rules import ACCESS_DENIED_RPC
from gateway_client import WalletSigner
from tests.auth.helpers import create_account, create_api_key, request, signed
from tests.browser.support import run
from tests.recorded_metrics import recording
from tests.support import RunningGateway

BODY = '{"jsonrpc":"2.0","id":1,"method":"getSlot"}'


async def _key_with_origins(gateway: RunningGateway, db: asyncpg.Connection, origins: list[str]) -> str:
    """A funded account's API key, its access rules allowing ``origins`` only (set with the wallet)."""
    key, _ = await _account_with_origins(gateway, db, origins)
    return key


async def _account_with_origins(gateway: RunningGateway, db: asyncpg.Connection, origins: list[str]) -> tuple[str, str]:
    """A funded account's API key and public key, its access rules allowing ``origins`` only."""
    signer = WalletSigner(os.urandom(32))
    async with aiohttp.ClientSession() as http:
        key = await create_api_key(http, signer, gateway.url)
        await create_account(db, signer.pubkey)
        put = await signed(http, signer, "POST", gateway.url, "/account/access", orjson.dumps({"origins": origins}))
        assert put.status == 200, put
    gateway.app.meter.invalidate(signer.pubkey)
    return key, signer.pubkey


async def test_a_page_from_an_origin_the_rules_leave_out_reads_the_refusal(
    page: Page, gateway: RunningGateway, db: asyncpg.Connection
) -> None:
    key = await _key_with_origins(gateway, db, ["https://app.example.com"])
    init = {"method": "POST", "headers": {"content-type": "application/json", "x-api-key": key}, "body": BODY}
    refused = await run(page, "call", gateway.url + "/", init)
    assert refused["ok"], refused  # not TypeError "Failed to fetch": the answer is readable
    answer = refused["value"]
    assert answer["status"] == 403, answer
    error = json.loads(answer["body"])["error"]
    assert error["code"] == ACCESS_DENIED_RPC and "origin" in error["message"], error
    by_kit = await run(page, "getSlot", gateway.url + "/", key)
    assert not by_kit["ok"] and by_kit["statusCode"] == 403, by_kit  # kit read the status too


async def test_a_page_from_an_origin_the_rules_list_calls_as_before(
    page: Page, gateway: RunningGateway, db: asyncpg.Connection, page_origin: str
) -> None:
    key = await _key_with_origins(gateway, db, [page_origin])
    done = await run(page, "getSlot", gateway.url + "/", key)
    assert done["ok"], done
    assert int(done["value"]) >= 0


#: Adds an element that loads ``src`` to the page and resolves with how it ended ("load" or "error").
EMBED = """([tag, src]) => new Promise((resolve) => {
  const element = document.createElement(tag);
  element.onload = () => resolve("load");
  element.onerror = () => resolve("error");
  element.src = src;
  document.body.append(element);
})"""


async def test_an_img_and_a_script_on_another_site_spend_nothing_with_an_origin_bound_key(
    page: Page, gateway: RunningGateway, db: asyncpg.Connection
) -> None:
    key, pubkey = await _account_with_origins(gateway, db, ["https://app.example.com"])
    tip_floor = f"{gateway.url}/relay/tipFloor?api-key={key}"
    with recording() as recorded:
        # Chromium sends these GETs with Sec-Fetch-Site (same-site: another port of 127.0.0.1) and no Origin
        assert await page.evaluate(EMBED, ["img", tip_floor]) == "error"
        assert await page.evaluate(EMBED, ["script", f"{gateway.url}/relay/getTipAccounts?api-key={key}"]) == "error"
    refused = recorded.counts[("gateway_access_refusals_total", ("origin", "http"))]
    assert refused == 2, recorded.counts  # both reached the gateway and were refused there
    await gateway.app.meter.flush()
    count = "SELECT count(*) FROM usage_history WHERE pubkey = $1"
    assert await db.fetchval(count, pubkey) == 0  # nothing billed
    async with aiohttp.ClientSession() as http:  # a server with the key: no Sec-Fetch-Site, billed as before
        answer = await request(http, "GET", tip_floor)
    assert answer.status == 200, answer
    await gateway.app.meter.flush()
    assert await db.fetchval(count, pubkey) == 1
