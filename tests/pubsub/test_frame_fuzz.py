"""Fuzzing ``/ws`` frames through the real socket (``websockets`` client, the gateway in this process in
front of the devnode's PubSub): whatever JSON-RPC-shaped or shapeless frames a client sends, each answer is
a small JSON-RPC message, the socket either answers a following ``getSlot`` or was closed with a documented
code (never 1011, the server's own failure), and a new socket of the same account still works afterwards.

Hypothesis runs in a worker thread and hands each example's frames to the test's event loop, which keeps
serving the gateway meanwhile.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from gateway.core.subscriptions import Close, Limits
from tests.sending.helpers import Caller
from tests.support import RunningGateway

GUARD_S = 20.0
#: Close codes a client's frames may earn (docs/api.md, WebSocket): too big, rate or backlog, credits.
DOCUMENTED = {1009, Close.RATE_LIMITED, Close.INSUFFICIENT_CREDITS, Close.POLICY_VIOLATION}
MAX_ANSWER_BYTES = 8 * 1024  # an error message quotes at most a short piece of what it refuses
PROBE_ID = "probe-after-fuzz"

METHODS = [
    "getSlot",
    "getBalance",
    "slotSubscribe",
    "slotUnsubscribe",
    "accountSubscribe",
    "accountUnsubscribe",
    "logsSubscribe",
    "signatureSubscribe",
    "rootSubscribe",
    "subscribeSignal",
    "signalUnsubscribe",
    "blockSubscribe",
]
scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=60)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=20,
)
requests = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "1.0"]), "method": st.sampled_from(METHODS) | st.text(max_size=30)},
    optional={"id": scalars, "params": values},
).map(orjson.dumps)
frames = st.one_of(
    requests.map(bytes.decode),
    st.lists(requests, max_size=5).map(lambda items: b"[" + b",".join(items) + b"]").map(bytes.decode),
    values.map(lambda v: orjson.dumps(v).decode()),
    st.text(max_size=200),
    st.binary(max_size=200),
    st.integers(1, Limits.max_message_bytes // 2).map(lambda n: "[" * n),
)


async def _exchange(url: str, headers: dict[str, str], sent: list[str | bytes]) -> int | None:
    """Send ``sent`` then a ``getSlot``; the close code if the socket was closed, else None once answered."""
    async with connect(url, additional_headers=headers, max_size=None, compression=None) as ws:
        try:
            for frame in sent:
                await ws.send(frame)
            await _probe(ws)
            return None
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd is not None else None


def _probe_answer(raw: str | bytes) -> dict[str, Any] | None:
    """The answer to the probe if ``raw`` holds it; every message is checked to be small JSON-RPC."""
    assert len(raw) <= MAX_ANSWER_BYTES, raw[:200]
    message = orjson.loads(raw)
    items: list[Any] = message if isinstance(message, list) else [message]
    for item in items:
        assert isinstance(item, dict) and item.get("jsonrpc") == "2.0", item
        assert ("result" in item) != ("error" in item) or item.get("method"), item  # answer or notification
    return next((item for item in items if item.get("id") == PROBE_ID), None)


async def _probe(ws: ClientConnection) -> None:
    """``getSlot`` answered; a refusal that names when to retry (a rate limit the fuzz used up, the node
    busy: docs/api.md, Errors) is retried once that time has passed, any other error fails the test."""
    async with asyncio.timeout(GUARD_S):
        while True:
            await ws.send(orjson.dumps({"jsonrpc": "2.0", "id": PROBE_ID, "method": "getSlot"}).decode())
            while (answer := _probe_answer(await ws.recv())) is None:
                pass
            retry_after = (answer.get("error") or {}).get("data", {}).get("retry_after_secs")
            if retry_after is None:
                break
            await asyncio.sleep(retry_after)
    assert "result" in answer, answer


async def test_any_frames_get_small_json_rpc_answers_or_a_documented_close(
    gateway: RunningGateway, caller: Caller
) -> None:
    url = gateway.url.replace("http://", "ws://") + "/ws"
    loop = asyncio.get_running_loop()
    codes: list[int | None] = []

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(sent=st.lists(frames, min_size=1, max_size=4))
    def fuzz(sent: list[str | bytes]) -> None:
        code = asyncio.run_coroutine_threadsafe(_exchange(url, caller.headers, sent), loop).result(GUARD_S * 3)
        assert code is None or code in DOCUMENTED, code
        codes.append(code)

    await asyncio.to_thread(fuzz)
    assert None in codes  # most exchanges end with the probe answered: the fuzz reached the handlers
    async with connect(url, additional_headers=caller.headers) as ws:
        await _probe(ws)  # the account and the replica are fine after it all
