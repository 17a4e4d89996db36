"""The account page under access rules (issue 63), in Debian's Chromium: with a wallet that offers
``solana:signIn`` the page signs in with a Sign-In With Solana message naming the gateway (an owner session,
which the rules never bind) and drives the webhooks and sessions cards with its token alone; with a wallet
that offers only ``solana:signMessage`` it holds an ordinary session, which the rules refuse on /webhooks,
and has the wallet sign each change instead. Either way an ended session's token is refused and its
open socket closed 1008."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import aiohttp
import pytest
from playwright.async_api import BrowserContext, Page, Route, expect
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from gateway_client import WalletSigner
from tests.app.conftest import AccountPage, PageWallet, axe_source, open_page
from tests.app.test_page import create_key, grant, serious
from tests.support import RunningGateway

pytestmark = pytest.mark.slow
WAIT_MS = 20_000  # the page polls every 5 s
RECEIVER = "http://127.0.0.1:9/hook"
#: A user agent with markup, which the sessions card must show as the characters it is.
PLANTED_AGENT = '<img src=x onerror="window.__planted=1">curl'
# never answers: no delivery is made in these tests anyway


def signer_of(wallet: PageWallet) -> WalletSigner:
    return WalletSigner(bytes(wallet.keypair))


async def call(
    http: aiohttp.ClientSession, method: str, url: str, headers: dict[str, str], body: bytes = b""
) -> tuple[int, Any]:
    async with http.request(method, url, data=body or None, headers=headers) as resp:
        text = await resp.text()
        return resp.status, json.loads(text) if text else None


async def hex_session(http: aiohttp.ClientSession, base: str, wallet: PageWallet, user_agent: str = "page-test") -> str:
    """An ordinary session made the way any client makes one: the hex challenge, signed as text."""
    signer = signer_of(wallet)
    status, challenge = await call(
        http, "POST", f"{base}/auth/challenge", {}, json.dumps({"pubkey": signer.pubkey}).encode()
    )
    assert status == 200, challenge
    text = challenge["challenge"]
    body = {"pubkey": signer.pubkey, "challenge": text, "signature": signer.sign_challenge(text)}
    headers = {"Content-Type": "application/json", "User-Agent": user_agent}
    status, verified = await call(http, "POST", f"{base}/auth/verify", headers, json.dumps(body).encode())
    assert status == 200, verified
    assert verified.get("owner") is False, verified
    return str(verified["token"])


async def session_id(http: aiohttp.ClientSession, base: str, token: str) -> str:
    status, doc = await call(http, "GET", f"{base}/account/sessions", {"Authorization": f"Bearer {token}"})
    assert status == 200, doc
    (mine,) = [s for s in doc["sessions"] if s["current"]]
    return str(mine["id"])


async def webhooks_as_wallet(http: aiohttp.ClientSession, base: str, wallet: PageWallet) -> list[dict[str, Any]]:
    """The account's webhooks as the server has them, read under the wallet's own signature."""
    status, doc = await call(http, "GET", f"{base}/webhooks", signer_of(wallet).headers("GET", "/webhooks"))
    assert status == 200, doc
    return list(doc["webhooks"])


async def refused_on_webhooks(http: aiohttp.ClientSession, base: str, token: str) -> bool:
    """Whether an ordinary session is refused 403 ACCESS_DENIED on GET /webhooks within 2 s (the rules reach
    every replica within a second)."""
    for _ in range(40):
        status, doc = await call(http, "GET", f"{base}/webhooks", {"Authorization": f"Bearer {token}"})
        if status == 403 and doc["error"]["code"] == "ACCESS_DENIED":
            return True
        await asyncio.sleep(0.05)
    return False


async def set_methods(app: AccountPage, methods: str) -> None:
    """The access card's editor: only ``methods`` set (no webhook action allowed), saved signed by the wallet."""
    page = app.page
    await page.locator("#edit-access").click()
    await page.get_by_label("Allowed methods or classes").fill(methods)
    assert await page.locator("input[name=rule-webhook]:checked").count() == 0
    await page.locator("#save-access").click()
    await expect(page.locator("#notice")).to_contain_text("Access rules saved", timeout=WAIT_MS)
    assert app.wallet.signed[-1].decode().startswith("ledger-svc:v2:POST:/account/access:")
    await expect(page.locator("#access")).to_contain_text(methods)
    await expect(page.locator("#access")).to_contain_text("none (only your wallet or an owner session)")


async def open_socket(base: str, token: str, address: str) -> ClientConnection:
    ws = await connect(
        base.replace("http://", "ws://") + "/ws", additional_headers={"Authorization": f"Bearer {token}"}
    )
    await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "getBalance", "params": [address]}))
    answer = json.loads(await asyncio.wait_for(ws.recv(), 10))
    assert "result" in answer, answer  # the rules allow getBalance: the socket works until its session ends
    return ws


