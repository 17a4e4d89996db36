"""The browser harness: Debian's Chromium (``ops/install-browser``), driven headless by Playwright for
Python, loads a page from another origin (a static server on its own loopback port) whose script is
``@solana/kit`` bundled by esbuild from ``js/package-lock.json``, and calls the gateway the way a web
app does. Nothing is downloaded at run time: no browser, no CDN.

Fixtures: ``gateway`` (one in-process gateway for the module, the real app on a real socket; a test
module wanting other settings overrides it with :func:`browser_settings`),
``api_key`` (a funded account's key), ``bundle`` (the built page directory), ``page_origin`` (the static
server's origin), ``browser`` (one Chromium for the session), ``page`` (a fresh tab on the page, its
script at ``window.gateway``: ``getSlot``, ``firstSlot``, ``transfer``, ``call``, each resolving to
``{ok, value}`` or ``{ok: false, name, message, statusCode}``, see ``js/page.mjs``)."""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import subprocess
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest
from playwright.async_api import BrowserContext, Page, async_playwright

from devnode.node import Devnode
from gateway.app.settings import Settings
from gateway_client import WalletSigner
from tests.auth.helpers import create_account, create_api_key
from tests.sending.conftest import sending_settings
from tests.support import RunningGateway, serve_gateway

JS = Path(__file__).resolve().parent / "js"
ESBUILD = JS / "node_modules" / ".bin" / "esbuild"
CHROMIUM = Path(os.environ.get("GATEWAY_TEST_CHROMIUM", "/usr/bin/chromium"))
#: Headless, and nothing of Chromium's own traffic: on a closed network its background services
#: (updates, sync, safe browsing, QUIC probes) only fill the log with refused connections.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
INDEX = b"""<!doctype html>
<html><head><meta charset="utf-8"><title>a web app</title><script src="bundle.js"></script></head>
<body>a page on another origin than the gateway's</body></html>
"""
#: A page's call that waits for the chain (a transfer's confirmation) is done well within this.
CALL_TIMEOUT_MS = 60_000


def browser_settings(home: Path, database_url: str, redis_url: str, devnode: Devnode, **extra: object) -> Settings:
    """A gateway in front of the devnode, its PubSub and block engine too (``extra``: settings of a test's own)."""
    return sending_settings(home, database_url, redis_url, devnode.rpc_url, upstream_ws_url=devnode.ws_url, **extra)


@pytest.fixture(scope="module")
async def gateway(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, redis_url: str, devnode: Devnode
) -> AsyncIterator[RunningGateway]:
    """The gateway as configured by default (any origin may read its answers)."""
    settings = browser_settings(tmp_path_factory.mktemp("browser-gateway"), database_url, redis_url, devnode)
    async with serve_gateway(settings) as running:
        yield running


@pytest.fixture
async def api_key(gateway: RunningGateway, db: asyncpg.Connection) -> str:
    """A new account's API key, the account holding 10,000 credits."""
    signer = WalletSigner(os.urandom(32))
    async with aiohttp.ClientSession() as http:
        key = await create_api_key(http, signer, gateway.url)
    await create_account(db, signer.pubkey)
    gateway.app.meter.invalidate(signer.pubkey)
    return key


@pytest.fixture(scope="session")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page's directory: ``index.html`` and ``bundle.js`` (js/page.mjs and its packages, one file)."""
    assert ESBUILD.exists(), "the page's packages are not installed: run ./ops/install-browser (make test does)"
    out = tmp_path_factory.mktemp("page")
    command = [str(ESBUILD), "page.mjs", "--bundle", "--format=iife", "--platform=browser", "--target=chrome120"]
    subprocess.run([*command, f"--outfile={out / 'bundle.js'}", "--log-level=warning"], cwd=JS, check=True)
    (out / "index.html").write_bytes(INDEX)
    return out


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="session")
def page_origin(bundle: Path) -> Iterator[str]:
    """A static server for the page on a loopback port of its own: an origin other than the gateway's."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(bundle)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(scope="session")
def chromium() -> Path:
    assert CHROMIUM.exists(), f"no browser at {CHROMIUM}: run ./ops/install-browser (make test does)"
    return CHROMIUM


@pytest.fixture(scope="session")
async def browser(chromium: Path, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BrowserContext]:
    """Chromium, headless, with a fresh profile for the session."""
    profile = tmp_path_factory.mktemp("chromium-profile")
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            str(profile), executable_path=str(chromium), headless=True, args=CHROMIUM_ARGS
        )
        context.set_default_timeout(CALL_TIMEOUT_MS)
        try:
            yield context
        finally:
            await context.close()
    await asyncio.to_thread(shutil.rmtree, profile, ignore_errors=True)


@pytest.fixture
async def page(browser: BrowserContext, page_origin: str) -> AsyncIterator[Page]:
    """A fresh tab on the page, its script loaded."""
    tab = await browser.new_page()
    await tab.goto(page_origin + "/index.html")
    await tab.wait_for_function("window.gateway !== undefined")
    try:
        yield tab
    finally:
        await tab.close()
