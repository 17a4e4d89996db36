"""The account page in a real browser (Debian's Chromium, headless): a person signs in with a Wallet Standard
wallet, sees the balance their deposit bought, spends from Python and sees the history move, rotates the key
(the old one then refused), signs out (the token then refused); markup in a ledger description stays text;
axe-core finds no serious or critical accessibility violation at 375 px and on a desktop."""

from __future__ import annotations

import asyncio
import csv
import io
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import asyncpg
import pytest
from playwright.async_api import BrowserContext, expect

from devnode.node import Devnode
from gateway.storage.operator import credit_account
from tests.app.chain_money import account_status, confirm_deposit, deposit, rpc
from tests.app.conftest import AccountPage, PageWallet, axe_source, jsqr_source, open_page, screenshot, screenshot_dir
from tests.chain import USDC_MINT
from tests.support import RunningGateway

pytestmark = pytest.mark.slow
WAIT_MS = 20_000  # the page polls every 5 s; the gateway flushes usage every second


async def sign_in(app: AccountPage) -> None:
    await app.page.get_by_role("button", name="Sign in with Test Wallet").click()
    await expect(app.page.locator("#account")).to_be_visible(timeout=WAIT_MS)


async def create_key(app: AccountPage) -> str:
    await app.page.locator("#rotate-key").click()
    await app.page.locator("#confirm-rotate").click()
    key = app.page.locator("#api-key")
    await expect(key).to_have_value(re.compile(r"^srpc_live_"), timeout=WAIT_MS)
    value = await key.input_value()
    await app.page.get_by_role("button", name="I have saved it").click()
    return value


async def grant(database_url: str, pubkey: str, reason: str) -> None:
    """1,000 credits through the operator's own path (`gateway account credit --reason ...`), whose reason
    is written into the ledger's description. They expire in a week: a batch in its last day is a
    ``credits.expiring`` event at the next expiry pass (every minute), which a lifecycle webhook created
    meanwhile would also be sent."""
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=1)
    try:
        await credit_account(pool, pubkey, 1_000, reason, "page-test", 7 * 86_400)
    finally:
        await pool.close()


