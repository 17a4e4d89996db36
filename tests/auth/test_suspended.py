"""A suspended account (403 ACCOUNT_SUSPENDED) pays for nothing, still reads its account, and resumes."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import aiohttp
import asyncpg
import orjson
from typer.testing import CliRunner
from websockets.asyncio.client import ClientConnection, connect

from devnode.node import Devnode
from gateway.app.settings import Settings
from gateway.cli.main import app as cli_app
from gateway_client import WalletSigner
from tests.auth.helpers import create_account, create_api_key, open_session, request, signed
from tests.pubsub.conftest import new_caller
from tests.pubsub.test_ws import ask, close_code, socket, ws_url
from tests.sending.conftest import sending_settings
from tests.support import serve_gateway, service_key_settings

BODY = b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}'


async def test_suspension_refuses_paid_calls_and_lifts(
    tmp_path: Path, database_url: str, redis_url: str, devnode_url: str, db: asyncpg.Connection
) -> None:
    config = Settings(
        **service_key_settings(tmp_path),
        home=tmp_path,
        database_url=database_url,
        redis_url=redis_url,
        upstream_rpc_url=devnode_url,
    )
    signer = WalletSigner(os.urandom(32))
    async with serve_gateway(config) as gw, aiohttp.ClientSession() as http:
        key = await create_api_key(http, signer, gw.url)
        await create_account(db, signer.pubkey)
        await db.execute("UPDATE accounts SET status = 'suspended' WHERE pubkey = $1", signer.pubkey)
        headers = {"X-Api-Key": key}

        async with http.post(gw.url + "/", data=BODY, headers=headers) as resp:
            doc = await resp.json()
        assert (resp.status, doc["error"]["code"]) == (403, "ACCOUNT_SUSPENDED"), doc
        assert resp.headers["X-Credits-Remaining"] == "10000"  # nothing charged
        async with http.get(gw.url + "/account/info", headers=headers) as resp:
            assert resp.status == 200  # reads stay open

        await db.execute("UPDATE accounts SET status = 'active' WHERE pubkey = $1", signer.pubkey)
        await asyncio.sleep(1.1)  # the replica asks the store again after its 1 s negative cache
        async with http.post(gw.url + "/", data=BODY, headers=headers) as resp:
            assert resp.status == 200, await resp.text()


# -- suspension as a revocation: `gateway account suspend` reaches open sockets and every route ------------


def _cli(env: dict[str, str], *args: str) -> None:
    """``gateway <args>`` as an operator runs it (typer's runner; the command runs its own event loop)."""
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("GATEWAY_")}
    result = CliRunner().invoke(cli_app, list(args), env={**unset, **env})
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)


async def _status(ws: ClientConnection) -> tuple[int | None, str]:
    """Read until the socket closes (at most 10 s a frame: a lease of 30 s must not be what ends it)."""
    code, reason = await close_code(ws)
    return code, reason or ""


async def test_suspend_closes_open_sockets_and_refuses_every_route_then_resume_restores(
    tmp_path: Path, database_url: str, redis_url: str, devnode: Devnode, db: asyncpg.Connection
) -> None:
    settings = sending_settings(tmp_path, database_url, redis_url, devnode.rpc_url, upstream_ws_url=devnode.ws_url)
    env = {"GATEWAY_HOME": str(tmp_path / "cli"), "GATEWAY_DATABASE_URL": database_url, "GATEWAY_REDIS_URL": redis_url}
    async with serve_gateway(settings) as gw, aiohttp.ClientSession() as http:
        caller = await new_caller(http, gw, db, 10_000)
        pubkey, key = caller.signer.pubkey, caller.headers["X-Api-Key"]
        headers = {"X-Api-Key": key}
        wallet = caller.signer.headers("GET", "/ws", b"")
        async with socket(gw, key) as by_key, connect(ws_url(gw), additional_headers=wallet) as by_wallet:
            for ws in (by_key, by_wallet):
                assert isinstance((await ask(ws, "getSlot"))["result"], int)
            status, _, _ = await caller.rpc("getSlot", [])  # a lease of 30 s is taken here
            assert status == 200

            await asyncio.to_thread(_cli, env, "account", "suspend", pubkey, "--reason", "abuse", "--operator", "t")

            for ws in (by_key, by_wallet):  # a key's socket and a wallet's (no revocable credential) alike
                code, reason = await _status(ws)
                assert code == 1008 and "ACCOUNT_SUSPENDED" in reason, (code, reason)
        status, doc, _ = await caller.rpc("getSlot", [])  # not spent from the replica's open lease
        assert (status, doc["error"]["code"]) == (403, "ACCOUNT_SUSPENDED"), doc
        async with socket(gw, key) as again:  # a new socket ends at once
            code, reason = await _status(again)
            assert code == 1008 and "ACCOUNT_SUSPENDED" in reason, (code, reason)
        hook = {"url": "https://example.com/hook", "filter_type": "lifecycle", "lifecycle_events": ["api_key.rotated"]}
        async with http.post(gw.url + "/webhooks", json=hook, headers=headers) as resp:
            assert (resp.status, (await resp.json())["error"]["code"]) == (403, "ACCOUNT_SUSPENDED")
        rotated = await signed(http, caller.signer, "POST", gw.url, "/account/api-key", b"{}")
        assert (rotated.status, rotated.json["error"]["code"]) == (403, "ACCOUNT_SUSPENDED"), rotated
        challenge = await request(http, "POST", gw.url + "/auth/challenge", body=orjson.dumps({"pubkey": pubkey}))
        text = challenge.json["challenge"]
        login = {"pubkey": pubkey, "challenge": text, "signature": caller.signer.sign_challenge(text)}
        verified = await request(http, "POST", gw.url + "/auth/verify", body=orjson.dumps(login))
        assert (verified.status, verified.json["error"]["code"]) == (403, "ACCOUNT_SUSPENDED"), verified
        async with http.get(gw.url + "/account/info", headers=headers) as resp:
            assert resp.status == 200  # reads stay open

        await asyncio.to_thread(_cli, env, "account", "resume", pubkey, "--reason", "cleared", "--operator", "t")
        status, doc, _ = await caller.rpc("getSlot", [])
        assert status == 200, doc
        async with socket(gw, key) as ws:
            assert isinstance((await ask(ws, "getSlot"))["result"], int)
        async with http.post(gw.url + "/webhooks", json=hook, headers=headers) as resp:
            assert resp.status == 201, await resp.text()
        assert await open_session(http, caller.signer, gw.url)
