"""A webhook receiver on your own machine: it gets a signed delivery and verifies it.

The embedded devnode (`make up`) accepts local receivers (http://, loopback and private hosts):
`/capabilities` says so in `service_profile.services.webhook_private_targets`; a real network's
gateway refuses them unless GATEWAY_WEBHOOK_ALLOW_PRIVATE=true. This script

1. listens on http://127.0.0.1 (a free port, or $WEBHOOK_PORT),
2. creates a `lifecycle` webhook of the `api_key.rotated` event posting there (free; the account
   needs a positive balance, which `gateway fund` gave it),
3. causes the event: `POST /account/api-key` issues the wallet a new API key, which revokes the
   previous one (the new key is saved where `gateway fund` keeps it, beside the wallet),
4. receives the delivery, checks `X-Webhook-Signature` with the webhook's secret
   (`gateway_client.webhooks.verify_webhook`), prints the event, then deletes the webhook.

    .venv/bin/gateway fund        # once: the wallet, $GATEWAY_HOME/wallets/dev-wallet.json ($GATEWAY_WALLET: another)
    .venv/bin/python examples/webhook_receiver.py
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from typing import Any

from aiohttp import ClientSession, web

from gateway_client import WalletSigner, api_key_path, dev_wallet_path
from gateway_client.dev_wallet import save_api_key
from gateway_client.webhooks import EVENT_ID_HEADER, verify_webhook

URL = os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000")
WALLET = dev_wallet_path()  # $GATEWAY_WALLET, else $GATEWAY_HOME/wallets/dev-wallet.json
PORT = int(os.environ.get("WEBHOOK_PORT", "0"))  # 0: any free port
WAIT_S = float(os.environ.get("WEBHOOK_WAIT_S", "60"))


class Receiver:
    """Answers each delivery: 200 when its signature checks out, else 401 (the gateway then gives up
    on the event: a 4xx is final). Verified events go to ``events``, once per event id."""

    def __init__(self) -> None:
        self.secret = ""  # known once the webhook is created
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.seen: set[str] = set()

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()  # the raw bytes: the signature covers them, not a re-encoding
        if not verify_webhook(self.secret, request.headers, body):
            print(f"refused a delivery: bad signature ({request.headers.get(EVENT_ID_HEADER)})")
            return web.Response(status=401, text="bad signature")
        event_id = request.headers[EVENT_ID_HEADER]
        if event_id not in self.seen:  # at least once: the same event may arrive twice
            self.seen.add(event_id)
            self.events.put_nowait(json.loads(body))
        return web.Response(text="ok")


async def listen(receiver: Receiver) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_post("/webhook", receiver.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", PORT))
    await web.SockSite(runner, sock).start()
    return runner, f"http://127.0.0.1:{sock.getsockname()[1]}/webhook"


async def call(http: ClientSession, signer: WalletSigner, method: str, path: str, document: Any = None) -> Any:
    """One request signed by the wallet (the webhook routes take any credential mode)."""
    body = b"" if document is None else json.dumps(document).encode()
    headers = {"Content-Type": "application/json", **signer.headers(method, path, body)}
    async with http.request(method, URL + path, data=body or None, headers=headers) as resp:
        answer = await resp.json()
        if resp.status >= 300:
            raise SystemExit(f"{method} {path}: HTTP {resp.status} {answer}")
        return answer


async def main(signer: WalletSigner) -> None:
    receiver = Receiver()
    runner, hook_url = await listen(receiver)
    try:
        async with ClientSession() as http:
            async with http.get(f"{URL}/capabilities") as resp:
                services = (await resp.json())["service_profile"]["services"]
            if not services.get("webhook_private_targets"):
                raise SystemExit(
                    f"{URL} refuses local receivers: start it with GATEWAY_WEBHOOK_ALLOW_PRIVATE=true "
                    "(a development gateway; the embedded devnode's default)"
                )
            request = {"url": hook_url, "filter_type": "lifecycle", "lifecycle_events": ["api_key.rotated"]}
            hook = await call(http, signer, "POST", "/webhooks", request)
            receiver.secret = hook["secret"]  # shown once: keep it where the receiver can read it
            print(f"webhook {hook['id']} posts api_key.rotated to {hook_url}")
            try:
                new_key = (await call(http, signer, "POST", "/account/api-key", {}))["api_key"]  # the event
                _save_key(new_key)
                print(f"new API key {new_key[:14]}… issued (the previous one is revoked)")
                event = await asyncio.wait_for(receiver.events.get(), WAIT_S)
                print(f"received {event['type']} {event['event_id']}: signature verified")
                print(f"data: {json.dumps(event['data'])}")
            finally:
                await call(http, signer, "DELETE", f"/webhooks/{hook['id']}")
                print(f"webhook {hook['id']} deleted")
    finally:
        await runner.cleanup()


def _save_key(key: str) -> None:
    """Where `gateway fund` keeps the wallet's key, so it (and the other examples) use the new one."""
    if api_key_path(WALLET).exists():
        save_api_key(key, WALLET)  # private from the moment it is written


if __name__ == "__main__":
    asyncio.run(main(WalletSigner(bytes(json.loads(WALLET.read_text())))))
