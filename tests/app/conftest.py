"""Fixtures of the account page's tests: a gateway in this process (real PostgreSQL, Redis and devnode)
serving the built page at /app/, Debian's Chromium driven headless by Playwright, and a test wallet.

The browser is the system's (/usr/bin/chromium, installed by Debian's package); Playwright downloads none.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
from PIL import Image
from playwright.async_api import Browser, BrowserContext, ConsoleMessage, Page, async_playwright
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair
from solders.message import to_bytes_versioned
from solders.pubkey import Pubkey
from solders.transaction import VersionedTransaction
from spl.token.instructions import create_idempotent_associated_token_account

from devnode.node import Devnode
from gateway.app.settings import Settings
from gateway.runtime.ports import free_port
from gateway.webui.routes import BUILD_DIR
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS  # the browser-apps tests' launch, one list for both
from tests.chain import USDC_MINT, airdrop, send
from tests.support import TEST_IP_LIMITS, RunningGateway, serve_gateway, service_key_settings

WALLET_JS = (Path(__file__).parent / "test_wallet.js").read_text()
AXE_JS = BUILD_DIR.parent / "node_modules" / "axe-core" / "axe.min.js"


@pytest.fixture(scope="session")
def app_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("app-home")


@pytest.fixture(scope="session")
async def page_gateway(
    app_home: Path, database_url: str, redis_url: str, devnode: Devnode
) -> AsyncIterator[RunningGateway]:
    """The gateway serving the page, its deposit wallet's USDC account made (as ``gateway up`` does). Its
    settings name the port it serves on, as ``gateway up``'s do: the Sign-In With Solana message names the
    gateway's own address (its ``host:port``), which a wallet checks against the page's."""
    if not (BUILD_DIR / "index.html").is_file():
        pytest.fail(f"the account page is not built in {BUILD_DIR}: run `make webapp` (make test does)")
    port = free_port()
    settings = Settings.model_validate(
        {
            "home": app_home,
            "port": port,
            **service_key_settings(app_home),
            "database_url": database_url,
            "redis_url": redis_url,
            "upstream_rpc_url": devnode.rpc_url,
            "health_poll_s": 1.0,
            "ip_limits": TEST_IP_LIMITS,
            "webhook_allow_private": True,  # as with the embedded devnode: receivers on 127.0.0.1
        }
    )
    async with serve_gateway(settings, port=port) as running:
        funder = Keypair()
        await airdrop(devnode.rpc_url, funder.pubkey())
        deposit_wallet = Pubkey.from_string(settings.deposit_address)
        async with AsyncClient(devnode.rpc_url) as node:
            await send(
                node, funder, [create_idempotent_associated_token_account(funder.pubkey(), deposit_wallet, USDC_MINT)]
            )
        yield running


@pytest.fixture(scope="session")
def chromium_path() -> str:
    if not CHROMIUM.exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: run ./ops/install-browser (make test does)")
    return str(CHROMIUM)


@pytest.fixture(scope="session")
async def browser(chromium_path: str) -> AsyncIterator[Browser]:
    """Chromium for the module. Playwright's launch gives it a fresh temporary profile (its --user-data-dir),
    removed at close; each test gets a context of its own (no storage shared between tests)."""
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            await browser.close()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    # A kept-alive connection is reused only within 2 s: uvicorn closes one idle for 5 s, and a request sent on
    # it as it closes is reset (aiohttp keeps one 15 s by default; a page step between two calls can take 5 s).
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(keepalive_timeout=2.0)) as session:
        yield session


@dataclass
class PageWallet:
    """The keypair behind the page's test wallet, and every message and transaction the page had it sign."""

    keypair: Keypair = field(default_factory=Keypair)
    signed: list[bytes] = field(default_factory=list)
    transactions: list[VersionedTransaction] = field(default_factory=list)

    @property
    def address(self) -> str:
        return str(self.keypair.pubkey())

    def sign(self, message: list[int]) -> list[int]:
        data = bytes(message)
        self.signed.append(data)
        return list(bytes(self.keypair.sign_message(data)))

    def sign_transaction(self, wire: list[int]) -> list[int]:
        """``solana:signTransaction``: the wallet's signature put in its own slot; the others left as they are."""
        tx = VersionedTransaction.from_bytes(bytes(wire))
        signers = tx.message.account_keys[: tx.message.header.num_required_signatures]
        slot = signers.index(self.keypair.pubkey())  # ValueError (the page's promise rejects): not a signer
        signatures = list(tx.signatures)
        signatures[slot] = self.keypair.sign_message(to_bytes_versioned(tx.message))
        signed = VersionedTransaction.populate(tx.message, signatures)
        self.transactions.append(signed)
        return list(bytes(signed))


