"""The webhooks card's deliveries and pause in a real browser (Debian's Chromium, headless): a webhook of the
page's account posts to a real receiver on 127.0.0.1 whose first answer is a 500 with markup in its body;
the page lists the delivery with that answer shown as the characters it is (never run), pauses the webhook
and resumes it, and then shows the delivery made with the receiver's 200.

Its own gateway on a database of its own, with a webhook dispatcher in this process (the page's gateway runs
none, and a dispatcher on the session's database would deliver other tests' leftovers)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from aiohttp import web
from playwright.async_api import BrowserContext, expect

from devnode.node import Devnode
from gateway.app.settings import Settings
from gateway.storage.operator import credit_account
from gateway.webhooks.dispatcher import fixed_delays
from tests.app.conftest import AccountPage, PageWallet, axe_source, open_page, screenshot_dir
from tests.app.test_page import serious
from tests.databases import drop_database, fresh_database
from tests.support import TEST_IP_LIMITS, RunningGateway, serve_gateway, service_key_settings
from tests.webhooks.support import dispatching, eventually

pytestmark = pytest.mark.slow
WAIT_MS = 20_000  # the page polls every 5 s
#: The receiver's first answer: markup that would set window.__answered if the page ran it.
PLANTED = '<img src=x onerror="window.__answered=1"><script>window.__answered=2</script> busy'


@pytest.fixture
async def own_dsn(database_url: str) -> AsyncIterator[str]:
    dsn = await fresh_database(database_url, "page_hooks")
    yield dsn
    await drop_database(dsn)


@pytest.fixture
async def hooks_gateway(
    tmp_path: Path, own_dsn: str, redis_url: str, devnode: Devnode
) -> AsyncIterator[RunningGateway]:
    settings = Settings.model_validate(
        {
            "home": tmp_path,
            **service_key_settings(tmp_path),
            "database_url": own_dsn,
            "redis_url": redis_url,
            "upstream_rpc_url": devnode.rpc_url,
            "ip_limits": TEST_IP_LIMITS,
            "webhook_allow_private": True,  # the receiver is on 127.0.0.1
        }
    )
    async with serve_gateway(settings) as running:
        yield running


class Receiver:
    """Answers the first delivery 500 with :data:`PLANTED`, every later one 200."""

    def __init__(self) -> None:
        self.answers: list[int] = []
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        await request.read()
        status = 500 if not self.answers else 200
        self.answers.append(status)
        return web.Response(status=status, text=PLANTED if status == 500 else "thanks")


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    rec = Receiver()
    app = web.Application()
    app.router.add_post("/hook", rec.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    rec.url = f"http://127.0.0.1:{runner.addresses[0][1]}/hook"
    yield rec
    await runner.cleanup()


async def sign_in_with_a_key(app: AccountPage) -> None:
    await app.page.get_by_role("button", name="Sign in with Test Wallet").click()
    await expect(app.page.locator("#account")).to_be_visible(timeout=WAIT_MS)
    await rotate_key(app)


async def rotate_key(app: AccountPage) -> None:
    """A key (the first one opens the account); each later rotation is an ``api_key.rotated`` event."""
    await app.page.locator("#rotate-key").click()
    await app.page.locator("#confirm-rotate").click()
    await expect(app.page.locator("#api-key")).to_have_value(re.compile(r"^srpc_live_"), timeout=WAIT_MS)
    await app.page.get_by_role("button", name="I have saved it").click()


async def test_a_webhooks_deliveries_with_the_receivers_answer_as_text_pause_and_resume(
    context: BrowserContext, hooks_gateway: RunningGateway, own_dsn: str, receiver: Receiver, tmp_path: Path
) -> None:
    app = await open_page(context, hooks_gateway.url, PageWallet())
    page = app.page
    await sign_in_with_a_key(app)
    pool = await asyncpg.create_pool(own_dsn, min_size=1, max_size=4)
    try:
        await credit_account(pool, app.wallet.address, 1_000, "credits for webhooks", "page-test", 86_400)
        await expect(page.locator("#webhooks")).to_contain_text("No webhook yet", timeout=WAIT_MS)
        await page.locator("#add-webhook").click()
        await page.get_by_label("Receiver URL").fill(receiver.url)
        await page.get_by_label("What it receives").select_option("lifecycle")
        await page.locator("#create-webhook").click()
        await page.get_by_role("button", name="I have saved it").click()
        await rotate_key(app)  # an api_key.rotated event for the new webhook

        async with dispatching(pool, retry=fixed_delays([3600])):  # after the 500, a retry an hour away
            await eventually(lambda: _true(receiver.answers == [500]), "the receiver's 500")
            await page.get_by_role("button", name="Deliveries").click()
            panel = page.locator("#webhook-deliveries")
            row = panel.locator("tbody tr")
            await expect(row).to_have_count(1, timeout=WAIT_MS)
            await expect(row).to_contain_text("api_key.rotated")
            await expect(row.locator("td").nth(1)).to_contain_text(
                re.compile(r"^pending\s*1 attempt, the last .+ UTC; next "), timeout=WAIT_MS
            )
            await expect(row.locator("td").nth(2)).to_contain_text("HTTP 500")
            await expect(row.locator("td").nth(2).locator("code")).to_have_text(PLANTED)  # as text
            assert await page.locator("#webhooks img, #webhooks script").count() == 0
            await page.evaluate(axe_source())  # through DevTools: the page's CSP refuses inline scripts
            for width in (375, 1280):
                await page.set_viewport_size({"width": width, "height": 900})
                assert serious(await page.evaluate("axe.run()")) == [], f"the deliveries shown, {width} px"
                sideways = "document.documentElement.scrollWidth - document.documentElement.clientWidth"
                assert await page.evaluate(sideways) <= 0, f"the page scrolls sideways at {width} px"
                await page.locator("#webhooks").screenshot(
                    path=screenshot_dir(tmp_path) / f"dashboard-webhooks-{width}.png"
                )

            await page.get_by_role("button", name="Pause", exact=True).click()
            await expect(page.locator("#notice")).to_contain_text("paused", timeout=WAIT_MS)
            status = page.locator("#webhooks tbody tr").first.locator("td").nth(3)
            await expect(status).to_contain_text("paused by its owner")
            await page.get_by_role("button", name="Resume", exact=True).click()  # the retry due at once
            await expect(page.locator("#notice")).to_contain_text("resumed", timeout=WAIT_MS)
            await expect(row.locator("td").nth(1)).to_contain_text(
                re.compile(r"^delivered\s*2 attempts; delivered "), timeout=WAIT_MS
            )
            await expect(row.locator("td").nth(2)).to_contain_text("HTTP 200")
            await expect(row.locator("td").nth(2).locator("code")).to_have_text("thanks")
        assert receiver.answers == [500, 200]
        assert await page.evaluate("window.__answered") is None
        assert app.errors == []
    finally:
        await pool.close()


async def _true(value: bool) -> bool:
    return value