async def close_code(ws: ClientConnection) -> int | None:
    with pytest.raises(ConnectionClosed):
        while True:
            await asyncio.wait_for(ws.recv(), 10)
    return ws.close_code


async def add_webhook(page: Page) -> str:
    await page.locator("#add-webhook").click()
    await page.get_by_label("Receiver URL").fill(RECEIVER)
    await page.get_by_label("What it receives").select_option("lifecycle")
    await page.locator("#create-webhook").click()
    await expect(page.locator("#webhook-secret")).to_have_value(re.compile(r".{16,}"), timeout=WAIT_MS)
    created = await page.locator("#notice").text_content()
    found = re.search(r"Webhook (\d+) created", created or "")
    assert found, created
    await page.get_by_role("button", name="I have saved it").click()
    return found.group(1)


async def test_an_owner_session_drives_the_webhooks_and_sessions_cards_under_rules(
    context: BrowserContext, page_gateway: RunningGateway, database_url: str, http: aiohttp.ClientSession
) -> None:
    base = page_gateway.url
    app = await open_page(context, base, PageWallet(), sign_in=True)
    page, wallet = app.page, app.wallet
    async with page.expect_response(lambda r: r.url.endswith("/auth/verify")) as verifying:
        await page.get_by_role("button", name="Sign in with Test Wallet").click()
    verify = await verifying.value
    assert verify.status == 200 and (await verify.json())["owner"] is True
    sent = json.loads(verify.request.post_data or "{}")
    assert set(sent) == {"pubkey", "message", "signature"}, "the page sent the Sign-In With Solana message"
    host = base.removeprefix("http://")
    assert (
        wallet.signed[0]
        .decode()
        .startswith(f"{host} wants you to sign in with your Solana account:\n{wallet.address}\n\n")
    ), "the wallet signed the message it built for this page's host"
    await expect(page.locator("#session-kind")).to_have_text("owner session", timeout=WAIT_MS)

    await create_key(app)
    await grant(database_url, wallet.address, "credits for webhooks and sockets")
    await set_methods(app, "getBalance")
    other = await hex_session(http, base, wallet, user_agent=PLANTED_AGENT)
    assert await refused_on_webhooks(http, base, other), "the rules refuse an ordinary session on /webhooks"
    prompts = len(wallet.signed)

    # The webhooks card, as the owner: every change goes with the owner session's token.
    hooks = page.locator("#webhooks")
    await expect(hooks).to_contain_text("No webhook yet", timeout=WAIT_MS)
    assert await page.locator("#webhooks-refused").count() == 0
    hook = await add_webhook(page)
    row = page.locator("#webhooks tbody tr")
    await expect(row).to_have_count(1, timeout=WAIT_MS)
    await expect(row.locator("td").nth(2)).to_have_text(RECEIVER)
    await page.get_by_role("button", name="Pause", exact=True).click()
    await expect(page.locator("#notice")).to_have_text(
        f"Webhook {hook} paused: its deliveries wait until you resume it.", timeout=WAIT_MS
    )
    await expect(row.locator("td").nth(3)).to_contain_text("paused")
    await page.get_by_role("button", name="Resume", exact=True).click()
    await expect(page.locator("#notice")).to_have_text(f"Webhook {hook} resumed.", timeout=WAIT_MS)
    await expect(row.locator("td").nth(3)).to_have_text("active")
    await page.get_by_role("button", name="New secret").click()
    await expect(page.locator("#webhook-secret")).to_have_value(re.compile(r".{16,}"), timeout=WAIT_MS)
    await page.get_by_role("button", name="I have saved it").click()
    await page.get_by_role("button", name=f"Delete webhook {hook}").click()
    await page.get_by_role("button", name=f"Delete {hook}", exact=True).click()
    await expect(hooks).to_contain_text("No webhook yet", timeout=WAIT_MS)
    assert await webhooks_as_wallet(http, base, wallet) == []

    # The sessions card: this page's owner session and the ordinary one made from Python.
    sessions = page.locator("#sessions tbody tr")
    await expect(sessions).to_have_count(2, timeout=WAIT_MS)
    mine = sessions.filter(has_text="this one")
    await expect(mine).to_contain_text("owner")
    await expect(mine).to_contain_text(base)  # the origin it was made from: this page's
    other_id = await session_id(http, base, other)
    theirs = sessions.filter(has=page.get_by_role("button", name=f"End session {other_id}"))
    await expect(theirs).to_contain_text("ordinary")
    await expect(theirs.locator("td").nth(5)).to_have_text(PLANTED_AGENT)  # what the client sent, as text
    assert await page.locator("#sessions img").count() == 0
    assert await page.evaluate("window.__planted") is None
    socket = await open_socket(base, other, wallet.address)
    try:
        await page.get_by_role("button", name=f"End session {other_id}").click()
        await expect(page.locator("#notice")).to_contain_text(f"Session {other_id} ended", timeout=WAIT_MS)
        assert await close_code(socket) == 1008
    finally:
        await socket.close()
    status, _ = await call(http, "GET", f"{base}/account/info", {"Authorization": f"Bearer {other}"})
    assert status == 401
    await expect(sessions).to_have_count(1, timeout=WAIT_MS)

    # Sign out everywhere: every other session ends; this owner session stays.
    third = await hex_session(http, base, wallet)
    await expect(sessions).to_have_count(2, timeout=WAIT_MS)
    await page.locator("#sign-out-everywhere").click()
    await page.locator("#confirm-everywhere").click()
    await expect(page.locator("#notice")).to_have_text(
        "Signed out everywhere: 1 session ended; this page's owner session stays.", timeout=WAIT_MS
    )
    status, _ = await call(http, "GET", f"{base}/account/info", {"Authorization": f"Bearer {third}"})
    assert status == 401
    token = await app.session_token()
    status, _ = await call(http, "GET", f"{base}/account/info", {"Authorization": f"Bearer {token}"})
    assert status == 200
    await expect(sessions).to_have_count(1, timeout=WAIT_MS)
    assert len(wallet.signed) == prompts, "the owner session's changes asked the wallet for nothing"
    assert app.errors == []