@dataclass
class AccountPage:
    page: Page
    wallet: PageWallet
    url: str
    errors: list[str]

    async def session_token(self) -> str | None:
        saved = await self.page.evaluate("sessionStorage.getItem('gateway.session')")
        return None if saved is None else str(json.loads(saved)["token"])


def is_fault(message: ConsoleMessage) -> bool:
    """A console error other than Chromium's line for an HTTP error status: the page reads those answers
    (404 ACCOUNT_NOT_FOUND before the account exists, 401 after sign-out) and says what they mean."""
    return message.type == "error" and not message.text.startswith("Failed to load resource: the server responded")


async def open_page(
    context: BrowserContext, base_url: str, wallet: PageWallet, *, sign_in: bool = False
) -> AccountPage:
    """A page with ``wallet`` registered through the Wallet Standard, at /app/; ``sign_in``: the wallet also
    offers ``solana:signIn`` (Sign In With Solana), as most wallets do now."""
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if is_fault(msg) else None)
    await page.expose_function("__testWalletSign", wallet.sign)
    await page.expose_function("__testWalletSignTransaction", wallet.sign_transaction)
    public_key = list(bytes(wallet.keypair.pubkey()))
    await page.add_init_script(
        f"window.__TEST_WALLET__ = {json.dumps(dict(address=wallet.address, publicKey=public_key, signIn=sign_in))};\n"
        f"{WALLET_JS}"
    )
    await page.goto(f"{base_url}/app/")
    return AccountPage(page, wallet, base_url, errors)


@pytest.fixture
async def context(browser: Browser) -> AsyncIterator[BrowserContext]:
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        yield context
    finally:
        await context.close()


@pytest.fixture
async def account_page(context: BrowserContext, page_gateway: RunningGateway) -> AccountPage:
    """The page, a fresh test wallet registered, not signed in yet."""
    return await open_page(context, page_gateway.url, PageWallet())


JSQR_JS = BUILD_DIR.parent / "node_modules" / "jsqr" / "dist" / "jsQR.js"


def jsqr_source() -> str:
    """jsQR (a QR decoder, webapp/'s locked dev package) defining window.jsQR when evaluated in a page."""
    if not JSQR_JS.is_file():
        pytest.fail(f"jsQR is missing at {JSQR_JS}: run `make webapp` (it installs webapp/'s locked packages)")
    return f"(function () {{ {JSQR_JS.read_text()} }}).call(window)"


def axe_source() -> str:
    if not AXE_JS.is_file():
        pytest.fail(f"axe-core is missing at {AXE_JS}: run `make webapp` (it installs webapp/'s locked packages)")
    return AXE_JS.read_text()


async def screenshot(page: Page, path: Path, *, full_page: bool) -> None:
    """A PNG of the page, reduced to 64 colours (Pillow, which matplotlib brings): small enough for docs/."""
    image = Image.open(io.BytesIO(await page.screenshot(full_page=full_page)))
    image.convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)


def screenshot_dir(tmp_path: Path) -> Path:
    """Where the page's screenshots go: $GATEWAY_SCREENSHOTS (docs/ when refreshing docs/dashboard-*.png), else
    the test's temporary directory, so that a test run never rewrites committed files."""
    chosen = os.environ.get("GATEWAY_SCREENSHOTS")
    return Path(chosen) if chosen else tmp_path