async def test_sign_in_balance_spend_rotate_sign_out(
    account_page: AccountPage,
    page_gateway: RunningGateway,
    devnode: Devnode,
    http: aiohttp.ClientSession,
    tmp_path: Path,
) -> None:
    app, page, base = account_page, account_page.page, page_gateway.url
    await sign_in(app)
    challenge = app.wallet.signed[0].decode()
    assert re.fullmatch(r"[0-9a-f]{64}", challenge), "the wallet signed the /auth challenge as UTF-8 text"
    await expect(page.locator("#balance")).to_contain_text("no account yet")

    first_key = await create_key(app)
    assert app.wallet.signed[-1].decode().startswith("ledger-svc:v2:POST:/account/api-key:")
    assert await account_status(http, base, {"X-Api-Key": first_key}) == 200

    # A real USDC deposit on the devnode, confirmed from Python: the page shows what it bought.
    settings = page_gateway.app.settings
    signature = await deposit(devnode, app.wallet.keypair, settings.deposit_address, 500_000)
    outcome = await confirm_deposit(http, base, first_key, signature)
    bought = outcome["credits_added"]
    assert bought == 50_000
    await expect(page.locator("#balance-value")).to_have_text(re.compile(r"^50,000"), timeout=WAIT_MS)
    await expect(page.locator("#batches")).to_contain_text("50,000")
    await expect(page.locator("#ledger")).to_contain_text("deposit")

    # Spent from Python: the history, the balance and the chart follow without a reload.
    for _ in range(5):
        assert await rpc(http, base, {"X-Api-Key": first_key}) == 200
    await expect(page.locator("#history tbody tr").first).to_contain_text("getSlot", timeout=WAIT_MS)
    await expect(page.locator("#history tbody tr")).to_have_count(5, timeout=WAIT_MS)
    await expect(page.locator("#balance-value")).not_to_have_text(re.compile(r"^50,000"), timeout=WAIT_MS)
    await expect(page.locator("#chart svg rect").first).to_be_attached(timeout=WAIT_MS)
    # the chart and the per-method table from the kept totals (GET /account/usage/daily): today's 5 credits
    today = datetime.now(UTC).date().isoformat()
    await expect(page.locator("#chart svg")).to_have_attribute("aria-label", re.compile(f"{today}: 5 credits$"))
    await expect(page.locator("#chart tbody tr", has_text="getSlot")).to_contain_text("5")
    async with page.expect_download() as started:
        await page.locator("#export-history").click()
    download = await started.value
    assert download.suggested_filename.startswith(f"history-{app.wallet.address[:8]}-")
    rows = list(csv.DictReader(io.StringIO((await download.path()).read_text())))
    assert [(r["method"], r["credits"], r["refunded"]) for r in rows] == [("getSlot", "1", "false")] * 5

    shots = screenshot_dir(tmp_path)
    await screenshot(page, shots / "dashboard-desktop.png", full_page=True)
    await page.set_viewport_size({"width": 375, "height": 800})
    await page.evaluate("window.scrollTo(0, 0)")
    await screenshot(page, shots / "dashboard-375.png", full_page=False)
    await page.set_viewport_size({"width": 1280, "height": 900})

    # The session is the tab's: a reload keeps it, another tab does not have it.
    await page.reload()
    await expect(page.locator("#balance-value")).to_have_text(re.compile(r"^49,995"), timeout=WAIT_MS)
    other = await page.context.new_page()
    await other.goto(f"{base}/app/")
    await expect(other.locator("#signin")).to_be_visible()
    assert await other.evaluate("sessionStorage.getItem('gateway.session')") is None
    assert await other.evaluate("document.cookie") == ""
    await other.close()

    # Rotated in the page under the wallet's signature: the old key is refused, the new one works.
    second_key = await create_key(app)
    assert second_key != first_key
    assert await rpc(http, base, {"X-Api-Key": first_key}) == 401
    assert await rpc(http, base, {"X-Api-Key": second_key}) == 200

    # Signed out: the token the page held is revoked.
    token = await app.session_token()
    assert token is not None
    assert await account_status(http, base, {"Authorization": f"Bearer {token}"}) == 200
    await page.get_by_role("button", name="Sign out", exact=True).click()
    await expect(page.locator("#signin")).to_be_visible()
    assert await app.session_token() is None
    assert await account_status(http, base, {"Authorization": f"Bearer {token}"}) == 401
    assert app.errors == [], "the page logged errors (a CSP refusal shows here)"


async def settled_status(http: aiohttp.ClientSession, base: str, headers: dict[str, str], wanted: int) -> bool:
    """Whether a call answers ``wanted`` within the 1 s docs/api.md gives a change of the rules (2 s here)."""
    for _ in range(40):
        if await rpc(http, base, headers) == wanted:
            return True
        await asyncio.sleep(0.05)
    return False


async def test_an_origin_rule_set_in_the_page_binds_the_key_and_not_the_page(
    account_page: AccountPage, page_gateway: RunningGateway, database_url: str, http: aiohttp.ClientSession
) -> None:
    app, page, base = account_page, account_page.page, page_gateway.url
    await sign_in(app)
    key = {"X-Api-Key": await create_key(app)}
    await grant(database_url, app.wallet.address, "credits to call with")
    await set_origins(app, "https://app.example.com")
    assert app.wallet.signed[-1].decode().startswith("ledger-svc:v2:POST:/account/access:")
    # docs/api.md: every process applies a change within a second (the Redis announcement drops its copy)
    assert await settled_status(http, base, {**key, "Origin": "https://elsewhere.example"}, 403)
    assert await rpc(http, base, {**key, "Origin": "https://app.example.com"}) == 200
    assert await rpc(http, base, key) == 200  # no Origin: not a browser, the rule does not apply
    # The page itself, on the gateway's own origin, keeps reading the account under the rule.
    await expect(page.locator("#history tbody tr").first).to_contain_text("getSlot", timeout=WAIT_MS)

    await set_origins(app, "")
    await expect(page.locator("#access")).to_contain_text("No rule", timeout=WAIT_MS)
    assert await settled_status(http, base, {**key, "Origin": "https://elsewhere.example"}, 200)

    # Under the rule again, the page's own POST with the session token (sign-out) is not refused.
    await set_origins(app, "https://app.example.com")
    assert await settled_status(http, base, {**key, "Origin": "https://elsewhere.example"}, 403)
    token = await app.session_token()
    await page.get_by_role("button", name="Sign out", exact=True).click()
    await expect(page.locator("#notice")).to_have_text("Signed out.")
    assert await account_status(http, base, {"Authorization": f"Bearer {token}"}) == 401
    assert app.errors == []


