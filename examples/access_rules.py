"""Restrict what the API key can do (an access rule) and cap a day's spending, both set with the wallet's own
signature (a leaked key cannot lift them); then see the key refused where the rule says, and lift both again.
docs/api.md, "Access rules" and "Spend cap".

    .venv/bin/gateway fund        # once: the wallet and its API key
    .venv/bin/python examples/access_rules.py
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import aiohttp
import orjson

from gateway_client import WalletSigner, dev_wallet_path, require_dev_api_key

URL = os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000")
WALLET = dev_wallet_path()  # $GATEWAY_WALLET, else $GATEWAY_HOME/wallets/dev-wallet.json
API_KEY = require_dev_api_key()
NO_RULES: dict[str, Any] = {"origins": [], "addresses": [], "methods": [], "rate": None}


async def signed_post(http: aiohttp.ClientSession, signer: WalletSigner, path: str, doc: dict[str, Any]) -> Any:
    """A POST signed by the wallet itself: the only credential that may change rules and caps."""
    body = orjson.dumps(doc)
    headers = {"Content-Type": "application/json", **signer.headers("POST", path, body)}
    async with http.post(f"{URL}{path}", data=body, headers=headers) as resp:
        answer = await resp.json(content_type=None)
        if resp.status != 200:
            raise SystemExit(f"{path}: {resp.status} {answer}")
        return answer


async def call(http: aiohttp.ClientSession, method: str, origin: str | None = None) -> str:
    """A JSON-RPC call with the API key, as a page on ``origin`` (or a script, with no Origin) makes it."""
    headers = {"X-Api-Key": API_KEY, **({"Origin": origin} if origin else {})}
    async with http.post(URL, json={"jsonrpc": "2.0", "id": 1, "method": method}, headers=headers) as resp:
        answer = await resp.json(content_type=None)
    if "result" in answer:
        return f"{resp.status} result {answer['result']}"
    return f"{resp.status} {answer['error']['code']} {answer['error']['message']}"


async def main(signer: WalletSigner) -> None:
    async with aiohttp.ClientSession() as http:
        rules = {**NO_RULES, "origins": ["https://app.example.com"], "methods": ["getSlot"]}
        now = await signed_post(http, signer, "/account/access", rules)
        print(f"rules: origins {now['origins']}, methods {now['methods']}")
        try:
            print(f"getSlot from https://app.example.com: {await call(http, 'getSlot', 'https://app.example.com')}")
            print(f"getSlot from https://elsewhere.example: {await call(http, 'getSlot', 'https://elsewhere.example')}")
            print(f"getBlockHeight (not in the rules): {await call(http, 'getBlockHeight')}")
            cap = await signed_post(http, signer, "/account/spend-cap", {"daily_credits": 1_000})
            print(f"spend cap: {cap['daily_credits']} a day, {cap['remaining_today']} left today")
        finally:  # the dev wallet's key is shared with the other examples: leave it as it was
            await signed_post(http, signer, "/account/access", NO_RULES)
            await signed_post(http, signer, "/account/spend-cap", {"daily_credits": None})
            print("rules and cap lifted")


if __name__ == "__main__":
    asyncio.run(main(WalletSigner.from_file(WALLET)))
