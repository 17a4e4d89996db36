"""An account's origin rule in a real browser (docs/api.md, "Access rules"): a page from an origin the
rules leave out is refused, and reads the documented refusal (403, -32030) rather than "Failed to
fetch"; a page from an origin they list calls as before (headless Chromium, ``@solana/kit`` and
``fetch`` in the page: tests/browser/conftest.py)."""

from __future__ import annotations

import json
import os

import aiohttp
import asyncpg
import orjson
from playwright.async_api import Page

from gateway.access.rules import ACCESS_DENIED_RPC
from gateway.client import WalletSigner
from tests.auth.helpers import create_account, create_api_key, signed
from tests.browser.support import run
from tests.support import RunningGateway

BODY = '{"jsonrpc":"2.0","id":1,"method":"getSlot"}'


async def _key_with_origins(gateway: RunningGateway, db: asyncpg.Connection, origins: list[str]) -> str:
    """A funded account's API key, its access rules allowing ``origins`` only (set with the wallet)."""
    signer = WalletSigner(os.urandom(32))
    async with aiohttp.ClientSession() as http:
        key = await create_api_key(http, signer, gateway.url)
        await create_account(db, signer.pubkey)
        put = await signed(http, signer, "POST", gateway.url, "/account/access", orjson.dumps({"origins": origins}))
        assert put.status == 200, put
    gateway.app.meter.invalidate(signer.pubkey)
    return key


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