async def set_origins(app: AccountPage, origins: str) -> None:
    await app.page.locator("#edit-access").click()
    await app.page.get_by_label("Allowed origins").fill(origins)
    await app.page.locator("#save-access").click()
    await expect(app.page.locator("#notice")).to_contain_text("Access rules saved", timeout=WAIT_MS)
    if origins:
        await expect(app.page.locator("#access")).to_contain_text(origins)


async def test_webhooks_created_listed_with_their_deliveries_and_deleted_in_the_page(
    account_page: AccountPage, database_url: str
) -> None:
    app, page = account_page, account_page.page
    await sign_in(app)
    await create_key(app)
    await grant(database_url, app.wallet.address, "credits for webhooks")  # creating one needs a balance
    await expect(page.locator("#webhooks")).to_contain_text("No webhook yet", timeout=WAIT_MS)
    await page.locator("#add-webhook").click()
    planted = "http://127.0.0.1:9/hook?x=<img/src=x/onerror=window.__planted=1>"
    await page.get_by_label("Receiver URL").fill(planted)
    await page.get_by_label("What it receives").select_option("lifecycle")
    await page.locator("#create-webhook").click()
    secret = page.locator("#webhook-secret")
    await expect(secret).to_have_value(re.compile(r".{16,}"), timeout=WAIT_MS)
    row = page.locator("#webhooks tbody tr")
    await expect(row).to_have_count(1)
    await expect(row.locator("td").nth(2)).to_have_text(planted)  # the URL as text, its markup not run
    await expect(row).to_contain_text("api_key.rotated")
    await expect(row).to_contain_text("0 delivered, 0 pending, 0 failed")
    assert await page.locator("#webhooks img").count() == 0
    await page.get_by_role("button", name="I have saved it").click()
    await expect(secret).to_have_count(0)

    # Rotating the key is an api_key.rotated event: its delivery is queued and the list shows it.
    await create_key(app)
    await expect(row).to_contain_text("1 pending", timeout=WAIT_MS)

    await page.get_by_role("button", name=re.compile(r"^Delete webhook ")).click()
    await page.get_by_role("button", name=re.compile(r"^Delete \d+$")).click()
    await expect(page.locator("#webhooks")).to_contain_text("No webhook yet", timeout=WAIT_MS)
    assert await page.evaluate("window.__planted") is None
    assert app.errors == []


#: Reads the deposit card's QR code back: the SVG drawn on a canvas, decoded by jsQR.
DECODE_QR = """async () => {
  const svg = document.querySelector("#deposit-request svg");
  const image = new Image();
  image.src = "data:image/svg+xml;base64," + btoa(new XMLSerializer().serializeToString(svg));
  await image.decode();
  const canvas = document.createElement("canvas");
  canvas.width = canvas.height = 400;
  const context = canvas.getContext("2d");
  context.imageSmoothingEnabled = false;
  context.drawImage(image, 0, 0, 400, 400);
  const found = jsQR(context.getImageData(0, 0, 400, 400).data, 400, 400);
  return found ? found.data : null;
}"""


