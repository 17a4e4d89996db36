"""A ``/ws`` client for tests that watch a socket through faults: a real ``websockets`` connection whose
answers (by request id), notifications (by subscription id, in order) and close are recorded as they come."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

ANSWER_WITHIN_S = 30.0  # an upper bound for an answer, never a measured time


class WsRecorder:
    """One ``/ws`` socket: answers by request id, notifications by subscription id in order, how it closed."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.answers: dict[int, dict[str, Any]] = {}
        self.notes: dict[int | str, list[Any]] = {}
        self.closed: tuple[int | None, str | None] | None = None
        self._ids = iter(range(1, 10**6))
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for raw in self.ws:
                message = orjson.loads(raw)
                if "id" in message:
                    self.answers[message["id"]] = message
                else:  # a notification's result (a subscriptionEnded notice's params)
                    params = message["params"]
                    self.notes.setdefault(params["subscription"], []).append(params.get("result", params))
        except ConnectionClosed:
            pass
        self.closed = (self.ws.close_code, self.ws.close_reason)

    async def ask(self, method: str, params: list[Any]) -> dict[str, Any] | None:
        """The answer, or None when the socket closed first."""
        req_id = next(self._ids)
        await self.ws.send(orjson.dumps({"jsonrpc": "2.0", "id": req_id, "method": method, "params": params}))
        await _until(lambda: req_id in self.answers or self.closed is not None)
        return self.answers.get(req_id)

    async def subscribe(self, method: str, params: list[Any]) -> int | str:
        answer = await self.ask(method, params)
        assert answer is not None and isinstance(answer.get("result"), int | str), (answer, self.closed)
        return answer["result"]  # type: ignore[no-any-return]

    def of(self, sub_id: int | str) -> list[Any]:
        return self.notes.get(sub_id, [])


@asynccontextmanager
async def ws_recorder(base_url: str, key: str) -> AsyncIterator[WsRecorder]:
    """A socket to ``base_url``'s ``/ws`` with the API key ``key`` (as a browser passes it: a subprotocol)."""
    url = base_url.replace("http://", "ws://") + "/ws"
    async with connect(url, subprotocols=[f"auth.{key}", "solana-rpc"]) as ws:  # type: ignore[list-item]
        recorder = WsRecorder(ws)
        try:
            yield recorder
        finally:
            # Closed before the reader stops: every frame the server wrote before its close frame is still
            # read and recorded (a test compares what it was billed with what it received).
            await ws.close()
            try:
                await asyncio.wait_for(recorder._reader, ANSWER_WITHIN_S)
            except TimeoutError:
                recorder._reader.cancel()


async def _until(condition: Callable[[], bool]) -> None:
    deadline = asyncio.get_running_loop().time() + ANSWER_WITHIN_S
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "no answer in time"
        await asyncio.sleep(0.02)