async def test_without_sign_in_each_change_is_signed_by_the_wallet(
    context: BrowserContext, page_gateway: RunningGateway, database_url: str, http: aiohttp.ClientSession
) -> None:
    base = page_gateway.url
    app = await open_page(context, base, PageWallet(), sign_in=False)
    page, wallet = app.page, app.wallet
    await page.get_by_role("button", name="Sign in with Test Wallet").click()
    await expect(page.locator("#account")).to_be_visible(timeout=WAIT_MS)
    assert re.fullmatch(r"[0-9a-f]{64}", wallet.signed[0].decode()), "the hex challenge: an ordinary session"
    await expect(page.locator("#session-kind")).to_contain_text("ordinary session")
    await create_key(app)
    await grant(database_url, wallet.address, "credits for webhooks")
    await set_methods(app, "getBalance")

    def asked(prefix: str) -> None:
        message = wallet.signed[-1].decode()
        assert message.startswith(f"ledger-svc:v2:{prefix}:"), message

    # The rules refuse this session's reads of /webhooks: the card says so, and reads them once signed.
    await expect(page.locator("#webhooks-refused")).to_be_visible(timeout=WAIT_MS)
    await page.evaluate(axe_source())  # through DevTools: the page's CSP refuses inline scripts
    assert serious(await page.evaluate("axe.run()")) == [], "the refused webhooks card"
    before = len(wallet.signed)
    await page.wait_for_timeout(6_000)  # more than a poll: the card asks the wallet for nothing on its own
    assert len(wallet.signed) == before
    await page.locator("#read-webhooks").click()
    await expect(page.locator("#webhooks")).to_contain_text("No webhook yet", timeout=WAIT_MS)
    asked("GET:/webhooks")

    hook = await add_webhook(page)
    asked("POST:/webhooks")
    row = page.locator("#webhooks tbody tr")
    await expect(row).to_have_count(1)
    (server,) = await webhooks_as_wallet(http, base, wallet)
    assert str(server["id"]) == hook and server["url"] == RECEIVER

    await page.get_by_role("button", name="Pause", exact=True).click()
    await expect(page.locator("#notice")).to_contain_text(f"Webhook {hook} paused", timeout=WAIT_MS)
    asked(f"POST:/webhooks/{hook}/pause")
    await expect(row.locator("td").nth(3)).to_contain_text("paused")
    assert (await webhooks_as_wallet(http, base, wallet))[0]["status"] == "paused"
    await page.get_by_role("button", name="Resume", exact=True).click()
    await expect(page.locator("#notice")).to_have_text(f"Webhook {hook} resumed.", timeout=WAIT_MS)
    asked(f"POST:/webhooks/{hook}/resume")
    assert (await webhooks_as_wallet(http, base, wallet))[0]["status"] == "active"
    await page.get_by_role("button", name="New secret").click()
    await expect(page.locator("#webhook-secret")).to_have_value(re.compile(r".{16,}"), timeout=WAIT_MS)
    asked(f"POST:/webhooks/{hook}/rotate-secret")
    await page.get_by_role("button", name="Deliveries").click()  # refused to the session too: read signed, once
    panel = page.locator("#webhook-deliveries")
    await expect(panel).to_contain_text("No delivery yet", timeout=WAIT_MS)
    await expect(panel).to_contain_text("Read under your wallet's signature")
    asked(f"GET:/webhooks/{hook}/deliveries")
    before = len(wallet.signed)
    await page.wait_for_timeout(6_000)  # a poll with the deliveries open: still nothing asked of the wallet
    assert len(wallet.signed) == before
    await expect(panel).to_be_visible()
    assert (await webhooks_as_wallet(http, base, wallet))[0]["secret_rotated_at"] is not None
    await page.get_by_role("button", name="I have saved it").click()
    await page.get_by_role("button", name=f"Delete webhook {hook}").click()
    await page.get_by_role("button", name=f"Delete {hook}", exact=True).click()
    await expect(page.locator("#webhooks")).to_contain_text("No webhook yet", timeout=WAIT_MS)
    asked(f"DELETE:/webhooks/{hook}")
    assert await webhooks_as_wallet(http, base, wallet) == []

    # The rules editor's webhook actions: allowing "list" gives this session its live list back.
    await page.locator("#edit-access").click()
    await page.get_by_role("checkbox", name="list", exact=True).check()
    await page.locator("#save-access").click()
    await expect(page.locator("#notice")).to_contain_text("Access rules saved", timeout=WAIT_MS)
    asked("POST:/account/access")
    status, rules = await call(
        http, "GET", f"{base}/account/access", signer_of(wallet).headers("GET", "/account/access")
    )
    assert status == 200 and rules["webhooks"] == ["list"] and rules["methods"] == ["getBalance"], rules
    await expect(page.locator("#access")).to_contain_text("Webhook actions")
    await expect(page.locator("#webhooks-refused")).to_have_count(0, timeout=WAIT_MS)
    await expect(page.locator("#webhooks")).to_contain_text("No webhook yet")

    # Sessions: ending another one, then every one (this page's too), each signed by the wallet.
    other = await hex_session(http, base, wallet)
    other_id = await session_id(http, base, other)
    sessions = page.locator("#sessions tbody tr")
    await expect(sessions).to_have_count(2, timeout=WAIT_MS)
    await expect(sessions.filter(has_text="this one")).to_contain_text("ordinary")
    socket = await open_socket(base, other, wallet.address)
    try:
        await page.get_by_role("button", name=f"End session {other_id}").click()
        await expect(page.locator("#notice")).to_contain_text(f"Session {other_id} ended", timeout=WAIT_MS)
        asked(f"DELETE:/account/sessions/{other_id}")
        assert await close_code(socket) == 1008
    finally:
        await socket.close()
    token = await app.session_token()
    await page.locator("#sign-out-everywhere").click()
    await page.locator("#confirm-everywhere").click()
    await expect(page.locator("#notice")).to_have_text(
        "Signed out everywhere: 1 session ended, this page's included.", timeout=WAIT_MS
    )
    asked("DELETE:/account/sessions")
    await expect(page.locator("#signin")).to_be_visible()
    status, _ = await call(http, "GET", f"{base}/account/info", {"Authorization": f"Bearer {token}"})
    assert status == 401
    assert app.errors == []


