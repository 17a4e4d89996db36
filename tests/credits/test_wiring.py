"""The metered pipeline exactly as the app wires it (``GatewayApp.rpc``): real API-key auth, the
readiness gate, metering and forwarding to the real devnode."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import orjson

from gateway.app.replica import GatewayApp
from gateway.app.settings import Settings
from gateway.pipeline.http import http_call
from gateway.pipeline.stages import ReplyStyle
from tests.credits.helpers import fund, new_pubkey
from tests.support import service_key_settings

GET_SLOT = b'{"jsonrpc":"2.0","id":7,"method":"getSlot"}'


async def test_api_key_call_is_metered_end_to_end(
    tmp_path: Path, database_url: str, redis_url: str, devnode_url: str, pool: asyncpg.Pool
) -> None:
    settings = Settings.model_validate(
        {
            "home": tmp_path,
            **service_key_settings(tmp_path),
            "database_url": database_url,
            "redis_url": redis_url,
            "upstream_rpc_url": devnode_url,
            "credit_flush_interval_s": 0.05,
        }
    )
    gw = GatewayApp(settings)
    await gw.startup()
    try:
        for _ in range(200):
            if gw.ready:
                break
            await asyncio.sleep(0.05)
        pubkey = new_pubkey()
        assert gw.auth.api_keys is not None
        key = await gw.auth.api_keys.rotate(pubkey, None)

        reply = await gw.rpc(http_call("POST", "/", {"x-api-key": key}, GET_SLOT, style=ReplyStyle.JSONRPC))
        assert reply.status == 402 and orjson.loads(reply.body)["error"]["code"] == -32010  # an account, no credits
        assert reply.headers["X-Credits-Remaining"] == "0" and reply.headers["X-Credits-Low"] == "true"

        await fund(pool, pubkey, 10)
        gw.meter.invalidate(pubkey)  # what confirm-deposit does on the replica that credited
        reply = await gw.rpc(http_call("POST", "/", {"x-api-key": key}, GET_SLOT, style=ReplyStyle.JSONRPC))
        answer = orjson.loads(reply.body)
        assert reply.status == 200 and answer["id"] == 7 and isinstance(answer["result"], int), answer
        assert reply.headers["X-Credits-Remaining"] == "9"
        assert {"X-Request-Id", "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"} <= set(reply.headers)
        assert gw.meter.unsettled(pubkey) == 1

        reply = await gw.rpc(http_call("POST", "/", {}, GET_SLOT, style=ReplyStyle.JSONRPC))
        assert reply.status == 402 and "X-Credits-Remaining" not in reply.headers  # auth's 402, no metering
        assert orjson.loads(reply.body)["id"] == 7  # answered as the request it refused
    finally:
        await gw.shutdown()
    assert await pool.fetchval("SELECT balance FROM accounts WHERE pubkey = $1", pubkey) == 9