async def test_a_deposit_by_its_solana_pay_request_then_confirmed_in_the_page(
    account_page: AccountPage, page_gateway: RunningGateway, devnode: Devnode
) -> None:
    app, page = account_page, account_page.page
    await sign_in(app)
    await create_key(app)
    amount = page.locator("#deposit-amount")
    await amount.fill("0.001")
    await expect(page.locator("#deposit-credits")).to_contain_text("at least 0.01 USDC")
    assert await page.locator("#deposit-request svg").count() == 0
    await amount.fill("0.5")
    await expect(page.locator("#deposit-credits")).to_have_text("0.5 USDC buys 50,000 credits, valid 90 days.")

    settings = page_gateway.app.settings
    url = await page.locator("#deposit-url").text_content()
    assert url is not None and url.startswith(f"solana:{settings.deposit_address}?")
    query = parse_qs(urlsplit(url).query)
    assert query["amount"] == ["0.5"] and query["spl-token"] == [str(USDC_MINT)], "USDC named: SOL cannot pay it"
    assert query["message"] == [f"Credits for {app.wallet.address}"]
    assert await page.locator("#deposit-link").get_attribute("href") == url
    await page.evaluate(jsqr_source())
    assert await page.evaluate(DECODE_QR) == url, "the QR code is the request"

    # Paid as a wallet app pays that request (0.5 USDC of the mint to the deposit wallet), then confirmed.
    signature = await deposit(devnode, app.wallet.keypair, settings.deposit_address, 500_000)
    await page.locator("#deposit-signature").fill("not-a-signature")
    await page.locator("#confirm-deposit").click()
    await expect(page.locator("#notice")).to_contain_text("not a transaction signature")
    await page.locator("#deposit-signature").fill(signature)
    await page.locator("#confirm-deposit").click()
    await expect(page.locator("#notice")).to_have_text("Deposit confirmed: 50,000 credits added.", timeout=WAIT_MS)
    await expect(page.locator("#balance-value")).to_have_text(re.compile(r"^50,000"), timeout=WAIT_MS)
    await page.locator("#confirm-deposit").click()
    await expect(page.locator("#notice")).to_have_text("This transfer was already credited.", timeout=WAIT_MS)
    assert app.errors == []


async def test_markup_in_a_ledger_description_is_shown_as_text(account_page: AccountPage, database_url: str) -> None:
    app, page = account_page, account_page.page
    await sign_in(app)
    await create_key(app)  # opens the account
    planted = '<img src=x onerror="window.__planted=1"><b>bold</b>'
    await grant(database_url, app.wallet.address, planted)
    cell = page.locator("#ledger td", has_text="operator credit")
    await expect(cell).to_have_text(f"operator credit: {planted}", timeout=WAIT_MS)
    assert await page.locator("#ledger img, #ledger b").count() == 0
    assert await page.evaluate("window.__planted") is None

    # The CSV export keeps it as the same text, quoted as CSV quotes it.
    async with page.expect_download() as started:
        await page.locator("#export-ledger").click()
    saved = await (await started.value).path()
    rows = list(csv.DictReader(io.StringIO(saved.read_text())))
    assert [r["description"] for r in rows if r["type"] == "adjustment"] == [f"operator credit: {planted}"]
    await expect(page.locator("#notice")).to_contain_text("Ledger:")
    assert app.errors == []


def serious(results: dict[str, Any]) -> list[str]:
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']]}"
        for v in results["violations"]
        if v["impact"] in ("serious", "critical")
    ]


async def test_no_serious_accessibility_violation_at_375_px_and_on_a_desktop(
    context: BrowserContext, page_gateway: RunningGateway, database_url: str
) -> None:
    app = await open_page(context, page_gateway.url, PageWallet())
    page = app.page
    await expect(page.locator("#pricing table")).to_be_attached(timeout=WAIT_MS)
    await page.evaluate(axe_source())  # through DevTools: the page's CSP refuses inline scripts, as it should
    for width in (375, 1280):
        await page.set_viewport_size({"width": width, "height": 800})
        assert serious(await page.evaluate("axe.run()")) == [], f"signed out, {width} px"
    await sign_in(app)
    await create_key(app)
    await grant(database_url, app.wallet.address, "welcome credits")  # so the tables have rows
    await expect(page.locator("#ledger table")).to_be_attached(timeout=WAIT_MS)
    for width in (375, 1280):
        await page.set_viewport_size({"width": width, "height": 800})
        assert serious(await page.evaluate("axe.run()")) == [], f"signed in, {width} px"
        overflow = await page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"the page scrolls sideways at {width} px"
    await page.locator("#edit-access").click()
    await page.locator("#rotate-key").click()  # the key's confirmation and the rules' form open together
    await page.locator("#add-webhook").click()  # and the webhook form
    assert serious(await page.evaluate("axe.run()")) == [], "editing, 1280 px"
