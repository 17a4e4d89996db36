"""The metered pipeline exactly as the app wires it: real API-key auth, metering, forwarding."""

from __future__ import annotations

import os
from pathlib import Path

import asyncpg
import orjson

from gateway.auth.services import AuthServices
from gateway.auth.stage import AuthStage
from gateway.config import Settings
from gateway.credits.balances import StoreBalanceSource
from gateway.credits.meter import Meter
from gateway.credits.stage import CreditHeaders, MeteringStage
from gateway.forward import Forwarder, ParseStage
from gateway.limits import Limiter
from gateway.methods import PriceTable
from gateway.pipeline import Call, compose, error_boundary
from gateway.storage.connections import Connections
from tests.credits.conftest import fund, new_pubkey
from tests.credits.test_stage import ScriptedNode

GET_SLOT = b'{"jsonrpc":"2.0","id":7,"method":"getSlot"}'


async def test_api_key_call_is_metered_end_to_end(
    tmp_path: Path, database_url: str, redis_url: str, pool: asyncpg.Pool
) -> None:
    settings = Settings.model_validate({"home": tmp_path, "database_url": database_url, "redis_url": redis_url})
    meter = Meter(replicas=settings.ingress_replicas, flush_interval_s=0.05)
    auth = AuthServices(settings, api_key_secret=os.urandom(32), balance_source=StoreBalanceSource(meter))
    metering = MeteringStage(meter, Limiter(50, 32, replicas=settings.ingress_replicas))
    node = ScriptedNode()
    rpc = compose(
        [error_boundary, AuthStage(auth), CreditHeaders(metering), ParseStage(PriceTable.default()), metering],
        Forwarder(node),
    )
    conn = await Connections.open(database_url, redis_url)
    await auth.start(conn)
    assert conn.db is not None
    meter.start(conn.db)
    try:
        pubkey = new_pubkey()
        assert auth.api_keys is not None
        key = await auth.api_keys.rotate(pubkey, None)
        reply = await rpc(Call("POST", "/", {"x-api-key": key}, {}, GET_SLOT, transport="jsonrpc"))
        assert reply.status == 402 and orjson.loads(reply.body)["error"]["code"] == -32010  # an account, no credits
        assert reply.headers["X-Credits-Remaining"] == "0" and reply.headers["X-Credits-Low"] == "true"

        await fund(pool, pubkey, 10)
        meter.invalidate(pubkey)  # what confirm-deposit does on the replica that credited
        reply = await rpc(Call("POST", "/", {"x-api-key": key}, {}, GET_SLOT, transport="jsonrpc"))
        assert reply.status == 200 and orjson.loads(reply.body) == {"jsonrpc": "2.0", "id": 7, "result": 1}
        assert reply.headers["X-Credits-Remaining"] == "9"
        assert {"X-Request-Id", "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"} <= set(reply.headers)
        assert await StoreBalanceSource(meter).balance(pubkey) == 9

        reply = await rpc(
            Call("POST", "/", {}, {}, transport="jsonrpc", body=GET_SLOT)
        )  # no credentials: auth's 402, no metering
        assert reply.status == 402 and "X-Credits-Remaining" not in reply.headers
    finally:
        await meter.stop()
        await auth.stop()
        await conn.close()
    assert node.seen == ["getSlot"]
