"""A test's side of a Subscribe stream, on the generated client: requests queued, updates read."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from tests.grpc.conftest import GeyserClient

WAIT_S = 20.0  # an upper bound for what should come within a few slots, never a measured time


class Subscription:
    def __init__(
        self,
        geyser: GeyserClient,
        channel: grpc.aio.Channel,
        token: str | None,
        metadata: tuple[tuple[str, str], ...] = (),  # sent besides the token (a proxy's x-forwarded-for)
    ) -> None:
        self.pb2 = geyser.pb2
        metadata = ((("x-token", token),) if token is not None else ()) + metadata
        self.call = geyser.grpc.GeyserStub(channel).Subscribe(metadata=metadata)  # requests are written
        self._ping_ids = iter(range(1, 1_000_000))

    async def send(self, **fields: Any) -> None:
        """One SubscribeRequest (it replaces the stream's filters)."""
        try:
            await self.call.write(self.pb2.SubscribeRequest(**fields))
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
            assert self.call.done()  # refused already: error() reads why

    async def read(self) -> Any:
        update = await asyncio.wait_for(self.call.read(), WAIT_S)
        assert update is not grpc.aio.EOF, "the stream ended without a status"
        return update

    async def until(self, wanted: Callable[[Any], bool]) -> Any:
        """The first update ``wanted`` accepts (the ones before it are skipped)."""
        while True:
            update = await self.read()
            if wanted(update):
                return update

    async def ping(self) -> list[Any]:
        """Ping, wait for the pong (the stream's filters are live once it comes); the updates before it."""
        ping_id = next(self._ping_ids)
        await self.send(ping=self.pb2.SubscribeRequestPing(id=ping_id))
        before: list[Any] = []
        while True:
            update = await self.read()
            if update.WhichOneof("update_oneof") == "pong":
                assert update.pong.id == ping_id
                return before
            before.append(update)

    async def error(self) -> grpc.aio.AioRpcError:
        """Read until the stream ends with an error status (within WAIT_S: the server's pings would keep a
        stream that never ends reading forever); that status."""
        async with asyncio.timeout(WAIT_S):
            while True:
                try:
                    await self.read()
                except grpc.aio.AioRpcError as exc:
                    return exc


async def eventually(condition: Callable[[], Awaitable[bool] | bool], what: str, poll_s: float = 0.02) -> None:
    """Wait until ``condition`` holds (a state the server reaches on its own), failing after ``WAIT_S``."""
    try:
        async with asyncio.timeout(WAIT_S):
            while True:
                result = condition()
                if await result if inspect.isawaitable(result) else result:
                    return
                await asyncio.sleep(poll_s)
    except TimeoutError:
        raise AssertionError(f"never within {WAIT_S} s: {what}") from None


def kind(update: Any) -> str:
    return str(update.WhichOneof("update_oneof"))