#: The registered test wallet's solana:signIn asked for a message naming another site, as a hostile page would.
SIGN_IN_ELSEWHERE = """async (address) => {
  let wallet = null;
  const detail = { register: (w) => { wallet = w; return () => {}; } };
  window.dispatchEvent(new CustomEvent("wallet-standard:app-ready", { detail }));
  try {
    await wallet.features["solana:signIn"].signIn({ domain: "evil.example", address, nonce: "00" });
    return "signed";
  } catch (err) {
    return err.message;
  }
}"""


async def test_a_sign_in_for_another_host_is_refused_by_the_wallet_and_the_page_signs_in_the_plain_way(
    context: BrowserContext, page_gateway: RunningGateway
) -> None:
    app = await open_page(context, page_gateway.url, PageWallet(), sign_in=True)
    page, wallet = app.page, app.wallet
    refusal = await page.evaluate(SIGN_IN_ELSEWHERE, wallet.address)
    assert refusal.startswith("sign-in refused: evil.example is not this site"), refusal
    assert wallet.signed == []

    # A gateway whose configured host is not the page's (here: its challenge's answer changed on the way):
    # the page does not ask the wallet for a message it would refuse, and signs in with the hex challenge.
    async def elsewhere(route: Route) -> None:
        answer = await route.fetch()
        document = await answer.json()
        document["sign_in"]["domain"] = "gateway.example"
        await route.fulfill(response=answer, json=document)

    await page.route("**/auth/challenge", elsewhere)
    await page.get_by_role("button", name="Sign in with Test Wallet").click()
    await expect(page.locator("#account")).to_be_visible(timeout=WAIT_MS)
    await expect(page.locator("#notice")).to_contain_text("signs sessions in for gateway.example")
    await expect(page.locator("#session-kind")).to_contain_text("ordinary session")
    assert [re.fullmatch(r"[0-9a-f]{64}", m.decode()) is not None for m in wallet.signed] == [True]
    assert app.errors == []
