"""``subscribeSignal`` on ``/ws``: filters, ids, billing (5 at subscribe, 1 per delivered event) and
the free unsubscribe. Events are written to the gateway's own signal log in the real Redis, the path
the classifier actor writes (its classification is tested in tests/signals), so each test controls
exactly which events exist."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection

from gateway.signals.rules import SignalEvent
from tests.pubsub.test_ws import ask, credits_of, socket
from tests.sending.helpers import Caller
from tests.support import RunningGateway

PUMP = "6EF8rrecthR5Dkzon8Nwu78hRvfCKubJ14M5uBEwF6P"
AMM = "pAMMBay6oceH9fJKBRHGP5D4bD4sWpmSwMn52FMfXEA"


def event(kind: str, slot: int, program: str = PUMP, mint: str | None = None) -> SignalEvent:
    sig = os.urandom(64).hex()[:88]
    return SignalEvent(kind=kind, program=program, signature=sig, slot=slot, mint=mint, accounts=())


async def publish(gateway: RunningGateway, events: list[SignalEvent]) -> None:
    log = gateway.app.signal_log
    assert log is not None
    slot = max((await log.cursor() or 0) + 1, max(e.slot for e in events))
    await log.append_slot(slot, [SignalEvent(**{**e.to_json(), "slot": slot, "accounts": ()}) for e in events])


async def notifications(ws: ClientConnection, count: int) -> list[dict[str, Any]]:
    got = []
    while len(got) < count:
        message = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
        if message.get("method") == "signalNotification":
            got.append(message["params"])
    return got


async def test_filters_ids_and_billing(gateway: RunningGateway, caller: Caller) -> None:
    feed = gateway.app.signal_feed
    assert feed is not None
    await asyncio.wait_for(feed.ready.wait(), 10)
    mint = "So11111111111111111111111111111111111111112"
    before = await credits_of(caller)
    async with socket(gateway, caller.headers["X-Api-Key"]) as ws:
        pairs = (await ask(ws, "subscribeSignal", [{"kinds": ["newPair"]}]))["result"]
        by_mint = (await ask(ws, "subscribeSignal", [{"mint": mint, "programs": [AMM]}], req_id=2))["result"]
        assert pairs == "sig_sub_1" and by_mint == "sig_sub_2"
        await publish(
            gateway,
            [
                event("newPair", 1),  # pairs
                event("largeSwap", 1, mint=mint),  # neither: wrong kind, wrong program
                event("graduation", 1, program=AMM, mint=mint),  # by_mint
                event("newPair", 1, program=AMM, mint=mint),  # both
            ],
        )
        got = await notifications(ws, 4)
        assert sorted((n["subscription"], n["result"]["kind"], n["result"]["program"]) for n in got) == [
            ("sig_sub_1", "newPair", PUMP),
            ("sig_sub_1", "newPair", AMM),
            ("sig_sub_2", "graduation", AMM),
            ("sig_sub_2", "newPair", AMM),
        ]
        assert set(got[0]["result"]) >= {"kind", "program", "signature", "slot", "mint", "accounts"}
        assert (await ask(ws, "signalUnsubscribe", [pairs], req_id=3))["result"] is True
        assert (await ask(ws, "signalUnsubscribe", [pairs], req_id=4))["error"]["code"] == -32602
    # 2 subscriptions at 5, 4 deliveries at 1; the balance read costs 1 more
    assert await credits_of(caller) == before - 10 - 4 - 1


async def test_unknown_kinds_are_invalid_params_and_free(gateway: RunningGateway, caller: Caller) -> None:
    before = await credits_of(caller)
    async with socket(gateway, caller.headers["X-Api-Key"]) as ws:
        answer = await ask(ws, "subscribeSignal", [{"kinds": ["rugPull"]}])
    assert answer["error"]["code"] == -32602 and "rugPull" in answer["error"]["message"]
    assert await credits_of(caller) == before - 1
